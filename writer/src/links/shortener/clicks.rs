//! What the shortener tells of clicks: a link's statistics, the trending
//! links, the hottest ones, and warming the Varnish caches with them.

use std::sync::Arc;

use shortlink_core::clicks::MINUTES_KEPT;
use shortlink_core::{Key, Record, Stored};

use crate::access::Identity;
use crate::clicks::{LinkStats, Totals, Trending, TrendingQuery};
use crate::config::Domain;
use crate::links::error::ShortenError;
use crate::links::shortener::{allowed, check_limit, Shortener, DEFAULT_PAGE};
use crate::links::store::StoreError;
use crate::links::validate::{Field, Invalid};
use crate::varnish::purge::{Purger, Route};

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
    #[error(transparent)]
    Domain(#[from] crate::config::UnknownDomain),
}

impl Shortener {
    /// The click counts of `key` on `domain` with `days` days of history,
    /// if `who` may change the link (a deleted link's: admins only), and
    /// the link as read for that check (`None` once deleted).
    pub async fn stats(
        &self,
        who: &Identity,
        domain: &Domain,
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
        allowed(who, domain)?;
        let key = Self::existing_key(domain, key)?;
        let current = self.read(domain, &key).await?;
        let owner = match &current.stored {
            Stored::Link(record) => record.owner.as_ref(),
            Stored::Deleted => None,
        };
        if !who.may_change(owner) {
            return Err(ShortenError::NotYours);
        }
        let hours = STATS_HOURS.min(clicks.hours_kept);
        let mut stats = self
            .store(domain)
            .clicks()
            .link(&key, days, hours)
            .await
            .map_err(StoreError::from)?;
        let record = match current.stored {
            Stored::Link(record) => Some(record),
            Stored::Deleted => None,
        };
        if let Some(record) = &record {
            stats.join_targets(record);
        }
        if let Some(limit) = record.as_ref().and_then(|record| record.max_clicks) {
            stats.max_clicks = Some(limit.get());
            stats.clicks_left = Some(limit.left(stats.clicks));
        }
        Ok((stats, record))
    }

    /// The click totals of each of `links` (each on its own domain), in
    /// one round trip per domain.
    pub async fn totals(
        &self,
        links: &[crate::links::store::Link],
    ) -> Result<Vec<Totals>, ShortenError> {
        let mut totals = vec![Totals::default(); links.len()];
        for (domain, at, keys) in self.by_domain(links) {
            let keys: Vec<&str> = keys.iter().map(Key::as_str).collect();
            let read = self
                .store(domain)
                .clicks()
                .totals(&keys)
                .await
                .map_err(StoreError::from)?;
            for (n, found) in at.into_iter().zip(read) {
                totals[n] = found;
            }
        }
        Ok(totals)
    }

    /// Seconds since a Varnish last sent click counts (see
    /// [`crate::clicks::ClickReader::flush_lag`]).
    pub async fn click_flush_lag(&self) -> Result<Option<f64>, ShortenError> {
        Ok(self
            .default_store()
            .clicks()
            .flush_lag()
            .await
            .map_err(StoreError::from)?)
    }

    /// The links with the most clicks by people over the last `minutes`:
    /// everyone's for an admin, `who`'s own otherwise; on `domain`, or on
    /// every domain `who` may use, ranked together.
    pub async fn trending(
        &self,
        who: &Identity,
        domain: Option<&str>,
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
        let domains = self.domains_of(who, domain)?;
        let query = TrendingQuery {
            owner: (!who.admin).then(|| who.owner.to_string()),
            domains: domains.iter().map(|domain| domain.name.clone()).collect(),
            minutes,
            limit,
        };
        let ranking = self
            .trending
            .get_or_rank(query, || async {
                let mut ranked = Vec::new();
                for domain in &domains {
                    ranked.extend(self.rank_trending(who, domain, minutes, limit).await?);
                }
                // Most clicks first, ties by domain (in order) and key.
                let place = |t: &Trending| domains.iter().position(|d| d.name == t.domain);
                ranked.sort_by(|a, b| {
                    b.clicks
                        .cmp(&a.clicks)
                        .then_with(|| place(a).cmp(&place(b)))
                        .then_with(|| a.key.cmp(&b.key))
                });
                ranked.truncate(limit);
                Ok::<_, ShortenError>(ranked)
            })
            .await?;
        Ok(ranking.to_vec())
    }

    /// The ranking of `domain`'s links [`Self::trending`] answers, made now.
    async fn rank_trending(
        &self,
        who: &Identity,
        domain: &Domain,
        minutes: u64,
        limit: usize,
    ) -> Result<Vec<Trending>, ShortenError> {
        let store = self.store(domain);
        let reader = store.clicks();
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
                .filter_map(|t| Some((domain.scheme.key(&t.key).ok()?, t)))
                .unzip();
            let owners = store.owners_of(&keys).await?;
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

    /// The keys of the `limit` hottest links of `domain` (see
    /// [`crate::clicks::ClickReader::hottest`]), hottest first.
    pub async fn hottest(&self, domain: &Domain, limit: usize) -> Result<Vec<String>, StoreError> {
        Ok(self.store(domain).clicks().hottest(limit).await?)
    }

    /// The `limit` links most worth warming: each domain's hottest (of
    /// `domain` alone when named), taken from the domains in turn.
    async fn hottest_everywhere(
        &self,
        domain: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(Route, String)>, WarmError> {
        let domains: Vec<&Domain> = match domain.filter(|name| !name.is_empty()) {
            Some(name) => vec![self.settings.domain(Some(name))?],
            None => self.settings.domains.iter().collect(),
        };
        let mut lists = Vec::with_capacity(domains.len());
        for domain in &domains {
            let keys = self.hottest(domain, limit).await?;
            lists.push((Route::of(domain), keys.into_iter()));
        }
        let mut chosen = Vec::with_capacity(limit);
        while chosen.len() < limit {
            let before = chosen.len();
            for (route, keys) in &mut lists {
                if let Some(key) = keys.next() {
                    chosen.push((route.clone(), key));
                }
            }
            if chosen.len() == before {
                break;
            }
        }
        chosen.truncate(limit);
        Ok(chosen)
    }

    /// Loads the `limit` hottest links (of every domain, or of `domain`)
    /// into the cache of `node` (a URL of `varnish.purge_urls`), or of
    /// every node, as requests that are not counted as clicks.
    pub async fn warm(
        &self,
        limit: usize,
        node: Option<&str>,
        domain: Option<&str>,
    ) -> Result<Warmed, WarmError> {
        if self.nodes.is_empty() {
            return Err(WarmError::NoVarnish);
        }
        if let Some(node) = node.filter(|node| self.nodes.node(node).is_none()) {
            return Err(WarmError::UnknownNode(node.to_owned()));
        }
        let keys = self.hottest_everywhere(domain, limit).await?;
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
            for ((route, key), purger) in keys.iter().cloned().zip(connections.iter().cycle()) {
                let purger = Arc::clone(purger);
                fetches.spawn(async move { purger.warm(&route, &key).await });
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
