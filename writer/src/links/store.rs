//! Storing and reading links in Redis, in the layout of `shortlink_core`.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::redis::master::{Connection, MasterConnection};
use crate::redis::scan::scan;
use redis::Script;
use shortlink_core::{digest_key, Key, KeyScheme, Owner, Record, Stored};

use crate::config::Settings;

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

/// Most index entries one listing reads before it answers with what it
/// found: a filter that matches little must not keep Redis busy.
const LIST_BUDGET: usize = 2000;

/// Index entries read from Redis at once while listing.
const LIST_CHUNK: usize = 200;

/// A link as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
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

/// One page of an owner's links, newest first.
#[derive(Debug, Default)]
pub struct Page {
    pub links: Vec<Link>,
    /// Where the next page starts: the index position below which entries
    /// remain unread; `None` when none do.
    pub next: Option<usize>,
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
    /// Replicas that must hold a change before it is acknowledged.
    replicas_to_ack: u32,
    scheme: KeyScheme,
    count_names: shortlink_core::clicks::CountNames,
    min_generated_len: usize,
    claim: Script,
    index: Script,
    replace: Script,
    write_timeout: Duration,
}

impl LinkStore {
    /// Prepares the store without connecting: the writer starts even while
    /// Redis is away, and answers 503 until it is back.
    pub fn new(settings: &Settings) -> Result<Self, StoreError> {
        let links_url = settings.config.redis.url.as_str();
        let connection = MasterConnection::open(links_url, settings)?;
        let click_connection =
            match shortlink_core::clicks::own_redis(&settings.config.clicks.redis_url, links_url) {
                Some(url) => MasterConnection::open(url, settings)?,
                None => connection.clone(),
            };
        Ok(Self {
            connection,
            click_connection,
            replicas_to_ack: settings.config.redis.replicas_to_ack.get(),
            scheme: settings.scheme.clone(),
            count_names: settings.count_names.clone(),
            min_generated_len: settings.config.min_generated_key_length,
            claim: Script::new(CLAIM_SCRIPT),
            index: Script::new(INDEX_SCRIPT),
            replace: Script::new(REPLACE_SCRIPT),
            write_timeout: settings.write_timeout(),
        })
    }

    /// Stores `record` under the shortest free prefix of its URL's digest
    /// key, or finds the key already holding exactly this record (never
    /// for a link with a click limit: each gets a key of its own).
    pub async fn insert_generated(&self, record: &Record) -> Result<Inserted, StoreError> {
        let keys = self
            .scheme
            .generated_keys(&record.url, self.min_generated_len);
        // Every candidate lives in the first one's hash.
        let Some(first) = keys.first() else {
            return Err(StoreError::DigestExhausted);
        };
        let fields: Vec<&str> = keys.iter().map(|key| self.scheme.field(key)).collect();
        match self.claim(first, record, &fields).await? {
            // `claim` answers only indexes of the fields it was given.
            Some((index, created)) => Ok(outcome(&keys[index], record, created)),
            None => Err(StoreError::DigestExhausted),
        }
    }

    /// Stores `record` under exactly `key`, unless `key` holds anything
    /// else (another link, or a deleted one; or this very link, if it has
    /// a click limit).
    pub async fn insert_custom(&self, record: &Record, key: &Key) -> Result<Inserted, StoreError> {
        match self.claim(key, record, &[self.scheme.field(key)]).await? {
            Some((_, created)) => Ok(outcome(key, record, created)),
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
            self.scheme.purge_queue(),
        )
    }

    /// A reader of the click counts, in the clicks' Redis.
    pub fn clicks(&self) -> crate::clicks::ClickReader {
        crate::clicks::ClickReader::new(self.click_connection.clone(), self.count_names.clone())
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

    /// The owner of each of `keys` that holds a link (`None` inside for a
    /// link without one), in one round trip.
    pub async fn owners_of(&self, keys: &[Key]) -> Result<Vec<Option<Option<Owner>>>, StoreError> {
        let mut connection = self.connection.get()?;
        let values = self.values_of(&mut connection, keys).await?;
        Ok(values
            .into_iter()
            .map(|value| match value.map(|raw| Stored::parse(&raw)) {
                Some(Ok(Stored::Link(record))) => Some(record.owner),
                _ => None,
            })
            .collect())
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

    /// The owners with an index, in name order; `None` stands for links
    /// created without a token.
    pub async fn owners(&self) -> Result<Vec<Option<Owner>>, StoreError> {
        let mut connection = self.connection.get()?;
        let pattern = format!("{}*", self.scheme.index(None));
        let names = scan(&mut connection, &pattern, "list").await?;
        let mut owners: Vec<Option<Owner>> = names
            .iter()
            .filter_map(|name| self.scheme.index_owner(name).ok())
            .collect();
        owners.sort();
        owners.dedup();
        Ok(owners)
    }

    /// Up to `limit` of `owner`'s links that pass `keep`, newest first,
    /// from index position `before` down (from the newest when `None`).
    /// Deleted links are skipped. Reads at most [`LIST_BUDGET`] entries: a
    /// page may hold fewer links than asked and still have a next one.
    pub async fn list(
        &self,
        owner: Option<&Owner>,
        before: Option<usize>,
        limit: usize,
        keep: impl Fn(&Link) -> bool,
    ) -> Result<Page, StoreError> {
        let index = self.scheme.index(owner);
        let mut connection = self.connection.get()?;
        let mut end = match before {
            Some(before) => before,
            None => {
                redis::cmd("LLEN")
                    .arg(&index)
                    .query_async(&mut connection)
                    .await?
            }
        };
        let mut page = Page::default();
        let mut budget = LIST_BUDGET;
        while end > 0 && budget > 0 && page.links.len() < limit {
            let start = end.saturating_sub(LIST_CHUNK.min(budget));
            let keys: Vec<String> = redis::cmd("LRANGE")
                .arg(&index)
                .arg(start)
                .arg(end - 1)
                .query_async(&mut connection)
                .await?;
            let keys: Vec<Key> = keys
                .iter()
                .map(|key| self.scheme.key(key))
                .collect::<Result<_, _>>()
                .map_err(|e| StoreError::Unreadable {
                    key: index.clone(),
                    reason: e.to_string(),
                })?;
            let values = self.values_of(&mut connection, &keys).await?;
            for (position, (key, value)) in (start..end).zip(keys.into_iter().zip(values)).rev() {
                end = position;
                budget -= 1;
                let Some(Stored::Link(record)) = value.and_then(|raw| Stored::parse(&raw).ok())
                else {
                    continue;
                };
                let link = Link {
                    key: key.to_string(),
                    record,
                };
                if keep(&link) {
                    page.links.push(link);
                    if page.links.len() == limit {
                        break;
                    }
                }
            }
        }
        page.next = (end > 0).then_some(end);
        Ok(page)
    }

    /// Every link in the store, a page at a time (see [`Export`]).
    pub async fn export_all(&self) -> Result<Export, StoreError> {
        let nodes = match &self.connection.get()? {
            Connection::Cluster(cluster) => {
                cluster.primaries().await?.into_iter().map(Some).collect()
            }
            Connection::Master(_) => vec![None],
        };
        Ok(Export {
            store: self.clone(),
            from: ExportFrom::Hashes(HashWalk {
                nodes,
                ..HashWalk::default()
            }),
        })
    }

    /// `owner`'s links (those in its index), oldest first, a page at a time.
    pub fn export_owned(&self, owner: Option<&Owner>) -> Export {
        Export {
            store: self.clone(),
            from: ExportFrom::Index {
                index: self.scheme.index(owner),
                owner: owner.cloned(),
                position: 0,
            },
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

/// Links read for an export, a page at a time: however many there are,
/// only one page is held.
pub struct Export {
    store: LinkStore,
    from: ExportFrom,
}

/// Entries (hash fields or index positions) one export page reads.
const EXPORT_PAGE: usize = 1000;

enum ExportFrom {
    /// Every link hash: links written by hand too, whoever owns them.
    Hashes(HashWalk),
    /// One owner's index, oldest first.
    Index {
        index: String,
        /// Whose links: an entry whose link says otherwise is left out.
        owner: Option<Owner>,
        position: usize,
    },
}

/// Every link hash, found by `SCAN` on each primary in turn, each read
/// with `HSCAN`.
#[derive(Default)]
struct HashWalk {
    /// A slot of each primary still to scan (`None`: the one server).
    nodes: Vec<Option<u16>>,
    /// Where `SCAN` goes on on the last of `nodes`; 0 before it starts.
    scan_cursor: u64,
    /// Link hashes found and not read yet.
    hashes: std::collections::VecDeque<String>,
    /// Every hash found so far: `SCAN` may name one twice. At most
    /// 64^split names, however many links.
    found: HashSet<String>,
    /// The hash being read, and where `HSCAN` goes on in it.
    reading: Option<(String, u64)>,
    /// The fields of that hash given out, when it takes more than one
    /// `HSCAN` (a hash past the compact encoding): `HSCAN` may name one
    /// twice too.
    given: HashSet<String>,
}

impl Export {
    /// The next page of links (deleted ones left out), `None` once done.
    /// A page may be empty while more follow.
    pub async fn next_page(&mut self) -> Result<Option<Vec<Link>>, StoreError> {
        let mut connection = self.store.connection.get()?;
        match &mut self.from {
            ExportFrom::Index {
                index,
                owner,
                position,
            } => {
                let keys: Vec<String> = redis::cmd("LRANGE")
                    .arg(&*index)
                    .arg(*position)
                    .arg(*position + EXPORT_PAGE - 1)
                    .query_async(&mut connection)
                    .await?;
                if keys.is_empty() {
                    return Ok(None);
                }
                *position += keys.len();
                let keys: Vec<Key> = keys
                    .iter()
                    .filter_map(|key| self.store.scheme.key(key).ok())
                    .collect();
                let values = self.store.values_of(&mut connection, &keys).await?;
                Ok(Some(
                    keys.into_iter()
                        .zip(values)
                        .filter_map(|(key, value)| link_of(key.to_string(), &value?))
                        .filter(|link| link.record.owner == *owner)
                        .collect(),
                ))
            }
            ExportFrom::Hashes(walk) => {
                if walk.reading.is_none() {
                    walk.reading = walk.hashes.pop_front().map(|hash| (hash, 0));
                }
                if walk.reading.is_some() {
                    return walk
                        .read_hash(&self.store.scheme, &mut connection)
                        .await
                        .map(Some);
                }
                if walk.nodes.is_empty() {
                    return Ok(None);
                }
                walk.scan(&self.store.scheme, &mut connection).await?;
                Ok(Some(Vec::new()))
            }
        }
    }
}

impl HashWalk {
    /// The next page of the hash being read.
    async fn read_hash(
        &mut self,
        scheme: &KeyScheme,
        connection: &mut Connection,
    ) -> Result<Vec<Link>, StoreError> {
        let Some((hash, cursor)) = self.reading.take() else {
            return Ok(Vec::new());
        };
        let (next, entries): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
            .arg(&hash)
            .arg(cursor)
            .arg("COUNT")
            .arg(EXPORT_PAGE)
            .query_async(connection)
            .await?;
        let head = hash.strip_prefix(scheme.prefix()).unwrap_or_default();
        let whole = cursor == 0 && next == 0;
        let given = &mut self.given;
        let links = entries
            .into_iter()
            .filter(|(field, _)| whole || given.insert(field.clone()))
            .filter_map(
                |(field, value)| match scheme.key(&format!("{head}{field}")) {
                    Ok(key) => link_of(key.to_string(), &value),
                    Err(error) => {
                        log::warn!("export: {head}{field:?} is no key ({error}); left out");
                        None
                    }
                },
            )
            .collect();
        if next == 0 {
            self.given.clear();
        } else {
            self.reading = Some((hash, next));
        }
        Ok(links)
    }

    /// Finds more link hashes on the primary being scanned.
    async fn scan(
        &mut self,
        scheme: &KeyScheme,
        connection: &mut Connection,
    ) -> Result<(), StoreError> {
        let Some(&node) = self.nodes.last() else {
            return Ok(());
        };
        let pattern = format!(
            "{}{}",
            glob_escape(scheme.prefix()),
            "?".repeat(scheme.split())
        );
        let mut scan = redis::cmd("SCAN");
        scan.arg(self.scan_cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(EXPORT_PAGE)
            .arg("TYPE")
            .arg("hash");
        let (next, names): (u64, Vec<String>) = match (&*connection, node) {
            (Connection::Cluster(cluster), Some(slot)) => {
                cluster.on_primary_of(slot, &scan).await?
            }
            _ => scan.query_async(connection).await?,
        };
        let found = &mut self.found;
        self.hashes
            .extend(names.into_iter().filter(|name| found.insert(name.clone())));
        if next == 0 {
            self.nodes.pop();
        }
        self.scan_cursor = next;
        Ok(())
    }
}

/// The link `value` stores under `key`; `None` for a deleted link, and for
/// a value that is no link (logged: fix it with redis-cli).
fn link_of(key: String, value: &str) -> Option<Link> {
    match Stored::parse(value) {
        Ok(Stored::Link(record)) => Some(Link { key, record }),
        Ok(Stored::Deleted) => None,
        Err(error) => {
            log::warn!("export: {key:?} holds no link ({error}); left out");
            None
        }
    }
}

/// `text` as a `SCAN` pattern that matches it alone.
fn glob_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
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

fn outcome(key: &Key, record: &Record, created: bool) -> Inserted {
    let link = Link {
        key: key.to_string(),
        record: record.clone(),
    };
    if created {
        Inserted::Created(link)
    } else {
        Inserted::Existing(link)
    }
}
