//! Click limits on the request path: what a lookup of a link with a click
//! limit adds to the link, its people's clicks stored and those this
//! Varnish counted and has not stored yet.

use std::sync::atomic::Ordering;

use shortlink_core::clicks::Total;
use shortlink_core::Slot;

use crate::backend::Resolver;
use crate::lookups::{count_in, RedisPool};

impl Resolver {
    /// People's clicks on `key` stored in Redis, and the clicks this
    /// Varnish counted on it and has not stored yet. With clicks in a Redis
    /// of their own, the stored count is read from the copy the flushers
    /// keep in the links' Redis, which no flush holds up; from the clicks'
    /// Redis only while there is no copy (a link limited by hand, until its
    /// first stored click is copied).
    pub(crate) fn clicks_of(&self, space: usize, key: &str) -> Result<(u64, u64), String> {
        let clicks = &self.clicks[space];
        // Read before the count: a flush that stores or copies some of
        // these clicks meanwhile can only make them counted twice (the link
        // may answer as expired early, uncached, until that flush is
        // answered), never not at all.
        let pending = clicks.pending(key);
        let uncopied = clicks.uncopied(key);
        let slot = clicks.names.total_slot(Total::People, key);
        if let Some(copy) = self.stored_count(&self.pool, &slot)? {
            return Ok((copy, pending));
        }
        let Some(click_pool) = &self.click_pool else {
            return Ok((0, pending));
        };
        let stored = self.stored_count(click_pool, &slot)?.unwrap_or(0);
        // That total holds the clicks stored and not copied yet.
        Ok((stored, pending.saturating_sub(uncopied)))
    }

    /// The count `slot` holds in `pool`'s Redis, if any.
    fn stored_count(&self, pool: &RedisPool, slot: &Slot<'_>) -> Result<Option<u64>, String> {
        self.stats.lookups.fetch_add(1, Ordering::Relaxed);
        match pool.hget(slot) {
            Ok(None) => Ok(None),
            Ok(Some(value)) => count_in(&value).map(Some).ok_or_else(|| {
                format!(
                    "HGET {} {}: the click count is not a number",
                    slot.hash, slot.field
                )
            }),
            Err(error) => Err(self.failed(slot, &error)),
        }
    }
}
