//! Looking links up in the links' Redis, for Varnish workers: each lookup
//! is queued to one I/O thread (`pool`), which pipelines a batch of them
//! onto a connection from an r2d2 pool (`master`: one server, or the master
//! Sentinels name), or, for a Redis Cluster, splits it by node (`cluster`)
//! over the slot map and node connections of `nodes`, which the click
//! flusher uses too.
//!
//! A lookup fails only when Redis fails it: no reply within the command
//! timeout of the round trip carrying it being sent, no connection within
//! the command timeout, or an error from Redis. Time a lookup spends waiting
//! for CPU (hundreds of fetch threads on two cores, say) never turns into an
//! error about the link store: Varnish is slow then, not Redis.
//!
//! Here: what the pool and its routes share (the lookup on its way, its
//! outcome, the health of Redis, the route's trait).

mod cluster;
mod master;
mod nodes;
mod pool;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use nodes::{ClusterNodes, Unread, Unsent};
pub use pool::{PoolSettings, RedisPool};

use shortlink_core::clicks::RAISE_COUNT_SCRIPT;
use shortlink_core::Slot;

use crate::now_ms;

/// Whether Redis answered the last time anyone asked, and since when.
/// Feeds the backend's `healthy()` so VCL can stretch grace while Redis is away.
#[derive(Debug)]
pub struct Health {
    healthy: AtomicBool,
    changed_ms: AtomicU64,
}

impl Health {
    fn new() -> Self {
        Self {
            // Optimistic until proven otherwise: a VCL loaded while Redis is
            // down should still try Redis on the first request.
            healthy: AtomicBool::new(true),
            changed_ms: AtomicU64::new(now_ms()),
        }
    }

    pub fn set(&self, healthy: bool) {
        if self.healthy.swap(healthy, Ordering::Relaxed) != healthy {
            self.changed_ms.store(now_ms(), Ordering::Relaxed);
        }
    }

    pub fn get(&self) -> (bool, SystemTime) {
        let changed = UNIX_EPOCH + Duration::from_millis(self.changed_ms.load(Ordering::Relaxed));
        (self.healthy.load(Ordering::Relaxed), changed)
    }
}
/// Why a lookup got no answer from Redis.
#[derive(Debug, Clone)]
pub enum LookupError {
    /// No reply within the command timeout of being sent (or no connection
    /// within the command timeout).
    Timeout(String),
    /// Redis refused or dropped the connection.
    Unreachable(String),
    /// Redis answered with an error, such as `WRONGTYPE` for a hash name
    /// that holds something else.
    Answer(String),
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout(detail) => write!(f, "Redis did not answer in time: {detail}"),
            Self::Unreachable(detail) => write!(f, "Redis is unreachable: {detail}"),
            Self::Answer(detail) => write!(f, "Redis answered with an error: {detail}"),
        }
    }
}
pub(crate) type Outcome = Result<Option<Vec<u8>>, LookupError>;

/// One lookup on its way: filled in by the I/O thread, awaited by a worker.
pub(crate) struct Lookup {
    pub(crate) hash: String,
    pub(crate) field: String,
    command: Command,
    outcome: Mutex<Option<Outcome>>,
    ready: Condvar,
}

/// What a lookup asks of Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// `HGET hash field`.
    Get,
    /// Raise the field to this count instead of reading it
    /// ([`RAISE_COUNT_SCRIPT`]).
    Raise(u64),
    /// The first members of the sorted set `hash`, at most this many, in
    /// their order: `ZRANGE hash 0 n-1`.
    Members(usize),
}

impl Lookup {
    fn new(slot: &Slot<'_>, command: Command) -> Self {
        Self {
            hash: slot.hash.clone(),
            field: slot.field.to_owned(),
            command,
            outcome: Mutex::new(None),
            ready: Condvar::new(),
        }
    }

    /// Adds this lookup's command to `pipeline`: `HGET`, the raise (both
    /// answer the field's value) or `ZRANGE`; any may be sent again.
    pub(crate) fn pack(&self, pipeline: &mut redis::Pipeline) {
        match self.command {
            Command::Get => pipeline.cmd("HGET").arg(&self.hash).arg(&self.field),
            Command::Members(most) => pipeline
                .cmd("ZRANGE")
                .arg(&self.hash)
                .arg(0)
                .arg(most.saturating_sub(1)),
            Command::Raise(count) => pipeline
                .cmd("EVAL")
                .arg(RAISE_COUNT_SCRIPT)
                .arg(1)
                .arg(&self.hash)
                .arg(&self.field)
                .arg(count),
        };
    }

    /// What `reply` to this lookup's command means.
    pub(crate) fn read(&self, reply: redis::Value) -> Outcome {
        match self.command {
            Command::Members(_) => members_reply(reply),
            Command::Get | Command::Raise(_) => hget_reply(reply),
        }
    }

    pub(crate) fn fulfil(&self, outcome: Outcome) {
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
        self.ready.notify_one();
    }
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Arc<Lookup>>,
    stopping: bool,
}

/// What the workers and the I/O thread share.
pub(crate) struct Shared {
    pub(crate) health: Arc<Health>,
    command_timeout: Duration,
    queue: Mutex<Queue>,
    wake: Condvar,
    round_trips: AtomicU64,
}

impl Shared {
    pub(crate) fn count_round_trips(&self, count: usize) {
        self.round_trips
            .fetch_add(u64::try_from(count).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// How the I/O thread gets a batch of lookups answered.
pub(crate) trait Exchange: Send {
    /// Sends `batch` and hands each lookup its reply; on a failure that
    /// answers none of them, says why instead (and hands out nothing).
    fn serve(&mut self, shared: &Shared, batch: &[Arc<Lookup>]) -> Option<LookupError>;

    /// Drops every connection in use: after a panic, its stream may have
    /// stopped halfway through an exchange.
    fn forget_connections(&mut self);
}
/// A count as Redis keeps it (decimal digits), if the bytes are one.
pub(crate) fn count_in(bytes: &[u8]) -> Option<u64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// What one `HGET` reply means for its lookup.
pub(crate) fn hget_reply(reply: redis::Value) -> Outcome {
    match reply {
        redis::Value::Nil => Ok(None),
        redis::Value::BulkString(bytes) => Ok(Some(bytes)),
        redis::Value::ServerError(error) => Err(LookupError::Answer(
            redis::RedisError::from(error).to_string(),
        )),
        other => Err(LookupError::Answer(format!(
            "unexpected reply to HGET: {other:?}"
        ))),
    }
}

/// What one `ZRANGE` reply means: its members, each followed by a line
/// break (a member holding one reads as several, each checked by whoever
/// reads them); `None` for a set with none.
pub(crate) fn members_reply(reply: redis::Value) -> Outcome {
    let members = match reply {
        redis::Value::Array(members) | redis::Value::Set(members) => members,
        other => return hget_reply(other).and(Err(unexpected_members())),
    };
    let mut out = Vec::new();
    for member in members {
        let redis::Value::BulkString(bytes) = member else {
            return Err(unexpected_members());
        };
        out.extend_from_slice(&bytes);
        out.push(b'\n');
    }
    Ok((!out.is_empty()).then_some(out))
}

fn unexpected_members() -> LookupError {
    LookupError::Answer("unexpected reply to ZRANGE".to_owned())
}

#[cfg(test)]
mod tests {
    use super::{hget_reply, members_reply, LookupError};

    #[test]
    fn zrange_replies_become_lines() {
        let reply = redis::Value::Array(vec![
            redis::Value::BulkString(b"abc".to_vec()),
            redis::Value::BulkString(b"Lm25".to_vec()),
        ]);
        assert_eq!(members_reply(reply).unwrap(), Some(b"abc\nLm25\n".to_vec()));
        assert_eq!(members_reply(redis::Value::Array(vec![])).unwrap(), None);
        let wrong_type = redis::parse_redis_value(b"-WRONGTYPE not a zset\r\n").unwrap();
        assert!(matches!(
            members_reply(wrong_type),
            Err(LookupError::Answer(m)) if m.contains("WRONGTYPE")
        ));
        assert!(members_reply(redis::Value::Int(1)).is_err());
    }

    #[test]
    fn hget_replies_become_outcomes() {
        assert_eq!(hget_reply(redis::Value::Nil).unwrap(), None);
        assert_eq!(
            hget_reply(redis::Value::BulkString(b"https://example.org/".to_vec())).unwrap(),
            Some(b"https://example.org/".to_vec())
        );
        // As Redis sends it for a hash name that holds a string.
        let wrong_type = redis::parse_redis_value(b"-WRONGTYPE not a hash\r\n").unwrap();
        assert!(matches!(
            hget_reply(wrong_type),
            Err(LookupError::Answer(m)) if m.contains("WRONGTYPE")
        ));
        assert!(matches!(
            hget_reply(redis::Value::Int(1)),
            Err(LookupError::Answer(m)) if m.contains("unexpected")
        ));
    }
}
