//! A short URL's redirect rules in Shlink's shape, over the links area's
//! rules: each Shlink rule is one of this project's rules, its conditions
//! all holding at once.
//!
//! | file | what |
//! | --- | --- |
//! | `conditions.rs` | Shlink's conditions to this project's rules, and back |
//! | `get.rs` | `GET /short-urls/{shortCode}/redirect-rules` |
//! | `set.rs` | `POST` (or `PATCH`) `/short-urls/{shortCode}/redirect-rules` |

pub mod conditions;
pub mod get;
pub mod set;
