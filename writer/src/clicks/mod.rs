//! Reading the click counts Varnish writes (layout in
//! `shortlink_core::clicks`): a link's statistics (`link`), the trending
//! and hottest links (`trending`), the visit log (`visits`), and how long
//! ago Varnish last sent counts.

mod link;
mod trending;
mod visits;

use std::collections::HashMap;

use redis::RedisResult;
use shortlink_core::clicks::CountNames;

use crate::redis::master::MasterConnection;

pub use link::{DayCount, HourCount, LinkStats, Share, TargetClicks};
pub use trending::{Trending, TrendingCache, TrendingQuery, TRENDING_KEPT};
pub use visits::{VisitList, VisitRecord};

/// Reads one short domain's counts through the writer's Redis connection.
#[derive(Clone)]
pub struct ClickReader {
    connection: MasterConnection,
    /// The domain's canonical name.
    domain: String,
    names: CountNames,
}

impl ClickReader {
    pub fn new(connection: MasterConnection, domain: String, names: CountNames) -> Self {
        Self {
            connection,
            domain,
            names,
        }
    }

    /// Seconds since a Varnish last reached Redis to send counts (or to say
    /// it has none); `None` when none ever did. Each Varnish's own backlog
    /// is its varnishstat `clicks_pending`.
    pub async fn flush_lag(&self) -> RedisResult<Option<f64>> {
        let mut connection = self.connection.get()?;
        let beats: HashMap<String, u64> = redis::cmd("HGETALL")
            .arg(self.names.flushers())
            .query_async(&mut connection)
            .await?;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        #[allow(clippy::cast_precision_loss)]
        Ok(beats
            .values()
            .map(|beat| now_ms.saturating_sub(*beat))
            .min()
            .map(|lag| lag as f64 / 1000.0))
    }
}

/// A link's click totals: redirects delivered to people and to bots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub people: u64,
    pub bots: u64,
}

impl ClickReader {
    /// The totals of each of `keys`, in one round trip.
    pub async fn totals(&self, keys: &[&str]) -> RedisResult<Vec<Totals>> {
        use shortlink_core::clicks::Total;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for key in keys {
            for total in [Total::People, Total::Bots] {
                let slot = self.names.total_slot(total, key);
                pipe.hget(slot.hash, slot.field);
            }
        }
        let mut connection = self.connection.get()?;
        let counts: Vec<Option<u64>> = pipe.query_async(&mut connection).await?;
        Ok(counts
            .chunks(2)
            .map(|pair| Totals {
                people: pair[0].unwrap_or(0),
                bots: pair.get(1).copied().flatten().unwrap_or(0),
            })
            .collect())
    }
}
