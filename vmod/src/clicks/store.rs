//! The click store: the queues workers record clicks into, without a Redis
//! call on the request path, and what the flusher and the lookups read of
//! it (settings, counters, clicks pending on limited links).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use shortlink_core::clicks::{ClickTime, CountNames};
use shortlink_core::rules::Chosen;

use crate::lookups::RedisPool;
#[cfg(test)]
use shortlink_core::{clicks::Layout, KeyScheme};

/// Queues clicks are spread over, so workers seldom wait for each other.
const QUEUES: usize = 16;

/// Time a flush may take per batch: a batch is at most a few thousand
/// script arguments, a few milliseconds of Redis's time when it has a core
/// of its own, tens when Varnish and its clients hold both.
const BATCH_WAIT: Duration = Duration::from_millis(100);

/// Most bytes of a user agent kept: enough to classify any real one (uap's
/// rules match near the start; browsers send 100 to 200 bytes), and it
/// keeps a click's text, with a key and a referrer host, under 800 bytes.
pub const AGENT_MAX: usize = 256;

/// What a counted answer was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The link's redirect.
    Redirect,
    /// The redirect of a link with a click limit: its clicks are also held
    /// as pending until Redis has them (see [`ClickStore::pending`]).
    Limited,
    /// A 410, or an expired link's redirect to its fallback.
    Gone,
}

/// One answer as the request path records it: one allocation, no parsing
/// beyond the referrer's host. Copied only by tests, which tally copies
/// of the clicks they make.
#[derive(Debug)]
#[cfg_attr(test, derive(Clone))]
pub struct Click {
    pub at: ClickTime,
    pub outcome: Outcome,
    /// `HEAD` requests are counted as bots: people's browsers `GET`.
    pub head: bool,
    pub client: Option<IpAddr>,
    /// The key, the user agent and the referrer's host, one after another.
    text: Box<str>,
    key_len: u8,
    agent_len: u16,
    /// The target a link with rules or a split sent it to, packed (see
    /// [`pack_target`]) into what the struct's padding had room for.
    target: u8,
}

/// `target` in a byte: 0 for none, rules from 1, split targets from 65,
/// 255 for the link's own URL.
fn pack_target(target: Option<Chosen>) -> u8 {
    let number = |n: usize, base: u8| u8::try_from(n).map_or(0, |n| base.saturating_add(n));
    match target {
        None => 0,
        Some(Chosen::Rule(n)) => number(n, 0),
        Some(Chosen::Split(n)) => number(n, 64),
        Some(Chosen::Url) => 255,
    }
}

fn unpack_target(byte: u8) -> Option<Chosen> {
    match byte {
        0 => None,
        255 => Some(Chosen::Url),
        1..=64 => Some(Chosen::Rule(usize::from(byte))),
        _ => Some(Chosen::Split(usize::from(byte - 64))),
    }
}

impl Click {
    pub fn new(
        outcome: Outcome,
        head: bool,
        client: Option<IpAddr>,
        key: &str,
        user_agent: &str,
        referrer_host: Option<&str>,
        target: Option<Chosen>,
    ) -> Option<Self> {
        let key_len = u8::try_from(key.len()).ok()?;
        let mut cut = user_agent.len().min(AGENT_MAX);
        while !user_agent.is_char_boundary(cut) {
            cut -= 1;
        }
        let user_agent = &user_agent[..cut];
        let referrer = referrer_host.unwrap_or_default();
        let mut text = String::with_capacity(key.len() + user_agent.len() + referrer.len());
        text.push_str(key);
        text.push_str(user_agent);
        text.push_str(referrer);
        Some(Self {
            at: ClickTime::now(),
            outcome,
            head,
            client,
            text: text.into_boxed_str(),
            key_len,
            agent_len: u16::try_from(user_agent.len()).ok()?,
            target: pack_target(target),
        })
    }

    /// The target a link with rules or a split sent this click to.
    pub fn target(&self) -> Option<Chosen> {
        unpack_target(self.target)
    }

    /// What the click takes in a queue: its own size twice (a queue's
    /// vector grows by doubling, so up to half of it is room not yet
    /// used) and its text's, at most 860 bytes. The queues' bound
    /// ([`CountSettings::queue_bytes`]) counts this.
    pub fn bytes(&self) -> usize {
        2 * size_of::<Self>() + self.text.len()
    }

    pub fn key(&self) -> &str {
        &self.text[..usize::from(self.key_len)]
    }

    pub fn user_agent(&self) -> &str {
        let start = usize::from(self.key_len);
        &self.text[start..start + usize::from(self.agent_len)]
    }

    /// The referrer's host, or `None` for a click without one.
    pub fn referrer(&self) -> Option<&str> {
        let rest = &self.text[usize::from(self.key_len) + usize::from(self.agent_len)..];
        (!rest.is_empty()).then_some(rest)
    }
}

/// How a store counts, from the newest VCL that uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountSettings {
    pub flush_interval: Duration,
    pub backlog: usize,
    /// Most bytes of clicks in the queues (see [`Click::bytes`]).
    pub queue_bytes: usize,
    pub days_kept: Duration,
    pub hours_kept: Duration,
    /// A country database (`.mmdb`), or none.
    pub geoip: Option<String>,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// Replicas that must confirm a flush before its clicks count as stored.
    pub replicas_to_ack: u32,
}

impl CountSettings {
    /// The flusher's bounds on connecting to Redis and on a command.
    pub fn redis_timeouts(&self) -> redis_target::Timeouts {
        redis_target::Timeouts {
            connect: self.connect_timeout,
            command: self.command_timeout,
        }
    }

    /// How long a flush of `batches` may wait for Redis's answer: the
    /// lookups' timeout, or the flush interval if longer, and
    /// [`BATCH_WAIT`] per batch. Redis answers a pipeline once it has run
    /// all of it, and no request waits on a flush; a flush that gives up is
    /// sent again at the next interval, whole. A timeout as short as a
    /// lookup's made flushes fail on a busy machine; one that ignored the
    /// flush's size made every large flush fail on a saturated one, again
    /// and again, until the backlog was full and clicks were dropped.
    pub fn flush_timeout(&self, batches: usize) -> Duration {
        let per_batch = BATCH_WAIT.saturating_mul(u32::try_from(batches).unwrap_or(u32::MAX));
        self.command_timeout
            .max(self.flush_interval)
            .saturating_add(per_batch)
    }
}

/// Counters of a store, published to varnishstat by the VCL objects using it.
#[derive(Debug, Default)]
pub struct Counters {
    pub counted: AtomicU64,
    pub flushed: AtomicU64,
    pub dropped: AtomicU64,
    /// People's clicks tallied past half the backlog: counted in their
    /// link's total, day, hour and minute, without details or visitor.
    pub without_details: AtomicU64,
    pub flush_failures: AtomicU64,
    pub pending: AtomicU64,
    /// Bumped after every flush: the request path publishes when it moved.
    pub generation: AtomicU64,
}

/// Where a store's flusher sends its counts.
pub enum Reach {
    /// The master a locator finds: one Redis, or a Sentinel group's.
    Master(redis_target::Locator),
    /// The nodes of a Redis Cluster, each slot to the node serving it.
    Cluster(redis_target::ClusterTarget),
}

/// The clicks of one Redis and key scheme, for the life of the process.
pub struct ClickStore {
    pub redis_url: String,
    pub reach: Reach,
    /// The names counts are stored under, in the layout of `reach`.
    pub names: CountNames,
    queues: Vec<Queue>,
    /// Emptied queues, their room kept, swapped in for the full ones at
    /// each take: the workers' pushes then allocate nothing.
    spares: Mutex<Vec<Vec<Click>>>,
    /// Bytes of the clicks in the queues, and their bound (from the newest
    /// settings, read here so that recording a click takes no lock).
    queued: AtomicUsize,
    queued_max: AtomicUsize,
    settings: Mutex<CountSettings>,
    pub counters: Counters,
    /// Clicks on links with a click limit recorded and not yet stored, by
    /// key: a lookup adds them to the stored count.
    limited: Mutex<HashMap<Box<str>, u64>>,
    /// Clicks on links with a click limit that found the queues full: kept
    /// as a count per key (held in `limited` too), which the flusher adds
    /// to the links' totals of people's clicks, so that no click past the
    /// bound goes uncounted against a limit. One entry per limited link at
    /// most, and a link answers as expired once its limit is reached.
    overflow: Mutex<HashMap<Box<str>, u64>>,
    /// The links' Redis, when clicks are stored in a Redis of their own:
    /// the flusher copies the people's totals of limited links there, so
    /// that a lookup reads them where it reads the link, never behind a
    /// flush (see `flusher::mirror`). Set by the newest VCL.
    mirror: Mutex<Option<Arc<RedisPool>>>,
    /// Clicks on limited links that Redis stored and whose totals the
    /// links' Redis has no copy of yet, by key (held in `limited` too):
    /// kept here, not by the flusher, so that a flusher started afresh
    /// after a panic still copies them.
    uncopied: Mutex<HashMap<Box<str>, Uncopied>>,
}

/// A limited link's clicks stored and not yet copied to the links' Redis.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Uncopied {
    pub clicks: u64,
    /// The highest stored total read back for the link: a copy is raised
    /// to no less, even if the clicks' Redis lost its last writes since.
    pub total: u64,
}

impl ClickStore {
    /// Records `click`, or counts it dropped when the queues are full: but
    /// a click on a link with a click limit is still counted against it.
    pub fn record(&self, click: Click) {
        let bytes = click.bytes();
        let max = self.queued_max.load(Ordering::Relaxed);
        if self.queued.fetch_add(bytes, Ordering::Relaxed) + bytes > max {
            self.queued.fetch_sub(bytes, Ordering::Relaxed);
            if click.outcome == Outcome::Limited {
                add_pending(&mut self.limited(), click.key(), 1);
                add_pending(&mut lock(&self.overflow), click.key(), 1);
            } else {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        if click.outcome == Outcome::Limited {
            add_pending(&mut self.limited(), click.key(), 1);
        }
        lock(&self.queues[queue_of_this_thread()].0).push(click);
    }

    /// Clicks on `key` (a link with a click limit) recorded here and not
    /// yet stored in Redis.
    pub fn pending(&self, key: &str) -> u64 {
        self.limited().get(key).copied().unwrap_or_default()
    }

    /// Takes back pending clicks once Redis stored them, or once they were
    /// dropped and never will be.
    pub fn settle(&self, settled: &HashMap<Box<str>, u64>) {
        if settled.is_empty() {
            return;
        }
        let mut limited = self.limited();
        for (key, n) in settled {
            subtract_pending(&mut limited, key, *n);
        }
    }

    fn limited(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, u64>> {
        lock(&self.limited)
    }

    /// Of [`Self::pending`]'s clicks on `key`, those Redis stored whose
    /// total is not copied yet: the clicks' Redis's total holds them.
    pub fn uncopied(&self, key: &str) -> u64 {
        lock(&self.uncopied)
            .get(key)
            .map_or(0, |waiting| waiting.clicks)
    }

    /// Takes limited clicks Redis stored: settled at once without a links'
    /// Redis to copy their totals to, else held until copied.
    pub fn stored_limited(&self, stored: &HashMap<Box<str>, u64>) {
        if self.mirror().is_none() {
            return self.settle(stored);
        }
        let mut uncopied = lock(&self.uncopied);
        for (key, n) in stored {
            uncopied.entry(key.clone()).or_default().clicks += n;
        }
    }

    /// The limited links whose totals wait to be copied.
    pub fn waiting_copies(&self) -> Vec<(Box<str>, Uncopied)> {
        let uncopied = lock(&self.uncopied);
        uncopied
            .iter()
            .map(|(key, waiting)| (key.clone(), *waiting))
            .collect()
    }

    /// Notes `total` read back for `key`; answers the highest read yet.
    pub fn read_total(&self, key: &str, total: u64) -> u64 {
        let mut uncopied = lock(&self.uncopied);
        uncopied.get_mut(key).map_or(total, |waiting| {
            waiting.total = waiting.total.max(total);
            waiting.total
        })
    }

    /// `clicks` on `key` are in its copy now: no longer pending. Without a
    /// links' Redis any more, every waiting click is.
    pub fn copied(&self, key: &str, clicks: u64) {
        let mut uncopied = lock(&self.uncopied);
        if let Some(waiting) = uncopied.get_mut(key) {
            waiting.clicks = waiting.clicks.saturating_sub(clicks);
            if waiting.clicks == 0 {
                uncopied.remove(key);
            }
        }
        drop(uncopied);
        subtract_pending(&mut self.limited(), key, clicks);
    }

    /// Clicks on limited links that found the queues full, by key, taken:
    /// pending until the flusher stores them in the links' totals.
    pub fn take_overflow(&self) -> HashMap<Box<str>, u64> {
        std::mem::take(&mut *lock(&self.overflow))
    }

    /// Every click recorded so far, taken out of the queues; each still
    /// holds its room in the queues' bound until [`Self::release`]d, so
    /// that clicks waiting for the flusher's backlog count in it too.
    pub fn take(&self) -> Vec<Click> {
        let mut spares = lock(&self.spares);
        let mut taken = Vec::new();
        for queue in &self.queues {
            // Under the queue's lock only a swap, with an emptied queue of
            // the same room: the flusher runs below the workers' priority,
            // and may wait long for a core while it holds the lock.
            let mut batch = spares.pop().unwrap_or_default();
            std::mem::swap(&mut batch, &mut *lock(&queue.0));
            taken.append(&mut batch);
            spares.push(batch);
        }
        taken
    }

    /// Takes `bytes` of clicks ([`Click::bytes`]) out of the queues'
    /// bound: a click taken holds its room until tallied or given up.
    pub fn release(&self, bytes: usize) {
        self.queued.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Counts `clicks` made elsewhere in the queues' bound, as if recorded.
    #[cfg(test)]
    pub fn hold(&self, clicks: &[Click]) {
        let bytes: usize = clicks.iter().map(Click::bytes).sum();
        self.queued.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A store with empty queues; [`store_for`] starts its flusher.
    pub(crate) fn new(
        redis_url: &str,
        reach: Reach,
        names: CountNames,
        settings: CountSettings,
        mirror: Option<Arc<RedisPool>>,
    ) -> Self {
        Self {
            redis_url: redis_url.to_owned(),
            reach,
            names,
            queues: (0..QUEUES).map(|_| Queue::default()).collect(),
            spares: Mutex::new(Vec::new()),
            queued: AtomicUsize::new(0),
            queued_max: AtomicUsize::new(settings.queue_bytes),
            settings: Mutex::new(settings),
            counters: Counters::default(),
            limited: Mutex::new(HashMap::new()),
            overflow: Mutex::new(HashMap::new()),
            mirror: Mutex::new(mirror),
            uncopied: Mutex::new(HashMap::new()),
        }
    }

    /// A store no flusher runs for, so tests can take its clicks.
    #[cfg(test)]
    pub fn detached(backlog: usize) -> Self {
        let settings = CountSettings {
            flush_interval: Duration::from_secs(1),
            backlog,
            queue_bytes: shortlink_core::settings::ClickQueueMb::DEFAULT.bytes(),
            days_kept: Duration::from_hours(24),
            hours_kept: Duration::from_hours(1),
            geoip: None,
            connect_timeout: Duration::from_secs(1),
            command_timeout: Duration::from_secs(1),
            replicas_to_ack: 0,
        };
        let nowhere = redis_target::Locator::start(
            redis_target::Target::Server("redis://127.0.0.1:1/0".into()),
            settings.redis_timeouts(),
        )
        .expect("a server locator starts no thread");
        let names = CountNames::new(&KeyScheme::default(), Layout::Plain)
            .expect("the default scheme has no braces");
        Self::new("", Reach::Master(nowhere), names, settings, None)
    }

    pub fn settings(&self) -> CountSettings {
        lock(&self.settings).clone()
    }

    /// Takes the newest VCL's settings, and its links' Redis when clicks
    /// have a Redis of their own.
    pub(crate) fn set(&self, settings: CountSettings, mirror: Option<Arc<RedisPool>>) {
        self.queued_max
            .store(settings.queue_bytes, Ordering::Relaxed);
        *lock(&self.settings) = settings;
        *lock(&self.mirror) = mirror;
    }

    /// Where limited links' people's totals are copied, if anywhere.
    pub fn mirror(&self) -> Option<Arc<RedisPool>> {
        lock(&self.mirror).clone()
    }
}

/// A lock of the store's, even if a thread panicked holding it: each
/// holder leaves its data whole between statements.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One of the store's queues, on cache lines of its own: workers on both
/// cores lock their queues at every click, and two queues sharing a line
/// (a queue is 32 bytes) made each lock move that line between the cores.
/// 128 bytes: x86 fetches lines in pairs.
#[repr(align(128))]
#[derive(Default)]
struct Queue(Mutex<Vec<Click>>);

/// The queue this worker thread records into, picked by the address of
/// its thread's descriptor (`pthread_self`): a thread-local would cost a
/// call to `__tls_get_addr` at every click, as it does in a library loaded
/// by `dlopen`, and `perf` put that call at a third of recording a click.
/// Descriptors lie a thread's stack apart; Fibonacci hashing spreads the
/// address's page number over the queues.
fn queue_of_this_thread() -> usize {
    const _: () = assert!(QUEUES.is_power_of_two());
    // SAFETY: pthread_self has no preconditions and cannot fail.
    let thread = unsafe { libc::pthread_self() } as u64;
    let spread = (thread >> 12).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    usize::try_from(spread >> (64 - QUEUES.trailing_zeros())).unwrap_or_default()
}

/// Adds `n` clicks to a key's pending count.
pub(crate) fn add_pending(pending: &mut HashMap<Box<str>, u64>, key: &str, n: u64) {
    *pending.entry(Box::from(key)).or_default() += n;
}

/// Takes `n` clicks off a key's pending count, forgetting the key at 0 so
/// the map holds only links with clicks under way.
pub(crate) fn subtract_pending(pending: &mut HashMap<Box<str>, u64>, key: &str, n: u64) {
    if let Some(count) = pending.get_mut(key) {
        *count = count.saturating_sub(n);
        if *count == 0 {
            pending.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_click_keeps_its_parts_apart() {
        let click = Click::new(
            Outcome::Redirect,
            false,
            None,
            "Lm25",
            "Firefox",
            Some("example.org"),
            None,
        )
        .unwrap();
        assert_eq!(
            (click.key(), click.user_agent(), click.referrer()),
            ("Lm25", "Firefox", Some("example.org"))
        );
        let long_agent = "é".repeat(AGENT_MAX);
        let click = Click::new(Outcome::Gone, true, None, "Lm25", &long_agent, None, None).unwrap();
        assert!(click.user_agent().len() <= AGENT_MAX);
        assert_eq!(click.referrer(), None);
    }

    /// Threads record into queues spread by their identity, each always
    /// into the same one.
    #[test]
    fn threads_spread_over_the_queues() {
        // All alive at once, so that none reuses another's stack.
        let together = Arc::new(std::sync::Barrier::new(32));
        let picks: Vec<(usize, usize)> = (0..32)
            .map(|_| {
                let together = Arc::clone(&together);
                std::thread::spawn(move || {
                    let first = queue_of_this_thread();
                    together.wait();
                    (first, queue_of_this_thread())
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|thread| thread.join().unwrap())
            .collect();
        assert!(picks
            .iter()
            .all(|(first, again)| first == again && *first < QUEUES));
        let used: std::collections::HashSet<usize> =
            picks.iter().map(|(queue, _)| *queue).collect();
        assert!(used.len() >= QUEUES / 2, "32 threads used {used:?}");
    }

    #[test]
    fn full_queues_drop_and_count() {
        let store = ClickStore::detached(1000);
        let click = || Click::new(Outcome::Redirect, false, None, "Lm25", "", None, None).unwrap();
        store
            .queued_max
            .store(2 * click().bytes(), Ordering::Relaxed);
        for _ in 0..3 {
            store.record(click());
        }
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 1);
        let taken = store.take();
        assert_eq!(taken.len(), 2);
        store.record(click());
        assert_eq!(
            store.counters.dropped.load(Ordering::Relaxed),
            2,
            "taken, not released"
        );
        store.release(taken.iter().map(Click::bytes).sum());
        store.record(click());
        assert_eq!(store.take().len(), 1, "room again once released");
    }

    /// Clicks with the longest headers a request may carry fill the queues
    /// in bytes, not in clicks: a 1 MiB bound keeps some 1,300 of them.
    #[test]
    fn the_queues_are_bounded_in_bytes() {
        let mut store = ClickStore::detached(1000);
        let bound = shortlink_core::settings::ClickQueueMb::try_from(1).unwrap();
        let mut settings = store.settings();
        settings.queue_bytes = bound.bytes();
        store.set(settings, None);
        let key = "K".repeat(255);
        let agent = "A".repeat(8192);
        let referrer = "r".repeat(253);
        let click = || {
            Click::new(
                Outcome::Redirect,
                false,
                None,
                &key,
                &agent,
                Some(&referrer),
                None,
            )
            .unwrap()
        };
        let largest = click().bytes();
        assert_eq!(largest, 2 * size_of::<Click>() + 255 + AGENT_MAX + 253);
        for _ in 0..10_000 {
            store.record(click());
        }
        let kept = store.take();
        assert!(kept.len() * largest <= bound.bytes());
        assert_eq!(kept.len(), bound.bytes() / largest);
        assert_eq!(
            kept.len() as u64 + store.counters.dropped.load(Ordering::Relaxed),
            10_000
        );
        store.release(kept.iter().map(Click::bytes).sum());
        assert_eq!(*store.queued.get_mut(), 0);
    }

    /// A click on a link with a click limit that finds the queues full is
    /// not queued, but still held against the limit, and handed to the
    /// flusher to count.
    #[test]
    fn limited_clicks_past_full_queues_still_count() {
        let store = ClickStore::detached(1000);
        store.queued_max.store(0, Ordering::Relaxed);
        let click = |outcome| Click::new(outcome, false, None, "Lm25", "", None, None).unwrap();
        store.record(click(Outcome::Limited));
        store.record(click(Outcome::Limited));
        store.record(click(Outcome::Redirect));
        assert!(store.take().is_empty());
        assert_eq!(store.pending("Lm25"), 2, "held against the limit");
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(
            store.take_overflow(),
            HashMap::from([(Box::from("Lm25"), 2)])
        );
        assert!(store.take_overflow().is_empty());
    }

    #[test]
    fn limited_clicks_are_pending_until_settled() {
        let store = ClickStore::detached(1000);
        let click = |outcome, key| Click::new(outcome, false, None, key, "", None, None).unwrap();
        store.record(click(Outcome::Limited, "Lm25"));
        store.record(click(Outcome::Limited, "Lm25"));
        store.record(click(Outcome::Redirect, "Lm25"));
        store.record(click(Outcome::Limited, "Other"));
        assert_eq!(store.pending("Lm25"), 2);
        store.settle(&HashMap::from([(Box::from("Lm25"), 1)]));
        assert_eq!(store.pending("Lm25"), 1);
        store.settle(&HashMap::from([(Box::from("Lm25"), 1)]));
        assert_eq!(store.pending("Lm25"), 0);
        assert_eq!(store.pending("Other"), 1);
    }
}
