//! The properties the fuzz targets check, one module a target, each with a
//! `check(data)` that panics when an input breaks one of them.
//!
//! `fuzz/` drives each `check` with libFuzzer (`make faults`,
//! `scripts/fuzz.sh`); `tests/seeds.rs` replays every input kept in
//! `fuzz/seeds/<target>/` through the same `check` in `cargo test`, so an
//! input that once broke a property is tried again on every `make test`
//! without the fuzzer's instrumented build. A typed target decodes its
//! bytes with [`decode`], as libFuzzer's targets do, so a seed means the
//! same input to both.

pub mod key_parsing;
pub mod rule_choice;
pub mod stored_values;
pub mod url_validation;
pub mod vcl_generator;

use arbitrary::{Arbitrary, Unstructured};

/// What a target checks one input with: it panics when the input breaks a
/// property.
pub type Check = fn(&[u8]);

/// Every target: its module's name, the name of its directory of seeds and
/// of its cargo-fuzz binary.
pub const TARGETS: [(&str, Check); 5] = [
    ("key_parsing", key_parsing::check),
    ("rule_choice", rule_choice::check),
    ("stored_values", stored_values::check),
    ("url_validation", url_validation::check),
    ("vcl_generator", vcl_generator::check),
];

/// `data` as a `T`, decoded as `libfuzzer_sys::fuzz_target!` decodes a typed
/// target's input (`Arbitrary::arbitrary_take_rest`), or `None` for bytes
/// that are no `T`: such an input checks nothing.
pub(crate) fn decode<'a, T: Arbitrary<'a>>(data: &'a [u8]) -> Option<T> {
    T::arbitrary_take_rest(Unstructured::new(data)).ok()
}
