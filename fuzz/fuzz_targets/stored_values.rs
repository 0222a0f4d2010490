//! libFuzzer's driver for `shortlink_properties::stored_values`, where the
//! properties and their documentation live.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shortlink_properties::stored_values::check(data));
