//! Storing and reading links in Redis, in the layout of `shortlink_core`.
//!
//! This file holds the store itself: its connections, inserts (by the
//! scripts `claim.lua`, `replace.lua` and `index.lua` beside it, each
//! deadline-bound by `deadline.lua`), reads and changes, and the waits for
//! replicas. Its children, in `store/`, read many links at once:
//!
//! | file | what |
//! | --- | --- |
//! | `store/listing.rs` | an owner's links a page at a time ([`Page`]), and the owners with an index |
//! | `store/details.rs` | the links' details beside their values ([`crate::links::details::LinkDetails`]) |
//! | `store/crawlable.rs` | the crawlable keys robots.txt allows |
//! | `store/redirects.rs` | the domain's redirects for visits to no link, set while the writer runs |
//! | `store/export_scan.rs` | every link (or one owner's) for an export ([`Export`]): `SCAN`/`HSCAN` over the hashes, or an index |
//!
//! The children use the store's connection and key scheme; nothing here
//! uses them back but their types, re-exported below.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::redis::master::{Connection, MasterConnection};
use redis::Script;
use shortlink_core::clicks::{Total, RAISE_COUNT_SCRIPT};
use shortlink_core::{digest_key, Key, KeyScheme, Owner, Record, Stored};

use crate::config::{Domain, Settings};

mod crawlable;
mod details;
mod export_scan;
mod listing;
mod redirects;

pub use export_scan::Export;
pub use listing::Page;

/// Claims the first free slot for a URL, in one atomic step.
///
/// Why a script rather than WATCH/MULTI/EXEC: every candidate key of one URL
/// shares its first `split` characters, so all candidates live in the same
/// Redis hash. One script on that one key can then test and claim in a
/// single round trip, with no retry loop under contention, and it stays
/// valid on Redis Cluster, where a script may only touch keys of one slot.
/// Redis runs scripts one at a time, so two writers can never both see a
/// slot free, nor give two URLs the same key.
///
/// The script also carries a deadline. A writer that gave up waiting has
/// told its client 503; if Redis was only hung, the script still sits on
/// its socket and would run when Redis resumes, storing a link nobody was
/// told about. Past the deadline it stores nothing.
///
/// A link the script stores is added to its owner's index in the same
/// step, so no link is ever missing from its owner's list; in a Redis
/// Cluster, where the list lives in another slot, by [`INDEX_SCRIPT`] just
/// after.
///
/// Returns `{n, created}`: the n-th candidate holds the value (created = 1
/// if this call stored it), `{0, 0}` if every candidate holds another
/// value, or `{-1, 0}` if the deadline had passed.
const CLAIM_SCRIPT: &str = concat!(include_str!("deadline.lua"), include_str!("claim.lua"));

/// Replaces a link's value only if it still holds the value the change was
/// based on, so two concurrent changes never both apply. Carries the same
/// deadline as a claim. Returns `{1, 0}` when replaced, `{0, 0}` when the
/// value had changed meanwhile, `{-1, 0}` past the deadline.
const REPLACE_SCRIPT: &str = concat!(include_str!("deadline.lua"), include_str!("replace.lua"));

/// Appends `ARGV[1]` to the owner's list `KEYS[1]` unless it is among its
/// last entries already: in a cluster, where the list is written after the
/// link, a retried or concurrent insert of the same link lists it once.
const INDEX_SCRIPT: &str = include_str!("index.lua");

/// A link as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The canonical name of its short domain: the same key on two domains
    /// is two links.
    pub domain: String,
    pub key: String,
    pub record: Record,
}

/// What a key holds now, as read for a change based on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    pub stored: Stored,
    /// The value exactly as Redis holds it: a change applies only if it
    /// still does.
    pub raw: String,
}

impl Current {
    /// An entity tag for this value: equal values, equal tags.
    pub fn etag(&self) -> String {
        format!("\"{}\"", &digest_key(&self.raw)[..16])
    }
}

/// What an insert did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inserted {
    /// Stored now.
    Created(Link),
    /// The same URL was already stored under this key.
    Existing(Link),
}

impl Inserted {
    pub fn link(&self) -> &Link {
        match self {
            Self::Created(link) | Self::Existing(link) => link,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The custom key holds another URL.
    #[error(
        "the key {key:?} is already taken by another URL; choose another key, \
         or leave it empty to get a generated one"
    )]
    KeyTaken { key: String },
    /// Every prefix of the digest holds another URL (2^160 says: never).
    #[error("every generated key for this URL is taken; use a custom key")]
    DigestExhausted,
    /// The key holds a value that is no link (written by hand, say).
    #[error("the key {key:?} holds a value that is not a link ({reason}); fix it with redis-cli")]
    Unreadable { key: String, reason: String },
    /// Redis could not take the insert: answer 503, the client may retry.
    #[error("the link store (Redis) is unreachable; try again in a moment ({0})")]
    Unavailable(#[source] Unreachable),
    /// The master has the change to `key`, but too few replicas confirmed
    /// it to promise that it survives a failover: answer 503.
    #[error(
        "the change to {key:?} is stored on the Redis master, but only {confirmed} of \
         {wanted} replicas confirmed it in time, so it may not survive a failover; check \
         the replicas' link to the master, then look the link up (GET /api/links/{key})"
    )]
    NotReplicated {
        key: String,
        wanted: u32,
        confirmed: u32,
    },
}

/// Why the store could not take an insert.
#[derive(Debug, thiserror::Error)]
pub enum Unreachable {
    /// Redis did not answer, refused, or failed.
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    /// The claim reached Redis after its deadline, so it stored nothing.
    #[error(
        "Redis took longer than the write timeout, so nothing was stored; if Redis \
         answers quickly, its clock is ahead of the writer's"
    )]
    PastDeadline,
    /// The claim script answered something it never answers.
    #[error("the claim script answered {0}")]
    UnexpectedReply(i64),
}

impl From<redis::RedisError> for StoreError {
    fn from(error: redis::RedisError) -> Self {
        Self::Unavailable(Unreachable::Redis(error))
    }
}

/// Links in Redis, through one multiplexed connection that reconnects by
/// itself: concurrent requests share it, pipelined.
#[derive(Clone)]
pub struct LinkStore {
    connection: MasterConnection,
    /// The clicks' Redis: the links' own connection unless they have one.
    click_connection: MasterConnection,
    /// Whether the clicks have a Redis of their own.
    clicks_apart: bool,
    /// Replicas that must hold a change before it is acknowledged.
    replicas_to_ack: u32,
    /// The canonical name of the short domain whose links these are.
    domain: String,
    /// That domain's key space.
    scheme: KeyScheme,
    count_names: shortlink_core::clicks::CountNames,
    min_generated_len: usize,
    claim: Script,
    index: Script,
    replace: Script,
    raise_count: Script,
    write_timeout: Duration,
    /// The queued purges' stream: one for every domain, named after the
    /// store's own key scheme.
    purge_stream: String,
}

impl LinkStore {
    /// Prepares the store without connecting: the writer starts even while
    /// Redis is away, and answers 503 until it is back.
    pub fn new(settings: &Settings) -> Result<Self, StoreError> {
        let links_url = settings.config.redis.url.as_str();
        let connection = MasterConnection::open(links_url, settings)?;
        let apart = shortlink_core::clicks::own_redis(&settings.config.clicks.redis_url, links_url);
        let click_connection = match apart {
            Some(url) => MasterConnection::open(url, settings)?,
            None => connection.clone(),
        };
        Ok(Self {
            connection,
            click_connection,
            clicks_apart: apart.is_some(),
            replicas_to_ack: settings.config.redis.replicas_to_ack.get(),
            domain: settings.domains[0].name.clone(),
            scheme: settings.scheme.clone(),
            count_names: settings.count_names.clone(),
            min_generated_len: settings.config.min_generated_key_length,
            claim: Script::new(CLAIM_SCRIPT),
            index: Script::new(INDEX_SCRIPT),
            replace: Script::new(REPLACE_SCRIPT),
            raise_count: Script::new(RAISE_COUNT_SCRIPT),
            write_timeout: settings.write_timeout(),
            purge_stream: settings.scheme.purge_queue(),
        })
    }

    /// The same store, for the links of `domain`: its key space and click
    /// counts, on the same connections.
    #[must_use]
    pub fn in_domain(&self, domain: &Domain) -> Self {
        Self {
            domain: domain.name.clone(),
            scheme: domain.scheme.clone(),
            count_names: domain.count_names.clone(),
            ..self.clone()
        }
    }

    /// The canonical name of the domain whose links these are.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// A link of this store's domain.
    fn link(&self, key: String, record: Record) -> Link {
        Link {
            domain: self.domain.clone(),
            key,
            record,
        }
    }

    /// Stores `record` under the shortest free prefix of its URL's digest
    /// key, or finds the key already holding exactly this record (never
    /// for a link with a click limit: each gets a key of its own), at
    /// least `min_len` characters long when given (else the configured
    /// shortest).
    pub async fn insert_generated(
        &self,
        record: &Record,
        min_len: Option<usize>,
    ) -> Result<Inserted, StoreError> {
        let keys = self.scheme.generated_keys(
            &record.url,
            min_len.map_or(self.min_generated_len, |len| {
                len.max(self.min_generated_len)
            }),
        );
        // Every candidate lives in the first one's hash.
        let Some(first) = keys.first() else {
            return Err(StoreError::DigestExhausted);
        };
        let fields: Vec<&str> = keys.iter().map(|key| self.scheme.field(key)).collect();
        match self.claim(first, record, &fields).await? {
            // `claim` answers only indexes of the fields it was given.
            Some((index, created)) => Ok(self.outcome(&keys[index], record, created)),
            None => Err(StoreError::DigestExhausted),
        }
    }

    /// Stores `record` under exactly `key`, unless `key` holds anything
    /// else (another link, or a deleted one; or this very link, if it has
    /// a click limit).
    pub async fn insert_custom(&self, record: &Record, key: &Key) -> Result<Inserted, StoreError> {
        match self.claim(key, record, &[self.scheme.field(key)]).await? {
            Some((_, created)) => Ok(self.outcome(key, record, created)),
            None => Err(StoreError::KeyTaken {
                key: key.to_string(),
            }),
        }
    }

    /// The purges Varnish nodes did not confirm, in the links' Redis: kept
    /// as durably as the links they purge.
    pub fn purge_queue(&self) -> crate::varnish::purge_queue::PurgeQueue {
        crate::varnish::purge_queue::PurgeQueue::new(
            self.connection.clone(),
            self.purge_stream.clone(),
        )
    }

    /// A reader of the click counts, in the clicks' Redis.
    pub fn clicks(&self) -> crate::clicks::ClickReader {
        crate::clicks::ClickReader::new(
            self.click_connection.clone(),
            self.domain.clone(),
            self.count_names.clone(),
        )
    }

    /// What each of `keys` holds, as Redis holds it, in one round trip.
    async fn values_of(
        &self,
        connection: &mut Connection,
        keys: &[Key],
    ) -> Result<Vec<Option<String>>, StoreError> {
        let mut lookups = redis::pipe();
        for key in keys {
            let slot = self.scheme.slot(key);
            lookups.cmd("HGET").arg(&slot.hash).arg(slot.field);
        }
        Ok(lookups.query_async(connection).await?)
    }

    /// The link each of `keys` holds, if any, in one round trip.
    pub async fn records_of(&self, keys: &[Key]) -> Result<Vec<Option<Record>>, StoreError> {
        let mut connection = self.connection.get()?;
        let values = self.values_of(&mut connection, keys).await?;
        Ok(values
            .into_iter()
            .map(|value| match value.map(|raw| Stored::parse(&raw)) {
                Some(Ok(Stored::Link(record))) => Some(record),
                _ => None,
            })
            .collect())
    }

    /// The owner of each of `keys` that holds a link (`None` inside for a
    /// link without one), in one round trip.
    pub async fn owners_of(&self, keys: &[Key]) -> Result<Vec<Option<Option<Owner>>>, StoreError> {
        let records = self.records_of(keys).await?;
        Ok(records
            .into_iter()
            .map(|record| record.map(|record| record.owner))
            .collect())
    }

    /// Whether the links' Redis answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut connection = self.connection.get()?;
        redis::cmd("PING")
            .query_async::<()>(&mut connection)
            .await?;
        Ok(())
    }

    /// What `key` holds, if anything.
    pub async fn read(&self, key: &Key) -> Result<Option<Current>, StoreError> {
        let slot = self.scheme.slot(key);
        let mut connection = self.connection.get()?;
        let raw: Option<String> = redis::cmd("HGET")
            .arg(&slot.hash)
            .arg(slot.field)
            .query_async(&mut connection)
            .await?;
        raw.map(|raw| current(key, raw)).transpose()
    }

    /// Stores `new` under `key` if it still holds `based_on`: `Ok(false)`
    /// when a concurrent change came first, and nothing was stored.
    pub async fn replace(
        &self,
        key: &Key,
        based_on: &str,
        new: &Stored,
    ) -> Result<bool, StoreError> {
        // First, so that no stale copy (of a link limited, freed and
        // limited again) ever stands beside the new limit.
        if matches!(new, Stored::Link(record) if record.max_clicks.is_some()) {
            self.copy_limit_count(key).await;
        }
        let slot = self.scheme.slot(key);
        let mut connection = self.write_connection()?;
        let mut invocation = self.replace.key(&slot.hash);
        invocation
            .arg(new.to_string())
            .arg(self.deadline_ms())
            .arg(slot.field)
            .arg(based_on);
        let (outcome, _): (i64, u8) = invocation.invoke_async(&mut connection).await?;
        match outcome {
            -1 => Err(StoreError::Unavailable(Unreachable::PastDeadline)),
            0 => Ok(false),
            1 => self
                .replicated(&mut connection, key.as_str(), &slot.hash)
                .await
                .map(|()| true),
            n => Err(StoreError::Unavailable(Unreachable::UnexpectedReply(n))),
        }
    }

    /// With clicks in a Redis of their own, copies the people's clicks of
    /// `key`, a link with a click limit, to the links' Redis, where Varnish
    /// reads them ([`RAISE_COUNT_SCRIPT`]). Failing that, removes any copy
    /// there, which may be stale: without one, Varnish reads the clicks'
    /// Redis, until the link's next stored click makes a copy.
    async fn copy_limit_count(&self, key: &Key) {
        if !self.clicks_apart {
            return;
        }
        let slot = self.count_names.total_slot(Total::People, key.as_str());
        let copied: redis::RedisResult<String> = async {
            let mut clicks = self.click_connection.get()?;
            let stored: Option<u64> = redis::cmd("HGET")
                .arg(&slot.hash)
                .arg(slot.field)
                .query_async(&mut clicks)
                .await?;
            let mut links = self.connection.get()?;
            self.raise_count
                .key(&slot.hash)
                .arg(slot.field)
                .arg(stored.unwrap_or(0))
                .invoke_async(&mut links)
                .await
        }
        .await;
        if let Err(error) = copied {
            let removed: redis::RedisResult<()> = async {
                let mut links = self.connection.get()?;
                redis::cmd("HDEL")
                    .arg(&slot.hash)
                    .arg(slot.field)
                    .query_async(&mut links)
                    .await
            }
            .await;
            let then = match removed {
                Ok(()) => "Varnish reads them in the clicks' Redis until its next click is stored",
                Err(_) => "an older copy may stand until its next click is stored",
            };
            log::warn!("could not copy the clicks of {key} to the links' Redis ({error}); {then}");
        }
    }

    async fn claim(
        &self,
        first: &Key,
        record: &Record,
        fields: &[&str],
    ) -> Result<Option<(usize, bool)>, StoreError> {
        let slot = self.scheme.slot(first);
        let mut connection = self.write_connection()?;
        let index = self.scheme.index(record.owner.as_ref());
        // In a cluster the index lives in another slot than the link, so
        // no one script may touch both: it is added to after, below.
        let in_cluster = self.connection.is_cluster();
        let mut invocation = self.claim.key(&slot.hash);
        if !in_cluster {
            invocation.key(&index);
        }
        invocation
            .arg(record.to_string())
            .arg(self.deadline_ms())
            .arg(self.scheme.head(first))
            .arg(if record.max_clicks.is_some() {
                "0"
            } else if self.replicas_to_ack > 0 {
                "2"
            } else {
                "1"
            })
            .arg(fields);
        let (position, created): (i64, u8) = invocation.invoke_async(&mut connection).await?;
        let claimed = match position {
            -1 => return Err(StoreError::Unavailable(Unreachable::PastDeadline)),
            0 => return Ok(None),
            n => usize::try_from(n - 1)
                .ok()
                .filter(|&index| index < fields.len())
                .ok_or(StoreError::Unavailable(Unreachable::UnexpectedReply(n)))?,
        };
        // Also when the link was there already (the script wrote it again,
        // for this WAIT to cover): the insert that stored it may have been
        // refused for want of replicas.
        let key = self
            .scheme
            .key(&format!("{}{}", self.scheme.head(first), fields[claimed]));
        let key =
            key.map_err(|_| StoreError::Unavailable(Unreachable::UnexpectedReply(position)))?;
        self.replicated(&mut connection, key.as_str(), &slot.hash)
            .await?;
        if record.max_clicks.is_some() {
            self.copy_limit_count(&key).await;
        }
        if in_cluster {
            self.index
                .key(&index)
                .arg(key.as_str())
                .invoke_async::<()>(&mut connection)
                .await?;
            self.replicated(&mut connection, key.as_str(), &index)
                .await?;
        }
        Ok(Some((claimed, created == 1)))
    }

    /// The connection a link's change goes on: one of the wait lanes when
    /// it must wait for replicas, so that one wait holds up no other.
    fn write_connection(&self) -> redis::RedisResult<Connection> {
        if self.replicas_to_ack == 0 {
            self.connection.get()
        } else {
            self.connection.wait_lane()
        }
    }

    /// Returns once `replicas_to_ack` replicas hold every write sent on
    /// `connection` so far (`WAIT`), within half the write timeout: in a
    /// cluster, every write to the node serving `written` (the name of
    /// what the change of `key` wrote).
    async fn replicated(
        &self,
        connection: &mut Connection,
        key: &str,
        written: &str,
    ) -> Result<(), StoreError> {
        if self.replicas_to_ack == 0 {
            return Ok(());
        }
        let within_ms =
            u64::try_from((self.write_timeout / 2).as_millis().max(1)).unwrap_or(u64::MAX);
        let confirmed: u32 = match connection {
            Connection::Cluster(cluster) => {
                cluster
                    .wait_for_replicas(written, self.replicas_to_ack, within_ms)
                    .await?
            }
            Connection::Master(_) => {
                redis::cmd("WAIT")
                    .arg(self.replicas_to_ack)
                    .arg(within_ms)
                    .query_async(connection)
                    .await?
            }
        };
        if confirmed < self.replicas_to_ack {
            return Err(StoreError::NotReplicated {
                key: key.to_owned(),
                wanted: self.replicas_to_ack,
                confirmed,
            });
        }
        Ok(())
    }

    /// When a claim sent now must no longer store anything: before the write
    /// timeout, so that a claim run just in time has a margin to answer.
    /// Writer and Redis clocks must agree to within that margin (NTP does).
    fn deadline_ms(&self) -> u128 {
        let margin = (self.write_timeout / 4).min(Duration::from_millis(250));
        let deadline = SystemTime::now() + self.write_timeout - margin;
        deadline
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis())
    }
}

fn current(key: &Key, raw: String) -> Result<Current, StoreError> {
    match Stored::parse(&raw) {
        Ok(stored) => Ok(Current { stored, raw }),
        Err(e) => Err(StoreError::Unreadable {
            key: key.to_string(),
            reason: e.to_string(),
        }),
    }
}

impl LinkStore {
    fn outcome(&self, key: &Key, record: &Record, created: bool) -> Inserted {
        let link = self.link(key.to_string(), record.clone());
        if created {
            Inserted::Created(link)
        } else {
            Inserted::Existing(link)
        }
    }
}
