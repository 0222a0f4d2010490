//! Purges a Varnish node did not confirm, kept in a Redis stream
//! (`<prefix>purge:queue`) until a writer sends them or they are moot.
//!
//! A change is purged on every node before the writer answers; a node that
//! cannot be reached (down, partitioned, too slow) may still hold the old
//! answer and serve it to the clients that reach it. The purge is then
//! queued in the links' Redis, which keeps it through a writer's restart,
//! and every running writer sends the queue again each
//! [`RETRY_INTERVAL`] until the node confirms, or until the time by which
//! the node must have dropped the answer by itself (the longest TTL plus
//! grace): past that the purge is moot and leaves the queue.
//!
//! Several writers retry the same queue without taking turns: a purge
//! repeated changes nothing, so a purge sent twice costs one request. A
//! writer leaves alone the purges of nodes it is not configured with
//! (another writer's, during a change of configuration): they leave the
//! queue when sent by a writer that knows the node, or when moot.
//!
//! An entry is the fields `node`, `key`, `until`, and `domain` (the short
//! domain's canonical name) for a link of any domain but the default one:
//! entries of the default domain are written as before domains existed, so
//! writers of either version read each other's. A domain this writer's
//! configuration does not have is left alone, as a node it does not know.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::RedisError;

use crate::redis::master::MasterConnection;

use crate::varnish::purge::{Nodes, Purger, Route, Unconfirmed};

/// How often a writer sends the queued purges again.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// Entries read from the stream per call.
const PAGE: usize = 1000;

/// Most entries one round looks at: a long outage of a busy site queues
/// more, which later rounds take up as earlier ones leave.
const MOST_PER_ROUND: usize = 20_000;

/// The queue of purges still to send.
#[derive(Clone)]
pub struct PurgeQueue {
    connection: MasterConnection,
    stream: String,
}

/// One queued purge: `key` of `domain` on `node`, worth sending until
/// `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub id: String,
    pub node: String,
    /// The domain's canonical name; empty for the default domain.
    pub domain: String,
    pub key: String,
    /// Unix seconds after which the node cannot hold the old answer.
    pub until: u64,
}

/// A queued purge, and the route to its domain's links.
type Routed<'a> = (&'a Route, &'a Pending);

/// What one round of retries did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Purges a node confirmed this time.
    pub sent: usize,
    /// Purges dropped: the answer they would remove has expired.
    pub moot: usize,
    /// Purges left for the next round: their node did not confirm, or is
    /// not one of this writer's.
    pub left: usize,
}

impl PurgeQueue {
    pub fn new(connection: MasterConnection, stream: String) -> Self {
        Self { connection, stream }
    }

    /// Queues `key` of `domain` (its canonical name; empty for the default
    /// domain) for each node in `missed`, to be sent until `until`.
    pub async fn add(
        &self,
        missed: &[Unconfirmed],
        domain: &str,
        key: &str,
        until: SystemTime,
    ) -> Result<(), RedisError> {
        let until = unix_seconds(until).to_string();
        let mut pipe = redis::pipe();
        for miss in missed {
            let entry = pipe.cmd("XADD").arg(&self.stream).arg("*");
            for (name, value) in entry_fields(&miss.node, domain, key, &until) {
                entry.arg(name).arg(value);
            }
            entry.ignore();
        }
        pipe.query_async::<()>(&mut self.connection.get()?).await
    }

    /// Up to `count` queued purges, oldest first, after entry `after` (from
    /// the start without it). Entries that are not queued purges (written by
    /// hand, say) come back with an empty node, to be dropped.
    pub async fn read(
        &self,
        after: Option<&str>,
        count: usize,
    ) -> Result<Vec<Pending>, RedisError> {
        let start = after.map_or_else(|| "-".to_owned(), |id| format!("({id}"));
        let entries: Vec<(String, HashMap<String, String>)> = redis::cmd("XRANGE")
            .arg(&self.stream)
            .arg(start)
            .arg("+")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut self.connection.get()?)
            .await?;
        Ok(entries
            .into_iter()
            .map(|(id, fields)| pending_of(id, fields))
            .collect())
    }

    /// Removes the entries `ids`.
    pub async fn remove(&self, ids: &[&str]) -> Result<(), RedisError> {
        if ids.is_empty() {
            return Ok(());
        }
        redis::cmd("XDEL")
            .arg(&self.stream)
            .arg(ids)
            .query_async::<()>(&mut self.connection.get()?)
            .await
    }

    /// How many purges are queued.
    pub async fn queued(&self) -> Result<u64, RedisError> {
        redis::cmd("XLEN")
            .arg(&self.stream)
            .query_async(&mut self.connection.get()?)
            .await
    }

    /// Sends the queued purges once: for each node, the oldest first, and
    /// the rest only if that one was confirmed, so that a node still away
    /// costs one timeout a round, not one per purge.
    pub async fn retry(&self, nodes: &Nodes, now: SystemTime) -> Result<Round, RedisError> {
        let now = unix_seconds(now);
        let mut queued = Vec::new();
        while queued.len() < MOST_PER_ROUND {
            let page = self
                .read(queued.last().map(|p: &Pending| p.id.as_str()), PAGE)
                .await?;
            let done = page.len() < PAGE;
            queued.extend(page);
            if done {
                break;
            }
        }
        let mut round = Round::default();
        let mut finished: Vec<&str> = Vec::new();
        let mut by_node: HashMap<&str, (&Purger, Vec<Routed>)> = HashMap::new();
        for pending in &queued {
            if pending.until <= now || pending.key.is_empty() {
                round.moot += 1;
                finished.push(&pending.id);
            } else if let (Some(purger), Some(route)) =
                (nodes.node(&pending.node), nodes.route(&pending.domain))
            {
                by_node
                    .entry(&pending.node)
                    .or_insert_with(|| (purger, Vec::new()))
                    .1
                    .push((route, pending));
            } else {
                round.left += 1;
            }
        }
        let sent = futures_util::future::join_all(
            by_node
                .values()
                .map(|(purger, pending)| send_to_node(purger, pending)),
        )
        .await;
        for (confirmed, left) in sent {
            round.sent += confirmed.len();
            round.left += left;
            finished.extend(confirmed);
        }
        for ids in finished.chunks(PAGE) {
            self.remove(ids).await?;
        }
        Ok(round)
    }

    /// Retries the queue every [`RETRY_INTERVAL`], for as long as the
    /// writer runs, logging what it sends and what it cannot.
    pub async fn retry_forever(self, nodes: Arc<Nodes>) {
        let mut interval = tokio::time::interval(RETRY_INTERVAL);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            interval.tick().await;
            match self.retry(&nodes, SystemTime::now()).await {
                Ok(round) => {
                    failing = false;
                    if round.sent > 0 || round.moot > 0 {
                        log::info!(
                            "queued purges: {} sent, {} moot, {} still waiting for their node",
                            round.sent,
                            round.moot,
                            round.left
                        );
                    }
                }
                // Said once per outage, not once a second.
                Err(error) if !failing => {
                    failing = true;
                    log::warn!("cannot read the queued purges from Redis: {error}");
                }
                Err(_) => {}
            }
        }
    }
}

/// Sends `pending` (all for the node of `purger`), the oldest alone first;
/// returns the confirmed entries' ids and how many are left.
async fn send_to_node<'p>(purger: &Purger, pending: &[Routed<'p>]) -> (Vec<&'p str>, usize) {
    let Some(((route, first), rest)) = pending.split_first() else {
        return (Vec::new(), 0);
    };
    if purger.purge(route, &first.key).await.is_err() {
        return (Vec::new(), pending.len());
    }
    let answers = futures_util::future::join_all(
        rest.iter()
            .map(|(route, pending)| purger.purge(route, &pending.key)),
    )
    .await;
    let mut confirmed = vec![first.id.as_str()];
    confirmed.extend(
        rest.iter()
            .zip(&answers)
            .filter(|(_, answer)| answer.is_ok())
            .map(|((_, pending), _)| pending.id.as_str()),
    );
    let left = pending.len() - confirmed.len();
    (confirmed, left)
}

/// The fields of a queued purge, as the stream holds them: without
/// `domain` for the default domain, as before domains existed.
fn entry_fields<'a>(
    node: &'a str,
    domain: &'a str,
    key: &'a str,
    until: &'a str,
) -> Vec<(&'static str, &'a str)> {
    let mut fields = vec![("node", node), ("key", key), ("until", until)];
    if !domain.is_empty() {
        fields.push(("domain", domain));
    }
    fields
}

/// The queued purge a stream entry holds; missing fields are empty (an
/// entry without `domain` is the default domain's).
fn pending_of(id: String, mut fields: HashMap<String, String>) -> Pending {
    Pending {
        id,
        node: fields.remove("node").unwrap_or_default(),
        domain: fields.remove("domain").unwrap_or_default(),
        key: fields.remove("key").unwrap_or_default(),
        until: fields
            .get("until")
            .and_then(|until| until.parse().ok())
            .unwrap_or_default(),
    }
}

fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(fields: &[(&str, &str)]) -> HashMap<String, String> {
        fields
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[test]
    fn entries_carry_their_domain_and_the_default_one_reads_as_before() {
        let node = "http://127.0.0.1:6081";
        let default = entry_fields(node, "", "Lm25", "1767225600");
        assert_eq!(
            default,
            [("node", node), ("key", "Lm25"), ("until", "1767225600")],
            "the default domain's entries are written as before domains existed"
        );
        let read = pending_of("1-0".into(), entry(&default));
        assert_eq!((read.domain.as_str(), read.until), ("", 1_767_225_600));
        let other = entry_fields(node, "go.example", "Lm25", "1767225600");
        let read = pending_of("2-0".into(), entry(&other));
        assert_eq!(
            (read.node.as_str(), read.domain.as_str(), read.key.as_str()),
            (node, "go.example", "Lm25")
        );
        // An entry written by an older writer: no domain, the default one.
        let old = pending_of(
            "3-0".into(),
            entry(&[("node", node), ("key", "ab"), ("until", "9")]),
        );
        assert_eq!(old.domain, "");
    }
}
