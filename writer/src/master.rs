//! The writer's connection to the Redis that takes writes now.

use std::sync::{Arc, Mutex, PoisonError};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, RedisError, RedisResult};
use redis_target::{Address, Locator, Target, Timeouts};

/// One multiplexed connection to the master that reconnects by itself,
/// and is replaced when Sentinels name a new master: requests made after a
/// failover never reach the demoted one.
#[derive(Clone)]
pub struct MasterConnection {
    inner: Arc<Inner>,
}

struct Inner {
    locator: Locator,
    config: ConnectionManagerConfig,
    /// The connection, and the locator's generation it was made in.
    current: Mutex<Option<(u64, ConnectionManager)>>,
}

impl MasterConnection {
    /// Follows the Redis `url` names, without connecting yet.
    pub fn new(
        url: &str,
        timeouts: Timeouts,
        config: ConnectionManagerConfig,
    ) -> RedisResult<Self> {
        let target: Target = url.parse().map_err(|e: redis_target::TargetError| {
            RedisError::from((
                ErrorKind::InvalidClientConfig,
                "bad Redis URL",
                e.to_string(),
            ))
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                locator: Locator::start(target, timeouts)?,
                config,
                current: Mutex::new(None),
            }),
        })
    }

    /// The connection to the master as now known. Cheap: a clone, and a new
    /// connection only after a failover.
    pub fn get(&self) -> RedisResult<ConnectionManager> {
        let mut current = self
            .inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let generation = self.inner.locator.generation();
        if let Some((made_in, connection)) = &*current {
            if *made_in == generation {
                return Ok(connection.clone());
            }
        }
        let (client, generation) = self.inner.locator.master()?;
        let connection =
            ConnectionManager::new_lazy_with_config(client, self.inner.config.clone())?;
        *current = Some((generation, connection.clone()));
        Ok(connection)
    }

    /// Where Sentinels say the master is (`None` for one server).
    pub fn master_address(&self) -> Option<Address> {
        self.inner.locator.master_address()
    }
}
