//! A Redis Cluster failover under load: one of three primaries, each with
//! two replicas (so that the promoted one still has a replica to confirm
//! writes), is killed (`SIGKILL`) while Varnish serves cached and fresh
//! links, counting each answer in the cluster, and clients insert through
//! the writer, all following the cluster through its `redis+cluster://`
//! URL.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use redis_target::cluster::key_slot;
use test_support::{free_port, Redis, RedisCluster, Varnish, Writer, NODE_TIMEOUT};

use crate::failover::{counted_exactly, insert_recovery};
use crate::inserts::{acknowledged, compare, count, inserter};
use crate::links::{self, Class, Recovery};
use crate::load::{ms, Load};
use crate::stack::{
    configure, dump_links, public_base, start_writer, writer_config, TestDir, PREFIX,
};

/// Uncached keys and inserts must work again within this of the kill: the
/// node timeout after which the cluster calls a primary failing, and 3 s.
const RECOVERY_LIMIT: Duration = NODE_TIMEOUT.saturating_add(Duration::from_secs(3));
const BEFORE: Duration = Duration::from_secs(1);
/// Load after the kill: the limit, and two seconds to show recovery holds.
const AFTER: Duration = RECOVERY_LIMIT.saturating_add(Duration::from_secs(2));
const CACHED_LINKS: usize = 200;
const FRESH_LINKS: usize = 12_000;

struct Stack {
    /// Removed when the test passes; kept, with the servers' logs, when it fails.
    _dir: TestDir,
    cluster: RedisCluster,
    varnish: Varnish,
    _writer: Writer,
    writer_port: u16,
    public: String,
    cached: Arc<Vec<(String, String)>>,
    fresh: Arc<Vec<(String, String)>>,
}

impl Stack {
    /// Three primaries with two replicas each, the links stored on them (and
    /// on their replicas), Varnish on the VCL generated for the cluster with
    /// the cached links warmed, counting clicks in the cluster, and the
    /// writer acknowledging inserts (and Varnish flushes of clicks) once a
    /// replica has them.
    fn start() -> Result<Self, String> {
        let dir = TestDir::new("cluster-failover")?;
        let cluster = RedisCluster::start(&dir.join("cluster"), 3, 2)?;
        let cached = links::make("c", CACHED_LINKS);
        let fresh = links::make("f", FRESH_LINKS);
        store(&cluster, &cached)?;
        store(&cluster, &fresh)?;
        let (varnish_port, writer_port) = (free_port()?, free_port()?);
        let config = writer_config(&cluster.url, writer_port, Some(varnish_port)).replacen(
            "[redis]\n",
            "[redis]\nreplicas_to_ack = 1\n",
            1,
        );
        let (config_file, vcl) = configure(&dir.path, &config)?;
        let varnish = Varnish::start_on(&dir.join("varnish"), &vcl, varnish_port)?;
        links::warm(varnish.port, &cached)?;
        let writer = start_writer(&dir.path, &config_file, writer_port)?;
        Ok(Self {
            _dir: dir,
            cluster,
            varnish,
            _writer: writer,
            writer_port,
            public: public_base(Some(varnish_port)),
            cached,
            fresh,
        })
    }
}

/// Stores `links` on the primaries serving their hashes, and waits until
/// each primary's replicas hold as many keys as it does.
fn store(cluster: &RedisCluster, links: &[(String, String)]) -> Result<(), String> {
    let mut by_primary: BTreeMap<u16, Vec<(String, String)>> = BTreeMap::new();
    for link in links {
        let primary = cluster.primary_for(&format!("{PREFIX}{}", &link.0[..2]))?;
        by_primary
            .entry(primary.port)
            .or_default()
            .push(link.clone());
    }
    for (port, links) in &by_primary {
        let primary = cluster.node_on(*port)?;
        links::store(primary, links)?;
    }
    let synced = test_support::poll_until(Duration::from_secs(5), || {
        (0..cluster.primaries).all(|n| {
            let keys = |node: &Redis| node.query::<u64>(&["DBSIZE"]).ok();
            cluster
                .replicas_of(n)
                .iter()
                .all(|replica| keys(replica) == keys(&cluster.nodes[n]))
        })
    });
    if synced {
        Ok(())
    } else {
        Err("the replicas did not receive the stored links".into())
    }
}

pub fn cluster_failover() -> Result<(), String> {
    let stack = Stack::start()?;
    let cluster = &stack.cluster;
    let (victim, survivor) = (&cluster.nodes[0], &cluster.nodes[1]);
    // The first slot is the first primary's, by the launcher's layout.
    let victims_slot = 0;
    let redirects = Load::start(
        stack.varnish.port,
        BEFORE + AFTER,
        &[
            (2, Duration::from_millis(2), links::once_each(&stack.fresh)),
            (2, Duration::from_millis(1), links::cycling(&stack.cached)),
        ],
    );
    let inserts = Load::start(
        stack.writer_port,
        BEFORE + AFTER,
        &[(
            4,
            Duration::from_millis(4),
            inserter("failover", 100_000, stack.public.clone()),
        )],
    );
    sleep(BEFORE);
    let (killed_for_redirects, killed_for_inserts) = (redirects.now(), inserts.now());
    victim.kill()?;
    let killed = Instant::now();
    let promoted_after = loop {
        if RedisCluster::slot_map_of(survivor)
            .and_then(|map| map.node(victims_slot).map(|node| node.port))
            .is_some_and(|port| port != victim.port)
        {
            break killed.elapsed();
        }
        if killed.elapsed() > AFTER {
            return Err("the cluster promoted no replica in time".into());
        }
        sleep(Duration::from_millis(25));
    };
    let hits = redirects.finish()?;
    let writes = inserts.finish()?;

    links::check_every_answer(&hits)?;
    let served = Recovery::of(&hits, killed_for_redirects)?;
    let lookups_failed = served
        .last_failure
        .ok_or("no uncached key failed after the kill: the failover was not observed")?;
    let stored_again = insert_recovery(&writes, killed_for_inserts)?;
    if served.first_success > RECOVERY_LIMIT || stored_again > RECOVERY_LIMIT {
        return Err(format!(
            "not back within {} of the kill: uncached keys {}, inserts at +{}",
            ms(RECOVERY_LIMIT),
            served.describe(),
            ms(stored_again)
        ));
    }
    let acked = acknowledged(&writes)?;
    let mut stored = BTreeMap::new();
    let primaries = RedisCluster::slot_map_of(survivor)
        .ok_or("no slot map after the failover")?
        .nodes()
        .iter()
        .map(|node| cluster.node_on(node.port))
        .collect::<Result<Vec<&Redis>, String>>()?;
    for primary in &primaries {
        stored.extend(dump_links(primary, PREFIX)?);
    }
    let (lost, _) = compare(&acked, &stored);
    if let Some(example) = lost.first() {
        return Err(format!(
            "{} acknowledged links lost in the failover, e.g. {example}",
            lost.len()
        ));
    }
    let on_victim = |key: &str| key_slot(format!("{PREFIX}{}", &key[..2]).as_bytes()) <= 5460;
    let fresh_failed = hits
        .iter()
        .filter(|r| r.what.class == Class::Fresh && r.what.status == 503)
        .count();
    // Every redirect served is counted once in the cluster: the warming
    // requests (`WARMING_REQUESTS` per cached link) and every 301 of the run, whichever
    // node served its slot when Varnish flushed it.
    let redirected = links::WARMING_REQUESTS * CACHED_LINKS as u64
        + hits.iter().filter(|r| r.what.status == 301).count() as u64;
    let counted = counted_exactly(&primaries, redirected, "the cluster's primaries")?;
    println!(
        "    cluster_failover: primary (port {}) of 3 killed with SIGKILL, a replica of it promoted \
         +{} after the kill; node timeout {} | uncached keys: {} (last failure +{}), {} | \
         cached links: {} requests, every one a 301 from cache | inserts (WAIT for 1 replica): \
         {}, acknowledged again at +{} | {} acknowledged links, 0 lost ({} on the killed \
         primary's slots) | {fresh_failed} uncached requests failed | {counted} redirects \
         served, {counted} clicks counted (flushes WAIT for 1 replica)",
        victim.port,
        ms(promoted_after),
        ms(NODE_TIMEOUT),
        links::tally(hits.iter().filter(|r| r.what.class == Class::Fresh)),
        ms(lookups_failed),
        served.describe(),
        hits.iter().filter(|r| r.what.class == Class::Cached).count(),
        count(&writes),
        ms(stored_again),
        acked.len(),
        acked.keys().filter(|key| on_victim(key)).count(),
    );
    Ok(())
}
