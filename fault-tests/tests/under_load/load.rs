//! The load generator: a fixed number of std threads, each with its own
//! kept-alive loopback connection, sending at most one request per
//! `interval` until `duration` is over. It stops by itself; dropping it
//! early stops and joins its threads too.
//!
//! Every request is recorded with when it was sent (relative to the start
//! of the run), how long its answer took, and what the worker made of it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use test_support::Redis;

use crate::http::Client;
use crate::stack::Fault;

/// One request as it happened.
#[derive(Debug, Clone)]
pub struct Record<T> {
    /// When it was sent, from the start of the run.
    pub sent: Duration,
    pub latency: Duration,
    pub what: T,
}

impl<T> Record<T> {
    /// When its answer (or error) arrived, from the start of the run.
    pub fn done(&self) -> Duration {
        self.sent + self.latency
    }
}

/// Sends one request on the client it is given and describes the outcome;
/// `None` when it has nothing left to send.
pub type Worker<T> = Arc<dyn Fn(&mut Client) -> Option<T> + Send + Sync>;

pub struct Load<T> {
    pub origin: Instant,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<(Vec<Record<T>>, bool)>>,
}

/// Connection and I/O timeout of a load client: far above any expected
/// answer time, so only a real hang shows as an error.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

impl<T: Send + 'static> Load<T> {
    /// Starts `groups` of (threads, pause between one thread's requests,
    /// worker) against `port` on 127.0.0.1, to run for `duration`.
    pub fn start(port: u16, duration: Duration, groups: &[(usize, Duration, Worker<T>)]) -> Self {
        let origin = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for (count, interval, worker) in groups {
            let interval = *interval;
            for _ in 0..*count {
                let worker = Arc::clone(worker);
                let stop = Arc::clone(&stop);
                threads.push(thread::spawn(move || {
                    run_thread(port, origin, origin + duration, interval, &stop, &*worker)
                }));
            }
        }
        Self {
            origin,
            stop,
            threads,
        }
    }

    /// Time since the start of the run, to place events among the records.
    pub fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Waits for the run to end; all records, by send time. Fails if a
    /// worker ran out of things to send before the end.
    pub fn finish(self) -> Result<Vec<Record<T>>, String> {
        let (records, ran_out) = self.join()?;
        if ran_out {
            return Err("a load thread ran out of keys: the run proves less than planned".into());
        }
        Ok(records)
    }

    /// Stops the run `after` from now, before its planned end.
    pub fn stop_after(self, after: Duration) -> Result<Vec<Record<T>>, String> {
        thread::sleep(after);
        self.stop.store(true, Ordering::Relaxed);
        self.finish()
    }

    /// Waits until every worker has nothing left to send (a burst).
    pub fn finish_burst(self) -> Result<Vec<Record<T>>, String> {
        let (records, ran_out) = self.join()?;
        if !ran_out {
            return Err("the burst did not finish within its time limit".into());
        }
        Ok(records)
    }

    /// All records by send time, and whether some worker ran out.
    fn join(mut self) -> Result<(Vec<Record<T>>, bool), String> {
        let mut all = Vec::new();
        let mut exhausted = false;
        for thread in self.threads.drain(..) {
            let (records, ran_out) = thread.join().map_err(|_| "a load thread panicked")?;
            all.extend(records);
            exhausted |= ran_out;
        }
        all.sort_by_key(|r| r.sent);
        Ok((all, exhausted))
    }
}

impl<T> Drop for Load<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn run_thread<T>(
    port: u16,
    origin: Instant,
    end: Instant,
    interval: Duration,
    stop: &AtomicBool,
    worker: &(dyn Fn(&mut Client) -> Option<T> + Send + Sync),
) -> (Vec<Record<T>>, bool) {
    let mut client = Client::new(port, CLIENT_TIMEOUT);
    let mut records = Vec::new();
    let mut next = Instant::now();
    loop {
        let now = Instant::now();
        if now < next {
            thread::sleep(next.saturating_duration_since(now));
        }
        let sent = Instant::now();
        if sent >= end || stop.load(Ordering::Relaxed) {
            return (records, false);
        }
        let Some(what) = worker(&mut client) else {
            return (records, true);
        };
        let latency = sent.elapsed();
        records.push(Record {
            sent: sent.duration_since(origin),
            latency,
            what,
        });
        // Paced, without catching up after a slow answer: the load stays
        // bounded whatever the servers do.
        next = (next + interval).max(Instant::now());
    }
}

/// When a fault happened during a run, from the start of the run.
#[derive(Clone, Copy)]
pub struct Timeline {
    /// Its signal was about to be sent.
    pub begins: Duration,
    /// Its signal was sent: Redis was surely away from here.
    pub done: Duration,
    /// Ending it was about to begin: Redis was surely away until here.
    pub ends: Duration,
    /// Redis answered again.
    pub back: Duration,
}

/// Where a request falls around a fault: every request is in exactly one
/// phase.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Answered before the fault began.
    Before,
    /// Sent once Redis was surely away, answered before it came back.
    During,
    /// Sent before Redis came back, but in flight when a signal was sent.
    Across,
    /// Sent after Redis was back.
    After,
}

impl Timeline {
    /// Lets `load` run for `before`, then has `fault` on `redis` for
    /// `down`, then ends it.
    pub fn run<T: Send + 'static>(
        load: &Load<T>,
        before: Duration,
        down: Duration,
        fault: Fault,
        redis: &Redis,
    ) -> Result<Self, String> {
        thread::sleep(before);
        let begins = load.now();
        fault.begin(redis)?;
        let done = load.now();
        thread::sleep(down.saturating_sub(done.saturating_sub(begins)));
        let ends = load.now();
        fault.end(redis)?;
        Ok(Self {
            begins,
            done,
            ends,
            back: load.now(),
        })
    }

    pub fn phase<T>(&self, record: &Record<T>) -> Phase {
        if record.done() < self.begins {
            Phase::Before
        } else if record.sent >= self.back {
            Phase::After
        } else if record.sent >= self.done && record.done() < self.ends {
            Phase::During
        } else {
            Phase::Across
        }
    }
}

/// Hands out each of `len` indexes once, across threads.
pub struct Sequence {
    next: AtomicUsize,
    len: usize,
}

impl Sequence {
    pub fn new(len: usize) -> Self {
        Self {
            next: AtomicUsize::new(0),
            len,
        }
    }

    pub fn take(&self) -> Option<usize> {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        (index < self.len).then_some(index)
    }
}

/// Milliseconds, for summaries.
pub fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1e3)
}
