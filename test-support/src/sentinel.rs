//! A Redis master with two replicas, watched by three Sentinels, on
//! loopback: the smallest group in which a failover keeps a quorum (2 of
//! 3) and leaves the new master a replica, which acknowledged writes need
//! (the writer's `replicas_to_ack = 1`).
//!
//! Every process is a [`Redis`] from the one launcher; a Sentinel is a
//! `redis-server` whose configuration monitors a master.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::redis::{Persistence, Redis};
use crate::{poll_until, started};

/// How long the group may take to be ready: the Sentinels find the
/// replica at once and each other within two hello periods (2 s each).
const READY_WITHIN: Duration = Duration::from_secs(10);

pub struct SentinelGroup {
    /// The first master, then its replicas: which one is master now is
    /// [`SentinelGroup::master`].
    pub servers: Vec<Redis>,
    pub sentinels: Vec<Redis>,
    /// `redis+sentinel://` naming all three Sentinels and the master.
    pub url: String,
    pub down_after: Duration,
}

impl SentinelGroup {
    /// The name the Sentinels know the master by.
    pub const MASTER_NAME: &'static str = "links";

    /// Starts the group in `dir` and returns once the Sentinels know the
    /// replicas and each other, so that a failover can happen. The replicas
    /// start in parallel, then the Sentinels (a Sentinel finds replicas in
    /// the master's `INFO`, asked at once and then every 10 s); a master is
    /// declared down after `down_after` without answers.
    pub fn start(
        dir: &Path,
        persistence: Persistence,
        down_after: Duration,
    ) -> Result<Self, String> {
        let began = Instant::now();
        // A full sync starts at once instead of after the default 5 s.
        let replication = "repl-diskless-sync-delay 0\n";
        let master = Redis::start(&dir.join("redis-a"), persistence, replication)?;
        let replica_of = format!("{replication}replicaof 127.0.0.1 {}\n", master.port);
        let mut servers = std::thread::scope(|scope| {
            let starting: Vec<_> = ["redis-b", "redis-c"]
                .map(|name| {
                    let (dir, config) = (dir.join(name), &replica_of);
                    scope.spawn(move || Redis::start(&dir, persistence, config))
                })
                .into_iter()
                .collect();
            started(starting)
        })?;
        servers.insert(0, master);
        if !poll_until(READY_WITHIN, || {
            servers[1..].iter().all(|replica| {
                replica
                    .query::<String>(&["INFO", "replication"])
                    .is_ok_and(|info| info.contains("master_link_status:up"))
            })
        }) {
            return Err(format!(
                "the replicas did not sync with the master within {READY_WITHIN:?}"
            ));
        }
        let monitor = format!(
            "sentinel monitor {name} 127.0.0.1 {port} 2\n\
             sentinel down-after-milliseconds {name} {down}\n\
             sentinel failover-timeout {name} 10000\n",
            name = Self::MASTER_NAME,
            port = servers[0].port,
            down = down_after.as_millis()
        );
        let sentinels = std::thread::scope(|scope| {
            let starting: Vec<_> = ["sentinel-1", "sentinel-2", "sentinel-3"]
                .map(|name| {
                    let (dir, monitor) = (dir.join(name), &monitor);
                    scope.spawn(move || Redis::start_sentinel(&dir, monitor))
                })
                .into_iter()
                .collect();
            started(starting)
        })?;
        let url = format!(
            "redis+sentinel://{}/{}",
            sentinels
                .iter()
                .map(|s| format!("127.0.0.1:{}", s.port))
                .collect::<Vec<_>>()
                .join(","),
            Self::MASTER_NAME
        );
        let group = Self {
            servers,
            sentinels,
            url,
            down_after,
        };
        if !poll_until(READY_WITHIN, || group.ready()) {
            return Err(format!(
                "the Sentinels did not find the replica and each other within {READY_WITHIN:?}"
            ));
        }
        eprintln!("Sentinel group ready in {:?}", began.elapsed());
        Ok(group)
    }

    /// Whether every Sentinel knows the replicas and the two other Sentinels.
    fn ready(&self) -> bool {
        self.sentinels.iter().all(|sentinel| {
            let known = |what: &str| {
                sentinel
                    .query::<Vec<redis::Value>>(&["SENTINEL", what, Self::MASTER_NAME])
                    .map_or(0, |list| list.len())
            };
            known("REPLICAS") == self.servers.len() - 1 && known("SENTINELS") == 2
        })
    }

    /// The server that answers `ROLE` as master now, if one does.
    pub fn master(&self) -> Option<&Redis> {
        self.servers.iter().find(|server| {
            server.query::<Vec<redis::Value>>(&["ROLE"]).is_ok_and(
                |role| matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master"),
            )
        })
    }

    /// Where the Sentinels say the master is: its port, once a majority
    /// of them agree.
    pub fn named_master_port(&self) -> Option<u16> {
        let ports: Vec<u16> = self
            .sentinels
            .iter()
            .filter_map(|sentinel| {
                sentinel
                    .query::<Option<(String, u16)>>(&[
                        "SENTINEL",
                        "GET-MASTER-ADDR-BY-NAME",
                        Self::MASTER_NAME,
                    ])
                    .ok()
                    .flatten()
                    .map(|(_, port)| port)
            })
            .collect();
        ports
            .iter()
            .copied()
            .find(|port| ports.iter().filter(|p| *p == port).count() >= 2)
    }
}
