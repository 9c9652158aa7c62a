//! Arbitrary bytes after a valid magic (REDIS0012, or VALKEY080 when the first input
//! byte is odd), so the fuzzer spends its time in record and value parsing.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferrokv_fuzz::check(&ferrokv_fuzz::with_magic(data));
});
