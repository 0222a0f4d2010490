//! Faults under load, against real servers: `redis-server` on the shipped
//! `redis/redis.conf`, `varnishd` on the VCL `shortlink vcl` generates, and
//! the `shortlink` writer, all from the release build. A bounded loopback
//! load generator (plain threads, kept-alive HTTP/1.1) runs through each
//! fault and records every request; each test prints its figures.
//!
//! - `redis_hangs`, `redis_killed_and_restarted`: cached links always 301,
//!   fresh keys 503 within the lookup timeout, normal within 1 s, same
//!   Varnish child and VCL;
//! - `redis_down_while_varnish_starts`: the VCL loads, 503 until Redis is
//!   up, then 301;
//! - `writer_with_redis_killed`, `writer_with_redis_hung`:
//!   inserts answer 201/200 or 503 "unreachable", the store matches what
//!   was acknowledged;
//! - `durability_of_acknowledged_links`: no acknowledged link lost to a
//!   `kill -9` right after the last acknowledgement;
//! - `varnish_restarted`: a new varnishd serves every link from Redis;
//! - `sentinel_failover`: the master of a Sentinel group killed under
//!   load: cached links always 301, uncached keys and inserts back within
//!   down-after + 3 s, no acknowledged link lost (also of the inserts made
//!   once the old master is back), every redirect counted once;
//! - `cluster_failover`: one of three primaries of a Redis Cluster (each
//!   with a replica) killed under load: cached links always 301, uncached
//!   keys and inserts back within the node timeout + 3 s, no acknowledged
//!   link lost;
//! - `busy_machine_healthy_redis`, `busy_machine_hung_redis`: hundreds of
//!   concurrent cold requests, busy loops and a starved Redis I/O thread:
//!   every stored link still redirects, and a hung Redis still gives 503
//!   within the timeout.
//!
//! Faults are destructive and timings matter, so the tests run one at a
//! time, whatever `--test-threads` says. Each starts its own servers, which
//! its guards stop even when it fails; a failed test's directory under
//! `target/test-work/` keeps the servers' logs.

mod busy_machine;
mod cluster;
mod failover;
mod http;
mod inserts;
mod links;
mod load;
mod redirects;
mod stack;

use std::process::ExitCode;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use libtest_mimic::{Arguments, Trial};

use stack::Fault;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

type Test = fn() -> Result<(), String>;

fn redis_hangs() -> Result<(), String> {
    redirects::redis_fault("redis-hangs", Fault::Hang, Duration::from_secs(3))
}

fn redis_killed() -> Result<(), String> {
    redirects::redis_fault("redis-killed", Fault::Kill, Duration::from_secs(2))
}

fn writer_redis_killed() -> Result<(), String> {
    inserts::writer_redis_away(
        "writer-redis-killed",
        Fault::Kill,
        Duration::from_millis(1500),
    )
}

/// Hung longer than the writer's write timeout, so that inserts time out:
/// an insert answered 503 stays queued on Redis's socket and runs when
/// Redis resumes, where its deadline must keep it from storing anything.
fn writer_redis_hung() -> Result<(), String> {
    inserts::writer_redis_away(
        "writer-redis-hung",
        Fault::Hang,
        Duration::from_millis(4500),
    )
}

fn main() -> ExitCode {
    let args = Arguments::from_args();
    // (name, its directory under target/test-work, test)
    let tests: [(&str, &str, Test); 11] = [
        ("redis_hangs", "redis-hangs", redis_hangs),
        ("redis_killed_and_restarted", "redis-killed", redis_killed),
        (
            "redis_down_while_varnish_starts",
            "redis-down-at-start",
            redirects::redis_down_at_start,
        ),
        (
            "writer_with_redis_killed",
            "writer-redis-killed",
            writer_redis_killed,
        ),
        (
            "writer_with_redis_hung",
            "writer-redis-hung",
            writer_redis_hung,
        ),
        (
            "durability_of_acknowledged_links",
            "durability",
            inserts::durability,
        ),
        (
            "varnish_restarted",
            "varnish-restart",
            redirects::varnish_restart,
        ),
        (
            "sentinel_failover",
            "sentinel-failover",
            failover::sentinel_failover,
        ),
        (
            "cluster_failover",
            "cluster-failover",
            cluster::cluster_failover,
        ),
        (
            "busy_machine_healthy_redis",
            "busy-healthy-redis",
            busy_machine::healthy_redis,
        ),
        (
            "busy_machine_hung_redis",
            "busy-hung-redis",
            busy_machine::hung_redis,
        ),
    ];
    let trials = tests
        .into_iter()
        .map(|(name, dir, test)| {
            Trial::test(name, move || {
                let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
                test()?;
                // Passed: its servers are stopped, its logs are not needed.
                if let Ok(path) = test_support::work_dir(&format!("fault-{dir}")) {
                    let _ = std::fs::remove_dir_all(path);
                }
                Ok(())
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}
