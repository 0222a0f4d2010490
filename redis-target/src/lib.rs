//! Where Redis is, in one URL form for the VMOD and the writer alike, and
//! connections that follow it: `redis://` names one server,
//! `redis+sentinel://` a master that Sentinels watch and replace,
//! `redis+cluster://` a Redis Cluster.

pub mod cluster;
mod locator;
mod target;

pub use crate::locator::{Locator, Timeouts, POLL_INTERVAL};
pub use crate::target::{
    names_a_cluster, Address, ClusterTarget, SentinelTarget, Target, TargetError, REDIS_PORT,
    SENTINEL_PORT,
};
