//! Arbitrary bytes as one AOF file through the command reader, aoftool verify and
//! aoftool fix --salvage (whose output must verify).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(init: {
    // Decode an RDB preamble on this thread: no thread start per input.
    std::env::set_var("FERROKV_THREADS", "1");
}, |data: &[u8]| {
    ferrokv_fuzz::aof_reader::run(data);
});
