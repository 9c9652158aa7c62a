//! Arbitrary bytes as one AOF file replayed by the loader (an RDB preamble, then RESP
//! commands), as a manifest, and through the AOF reader and aoftool's verify and salvage.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(init: {
    // Decode an RDB preamble on this thread: no thread start per input.
    std::env::set_var("FERROKV_THREADS", "1");
}, |data: &[u8]| {
    ferrokv_fuzz::engine_check::run_aof(data);
    ferrokv_fuzz::aof_reader::run(data);
});
