//! libFuzzer's driver for `shortlink_properties::rule_choice`, where the
//! properties and their documentation live.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shortlink_properties::rule_choice::check(data));
