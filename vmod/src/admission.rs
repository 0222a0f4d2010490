//! Which links Varnish keeps: a key is cached from its second request
//! within a window, so that a key asked for once costs its lookup and no
//! cache object (made, filled, indexed, expired, and never hit).
//!
//! The keys asked for lately are remembered as bits of two Bloom filters:
//! new keys go into the newer; a key is known if either holds it. When the
//! newer has been filling for a window, or holds as many keys as it can
//! without too many false hits, the older is emptied and takes its place.
//! A key is so remembered for one to two windows, in fixed memory.
//!
//! A false hit (a key never asked for that both probes find set) caches
//! its answer at the first request, as every answer was cached before;
//! two first requests at once may both go uncached. Neither is ever wrong,
//! so the bits are read and written with relaxed atomics and no lock.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Bits of one filter: 1 MiB.
const BITS: usize = 1 << 23;
/// Keys one filter takes before it turns: with two probes a key never
/// asked for is then found in it about 5 % of the time.
const CAPACITY: usize = BITS / 8;

/// The keys asked for in the last one to two windows.
pub struct Admission {
    /// Zero: every answer is cached at its first request.
    window: Duration,
    filters: [Filter; 2],
    /// Index of the filter new keys go into.
    newer: AtomicUsize,
    /// When the newer filter started, in ms since `epoch`.
    newer_since_ms: AtomicU64,
    epoch: Instant,
    /// Held by the one request that turns the filters.
    turning: AtomicBool,
    hasher: foldhash::fast::RandomState,
}

struct Filter {
    words: Box<[AtomicU64]>,
    keys: AtomicUsize,
}

impl Filter {
    fn new() -> Self {
        Self {
            words: (0..BITS / 64).map(|_| AtomicU64::new(0)).collect(),
            keys: AtomicUsize::new(0),
        }
    }

    /// A filter never read: admission turned off.
    fn empty() -> Self {
        Self {
            words: Box::new([]),
            keys: AtomicUsize::new(0),
        }
    }

    fn holds(&self, probes: [usize; 2]) -> bool {
        probes
            .iter()
            .all(|&bit| self.words[bit / 64].load(Ordering::Relaxed) & (1 << (bit % 64)) != 0)
    }

    fn add(&self, probes: [usize; 2]) {
        for bit in probes {
            self.words[bit / 64].fetch_or(1 << (bit % 64), Ordering::Relaxed);
        }
        self.keys.fetch_add(1, Ordering::Relaxed);
    }

    fn clear(&self) {
        for word in &*self.words {
            word.store(0, Ordering::Relaxed);
        }
        self.keys.store(0, Ordering::Relaxed);
    }
}

impl Admission {
    /// Remembers keys for `window` (zero: admits everything, and holds no
    /// filter).
    pub fn new(window: Duration) -> Self {
        let filters = if window.is_zero() {
            [Filter::empty(), Filter::empty()]
        } else {
            [Filter::new(), Filter::new()]
        };
        Self {
            window,
            filters,
            newer: AtomicUsize::new(0),
            newer_since_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            turning: AtomicBool::new(false),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// Whether the answer for `path` on `domain` may be cached: it was asked
    /// for within the window. Otherwise it is remembered, and `false`.
    pub fn admit(&self, path: &[u8], domain: Option<&[u8]>) -> bool {
        if self.window.is_zero() {
            return true;
        }
        self.turn_if_due();
        let probes = self.probes(path, domain);
        if self.filters.iter().any(|filter| filter.holds(probes)) {
            return true;
        }
        self.filters[self.newer.load(Ordering::Relaxed)].add(probes);
        false
    }

    fn probes(&self, path: &[u8], domain: Option<&[u8]>) -> [usize; 2] {
        let hash = self.hasher.hash_one((path, domain));
        // Two probes from the two halves of one 64-bit hash.
        #[allow(clippy::cast_possible_truncation)]
        let (low, high) = (hash as u32 as usize, (hash >> 32) as usize);
        [low % BITS, high % BITS]
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn window_ms(&self) -> u64 {
        u64::try_from(self.window.as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether the newer filter has filled for a window, or is full.
    fn due(&self) -> bool {
        let newer = self.newer.load(Ordering::Relaxed);
        let since = self.newer_since_ms.load(Ordering::Relaxed);
        self.now_ms().saturating_sub(since) >= self.window_ms()
            || self.filters[newer].keys.load(Ordering::Relaxed) >= CAPACITY
    }

    fn turn_if_due(&self) {
        if !self.due()
            || self
                .turning
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        // Read again under the flag (the last turn's writes happened before
        // its release of it): a request that read the state before another
        // turned the filters must not turn them a second time.
        if self.due() {
            let newer = self.newer.load(Ordering::Relaxed);
            let now = self.now_ms();
            let older = 1 - newer;
            self.filters[older].clear();
            // Filters turn only on requests: after two windows without a
            // miss, the newer one's keys are all older than a window too.
            let since = self.newer_since_ms.load(Ordering::Relaxed);
            if now.saturating_sub(since) >= self.window_ms().saturating_mul(2) {
                self.filters[newer].clear();
            }
            self.newer.store(older, Ordering::Relaxed);
            self.newer_since_ms.store(now, Ordering::Relaxed);
        }
        self.turning.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_admitted_from_its_second_request() {
        let admission = Admission::new(Duration::from_mins(10));
        assert!(!admission.admit(b"/l/Lm25", None));
        assert!(admission.admit(b"/l/Lm25", None));
        assert!(admission.admit(b"/l/Lm25", None));
        // The same key on another domain is another link.
        assert!(!admission.admit(b"/l/Lm25", Some(b"go.example")));
        assert!(admission.admit(b"/l/Lm25", Some(b"go.example")));
        assert!(!admission.admit(b"/l/Other", None));
    }

    #[test]
    fn a_zero_window_admits_every_first_request() {
        let admission = Admission::new(Duration::ZERO);
        assert!(admission.admit(b"/l/Lm25", None));
        assert!(admission.admit(b"/l/Other", None));
    }

    #[test]
    fn keys_are_forgotten_after_two_windows() {
        let window = Duration::from_secs(1);
        let admission = Admission::new(window);
        assert!(!admission.admit(b"/l/Lm25", None));
        // Into the second window (unless this sleep wakes a whole window
        // late): still known, from the older filter, after one turn.
        std::thread::sleep(window + Duration::from_millis(50));
        assert!(admission.admit(b"/l/Lm25", None));
        // Past the second: the filters turn again and the key is gone.
        std::thread::sleep(window + Duration::from_millis(50));
        assert!(!admission.admit(b"/l/Lm25", None), "two windows on");
    }

    #[test]
    fn keys_are_forgotten_after_two_windows_without_a_miss() {
        let window = Duration::from_millis(40);
        let admission = Admission::new(window);
        assert!(!admission.admit(b"/l/Lm25", None));
        // No request for two windows: the next one turns the filters once,
        // and forgets the key all the same.
        std::thread::sleep(2 * window + Duration::from_millis(10));
        assert!(!admission.admit(b"/l/Lm25", None));
    }

    #[test]
    fn a_full_filter_turns_and_few_new_keys_pass_for_known() {
        let admission = Admission::new(Duration::from_mins(10));
        let (mut asked, mut known_at_first) = (0_usize, 0_usize);
        while admission.newer.load(Ordering::Relaxed) == 0 {
            if admission.admit(format!("/l/k{asked}").as_bytes(), None) {
                known_at_first += 1;
            }
            asked += 1;
            assert!(asked <= 2 * CAPACITY, "the filter never turned");
        }
        // It turned at the first request after holding CAPACITY keys, and
        // that request's key went into the emptied one (unless taken for
        // known, by the full one).
        let added = asked - known_at_first;
        assert!(
            (CAPACITY..=CAPACITY + 1).contains(&added),
            "{added} keys added"
        );
        assert_eq!(
            admission.filters[1].keys.load(Ordering::Relaxed),
            added - CAPACITY
        );
        // False hits among keys never asked for stay under 5 %.
        assert!(
            known_at_first * 100 < asked * 5,
            "{known_at_first} of {asked} first requests taken for known"
        );
        // The keys of the full filter are still known.
        assert!(admission.admit(b"/l/k0", None));
    }
}
