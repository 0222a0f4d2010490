//! Holds no code: its `Cargo.toml` turns on, for every build, the
//! dependency features the test suites' dev-dependencies turn on, so that
//! `cargo build --workspace` and `cargo test --workspace` share every
//! compiled dependency.
