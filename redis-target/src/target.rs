//! The Redis URL forms, read once for every place that takes one.

use std::fmt;
use std::str::FromStr;

/// Sentinel's own port, when a `redis+sentinel://` URL names none.
pub const SENTINEL_PORT: u16 = 26379;

/// Redis's own port, when a `redis+cluster://` URL names none.
pub const REDIS_PORT: u16 = 6379;

/// What every error about a Redis URL ends with: the forms it may take.
const FORMS: &str = "write redis://host:port/db for one server, \
    redis+sentinel://host:port[,host:port...]/master-name[/db] for a master \
    that Sentinels watch, or redis+cluster://host:port[,host:port...] for a \
    Redis Cluster";

/// A Redis URL that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Redis URL {url:?}: {reason}; {FORMS}")]
pub struct TargetError {
    url: String,
    reason: String,
}

impl TargetError {
    fn new(url: &str, reason: impl Into<String>) -> Self {
        Self {
            url: redacted(url),
            reason: reason.into(),
        }
    }
}

/// `url` with any password replaced by `***`, for messages and logs.
pub(crate) fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((credentials, hosts)) => {
            let user = credentials.split_once(':').map_or("", |(user, _)| user);
            format!("{scheme}://{user}:***@{hosts}{}", &rest[authority_end..])
        }
        None => url.to_owned(),
    }
}

/// Where the Redis that takes writes is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One server: `redis://` or `unix://`, as the `redis`
    /// crate reads them.
    Server(String),
    /// A master that Sentinels watch and replace when it fails.
    Sentinel(SentinelTarget),
    /// A Redis Cluster, found from any of its nodes.
    Cluster(ClusterTarget),
}

/// Whether `url` names a Redis Cluster (and is a URL this crate reads).
pub fn names_a_cluster(url: &str) -> bool {
    matches!(url.parse(), Ok(Target::Cluster(_)))
}

/// `redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master-name[/db]`
///
/// The credentials and the database are the master's (and so its
/// replicas'); the Sentinels are asked without credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelTarget {
    pub sentinels: Vec<Address>,
    pub master_name: String,
    /// `user:password@` as written, or empty.
    credentials: String,
    pub db: i64,
}

impl SentinelTarget {
    /// The URL of one server of this group at `address`, with the group's
    /// credentials and database.
    pub fn server_url(&self, address: &Address) -> String {
        format!("redis://{}{address}/{}", self.credentials, self.db)
    }
}

/// `redis+cluster://[[user]:password@]host:port[,host:port...]`: some nodes
/// of a Redis Cluster (any of them; the rest are learnt from them).
///
/// The credentials are every node's. A cluster has one database, so the URL
/// names none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterTarget {
    pub seeds: Vec<Address>,
    /// `user:password@` as written, or empty.
    credentials: String,
}

impl ClusterTarget {
    /// The URL of the node at `address`, with the cluster's credentials.
    pub fn node_url(&self, address: &Address) -> String {
        format!("redis://{}{address}", self.credentials)
    }

    /// The URLs of the seed nodes.
    pub fn seed_urls(&self) -> Vec<String> {
        self.seeds.iter().map(|seed| self.node_url(seed)).collect()
    }
}

/// A host and port, as Sentinel and Redis Cluster name them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl Address {
    /// `host`, `host:port`, `[v6]` or `[v6]:port`.
    pub(crate) fn parse(text: &str, default_port: u16) -> Result<Self, String> {
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("{text:?} opens a bracket it does not close"))?;
            (host, after.strip_prefix(':'))
        } else {
            match text.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (text, None),
            }
        };
        if host.is_empty() {
            return Err(format!("{text:?} names no host"));
        }
        let port = match port {
            None => default_port,
            Some(port) => port
                .parse::<u16>()
                .ok()
                .filter(|&port| port != 0)
                .ok_or_else(|| format!("{text:?} has no valid port"))?,
        };
        Ok(Self {
            host: host.to_owned(),
            port,
        })
    }
}

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(url: &str) -> Result<Self, TargetError> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| TargetError::new(url, "it has no scheme"))?;
        match scheme {
            "redis" | "rediss" | "unix" | "redis+unix" => {
                redis::Client::open(url).map_err(|e| TargetError::new(url, e.to_string()))?;
                Ok(Self::Server(url.to_owned()))
            }
            "redis+sentinel" => parse_sentinel(rest)
                .map(Self::Sentinel)
                .map_err(|reason| TargetError::new(url, reason)),
            "redis+cluster" => parse_cluster(rest)
                .map(Self::Cluster)
                .map_err(|reason| TargetError::new(url, reason)),
            other => Err(TargetError::new(
                url,
                format!("{other}:// is no Redis scheme"),
            )),
        }
    }
}

/// `user:password@` (kept with its `@`, or empty) and the hosts after it.
fn split_credentials(authority: &str) -> (String, &str) {
    match authority.rsplit_once('@') {
        Some((credentials, hosts)) => (format!("{credentials}@"), hosts),
        None => (String::new(), authority),
    }
}

fn parse_cluster(rest: &str) -> Result<ClusterTarget, String> {
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !matches!(path, "" | "0") {
        return Err(format!(
            "a Redis Cluster has only database 0, not {path:?}: name none"
        ));
    }
    let (credentials, hosts) = split_credentials(authority);
    let seeds = hosts
        .split(',')
        .map(|host| Address::parse(host, REDIS_PORT))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ClusterTarget { seeds, credentials })
}

fn parse_sentinel(rest: &str) -> Result<SentinelTarget, String> {
    let (authority, path) = rest
        .split_once('/')
        .ok_or("it names no master after the Sentinels")?;
    let (credentials, hosts) = split_credentials(authority);
    let sentinels = hosts
        .split(',')
        .map(|host| Address::parse(host, SENTINEL_PORT))
        .collect::<Result<Vec<_>, _>>()?;
    let (master_name, db) = match path.split_once('/') {
        Some((name, db)) => (
            name,
            db.parse::<i64>()
                .ok()
                .filter(|&db| db >= 0)
                .ok_or_else(|| format!("database {db:?} is not a number"))?,
        ),
        None => (path, 0),
    };
    if master_name.is_empty() || master_name.contains(['?', '#', ' ']) {
        return Err(format!("{master_name:?} is no master name"));
    }
    Ok(SentinelTarget {
        sentinels,
        master_name: master_name.to_owned(),
        credentials,
        db,
    })
}

#[cfg(test)]
mod tests {
    use super::{Address, SentinelTarget, Target};

    fn address(host: &str, port: u16) -> Address {
        Address {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn a_server_url_is_kept_as_written() {
        for url in [
            "redis://127.0.0.1:6380/0",
            "redis://:secret@cache.example:6380/3",
            "unix:///run/redis.sock",
        ] {
            assert_eq!(url.parse(), Ok(Target::Server(url.into())));
        }
    }

    #[test]
    fn a_sentinel_url_names_the_sentinels_the_master_and_its_database() {
        let target: Target = "redis+sentinel://:secret@10.0.0.1:26380,sentinel.b,[::1]:5/links/2"
            .parse()
            .unwrap();
        let Target::Sentinel(sentinel) = target else {
            panic!("{target:?}")
        };
        assert_eq!(
            sentinel.sentinels,
            [
                address("10.0.0.1", 26380),
                address("sentinel.b", 26379),
                address("::1", 5)
            ]
        );
        assert_eq!(sentinel.master_name, "links");
        assert_eq!(sentinel.db, 2);
        assert_eq!(
            sentinel.server_url(&address("::1", 6379)),
            "redis://:secret@[::1]:6379/2"
        );
    }

    #[test]
    fn a_sentinel_url_without_a_database_uses_the_first() {
        let target: Target = "redis+sentinel://127.0.0.1:26379/mymaster".parse().unwrap();
        assert_eq!(
            target,
            Target::Sentinel(SentinelTarget {
                sentinels: vec![address("127.0.0.1", 26379)],
                master_name: "mymaster".into(),
                credentials: String::new(),
                db: 0,
            })
        );
    }

    #[test]
    fn a_cluster_url_names_its_seed_nodes() {
        let target: Target = "redis+cluster://:secret@10.0.0.1:7000,node.b,[::1]:7002/"
            .parse()
            .unwrap();
        let Target::Cluster(cluster) = target else {
            panic!("{target:?}")
        };
        assert_eq!(
            cluster.seeds,
            [
                address("10.0.0.1", 7000),
                address("node.b", 6379),
                address("::1", 7002)
            ]
        );
        assert_eq!(
            cluster.seed_urls(),
            [
                "redis://:secret@10.0.0.1:7000",
                "redis://:secret@node.b:6379",
                "redis://:secret@[::1]:7002"
            ]
        );
    }

    #[test]
    fn errors_never_show_a_password() {
        for url in [
            "redis+sentinel://:hunter2@h:26379",
            "redis+sentinel://admin:hunter2@h1,h2",
            "redis+cluster://:hunter2@h1:7000/5",
            "http://user:hunter2@example.org/x",
        ] {
            let error = url.parse::<Target>().unwrap_err().to_string();
            assert!(
                !error.contains("hunter2") && error.contains(":***@"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_bad_url_says_why_and_which_forms_work() {
        for (url, why) in [
            ("127.0.0.1:6379", "no scheme"),
            ("http://127.0.0.1/", "no Redis scheme"),
            ("redis://127.0.0.1:notaport", "did not parse"),
            ("redis+sentinel://127.0.0.1:26379", "no master"),
            ("redis+sentinel://127.0.0.1:26379/", "no master name"),
            ("redis+sentinel://127.0.0.1:26379/m/x", "not a number"),
            ("redis+sentinel://127.0.0.1:0/m", "no valid port"),
            ("redis+sentinel://a,,b/m", "no host"),
            ("redis+sentinel://[::1/m", "does not close"),
            ("redis+cluster://127.0.0.1:7000/2", "only database 0"),
            ("redis+cluster://127.0.0.1:7000,:7001", "no host"),
        ] {
            let error = url.parse::<Target>().unwrap_err().to_string();
            assert!(error.contains(why), "{url}: {error}");
            assert!(error.contains("redis+sentinel://host:port"), "{error}");
            assert!(error.contains("redis+cluster://host:port"), "{error}");
        }
    }
}
