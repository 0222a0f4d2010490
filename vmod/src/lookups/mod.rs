//! Link lookups in the links' Redis.

pub mod cluster;
pub mod pool;
