//! Redis lookups for Varnish workers: pipelined by one I/O thread onto
//! connections from an r2d2 pool, or, for a Redis Cluster, onto one
//! connection per node (see `cluster`).
//!
//! A lookup fails only when Redis fails it: no reply within the command
//! timeout of the round trip carrying it being sent, no connection within
//! the command timeout, or an error from Redis. Time a lookup spends waiting
//! for CPU (hundreds of fetch threads on two cores, say) never turns into an
//! error about the link store: Varnish is slow then, not Redis.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::ConnectionLike;
use redis_target::{Locator, Target, Timeouts};
use shortlink_core::Slot;

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

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Why a lookup got no answer from Redis.
#[derive(Debug, Clone)]
pub enum LookupError {
    /// No reply within the command timeout of being sent (or no connection
    /// within the command timeout).
    Timeout(String),
    /// Redis refused or dropped the connection.
    Unreachable(String),
    /// Redis answered with an error, such as `WRONGTYPE` for a hash name
    /// that holds something else.
    Answer(String),
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

pub(crate) type Outcome = Result<Option<Vec<u8>>, LookupError>;

/// One lookup on its way: filled in by the I/O thread, awaited by a worker.
pub(crate) struct Lookup {
    pub(crate) hash: String,
    pub(crate) field: String,
    outcome: Mutex<Option<Outcome>>,
    ready: Condvar,
}

impl Lookup {
    pub(crate) fn fulfil(&self, outcome: Outcome) {
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
        self.ready.notify_one();
    }
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Arc<Lookup>>,
    stopping: bool,
}

/// What the workers and the I/O thread share.
pub(crate) struct Shared {
    pub(crate) health: Arc<Health>,
    command_timeout: Duration,
    queue: Mutex<Queue>,
    wake: Condvar,
    round_trips: AtomicU64,
}

impl Shared {
    pub(crate) fn count_round_trips(&self, count: usize) {
        self.round_trips
            .fetch_add(u64::try_from(count).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// How the I/O thread gets a batch of lookups answered.
pub(crate) trait Exchange: Send {
    /// Sends `batch` and hands each lookup its reply; on a failure that
    /// answers none of them, says why instead (and hands out nothing).
    fn serve(&mut self, shared: &Shared, batch: &[Arc<Lookup>]) -> Option<LookupError>;

    /// Drops every connection in use: after a panic, its stream may have
    /// stopped halfway through an exchange.
    fn forget_connections(&mut self);
}

/// One server, or the master Sentinels name: connections from an r2d2
/// pool, one in use at a time.
struct MasterRoute {
    pool: r2d2::Pool<ConnectionManager>,
    locator: Arc<Locator>,
    connection: Option<r2d2::PooledConnection<ConnectionManager>>,
}

/// Lookups for Varnish workers, pipelined onto pooled connections.
///
/// A worker queues its `HGET` and waits for the I/O thread's verdict. The
/// I/O thread takes everything queued at once, sends it as a single
/// pipeline, reads all the replies, and hands each to its worker: under
/// load, dozens of lookups share one write, one read and one Redis
/// event-loop pass instead of paying for each. Connections come from an
/// r2d2 pool, which reopens them in the background whenever Redis comes back.
///
/// Timeouts belong to the I/O thread alone, because only it can tell a slow
/// Redis from a busy machine. Its socket timeout runs from the send and is
/// the kernel's: it cannot fire while a reply waits unread, however late the
/// thread gets the CPU. A worker's own timer could, so workers keep none.
/// Every step of the I/O thread is bounded by the command timeout, and when
/// one fails, every lookup queued behind it fails with it: a hung Redis
/// still releases each worker within the command timeout of its lookup.
pub struct RedisPool {
    shared: Arc<Shared>,
    /// The Sentinel watcher to stop, for a master Sentinels name.
    locator: Option<Arc<Locator>>,
    io_thread: Option<JoinHandle<()>>,
}

/// Most lookups sent in one pipeline.
const MAX_BATCH: usize = 256;

impl RedisPool {
    /// Builds the pool without waiting for Redis: connections are opened in
    /// the background, so a VCL loads even while Redis is down. For a Redis
    /// Cluster the I/O thread keeps one connection per node instead, and
    /// `size` does not apply.
    pub fn new(settings: &PoolSettings<'_>) -> Result<Self, String> {
        let timeouts = Timeouts {
            connect: settings.connect_timeout,
            command: settings.command_timeout,
        };
        let target: Target = settings
            .url
            .parse()
            .map_err(|e: redis_target::TargetError| e.to_string())?;
        let health = Arc::new(Health::new());
        let (exchange, locator): (Box<dyn Exchange>, _) = match target {
            Target::Cluster(cluster) => (
                Box::new(crate::lookups::cluster::ClusterRoute::new(
                    cluster, timeouts,
                )),
                None,
            ),
            Target::Server(_) | Target::Sentinel(_) => {
                let locator = Arc::new(Locator::open(settings.url, timeouts)?);
                let manager = ConnectionManager {
                    locator: Arc::clone(&locator),
                    health: Arc::clone(&health),
                };
                let pool = r2d2::Pool::builder()
                    .max_size(settings.size)
                    .min_idle(Some(1))
                    .test_on_check_out(false)
                    .connection_timeout(settings.command_timeout)
                    .error_handler(Box::new(r2d2::NopErrorHandler))
                    .build_unchecked(manager);
                let route = MasterRoute {
                    pool,
                    locator: Arc::clone(&locator),
                    connection: None,
                };
                (Box::new(route), Some(locator))
            }
        };
        let shared = Arc::new(Shared {
            health,
            command_timeout: settings.command_timeout,
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            round_trips: AtomicU64::new(0),
        });
        let io_shared = Arc::clone(&shared);
        let io_thread = std::thread::Builder::new()
            .name("shortlink-redis".into())
            .spawn(move || io_loop(&io_shared, exchange))
            .map_err(|e| format!("cannot start the Redis I/O thread: {e}"))?;
        Ok(Self {
            shared,
            locator,
            io_thread: Some(io_thread),
        })
    }

    pub fn health(&self) -> &Health {
        &self.shared.health
    }

    /// Pipelines sent to Redis so far.
    pub fn round_trips(&self) -> u64 {
        self.shared.round_trips.load(Ordering::Relaxed)
    }

    /// `HGET hash field`: the reply, or why Redis gave none.
    pub fn hget(&self, slot: &Slot<'_>) -> Outcome {
        let lookup = Arc::new(Lookup {
            hash: slot.hash.clone(),
            field: slot.field.to_owned(),
            outcome: Mutex::new(None),
            ready: Condvar::new(),
        });
        {
            let mut queue = self
                .shared
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if queue.stopping {
                return Err(stopped());
            }
            queue.waiting.push(Arc::clone(&lookup));
            // The I/O thread only sleeps on an empty queue.
            if queue.waiting.len() == 1 {
                self.shared.wake.notify_one();
            }
        }
        let mut outcome = lookup
            .outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(outcome) = outcome.take() {
                return outcome;
            }
            // The I/O thread answers every lookup it takes; the timer only
            // notices a thread that is gone, which nothing else would.
            let (guard, waited) = lookup
                .ready
                .wait_timeout(outcome, self.shared.command_timeout)
                .unwrap_or_else(PoisonError::into_inner);
            outcome = guard;
            if waited.timed_out()
                && outcome.is_none()
                && self.io_thread.as_ref().is_none_or(JoinHandle::is_finished)
            {
                return Err(stopped());
            }
        }
    }
}

fn stopped() -> LookupError {
    LookupError::Unreachable("the Redis I/O thread has stopped".into())
}

impl Drop for RedisPool {
    fn drop(&mut self) {
        self.shared
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stopping = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.io_thread.take() {
            let _ = thread.join();
        }
        // Here, not when the last reference goes (an r2d2 thread opening a
        // connection may hold one): the watcher runs this module's code.
        if let Some(locator) = &self.locator {
            locator.stop();
        }
    }
}

fn io_loop(shared: &Shared, mut exchange: Box<dyn Exchange>) {
    loop {
        let mut batch = {
            let mut queue = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
            while queue.waiting.is_empty() && !queue.stopping {
                queue = shared
                    .wake
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if queue.stopping {
                let error = stopped();
                for lookup in queue.waiting.drain(..) {
                    lookup.fulfil(Err(error.clone()));
                }
                return;
            }
            let take = queue.waiting.len().min(MAX_BATCH);
            queue.waiting.drain(..take).collect::<Vec<_>>()
        };
        // A worker that is gone no longer waits for its answer.
        batch.retain(|lookup| Arc::strong_count(lookup) > 1);
        if batch.is_empty() {
            continue;
        }
        // A panic here must not end the thread every lookup depends on.
        let failure = crate::without_panic(
            || exchange.serve(shared, &batch),
            || Some(LookupError::Unreachable("internal error".into())),
        );
        if let Some(error) = failure {
            // Never reuse the stream of a failed exchange: it may have
            // stopped halfway (serve drops it itself, but a panic does not).
            exchange.forget_connections();
            shared.health.set(false);
            // Redis failed while these waited behind the batch: each has
            // waited less than the command timeout, and sending them now
            // would make them wait up to that much again.
            let queued = std::mem::take(
                &mut shared
                    .queue
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .waiting,
            );
            for lookup in batch.iter().chain(&queued) {
                lookup.fulfil(Err(error.clone()));
            }
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
            pipeline.cmd("HGET").arg(&lookup.hash).arg(&lookup.field);
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
                        lookup.fulfil(hget_reply(reply));
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

/// What one `HGET` reply means for its lookup.
pub(crate) fn hget_reply(reply: redis::Value) -> Outcome {
    match reply {
        redis::Value::Nil => Ok(None),
        redis::Value::BulkString(bytes) => Ok(Some(bytes)),
        redis::Value::ServerError(error) => Err(LookupError::Answer(
            redis::RedisError::from(error).to_string(),
        )),
        other => Err(LookupError::Answer(format!(
            "unexpected reply to HGET: {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::{hget_reply, LookupError};

    #[test]
    fn hget_replies_become_outcomes() {
        assert_eq!(hget_reply(redis::Value::Nil).unwrap(), None);
        assert_eq!(
            hget_reply(redis::Value::BulkString(b"https://example.org/".to_vec())).unwrap(),
            Some(b"https://example.org/".to_vec())
        );
        // As Redis sends it for a hash name that holds a string.
        let wrong_type = redis::parse_redis_value(b"-WRONGTYPE not a hash\r\n").unwrap();
        assert!(matches!(
            hget_reply(wrong_type),
            Err(LookupError::Answer(m)) if m.contains("WRONGTYPE")
        ));
        assert!(matches!(
            hget_reply(redis::Value::Int(1)),
            Err(LookupError::Answer(m)) if m.contains("unexpected")
        ));
    }
}
