//! The writer's way to Redis: connections to the links' master (one
//! server, the master a Sentinel group names, or a Redis Cluster's
//! primaries) that follow a failover, and `SCAN` over every primary.
//!
//! | file | what |
//! | --- | --- |
//! | `master.rs` | the shared connection, its wait lanes, a one-off blocking connection |
//! | `scan.rs` | the names matching a pattern, on one server or every cluster primary |
//!
//! It uses the configuration's settings; the store, the click reader, the
//! purge queue and the rate limit use it.

pub mod master;
pub mod scan;
