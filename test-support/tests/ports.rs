//! Launchers against ports taken between being picked and being bound.

use std::cell::Cell;
use std::net::TcpListener;

use test_support::{work_dir, Persistence, Redis};

/// A cluster node's configuration with `bus_port` as its bus port.
fn node_config(bus_port: u16) -> String {
    format!("cluster-enabled yes\ncluster-port {bus_port}\ncluster-config-file nodes.conf\n")
}

#[test]
fn a_redis_whose_port_is_taken_starts_again_on_other_ports() {
    let dir = work_dir("ports-taken").unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port();
    let tries = Cell::new(0);
    let redis = Redis::start_with(&dir, Persistence::Scratch, || {
        tries.set(tries.get() + 1);
        let bus_port = if tries.get() == 1 {
            taken_port
        } else {
            test_support::free_port()?
        };
        Ok(node_config(bus_port))
    })
    .unwrap();
    assert_eq!(tries.get(), 2);
    let bus_port: Vec<String> = redis.query(&["CONFIG", "GET", "cluster-port"]).unwrap();
    assert_ne!(bus_port[1], taken_port.to_string());
    assert!(redis.ping());
}

#[test]
fn a_redis_that_fails_for_another_reason_is_not_started_again() {
    let dir = work_dir("ports-other-failure").unwrap();
    let tries = Cell::new(0);
    let error = Redis::start_with(&dir, Persistence::Scratch, || {
        tries.set(tries.get() + 1);
        Ok("no-such-directive yes\n".to_owned())
    })
    .err()
    .unwrap();
    assert_eq!(tries.get(), 1, "{error}");
    assert!(error.contains("redis-server exited"), "{error}");
}
