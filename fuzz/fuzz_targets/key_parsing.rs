//! libFuzzer's driver for `shortlink_properties::key_parsing`, where the
//! properties and their documentation live.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shortlink_properties::key_parsing::check(data));
