//! A Redis Cluster's slot map and a connection to each of its nodes, as
//! one thread keeps them: the I/O thread's for lookups (see `cluster`),
//! the click flusher's for counts.
//!
//! A node that refuses connections is not tried again for a moment, so
//! its keys fail at once. A node that hangs holds up each batch that
//! reaches it for the command timeout (the replies of the nodes are read
//! one after another), so it is left alone for longer each time it times
//! out again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis_target::cluster::SlotMap;
use redis_target::{Address, ClusterTarget, Timeouts};

/// How long a node that failed is skipped, its lookups failing at once.
const NODE_PAUSE: Duration = Duration::from_millis(100);

/// Longest pause of a node that keeps timing out: each timeout doubles its
/// pause up to this, so a hung node holds up a batch at most once in it.
const NODE_PAUSE_MAX: Duration = Duration::from_secs(1);

/// How often the slot map is asked for again at most: after a redirect, a
/// node failing, or a slot with no node.
const MAP_REFRESH_MIN: Duration = Duration::from_millis(100);

/// A cluster's slot map and a connection to each of its nodes, as one
/// thread keeps them: the I/O thread's for lookups, the flusher's for
/// click counts.
pub struct ClusterNodes {
    target: ClusterTarget,
    timeouts: Timeouts,
    map: Option<SlotMap>,
    /// Set when the map is known to be wrong somewhere.
    map_stale: bool,
    /// Why the last node asked for the map gave none.
    map_error: Option<String>,
    map_asked: Option<Instant>,
    nodes: HashMap<Address, Node>,
}

#[derive(Default)]
struct Node {
    connection: Option<redis::Connection>,
    /// Whether the connection served an earlier batch: one the node has
    /// closed since (a restart, an idle timeout) fails only when read.
    reused: bool,
    /// While set and ahead, the node failed a moment ago: not tried again.
    paused_until: Option<Instant>,
    /// The pause after its last timeout, doubled at each further one.
    pause: Duration,
}

impl Node {
    fn is_paused(&self, now: Instant) -> bool {
        self.paused_until.is_some_and(|until| until > now)
    }

    /// Drops the connection and skips the node for a while: longer after
    /// each timeout in a row.
    fn fail(&mut self, error: &redis::RedisError) {
        self.connection = None;
        self.pause = if error.is_timeout() {
            (self.pause * 2).clamp(NODE_PAUSE, NODE_PAUSE_MAX)
        } else {
            NODE_PAUSE
        };
        self.paused_until = Some(Instant::now() + self.pause);
    }
}

/// Why a node's replies could not be read.
pub enum Unread {
    /// A connection the node closed since its last use: worth once more on
    /// a fresh one, without counting against the node.
    Stale,
    Failed(redis::RedisError),
}

/// Why nothing could be written to a node.
pub enum Unsent {
    /// It failed a moment ago, and is left alone for a while.
    Paused,
    Failed(redis::RedisError),
}

impl ClusterNodes {
    pub fn new(target: ClusterTarget, timeouts: Timeouts) -> Self {
        Self {
            target,
            timeouts,
            map: None,
            map_stale: true,
            map_error: None,
            map_asked: None,
            nodes: HashMap::new(),
        }
    }

    /// Bounds each exchange from now on, on connections open and to come.
    pub fn set_command_timeout(&mut self, timeout: Duration) {
        if self.timeouts.command == timeout {
            return;
        }
        self.timeouts.command = timeout;
        for node in self.nodes.values_mut() {
            let armed =
                (node.connection.as_ref()).map(|connection| Timeouts::arm(connection, timeout));
            if matches!(armed, Some(Err(_))) {
                node.connection = None;
            }
        }
    }

    /// Asks for the slot map again if it is stale, at most every
    /// [`MAP_REFRESH_MIN`]: the nodes it names, then the seeds, each once,
    /// skipping those paused; a node that fails to answer is paused too.
    pub fn refresh_map(&mut self) {
        let now = Instant::now();
        if !self.map_stale
            || self
                .map_asked
                .is_some_and(|asked| now.duration_since(asked) < MAP_REFRESH_MIN)
        {
            return;
        }
        self.map_asked = Some(now);
        let mut candidates: Vec<Address> = Vec::new();
        let known = self
            .map
            .as_ref()
            .map(|map| map.nodes().to_vec())
            .unwrap_or_default();
        for node in known.into_iter().chain(self.target.seeds.iter().cloned()) {
            let paused = self
                .nodes
                .get(&node)
                .is_some_and(|state| state.is_paused(now));
            if !paused && !candidates.contains(&node) {
                candidates.push(node);
            }
        }
        for node in candidates {
            let asked = self.connect(&node).and_then(|mut connection| {
                let reply: redis::Value =
                    redis::cmd("CLUSTER").arg("SLOTS").query(&mut connection)?;
                SlotMap::from_cluster_slots(&reply, &node)
            });
            match asked {
                Ok(map) => {
                    self.map = Some(map);
                    self.map_stale = false;
                    self.map_error = None;
                    return;
                }
                Err(error) => {
                    self.map_error = Some(format!("{node}: {error}"));
                    self.nodes.entry(node).or_default().fail(&error);
                }
            }
        }
    }

    /// The node serving `slot` by the map; with none, the map is asked
    /// for again.
    pub fn node_of(&mut self, slot: u16) -> Option<Address> {
        let node = self.map.as_ref().and_then(|map| map.node(slot)).cloned();
        if node.is_none() {
            self.map_stale = true;
        }
        node
    }

    /// Why a slot has no node: what the last node asked for the map said.
    pub fn why_unserved(&self) -> &str {
        self.map_error.as_deref().unwrap_or("no node asked yet")
    }

    /// Takes what a `MOVED` reply says: `slot` is served by `node` now.
    pub fn moved(&mut self, slot: u16, node: &Address) {
        if let Some(map) = &mut self.map {
            map.moved(slot, node);
        }
        self.map_stale = true;
    }

    /// Whether a map is known and no node is left alone for failing.
    pub fn healthy(&self) -> bool {
        let now = Instant::now();
        self.map.is_some() && !self.nodes.values().any(|node| node.is_paused(now))
    }

    pub fn forget_connections(&mut self) {
        for node in self.nodes.values_mut() {
            node.connection = None;
        }
    }

    /// Writes `packed` (one or more commands) to the node at `address`.
    pub fn send(&mut self, address: &Address, packed: &[u8]) -> Result<(), Unsent> {
        let node = self.nodes.entry(address.clone()).or_default();
        if node.is_paused(Instant::now()) {
            return Err(Unsent::Paused);
        }
        let sent = match &mut node.connection {
            Some(connection) => connection.send_packed_command(packed),
            None => Err(redis::RedisError::from(std::io::Error::from(
                std::io::ErrorKind::NotConnected,
            ))),
        };
        if sent.is_ok() {
            node.reused = true;
            return Ok(());
        }
        // A connection that went stale since its last use (the node
        // restarted, say): once more on a fresh one.
        node.connection = None;
        node.reused = false;
        let fresh = self.connect(address).and_then(|mut connection| {
            connection.send_packed_command(packed)?;
            Ok(connection)
        });
        let node = self.nodes.entry(address.clone()).or_default();
        match fresh {
            Ok(connection) => {
                node.connection = Some(connection);
                Ok(())
            }
            Err(error) => {
                node.fail(&error);
                self.map_stale = true;
                Err(Unsent::Failed(error))
            }
        }
    }

    /// Reads `count` replies to what [`ClusterNodes::send`] wrote to the
    /// node at `address`; Redis's errors are replies like others.
    pub fn receive(
        &mut self,
        address: &Address,
        count: usize,
    ) -> Result<Vec<redis::Value>, Unread> {
        let node = self.nodes.entry(address.clone()).or_default();
        let Some(connection) = &mut node.connection else {
            return Err(Unread::Failed(redis::RedisError::from(
                std::io::Error::from(std::io::ErrorKind::NotConnected),
            )));
        };
        let read: redis::RedisResult<Vec<redis::Value>> =
            (0..count).map(|_| connection.recv_response()).collect();
        match read {
            Ok(replies) => {
                node.pause = Duration::ZERO;
                Ok(replies)
            }
            Err(error) if node.reused && !error.is_timeout() => {
                // The stream may still carry late replies: never reuse it.
                node.connection = None;
                node.reused = false;
                Err(Unread::Stale)
            }
            Err(error) => {
                node.fail(&error);
                self.map_stale = true;
                Err(Unread::Failed(error))
            }
        }
    }

    /// A new connection to the cluster's node at `node`, bounded by the
    /// timeouts.
    fn connect(&self, node: &Address) -> redis::RedisResult<redis::Connection> {
        self.timeouts.open(&self.target.node_url(node))
    }
}
