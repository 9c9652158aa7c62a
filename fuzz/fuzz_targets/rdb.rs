//! Arbitrary bytes as a whole RDB file: header checks included.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferrokv_fuzz::check(data);
});
