//! A Sentinel failover under load: the master of a master and two replicas
//! is killed (`SIGKILL`) while Varnish serves cached and fresh links and
//! clients insert through the writer, both following the group through
//! its `redis+sentinel://` URL.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::sleep;
use std::time::Duration;

use test_support::{free_port, Persistence, Redis, SentinelGroup, Varnish, Writer};

use crate::inserts::{acknowledged, compare, count, inserter, Insert, Outcome};
use crate::links::{self, Class, Recovery};
use crate::load::{ms, Load, Record};
use crate::stack::{
    configure, dump_links, public_base, start_writer, writer_config, TestDir, PREFIX,
};

/// How long Sentinels wait for a silent master before they agree it is
/// down: the floor of any failover's length.
const DOWN_AFTER: Duration = Duration::from_secs(2);
/// Uncached keys and inserts must work again within this of the kill.
const RECOVERY_LIMIT: Duration = DOWN_AFTER.saturating_add(Duration::from_secs(3));
const BEFORE: Duration = Duration::from_secs(1);
/// Load after the kill: the limit, and two seconds to show recovery holds.
const AFTER: Duration = RECOVERY_LIMIT.saturating_add(Duration::from_secs(2));
const CACHED_LINKS: usize = 200;
const FRESH_LINKS: usize = 12_000;

/// The Sentinel group with links stored, Varnish on the VCL generated for
/// its URL with the cached links warmed, and the writer acknowledging
/// inserts once a replica has them.
struct Stack {
    /// Removed when the test passes; kept, with the servers' logs, when it fails.
    _dir: TestDir,
    group: SentinelGroup,
    varnish: Varnish,
    _writer: Writer,
    writer_port: u16,
    public: String,
    cached: Arc<Vec<(String, String)>>,
    fresh: Arc<Vec<(String, String)>>,
}

impl Stack {
    fn start() -> Result<Self, String> {
        let dir = TestDir::new("sentinel-failover")?;
        let group = SentinelGroup::start(&dir.join("group"), Persistence::Shipped, DOWN_AFTER)?;
        let first = &group.servers[0];
        let cached = links::make("c", CACHED_LINKS);
        let fresh = links::make("f", FRESH_LINKS);
        links::store(first, &cached)?;
        links::store(first, &fresh)?;
        // Stored by hand, so not through the writer's WAIT: wait for the replicas.
        let stored: u64 = first.query(&["DBSIZE"])?;
        if !test_support::poll_until(Duration::from_secs(5), || {
            group.servers[1..]
                .iter()
                .all(|replica| replica.query::<u64>(&["DBSIZE"]).is_ok_and(|n| n == stored))
        }) {
            return Err("the replicas did not receive the stored links".into());
        }
        let (varnish_port, writer_port) = (free_port()?, free_port()?);
        let config = writer_config(&group.url, writer_port, Some(varnish_port)).replacen(
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
            group,
            varnish,
            _writer: writer,
            writer_port,
            public: public_base(Some(varnish_port)),
            cached,
            fresh,
        })
    }
}

pub fn sentinel_failover() -> Result<(), String> {
    let stack = Stack::start()?;
    let (group, first) = (&stack.group, &stack.group.servers[0]);
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
    first.kill()?;
    // When a majority of the Sentinels name another master: what follows
    // it is the writer's and the VMOD's part of the recovery.
    let killed = std::time::Instant::now();
    let named_after = loop {
        if group
            .named_master_port()
            .is_some_and(|port| port != first.port)
        {
            break killed.elapsed();
        }
        if killed.elapsed() > AFTER {
            return Err("the Sentinels named no new master in time".into());
        }
        sleep(Duration::from_millis(25));
    };
    let hits = redirects.finish()?;
    let writes = inserts.finish()?;

    let new_master = group
        .named_master_port()
        .filter(|&port| port != first.port)
        .ok_or("the Sentinels named no new master")?;
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

    let (late, acked) = old_master_returns(&stack, new_master, &writes)?;
    // Every redirect served is counted once on the new master: the warming
    // requests (`WARMING_REQUESTS` per cached link) and every 301 of the run, whichever
    // master was there when Varnish flushed it.
    let redirected = links::WARMING_REQUESTS * CACHED_LINKS as u64
        + hits.iter().filter(|r| r.what.status == 301).count() as u64;
    let counted = counted_once(&stack, new_master, redirected)?;
    let cached_hits = hits
        .iter()
        .filter(|r| r.what.class == Class::Cached)
        .count();
    println!(
        "    sentinel_failover: master (port {}) killed with SIGKILL, Sentinels named port \
         {new_master} +{} after the kill; down-after {} | uncached keys: {} (last failure \
         +{}), {} | cached \
         links: {cached_hits} requests, every one a 301 from cache | inserts (WAIT for 1 \
         replica): {}, acknowledged again at +{} | old master back as a replica, then \
         {} | {} acknowledged links, 0 lost | {counted} redirects served, {counted} \
         clicks counted",
        first.port,
        ms(named_after),
        ms(DOWN_AFTER),
        links::tally(hits.iter().filter(|r| r.what.class == Class::Fresh)),
        ms(lookups_failed),
        served.describe(),
        count(&writes),
        ms(stored_again),
        count(&late),
        acked.len()
    );
    Ok(())
}

/// When inserts were acknowledged again after the kill at `killed`: the
/// first acknowledgement after the last refusal, from the kill.
pub fn insert_recovery(writes: &[Record<Insert>], killed: Duration) -> Result<Duration, String> {
    if let Some(other) = writes
        .iter()
        .find(|r| matches!(r.what.outcome, Outcome::Other(_)))
    {
        return Err(format!("an insert answered {:?}", other.what));
    }
    let refused = |r: &&Record<Insert>| matches!(r.what.outcome, Outcome::Unreachable);
    let last_refusal = writes
        .iter()
        .filter(refused)
        .filter(|r| r.done() > killed)
        .map(Record::done)
        .max()
        .ok_or("no insert failed after the kill: the failover was not observed")?;
    writes
        .iter()
        .filter(|r| !refused(r) && r.done() > last_refusal)
        .map(Record::done)
        .min()
        .map(|at| at.saturating_sub(killed))
        .ok_or_else(|| "no insert was acknowledged after the failover".into())
}

/// Key to URL.
type Links = BTreeMap<String, String>;

/// The old master returns, and Sentinels make it a replica of the new one:
/// inserts made meanwhile are all acknowledged, and every acknowledged
/// link of the test is on the new master. The late inserts, and every
/// acknowledged link.
fn old_master_returns(
    stack: &Stack,
    new_master: u16,
    writes: &[Record<Insert>],
) -> Result<(Vec<Record<Insert>>, Links), String> {
    stack.group.servers[0].launch()?;
    let late = Load::start(
        stack.writer_port,
        Duration::from_secs(1),
        &[(
            2,
            Duration::from_millis(4),
            inserter("late", 100_000, stack.public.clone()),
        )],
    )
    .finish()?;
    if let Some(refused) = late
        .iter()
        .find(|r| !matches!(r.what.outcome, Outcome::Acked { .. }))
    {
        return Err(format!(
            "with the old master back as a replica, {:?}",
            refused.what
        ));
    }
    let master = stack
        .group
        .servers
        .iter()
        .find(|server| server.port == new_master)
        .ok_or("the new master is none of the group's servers")?;
    let acked = acknowledged(&writes.iter().chain(&late).cloned().collect::<Vec<_>>())?;
    let (lost, _) = compare(&acked, &dump_links(master, PREFIX)?);
    if let Some(example) = lost.first() {
        return Err(format!(
            "{} acknowledged links lost in the failover, e.g. {example}",
            lost.len()
        ));
    }
    Ok((late, acked))
}

/// Waits (a few flush intervals at most) until the clicks stored on the new
/// master add up to `served`, and answers them; fails if they never do, or
/// if more were counted.
fn counted_once(stack: &Stack, new_master: u16, served: u64) -> Result<u64, String> {
    let master = stack
        .group
        .servers
        .iter()
        .find(|server| server.port == new_master)
        .ok_or("the new master is none of the group's servers")?;
    counted_exactly(&[master], served, "the new master")
}

/// Waits (5 s at most) until the clicks and bots' clicks stored on
/// `servers` (every primary of a cluster, say) add up to `served`, and
/// answers them; fails if they never do, or if more were counted.
pub fn counted_exactly(servers: &[&Redis], served: u64, which: &str) -> Result<u64, String> {
    let counted = || -> Result<u64, String> {
        servers.iter().try_fold(0, |sum, server| {
            let mut names: Vec<String> = server.query(&["KEYS", &format!("{PREFIX}clicks:*")])?;
            names.extend(server.query::<Vec<String>>(&["KEYS", &format!("{PREFIX}bots:*")])?);
            names.iter().try_fold(sum, |sum, name| {
                let fields: BTreeMap<String, u64> = server.query(&["HGETALL", name])?;
                Ok(sum + fields.values().sum::<u64>())
            })
        })
    };
    let mut last = 0;
    let settled = test_support::poll_until(Duration::from_secs(5), || {
        last = counted().unwrap_or(last);
        last >= served
    });
    if !settled || last != served {
        return Err(format!(
            "{served} redirects served, {last} clicks counted on {which}"
        ));
    }
    Ok(last)
}
