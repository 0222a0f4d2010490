//! libFuzzer's driver for `shortlink_properties::url_validation`, where the
//! properties and their documentation live.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shortlink_properties::url_validation::check(data));
