//! What the shortener tells of clicks: a link's statistics, the trending
//! links, the hottest ones, and warming the Varnish caches with them.

use std::sync::Arc;

use shortlink_core::clicks::MINUTES_KEPT;
use shortlink_core::{Key, Record, Stored};

use crate::access::Identity;
use crate::clicks::{LinkStats, Trending, TrendingQuery};
use crate::links::error::ShortenError;
use crate::links::shortener::{check_limit, Shortener, DEFAULT_PAGE};
use crate::links::store::StoreError;
use crate::links::validate::{Field, Invalid};
use crate::varnish::purge::Purger;

/// Days of history a link's statistics show unless asked otherwise.
const DEFAULT_STATS_DAYS: u64 = 30;

/// Hours of history a link's statistics show (fewer if fewer are kept).
const STATS_HOURS: u64 = 48;

/// The window trending looks at unless asked otherwise.
const DEFAULT_TRENDING_MINUTES: u64 = 5;

/// Connections `warm` fetches over: a few per core of a typical Varnish,
/// few enough to leave room for the people it serves meanwhile.
const WARM_CONNECTIONS: usize = 8;

/// Ranked links whose owners are read at once, for a non-admin's trending.
const TRENDING_CHUNK: usize = 200;

/// What warming a cache did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Warmed {
    /// The nodes warmed.
    pub nodes: usize,
    /// Links a node fetched (or already held), over every node warmed.
    pub cached: usize,
    /// Links a node could not fetch.
    pub failed: usize,
    /// Why the first of those failed.
    pub problem: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum WarmError {
    #[error("varnish.purge_url and purge_urls are empty: set them to the Varnish nodes to warm")]
    NoVarnish,
    #[error("{0} is not one of the Varnish nodes in varnish.purge_urls (or purge_url)")]
    UnknownNode(String),
    #[error("cannot read the click counts: {0}")]
    Store(#[from] StoreError),
}

impl Shortener {
    /// `key`'s click counts with `days` days of history, if `who` may
    /// change the link (a deleted link's: admins only), and the link as
    /// read for that check (`None` once deleted).
    pub async fn stats(
        &self,
        who: &Identity,
        key: &str,
        days: Option<u64>,
    ) -> Result<(LinkStats, Option<Record>), ShortenError> {
        let clicks = &self.settings.config.clicks;
        let days = days.unwrap_or(DEFAULT_STATS_DAYS.min(clicks.days_kept));
        if !(1..=clicks.days_kept).contains(&days) {
            return Err(Invalid::new(
                Field::Days,
                format!("days must be 1 to {} (the days kept)", clicks.days_kept),
            )
            .into());
        }
        let key = self.existing_key(key)?;
        let current = self.read(&key).await?;
        let owner = match &current.stored {
            Stored::Link(record) => record.owner.as_ref(),
            Stored::Deleted => None,
        };
        if !who.may_change(owner) {
            return Err(ShortenError::NotYours);
        }
        let hours = STATS_HOURS.min(clicks.hours_kept);
        let mut stats = self
            .store
            .clicks()
            .link(&key, days, hours)
            .await
            .map_err(StoreError::from)?;
        let record = match current.stored {
            Stored::Link(record) => Some(record),
            Stored::Deleted => None,
        };
        if let Some(limit) = record.as_ref().and_then(|record| record.max_clicks) {
            stats.max_clicks = Some(limit.get());
            stats.clicks_left = Some(limit.left(stats.clicks));
        }
        Ok((stats, record))
    }

    /// Seconds since a Varnish last sent click counts (see
    /// [`crate::clicks::ClickReader::flush_lag`]).
    pub async fn click_flush_lag(&self) -> Result<Option<f64>, ShortenError> {
        Ok(self
            .store
            .clicks()
            .flush_lag()
            .await
            .map_err(StoreError::from)?)
    }

    /// The links with the most clicks by people over the last `minutes`:
    /// everyone's for an admin, `who`'s own otherwise.
    pub async fn trending(
        &self,
        who: &Identity,
        minutes: Option<u64>,
        limit: Option<usize>,
    ) -> Result<Vec<Trending>, ShortenError> {
        let minutes = minutes.unwrap_or(DEFAULT_TRENDING_MINUTES);
        if !(1..=MINUTES_KEPT).contains(&minutes) {
            return Err(Invalid::new(
                Field::Minutes,
                format!("minutes must be 1 to {MINUTES_KEPT}"),
            )
            .into());
        }
        let limit = limit.unwrap_or(DEFAULT_PAGE);
        check_limit(limit)?;
        let query = TrendingQuery {
            owner: (!who.admin).then(|| who.owner.to_string()),
            minutes,
            limit,
        };
        let ranking = self
            .trending
            .get_or_rank(query, || self.rank_trending(who, minutes, limit))
            .await?;
        Ok(ranking.to_vec())
    }

    /// The ranking [`Self::trending`] answers, made now.
    async fn rank_trending(
        &self,
        who: &Identity,
        minutes: u64,
        limit: usize,
    ) -> Result<Vec<Trending>, ShortenError> {
        let reader = self.store.clicks();
        if who.admin {
            return Ok(reader
                .trending(minutes, limit)
                .await
                .map_err(StoreError::from)?);
        }
        // Others' links are ranked too: read enough to find `limit` of one's own.
        let ranked = reader
            .trending(minutes, usize::MAX)
            .await
            .map_err(StoreError::from)?;
        let mut own = Vec::new();
        for chunk in ranked.chunks(TRENDING_CHUNK) {
            let (keys, links): (Vec<Key>, Vec<&Trending>) = chunk
                .iter()
                .filter_map(|t| Some((self.settings.scheme.key(&t.key).ok()?, t)))
                .unzip();
            let owners = self.store.owners_of(&keys).await?;
            own.extend(
                links
                    .into_iter()
                    .zip(owners)
                    .filter(|(_, owner)| {
                        owner.as_ref().and_then(Option::as_ref) == Some(&who.owner)
                    })
                    .map(|(link, _)| link.clone()),
            );
            if own.len() >= limit {
                break;
            }
        }
        own.truncate(limit);
        Ok(own)
    }

    /// The keys of the `limit` hottest links (see
    /// [`crate::clicks::ClickReader::hottest`]), hottest first.
    pub async fn hottest(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        Ok(self.store.clicks().hottest(limit).await?)
    }

    /// Loads the `limit` hottest links into the cache of `node` (a URL of
    /// `varnish.purge_urls`), or of every node, as requests that are not
    /// counted as clicks.
    pub async fn warm(&self, limit: usize, node: Option<&str>) -> Result<Warmed, WarmError> {
        if self.nodes.is_empty() {
            return Err(WarmError::NoVarnish);
        }
        if let Some(node) = node.filter(|node| self.nodes.node(node).is_none()) {
            return Err(WarmError::UnknownNode(node.to_owned()));
        }
        let keys = self.hottest(limit).await?;
        let mut warmed = Warmed::default();
        let mut fetches = tokio::task::JoinSet::new();
        for (_, purger) in self
            .nodes
            .iter()
            .filter(|(url, _)| node.is_none_or(|node| node == *url))
        {
            warmed.nodes += 1;
            let connections: Vec<Arc<Purger>> = (0..WARM_CONNECTIONS)
                .map(|_| Arc::new(purger.sibling()))
                .collect();
            for (key, purger) in keys.iter().cloned().zip(connections.iter().cycle()) {
                let purger = Arc::clone(purger);
                fetches.spawn(async move { purger.warm(&key).await });
            }
        }
        while let Some(answer) = fetches.join_next().await {
            let problem = match answer {
                // Redirects, and 410s of expired links: both are cached.
                Ok(Ok(status)) if status < 500 => {
                    warmed.cached += 1;
                    continue;
                }
                Ok(Ok(status)) => format!("Varnish answered {status}"),
                Ok(Err(error)) => error.to_string(),
                Err(error) => error.to_string(),
            };
            warmed.failed += 1;
            warmed.problem.get_or_insert(problem);
        }
        Ok(warmed)
    }
}
