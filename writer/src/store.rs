//! Storing and reading links in Redis, in the layout of `shortlink_core`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;
use shortlink_core::{Key, KeyScheme, ValidUrl};

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
/// `KEYS[1]`: the hash. `ARGV[1]`: the URL. `ARGV[2]`: the deadline, in
/// milliseconds of Redis's clock (`TIME`). `ARGV[3..]`: candidate fields,
/// shortest first. Returns `{n, created}`: the n-th candidate holds the URL
/// (created = 1 if this call stored it), `{0, 0}` if every candidate holds
/// another URL, or `{-1, 0}` if the deadline had passed.
const CLAIM_SCRIPT: &str = include_str!("claim.lua");

/// A link as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub key: String,
    pub url: String,
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
    /// Redis could not take the insert: answer 503, the client may retry.
    #[error("the link store (Redis) is unreachable; try again in a moment ({0})")]
    Unavailable(#[source] Unreachable),
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
    connection: ConnectionManager,
    scheme: KeyScheme,
    min_generated_len: usize,
    claim: Script,
    write_timeout: Duration,
}

impl LinkStore {
    /// Prepares the store without connecting: the writer starts even while
    /// Redis is away, and answers 503 until it is back.
    pub fn new(settings: &Settings) -> Result<Self, StoreError> {
        let client = redis::Client::open(settings.config.redis.url.as_str())?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout()))
            .set_response_timeout(Some(settings.write_timeout()))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let connection = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Self {
            connection,
            scheme: settings.scheme.clone(),
            min_generated_len: settings.config.min_generated_key_length,
            claim: Script::new(CLAIM_SCRIPT),
            write_timeout: settings.write_timeout(),
        })
    }

    /// Stores `url` under the shortest free prefix of its digest key.
    pub async fn insert_generated(&self, url: &ValidUrl) -> Result<Inserted, StoreError> {
        let keys = self.scheme.generated_keys(url, self.min_generated_len);
        // Every candidate lives in the first one's hash.
        let Some(first) = keys.first() else {
            return Err(StoreError::DigestExhausted);
        };
        let hash = self.scheme.slot(first).hash;
        let fields: Vec<&str> = keys.iter().map(|key| self.scheme.field(key)).collect();
        match self.claim(&hash, url, &fields).await? {
            // `claim` answers only indexes of the fields it was given.
            Some((index, created)) => Ok(outcome(&keys[index], url, created)),
            None => Err(StoreError::DigestExhausted),
        }
    }

    /// Stores `url` under exactly `key`, unless `key` holds another URL.
    pub async fn insert_custom(&self, url: &ValidUrl, key: &Key) -> Result<Inserted, StoreError> {
        let slot = self.scheme.slot(key);
        match self.claim(&slot.hash, url, &[slot.field]).await? {
            Some((_, created)) => Ok(outcome(key, url, created)),
            None => Err(StoreError::KeyTaken {
                key: key.to_string(),
            }),
        }
    }

    /// The URL stored under `key`, if any; `None` too for keys that break
    /// the key rules.
    pub async fn get(&self, key: &str) -> Result<Option<String>, StoreError> {
        let Ok(slot) = self.scheme.locate(key) else {
            return Ok(None);
        };
        let mut connection = self.connection.clone();
        let url: Option<String> = redis::cmd("HGET")
            .arg(&slot.hash)
            .arg(slot.field)
            .query_async(&mut connection)
            .await?;
        Ok(url)
    }

    async fn claim(
        &self,
        hash: &str,
        url: &ValidUrl,
        fields: &[&str],
    ) -> Result<Option<(usize, bool)>, StoreError> {
        let mut connection = self.connection.clone();
        let mut invocation = self.claim.key(hash);
        invocation
            .arg(url.as_str())
            .arg(self.deadline_ms())
            .arg(fields);
        let (position, created): (i64, u8) = invocation.invoke_async(&mut connection).await?;
        match position {
            -1 => Err(StoreError::Unavailable(Unreachable::PastDeadline)),
            0 => Ok(None),
            n => usize::try_from(n - 1)
                .ok()
                .filter(|&index| index < fields.len())
                .map(|index| Some((index, created == 1)))
                .ok_or(StoreError::Unavailable(Unreachable::UnexpectedReply(n))),
        }
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

fn outcome(key: &Key, url: &ValidUrl, created: bool) -> Inserted {
    let link = Link {
        key: key.to_string(),
        url: url.to_string(),
    };
    if created {
        Inserted::Created(link)
    } else {
        Inserted::Existing(link)
    }
}
