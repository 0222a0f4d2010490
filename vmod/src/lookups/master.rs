//! One server, or the master Sentinels name: the I/O thread's lookups go
//! onto connections from an r2d2 pool, one in use at a time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::ConnectionLike;
use redis_target::Locator;

use super::{Exchange, Health, Lookup, LookupError, Shared};

/// One Redis connection and whether it may be reused.
pub struct PooledConnection {
    connection: redis::Connection,
    /// Set after a failed or timed-out command: the stream may still carry a
    /// late reply, so the connection must never serve another lookup.
    broken: bool,
    /// The locator's generation when it was opened: one from before a
    /// failover leads to a demoted master.
    generation: u64,
}

/// Opens connections to the master the locator names, with the connect
/// timeout, and arms read and write timeouts on each, so no socket call can
/// block longer than allowed.
struct ConnectionManager {
    locator: Arc<Locator>,
    health: Arc<Health>,
}

impl r2d2::ManageConnection for ConnectionManager {
    type Connection = PooledConnection;
    type Error = redis::RedisError;

    fn connect(&self) -> Result<PooledConnection, redis::RedisError> {
        match self.locator.connect() {
            Ok((connection, generation)) => Ok(PooledConnection {
                connection,
                broken: false,
                generation,
            }),
            Err(error) => {
                self.health.set(false);
                Err(error)
            }
        }
    }

    // Only called if test_on_check_out is on, which it is not: a PING per
    // lookup would double Redis traffic. Broken connections are found from
    // the errors of real commands instead.
    fn is_valid(&self, conn: &mut PooledConnection) -> Result<(), redis::RedisError> {
        redis::cmd("PING").query::<()>(&mut conn.connection)
    }

    fn has_broken(&self, conn: &mut PooledConnection) -> bool {
        conn.broken || !conn.connection.is_open() || conn.is_stale(&self.locator)
    }
}

impl PooledConnection {
    /// Whether the master has changed since this connection was opened.
    fn is_stale(&self, locator: &Locator) -> bool {
        self.generation != locator.generation()
    }
}
/// One server, or the master Sentinels name: connections from an r2d2
/// pool, one in use at a time.
pub(super) struct MasterRoute {
    pool: r2d2::Pool<ConnectionManager>,
    locator: Arc<Locator>,
    connection: Option<r2d2::PooledConnection<ConnectionManager>>,
}
impl MasterRoute {
    /// A route over a pool of up to `size` connections to the master
    /// `locator` names, opened in the background.
    pub(super) fn new(
        locator: &Arc<Locator>,
        health: &Arc<Health>,
        size: u32,
        command_timeout: Duration,
    ) -> Self {
        let manager = ConnectionManager {
            locator: Arc::clone(locator),
            health: Arc::clone(health),
        };
        let pool = r2d2::Pool::builder()
            .max_size(size)
            .min_idle(Some(1))
            .test_on_check_out(false)
            .connection_timeout(command_timeout)
            .error_handler(Box::new(r2d2::NopErrorHandler))
            .build_unchecked(manager);
        Self {
            pool,
            locator: Arc::clone(locator),
            connection: None,
        }
    }
}

/// Sends `batch` as one pipeline and hands out the replies; on failure,
/// hands out nothing and says why. A connection that Redis dropped (it
/// restarted, say) is only noticed when used, so such a failure is retried
/// on a fresh connection while the command timeout lasts.
impl Exchange for MasterRoute {
    fn serve(&mut self, shared: &Shared, batch: &[Arc<Lookup>]) -> Option<LookupError> {
        let retry_until = Instant::now() + shared.command_timeout;
        let mut pipeline = redis::pipe();
        for lookup in batch {
            lookup.pack(&mut pipeline);
        }
        let packed = pipeline.get_packed_pipeline();
        loop {
            let mut conn = if let Some(conn) = self
                .connection
                .take()
                .filter(|conn| !conn.is_stale(&self.locator))
            {
                conn
            } else {
                let wait = retry_until.saturating_duration_since(Instant::now());
                match self.pool.get_timeout(wait) {
                    // An idle connection from before a failover: the pool
                    // drops it, and the next try opens one to the new master.
                    Ok(mut conn) if conn.is_stale(&self.locator) => {
                        conn.broken = true;
                        continue;
                    }
                    Ok(conn) => conn,
                    Err(e) => {
                        return Some(LookupError::Timeout(format!(
                            "no connection within the command timeout of {:?}: {e}",
                            shared.command_timeout
                        )))
                    }
                }
            };
            shared.count_round_trips(1);
            match exchange(&mut conn.connection, &packed, batch.len()) {
                Ok(replies) => {
                    shared.health.set(true);
                    self.connection = Some(conn);
                    for (lookup, reply) in batch.iter().zip(replies) {
                        lookup.fulfil(lookup.read(reply));
                    }
                    return None;
                }
                Err(error) => {
                    // A failed exchange may leave a late reply in the stream.
                    conn.broken = true;
                    if error.is_timeout() {
                        return Some(LookupError::Timeout(format!(
                            "no reply within the command timeout of {:?}: {error}",
                            shared.command_timeout
                        )));
                    }
                    if Instant::now() >= retry_until {
                        return Some(LookupError::Unreachable(error.to_string()));
                    }
                }
            }
        }
    }

    fn forget_connections(&mut self) {
        self.connection = None;
    }
}

/// Writes a packed pipeline and reads its `count` replies, each read bounded
/// by the socket's timeout (the command timeout).
///
/// Not `Pipeline::query`: after a failed read it goes on reading every
/// remaining reply, each waiting the whole timeout again, so a hung Redis
/// would hold a batch of n lookups n times the command timeout.
fn exchange(
    connection: &mut redis::Connection,
    packed: &[u8],
    count: usize,
) -> redis::RedisResult<Vec<redis::Value>> {
    connection.send_packed_command(packed)?;
    (0..count).map(|_| connection.recv_response()).collect()
}
