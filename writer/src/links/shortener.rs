//! What can be done to links: create, show, edit, delete, list. Each
//! validates, stores and purges the same way for the JSON API, the web
//! pages and the command line.

use std::sync::Arc;
use std::time::SystemTime;

use shortlink_core::{Expiry, Key, Owner, Record, Stored, ValidUrl};

use crate::access::Identity;
use crate::clicks::TrendingCache;
use crate::config::Settings;
use crate::links::store::{Current, Export, Inserted, Link, LinkStore, StoreError};
use crate::links::validate::{
    check_click_limit, check_custom_key, normalize_expired_url, normalize_url, parse_expiry, Field,
    Invalid,
};
use crate::varnish::purge::Nodes;
use crate::varnish::purge_queue::{PurgeQueue, RETRY_INTERVAL};

mod clicks;

pub use crate::links::error::ShortenError;
pub use clicks::{WarmError, Warmed};

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

/// A link to create, as submitted.
#[derive(Debug, Default, Clone, Copy)]
pub struct NewLink<'a> {
    pub url: &'a str,
    /// A custom key; empty or `None` for a generated one.
    pub key: Option<&'a str>,
    pub expires_at: Option<&'a str>,
    pub expired_url: Option<&'a str>,
    /// The most people's clicks it answers.
    pub max_clicks: Option<u64>,
    /// Forward the request's query string to the target (`Some(true)`),
    /// never (`Some(false)`), or as its domain does (`None`).
    pub forward_query: Option<bool>,
}

/// A change to a link, as submitted: `None` leaves a part as it is;
/// `Some(None)` removes an expiry, an expired URL or a click limit.
#[derive(Debug, Default, Clone, Copy)]
pub struct Change<'a> {
    pub url: Option<&'a str>,
    pub expires_at: Option<Option<&'a str>>,
    pub expired_url: Option<Option<&'a str>>,
    pub max_clicks: Option<Option<u64>>,
    /// `Some(None)`: as the link's domain does.
    pub forward_query: Option<Option<bool>>,
}

/// What to list: a page of at most `limit` links, from `cursor` on,
/// whose key or URL contains `search`; admins may name one `owner`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ListQuery<'a> {
    pub limit: usize,
    pub cursor: Option<&'a str>,
    pub search: Option<&'a str>,
    pub owner: Option<&'a str>,
}

/// A page of links, and the cursor of the next page if there is one.
#[derive(Debug)]
pub struct Listing {
    pub links: Vec<Link>,
    pub next_cursor: Option<String>,
}

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
    store: LinkStore,
    nodes: Arc<Nodes>,
    /// The trending links answered lately, shared by the workers.
    trending: Arc<TrendingCache>,
}

impl Shortener {
    pub fn new(settings: Settings) -> Result<Self, StoreError> {
        let store = LinkStore::new(&settings)?;
        let nodes = Arc::new(Nodes::new(
            &settings.config.varnish.purge_nodes(),
            &settings.public_base,
            &settings.link_path,
            settings.config.varnish.purge_secret.as_str(),
            settings.write_timeout(),
        ));
        Ok(Self {
            settings: Arc::new(settings),
            store,
            nodes,
            trending: Arc::default(),
        })
    }

    /// The purges Varnish nodes did not confirm, and the nodes to send them
    /// to: `serve` retries them (see [`PurgeQueue::retry_forever`]).
    pub fn purge_queue(&self) -> (PurgeQueue, Arc<Nodes>) {
        (self.store.purge_queue(), Arc::clone(&self.nodes))
    }

    /// How many purges wait in the queue for their node.
    pub async fn queued_purges(&self) -> Result<u64, StoreError> {
        Ok(self.store.purge_queue().queued().await?)
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

    /// Stores `new`, recording `owner`, then purges its key from Varnish.
    /// The same URL from the same owner with the same expiry gets the key
    /// it already has; anything else, and any link with a click limit,
    /// gets a key of its own, so a change to one link never moves another
    /// and no link starts with another's clicks.
    pub async fn create(
        &self,
        new: &NewLink<'_>,
        owner: Option<Owner>,
    ) -> Result<Written<Inserted>, ShortenError> {
        let (record, key) = self.record_of(new, owner)?;
        let inserted = match &key {
            Some(key) => self.store.insert_custom(&record, key).await,
            None => self.store.insert_generated(&record).await,
        };
        let inserted = self.purged_if_stored(inserted).await?;
        // Even an existing link may have a 404 cached from before it was
        // stored (by hand, say): purging costs little and settles it.
        let purge_warning = self.purge(&inserted.link().key).await;
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
        let (record, Some(key)) = self.record_of(new, owner)? else {
            return Ok(None);
        };
        let current = self.store.read(&key).await?;
        Ok(current
            .filter(|current| current.stored == Stored::Link(record.clone()))
            .map(|_| Link {
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
        let record = Record {
            url,
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
        };
        Ok((record, key))
    }

    /// What `key` holds: a link, or why not.
    pub async fn show(&self, key: &str) -> Result<(Link, Current), ShortenError> {
        let key = self.existing_key(key)?;
        let current = self.read(&key).await?;
        match &current.stored {
            Stored::Link(record) => Ok((
                Link {
                    key: key.to_string(),
                    record: record.clone(),
                },
                current,
            )),
            Stored::Deleted => Err(ShortenError::Gone(key.to_string())),
        }
    }

    /// Applies `change` to `key` for `who`, then purges the key from
    /// Varnish. With `if_match`, only if the link still has that `ETag`.
    pub async fn edit(
        &self,
        who: &Identity,
        key: &str,
        change: &Change<'_>,
        if_match: Option<&str>,
    ) -> Result<Written<(Link, Current)>, ShortenError> {
        let key = self.existing_key(key)?;
        // Every input is checked before anything is read or written.
        let url = change
            .url
            .map(|url| normalize_url(url, &self.settings))
            .transpose()?;
        let expires: Option<Option<Expiry>> = change
            .expires_at
            .map(|at| at.map(|at| parse_expiry(at, SystemTime::now())).transpose())
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
        let written = self
            .write(who, &key, if_match, |record| {
                let mut record = record.clone();
                if let Some(url) = &url {
                    record.url = url.clone();
                }
                if let Some(expires) = expires {
                    record.expires = expires;
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
                Stored::Link(record)
            })
            .await?;
        let Stored::Link(record) = &written.outcome.stored else {
            unreachable!("an edit stores a link");
        };
        Ok(Written {
            outcome: (
                Link {
                    key: key.to_string(),
                    record: record.clone(),
                },
                written.outcome,
            ),
            purge_warning: written.purge_warning,
        })
    }

    /// Deletes `key` for `who`: it answers 410 from now on and is never
    /// given to another link. Then purges it from Varnish.
    pub async fn delete(
        &self,
        who: &Identity,
        key: &str,
        if_match: Option<&str>,
    ) -> Result<Written<()>, ShortenError> {
        let key = self.existing_key(key)?;
        let written = self.write(who, &key, if_match, |_| Stored::Deleted).await?;
        Ok(Written {
            outcome: (),
            purge_warning: written.purge_warning,
        })
    }

    /// A page of the links `who` may change: its own, or for an admin
    /// everyone's (one owner's with `query.owner`), owner by owner in name
    /// order, each newest first.
    pub async fn list(
        &self,
        who: &Identity,
        query: &ListQuery<'_>,
    ) -> Result<Listing, ShortenError> {
        check_limit(query.limit)?;
        let (start_owner, before) = match query.cursor {
            Some(cursor) => {
                let resume = parse_cursor(cursor)?;
                (Some(resume.owner), resume.before)
            }
            None => (None, None),
        };
        let owners: Vec<Option<Owner>> = match (who.admin, query.owner) {
            (true, Some(owner)) => vec![Some(owner_named(owner)?)],
            (true, None) => self.store.owners().await?,
            (false, Some(owner)) if owner != who.owner.as_str() => {
                return Err(ShortenError::NotYours)
            }
            (false, _) => vec![Some(who.owner.clone())],
        };
        let search = query.search.map(str::to_lowercase);
        let keep = |link: &Link| {
            search.as_deref().is_none_or(|search| {
                link.key.to_lowercase().contains(search)
                    || link.record.url.as_str().to_lowercase().contains(search)
            })
        };
        let mut links = Vec::new();
        let from = start_owner.as_ref().map_or(0, |start| {
            owners.partition_point(|owner| owner.as_ref() < start.as_ref())
        });
        for (n, owner) in owners.iter().enumerate().skip(from) {
            // A cursor's position belongs to its own owner's index only.
            let resumes = n == from && start_owner.as_ref() == Some(owner);
            let before = if resumes { before } else { None };
            let page = self
                .store
                .list(owner.as_ref(), before, query.limit - links.len(), keep)
                .await?;
            links.extend(page.links);
            if let Some(next) = page.next {
                return Ok(Listing {
                    links,
                    next_cursor: Some(cursor(owner.as_ref(), Some(next))),
                });
            }
            if links.len() == query.limit {
                return Ok(Listing {
                    links,
                    next_cursor: owners.get(n + 1).map(|owner| cursor(owner.as_ref(), None)),
                });
            }
        }
        Ok(Listing {
            links,
            next_cursor: None,
        })
    }

    /// Every link `who` may change, a page at a time: an admin's export
    /// holds every link in the store (written by hand too), or `owner`'s
    /// alone; anyone else's the links of its token.
    pub async fn export(
        &self,
        who: &Identity,
        owner: Option<&str>,
    ) -> Result<Export, ShortenError> {
        Ok(match (who.admin, owner) {
            (true, None) => self.store.export_all().await?,
            (true, Some(owner)) => self.store.export_owned(Some(&owner_named(owner)?)),
            (false, Some(owner)) if owner != who.owner.as_str() => {
                return Err(ShortenError::NotYours)
            }
            (false, _) => self.store.export_owned(Some(&who.owner)),
        })
    }

    pub fn short_url(&self, key: &str) -> String {
        self.settings.short_url(key)
    }

    /// Writes what `change` makes of `key`'s link, if `who` may change it
    /// and, with `if_match`, if it still has that `ETag`; then purges.
    async fn write(
        &self,
        who: &Identity,
        key: &Key,
        if_match: Option<&str>,
        change: impl Fn(&Record) -> Stored,
    ) -> Result<Written<Current>, ShortenError> {
        for _ in 0..EDIT_ATTEMPTS {
            let current = self.read(key).await?;
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
            let new = change(record);
            let replaced = self.store.replace(key, &current.raw, &new).await;
            if self.purged_if_stored(replaced).await? {
                let purge_warning = self.purge(key.as_str()).await;
                let raw = new.to_string();
                return Ok(Written {
                    outcome: Current { stored: new, raw },
                    purge_warning,
                });
            }
            if if_match.is_some() {
                // Another change came first: its tag is no longer current.
                let now = self.read(key).await?;
                return Err(ShortenError::Stale {
                    current: now.etag(),
                });
            }
        }
        Err(ShortenError::Stale {
            current: self.read(key).await?.etag(),
        })
    }

    async fn read(&self, key: &Key) -> Result<Current, ShortenError> {
        self.store
            .read(key)
            .await?
            .ok_or_else(|| ShortenError::NotFound(key.to_string()))
    }

    /// `key` as a key; one that breaks the rules cannot hold a link.
    fn existing_key(&self, key: &str) -> Result<Key, ShortenError> {
        self.settings
            .scheme
            .key(key)
            .map_err(|_| ShortenError::NotFound(key.to_owned()))
    }

    fn expired_url(&self, url: Option<&str>) -> Result<Option<ValidUrl>, Invalid> {
        url.map(|url| normalize_expired_url(url, &self.settings))
            .transpose()
    }

    /// `written`, after purging the change's key when the master stored it
    /// but too few replicas confirmed it: Varnish must not keep serving the
    /// old answer of a change that is in Redis, acknowledged or not.
    async fn purged_if_stored<T>(&self, written: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(StoreError::NotReplicated { key, .. }) = &written {
            let _ = self.purge(key).await;
        }
        written
    }

    /// Purges `key` on every Varnish node; queues the purge for the nodes
    /// that did not confirm it, and says so.
    async fn purge(&self, key: &str) -> Option<String> {
        let missed = self.nodes.purge(key).await;
        if missed.is_empty() {
            return None;
        }
        let kept = self.settings.config.redirect.longest_kept();
        let queued = self
            .store
            .purge_queue()
            .add(&missed, key, SystemTime::now() + kept)
            .await;
        let nodes = missed
            .iter()
            .map(|miss| format!("{} ({})", miss.node, miss.error))
            .collect::<Vec<_>>()
            .join("; ");
        let warning = match queued {
            Ok(()) => format!(
                "stored, but Varnish was not told at {nodes}: the purge is queued and sent \
                 again every {} s until that node confirms it, for up to {} s (after which \
                 the node holds no old answer anyway)",
                RETRY_INTERVAL.as_secs(),
                kept.as_secs()
            ),
            Err(error) => format!(
                "stored, but Varnish was not told at {nodes}, and the purge could not be \
                 queued ({error}); that node may answer with the old link for up to {} s",
                kept.as_secs()
            ),
        };
        log::warn!("{key}: {warning}");
        Some(warning)
    }
}

/// Whether an `If-Match` value names `etag` (a list, or `*`).
fn etag_matches(if_match: &str, etag: &str) -> bool {
    if_match
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag)
}

fn owner_named(name: &str) -> Result<Owner, Invalid> {
    Owner::try_from(name).map_err(|e| Invalid::new(Field::Owner, e.to_string()))
}

/// A listing's cursor: the owner, then the index position to go on below
/// (nothing: from that owner's newest).
fn cursor(owner: Option<&Owner>, before: Option<usize>) -> String {
    format!(
        "{}/{}",
        owner.map_or("", Owner::as_str),
        before.map(|b| b.to_string()).unwrap_or_default()
    )
}

/// Where a listing goes on: an owner's index (`None`: links created
/// without a token), below a position or from its newest.
#[derive(Debug, PartialEq, Eq)]
struct Resume {
    owner: Option<Owner>,
    before: Option<usize>,
}

fn parse_cursor(text: &str) -> Result<Resume, Invalid> {
    let bad = || {
        Invalid::new(
            Field::Cursor,
            "the cursor is not one this API gave out; start again without one",
        )
    };
    let (owner, before) = text.split_once('/').ok_or_else(bad)?;
    let owner = if owner.is_empty() {
        None
    } else {
        Some(Owner::try_from(owner).map_err(|_| bad())?)
    };
    let before = if before.is_empty() {
        None
    } else {
        Some(before.parse().map_err(|_| bad())?)
    };
    Ok(Resume { owner, before })
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

    #[test]
    fn cursors_read_back() {
        let alice = Owner::try_from("alice").unwrap();
        for (owner, before) in [(Some(&alice), Some(7)), (None, None), (Some(&alice), None)] {
            let text = cursor(owner, before);
            assert_eq!(
                parse_cursor(&text).unwrap(),
                Resume {
                    owner: owner.cloned(),
                    before
                },
                "{text}"
            );
        }
        for bad in ["", "alice", "a b/1", "alice/x", "alice/-1"] {
            assert!(parse_cursor(bad).is_err(), "{bad}");
        }
    }
}
