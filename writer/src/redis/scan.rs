//! Names read from Redis with `SCAN`, so that Redis is never blocked for
//! long: on the one server, or on every primary of a cluster in turn.

use redis::RedisResult;

use crate::redis::master::Connection;

/// Every name matching `pattern` that holds a value of `kind` (`hash`,
/// `list`...), read with `SCAN` so that Redis is never blocked for long; in
/// a cluster, from every primary in turn.
pub async fn scan(
    connection: &mut Connection,
    pattern: &str,
    kind: &str,
) -> RedisResult<Vec<String>> {
    let step = |cursor: u64| {
        let mut command = redis::cmd("SCAN");
        command
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .arg("TYPE")
            .arg(kind);
        command
    };
    let cluster = match connection {
        Connection::Cluster(cluster) => Some(cluster.clone()),
        Connection::Master(_) => None,
    };
    // A slot of each primary of a cluster, or the one server (`None`).
    let nodes = match &cluster {
        Some(cluster) => cluster.primaries().await?.into_iter().map(Some).collect(),
        None => vec![None],
    };
    let mut names = Vec::new();
    for node in &nodes {
        let mut cursor = 0u64;
        loop {
            let (next, batch): (u64, Vec<String>) = match (&cluster, node) {
                (Some(cluster), Some(slot)) => cluster.on_primary_of(*slot, &step(cursor)).await?,
                _ => step(cursor).query_async(connection).await?,
            };
            names.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(names)
}
