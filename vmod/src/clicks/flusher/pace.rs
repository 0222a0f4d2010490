//! How often each part of a link's counts is sealed. Its totals go at every
//! seal: click limits and the statistics' click counts read them. Its
//! history (days, hours, minutes, details, visitors) goes with them at the
//! first [`HISTORY_SEALS`] seals that find the link clicked in a round, and
//! waits, summed, for the round's end after that: a round lasts
//! [`HISTORY_EVERY`] seals, the last of them whole, which counts as the
//! first of the next round's. A link clicked every second then costs the
//! clicks' Redis one field a flush and its history two flushes in ten
//! (three in the round its clicks start), where it cost about ten calls
//! every flush; a link clicked in one burst (even one a flush cuts in
//! two), as the long tail's are, is sealed whole at once as before.

use std::hash::BuildHasher as _;

use super::Map;

/// Seals in a round; the last one is whole. With the default flush
/// interval (1 s), and a tally sealed at every flush while history waits,
/// a hot link's history reaches Redis within 10 s, which is also what a
/// crash of Varnish may lose of it; its totals within one interval, as
/// before. Ten rather than five took a quarter to a third off the click
/// pipeline's CPU per click of `hit` (ADR 0025).
pub(super) const HISTORY_EVERY: u32 = 10;

/// Seals of a round that take a link's history before it waits.
pub(super) const HISTORY_SEALS: u8 = 2;

/// Part of the backlog the history waiting may hold before it is all
/// sealed at once: far below half, where clicks would start counting
/// without details.
const HISTORY_SHARE_OF_BACKLOG: usize = 4;

/// The flusher's pace: seals since the last whole one, and how many of
/// them took each link's history (by a hash of its key; a collision only
/// makes a link's history wait for the round's end).
#[derive(Default)]
pub(super) struct Pace {
    seals: u32,
    sealed: Map<u64, u8>,
}

impl Pace {
    /// Whether this seal takes every link's history, given the entries the
    /// open tally holds: the last of a round of [`HISTORY_EVERY`], or one
    /// whose tally holds more than its share of `backlog`. A whole seal
    /// ends the round.
    pub(super) fn whole(&mut self, entries: usize, backlog: usize) -> bool {
        self.seals += 1;
        let whole = self.seals >= HISTORY_EVERY || entries >= backlog / HISTORY_SHARE_OF_BACKLOG;
        if whole {
            self.seals = 0;
            self.sealed.clear();
        }
        whole
    }

    /// Whether the history of `key` waits (`whole` is this seal's
    /// [`Pace::whole`]): it does once [`HISTORY_SEALS`] seals of the round
    /// took it; otherwise it is sealed now, and counted.
    pub(super) fn defers(&mut self, key: &str, whole: bool) -> bool {
        let hash = self.sealed.hasher().hash_one(key);
        let seals = self.sealed.entry(hash).or_insert(0);
        if !whole && *seals >= HISTORY_SEALS {
            return true;
        }
        *seals = seals.saturating_add(1);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_seal_of_a_round_is_whole() {
        let mut pace = Pace::default();
        let wholes: Vec<bool> = (0..2 * HISTORY_EVERY)
            .map(|_| pace.whole(0, 1000))
            .collect();
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
    fn a_links_history_waits_once_sealed_twice_in_the_round() {
        let mut pace = Pace::default();
        assert!(!pace.whole(0, 1000));
        assert!(!pace.defers("Lm25", false), "first seen: sealed at once");
        assert!(!pace.whole(0, 1000));
        assert!(
            !pace.defers("Lm25", false),
            "a burst a flush cut in two: sealed at once"
        );
        assert!(!pace.whole(0, 1000));
        assert!(
            pace.defers("Lm25", false),
            "sealed twice in this round: waits"
        );
        assert!(!pace.defers("Lm26", false), "another link: at once");
        for seal in 4..HISTORY_EVERY {
            assert!(!pace.whole(0, 1000), "seal {seal} of the round");
            assert!(pace.defers("Lm25", false), "still waits at seal {seal}");
        }
        assert!(pace.whole(0, 1000), "the round's end");
        assert!(!pace.defers("Lm25", true), "a whole seal takes every link");
        assert!(!pace.whole(0, 1000));
        assert!(
            !pace.defers("Lm25", false),
            "a new round: sealed once so far"
        );
        assert!(!pace.whole(0, 1000));
        assert!(pace.defers("Lm25", false), "then twice: waits");
    }
}
