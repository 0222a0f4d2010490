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
//! the next flush, its clicks still pending meanwhile.

use std::collections::HashMap;

use shortlink_core::clicks::Total;
use shortlink_core::Slot;

use super::{Flusher, Map};
use crate::clicks::destination::{lane_of, Lane};
use crate::clicks::store::{self, ClickStore};

impl Flusher {
    /// Takes the limited clicks of a tally Redis stored: settled at once
    /// without a links' Redis to copy their counts to, else once copied.
    pub(super) fn stored_limited(&mut self, limited: HashMap<Box<str>, u64>, store: &ClickStore) {
        if store.mirror().is_none() {
            store.settle(&limited);
            return;
        }
        for (key, n) in limited {
            store::add_pending(&mut self.uncopied, &key, n);
        }
    }

    /// Copies the stored people's totals of the links in `uncopied` to the
    /// links' Redis, and settles the clicks of those copied.
    pub(super) fn copy_limits(&mut self, store: &ClickStore) -> Result<(), String> {
        if self.uncopied.is_empty() {
            return Ok(());
        }
        let Some(links) = store.mirror() else {
            store.settle(&std::mem::take(&mut self.uncopied));
            return Ok(());
        };
        let names = &store.names;
        let keys: Vec<Box<str>> = self.uncopied.keys().cloned().collect();
        let slots: Vec<Slot<'_>> = (keys.iter())
            .map(|key| names.total_slot(Total::People, key))
            .collect();
        let mut by_lane: Map<Lane, Vec<usize>> = Map::default();
        for (index, slot) in slots.iter().enumerate() {
            let lane = lane_of(names.layout(), &slot.hash);
            by_lane.entry(lane).or_default().push(index);
        }
        let destination = self.destination.as_mut().ok_or("no destination")?;
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
                totals.push((index, count_of(&reply)?));
            }
        }
        let counts: Vec<(Slot<'_>, u64)> = (totals.iter())
            .map(|&(index, total)| (slots[index].clone(), total))
            .collect();
        let mut errors = Vec::new();
        let mut settled = HashMap::new();
        for (&(index, _), outcome) in totals.iter().zip(links.raise(&counts)) {
            match outcome {
                Ok(_) => {
                    if let Some((key, n)) = self.uncopied.remove_entry(&keys[index]) {
                        settled.insert(key, n);
                    }
                }
                Err(error) => errors.push(format!(
                    "copying the click count {} {} to the links' Redis: {error}",
                    slots[index].hash, slots[index].field
                )),
            }
        }
        store.settle(&settled);
        errors.into_iter().next().map_or(Ok(()), Err)
    }
}

/// A total as the clicks' Redis answers it: none yet is 0.
fn count_of(reply: &redis::Value) -> Result<u64, String> {
    match reply {
        redis::Value::Nil => Ok(0),
        redis::Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|count| count.parse().ok())
            .ok_or_else(|| format!("a click total is not a number: {bytes:?}")),
        other => Err(format!(
            "unexpected reply to HGET of a click total: {other:?}"
        )),
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
    use crate::clicks::store::{Click, ClickStore, Outcome, Reach};
    use crate::lookups::{PoolSettings, RedisPool};

    fn limited_click(key: &str) -> Click {
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
        ClickStore::new(clicks_url, reach, names, settings, Some(links_pool(links_url)))
    }

    /// With clicks in a Redis of their own (here database 0, the links in
    /// 1), a limited link's clicks stay pending until the links' Redis holds
    /// its stored people's total; the copy only grows; and while it cannot
    /// be made, the clicks stay pending, so no lookup misses them, until a
    /// later flush makes it.
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
            store.record(limited_click("Lm25"));
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
        store.record(limited_click("Lm25"));
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
        away.record(limited_click("Qx99"));
        away.record(limited_click("Qx99"));
        flusher.tick(&away, &settings);
        assert_eq!(get("0", "short:clicks:Qx", "99").as_deref(), Some("2"));
        assert_eq!(away.pending("Qx99"), 2, "not copied, still pending");
        assert!(away.counters.flush_failures.load(Ordering::Relaxed) > 0);

        // The links' Redis back: the next flush, with no click to send,
        // makes the copy and settles them.
        away.set(settings.clone(), Some(links_pool(&links_url)));
        flusher.tick(&away, &settings);
        assert_eq!(get("1", "short:clicks:Qx", "99").as_deref(), Some("2"));
        assert_eq!(away.pending("Qx99"), 0, "settled once copied");
        drop(redis);
        let _ = std::fs::remove_dir_all(dir);
    }
}
