//! A Redis Cluster on loopback: three primaries by default, each serving a
//! third of the slots, with replicas where a test needs a failover.
//!
//! Every node is a [`Redis`] from the one launcher, started in parallel;
//! each is given a config epoch of its own, the slots are assigned and the
//! nodes introduced with `CLUSTER` commands (what `redis-cli --cluster
//! create` sends), which takes well under a second more.

use std::path::Path;
use std::time::{Duration, Instant};

use redis_target::cluster::{key_slot, SlotMap, SLOTS};
use redis_target::Address;

use crate::redis::{Persistence, Redis};
use crate::{free_port, poll_until, started};

/// How long the nodes may take to agree on the layout: gossip runs ten
/// times a second.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// How long a node waits for another before calling it failing, and a
/// replica before taking over from its failing primary.
pub const NODE_TIMEOUT: Duration = Duration::from_secs(2);

pub struct RedisCluster {
    /// The primaries, then the replicas (those of the first primary first).
    pub nodes: Vec<Redis>,
    pub primaries: usize,
    /// `redis+cluster://` naming every primary.
    pub url: String,
}

impl RedisCluster {
    /// Starts `primaries` primaries with `replicas` replicas each in `dir`
    /// and returns once every node sees every slot served.
    ///
    /// `cluster-require-full-coverage no`: a node keeps serving its own
    /// slots while another is down, as `docs/redis-cluster.md` advises.
    pub fn start(dir: &Path, primaries: usize, replicas: usize) -> Result<Self, String> {
        let began = Instant::now();
        let total = primaries * (1 + replicas);
        let nodes = std::thread::scope(|scope| {
            let starting: Vec<_> = (0..total)
                .map(|n| {
                    scope.spawn(move || {
                        Redis::start_with(
                            &dir.join(format!("node-{n}")),
                            Persistence::Scratch,
                            || {
                                // The bus port: not the default of port + 10000,
                                // which may be taken or past 65535.
                                Ok(format!(
                                    "cluster-enabled yes\ncluster-port {}\n\
                                     cluster-config-file nodes.conf\n\
                                     cluster-node-timeout {}\n\
                                     cluster-require-full-coverage no\n\
                                     repl-diskless-sync-delay 0\n",
                                    free_port()?,
                                    NODE_TIMEOUT.as_millis()
                                ))
                            },
                        )
                    })
                })
                .collect();
            started(starting)
        })?;
        // A config epoch of its own for each node, before they meet, as
        // `redis-cli --cluster create` gives. Left at 0, the nodes settle
        // their collisions by gossip after "ready", and a node still doing
        // so can lose a slot moved to it (and its keys) to a stale claim.
        for (epoch, node) in (1..).zip(&nodes) {
            node.query::<()>(&["CLUSTER", "SET-CONFIG-EPOCH", &epoch.to_string()])?;
        }
        let count = u16::try_from(primaries).map_err(|e| e.to_string())?;
        for (index, primary) in (0..count).zip(&nodes) {
            let first = SLOTS / count * index;
            let last = if index + 1 == count {
                SLOTS - 1
            } else {
                SLOTS / count * (index + 1) - 1
            };
            primary.query::<()>(&[
                "CLUSTER",
                "ADDSLOTSRANGE",
                &first.to_string(),
                &last.to_string(),
            ])?;
        }
        for node in &nodes[1..] {
            let bus_port = node
                .query::<Vec<String>>(&["CONFIG", "GET", "cluster-port"])?
                .pop()
                .ok_or("CONFIG GET cluster-port: no answer")?;
            nodes[0].query::<()>(&[
                "CLUSTER",
                "MEET",
                "127.0.0.1",
                &node.port.to_string(),
                &bus_port,
            ])?;
        }
        let cluster = Self {
            url: format!(
                "redis+cluster://{}",
                nodes[..primaries]
                    .iter()
                    .map(|node| format!("127.0.0.1:{}", node.port))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            nodes,
            primaries,
        };
        if !poll_until(READY_WITHIN, || cluster.all_know(total)) {
            return Err(format!("the nodes did not meet within {READY_WITHIN:?}"));
        }
        for (n, replica) in cluster.nodes[primaries..].iter().enumerate() {
            let primary = cluster.node_id(&cluster.nodes[n / replicas.max(1)])?;
            replica.query::<()>(&["CLUSTER", "REPLICATE", &primary])?;
        }
        if !poll_until(READY_WITHIN, || cluster.ready(total)) {
            return Err(format!(
                "the cluster did not serve every slot within {READY_WITHIN:?}"
            ));
        }
        eprintln!(
            "Redis Cluster of {total} nodes ready in {:?}",
            began.elapsed()
        );
        Ok(cluster)
    }

    fn all_know(&self, total: usize) -> bool {
        self.nodes.iter().all(|node| {
            info_field(node, "cluster_known_nodes").is_some_and(|known| known == total.to_string())
        })
    }

    /// Whether every node serves or knows the server of every slot, and
    /// every replica has synced.
    fn ready(&self, total: usize) -> bool {
        self.all_know(total)
            && self.nodes.iter().all(|node| {
                info_field(node, "cluster_state").as_deref() == Some("ok")
                    && info_field(node, "cluster_slots_ok").as_deref() == Some(&SLOTS.to_string())
            })
            && self.nodes[self.primaries..].iter().all(|replica| {
                replica
                    .query::<String>(&["INFO", "replication"])
                    .is_ok_and(|info| info.contains("master_link_status:up"))
            })
    }

    /// The replicas the launcher gave the `n`th primary.
    pub fn replicas_of(&self, n: usize) -> &[Redis] {
        let per_primary = (self.nodes.len() - self.primaries) / self.primaries;
        let first = self.primaries + n * per_primary;
        &self.nodes[first..first + per_primary]
    }

    /// The cluster's id of `node`.
    pub fn node_id(&self, node: &Redis) -> Result<String, String> {
        node.query(&["CLUSTER", "MYID"])
    }

    /// The primary serving `key`'s slot now, as the first node that
    /// answers says.
    pub fn primary_for(&self, key: &str) -> Result<&Redis, String> {
        let slot = key_slot(key.as_bytes());
        let map = self
            .nodes
            .iter()
            .find_map(Self::slot_map_of)
            .ok_or("no node of the cluster answers CLUSTER SLOTS")?;
        let port = map
            .node(slot)
            .ok_or_else(|| format!("no node serves slot {slot}"))?
            .port;
        self.node_on(port)
    }

    /// The slot map as `node` says, if it answers.
    pub fn slot_map_of(node: &Redis) -> Option<SlotMap> {
        let reply: redis::Value = node.query(&["CLUSTER", "SLOTS"]).ok()?;
        let asked = Address {
            host: "127.0.0.1".into(),
            port: node.port,
        };
        SlotMap::from_cluster_slots(&reply, &asked).ok()
    }

    /// The node of this cluster listening on `port`.
    pub fn node_on(&self, port: u16) -> Result<&Redis, String> {
        self.nodes
            .iter()
            .find(|node| node.port == port)
            .ok_or_else(|| format!("no node of the cluster listens on port {port}"))
    }

    /// Moves `slot` from the primary `from` to the primary `to` as
    /// `redis-cli --cluster reshard` does: the slot is marked migrating and
    /// importing, its keys are moved `per_step` at a time with `pause`
    /// between steps (so a test can send requests while the slot is split
    /// between the two), then both nodes and the rest are told its new home.
    pub fn migrate_slot(
        &self,
        slot: u16,
        from: &Redis,
        to: &Redis,
        per_step: usize,
        pause: Duration,
    ) -> Result<usize, String> {
        let slot_text = slot.to_string();
        let (from_id, to_id) = (self.node_id(from)?, self.node_id(to)?);
        to.query::<()>(&["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &from_id])?;
        from.query::<()>(&["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &to_id])?;
        let mut moved = 0;
        loop {
            let keys: Vec<String> = from.query(&[
                "CLUSTER",
                "GETKEYSINSLOT",
                &slot_text,
                &per_step.to_string(),
            ])?;
            if keys.is_empty() {
                break;
            }
            let port = to.port.to_string();
            let mut migrate = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            migrate.extend(keys.iter().map(String::as_str));
            from.query::<()>(&migrate)?;
            moved += keys.len();
            std::thread::sleep(pause);
        }
        for node in [to, from].into_iter().chain(&self.nodes[..self.primaries]) {
            node.query::<()>(&["CLUSTER", "SETSLOT", &slot_text, "NODE", &to_id])?;
        }
        Ok(moved)
    }
}

/// One field of `CLUSTER INFO`.
fn info_field(node: &Redis, name: &str) -> Option<String> {
    let info: String = node.query(&["CLUSTER", "INFO"]).ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(|value| value.trim().to_owned())
}
