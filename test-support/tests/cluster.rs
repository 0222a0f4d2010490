//! The cluster launcher against real `redis-server` processes.

use std::time::Duration;

use redis_target::cluster::key_slot;
use test_support::{work_dir, RedisCluster};

#[test]
fn a_started_cluster_serves_every_slot_where_redis_says() {
    let dir = work_dir("cluster-launcher").unwrap();
    let cluster = RedisCluster::start(&dir, 3, 0).unwrap();
    assert!(cluster.url.starts_with("redis+cluster://127.0.0.1:"));
    for key in ["short:Lm", "short:clicks:Lm", "{Lm}x", "short:@", "a"] {
        let slot: u16 = cluster.nodes[0]
            .query(&["CLUSTER", "KEYSLOT", key])
            .unwrap();
        assert_eq!(key_slot(key.as_bytes()), slot, "{key}");
        let primary = cluster.primary_for(key).unwrap();
        primary.query::<()>(&["HSET", key, "f", "v"]).unwrap();
    }
    // A slot moved with its keys is served by its new primary.
    let from = cluster.primary_for("short:Lm").unwrap();
    let to = cluster.nodes[..3]
        .iter()
        .find(|n| n.port != from.port)
        .unwrap();
    let moved = cluster
        .migrate_slot(key_slot(b"short:Lm"), from, to, 10, Duration::ZERO)
        .unwrap();
    assert_eq!(moved, 1);
    assert_eq!(cluster.primary_for("short:Lm").unwrap().port, to.port);
    let value: String = to.query(&["HGET", "short:Lm", "f"]).unwrap();
    assert_eq!(value, "v");
}
