//! Tags, one endpoint a file: they are the details of the links holding
//! them, so each reads (or changes) the links the key may change.
//!
//! | file | what |
//! | --- | --- |
//! | `list.rs` | `GET /tags`: the names |
//! | `stats.rs` | `GET /tags/stats`: links and visits per tag |
//! | `rename.rs` | `PUT /tags`: a tag renamed on every link holding it |
//! | `delete.rs` | `DELETE /tags`: tags removed from every link |

pub mod delete;
pub mod list;
pub mod rename;
pub mod stats;
