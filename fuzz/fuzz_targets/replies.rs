//! Arbitrary bytes as a server's replies to `rdbtool restore` (`restore::read_reply`, which
//! also reads HELLO and CLUSTER SLOTS): no panic, no allocation beyond what the bytes
//! announce within the parser's limits, and every reply read consumes input.
#![no_main]

use ferrokv_tools::restore::read_reply;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = data;
    while !r.is_empty() {
        let before = r.len();
        match read_reply(&mut r) {
            Ok(reply) => {
                assert!(r.len() < before, "a reply read nothing");
                let _ = reply.text();
            }
            Err(_) => break,
        }
    }
});
