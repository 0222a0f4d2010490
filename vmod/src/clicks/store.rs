//! The click store: the queues workers record clicks into, without a Redis
//! call on the request path, and what the flusher and the lookups read of
//! it (settings, counters, clicks pending on limited links).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use shortlink_core::clicks::CountNames;

use super::click::{Click, Clicks, Outcome};
use crate::lookups::RedisPool;
#[cfg(test)]
use shortlink_core::{clicks::Layout, KeyScheme};

/// Queues clicks are spread over, so workers seldom wait for each other.
const QUEUES: usize = 16;

/// Most room an emptied queue may keep for later takes: a second's clicks
/// of a busy Varnish's queue (some 1,300 clicks of browsers a queue at
/// 20,000 clicks a second) fit, so such a queue seldom grows again.
const SPARE_ROOM_MAX: usize = 1024 * 1024;

/// Time a flush may take per batch: a batch is at most a few thousand
/// script arguments, a few milliseconds of Redis's time when it has a core
/// of its own, tens when Varnish and its clients hold both.
const BATCH_WAIT: Duration = Duration::from_millis(100);

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
    pub visits: VisitBounds,
}

/// The visit log's bounds (see `shortlink_core::clicks::visits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VisitBounds {
    /// Records kept per link.
    pub per_link: usize,
    /// Records kept per domain, and again of its orphan visits.
    pub per_domain: usize,
    /// How long a record is kept.
    pub days: Duration,
}

impl VisitBounds {
    /// Whether any visit is logged.
    pub fn on(self) -> bool {
        self.per_link > 0 || self.per_domain > 0
    }
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
    /// each take: the workers' pushes then seldom allocate.
    spares: Mutex<Vec<Clicks>>,
    /// Bytes of the clicks in the queues, and their bound (from the newest
    /// settings, read here so that recording a click takes no lock).
    queued: AtomicUsize,
    queued_max: AtomicUsize,
    /// Whether orphan visits are recorded (from the newest settings, read
    /// here so that the request path takes no lock).
    visits_on: AtomicBool,
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
    pub fn record(&self, click: &Click<'_>) {
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

    /// Every click recorded so far, taken out of the queues, a queue's
    /// clicks at a time; each still holds its room in the queues' bound
    /// until [`Self::release`]d, so that clicks waiting for the flusher's
    /// backlog count in it too. Give the emptied queues back
    /// ([`Self::recycle`]).
    pub fn take(&self) -> Vec<Clicks> {
        let mut spares = lock(&self.spares);
        let mut taken = Vec::new();
        for queue in &self.queues {
            // Under the queue's lock only a swap, with an emptied queue
            // that has room: the flusher runs below the workers' priority,
            // and may wait long for a core while it holds the lock. A queue
            // no worker recorded into keeps its own, so that the spares'
            // room goes to the queues in use.
            let mut queue = lock(&queue.0);
            if !queue.is_empty() {
                let mut batch = spares.pop().unwrap_or_default();
                std::mem::swap(&mut batch, &mut *queue);
                taken.push(batch);
            }
        }
        taken
    }

    /// Takes back queues the flusher has emptied, for later takes: up to
    /// two for each queue, none of more than [`SPARE_ROOM_MAX`] bytes of
    /// room, so that what a burst made them grow is let go.
    pub fn recycle(&self, emptied: impl IntoIterator<Item = Clicks>) {
        let mut spares = lock(&self.spares);
        for mut queue in emptied {
            if spares.len() < 2 * QUEUES && queue.room() <= SPARE_ROOM_MAX {
                queue.clear();
                spares.push(queue);
            }
        }
    }

    /// Takes `bytes` of clicks ([`Click::bytes`]) out of the queues'
    /// bound: a click taken holds its room until tallied or given up.
    pub fn release(&self, bytes: usize) {
        self.queued.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Counts `clicks` made elsewhere in the queues' bound, as if recorded.
    #[cfg(test)]
    pub fn hold(&self, clicks: &[Click<'_>]) {
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
            visits_on: AtomicBool::new(settings.visits.on()),
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
            // Off: tests of the log turn it on with bounds of their own.
            visits: VisitBounds {
                per_link: 0,
                per_domain: 0,
                days: Duration::from_hours(24),
            },
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

    /// Whether the visit log is on: orphan visits are recorded only then.
    pub fn visits_on(&self) -> bool {
        self.visits_on.load(Ordering::Relaxed)
    }

    /// Takes the newest VCL's settings, and its links' Redis when clicks
    /// have a Redis of their own.
    pub(crate) fn set(&self, settings: CountSettings, mirror: Option<Arc<RedisPool>>) {
        self.queued_max
            .store(settings.queue_bytes, Ordering::Relaxed);
        self.visits_on
            .store(settings.visits.on(), Ordering::Relaxed);
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
struct Queue(Mutex<Clicks>);

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
    use crate::clicks::click::AGENT_MAX;

    fn clicks_in(taken: &[Clicks]) -> usize {
        taken.iter().map(Clicks::len).sum()
    }

    fn bytes_in(taken: &[Clicks]) -> usize {
        taken
            .iter()
            .flat_map(Clicks::iter)
            .map(|click| click.bytes())
            .sum()
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
            store.record(&click());
        }
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 1);
        let taken = store.take();
        assert_eq!(clicks_in(&taken), 2);
        store.record(&click());
        assert_eq!(
            store.counters.dropped.load(Ordering::Relaxed),
            2,
            "taken, not released"
        );
        store.release(bytes_in(&taken));
        store.record(&click());
        assert_eq!(clicks_in(&store.take()), 1, "room again once released");
    }

    /// Clicks with the longest headers a request may carry fill the queues
    /// in bytes, not in clicks: a 1 MiB bound keeps some 650 of them.
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
        assert_eq!(largest, 1624, "docs quote it");
        assert_eq!(click().user_agent().len(), AGENT_MAX);
        for _ in 0..10_000 {
            store.record(&click());
        }
        let kept = clicks_in(&store.take());
        assert_eq!(kept, bound.bytes() / largest);
        assert_eq!(
            kept as u64 + store.counters.dropped.load(Ordering::Relaxed),
            10_000
        );
        store.release(kept * largest);
        assert_eq!(*store.queued.get_mut(), 0);
    }

    /// Queues the flusher has read go back to the store, emptied and their
    /// room kept, for later takes; but no more than two for each queue,
    /// and none a burst made grow past [`SPARE_ROOM_MAX`].
    #[test]
    fn read_queues_are_kept_for_later_takes_within_bounds() {
        let store = ClickStore::detached(1000);
        let agent = "A".repeat(AGENT_MAX);
        let click = Click::new(Outcome::Redirect, false, None, "Lm25", &agent, None, None).unwrap();
        let filled = |clicks: usize| -> Clicks { std::iter::repeat_n(click, clicks).collect() };
        let burst = filled(2 * SPARE_ROOM_MAX / click.bytes());
        assert!(burst.room() > SPARE_ROOM_MAX);
        store.recycle([burst]);
        assert!(lock(&store.spares).is_empty(), "too large to keep");
        store.recycle((0..3 * QUEUES).map(|_| filled(10)));
        let spares = lock(&store.spares);
        assert_eq!(spares.len(), 2 * QUEUES);
        assert!(spares
            .iter()
            .all(|spare| spare.is_empty() && spare.room() > 0));
        drop(spares);
        store.record(&click);
        assert_eq!(clicks_in(&store.take()), 1);
        assert_eq!(
            lock(&store.spares).len(),
            2 * QUEUES - 1,
            "one in its queue's place"
        );
    }

    /// Counts the allocations of the thread that makes them, for
    /// [`recording_a_click_allocates_nothing_once_the_queues_have_room`]:
    /// the unit tests' allocator is the system's, counted.
    struct CountingAllocator;

    thread_local! {
        static ALLOCATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn count_allocation() {
        // Not while the thread is being torn down.
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
    }

    // SAFETY: every call is handed to the system allocator as it came.
    unsafe impl std::alloc::GlobalAlloc for CountingAllocator {
        unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
            count_allocation();
            unsafe { std::alloc::System.alloc(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
            unsafe { std::alloc::System.dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
            count_allocation();
            unsafe { std::alloc::System.realloc(ptr, layout, size) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: CountingAllocator = CountingAllocator;

    /// The request path's part of counting allocates nothing: a click is
    /// copied into its queue's buffers, which the flusher gives back
    /// emptied with their room, so that from the third flush on a steady
    /// flow of clicks is recorded without a call to the allocator.
    #[test]
    fn recording_a_click_allocates_nothing_once_the_queues_have_room() {
        let store = ClickStore::detached(1000);
        let agent = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
        let allocations: Vec<usize> = (0..4)
            .map(|_| {
                let before = ALLOCATIONS.with(std::cell::Cell::get);
                for n in 0..5000 {
                    let key = if n % 2 == 0 { "Lm25" } else { "Lm26" };
                    let referrer = (n % 3 == 0).then_some("news.example.com");
                    let click =
                        Click::new(Outcome::Redirect, false, None, key, agent, referrer, None);
                    store.record(&click.unwrap());
                }
                let recorded = ALLOCATIONS.with(std::cell::Cell::get) - before;
                let taken = store.take();
                store.release(bytes_in(&taken));
                store.recycle(taken);
                recorded
            })
            .collect();
        assert!(allocations[0] > 0, "the first flush's queues grow");
        assert_eq!(
            allocations[2..],
            [0, 0],
            "allocations at each flush: {allocations:?}"
        );
    }

    /// A click on a link with a click limit that finds the queues full is
    /// not queued, but still held against the limit, and handed to the
    /// flusher to count.
    #[test]
    fn limited_clicks_past_full_queues_still_count() {
        let store = ClickStore::detached(1000);
        store.queued_max.store(0, Ordering::Relaxed);
        let click = |outcome| Click::new(outcome, false, None, "Lm25", "", None, None).unwrap();
        store.record(&click(Outcome::Limited));
        store.record(&click(Outcome::Limited));
        store.record(&click(Outcome::Redirect));
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
        store.record(&click(Outcome::Limited, "Lm25"));
        store.record(&click(Outcome::Limited, "Lm25"));
        store.record(&click(Outcome::Redirect, "Lm25"));
        store.record(&click(Outcome::Limited, "Other"));
        assert_eq!(store.pending("Lm25"), 2);
        store.settle(&HashMap::from([(Box::from("Lm25"), 1)]));
        assert_eq!(store.pending("Lm25"), 1);
        store.settle(&HashMap::from([(Box::from("Lm25"), 1)]));
        assert_eq!(store.pending("Lm25"), 0);
        assert_eq!(store.pending("Other"), 1);
    }
}
