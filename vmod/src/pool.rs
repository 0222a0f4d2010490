//! Redis connections for lookups: a small r2d2 pool whose every wait is
//! bounded, so that a slow or absent Redis costs a Varnish worker at most the
//! command timeout.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::ConnectionLike;
use shortlink_keys::Slot;

/// One Redis connection and whether it may be reused.
pub struct PooledConnection {
    connection: redis::Connection,
    /// Set after a failed or timed-out command: the stream may still carry a
    /// late reply, so the connection must never serve another lookup.
    broken: bool,
}

/// Opens connections with the connect timeout and arms read and write
/// timeouts on each, so no socket call can block longer than allowed.
struct ConnectionManager {
    client: redis::Client,
    connect_timeout: Duration,
    command_timeout: Duration,
    health: Arc<Health>,
}

impl r2d2::ManageConnection for ConnectionManager {
    type Connection = PooledConnection;
    type Error = redis::RedisError;

    fn connect(&self) -> Result<PooledConnection, redis::RedisError> {
        let result = self
            .client
            .get_connection_with_timeout(self.connect_timeout)
            .and_then(|connection| {
                connection.set_read_timeout(Some(self.command_timeout))?;
                connection.set_write_timeout(Some(self.command_timeout))?;
                Ok(connection)
            });
        match result {
            Ok(connection) => Ok(PooledConnection {
                connection,
                broken: false,
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
        conn.broken || !conn.connection.is_open()
    }
}

/// Whether Redis answered the last time anyone asked, and since when.
/// Feeds the backend's `healthy()` so VCL can stretch grace while Redis is away.
#[derive(Debug)]
pub struct Health {
    healthy: AtomicBool,
    changed_ms: AtomicU64,
}

impl Health {
    fn new() -> Self {
        Self {
            // Optimistic until proven otherwise: a VCL loaded while Redis is
            // down should still try Redis on the first request.
            healthy: AtomicBool::new(true),
            changed_ms: AtomicU64::new(now_ms()),
        }
    }

    pub fn set(&self, healthy: bool) {
        if self.healthy.swap(healthy, Ordering::Relaxed) != healthy {
            self.changed_ms.store(now_ms(), Ordering::Relaxed);
        }
    }

    pub fn get(&self) -> (bool, SystemTime) {
        let changed = UNIX_EPOCH + Duration::from_millis(self.changed_ms.load(Ordering::Relaxed));
        (self.healthy.load(Ordering::Relaxed), changed)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Why a lookup got no answer from Redis.
#[derive(Debug)]
pub enum LookupError {
    /// No answer within the command timeout (or no free connection in time).
    Timeout(String),
    /// Redis refused or dropped the connection.
    Unreachable(String),
    /// Redis answered with an error, such as `WRONGTYPE` for a hash name
    /// that holds something else.
    Answer(String),
}

impl LookupError {
    /// Whether the error says Redis itself is away, rather than one bad answer.
    pub fn means_unhealthy(&self) -> bool {
        !matches!(self, Self::Answer(_))
    }
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout(detail) => write!(f, "Redis did not answer in time: {detail}"),
            Self::Unreachable(detail) => write!(f, "Redis is unreachable: {detail}"),
            Self::Answer(detail) => write!(f, "Redis answered with an error: {detail}"),
        }
    }
}

/// Settings of a [`RedisPool`].
pub struct PoolSettings<'a> {
    pub url: &'a str,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    pub size: u32,
}

pub struct RedisPool {
    pool: r2d2::Pool<ConnectionManager>,
    command_timeout: Duration,
    health: Arc<Health>,
}

impl RedisPool {
    /// Builds the pool without waiting for Redis: connections are opened in
    /// the background, so a VCL loads even while Redis is down.
    pub fn new(settings: &PoolSettings<'_>) -> Result<Self, String> {
        let client = redis::Client::open(settings.url)
            .map_err(|e| format!("invalid Redis URL {:?}: {e}", settings.url))?;
        let health = Arc::new(Health::new());
        let manager = ConnectionManager {
            client,
            connect_timeout: settings.connect_timeout,
            command_timeout: settings.command_timeout,
            health: Arc::clone(&health),
        };
        let pool = r2d2::Pool::builder()
            .max_size(settings.size)
            .min_idle(Some(settings.size.min(4)))
            .test_on_check_out(false)
            .connection_timeout(settings.command_timeout)
            .error_handler(Box::new(r2d2::NopErrorHandler))
            .build_unchecked(manager);
        Ok(Self {
            pool,
            command_timeout: settings.command_timeout,
            health,
        })
    }

    pub fn health(&self) -> &Health {
        &self.health
    }

    /// `HGET hash field` within one command timeout, checkout included.
    ///
    /// A connection that Redis dropped (it restarted, say) is only noticed
    /// when used, so such a failure is retried on another connection while
    /// time remains; the pool replaces the dead ones as it goes.
    pub fn hget(&self, slot: &Slot<'_>) -> Result<Option<Vec<u8>>, LookupError> {
        let deadline = Instant::now() + self.command_timeout;
        let mut attempts_left = self.pool.max_size().saturating_add(1);
        let result = loop {
            attempts_left -= 1;
            match self.hget_before(slot, deadline) {
                Err(LookupError::Unreachable(_))
                    if attempts_left > 0 && Instant::now() < deadline => {}
                other => break other,
            }
        };
        match &result {
            Err(error) if error.means_unhealthy() => self.health.set(false),
            _ => self.health.set(true),
        }
        result
    }

    fn hget_before(
        &self,
        slot: &Slot<'_>,
        deadline: Instant,
    ) -> Result<Option<Vec<u8>>, LookupError> {
        let wait = deadline.saturating_duration_since(Instant::now());
        let mut conn = self.pool.get_timeout(wait).map_err(|e| {
            LookupError::Timeout(format!(
                "no connection within the command timeout of {:?}: {e}",
                self.command_timeout
            ))
        })?;
        // Whatever the checkout used up comes off the command's budget.
        let remaining = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let result = conn
            .connection
            .set_read_timeout(Some(remaining))
            .and_then(|()| {
                redis::cmd("HGET")
                    .arg(&slot.hash)
                    .arg(slot.field)
                    .query::<Option<Vec<u8>>>(&mut conn.connection)
            });
        result.map_err(|error| {
            if error.is_timeout() {
                conn.broken = true;
                LookupError::Timeout(error.to_string())
            } else if error.is_io_error()
                || error.is_connection_dropped()
                || error.is_connection_refusal()
                || error.is_unrecoverable_error()
            {
                conn.broken = true;
                LookupError::Unreachable(error.to_string())
            } else {
                LookupError::Answer(error.to_string())
            }
        })
    }
}
