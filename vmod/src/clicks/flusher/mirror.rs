//! Click limits' counts copied to the links' Redis. With clicks in a Redis
//! of their own, a lookup of a limited link reads its stored people's
//! clicks from the links' Redis, where it read the link: the clicks' Redis
//! runs flush scripts, which a read there would wait behind, and it may run
//! at a lower CPU priority than Varnish (see `docs/deploying.md`).
//!
//! Once Redis has stored a tally, its limited links' people's totals are
//! read back from the clicks' Redis and raised to in the links' Redis,
//! under the same names; only then are those clicks settled (no longer
//! added as pending by lookups). A copy only grows, so flushers of several
//! Varnish nodes may copy in any order; one that fails is tried again at
//! the next flush, its clicks still pending meanwhile, and raised to no
//! less than the highest total read for it (the store keeps both, see
//! `ClickStore::stored_limited`, so a flusher started afresh goes on).

use std::sync::atomic::Ordering;

use shortlink_core::clicks::Total;
use shortlink_core::Slot;

use super::{Flusher, Map};
use crate::clicks::destination::{lane_of, Lane};
use crate::clicks::store::ClickStore;
use crate::lookups::{count_in, hget_reply};

/// Copies raised per round trip of the lookup pool: the lookups of
/// requests queue beside them, and wait for no more than this.
const RAISE_CHUNK: usize = 64;

impl Flusher {
    /// Copies the stored people's totals of the limited links waiting for
    /// one to the links' Redis, and settles the clicks of those copied.
    /// Fails when the clicks' Redis could not be read (its connection is
    /// then suspect); answers the problems of single links otherwise,
    /// whose clicks stay pending and are tried again at the next flush.
    pub(super) fn copy_limits(&mut self, store: &ClickStore) -> Result<Vec<String>, String> {
        let waiting = store.waiting_copies();
        if waiting.is_empty() {
            return Ok(Vec::new());
        }
        let Some(links) = store.mirror() else {
            for (key, uncopied) in &waiting {
                store.copied(key, uncopied.clicks);
            }
            return Ok(Vec::new());
        };
        let names = &store.names;
        let slots: Vec<Slot<'_>> = (waiting.iter())
            .map(|(key, _)| names.total_slot(Total::People, key))
            .collect();
        let mut by_lane: Map<Lane, Vec<usize>> = Map::default();
        for (index, slot) in slots.iter().enumerate() {
            let lane = lane_of(names.layout(), &slot.hash);
            by_lane.entry(lane).or_default().push(index);
        }
        let destination = self.destination.as_mut().ok_or("no destination")?;
        let mut problems = Vec::new();
        let mut totals = Vec::with_capacity(slots.len());
        for (lane, indexes) in by_lane {
            let mut pipe = redis::pipe();
            for &index in &indexes {
                pipe.cmd("HGET")
                    .arg(&slots[index].hash)
                    .arg(slots[index].field);
            }
            let replies = destination.exchange(lane, &pipe, indexes.len())?;
            for (index, reply) in indexes.into_iter().zip(replies) {
                match count_of(&reply) {
                    Ok(total) => {
                        let highest = store.read_total(&waiting[index].0, total);
                        totals.push((slots[index].clone(), highest, index));
                    }
                    Err(problem) => problems.push(format!(
                        "reading {} {} in the clicks' Redis: {problem}",
                        slots[index].hash, slots[index].field
                    )),
                }
            }
        }
        for chunk in totals.chunks(RAISE_CHUNK) {
            let counts: Vec<(Slot<'_>, u64)> = (chunk.iter())
                .map(|(slot, total, _)| (slot.clone(), *total))
                .collect();
            for ((slot, _, index), outcome) in chunk.iter().zip(links.raise(&counts)) {
                match outcome {
                    Ok(_) => store.copied(&waiting[*index].0, waiting[*index].1.clicks),
                    Err(error) => problems.push(format!(
                        "copying the click count {} {} to the links' Redis: {error}",
                        slot.hash, slot.field
                    )),
                }
            }
        }
        Ok(problems)
    }

    /// Counts copies that failed as a flush failure, and logs the first
    /// problem of an outage once, not at every flush.
    pub(super) fn report_copies(&mut self, problems: Vec<String>, store: &ClickStore) {
        let Some(first) = problems.into_iter().next() else {
            self.copy_reported = None;
            return;
        };
        store
            .counters
            .flush_failures
            .fetch_add(1, Ordering::Relaxed);
        if self.copy_reported.as_ref() != Some(&first) {
            eprintln!("shortlink: copying click limits' counts failed, will retry: {first}");
            self.copy_reported = Some(first);
        }
    }
}

/// A total as the clicks' Redis answers it: none yet is 0.
fn count_of(reply: &redis::Value) -> Result<u64, String> {
    match hget_reply(reply.clone()) {
        Ok(None) => Ok(0),
        Ok(Some(bytes)) => {
            count_in(&bytes).ok_or_else(|| format!("a click total is not a number: {bytes:?}"))
        }
        Err(error) => Err(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Duration;

    use shortlink_core::clicks::{CountNames, Layout};
    use shortlink_core::KeyScheme;

    use super::super::tests::FIREFOX;
    use super::super::Flusher;
    use crate::clicks::click::{Click, Outcome};
    use crate::clicks::store::{ClickStore, Reach};
    use crate::lookups::{PoolSettings, RedisPool};

    fn limited_click(key: &str) -> Click<'_> {
        let client = std::net::IpAddr::from([192, 0, 2, 7]);
        Click::new(
            Outcome::Limited,
            false,
            Some(client),
            key,
            FIREFOX,
            None,
            None,
        )
        .unwrap()
    }

    fn links_pool(links_url: &str) -> Arc<RedisPool> {
        let pool = RedisPool::new(&PoolSettings {
            url: links_url,
            connect_timeout: Duration::from_millis(500),
            command_timeout: Duration::from_millis(500),
            size: 2,
        });
        Arc::new(pool.unwrap())
    }

    /// A store flushing to `clicks_url` that copies limited links' counts
    /// to `links_url`.
    fn copying_store(clicks_url: &str, links_url: &str) -> ClickStore {
        let settings = ClickStore::detached(1000).settings();
        let reach = Reach::Master(
            redis_target::Locator::open(clicks_url, settings.redis_timeouts()).unwrap(),
        );
        let names = CountNames::new(&KeyScheme::default(), Layout::Plain).unwrap();
        ClickStore::new(
            clicks_url,
            reach,
            names,
            settings,
            Some(links_pool(links_url)),
        )
    }

    /// With clicks in a Redis of their own (here database 0, the links in
    /// 1), a limited link's clicks stay pending until the links' Redis holds
    /// its stored people's total; the copy only grows; and while it cannot
    /// be made, the clicks stay pending, so no lookup misses them, even
    /// across a flusher started afresh, until a later flush makes it.
    #[test]
    fn a_limited_links_clicks_settle_once_its_total_is_copied() {
        let dir = test_support::work_dir("flush-copy").unwrap();
        let redis =
            test_support::Redis::start(&dir, test_support::Persistence::Scratch, "").unwrap();
        let links_url = redis.url.replace("/0", "/1");
        let get = |db: &str, hash: &str, field: &str| -> Option<String> {
            let url = redis.url.replace("/0", &format!("/{db}"));
            let mut connection = redis::Client::open(url).unwrap().get_connection().unwrap();
            redis::cmd("HGET")
                .arg(hash)
                .arg(field)
                .query(&mut connection)
                .unwrap()
        };
        let store = copying_store(&redis.url, &links_url);
        let settings = store.settings();
        let mut flusher = Flusher::new();
        for _ in 0..3 {
            store.record(&limited_click("Lm25"));
        }
        assert_eq!(store.pending("Lm25"), 3);
        flusher.tick(&store, &settings);
        assert_eq!(get("0", "short:clicks:Lm", "25").as_deref(), Some("3"));
        assert_eq!(
            get("1", "short:clicks:Lm", "25").as_deref(),
            Some("3"),
            "copied"
        );
        assert_eq!(store.pending("Lm25"), 0, "settled once copied");

        // Another Varnish's flusher copied a larger total meanwhile.
        let mut links = redis::Client::open(links_url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let (): () = redis::cmd("HSET")
            .arg("short:clicks:Lm")
            .arg("25")
            .arg(10)
            .query(&mut links)
            .unwrap();
        store.record(&limited_click("Lm25"));
        flusher.tick(&store, &settings);
        assert_eq!(get("0", "short:clicks:Lm", "25").as_deref(), Some("4"));
        assert_eq!(
            get("1", "short:clicks:Lm", "25").as_deref(),
            Some("10"),
            "only grows"
        );
        assert_eq!(store.pending("Lm25"), 0);

        // The links' Redis away: the clicks are stored, and stay pending.
        let away = copying_store(&redis.url, "redis://127.0.0.1:1/0");
        let mut flusher = Flusher::new();
        away.record(&limited_click("Qx99"));
        away.record(&limited_click("Qx99"));
        flusher.tick(&away, &settings);
        assert_eq!(get("0", "short:clicks:Qx", "99").as_deref(), Some("2"));
        assert_eq!(away.pending("Qx99"), 2, "not copied, still pending");
        assert!(away.counters.flush_failures.load(Ordering::Relaxed) > 0);

        assert_eq!(
            away.uncopied("Qx99"),
            2,
            "stored, in the clicks' Redis's total"
        );

        // A flusher that gives up after a panic leaves them to the next
        // one; the clicks' Redis loses a write meanwhile; then the links'
        // Redis is back: the next flush, with no click to send, copies the
        // highest total read, and settles them.
        flusher.abandon(&away);
        let mut flusher = Flusher::new();
        let (): () = redis
            .query(&["HSET", "short:clicks:Qx", "99", "1"])
            .unwrap();
        away.set(settings.clone(), Some(links_pool(&links_url)));
        flusher.tick(&away, &settings);
        assert_eq!(get("1", "short:clicks:Qx", "99").as_deref(), Some("2"));
        assert_eq!(away.pending("Qx99"), 0, "settled once copied");
        assert_eq!(away.uncopied("Qx99"), 0);
        drop(redis);
        let _ = std::fs::remove_dir_all(dir);
    }
}
