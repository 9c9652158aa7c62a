//! Arbitrary bytes as a RESTORE payload (ferrokv_fuzz::engine_check::run_dump): refused,
//! or a value that reads back and survives DUMP and RESTORE unchanged. Never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferrokv_fuzz::engine_check::run_dump(data);
});
