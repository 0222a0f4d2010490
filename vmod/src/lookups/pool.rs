//! The pool: workers queue their lookups, one I/O thread sends them in
//! batches over the route to Redis (`master` or `cluster`), and hands each
//! worker its answer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use redis_target::{Locator, Target, Timeouts};
use shortlink_core::Slot;

use super::cluster::ClusterRoute;
use super::master::MasterRoute;
use super::{Command, Exchange, Health, Lookup, LookupError, Outcome, Queue, Shared};

/// Settings of a [`RedisPool`].
pub struct PoolSettings<'a> {
    pub url: &'a str,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    pub size: u32,
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
            Target::Cluster(cluster) => (Box::new(ClusterRoute::new(cluster, timeouts)), None),
            Target::Server(_) | Target::Sentinel(_) => {
                let locator = Arc::new(Locator::open(settings.url, timeouts)?);
                let route =
                    MasterRoute::new(&locator, &health, settings.size, settings.command_timeout);
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
        let lookup = Arc::new(Lookup::new(slot, Command::Get));
        self.queue(std::slice::from_ref(&lookup))?;
        self.wait(&lookup)
    }

    /// The first `most` members of the sorted set `name`, one a line; or
    /// why Redis gave none.
    pub fn members(&self, name: &str, most: usize) -> Outcome {
        let slot = Slot {
            hash: name.to_owned(),
            field: "",
        };
        let lookup = Arc::new(Lookup::new(&slot, Command::Members(most)));
        self.queue(std::slice::from_ref(&lookup))?;
        self.wait(&lookup)
    }

    /// `HGET` of each slot, in one batch: for each, the reply or why
    /// Redis gave none.
    pub fn hget_each(&self, slots: &[Slot<'_>]) -> Vec<Outcome> {
        self.run_each(
            &slots
                .iter()
                .map(|slot| Arc::new(Lookup::new(slot, Command::Get)))
                .collect::<Vec<_>>(),
        )
    }

    /// Raises each field to its count unless it holds more, in one batch:
    /// for each, the count it holds then, or why Redis gave none.
    pub fn raise(&self, counts: &[(Slot<'_>, u64)]) -> Vec<Outcome> {
        self.run_each(
            &counts
                .iter()
                .map(|(slot, count)| Arc::new(Lookup::new(slot, Command::Raise(*count))))
                .collect::<Vec<_>>(),
        )
    }

    fn run_each(&self, lookups: &[Arc<Lookup>]) -> Vec<Outcome> {
        if let Err(error) = self.queue(lookups) {
            return vec![Err(error); lookups.len()];
        }
        lookups.iter().map(|lookup| self.wait(lookup)).collect()
    }

    fn queue(&self, lookups: &[Arc<Lookup>]) -> Result<(), LookupError> {
        let mut queue = self
            .shared
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if queue.stopping {
            return Err(stopped());
        }
        let was_empty = queue.waiting.is_empty();
        queue.waiting.extend(lookups.iter().cloned());
        // The I/O thread only sleeps on an empty queue.
        if was_empty {
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    fn wait(&self, lookup: &Lookup) -> Outcome {
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
