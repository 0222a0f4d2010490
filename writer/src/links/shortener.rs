//! What can be done to links: create, show, edit, delete, list. Each
//! validates, stores and purges the same way for the JSON API, the web
//! pages and the command line.
//!
//! Every link is on a short domain: the edges (API, pages, command line)
//! turn the name they were given into a [`Domain`] with
//! [`Shortener::domain`], and the operations take it; each domain has a
//! store of its own (its key space), on the same connections.

use std::sync::Arc;
use std::time::SystemTime;

use shortlink_core::rules::Targeting;
use shortlink_core::{Expiry, Key, Owner, Record, Stored, ValidUrl};

use crate::access::{Caller, Identity};
use crate::clicks::TrendingCache;
use crate::config::{Domain, Settings};
use crate::links::details::{tags_of, LinkDetails, Title};
use crate::links::rules::{rules_of, split_of};
use crate::links::store::{Current, Inserted, Link, LinkStore, StoreError};
use crate::links::validate::{
    check_click_limit, check_custom_key, check_key_length, check_window, normalize_expired_url,
    normalize_url, parse_expiry, parse_moment, parse_start, Field, Invalid,
};
use crate::titles::TitleReader;
use crate::varnish::purge::Nodes;
use crate::varnish::purge_queue::PurgeQueue;
use details::unix_now;

mod catalog;
mod clicks;
mod crawlable;
mod details;
mod listing;
mod purging;
mod redirects;
mod request;
mod visits;

pub use crate::links::error::ShortenError;
pub use catalog::{Entry, TagError, TagStats};
pub use clicks::{WarmError, Warmed};
pub use listing::{found_by, ListQuery, Listing};
pub use redirects::{RedirectsChange, RedirectsSet};
pub use request::{Change, NewLink};
pub use visits::{VisitPage, VisitQuery, VisitScope};

/// How often an edit without `If-Match` is tried again when another change
/// came between its read and its write.
const EDIT_ATTEMPTS: usize = 5;

/// Most links one page of a listing holds.
pub const MAX_PAGE: usize = 100;

/// Refuses a page size outside 1 to [`MAX_PAGE`].
fn check_limit(limit: usize) -> Result<(), Invalid> {
    if (1..=MAX_PAGE).contains(&limit) {
        Ok(())
    } else {
        Err(Invalid::new(
            Field::Limit,
            format!("limit must be 1 to {MAX_PAGE}"),
        ))
    }
}

/// Links listed (or ranked) when the request names no limit.
pub const DEFAULT_PAGE: usize = 20;

/// The outcome of a change, and whether Varnish forgot the old answer: if
/// not, it may serve that for up to its TTL.
#[derive(Debug)]
pub struct Written<T> {
    pub outcome: T,
    pub purge_warning: Option<String>,
}

#[derive(Clone)]
pub struct Shortener {
    pub settings: Arc<Settings>,
    /// One store per domain, in the order of `settings.domains`.
    stores: Arc<[LinkStore]>,
    nodes: Arc<Nodes>,
    /// The trending links answered lately, shared by the workers.
    trending: Arc<TrendingCache>,
    /// Reads the titles of new links given none; `None` when off.
    titles: Option<Arc<TitleReader>>,
}

impl Shortener {
    pub fn new(settings: Settings) -> Result<Self, StoreError> {
        let store = LinkStore::new(&settings)?;
        let stores = settings
            .domains
            .iter()
            .map(|domain| store.in_domain(domain))
            .collect();
        let nodes = Arc::new(Nodes::new(
            &settings.config.varnish.purge_nodes(),
            &settings.domains,
            settings.config.varnish.purge_secret.as_str(),
            settings.write_timeout(),
        ));
        let titles = settings
            .config
            .titles
            .fetch
            .then(|| Arc::new(TitleReader::new(&settings.config.titles)));
        Ok(Self {
            settings: Arc::new(settings),
            stores,
            nodes,
            trending: Arc::default(),
            titles,
        })
    }

    /// The domain named `name` (its canonical name or an alias, in any
    /// case); the default domain for `None` or an empty name.
    pub fn domain(&self, name: Option<&str>) -> Result<&Domain, ShortenError> {
        Ok(self.settings.domain(name)?)
    }

    /// The domains `who` may act on, in the configuration's order; only
    /// the one named `name` when there is one (refused when `who` may not).
    pub fn domains_of(
        &self,
        who: &Identity,
        name: Option<&str>,
    ) -> Result<Vec<&Domain>, ShortenError> {
        if name.is_some_and(|name| !name.is_empty()) {
            let domain = self.domain(name)?;
            allowed(who, domain)?;
            return Ok(vec![domain]);
        }
        Ok(self
            .settings
            .domains
            .iter()
            .filter(|domain| who.may_use(&domain.name))
            .collect())
    }

    /// `links` grouped by domain, each group with the positions of its
    /// links in `links` and their keys: what reads many links' parts at
    /// once (details, totals) sends one round trip per domain for. A key
    /// its domain's rules refuse holds no link, and is left out.
    fn by_domain(&self, links: &[Link]) -> Vec<(&Domain, Vec<usize>, Vec<Key>)> {
        self.settings
            .domains
            .iter()
            .map(|domain| {
                let (at, keys) = links
                    .iter()
                    .enumerate()
                    .filter(|(_, link)| link.domain == domain.name)
                    .filter_map(|(n, link)| Some((n, domain.scheme.key(&link.key).ok()?)))
                    .unzip();
                (domain, at, keys)
            })
            .collect()
    }

    /// The store of `domain`'s links.
    fn store(&self, domain: &Domain) -> &LinkStore {
        self.stores
            .iter()
            .find(|store| store.domain() == domain.name)
            .unwrap_or(&self.stores[0])
    }

    /// The default domain's store: the one the purge queue and the click
    /// flushes are named after.
    fn default_store(&self) -> &LinkStore {
        &self.stores[0]
    }

    /// The purges Varnish nodes did not confirm, and the nodes to send them
    /// to: `serve` retries them (see [`PurgeQueue::retry_forever`]).
    pub fn purge_queue(&self) -> (PurgeQueue, Arc<Nodes>) {
        (self.default_store().purge_queue(), Arc::clone(&self.nodes))
    }

    /// Whether the links' store answers.
    pub async fn ping(&self) -> Result<(), ShortenError> {
        Ok(self.default_store().ping().await?)
    }

    /// How many purges wait in the queue for their node.
    pub async fn queued_purges(&self) -> Result<u64, StoreError> {
        Ok(self.default_store().purge_queue().queued().await?)
    }

    /// Stores a link to `url` under `key`, or under a generated key when
    /// `key` is empty or absent, for nobody in particular.
    pub async fn shorten(&self, url: &str, key: Option<&str>) -> Result<Inserted, ShortenError> {
        let new = NewLink {
            url,
            key,
            ..NewLink::default()
        };
        Ok(self.create(&new, None).await?.outcome)
    }

    /// Stores `new` for `caller` (refused on a domain its token is not
    /// limited to), as [`Self::create`] does.
    pub async fn create_as(
        &self,
        new: &NewLink<'_>,
        caller: &Caller,
    ) -> Result<Written<Inserted>, ShortenError> {
        if let Caller::TokenHolder(who) = caller {
            allowed(who, self.domain(new.domain)?)?;
        }
        self.create(new, caller.clone().owner()).await
    }

    /// Stores `new` on its domain, recording `owner`, then purges its key
    /// from Varnish if Varnish caches 404s. The same URL from the same
    /// owner with the same expiry gets the key it already has; anything
    /// else, and any link with a click limit, gets a key of its own, so a
    /// change to one link never moves another and no link starts with
    /// another's clicks. Whether `owner` may use the domain is the caller's
    /// to check ([`Self::create_as`] does).
    pub async fn create(
        &self,
        new: &NewLink<'_>,
        owner: Option<Owner>,
    ) -> Result<Written<Inserted>, ShortenError> {
        let domain = self.domain(new.domain)?;
        let store = self.store(domain);
        let (record, key) = self.record_of(new, owner)?;
        let details = LinkDetails {
            created: match new.created_at {
                None => Some(unix_now()),
                Some("") => None,
                Some(at) => Some(parse_moment(at, Field::CreatedAt)?.unix()),
            },
            title: new.title.map(Title::of).transpose()?.flatten(),
            tags: tags_of(new.tags)?,
            crawlable: new.crawlable,
        };
        let inserted = match &key {
            Some(key) => store.insert_custom(&record, key).await,
            None => store.insert_generated(&record, new.key_length).await,
        };
        let inserted = self.purged_if_stored(domain, inserted).await?;
        self.keep_new_details(domain, &inserted, &details).await?;
        if let (true, Inserted::Created(link), None) = (new.read_title, &inserted, &details.title) {
            self.read_title_later(domain, link);
        }
        // Only a cached 404 can hide a new link (even an existing one, stored
        // by hand after its key was asked for). Without negative caching
        // there is none, and the insert waits for no Varnish node.
        let mut purge_warning = if self.settings.config.redirect.caches_unknown_keys() {
            self.purge(domain, &inserted.link().key).await
        } else {
            None
        };
        if record.crawlable {
            let listed = self.keep_crawlable(domain, &inserted.link().key, true);
            purge_warning = purge_warning.or(listed.await?);
        }
        Ok(Written {
            outcome: inserted,
            purge_warning,
        })
    }

    /// The link `new`'s custom key holds, if it is exactly `new` for
    /// `owner`: a link with a click limit is never reused, so importing it
    /// again finds its key taken, by itself.
    pub async fn holding_already(
        &self,
        new: &NewLink<'_>,
        owner: Option<Owner>,
    ) -> Result<Option<Link>, ShortenError> {
        let domain = self.domain(new.domain)?;
        let (record, Some(key)) = self.record_of(new, owner)? else {
            return Ok(None);
        };
        let current = self.store(domain).read(&key).await?;
        Ok(current
            .filter(|current| current.stored == Stored::Link(record.clone()))
            .map(|_| Link {
                domain: domain.name.clone(),
                key: key.to_string(),
                record,
            }))
    }

    /// The record `new` stores for `owner`, and its custom key if it has
    /// one: every input checked.
    fn record_of(
        &self,
        new: &NewLink<'_>,
        owner: Option<Owner>,
    ) -> Result<(Record, Option<Key>), ShortenError> {
        let url = normalize_url(new.url, &self.settings)?;
        let key = new
            .key
            .filter(|key| !key.is_empty())
            .map(|key| check_custom_key(key, &self.settings))
            .transpose()?;
        new.key_length.map(check_key_length).transpose()?;
        let record = Record {
            url,
            starts: new.valid_since.map(parse_start).transpose()?,
            expires: new
                .expires_at
                .map(|at| parse_expiry(at, SystemTime::now()))
                .transpose()?,
            max_clicks: new
                .max_clicks
                .map(|clicks| check_click_limit(clicks, &self.settings))
                .transpose()?,
            owner,
            expired_url: self.expired_url(new.expired_url)?,
            forward_query: new.forward_query,
            targeting: Targeting::new(
                rules_of(new.rules, &self.settings)?,
                split_of(new.split, &self.settings)?,
            )
            .map_err(crate::links::rules::BadRule::from)?,
            crawlable: new.crawlable,
        };
        check_window(&record)?;
        Ok((record, key))
    }

    /// What `key` holds on `domain`: a link, or why not.
    pub async fn show(&self, domain: &Domain, key: &str) -> Result<(Link, Current), ShortenError> {
        let key = Self::existing_key(domain, key)?;
        let current = self.read(domain, &key).await?;
        match &current.stored {
            Stored::Link(record) => Ok((
                Link {
                    domain: domain.name.clone(),
                    key: key.to_string(),
                    record: record.clone(),
                },
                current,
            )),
            Stored::Deleted => Err(ShortenError::Gone(key.to_string())),
        }
    }

    /// What `key` holds on `domain`, for `who` alone: a link it may
    /// change, or not found (another's link is not shown to it).
    pub async fn show_to(
        &self,
        who: &Identity,
        domain: &Domain,
        key: &str,
    ) -> Result<(Link, Current), ShortenError> {
        let (link, current) = self.show(domain, key).await?;
        if who.may_change(link.record.owner.as_ref()) && who.may_use(&domain.name) {
            Ok((link, current))
        } else {
            Err(ShortenError::NotYours)
        }
    }

    /// Applies `change` to `key` of `domain` for `who`, then purges the
    /// key from Varnish. With `if_match`, only if the link still has that
    /// `ETag`.
    pub async fn edit(
        &self,
        who: &Identity,
        domain: &Domain,
        key: &str,
        change: &Change<'_>,
        if_match: Option<&str>,
    ) -> Result<Written<(Link, Current)>, ShortenError> {
        let key = Self::existing_key(domain, key)?;
        // Every input is checked before anything is read or written.
        let url = change
            .url
            .map(|url| normalize_url(url, &self.settings))
            .transpose()?;
        let expires: Option<Option<Expiry>> = change
            .expires_at
            .map(|at| at.map(|at| parse_expiry(at, SystemTime::now())).transpose())
            .transpose()?;
        let starts: Option<Option<Expiry>> = change
            .valid_since
            .map(|at| at.map(parse_start).transpose())
            .transpose()?;
        let expired_url = change
            .expired_url
            .map(|url| self.expired_url(url))
            .transpose()?;
        let max_clicks = change
            .max_clicks
            .map(|limit| {
                limit
                    .map(|clicks| check_click_limit(clicks, &self.settings))
                    .transpose()
            })
            .transpose()?;
        let rules = change
            .rules
            .map(|rules| rules_of(rules, &self.settings))
            .transpose()?;
        let split = change
            .split
            .map(|split| split_of(split, &self.settings))
            .transpose()?;
        let title = change
            .title
            .map(|title| title.map(Title::of).transpose().map(Option::flatten))
            .transpose()?;
        let tags = change.tags.map(tags_of).transpose()?;
        let written = self
            .write(who, domain, &key, if_match, |record| {
                let mut record = record.clone();
                if let Some(url) = &url {
                    record.url = url.clone();
                }
                if let Some(expires) = expires {
                    record.expires = expires;
                }
                if let Some(starts) = starts {
                    record.starts = starts;
                }
                if let Some(expired_url) = &expired_url {
                    record.expired_url.clone_from(expired_url);
                }
                if let Some(max_clicks) = max_clicks {
                    record.max_clicks = max_clicks;
                }
                if let Some(forward_query) = change.forward_query {
                    record.forward_query = forward_query;
                }
                record.crawlable = change.crawlable.unwrap_or(record.crawlable);
                if rules.is_some() || split.is_some() {
                    // Checked again as a whole: the bounds hold for the
                    // new rules with the kept split, and the other way.
                    record.targeting = Targeting::new(
                        rules
                            .clone()
                            .unwrap_or_else(|| record.targeting.rules().to_vec()),
                        split
                            .clone()
                            .unwrap_or_else(|| record.targeting.split().to_vec()),
                    )
                    .map_err(crate::links::rules::BadRule::from)?;
                }
                check_window(&record)?;
                Ok(Stored::Link(record))
            })
            .await?;
        let Stored::Link(record) = &written.outcome.stored else {
            unreachable!("an edit stores a link");
        };
        self.change_details(domain, &key, title, tags, change.crawlable)
            .await?;
        let mut purge_warning = written.purge_warning;
        if let Some(crawlable) = change.crawlable {
            let listed = self.keep_crawlable(domain, key.as_str(), crawlable);
            purge_warning = purge_warning.or(listed.await?);
        }
        Ok(Written {
            outcome: (
                Link {
                    domain: domain.name.clone(),
                    key: key.to_string(),
                    record: record.clone(),
                },
                written.outcome,
            ),
            purge_warning,
        })
    }

    /// Deletes `key` for `who`: it answers 410 from now on and is never
    /// given to another link. Then purges it from Varnish.
    pub async fn delete(
        &self,
        who: &Identity,
        domain: &Domain,
        key: &str,
        if_match: Option<&str>,
    ) -> Result<Written<()>, ShortenError> {
        let key = Self::existing_key(domain, key)?;
        let written = self
            .write(who, domain, &key, if_match, |_| Ok(Stored::Deleted))
            .await?;
        // A deleted link is listed nowhere: its details go with it.
        self.store(domain)
            .keep_details(&key, &LinkDetails::default())
            .await?;
        let listed = self.keep_crawlable(domain, key.as_str(), false).await?;
        Ok(Written {
            outcome: (),
            purge_warning: written.purge_warning.or(listed),
        })
    }

    /// The short URL of `key` on the default domain.
    pub fn short_url(&self, key: &str) -> String {
        self.settings.short_url(key)
    }

    /// The short URL of `link`, on its domain.
    pub fn link_url(&self, link: &Link) -> String {
        match self.settings.domain(Some(&link.domain)) {
            Ok(domain) => domain.short_url(&link.key),
            Err(_) => self.short_url(&link.key),
        }
    }

    /// Writes what `change` makes of `key`'s link, if `who` may change it
    /// and, with `if_match`, if it still has that `ETag`; then purges.
    async fn write(
        &self,
        who: &Identity,
        domain: &Domain,
        key: &Key,
        if_match: Option<&str>,
        change: impl Fn(&Record) -> Result<Stored, ShortenError>,
    ) -> Result<Written<Current>, ShortenError> {
        allowed(who, domain)?;
        let store = self.store(domain);
        for _ in 0..EDIT_ATTEMPTS {
            let current = self.read(domain, key).await?;
            let Stored::Link(record) = &current.stored else {
                return Err(ShortenError::Gone(key.to_string()));
            };
            if !who.may_change(record.owner.as_ref()) {
                return Err(ShortenError::NotYours);
            }
            if if_match.is_some_and(|tag| !etag_matches(tag, &current.etag())) {
                return Err(ShortenError::Stale {
                    current: current.etag(),
                });
            }
            let new = change(record)?;
            let replaced = store.replace(key, &current.raw, &new).await;
            if self.purged_if_stored(domain, replaced).await? {
                let purge_warning = self.purge(domain, key.as_str()).await;
                let raw = new.to_string();
                return Ok(Written {
                    outcome: Current { stored: new, raw },
                    purge_warning,
                });
            }
            if if_match.is_some() {
                // Another change came first: its tag is no longer current.
                let now = self.read(domain, key).await?;
                return Err(ShortenError::Stale {
                    current: now.etag(),
                });
            }
        }
        Err(ShortenError::Stale {
            current: self.read(domain, key).await?.etag(),
        })
    }

    async fn read(&self, domain: &Domain, key: &Key) -> Result<Current, ShortenError> {
        self.store(domain)
            .read(key)
            .await?
            .ok_or_else(|| ShortenError::NotFound(key.to_string()))
    }

    /// `key` as a key of `domain`; one that breaks the rules cannot hold a
    /// link.
    fn existing_key(domain: &Domain, key: &str) -> Result<Key, ShortenError> {
        domain
            .scheme
            .key(key)
            .map_err(|_| ShortenError::NotFound(key.to_owned()))
    }

    fn expired_url(&self, url: Option<&str>) -> Result<Option<ValidUrl>, Invalid> {
        url.map(|url| normalize_expired_url(url, &self.settings))
            .transpose()
    }
}

/// Whether an `If-Match` value names `etag` (a list, or `*`).
fn etag_matches(if_match: &str, etag: &str) -> bool {
    if_match
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag)
}

/// Refuses `who` on a domain its token is not limited to.
pub(crate) fn allowed(who: &Identity, domain: &Domain) -> Result<(), ShortenError> {
    if who.may_use(&domain.name) {
        Ok(())
    } else {
        Err(ShortenError::DomainNotAllowed(domain.name.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_match_takes_lists_weak_tags_and_any() {
        assert!(etag_matches("\"abc\"", "\"abc\""));
        assert!(etag_matches("\"x\", \"abc\"", "\"abc\""));
        assert!(etag_matches("W/\"abc\"", "\"abc\""));
        assert!(etag_matches("*", "\"abc\""));
        assert!(!etag_matches("\"abd\"", "\"abc\""));
        assert!(!etag_matches("abc", "\"abc\""));
    }
}
