//! Where the flusher's commands go: the master a locator names (one Redis,
//! or a Sentinel group's), or the nodes of a Redis Cluster, each slot's
//! commands to the node serving it. The flusher writes to every node it
//! needs, then reads their replies, so a flush costs one round trip per
//! node, all of them at once.

use std::time::Duration;

use redis_target::cluster::key_slot;
use redis_target::cluster::Redirect;
use redis_target::{Address, Timeouts};
use shortlink_core::clicks::Layout;

use super::store::{ClickStore, Reach};
use crate::lookups::{ClusterNodes, Unread, Unsent};

/// A node the flusher writes to: `None` is the master.
pub type Node = Option<Address>;

/// A lane's slot in a cluster; `None` for the one lane of a master.
pub type Lane = Option<u16>;

/// The lane of commands on `key` in `layout`.
pub fn lane_of(layout: Layout, key: &str) -> Lane {
    match layout {
        Layout::Plain => None,
        Layout::Cluster => Some(key_slot(key.as_bytes())),
    }
}

pub enum Destination {
    Master {
        connection: Option<redis::Connection>,
        /// The locator's generation the connection was opened in.
        generation: u64,
    },
    Cluster(ClusterNodes),
}

impl Destination {
    pub fn of(store: &ClickStore) -> Self {
        match &store.reach {
            Reach::Master(_) => Self::Master {
                connection: None,
                generation: 0,
            },
            Reach::Cluster(target) => Self::Cluster(ClusterNodes::new(
                target.clone(),
                store.settings().redis_timeouts(),
            )),
        }
    }

    /// Readies the way to Redis for exchanges of up to `timeout`: a
    /// connection to the master as it is now, or a fresh slot map if the
    /// last one proved wrong. Answers whether a new connection was made,
    /// to a Redis that may have lost what it held.
    pub fn prepare(&mut self, store: &ClickStore, timeout: Duration) -> Result<bool, String> {
        let fresh = self.connect(store)?;
        self.arm(timeout)?;
        if let Self::Cluster(nodes) = self {
            nodes.refresh_map();
        }
        Ok(fresh)
    }

    /// Bounds each exchange from now on by `timeout`.
    pub fn arm(&mut self, timeout: Duration) -> Result<(), String> {
        match self {
            Self::Master { connection, .. } => {
                let opened = connection.as_ref().ok_or("no connection to Redis")?;
                Timeouts::arm(opened, timeout).map_err(|e| e.to_string())
            }
            Self::Cluster(nodes) => {
                nodes.set_command_timeout(timeout);
                Ok(())
            }
        }
    }

    /// Connects to the master the locator names now, unless connected to
    /// it already; answers whether it did.
    fn connect(&mut self, store: &ClickStore) -> Result<bool, String> {
        match (self, &store.reach) {
            (
                Self::Master {
                    connection,
                    generation,
                },
                Reach::Master(locator),
            ) => {
                // After a failover, the old connection leads to a demoted master.
                let fresh = connection.is_none() || *generation != locator.generation();
                if fresh {
                    *connection = None;
                    let (opened, opened_in) = locator
                        .connect()
                        .map_err(|e| format!("connecting to Redis: {e}"))?;
                    *connection = Some(opened);
                    *generation = opened_in;
                }
                Ok(fresh)
            }
            (Self::Cluster(_), _) => Ok(false),
            (Self::Master { .. }, Reach::Cluster(_)) => Err("a master for a cluster".into()),
        }
    }

    /// The node serving `lane`.
    pub fn node_of(&mut self, lane: Lane) -> Result<Node, String> {
        match (self, lane) {
            (Self::Master { .. }, _) => Ok(None),
            (Self::Cluster(nodes), Some(slot)) => nodes.node_of(slot).map(Some).ok_or_else(|| {
                format!(
                    "no node of the Redis Cluster serves slot {slot}: {}",
                    nodes.why_unserved()
                )
            }),
            (Self::Cluster(_), None) => Err("a cluster needs a slot".into()),
        }
    }

    /// Writes `packed` (commands) to `node`.
    pub fn send(&mut self, node: &Node, packed: &[u8]) -> Result<(), String> {
        match (self, node) {
            (Self::Master { connection, .. }, _) => {
                let connection = connection.as_mut().ok_or("no connection to Redis")?;
                connection
                    .send_packed_command(packed)
                    .map_err(|e| format!("sending clicks: {e}"))
            }
            (Self::Cluster(nodes), Some(address)) => {
                nodes.send(address, packed).map_err(|unsent| match unsent {
                    Unsent::Paused => {
                        format!("the Redis Cluster node {address} failed a moment ago")
                    }
                    Unsent::Failed(error) => format!("Redis Cluster node {address}: {error}"),
                })
            }
            (Self::Cluster(_), None) => Err("no node named".into()),
        }
    }

    /// Reads `count` replies from `node`; Redis's errors are replies.
    pub fn receive(&mut self, node: &Node, count: usize) -> Result<Vec<redis::Value>, String> {
        match (self, node) {
            (Self::Master { connection, .. }, _) => {
                let connection = connection.as_mut().ok_or("no connection to Redis")?;
                (0..count)
                    .map(|_| connection.recv_response())
                    .collect::<redis::RedisResult<_>>()
                    .map_err(|e| format!("sending clicks: {e}"))
            }
            (Self::Cluster(nodes), Some(address)) => {
                nodes
                    .receive(address, count)
                    .map_err(|unread| match unread {
                        Unread::Stale => {
                            format!("Redis Cluster node {address} closed the connection")
                        }
                        Unread::Failed(error) => format!("Redis Cluster node {address}: {error}"),
                    })
            }
            (Self::Cluster(_), None) => Err("no node named".into()),
        }
    }

    /// One exchange with the node serving `lane`: `pipeline` written, its
    /// replies read; a `MOVED` among them is taken.
    pub fn exchange(
        &mut self,
        lane: Lane,
        pipeline: &redis::Pipeline,
        count: usize,
    ) -> Result<Vec<redis::Value>, String> {
        if let Self::Cluster(nodes) = self {
            // A heartbeat may come before any flush asked for the map.
            nodes.refresh_map();
        }
        let node = self.node_of(lane)?;
        self.send(&node, &pipeline.get_packed_pipeline())?;
        let replies = self.receive(&node, count)?;
        self.take_redirects(&node, &replies);
        Ok(replies)
    }

    /// Takes what any `MOVED` among `node`'s `replies` says: the slot map
    /// sends that slot's commands to the node named, from now on.
    pub fn take_redirects(&mut self, node: &Node, replies: &[redis::Value]) {
        let (Self::Cluster(nodes), Some(address)) = (self, node) else {
            return;
        };
        for reply in replies {
            if let redis::Value::ServerError(error) = reply {
                if let Some(Redirect::Moved { slot, node }) = Redirect::of(error, address) {
                    nodes.moved(slot, &node);
                }
            }
        }
    }

    /// Drops a connection that failed: its stream may carry late replies.
    pub fn failed(&mut self) {
        if let Self::Master { connection, .. } = self {
            *connection = None;
        }
    }

    /// Whether there is a way to Redis already, to beat on while idle.
    pub fn is_connected(&self) -> bool {
        match self {
            Self::Master { connection, .. } => connection.is_some(),
            Self::Cluster(_) => true,
        }
    }
}
