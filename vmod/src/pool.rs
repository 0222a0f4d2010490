//! Redis lookups for Varnish workers: pipelined by one I/O thread onto
//! connections from an r2d2 pool, with every wait bounded, so that a slow or
//! absent Redis costs a Varnish worker at most the command timeout.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::ConnectionLike;
use shortlink_keys::Slot;

/// One Redis connection and whether it may be reused.
pub struct PooledConnection {
    connection: redis::Connection,
    /// Set after a failed or timed-out command: the stream may still carry a
    /// late reply, so the connection must never serve another lookup.
    broken: bool,
    /// The read timeout is below the command timeout (see `fit_read_timeout`).
    shortened: bool,
}

impl PooledConnection {
    /// Makes the socket's read timeout end no later than `deadline`.
    ///
    /// Whatever a slow checkout used up comes off the command's budget. A
    /// setsockopt per lookup would cost a syscall each time, so the timeout
    /// is only shortened when the checkout took measurable time, and put
    /// back on the next use.
    fn fit_read_timeout(&mut self, deadline: Instant, full: Duration) -> redis::RedisResult<()> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining + CHECKOUT_SLACK < full {
            self.connection
                .set_read_timeout(Some(remaining.max(Duration::from_millis(1))))?;
            self.shortened = true;
        } else if self.shortened {
            self.connection.set_read_timeout(Some(full))?;
            self.shortened = false;
        }
        Ok(())
    }
}

/// A checkout quicker than this leaves the full command timeout in place.
const CHECKOUT_SLACK: Duration = Duration::from_millis(2);

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
                shortened: false,
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
#[derive(Debug, Clone)]
pub enum LookupError {
    /// No answer within the command timeout (or no free connection in time).
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

type Outcome = Result<Option<Vec<u8>>, LookupError>;

/// One lookup on its way: filled in by the I/O thread, awaited by a worker.
struct Lookup {
    hash: String,
    field: String,
    deadline: Instant,
    outcome: Mutex<Option<Outcome>>,
    ready: Condvar,
}

impl Lookup {
    fn fulfil(&self, outcome: Outcome) {
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
struct Shared {
    pool: r2d2::Pool<ConnectionManager>,
    health: Arc<Health>,
    command_timeout: Duration,
    queue: Mutex<Queue>,
    wake: Condvar,
    round_trips: AtomicU64,
}

/// Lookups for Varnish workers, pipelined onto pooled connections.
///
/// A worker queues its `HGET` and waits (at most the command timeout) for
/// the answer. One I/O thread takes everything queued at once, sends it as a
/// single pipeline, reads all the replies, and hands each to its worker: under
/// load, dozens of lookups share one write, one read and one Redis event-loop
/// pass instead of paying for each. Connections come from an r2d2 pool, which
/// reopens them in the background whenever Redis comes back.
pub struct RedisPool {
    shared: Arc<Shared>,
    io_thread: Option<JoinHandle<()>>,
}

/// Most lookups sent in one pipeline.
const MAX_BATCH: usize = 256;

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
            .min_idle(Some(1))
            .test_on_check_out(false)
            .connection_timeout(settings.command_timeout)
            .error_handler(Box::new(r2d2::NopErrorHandler))
            .build_unchecked(manager);
        let shared = Arc::new(Shared {
            pool,
            health,
            command_timeout: settings.command_timeout,
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            round_trips: AtomicU64::new(0),
        });
        let io_shared = Arc::clone(&shared);
        let io_thread = std::thread::Builder::new()
            .name("shortlink-redis".into())
            .spawn(move || io_loop(&io_shared))
            .map_err(|e| format!("cannot start the Redis I/O thread: {e}"))?;
        Ok(Self {
            shared,
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

    /// `HGET hash field`, answered within one command timeout.
    pub fn hget(&self, slot: &Slot<'_>) -> Outcome {
        let deadline = Instant::now() + self.shared.command_timeout;
        let lookup = Arc::new(Lookup {
            hash: slot.hash.clone(),
            field: slot.field.to_owned(),
            deadline,
            outcome: Mutex::new(None),
            ready: Condvar::new(),
        });
        {
            let mut queue = self
                .shared
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
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
            let now = Instant::now();
            if now >= deadline {
                return Err(LookupError::Timeout(format!(
                    "no answer within the command timeout of {:?}",
                    self.shared.command_timeout
                )));
            }
            outcome = lookup
                .ready
                .wait_timeout(outcome, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
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
    }
}

fn io_loop(shared: &Shared) {
    let mut connection = None;
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
                return;
            }
            let take = queue.waiting.len().min(MAX_BATCH);
            queue.waiting.drain(..take).collect::<Vec<_>>()
        };
        // A worker that gave up no longer waits for its answer.
        let now = Instant::now();
        batch.retain(|lookup| lookup.deadline > now && Arc::strong_count(lookup) > 1);
        if !batch.is_empty() {
            // A panic here must not end the thread every lookup depends on.
            let served = crate::without_panic(
                || {
                    serve(shared, &mut connection, &batch);
                    true
                },
                || false,
            );
            if !served {
                // The exchange may have stopped halfway: never reuse its stream.
                connection = None;
                for lookup in &batch {
                    lookup.fulfil(Err(LookupError::Unreachable("internal error".into())));
                }
            }
        }
    }
}

/// Sends `batch` as one pipeline and hands out the replies. A connection that
/// Redis dropped (it restarted, say) is only noticed when used, so such a
/// failure is retried on a fresh connection while time remains.
fn serve(
    shared: &Shared,
    connection: &mut Option<r2d2::PooledConnection<ConnectionManager>>,
    batch: &[Arc<Lookup>],
) {
    let deadline = batch
        .iter()
        .map(|l| l.deadline)
        .min()
        .unwrap_or_else(Instant::now);
    let mut pipeline = redis::pipe();
    pipeline.ignore_errors();
    for lookup in batch {
        pipeline.cmd("HGET").arg(&lookup.hash).arg(&lookup.field);
    }
    let failure = loop {
        let mut conn = if let Some(conn) = connection.take() {
            conn
        } else {
            let wait = deadline.saturating_duration_since(Instant::now());
            match shared.pool.get_timeout(wait) {
                Ok(conn) => conn,
                Err(e) => {
                    break LookupError::Timeout(format!(
                        "no connection within the command timeout of {:?}: {e}",
                        shared.command_timeout
                    ))
                }
            }
        };
        shared.round_trips.fetch_add(1, Ordering::Relaxed);
        let replies = conn
            .fit_read_timeout(deadline, shared.command_timeout)
            .and_then(|()| {
                pipeline.query::<Vec<redis::RedisResult<Option<Vec<u8>>>>>(&mut conn.connection)
            });
        match replies {
            Ok(replies) => {
                shared.health.set(true);
                *connection = Some(conn);
                for (lookup, reply) in batch.iter().zip(replies) {
                    lookup.fulfil(reply.map_err(|e| LookupError::Answer(e.to_string())));
                }
                return;
            }
            Err(error) => {
                // A failed exchange may leave a late reply in the stream.
                conn.broken = true;
                let error = if error.is_timeout() {
                    LookupError::Timeout(error.to_string())
                } else {
                    LookupError::Unreachable(error.to_string())
                };
                if matches!(error, LookupError::Unreachable(_)) && Instant::now() < deadline {
                    continue;
                }
                break error;
            }
        }
    };
    // Only the connection failed here: answer errors arrive per lookup above.
    shared.health.set(false);
    for lookup in batch {
        lookup.fulfil(Err(failure.clone()));
    }
}
