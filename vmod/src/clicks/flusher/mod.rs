//! The flusher thread: tallies the clicks of a store and sends the tallies
//! to Redis once per flush interval, one pipeline per node it writes to
//! (the master; in a Redis Cluster, each node serving a slot it writes),
//! all of them at once.
//!
//! A tally is sealed into batches, grouped in lanes (one per slot in a
//! cluster, one for a single Redis) and numbered 1, 2, ... in each. Each
//! batch runs as one Lua script that applies it only after its lane's
//! previous batch, and only once: a batch sent again because its answer
//! was lost finds its number noted and changes nothing, so no click is
//! counted twice. A batch is dropped from memory only once Redis has
//! answered for it. While Redis is away or behind, clicks go on being
//! tallied (more clicks on a link already tallied cost nothing): whole
//! until the tallies hold half the backlog's number of entries, then
//! people's clicks in their counts alone, without details or visitor,
//! until they hold all of it; past it, clicks wait, as taken, in the
//! memory the store's queues are given, and only once that is full too
//! are they dropped and counted as dropped.
//!
//! Every flush seals every link's totals; a link's history (days, hours,
//! minutes, details, visitors) at the first two seals of a round of ten
//! that find it clicked, and then at the round's last, whole seal
//! (`pace`). A link clicked at every flush costs Redis one field a flush,
//! and its history two flushes in ten.
//!
//! Here: the flusher's state and its I/O (the script loaded, the batches
//! sent to the nodes serving their lanes, the answers taken, the heartbeat,
//! the visitor salts); the tally (`tally`), its sealing into batches of
//! script arguments (`encoding`), the batches and what Redis answers for
//! them (`batches`), and the copy of limited links' counts to the links'
//! Redis (`mirror`) are its parts, and `apply_batch.lua` the script.

mod args;
mod batches;
mod carried;
mod encoding;
mod mirror;
mod pace;
mod tally;
mod visits;

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use shortlink_core::clicks::{ClickTime, CountNames, Day, MAX_DETAIL_FIELDS};

use batches::{Answer, Batch, LaneNumbers, SealedTally, Share};
use carried::Carried;
use encoding::BATCH_ARGS;
use pace::Pace;
use tally::Tally;

use crate::clicks::click::{Clicks, Outcome};
use crate::clicks::destination::{lane_of, Destination, Lane, Node};
use crate::clicks::store::{self, ClickStore, CountSettings};
use crate::clicks::visitor::{Agents, Countries};
use crate::now_ms;

/// Applies one batch once, in order. `KEYS[1]` is the hash noting the last
/// batch each flusher applied in this lane, `KEYS[2]...` the keys the
/// operations write. `ARGV[1]` is the flusher's id, `ARGV[2]` the batch's
/// number in its lane, `ARGV[3]` the last number Redis confirmed to the
/// flusher, `ARGV[4]` how long the hash is kept; then operations, each on
/// one key: `letter key-index ttl n` and `n` arguments.
/// `h hash ttl field count...` (`HINCRBY` each), `d hash ttl field count...`
/// (`HINCRBY` each, but on a hash the first field made, which takes the
/// others in one `HSET`: a fresh link's details cost two calls, not one per
/// field; a new field past the hash's limit counts under its kind's `other`
/// instead; the TTL is set anew on every write, so a link's
/// details are kept the days kept past its last click by a person, where
/// a day's counts are kept from that day), `p key ttl element...`
/// (`PFADD`), `l list ttl n bound oldest record...` (a visit list: `LPUSH`
/// the records, oldest first, `LTRIM` to `bound`, `RPOP` records older
/// than `oldest` from the tail, `EXPIRE` `ttl`). One operation per key: a link's clicks share the hashes of
/// its bucket (and the minute's hash, a field per key), so most calls
/// carry many fields.
///
/// Answers 1 when applied, 0 when applied before (a batch sent again after
/// its answer was lost), -1 when the lane's batch before it is not applied
/// yet (it failed in the same pipeline): it is sent again after that one.
/// The batch after the later of the note and the last confirmed number is
/// applied: without a note (a new day's hash), or with one behind what
/// Redis confirmed (a Redis that lost its last writes: a restart, a
/// failover to a replica behind), the counts of those numbers are gone
/// anyway, and waiting for them would stall the lane for good. Applied
/// before, the note is written again, so that a `WAIT` on this connection
/// covers the batch too.
///
/// A key but a details hash gets its TTL (`EXPIRE NX`, none if 0) only when
/// the operation made a field, member or register of it, which it does when
/// it makes the key: on a key that had them all, the `EXPIRE` would change
/// nothing, and a flush of hot links would pay one for every bucket it
/// touches. A details hash is one key per link, not per bucket: one
/// `EXPIRE` per link a flush writes details of.
/// `pcall`: a key of the wrong type (made by hand) spoils its own count,
/// never the rest of the batch.
const APPLY_BATCH: &str = include_str!("apply_batch.lua");

/// How long a lane's note of applied batches is kept: a day past the day
/// of the batches it notes, far longer than a batch is retried for while
/// Redis answers, and short enough that the notes of flushers long gone
/// (every Varnish start makes a flusher) do not pile up.
const APPLIED_KEPT: Duration = Duration::from_hours(48);

/// The flusher's maps: keys, referrers and user agents come from clients,
/// so the hasher is seeded per map, and far cheaper than `SipHash`, which
/// `perf` put at a tenth of the flusher's time on fresh links.
type Map<K, V> = HashMap<K, V, foldhash::quality::RandomState>;
type Set<T> = HashSet<T, foldhash::quality::RandomState>;

/// Most visitors remembered as sealed (see `Flusher::sealed_visitors`):
/// some 10 MB.
const SEALED_VISITORS_MAX: usize = 1 << 20;

/// How long a day's visitor salt lives in Redis.
const SALT_KEPT: Duration = Duration::from_hours(48);

/// Runs the flusher of `store` for the life of the process.
pub fn run(store: &ClickStore) {
    let mut flusher = Flusher::new();
    let mut started = Instant::now();
    loop {
        let settings = store.settings();
        // Flushes start an interval apart, however long the last one took
        // (a slow Redis), so that no click waits in memory, where a crash
        // of the child loses it, longer than an interval and one flush.
        std::thread::sleep(settings.flush_interval.saturating_sub(started.elapsed()));
        started = Instant::now();
        let ticked = crate::without_panic(
            || {
                flusher.tick(store, &settings);
                true
            },
            || false,
        );
        if !ticked {
            // A bug: the flusher's state may be half changed, so it starts
            // afresh, its clicks counted as dropped and those on limited
            // links settled, so that no link stays held at its limit.
            flusher.abandon(store);
            flusher = Flusher::new();
        }
    }
}

struct Flusher {
    id: u64,
    agents: Option<Agents>,
    countries: Option<(String, Result<Countries, String>)>,
    destination: Option<Destination>,
    script: String,
    script_sha: String,
    open: Tally,
    /// When the open tally's links' history is sealed (see [`pace`]).
    pace: Pace,
    /// Clicks taken from the store and not yet tallied, as taken: the
    /// tally takes them from the front while the backlog has room. They still
    /// count in the store's queue bound, so a pipeline behind keeps them
    /// in the memory the queues are given, and drops a click only once
    /// the queues are full too.
    carried: Carried,
    sealed: VecDeque<Batch>,
    lanes: HashMap<Lane, LaneNumbers>,
    tallies: HashMap<u64, SealedTally>,
    next_tally: u64,
    salts: HashMap<Day, String>,
    /// Visitors already sealed for their link and day: adding one to its
    /// `HyperLogLog` again changes nothing, and most clicks on a hot link
    /// are a known visitor's. Hashes of salt, day, key and visitor (a
    /// collision, about one in 10^13 at the bound, leaves one visitor
    /// uncounted); forgotten past [`SEALED_VISITORS_MAX`], and after a new
    /// connection or a failure: the Redis it reaches may have lost them.
    sealed_visitors: Set<u64>,
    /// The last problem copying limited links' totals reported, so that an
    /// outage is logged once, not every second (see [`mirror`]).
    copy_reported: Option<String>,
    reported: Option<String>,
}

impl Flusher {
    fn new() -> Self {
        let script = APPLY_BATCH.replace("MAX_DETAIL_FIELDS", &MAX_DETAIL_FIELDS.to_string());
        Self {
            id: u64::from_le_bytes(random_bytes()[..8].try_into().unwrap_or_default()),
            agents: None,
            countries: None,
            destination: None,
            script_sha: sha1_smol::Sha1::from(&script).digest().to_string(),
            script,
            open: Tally::default(),
            pace: Pace::default(),
            carried: Carried::default(),
            sealed: VecDeque::new(),
            lanes: HashMap::new(),
            tallies: HashMap::new(),
            next_tally: 0,
            salts: HashMap::new(),
            sealed_visitors: Set::default(),
            copy_reported: None,
            reported: None,
        }
    }

    fn tick(&mut self, store: &ClickStore, settings: &CountSettings) {
        let taken = store.take();
        let overflow = store.take_overflow();
        let counters = &store.counters;
        let clicks: usize = taken.iter().map(Clicks::len).sum();
        counters.counted.fetch_add(
            clicks as u64 + overflow.values().sum::<u64>(),
            Ordering::Relaxed,
        );
        self.carried.extend(taken);
        self.tally(settings, store);
        store.recycle(self.carried.take_emptied());
        self.tally_overflow(overflow, store);
        match self.send(store, settings) {
            Ok(()) => self.reported = None,
            Err(error) => {
                counters.flush_failures.fetch_add(1, Ordering::Relaxed);
                if let Some(destination) = &mut self.destination {
                    destination.failed();
                }
                self.sealed_visitors.clear();
                // One line per outage in varnishd's log, not one per second.
                if self.reported.as_ref() != Some(&error) {
                    eprintln!("shortlink: click flush failed, will retry: {error}");
                    self.reported = Some(error);
                }
            }
        }
        let pending = self.open.clicks
            + self.carried.len() as u64
            + self.tallies.values().map(|t| t.clicks).sum::<u64>();
        counters.pending.store(pending, Ordering::Relaxed);
        counters.generation.fetch_add(1, Ordering::Release);
    }

    /// Gives up every click this flusher holds: counted as dropped, and
    /// those on limited links settled.
    fn abandon(&mut self, store: &ClickStore) {
        let mut lost = self.open.clicks + self.carried.len() as u64;
        store.settle(&self.open.limited);
        let mut carried_limited = HashMap::new();
        for click in self.carried.drain() {
            store.release(click.bytes());
            if click.outcome == Outcome::Limited {
                store::add_pending(&mut carried_limited, click.key(), 1);
            }
        }
        store.recycle(self.carried.take_emptied());
        store.settle(&carried_limited);
        self.sealed.clear();
        for (_, tally) in self.tallies.drain() {
            lost += tally.clicks;
            store.settle(&tally.limited);
        }
        store.counters.dropped.fetch_add(lost, Ordering::Relaxed);
    }
    /// Seals the open tally and sends every sealed batch, each lane's in
    /// order, to the node serving it; forgets those Redis applied.
    fn send(&mut self, store: &ClickStore, settings: &CountSettings) -> Result<(), String> {
        let destination = self
            .destination
            .get_or_insert_with(|| Destination::of(store));
        if self.open.is_empty() && self.sealed.is_empty() {
            if !store.waiting_copies().is_empty() {
                // Nothing to send but copies a flush before could not make.
                if destination.prepare(store, settings.flush_timeout(1))? {
                    self.sealed_visitors.clear();
                }
                let problems = self.copy_limits(store)?;
                self.report_copies(problems, store);
            }
            return self.beat(&store.names);
        }
        if destination.prepare(store, settings.flush_timeout(1))? {
            self.sealed_visitors.clear();
        }
        let mut errors = Vec::new();
        if !self.open.is_empty() {
            // Without its salt (its node away), the open tally waits; the
            // batches sealed before still go.
            match self.fetch_salts(&store.names) {
                Ok(()) => {
                    let mut tally = std::mem::take(&mut self.open);
                    self.seal(&mut tally, &store.names, settings);
                    // Empty now but for history waiting (see `pace`), its
                    // map of links still allocated: the next
                    // flush's links fill it without growing it again (growing
                    // a map of thousands of links, each moved, and the fresh
                    // pages faulted in, was a fifth of the flusher's time on
                    // fresh links).
                    self.open = tally;
                }
                Err(error) => errors.push(error),
            }
        }
        // Redis answers a pipeline once it has run all of it.
        let args: usize = self
            .sealed
            .iter()
            .map(|b| b.keys.len() + b.args.len())
            .sum();
        let timeout = settings
            .flush_timeout(args.div_ceil(BATCH_ARGS))
            .saturating_add(settings.command_timeout);
        if let Some(destination) = &mut self.destination {
            destination.arm(timeout)?;
        }
        let (by_node, unserved) = self.group_by_node(&store.names);
        errors.extend(unserved);
        let packed: Vec<Vec<u8>> = (by_node.iter())
            .map(|(_, share)| {
                self.pipeline(share, settings, &store.names)
                    .get_packed_pipeline()
            })
            .collect();
        let destination = self.destination.as_mut().ok_or("no destination")?;
        let mut sent = Vec::with_capacity(by_node.len());
        for ((node, share), packed) in by_node.into_iter().zip(packed) {
            match destination.send(&node, &packed) {
                Ok(()) => sent.push((node, share)),
                Err(error) => errors.push(error),
            }
        }
        let mut applied = vec![false; self.sealed.len()];
        let mut waiting = false;
        for (node, share) in sent {
            let replies = share.replies(settings);
            let answer = destination.receive(&node, replies).and_then(|replies| {
                // The map follows any MOVED, the heartbeat's included.
                destination.take_redirects(&node, &replies);
                share.outcome(replies, &self.script_sha, settings)
            });
            match answer {
                Ok(outcome) => {
                    for (&batch, result) in share.batches.iter().zip(outcome) {
                        match result {
                            Answer::Applied => applied[batch] = true,
                            Answer::Waiting => waiting = true,
                            Answer::Refused(error) => errors.push(error),
                        }
                    }
                }
                Err(error) => errors.push(error),
            }
        }
        self.forget_applied(&applied, store);
        match self.copy_limits(store) {
            Ok(problems) => self.report_copies(problems, store),
            Err(error) => errors.push(error),
        }
        if waiting && errors.is_empty() {
            // Not seen: the lane's earlier batch went nowhere this time.
            errors.push("click batches wait for earlier ones of their lane".to_owned());
        }
        match errors.into_iter().next() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// The sealed batches grouped by the node serving their lane, each
    /// lane's in order, and the heartbeat with the node serving it; and why
    /// the batches of lanes no node serves wait.
    fn group_by_node(&mut self, names: &CountNames) -> (Vec<(Node, Share)>, Vec<String>) {
        let mut by_node: Vec<(Node, Share)> = Vec::new();
        let mut errors = Vec::new();
        let Some(destination) = self.destination.as_mut() else {
            return (by_node, vec!["no destination".to_owned()]);
        };
        let share_of = |node: Node, by_node: &mut Vec<(Node, Share)>| {
            if let Some(index) = by_node.iter().position(|(known, _)| *known == node) {
                index
            } else {
                by_node.push((node, Share::default()));
                by_node.len() - 1
            }
        };
        for (index, batch) in self.sealed.iter().enumerate() {
            match destination.node_of(batch.lane) {
                Ok(node) => {
                    let share = share_of(node, &mut by_node);
                    by_node[share].1.batches.push(index);
                }
                Err(error) => errors.push(error),
            }
        }
        let heartbeat = names.flushers();
        if let Ok(node) = destination.node_of(lane_of(names.layout(), &heartbeat)) {
            let share = share_of(node, &mut by_node);
            by_node[share].1.beat = true;
        }
        (by_node, errors)
    }

    /// What is written to a node: the script (loaded anew each time: a node
    /// restarted or new to the cluster has none), its batches, the `WAIT`
    /// for replicas, the heartbeat.
    fn pipeline(
        &self,
        share: &Share,
        settings: &CountSettings,
        names: &CountNames,
    ) -> redis::Pipeline {
        let flusher = format!("{:016x}", self.id);
        let mut pipe = redis::pipe();
        pipe.cmd("SCRIPT").arg("LOAD").arg(&self.script);
        for &index in &share.batches {
            let batch = &self.sealed[index];
            let applied = self.lanes.get(&batch.lane).map_or(0, |lane| lane.applied);
            pipe.cmd("EVALSHA")
                .arg(&self.script_sha)
                .arg(batch.keys.len() + 1)
                .arg(&batch.applied)
                .arg(&batch.keys)
                .arg(&flusher)
                .arg(batch.seq)
                .arg(applied)
                .arg(APPLIED_KEPT.as_secs())
                .arg(&batch.args);
        }
        // The batches count as stored once replicas hold them too; until
        // then they are sent again, and Redis applies each batch once.
        if settings.replicas_to_ack > 0 && !share.batches.is_empty() {
            let wait = settings.command_timeout;
            pipe.cmd("WAIT")
                .arg(settings.replicas_to_ack)
                .arg(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1));
        }
        if share.beat {
            pipe.cmd("HSET")
                .arg(names.flushers())
                .arg(&flusher)
                .arg(now_ms());
        }
        pipe
    }

    /// Drops the batches Redis applied, and counts each tally all of whose
    /// batches it applied as flushed.
    fn forget_applied(&mut self, applied: &[bool], store: &ClickStore) {
        let mut flushed = 0;
        let lanes = &mut self.lanes;
        let tallies = &mut self.tallies;
        let mut index = 0;
        self.sealed.retain(|batch| {
            let done = applied.get(index).copied().unwrap_or(false);
            index += 1;
            if !done {
                return true;
            }
            let lane = lanes.entry(batch.lane).or_default();
            lane.applied = lane.applied.max(batch.seq);
            if let Some(tally) = tallies.get_mut(&batch.tally) {
                tally.batches = tally.batches.saturating_sub(1);
            }
            false
        });
        let mut stored_limited = Vec::new();
        tallies.retain(|_, tally| {
            if tally.batches > 0 {
                return true;
            }
            flushed += tally.clicks;
            stored_limited.push(std::mem::take(&mut tally.limited));
            false
        });
        for limited in &stored_limited {
            store.stored_limited(limited);
        }
        store.counters.flushed.fetch_add(flushed, Ordering::Relaxed);
    }

    /// Notes that this flusher, with nothing to send, still reaches Redis,
    /// on the way it has: an idle Varnish is not a lagging one.
    fn beat(&mut self, names: &CountNames) -> Result<(), String> {
        let Some(destination) = self.destination.as_mut().filter(|d| d.is_connected()) else {
            return Ok(());
        };
        let heartbeat = names.flushers();
        let mut pipe = redis::pipe();
        pipe.cmd("HSET")
            .arg(&heartbeat)
            .arg(format!("{:016x}", self.id))
            .arg(now_ms());
        let replies = destination.exchange(lane_of(names.layout(), &heartbeat), &pipe, 1)?;
        match replies.first() {
            Some(redis::Value::ServerError(error)) => Err(format!("heartbeat: {error:?}")),
            _ => Ok(()),
        }
    }

    /// The salt of every day the open tally has visitors for.
    fn fetch_salts(&mut self, names: &CountNames) -> Result<(), String> {
        let days: HashSet<Day> = (self.open.links.values())
            .flat_map(|link| link.visitors.iter().map(|(day, _)| *day))
            .collect();
        let destination = self.destination.as_mut().ok_or("no destination")?;
        for day in days {
            if self.salts.contains_key(&day) {
                continue;
            }
            let name = names.visitor_salt(day);
            let fresh = hex(&random_bytes());
            let mut pipe = redis::pipe();
            pipe.cmd("SET")
                .arg(&name)
                .arg(&fresh)
                .arg("NX")
                .arg("GET")
                .arg("EX")
                .arg(SALT_KEPT.as_secs());
            let replies = destination.exchange(lane_of(names.layout(), &name), &pipe, 1)?;
            // The salt set before, or, if none was, this one.
            let salt = match replies.into_iter().next() {
                Some(redis::Value::Nil) => fresh,
                Some(value) => redis::from_redis_value::<String>(value)
                    .map_err(|e| format!("reading the visitor salt: {e}"))?,
                None => return Err("no answer for the visitor salt".into()),
            };
            self.salts.insert(day, salt);
        }
        // Yesterday's salt may still be needed for late clicks; older ones not.
        let today = ClickTime::now();
        let oldest = today.before(86_400).day();
        self.salts.retain(|day, _| *day >= oldest);
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// 16 bytes from the system's random source (never fails on Linux; the
/// time stands in if it somehow does).
fn random_bytes() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = (nanos ^ u128::from(std::process::id())).to_le_bytes();
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clicks::click::Click;
    use crate::clicks::store::Reach;
    use shortlink_core::clicks::Layout;
    use shortlink_core::KeyScheme;
    use std::collections::BTreeMap;
    use std::net::IpAddr;

    pub(super) const FIREFOX: &str =
        "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

    /// Tallies copies of `clicks` as the flusher takes them from `store`:
    /// held in its queues' bound, waiting, then tallied while there is room.
    pub(super) fn tally_clicks(
        flusher: &mut Flusher,
        clicks: &[Click<'_>],
        store: &ClickStore,
    ) -> usize {
        store.hold(clicks);
        flusher
            .carried
            .extend([clicks.iter().copied().collect::<Clicks>()]);
        flusher.tally(&store.settings(), store)
    }

    pub(super) fn click(key: &str, client: u8) -> Click<'_> {
        let address = IpAddr::from([192, 0, 2, client]);
        Click::new(
            Outcome::Redirect,
            false,
            Some(address),
            key,
            FIREFOX,
            None,
            None,
        )
        .unwrap()
    }

    /// A pipeline behind (here Redis away) keeps the clicks its backlog
    /// has no room for in the queues' memory, pending, and drops a click
    /// only once the queues are full too.
    #[test]
    fn clicks_past_the_backlog_wait_in_the_queues_bound() {
        let store = ClickStore::detached(100);
        let mut settings = store.settings();
        settings.queue_bytes = 300 * click("Key000", 1).bytes();
        store.set(settings.clone(), None);
        for n in 0..300 {
            store.record(&click(&format!("Key{n:03}"), 1));
        }
        let mut flusher = Flusher::new();
        let counter = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        for _ in 0..2 {
            flusher.tick(&store, &settings);
            let counters = &store.counters;
            assert_eq!(counter(&counters.dropped), 0);
            assert_eq!(counter(&counters.counted), 300);
            assert_eq!(counter(&counters.pending), 300, "tallied or waiting");
            assert!(flusher.carried.len() > 200, "a backlog of 100 entries");
        }
        // The waiting clicks still hold the queues' memory; the tallied
        // ones left room for as many.
        let tallied = 300 - flusher.carried.len() as u64;
        for n in 300..600 {
            store.record(&click(&format!("Key{n:03}"), 1));
        }
        assert_eq!(counter(&store.counters.dropped), 300 - tallied);
    }

    /// The script against a real Redis: each lane's batches are applied in
    /// order and once, whatever order and however often they arrive.
    #[test]
    fn the_script_applies_a_lane_in_order_and_once() {
        let dir = test_support::work_dir("flush-script").unwrap();
        let redis =
            test_support::Redis::start(&dir, test_support::Persistence::Scratch, "").unwrap();
        let mut connection = redis.connection().unwrap();
        let flusher = Flusher::new();
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(&flusher.script)
            .query(&mut connection)
            .unwrap();
        assert_eq!(sha, flusher.script_sha);
        let mut apply = |applied: &str, seq: u64, confirmed: u64| -> i64 {
            redis::cmd("EVALSHA")
                .arg(&sha)
                .arg(2)
                .arg(applied)
                .arg("short:clicks:Lm")
                .arg("cafe")
                .arg(seq)
                .arg(confirmed)
                .arg(APPLIED_KEPT.as_secs())
                .arg(&["h", "2", "0", "2", "25", "1"])
                .query(&mut connection)
                .unwrap()
        };
        let today = "short:applied:20261124";
        assert_eq!(apply(today, 2, 0), -1, "the first batch is not in yet");
        assert_eq!(apply(today, 1, 0), 1);
        assert_eq!(apply(today, 1, 0), 0, "sent again after a lost answer");
        assert_eq!(apply(today, 3, 0), -1, "the second is not in yet");
        assert_eq!(apply(today, 2, 0), 1);
        // A new day's note starts after the last batch Redis confirmed.
        let tomorrow = "short:applied:20261125";
        assert_eq!(apply(tomorrow, 4, 2), -1);
        assert_eq!(apply(tomorrow, 3, 2), 1);
        // A note behind what Redis confirmed (it lost its last writes):
        // the lane goes on after the confirmed number, not stalled.
        assert_eq!(apply(today, 6, 5), 1);
        assert_eq!(apply(today, 7, 5), 1);
        assert_eq!(apply(today, 6, 5), 0);
        let mut connection = redis.connection().unwrap();
        let clicks: u64 = redis::cmd("HGET")
            .arg("short:clicks:Lm")
            .arg("25")
            .query(&mut connection)
            .unwrap();
        assert_eq!(clicks, 5, "five batches, each applied once");
        let kept: u64 = redis::cmd("TTL").arg(today).query(&mut connection).unwrap();
        assert!(kept > 0 && kept <= APPLIED_KEPT.as_secs(), "{kept}");
        drop(redis);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A link's details hash made by a flush is set in one call (the
    /// first field's answer shows the hash is new), and holds what adding
    /// each field in turn would: on a new hash, on one with fields made
    /// before (by hand, or an earlier flush), and past the hash's bound,
    /// where no count is lost.
    #[test]
    fn a_new_details_hash_counts_as_field_by_field() {
        let dir = test_support::work_dir("flush-details").unwrap();
        let redis =
            test_support::Redis::start(&dir, test_support::Persistence::Scratch, "").unwrap();
        let mut connection = redis.connection().unwrap();
        let flusher = Flusher::new();
        let mut seq = 0;
        let mut apply = |key: &str, pairs: &[(&str, u64)]| {
            seq += 1;
            let mut args = vec![
                "d".to_owned(),
                "2".to_owned(),
                "3600".to_owned(),
                (2 * pairs.len()).to_string(),
            ];
            for (field, n) in pairs {
                args.extend([(*field).to_owned(), n.to_string()]);
            }
            let applied: i64 = redis::cmd("EVAL")
                .arg(&flusher.script)
                .arg(2)
                .arg("short:applied:20261124")
                .arg(key)
                .arg("cafe")
                .arg(seq)
                .arg(0)
                .arg(APPLIED_KEPT.as_secs())
                .arg(&args)
                .query(&mut connection)
                .unwrap();
            assert_eq!(applied, 1);
            let hash: BTreeMap<String, u64> = redis::cmd("HGETALL")
                .arg(key)
                .query(&mut connection)
                .unwrap();
            let ttl: i64 = redis::cmd("TTL").arg(key).query(&mut connection).unwrap();
            assert!(ttl > 0 && ttl <= 3600, "{key} kept {ttl} s");
            hash
        };
        let counts = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            pairs.iter().map(|(f, n)| ((*f).to_owned(), *n)).collect()
        };
        let new = [("referrer:a", 1), ("browser:b", 2), ("os:c", 3)];
        assert_eq!(apply("short:details:Lm25", &new), counts(&new));
        let calls: String = redis.query(&["INFO", "commandstats"]).unwrap();
        // (The other field's `HSET` shares its count with the batch's note.)
        assert!(
            calls.contains("cmdstat_hincrby:calls=1,"),
            "one HINCRBY and an HSET made the hash: {calls}"
        );
        assert_eq!(
            apply("short:details:Lm25", &[("referrer:a", 1), ("device:d", 4)]),
            counts(&[
                ("referrer:a", 2),
                ("browser:b", 2),
                ("os:c", 3),
                ("device:d", 4)
            ])
        );
        let mut hand = redis.connection().unwrap();
        let _: () = redis::cmd("HSET")
            .arg("short:details:Lm26")
            .arg("country:x")
            .arg(5)
            .query(&mut hand)
            .unwrap();
        assert_eq!(
            apply("short:details:Lm26", &[("referrer:a", 1), ("os:c", 1)]),
            counts(&[("country:x", 5), ("referrer:a", 1), ("os:c", 1)])
        );
        let many: Vec<String> = (0..MAX_DETAIL_FIELDS + 10)
            .map(|n| format!("referrer:h{n}"))
            .collect();
        let pairs: Vec<(&str, u64)> = many.iter().map(|f| (f.as_str(), 2)).collect();
        let bounded = apply("short:details:Lm27", &pairs);
        assert!(bounded.len() <= MAX_DETAIL_FIELDS + 1, "{}", bounded.len());
        assert_eq!(bounded.values().sum::<u64>(), 2 * pairs.len() as u64);
        assert_eq!(
            bounded["referrer:other"],
            2 * 10,
            "the fields past the bound"
        );
        drop(redis);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The clicks' Redis as `redis/clicks.conf` ships it, full: a flush
    /// still stores every click in the totals (which click limits read),
    /// because the policy makes room by evicting history, keys with a TTL,
    /// never a total. (`noeviction` refused every flush once full.)
    #[test]
    fn a_full_clicks_redis_evicts_history_not_totals() {
        let shipped = include_str!("../../../../redis/clicks.conf");
        let policy = shipped
            .lines()
            .find(|line| line.starts_with("maxmemory-policy "))
            .expect("redis/clicks.conf sets a maxmemory-policy");
        let dir = test_support::work_dir("flush-full").unwrap();
        let redis =
            test_support::Redis::start(&dir, test_support::Persistence::Scratch, policy).unwrap();
        // Old days' buckets, 4 MB of them, last written a day ago (as
        // `RESTORE ... IDLETIME` makes them), then no room for anything more.
        let _: () = redis
            .query(&[
                "EVAL",
                "redis.call('HSET', 'template', 'k', string.rep('x', 1000)) \
                 local dump = redis.call('DUMP', 'template') \
                 redis.call('DEL', 'template') \
                 for i = 1, 4000 do \
                 redis.call('RESTORE', 'short:day:20250101:' .. i, 86400000, dump, \
                 'IDLETIME', 86400) end",
                "0",
            ])
            .unwrap();
        let info = |section: &str, field: &str| -> u64 {
            let text: String = redis.query(&["INFO", section]).unwrap();
            text.lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|n| n.trim().parse().ok())
                .unwrap()
        };
        let used = info("memory", "used_memory").to_string();
        let _: () = redis.query(&["CONFIG", "SET", "maxmemory", &used]).unwrap();
        let mut settings = ClickStore::detached(1_000_000).settings();
        settings.command_timeout = Duration::from_secs(2);
        let reach = Reach::Master(
            redis_target::Locator::open(&redis.url, settings.redis_timeouts()).unwrap(),
        );
        let names = CountNames::new(&KeyScheme::default(), Layout::Plain).unwrap();
        let store = ClickStore::new(&redis.url, reach, names, settings.clone(), None);
        let letters: Vec<char> = ('a'..='z').chain('A'..='Z').collect();
        for n in 0..2000 {
            let key = format!("{}{}Key", letters[n % 52], letters[n / 52 % 52]);
            let client = IpAddr::from([192, 0, 2, u8::try_from(n % 250).unwrap()]);
            let referrer = format!("r{n}.example");
            store.record(
                &Click::new(
                    Outcome::Redirect,
                    false,
                    Some(client),
                    &key,
                    FIREFOX,
                    Some(&referrer),
                    None,
                )
                .unwrap(),
            );
        }
        let mut flusher = Flusher::new();
        flusher.tick(&store, &settings);
        let stored: u64 = redis
            .query(&[
                "EVAL",
                "local n = 0 for _, hash in ipairs(redis.call('KEYS', 'short:clicks:*')) do \
                 for _, v in ipairs(redis.call('HVALS', hash)) do n = n + tonumber(v) end end \
                 return n",
                "0",
            ])
            .unwrap();
        assert_eq!(
            store.counters.flush_failures.load(Ordering::Relaxed),
            0,
            "a full Redis refused the flush"
        );
        assert_eq!(stored, 2000, "every click in the totals");
        assert!(
            info("stats", "evicted_keys") > 0,
            "room was made by evicting old buckets"
        );
        drop(redis);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The whole flush against a real Redis: many flushes of clicks on many
    /// links, one of them cut short by Redis hanging past the flush's
    /// timeout (so Redis runs batches whose answers are lost), add up to
    /// exactly the clicks recorded.
    #[test]
    fn every_recorded_click_is_stored_once() {
        let dir = test_support::work_dir("flush-exact").unwrap();
        let redis =
            test_support::Redis::start(&dir, test_support::Persistence::Scratch, "").unwrap();
        let mut settings = ClickStore::detached(1_000_000).settings();
        settings.flush_interval = Duration::from_millis(100);
        settings.command_timeout = Duration::from_millis(100);
        let reach = Reach::Master(
            redis_target::Locator::open(&redis.url, settings.redis_timeouts()).unwrap(),
        );
        let names = CountNames::new(&KeyScheme::default(), Layout::Plain).unwrap();
        let store = ClickStore::new(&redis.url, reach, names, settings.clone(), None);
        let letters: Vec<char> = ('a'..='z').chain('A'..='Z').collect();
        let mut flusher = Flusher::new();
        let mut recorded = 0u64;
        for round in 0..12 {
            for n in 0..1000 {
                let key = format!("{}{}Key", letters[n % 52], letters[(n / 52 + round) % 52]);
                let agent = if n % 3 == 0 { "curl/8.0" } else { FIREFOX };
                let client = IpAddr::from([192, 0, 2, u8::try_from(n % 250).unwrap()]);
                store.record(
                    &Click::new(
                        Outcome::Redirect,
                        false,
                        Some(client),
                        &key,
                        agent,
                        None,
                        None,
                    )
                    .unwrap(),
                );
                recorded += 1;
            }
            if round == 5 {
                // Redis stops past the flush's timeout (about a second for
                // these batches), then runs what it was sent.
                redis.hang().unwrap();
                let revive = std::thread::spawn(|| std::thread::sleep(Duration::from_secs(2)));
                flusher.tick(&store, &settings);
                revive.join().unwrap();
                redis.revive().unwrap();
            } else {
                flusher.tick(&store, &settings);
            }
        }
        for _ in 0..5 {
            flusher.tick(&store, &settings);
        }
        let stored: u64 = redis
            .query(&[
                "EVAL",
                "local n = 0 for _, pattern in ipairs({'short:clicks:*', 'short:bots:*'}) do \
                 for _, hash in ipairs(redis.call('KEYS', pattern)) do \
                 for _, v in ipairs(redis.call('HVALS', hash)) do n = n + tonumber(v) end end end \
                 return n",
                "0",
            ])
            .unwrap();
        let counters = &store.counters;
        assert!(
            counters.flush_failures.load(Ordering::Relaxed) > 0,
            "the hang failed a flush"
        );
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 0);
        assert_eq!(counters.flushed.load(Ordering::Relaxed), recorded);
        assert_eq!(stored, recorded, "stored once each");
        drop(redis);
        let _ = std::fs::remove_dir_all(dir);
    }
}
