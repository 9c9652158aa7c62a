//! A script of commands run through `Engine::execute` on a virtual clock, with the
//! invariants checked after each (fuzz/src/engine_check.rs describes the input).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferrokv_fuzz::engine_check::run_commands(data);
});
