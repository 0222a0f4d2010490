//! The one configuration both sides run from: the writer reads it, and the
//! VCL it generates carries the same prefix, split, paths, status and TTLs
//! into Varnish. `shortlink.example.toml` documents every field.
//!
//! | file | what |
//! | --- | --- |
//! | `file.rs` | the file: its sections, their defaults, the tokens, the purge secret |
//! | `settings.rs` | the settings: the file checked, and the values derived from it |
//! | `checks.rs` | the checks each section passes |
//! | `domains.rs` | the short domains, `[[domains]]` checked into [`Domain`]s |
//!
//! Every other area reads the configuration through [`Settings`]; the
//! configuration uses none of them.

use std::fmt;

mod checks;
mod domains;
mod file;
mod settings;
#[cfg(test)]
mod tests;

pub use checks::parse_acl_entry;
pub use domains::{Domain, DomainConfig};
pub use file::{
    AccessConfig, AccessToken, ClicksConfig, Config, PurgeSecret, RateLimitConfig, RedirectConfig,
    RedisConfig, TitlesConfig, VarnishConfig, MIN_TOKEN_LEN, TOKENS_ENV,
};
pub use settings::{Settings, UnknownDomain};

/// A configuration that failed to load, with what to fix.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}
