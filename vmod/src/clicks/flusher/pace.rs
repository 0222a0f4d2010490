//! How often each part of a link's counts is sealed. Its totals go at every
//! flush: click limits and the statistics' click counts read them. Its
//! history (days, hours, minutes, details, visitors) goes at once for a
//! link not sealed in the last few flushes, and otherwise waits for every
//! [`HISTORY_EVERY`]th flush: a link clicked every second then costs the
//! clicks' Redis one field a flush instead of about ten calls, while a
//! link's first clicks, the long tail's only ones, are sealed whole as
//! before and cost no more.

use std::hash::BuildHasher as _;

use super::Set;

/// Every this many seals, the whole tally is sealed. With the default
/// flush interval (1 s), a hot link's history reaches Redis within 5 s,
/// which is also what a crash of Varnish may lose of it; its totals within
/// one interval, as before.
pub(super) const HISTORY_EVERY: u32 = 5;

/// Part of the backlog the history waiting may hold before it is all
/// sealed at once: far below half, where clicks would start counting
/// without details.
const HISTORY_SHARE_OF_BACKLOG: usize = 4;

/// The flusher's pace: seals since the last whole one, and the links whose
/// history was sealed since (hashes of their keys; a collision only makes
/// a link's history wait for the next whole seal).
#[derive(Default)]
pub(super) struct Pace {
    seals: u32,
    recent: Set<u64>,
}

impl Pace {
    /// Whether this seal takes every link's history, given the entries the
    /// open tally holds: every [`HISTORY_EVERY`]th seal, or one whose
    /// tally holds more than its share of `backlog`. A whole seal starts a
    /// new round, forgetting which links were sealed.
    pub(super) fn whole(&mut self, entries: usize, backlog: usize) -> bool {
        self.seals += 1;
        let whole = self.seals >= HISTORY_EVERY || entries >= backlog / HISTORY_SHARE_OF_BACKLOG;
        if whole {
            self.seals = 0;
            self.recent.clear();
        }
        whole
    }

    /// Whether the history of `key` waits (`whole` is this seal's
    /// [`Pace::whole`]): it does if sealed since the last whole seal;
    /// otherwise it is sealed now, and noted as sealed.
    pub(super) fn defers(&mut self, key: &str, whole: bool) -> bool {
        let first = self.recent.insert(self.recent.hasher().hash_one(key));
        !whole && !first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fifth_seal_is_whole() {
        let mut pace = Pace::default();
        let wholes: Vec<bool> = (0..10).map(|_| pace.whole(0, 1000)).collect();
        let every = HISTORY_EVERY as usize;
        for (seal, whole) in wholes.iter().enumerate() {
            assert_eq!(*whole, (seal + 1) % every == 0, "seal {}", seal + 1);
        }
    }

    #[test]
    fn a_tally_holding_a_quarter_of_the_backlog_is_sealed_whole() {
        let mut pace = Pace::default();
        assert!(!pace.whole(249, 1000));
        assert!(pace.whole(250, 1000));
        assert!(!pace.whole(0, 1000), "a new round starts");
    }

    #[test]
    fn a_links_history_waits_only_once_sealed_in_the_round() {
        let mut pace = Pace::default();
        assert!(!pace.whole(0, 1000));
        assert!(!pace.defers("Lm25", false), "first seen: sealed at once");
        assert!(pace.defers("Lm25", false), "sealed in this round: waits");
        assert!(!pace.defers("Lm26", false));
        while !pace.whole(0, 1000) {}
        assert!(!pace.defers("Lm25", true), "a whole seal takes every link");
        assert!(!pace.whole(0, 1000));
        assert!(
            pace.defers("Lm25", false),
            "sealed by the whole seal: waits for the next"
        );
        assert!(!pace.defers("Lm26", false), "not clicked then: at once");
    }
}
