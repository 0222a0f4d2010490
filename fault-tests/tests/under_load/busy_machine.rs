//! A machine too busy for Varnish to keep up: hundreds of concurrent
//! requests for keys never asked for, two busy loops at normal priority, and
//! the VMOD's Redis I/O thread at nice 19, so that it gets the CPU late and
//! lookups wait hundreds of milliseconds in its queue (about 300 ms at the
//! median here; a lookup timed from its queueing would fail at 200 ms).
//!
//! With a healthy Redis every stored link must still be answered with its
//! redirect: a lookup waits for the CPU, it does not fail. With Redis hung
//! under the same clients and busy loops, lookups must still fail within the
//! timeout. That one runs the I/O thread at its normal priority: a thread
//! starved of CPU can deliver no verdict in time, neither a reply nor a
//! timeout, and the lookups it holds rightly wait (the first test).

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use test_support::{free_port, Redis, Varnish};

use crate::links::{self, Hit};
use crate::load::{ms, Load, Phase, Record, Timeline};
use crate::stack::{configure, start_redis, writer_config, Fault, TestDir};

/// Concurrent clients, each sending its next request as soon as the last
/// is answered.
const CLIENTS: usize = 300;
/// Threads spinning at normal priority beside them: with fewer, a lookup
/// timed from its queueing still finished within 200 ms here.
const BUSY_LOOPS: usize = 2;
/// Links stored: more than a run can request (running out fails the test).
/// A key's first request is answered from its lookup alone, about twice as
/// fast as a fetch: 60,000 ran out.
const LINKS: usize = 200_000;
const DURATION: Duration = Duration::from_secs(5);
/// When Redis hangs in the second test, and for how long.
const HANG_AFTER: Duration = Duration::from_secs(2);
const HANG_FOR: Duration = Duration::from_millis(1500);

/// With a healthy Redis: every request a 301 with its link's URL, and no
/// lookup counted as timed out or failed.
pub fn healthy_redis() -> Result<(), String> {
    let run = Run::start("busy-healthy-redis", Starved::Yes)?;
    let load = run.load();
    let records = load.finish()?;
    let counters = crate::stack::counters(&run.varnish)?;
    let counter = |name: &str| counters.get(name).copied().unwrap_or(u64::MAX);
    let (timeouts, errors) = (
        counter("shortlink.shortlink_links.timeouts"),
        counter("shortlink.shortlink_links.redis_errors"),
    );
    if let Some(r) = records
        .iter()
        .find(|r| r.what.status != 301 || !r.what.right_location)
    {
        return Err(format!(
            "at {}: {:?} after {} while Redis was healthy ({} of {} requests answered \
             otherwise than with their redirect; timeouts {timeouts}, redis_errors {errors})",
            ms(r.sent),
            r.what,
            ms(r.latency),
            records.iter().filter(|r| r.what.status != 301).count(),
            records.len()
        ));
    }
    if timeouts != 0 || errors != 0 {
        return Err(format!(
            "Redis was healthy, yet {timeouts} lookups timed out and {errors} failed"
        ));
    }
    println!(
        "    busy-healthy-redis: {} requests from {CLIENTS} clients beside {BUSY_LOOPS} busy \
         loops, Redis I/O thread at nice 19: {} | latency p50 {}, p99 {}, max {} | \
         {} lookups in {} round trips, 0 timeouts",
        records.len(),
        links::tally(&records),
        ms(percentile(&records, 50)),
        ms(percentile(&records, 99)),
        ms(links::max_latency(&records)),
        counter("shortlink.shortlink_links.lookups"),
        counter("shortlink.shortlink_links.round_trips"),
    );
    Ok(())
}

/// With Redis hung (SIGSTOP) under the same load: every request sent while
/// it was hung and answered before it resumed is a 503 within the timeout
/// (plus scheduling slack); 301s again once it resumes.
pub fn hung_redis() -> Result<(), String> {
    let run = Run::start("busy-hung-redis", Starved::No)?;
    let load = run.load();
    let timeline = Timeline::run(&load, HANG_AFTER, HANG_FOR, Fault::Hang, &run.redis)?;
    let records = load.finish()?;
    // 301 with the right URL, or 503 within the timeout and slack.
    links::check_every_answer(&records)?;
    let during: Vec<_> = records
        .iter()
        .filter(|r| timeline.phase(r) == Phase::During)
        .collect();
    if let Some(r) = during.iter().find(|r| r.what.status != 503) {
        return Err(format!(
            "at {}: {:?} while Redis was hung",
            ms(r.sent),
            r.what
        ));
    }
    let after = || records.iter().filter(|r| timeline.phase(r) == Phase::After);
    if during.len() < 20 || after().filter(|r| r.what.status == 301).count() < 100 {
        return Err(format!(
            "too little load: {} requests while Redis was hung, then {}",
            during.len(),
            links::tally(after())
        ));
    }
    println!(
        "    busy-hung-redis: {} requests from {CLIENTS} clients beside {BUSY_LOOPS} busy \
         loops | before the hang: {} | Redis hung for {}: {} (max latency {}, limit {}) | \
         after SIGCONT: {} | max latency of any 503: {}",
        records.len(),
        links::tally(
            records
                .iter()
                .filter(|r| timeline.phase(r) == Phase::Before)
        ),
        ms(timeline.ends.saturating_sub(timeline.begins)),
        links::tally(during.iter().copied()),
        ms(links::max_latency(during.iter().copied())),
        ms(links::max_503_latency()),
        links::tally(after()),
        ms(links::max_latency(
            records.iter().filter(|r| r.what.status == 503)
        )),
    );
    Ok(())
}

/// Whether the VMOD's Redis I/O thread runs at nice 19.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Starved {
    Yes,
    No,
}

/// Redis with [`LINKS`] stored and Varnish on the generated VCL.
struct Run {
    _dir: TestDir,
    redis: Redis,
    varnish: Varnish,
    links: Arc<Vec<(String, String)>>,
}

impl Run {
    fn start(name: &str, starved: Starved) -> Result<Self, String> {
        let dir = TestDir::new(name)?;
        let redis = start_redis(&dir.join("redis"))?;
        let links = links::make("b", LINKS);
        links::store(&redis, &links)?;
        let varnish_port = free_port()?;
        let config = writer_config(&redis.url, free_port()?, Some(varnish_port));
        let (_, vcl) = configure(&dir.path, &config)?;
        let varnish = Varnish::start_on(&dir.join("varnish"), &vcl, varnish_port)?;
        if starved == Starved::Yes {
            let io_thread = redis_io_thread(&varnish)?.to_string();
            test_support::command_output("renice", &["-n", "19", "-p", &io_thread])?;
        }
        Ok(Self {
            _dir: dir,
            redis,
            varnish,
            links,
        })
    }

    /// [`CLIENTS`] clients requesting each link once, beside the busy loops,
    /// for [`DURATION`].
    fn load(&self) -> BusyLoad {
        let busy = BusyLoops::start(BUSY_LOOPS, DURATION);
        let load = Load::start(
            self.varnish.port,
            DURATION,
            &[(CLIENTS, Duration::ZERO, links::once_each(&self.links))],
        );
        BusyLoad { load, _busy: busy }
    }
}

/// The requests and the busy loops of one run.
struct BusyLoad {
    load: Load<Hit>,
    _busy: BusyLoops,
}

impl std::ops::Deref for BusyLoad {
    type Target = Load<Hit>;

    fn deref(&self) -> &Load<Hit> {
        &self.load
    }
}

impl BusyLoad {
    /// Every request, once the run and its busy loops are over.
    fn finish(self) -> Result<Vec<Record<Hit>>, String> {
        self.load.finish()
    }
}

/// Threads that spin until their time is up or they are dropped.
struct BusyLoops {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl BusyLoops {
    fn start(count: usize, duration: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let end = Instant::now() + duration;
        let threads = (0..count)
            .map(|_| {
                let stop = Arc::clone(&stop);
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The thread id of the VMOD's Redis I/O thread (named `shortlink-redis`)
/// in the child process of `varnish`'s manager.
fn redis_io_thread(varnish: &Varnish) -> Result<u32, String> {
    let manager = varnish.pid().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        for process in fs::read_dir("/proc").map_err(|e| format!("/proc: {e}"))? {
            let path = process.map_err(|e| e.to_string())?.path();
            let status = fs::read_to_string(path.join("status")).unwrap_or_default();
            let is_child = status
                .lines()
                .any(|line| line.strip_prefix("PPid:").map(str::trim) == Some(manager.as_str()));
            if !is_child {
                continue;
            }
            for task in fs::read_dir(path.join("task")).map_err(|e| e.to_string())? {
                let task = task.map_err(|e| e.to_string())?.path();
                let name = fs::read_to_string(task.join("comm")).unwrap_or_default();
                if name.trim() == "shortlink-redis" {
                    return task
                        .file_name()
                        .and_then(|id| id.to_str()?.parse().ok())
                        .ok_or_else(|| format!("odd task path {}", task.display()));
                }
            }
        }
        thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "no thread named shortlink-redis in the child of varnishd {manager}"
    ))
}

/// The `p`-th percentile of the records' latencies.
fn percentile(records: &[Record<Hit>], p: usize) -> Duration {
    let mut latencies: Vec<Duration> = records.iter().map(|r| r.latency).collect();
    latencies.sort_unstable();
    latencies
        .get((latencies.len() * p / 100).min(latencies.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}
