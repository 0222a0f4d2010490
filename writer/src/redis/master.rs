//! The writer's connections to the Redis that takes writes now: one server,
//! the master Sentinels name, or the primaries of a Redis Cluster.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::FutureExt as _;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Value};
use redis_target::{ClusterTarget, Locator, Target, Timeouts};

use crate::config::Settings;

/// Connections that acknowledged writes take turns on. `WAIT` blocks its
/// connection until replicas confirm, and every command sent behind it on
/// that connection waits too: one connection would let one acknowledged
/// write through per replication round trip.
const WAIT_LANES: usize = 8;

/// Bounds of the pause before a command is sent again on a connection
/// made anew: short, as the whole exchange must fit in the write timeout.
const RETRY_MIN_DELAY: Duration = Duration::from_millis(50);
const RETRY_MAX_DELAY: Duration = Duration::from_millis(500);

/// A multiplexed connection to the master that reconnects by itself (and
/// [`WAIT_LANES`] more for writes that wait for replicas), replaced when
/// Sentinels name a new master: requests made after a failover never reach
/// the demoted one.
#[derive(Clone)]
pub struct MasterConnection {
    inner: Arc<Inner>,
}

/// A connection [`MasterConnection`] hands out: to one server, or to a
/// whole Redis Cluster.
#[derive(Clone)]
pub enum Connection {
    Master(ConnectionManager),
    Cluster(LazyCluster),
}

/// A cluster connection made on first use, shared by every clone: it
/// learns the slot map from the seed nodes, follows `MOVED` and `ASK`, and
/// reconnects to nodes by itself.
#[derive(Clone)]
pub struct LazyCluster {
    client: Arc<ClusterClient>,
    connection: Arc<tokio::sync::OnceCell<ClusterConnection>>,
}

impl LazyCluster {
    async fn connected(&self) -> RedisResult<ClusterConnection> {
        self.connection
            .get_or_try_init(|| self.client.get_async_connection())
            .await
            .cloned()
    }

    /// One slot of each primary, as the cluster says now: a command
    /// routed by it reaches that primary, connected or not yet.
    pub async fn primaries(&self) -> RedisResult<Vec<u16>> {
        let reply: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut self.connected().await?)
            .await?;
        // Any node that names no host for itself is reached by slot anyway.
        let unnamed = redis_target::Address {
            host: String::new(),
            port: 0,
        };
        Ok(
            redis_target::cluster::SlotMap::from_cluster_slots(&reply, &unnamed)?
                .primaries_by_slot()
                .into_iter()
                .map(|(_, slot)| slot)
                .collect(),
        )
    }

    /// `WAIT replicas within_ms` on the node serving `key`: that node's
    /// connection carried the writes to `key`, and `WAIT` counts the
    /// replicas that have every write its connection sent.
    pub async fn wait_for_replicas(
        &self,
        key: &str,
        replicas: u32,
        within_ms: u64,
    ) -> RedisResult<u32> {
        let mut command = redis::cmd("WAIT");
        command.arg(replicas).arg(within_ms);
        let slot = redis_target::cluster::key_slot(key.as_bytes());
        self.on_primary_of(slot, &command).await
    }

    /// `command` on the primary serving `slot`.
    pub async fn on_primary_of<T: redis::FromRedisValue>(
        &self,
        slot: u16,
        command: &Cmd,
    ) -> RedisResult<T> {
        use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
            slot,
            SlotAddr::Master,
        )));
        let reply = self
            .connected()
            .await?
            .route_command(command.clone(), routing)
            .await?;
        Ok(redis::from_redis_value(reply)?)
    }
}

impl redis::aio::ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Master(connection) => connection.req_packed_command(cmd),
            Self::Cluster(cluster) => {
                async move { cluster.connected().await?.req_packed_command(cmd).await }.boxed()
            }
        }
    }

    /// In a cluster, the commands of a pipeline that is no transaction are
    /// sent each to its own node, all at once: the keys of a page of links
    /// live in many slots.
    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Master(connection) => connection.req_packed_commands(pipeline, offset, count),
            Self::Cluster(cluster) => async move {
                let connection = cluster.connected().await?;
                if pipeline.is_transaction() {
                    let mut connection = connection;
                    return connection
                        .req_packed_commands(pipeline, offset, count)
                        .await;
                }
                futures_util::future::try_join_all(pipeline.cmd_iter().map(|command| {
                    let mut connection = connection.clone();
                    async move { connection.req_packed_command(command).await }
                }))
                .await
            }
            .boxed(),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Master(connection) => connection.get_db(),
            Self::Cluster(_) => 0,
        }
    }
}

struct Inner {
    route: Route,
    next_lane: AtomicUsize,
}

/// Where the connections lead.
enum Route {
    /// One server, or the master a Sentinel group names, followed by the
    /// locator.
    Master {
        locator: Locator,
        config: ConnectionManagerConfig,
        /// The shared connection, then the wait lanes, made on first use;
        /// and the locator's generation they were made in.
        current: Mutex<Option<(u64, Vec<ConnectionManager>)>>,
    },
    /// A Redis Cluster: the shared cluster connection, then the wait lanes,
    /// each a cluster connection of its own, so that one `WAIT` holds up no
    /// other write.
    Cluster(Vec<LazyCluster>),
}

/// A client of the cluster `target` with the writer's `timeouts`, for
/// blocking and async connections alike.
pub fn cluster_client(target: &ClusterTarget, timeouts: Timeouts) -> RedisResult<ClusterClient> {
    // The crate's first retry waits 1.28 s by default, past the write
    // timeout: a request sent on the connection to a node that restarted
    // would fail instead of being retried.
    ClusterClient::builder(target.seed_urls())
        .connection_timeout(timeouts.connect)
        .response_timeout(timeouts.command)
        .min_retry_wait(u64::try_from(RETRY_MIN_DELAY.as_millis()).unwrap_or(50))
        .max_retry_wait(u64::try_from(RETRY_MAX_DELAY.as_millis()).unwrap_or(500))
        .build()
}

/// One blocking connection to the links' master (or cluster) `settings`
/// name, for a question asked once at start.
pub fn connect_to_links_redis(
    settings: &Settings,
) -> Result<Box<dyn redis::ConnectionLike>, String> {
    let url = &settings.config.redis.url;
    let timeouts = settings.redis_timeouts();
    if let Ok(Target::Cluster(cluster)) = url.parse() {
        let connection = cluster_client(&cluster, timeouts)
            .and_then(|client| client.get_connection())
            .map_err(|e| e.to_string())?;
        return Ok(Box::new(connection));
    }
    let locator = Locator::open(url, timeouts)?;
    let (connection, _) = locator.connect().map_err(|e| e.to_string())?;
    Ok(Box::new(connection))
}

impl MasterConnection {
    /// Follows the Redis `url` names with the writer's timeouts.
    pub fn open(url: &str, settings: &Settings) -> RedisResult<Self> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout()))
            .set_response_timeout(Some(settings.write_timeout()))
            .set_number_of_retries(1)
            .set_min_delay(RETRY_MIN_DELAY)
            .set_max_delay(RETRY_MAX_DELAY);
        Self::new(url, settings.redis_timeouts(), config)
    }

    /// Whether this leads to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.inner.route, Route::Cluster(_))
    }

    /// Follows the Redis `url` names, without connecting yet.
    pub fn new(
        url: &str,
        timeouts: Timeouts,
        config: ConnectionManagerConfig,
    ) -> RedisResult<Self> {
        let bad_url =
            |e: String| RedisError::from((ErrorKind::InvalidClientConfig, "bad Redis URL", e));
        let target: Target = url
            .parse()
            .map_err(|e: redis_target::TargetError| bad_url(e.to_string()))?;
        let route = match target {
            Target::Cluster(cluster) => {
                let client = Arc::new(cluster_client(&cluster, timeouts)?);
                Route::Cluster(
                    (0..=WAIT_LANES)
                        .map(|_| LazyCluster {
                            client: Arc::clone(&client),
                            connection: Arc::new(tokio::sync::OnceCell::new()),
                        })
                        .collect(),
                )
            }
            Target::Server(_) | Target::Sentinel(_) => {
                let locator = Locator::open(url, timeouts).map_err(bad_url)?;
                // A command-line run uses it at once: not before the master
                // is known.
                locator.find_master();
                Route::Master {
                    locator,
                    config,
                    current: Mutex::new(None),
                }
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                route,
                next_lane: AtomicUsize::new(0),
            }),
        })
    }

    /// The connection every request shares. Cheap: a clone, and new
    /// connections only after a failover.
    pub fn get(&self) -> RedisResult<Connection> {
        self.connection(0)
    }

    /// A connection for a write that `WAIT`s for replicas, in turn.
    pub fn wait_lane(&self) -> RedisResult<Connection> {
        let lane = self.inner.next_lane.fetch_add(1, Ordering::Relaxed) % WAIT_LANES;
        self.connection(1 + lane)
    }

    fn connection(&self, index: usize) -> RedisResult<Connection> {
        let (locator, config, current) = match &self.inner.route {
            Route::Cluster(lanes) => {
                return lanes
                    .get(index)
                    .cloned()
                    .map(Connection::Cluster)
                    .ok_or_else(|| {
                        RedisError::from((ErrorKind::Client, "no such cluster connection"))
                    })
            }
            Route::Master {
                locator,
                config,
                current,
            } => (locator, config, current),
        };
        let mut current = current.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = locator.generation();
        let connections = match &mut *current {
            Some((made_in, connections)) if *made_in == generation => connections,
            stale_or_none => {
                let (first, made_in) = new_connection(locator, config)?;
                &mut stale_or_none.insert((made_in, vec![first])).1
            }
        };
        while connections.len() <= index {
            connections.push(new_connection(locator, config)?.0);
        }
        Ok(Connection::Master(connections[index].clone()))
    }
}

/// A lazy connection to the master as `locator` knows it now, and its
/// generation. Does no I/O: connects on first use.
fn new_connection(
    locator: &Locator,
    config: &ConnectionManagerConfig,
) -> RedisResult<(ConnectionManager, u64)> {
    let (client, generation) = locator.master()?;
    let connection = ConnectionManager::new_lazy_with_config(client, config.clone())?;
    Ok((connection, generation))
}
