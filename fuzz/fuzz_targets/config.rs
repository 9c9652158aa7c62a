//! Arbitrary text as a configuration file, then as CONFIG SET pairs: an error naming the
//! line, or a configuration whose every parameter reads back; never a panic.
#![no_main]

use ferrokv_server::config::ServerConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut cfg = ServerConfig::default();
    let mut saw_save = false;
    if let Err(e) = cfg.load_text(&text, &mut saw_save) {
        assert!(e.starts_with("Reading the configuration file, at line "), "{e}");
    }
    for name in ServerConfig::names() {
        let _ = cfg.get(name);
    }
    // The same words as CONFIG SET name value pairs.
    let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    for pair in words.chunks(2) {
        if let [name, value] = pair {
            if ServerConfig::knows(name) && !ServerConfig::is_immutable(name) && name != "dir" {
                let _ = cfg.set(name, std::slice::from_ref(value));
            }
        }
    }
});
