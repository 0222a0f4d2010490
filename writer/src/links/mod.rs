//! The links: what a link may hold, how it is stored in Redis, and the
//! operations every interface (API, form, command line) goes through.
//!
//! | file | what |
//! | --- | --- |
//! | `shortener.rs` | the one door: create, read, change, delete, list, purge; `shortener/clicks.rs` its stats, trending and warming |
//! | `error.rs` | what can go wrong with a link, and the code it is told with |
//! | `validate.rs` | the rules a link's fields follow, and their messages |
//! | `store.rs` | the links in Redis, with its scripts (`claim.lua`, `replace.lua`, `index.lua`, and `deadline.lua` before the first two) |
//! | `bulk.rs` | many links at once: rows, CSV, their outcomes |
//! | `export.rs` | the links written out as CSV or JSON lines |
//! | `details.rs` | what the writer keeps of a link beside its value: created, title, tags, crawlable |
//! | `body.rs` | a link as the API and the JSON-lines export show it |
//! | `rules.rs` | a link's rules and split as people give them, checked into the core's `Targeting`, and back |
//!
//! It uses the configuration, the connections to Redis, the purges and the
//! click reader; the HTTP layer and the command line use it.

pub mod body;
pub mod bulk;
pub mod details;
pub mod error;
pub mod export;
pub mod rules;
pub mod shortener;
pub mod store;
pub mod validate;
