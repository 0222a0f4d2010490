//! The links most clicked lately (trending), and those most worth loading
//! into a new cache (hottest), read from the minute hashes and the totals.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::RedisResult;
use serde::Serialize;
use shortlink_core::clicks::{ClickTime, Total, MINUTES_KEPT};

use super::ClickReader;
use crate::redis::master::Connection;
use crate::redis::scan::scan;

/// Totals hashes read in one round trip when ranking all-time clicks.
const HASHES_PER_TRIP: usize = 1000;

/// Minute hash entries read per round trip while ranking recent clicks:
/// few enough that no round trip holds Redis for more than about a
/// millisecond.
const ENTRIES_PER_SCAN: usize = 2000;

/// Minute hashes read at once while ranking recent clicks.
const READERS: usize = 2;

// Ranking marks the minutes that counted a link with one bit each of a `u64`.
const _: () = assert!(MINUTES_KEPT <= u64::BITS as u64);

/// A link with many clicks lately.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Trending {
    /// The short domain the link is on (its canonical name).
    pub domain: String,
    pub key: String,
    pub clicks: u64,
}

/// How long a ranking of recent clicks is answered again before it is
/// made anew: a client asking in a loop reads the clicks' Redis once in
/// this time, not once a call.
pub const TRENDING_KEPT: Duration = Duration::from_secs(5);

/// Rankings kept at once, the latest asked: one per window, limit and
/// caller's view (everyone's or one owner's).
const RANKINGS_KEPT: NonZeroUsize = NonZeroUsize::new(256).expect("not zero");

/// What one ranking answers: whose links (`None`: everyone's, as an admin
/// sees them), on which domains, over how many minutes, how many at most.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TrendingQuery {
    pub owner: Option<String>,
    pub domains: Vec<String>,
    pub minutes: u64,
    pub limit: usize,
}

/// The rankings answered lately, each for [`TRENDING_KEPT`]. One ranking
/// is made at a time: callers asking while one is made wait for it, and
/// the clicks' Redis never runs two at once for one writer.
pub struct TrendingCache {
    kept: tokio::sync::Mutex<lru::LruCache<TrendingQuery, Ranking>>,
}

/// A ranking, and when it was made.
type Ranking = (Instant, Arc<Vec<Trending>>);

impl Default for TrendingCache {
    fn default() -> Self {
        Self {
            kept: tokio::sync::Mutex::new(lru::LruCache::new(RANKINGS_KEPT)),
        }
    }
}

impl TrendingCache {
    /// The ranking `query` asks for: the one kept, if made less than
    /// [`TRENDING_KEPT`] ago, or one `rank` makes now.
    pub async fn get_or_rank<E, F>(
        &self,
        query: TrendingQuery,
        rank: impl FnOnce() -> F,
    ) -> Result<Arc<Vec<Trending>>, E>
    where
        F: Future<Output = Result<Vec<Trending>, E>>,
    {
        let mut kept = self.kept.lock().await;
        if let Some((made, ranking)) = kept.get(&query) {
            if made.elapsed() < TRENDING_KEPT {
                return Ok(Arc::clone(ranking));
            }
        }
        let ranking = Arc::new(rank().await?);
        kept.put(query, (Instant::now(), Arc::clone(&ranking)));
        Ok(ranking)
    }
}

impl ClickReader {
    /// The `limit` links with the most clicks by people over the last
    /// `minutes` minutes (this one included), most first, ties by key.
    pub async fn trending(&self, minutes: u64, limit: usize) -> RedisResult<Vec<Trending>> {
        let mut ranked = self.recent_clicks(minutes).await?;
        let order = |a: &Trending, b: &Trending| b.clicks.cmp(&a.clicks).then(a.key.cmp(&b.key));
        if ranked.len() > limit && limit > 0 {
            ranked.select_nth_unstable_by(limit - 1, order);
        }
        ranked.truncate(limit);
        ranked.sort_unstable_by(order);
        Ok(ranked)
    }

    /// Every link clicked by people over the last `minutes` minutes, with
    /// its clicks then, in no order.
    ///
    /// The minute hashes are read a piece at a time (`HSCAN`), so Redis
    /// never runs one long command: a `ZUNION` of an hour of busy minutes
    /// (when they were sorted sets) held it for 2 s, and every lookup timed
    /// out meanwhile. Two readers keep a piece on its way while the writer
    /// sums the last.
    async fn recent_clicks(&self, minutes: u64) -> RedisResult<Vec<Trending>> {
        let now = ClickTime::now();
        let hashes: Vec<String> = (0..minutes.clamp(1, MINUTES_KEPT))
            .map(|n| self.names.minute_hash(now.before(n * 60).minute()))
            .collect();
        let (pieces, mut arrived) = tokio::sync::mpsc::channel(READERS);
        let connection = self.connection.get()?;
        for reader in 0..READERS {
            let mine: Vec<(usize, String)> = hashes
                .iter()
                .cloned()
                .enumerate()
                .skip(reader)
                .step_by(READERS)
                .collect();
            tokio::spawn(read_minute_hashes(connection.clone(), mine, pieces.clone()));
        }
        drop(pieces);
        // Each link's clicks, and which minutes counted them (one bit per
        // minute: a scan may give a key twice). Hashing every entry read is
        // much of this work: with SipHash, hashing, map entries and key
        // comparisons were 40 % of the writer's `perf` samples.
        let mut clicks: HashMap<String, (u64, u64), foldhash::fast::RandomState> =
            HashMap::default();
        while let Some(piece) = arrived.recv().await {
            let (minute, entries) = piece?;
            let bit = 1u64 << minute;
            for (key, counted) in entries {
                let (total, counted_by) = clicks.entry(key).or_default();
                if *counted_by & bit == 0 {
                    *total = total.saturating_add(counted);
                    *counted_by |= bit;
                }
            }
        }
        Ok(clicks
            .into_iter()
            .map(|(key, (clicks, _))| Trending {
                domain: self.domain.clone(),
                key,
                clicks,
            })
            .collect())
    }

    /// Up to `limit` keys most worth loading into a new cache, hottest
    /// first: those with clicks over the last hour ranked by them, then the
    /// rest by their clicks of all time. The all-time ranking reads every
    /// totals hash (a `SCAN`, then pipelined `HGETALL`s); it is done once
    /// per Varnish start.
    pub async fn hottest(&self, limit: usize) -> RedisResult<Vec<String>> {
        let recent = self.trending(MINUTES_KEPT, limit).await?;
        let mut chosen: Vec<String> = recent.into_iter().map(|t| t.key).collect();
        if chosen.len() >= limit {
            return Ok(chosen);
        }
        let taken: HashSet<String> = chosen.iter().cloned().collect();
        let wanted = limit - chosen.len();
        // The `wanted` best by all-time clicks: a heap whose top is the
        // least of them, so each newcomer is compared with that alone.
        let mut best: BinaryHeap<Reverse<(u64, String)>> = BinaryHeap::with_capacity(wanted + 1);
        let mut connection = self.connection.get()?;
        let pattern = self.names.total_hashes(Total::People);
        let names = scan(&mut connection, &pattern, "hash").await?;
        for names in names.chunks(HASHES_PER_TRIP) {
            let mut pipe = redis::pipe();
            for name in names {
                pipe.hgetall(name);
            }
            let hashes: Vec<HashMap<String, u64>> = pipe.query_async(&mut connection).await?;
            for (name, fields) in names.iter().zip(hashes) {
                let Some(head) = self.names.head_of(Total::People, name) else {
                    continue;
                };
                for (field, clicks) in fields {
                    let key = format!("{head}{field}");
                    if taken.contains(&key) || self.names.scheme().key(&key).is_err() {
                        continue;
                    }
                    best.push(Reverse((clicks, key)));
                    if best.len() > wanted {
                        best.pop();
                    }
                }
            }
        }
        let mut rest: Vec<(u64, String)> = best.into_iter().map(|Reverse(entry)| entry).collect();
        rest.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        chosen.extend(rest.into_iter().map(|(_, key)| key));
        Ok(chosen)
    }
}

/// A piece of a minute's counts: the minute's place in the window, and
/// keys with their clicks.
type Piece = RedisResult<(usize, Vec<(String, u64)>)>;

/// How a minute's counts are kept: a hash (`HSCAN`), or a sorted set
/// (`ZSCAN`), as VMODs from before 2026-11-27 wrote them; read until they
/// expire within the hour, so that trending holds through an upgrade.
#[derive(Clone, Copy, PartialEq, Eq)]
enum MinuteKind {
    Hash,
    SortedSet,
}

/// Sends every key of the minute hashes `minutes` with its clicks, a piece
/// at a time, until done or the receiver is gone. A scan may give a key
/// twice but never skips one that is there throughout, even in this
/// minute's hash, which Varnish is still writing.
async fn read_minute_hashes(
    mut connection: Connection,
    minutes: Vec<(usize, String)>,
    pieces: tokio::sync::mpsc::Sender<Piece>,
) {
    for (place, name) in minutes {
        let mut kind = MinuteKind::Hash;
        let mut cursor = 0u64;
        loop {
            let mut read = scan_minute(&mut connection, &name, kind, cursor).await;
            if kind == MinuteKind::Hash
                && read.as_ref().is_err_and(|e| e.code() == Some("WRONGTYPE"))
            {
                kind = MinuteKind::SortedSet;
                read = scan_minute(&mut connection, &name, kind, cursor).await;
            }
            let (next, piece) = match read {
                Ok((next, entries)) => (next, Ok((place, entries))),
                Err(error) => (0, Err(error)),
            };
            let failed = piece.is_err();
            if pieces.send(piece).await.is_err() || failed {
                return;
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
}

/// One piece of the minute `name`, kept as `kind`, from `cursor`: the next
/// cursor, and keys with their clicks (a count written by hand that is no
/// whole number is 0).
async fn scan_minute(
    connection: &mut Connection,
    name: &str,
    kind: MinuteKind,
    cursor: u64,
) -> RedisResult<(u64, Vec<(String, u64)>)> {
    let command = match kind {
        MinuteKind::Hash => "HSCAN",
        MinuteKind::SortedSet => "ZSCAN",
    };
    let mut scan = redis::cmd(command);
    scan.arg(name)
        .arg(cursor)
        .arg("COUNT")
        .arg(ENTRIES_PER_SCAN);
    Ok(match kind {
        MinuteKind::Hash => {
            let (next, entries): (u64, Vec<(String, String)>) =
                scan.query_async(connection).await?;
            let counted = entries.into_iter().map(|(key, clicks)| {
                let clicks = clicks.parse().unwrap_or(0);
                (key, clicks)
            });
            (next, counted.collect())
        }
        MinuteKind::SortedSet => {
            let (next, entries): (u64, Vec<(String, f64)>) = scan.query_async(connection).await?;
            let counted = (entries.into_iter()).map(|(key, score)| (key, whole_clicks(score)));
            (next, counted.collect())
        }
    })
}

/// A score as clicks: scores are sums of whole clicks (the cast saturates,
/// a negative score written by hand is 0).
fn whole_clicks(score: f64) -> u64 {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let clicks = score as u64;
    clicks
}
