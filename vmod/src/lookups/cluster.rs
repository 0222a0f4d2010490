//! Lookups in a Redis Cluster: the I/O thread splits each batch by the node
//! serving each key's slot, writes every node's pipeline, then reads the
//! replies, so a batch costs one round trip per node, all of them at once.
//!
//! The slot map comes from `CLUSTER SLOTS`. A `MOVED` reply corrects it
//! and sends the lookup to the named node; an `ASK` reply (the key is on
//! its way to another node during a migration) sends it there once, after
//! `ASKING`; a `TRYAGAIN` sends it again. So a slot migrated under load
//! gives no wrong answer, only a lookup that takes a hop or two more. A
//! node that refuses connections, or hangs, fails the lookups of its own
//! slots and no others (see `nodes` for how long it is left alone).

use std::sync::Arc;
use std::time::Duration;

use redis_target::cluster::{key_slot, Redirect};
use redis_target::{Address, ClusterTarget, Timeouts};

use super::nodes::{ClusterNodes, Unread, Unsent};
use super::{Exchange, Lookup, LookupError, Shared};

/// Most hops a lookup takes (redirects, and one retry on a fresh
/// connection): a slot moves once at a time, so more means a cluster
/// whose nodes disagree.
const MAX_HOPS: u8 = 5;

/// The I/O thread's view of a cluster: lookups follow redirects here.
pub struct ClusterRoute {
    nodes: ClusterNodes,
}

/// Where one lookup of the batch goes next.
struct Hop {
    lookup: usize,
    /// The node a redirect named; `None`: the one serving its slot.
    node: Option<Address>,
    asking: bool,
    hops: u8,
}

impl ClusterRoute {
    pub fn new(target: ClusterTarget, timeouts: Timeouts) -> Self {
        Self {
            nodes: ClusterNodes::new(target, timeouts),
        }
    }

    /// Writes the lookups `hops` to `node` as one pipeline, each `HGET`
    /// after an `ASKING` if a redirect asked for one.
    fn send(
        &mut self,
        address: &Address,
        hops: &[Hop],
        batch: &[Arc<Lookup>],
    ) -> Result<(), LookupError> {
        let mut pipeline = redis::pipe();
        for hop in hops {
            if hop.asking {
                pipeline.cmd("ASKING");
            }
            let lookup = &batch[hop.lookup];
            lookup.pack(&mut pipeline);
        }
        match self.nodes.send(address, &pipeline.get_packed_pipeline()) {
            Ok(()) => Ok(()),
            Err(Unsent::Paused) => Err(LookupError::Unreachable(format!(
                "the Redis Cluster node {address} failed a moment ago"
            ))),
            Err(Unsent::Failed(error)) => Err(failure(address, &error)),
        }
    }

    /// Reads the replies to what [`ClusterRoute::send`] wrote, dropping
    /// those to `ASKING`.
    fn receive(&mut self, address: &Address, hops: &[Hop]) -> Result<Vec<redis::Value>, Unread> {
        let asked = hops.iter().filter(|hop| hop.asking).count();
        let mut replies = self.nodes.receive(address, hops.len() + asked)?.into_iter();
        Ok(hops
            .iter()
            .filter_map(|hop| {
                if hop.asking {
                    replies.next();
                }
                replies.next()
            })
            .collect())
    }

    /// Takes every hop of `todo` to the node it goes to next; answers the
    /// lookups that have hopped too often or whose slot no node serves.
    fn group_by_node(
        &mut self,
        todo: &mut Vec<Hop>,
        batch: &[Arc<Lookup>],
    ) -> Vec<(Address, Vec<Hop>)> {
        let mut by_node: Vec<(Address, Vec<Hop>)> = Vec::new();
        for hop in todo.drain(..) {
            let lookup = &batch[hop.lookup];
            if hop.hops >= MAX_HOPS {
                lookup.fulfil(Err(LookupError::Unreachable(format!(
                    "redirected {MAX_HOPS} times: the Redis Cluster nodes disagree on \
                     where {} is",
                    lookup.hash
                ))));
                continue;
            }
            let slot = key_slot(lookup.hash.as_bytes());
            let node = hop.node.clone().or_else(|| self.nodes.node_of(slot));
            let Some(node) = node else {
                lookup.fulfil(Err(LookupError::Unreachable(format!(
                    "no node of the Redis Cluster serves slot {slot} (of {}): check that \
                     the cluster is up and covers every slot ({})",
                    lookup.hash,
                    self.nodes.why_unserved()
                ))));
                continue;
            };
            match by_node.iter_mut().find(|(address, _)| *address == node) {
                Some((_, hops)) => hops.push(hop),
                None => by_node.push((node, vec![hop])),
            }
        }
        by_node
    }

    /// Answers each lookup of `hops` with its reply from `node`, or puts
    /// it back on `todo` for where a redirect sends it.
    fn take_replies(
        &mut self,
        node: &Address,
        hops: Vec<Hop>,
        replies: Vec<redis::Value>,
        batch: &[Arc<Lookup>],
        todo: &mut Vec<Hop>,
    ) {
        for (hop, reply) in hops.into_iter().zip(replies) {
            let redirect = match &reply {
                redis::Value::ServerError(error) => Redirect::of(error, node),
                _ => None,
            };
            let next = |node, asking| Hop {
                lookup: hop.lookup,
                node,
                asking,
                hops: hop.hops + 1,
            };
            match redirect {
                None => batch[hop.lookup].fulfil(batch[hop.lookup].read(reply)),
                Some(Redirect::Moved { slot, node }) => {
                    self.nodes.moved(slot, &node);
                    todo.push(next(Some(node), false));
                }
                Some(Redirect::Ask { node, .. }) => todo.push(next(Some(node), true)),
                Some(Redirect::TryAgain) => todo.push(next(None, false)),
            }
        }
    }
}

fn failure(address: &Address, error: &redis::RedisError) -> LookupError {
    let detail = format!("Redis Cluster node {address}: {error}");
    if error.is_timeout() {
        LookupError::Timeout(detail)
    } else {
        LookupError::Unreachable(detail)
    }
}

impl Exchange for ClusterRoute {
    /// Answers every lookup of `batch` itself, each by the fate of its own
    /// node, so it never fails the batch as a whole.
    fn serve(&mut self, shared: &Shared, batch: &[Arc<Lookup>]) -> Option<LookupError> {
        let mut todo: Vec<Hop> = (0..batch.len())
            .map(|lookup| Hop {
                lookup,
                node: None,
                asking: false,
                hops: 0,
            })
            .collect();
        while !todo.is_empty() {
            self.nodes.refresh_map();
            let by_node = self.group_by_node(&mut todo, batch);
            let mut sent = Vec::with_capacity(by_node.len());
            for (node, hops) in by_node {
                match self.send(&node, &hops, batch) {
                    Ok(()) => sent.push((node, hops)),
                    Err(error) => {
                        for hop in hops {
                            batch[hop.lookup].fulfil(Err(error.clone()));
                        }
                    }
                }
            }
            shared.count_round_trips(sent.len());
            for (node, hops) in sent {
                let replies = match self.receive(&node, &hops) {
                    Ok(replies) => replies,
                    Err(Unread::Stale) => {
                        todo.extend(hops.into_iter().map(|hop| Hop {
                            node: Some(node.clone()),
                            hops: hop.hops + 1,
                            ..hop
                        }));
                        continue;
                    }
                    Err(Unread::Failed(error)) => {
                        let error = failure(&node, &error);
                        for hop in hops {
                            batch[hop.lookup].fulfil(Err(error.clone()));
                        }
                        continue;
                    }
                };
                self.take_replies(&node, hops, replies, batch, &mut todo);
            }
            if todo.iter().any(|hop| hop.node.is_none()) {
                // TRYAGAIN: the migration of a few keys takes a moment.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // Healthy while no node is left alone for failing: one batch of a
        // node's keys failing does not flip it back and forth.
        shared.health.set(self.nodes.healthy());
        None
    }

    fn forget_connections(&mut self) {
        self.nodes.forget_connections();
    }
}
