//! The writer's connections to the Redis that takes writes now.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, RedisError, RedisResult};
use redis_target::{Locator, Timeouts};

use crate::config::Settings;

/// Connections that acknowledged writes take turns on. `WAIT` blocks its
/// connection until replicas confirm, and every command sent behind it on
/// that connection waits too: one connection would let one acknowledged
/// write through per replication round trip.
const WAIT_LANES: usize = 8;

/// A multiplexed connection to the master that reconnects by itself (and
/// [`WAIT_LANES`] more for writes that wait for replicas), replaced when
/// Sentinels name a new master: requests made after a failover never reach
/// the demoted one.
#[derive(Clone)]
pub struct MasterConnection {
    inner: Arc<Inner>,
}

struct Inner {
    locator: Locator,
    config: ConnectionManagerConfig,
    /// The shared connection, then the wait lanes, made on first use; and
    /// the locator's generation they were made in.
    current: Mutex<Option<(u64, Vec<ConnectionManager>)>>,
    next_lane: AtomicUsize,
}

impl MasterConnection {
    /// Follows the Redis `url` names with the writer's timeouts.
    pub fn open(url: &str, settings: &Settings) -> RedisResult<Self> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout()))
            .set_response_timeout(Some(settings.write_timeout()))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        Self::new(url, settings.redis_timeouts(), config)
    }

    /// Follows the Redis `url` names, without connecting yet.
    pub fn new(
        url: &str,
        timeouts: Timeouts,
        config: ConnectionManagerConfig,
    ) -> RedisResult<Self> {
        let locator = Locator::open(url, timeouts)
            .map_err(|e| RedisError::from((ErrorKind::InvalidClientConfig, "bad Redis URL", e)))?;
        // A command-line run uses it at once: not before the master is known.
        locator.find_master();
        Ok(Self {
            inner: Arc::new(Inner {
                locator,
                config,
                current: Mutex::new(None),
                next_lane: AtomicUsize::new(0),
            }),
        })
    }

    /// The connection every request shares. Cheap: a clone, and new
    /// connections only after a failover.
    pub fn get(&self) -> RedisResult<ConnectionManager> {
        self.connection(0)
    }

    /// A connection for a write that `WAIT`s for replicas, in turn.
    pub fn wait_lane(&self) -> RedisResult<ConnectionManager> {
        let lane = self.inner.next_lane.fetch_add(1, Ordering::Relaxed) % WAIT_LANES;
        self.connection(1 + lane)
    }

    fn connection(&self, index: usize) -> RedisResult<ConnectionManager> {
        let mut current = self
            .inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let generation = self.inner.locator.generation();
        let connections = match &mut *current {
            Some((made_in, connections)) if *made_in == generation => connections,
            stale_or_none => {
                let (first, made_in) = self.new_connection()?;
                &mut stale_or_none.insert((made_in, vec![first])).1
            }
        };
        while connections.len() <= index {
            connections.push(self.new_connection()?.0);
        }
        Ok(connections[index].clone())
    }

    /// A lazy connection to the master as now known, and its generation.
    /// Does no I/O: connects on first use.
    fn new_connection(&self) -> RedisResult<(ConnectionManager, u64)> {
        let (client, generation) = self.inner.locator.master()?;
        let connection =
            ConnectionManager::new_lazy_with_config(client, self.inner.config.clone())?;
        Ok((connection, generation))
    }
}
