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
//! answered for it. While Redis is away, clicks go on being tallied (more
//! clicks on a link already tallied cost nothing) until the tallies hold
//! the backlog's number of entries; past it, clicks are dropped and counted
//! as dropped.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::BuildHasher as _;
use std::io::Read as _;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redis_target::cluster::slot_tag;
use shortlink_core::clicks::{
    ClickTime, CountNames, Day, Detail, Hour, Minute, Total, MAX_DETAIL_FIELDS, MINUTES_KEPT,
};
use shortlink_core::{Key, KeyScheme};

use crate::clicks::destination::{lane_of, Destination, Lane, Node};
use crate::clicks::visitor::{Agent, Agents, Countries};
use crate::clicks::{add_pending, subtract_pending, Click, ClickStore, CountSettings, Outcome};
use crate::now_ms;

/// Applies one batch once, in order. `KEYS[1]` is the hash noting the last
/// batch each flusher applied in this lane, `KEYS[2]...` the keys the
/// operations write. `ARGV[1]` is the flusher's id, `ARGV[2]` the batch's
/// number in its lane, `ARGV[3]` the last number Redis confirmed to the
/// flusher, `ARGV[4]` how long the hash is kept; then operations, each on
/// one key: `letter key-index ttl n` and `n` arguments.
/// `h hash ttl field count...` (`HINCRBY` each), `d hash ttl field count...`
/// (`HINCRBY` each; a new field past the hash's limit counts under its
/// kind's `other` instead; the TTL is set anew on every write, so a link's
/// details are kept the days kept past its last click by a person, where
/// a day's counts are kept from that day), `z set ttl member count...` (`ZINCRBY` each),
/// `p key ttl element...` (`PFADD`). One operation per key: a link's clicks
/// share the hashes of its bucket, so most calls carry many fields.
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
const APPLY_BATCH: &str = r"
local seq = tonumber(ARGV[2])
local noted = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '')
if noted and seq <= noted then
  redis.call('HSET', KEYS[1], ARGV[1], noted)
  return 0
end
if seq > math.max(noted or 0, tonumber(ARGV[3])) + 1 then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if not noted then redis.pcall('EXPIRE', KEYS[1], ARGV[4], 'NX') end
local i = 5
while i <= #ARGV do
  local op, key, ttl = ARGV[i], KEYS[tonumber(ARGV[i+1])], ARGV[i+2]
  local first, last = i + 4, i + 3 + tonumber(ARGV[i+3])
  -- Whether a field, member or register was made (an answer equal to the
  -- count added is a new field's).
  local made = false
  if op == 'h' then
    for j = first, last, 2 do
      local n = tonumber(ARGV[j+1])
      if redis.pcall('HINCRBY', key, ARGV[j], n) == n then made = true end
    end
  elseif op == 'd' then
    local fields
    for j = first, last, 2 do
      local field, n = ARGV[j], tonumber(ARGV[j+1])
      if redis.pcall('HINCRBY', key, field, n) == n then
        -- A new field: counted, unless it made the hash too large.
        if fields then fields = fields + 1 else fields = redis.pcall('HLEN', key) end
        if type(fields) ~= 'number' then fields = 0 end
        if fields > MAX_DETAIL_FIELDS then
          redis.pcall('HDEL', key, field)
          local other = string.match(field, '^[^:]*') .. ':other'
          if redis.pcall('HINCRBY', key, other, n) ~= n then fields = fields - 1 end
        end
      end
    end
    if ttl ~= '0' then redis.pcall('EXPIRE', key, ttl) end
  elseif op == 'z' then
    for j = first, last, 2 do
      local n = tonumber(ARGV[j+1])
      if tonumber(redis.pcall('ZINCRBY', key, n, ARGV[j])) == n then made = true end
    end
  elseif op == 'p' then
    made = redis.pcall('PFADD', key, unpack(ARGV, first, last)) == 1
  else
    return redis.error_reply('unknown operation ' .. tostring(op))
  end
  if made and ttl ~= '0' then redis.pcall('EXPIRE', key, ttl, 'NX') end
  i = last + 1
end
return 1
";

/// How long a lane's note of applied batches is kept: a day past the day
/// of the batches it notes, far longer than a batch is retried for while
/// Redis answers, and short enough that the notes of flushers long gone
/// (every Varnish start makes a flusher) do not pile up.
const APPLIED_KEPT: Duration = Duration::from_hours(48);

/// Arguments per script call: small enough that no call holds Redis long
/// (calls of 4,000 took up to 38 ms in Redis's `SLOWLOG` on the saturated
/// 2-core bench machine), and large enough that calls are few: Redis syncs
/// its append-only file after each, and fresh links' clicks cost it 30 to
/// 33 µs of CPU each in calls of 4,000, 36 to 50 µs in calls of 1,000.
const BATCH_ARGS: usize = 4000;

/// Arguments of a call besides its operations' (`KEYS[1]`, `ARGV[1..4]`).
const CALL_ARGS: usize = 5;

/// Arguments of one operation within a call: Lua's `unpack` (of a
/// `PFADD`'s elements) takes far more.
const OP_ARGS: usize = 1000;
const _: () = assert!(OP_ARGS <= BATCH_ARGS);

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

/// Clicks waiting to be sealed, gathered per link: a click costs one
/// lookup of its key, and more clicks on a link add to its counts instead
/// of making entries.
#[derive(Default)]
struct Tally {
    clicks: u64,
    /// Fields and visitors the tally will write: what the backlog bounds.
    entries: usize,
    /// Kept allocated from one flush to the next (see [`Flusher::seal`]).
    links: Map<Key, LinkTally>,
    names: Names,
    /// Clicks on links with a click limit, pending in the store until
    /// their batch is stored.
    limited: HashMap<Box<str>, u64>,
}

/// Where people's clicks came from, as a tally numbers them: agent,
/// referrer host and country.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Source {
    agent: u32,
    referrer: u32,
    /// [`NO_COUNTRY`] when not known.
    country: u32,
}

const NO_COUNTRY: u32 = u32::MAX;

impl Source {
    /// How many detail fields a click from here counts in.
    fn fields(self) -> usize {
        if self.country == NO_COUNTRY {
            4
        } else {
            5
        }
    }
}

/// The agents, referrer hosts and countries of a tally's clicks, each
/// numbered once: a person's click adds to its link's count of a
/// [`Source`], three numbers, where counting each detail under its field
/// name took four names written and looked up per click (`perf`: two
/// thirds of the flusher's time on hot links, with the visitor's digest).
#[derive(Default)]
struct Names {
    /// Held so that their addresses, which number them, stay theirs.
    agents: Vec<Rc<Agent>>,
    agent_numbers: Map<usize, u32>,
    referrers: Numbered,
    countries: Numbered,
}

impl Names {
    /// The source of a click by `agent` from `referrer` and `country`.
    fn source(&mut self, agent: &Rc<Agent>, referrer: &str, country: Option<&str>) -> Source {
        let next = self.agents.len();
        let agent = *self
            .agent_numbers
            .entry(Rc::as_ptr(agent) as usize)
            .or_insert_with(|| {
                self.agents.push(Rc::clone(agent));
                u32::try_from(next).unwrap_or(u32::MAX)
            });
        let referrer = self.referrers.number(referrer);
        let country = country.map_or(NO_COUNTRY, |country| self.countries.number(country));
        Source {
            agent,
            referrer,
            country,
        }
    }

    fn agent(&self, number: u32) -> &Agent {
        &self.agents[number as usize]
    }

    /// The detail fields `source` counts in, as kind and value.
    fn details(&self, source: Source) -> impl Iterator<Item = (Detail, &str)> {
        let agent = self.agent(source.agent);
        let country = (source.country != NO_COUNTRY)
            .then(|| (Detail::Country, self.countries.name(source.country)));
        [
            (Detail::Referrer, self.referrers.name(source.referrer)),
            (Detail::Device, agent.device),
            (Detail::Browser, agent.browser.as_str()),
            (Detail::Os, agent.os.as_str()),
        ]
        .into_iter()
        .chain(country)
    }

    /// Forgets every name, keeping the room they took.
    fn clear(&mut self) {
        self.agents.clear();
        self.agent_numbers.clear();
        self.referrers.clear();
        self.countries.clear();
    }
}

/// Names numbered in the order they were first seen.
#[derive(Default)]
struct Numbered {
    numbers: Map<Box<str>, u32>,
    names: Vec<Box<str>>,
}

impl Numbered {
    fn number(&mut self, name: &str) -> u32 {
        if let Some(number) = self.numbers.get(name) {
            return *number;
        }
        let number = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(name.into());
        self.numbers.insert(name.into(), number);
        number
    }

    fn name(&self, number: u32) -> &str {
        self.names.get(number as usize).map_or("", |name| &**name)
    }

    fn clear(&mut self) {
        self.numbers.clear();
        self.names.clear();
    }
}

impl Tally {
    fn is_empty(&self) -> bool {
        self.clicks == 0
    }
}

/// The tally of the link `text` names; `None` if the scheme refuses it.
/// A key already tallied is found by its text, neither checked nor copied.
fn link_of<'t>(
    links: &'t mut Map<Key, LinkTally>,
    text: &str,
    scheme: &KeyScheme,
) -> Option<&'t mut LinkTally> {
    if !links.contains_key(text) {
        links.insert(scheme.key(text).ok()?, LinkTally::default());
    }
    links.get_mut(text)
}

/// One link's share of a tally. A tally spans a flush interval (longer
/// only while Redis is away), so it holds a day, an hour and a minute or
/// two per link: short lists, searched from the newest.
#[derive(Default)]
struct LinkTally {
    /// In [`Total::ALL`]'s order.
    totals: [u64; Total::ALL.len()],
    days: Vec<(Day, u64)>,
    hours: Vec<(Hour, u64)>,
    minutes: Vec<(Minute, u64)>,
    /// People's clicks by source: one map, empty and unallocated for bots
    /// and gone answers, keeps the tally small, and the map of links cheap
    /// to grow.
    sources: Map<Source, u64>,
    /// People by address and agent (numbered in [`Names`]); hashed and
    /// salted when sealed.
    visitors: Vec<(Day, Set<(IpAddr, u32)>)>,
}

impl LinkTally {
    /// A click that adds to one of the link's totals only: a bot's, or an
    /// answer after expiry or deletion.
    fn add_total(&mut self, total: Total, entries: &mut usize) {
        let count = &mut self.totals[total_slot(total)];
        *entries += usize::from(*count == 0);
        *count += 1;
    }

    /// A person's click at `at` from `source`, from `client` if the
    /// address is known.
    fn add_person(
        &mut self,
        at: ClickTime,
        source: Source,
        client: Option<IpAddr>,
        entries: &mut usize,
    ) {
        let day = at.day();
        self.add_total(Total::People, entries);
        add_dated(&mut self.days, day, entries);
        add_dated(&mut self.hours, at.hour(), entries);
        add_dated(&mut self.minutes, at.minute(), entries);
        let count = self.sources.entry(source).or_default();
        if *count == 0 {
            // At most this many new fields: what the backlog bounds.
            *entries += source.fields();
        }
        *count += 1;
        if let Some(client) = client {
            let index = self
                .visitors
                .iter()
                .rposition(|(known, _)| *known == day)
                .unwrap_or_else(|| {
                    self.visitors.push((day, Set::default()));
                    self.visitors.len() - 1
                });
            *entries += usize::from(self.visitors[index].1.insert((client, source.agent)));
        }
    }
}

/// Adds a click to the count of `at`, a new entry if `at` has none yet.
fn add_dated<T: PartialEq>(counts: &mut Vec<(T, u64)>, at: T, entries: &mut usize) {
    if let Some((_, count)) = counts.iter_mut().rev().find(|(known, _)| *known == at) {
        *count += 1;
    } else {
        counts.push((at, 1));
        *entries += 1;
    }
}

const fn total_slot(total: Total) -> usize {
    match total {
        Total::People => 0,
        Total::Bots => 1,
        Total::Gone => 2,
    }
}

/// Address and user agent, hashed; salted with the day's salt before it
/// leaves the process, so Redis never holds anything an address can be
/// read back from.
fn visitor_digest(client: IpAddr, user_agent: &str) -> [u8; 20] {
    let mut hash = sha1_smol::Sha1::new();
    match client {
        IpAddr::V4(v4) => hash.update(&v4.octets()),
        IpAddr::V6(v6) => hash.update(&v6.octets()),
    }
    hash.update(b"\0");
    hash.update(user_agent.as_bytes());
    hash.digest().bytes()
}

/// What the flush script does with one Redis key (see [`APPLY_BATCH`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Letter {
    Hash,
    Details,
    SortedSet,
    Visitors,
}

impl Letter {
    fn name(self) -> &'static str {
        match self {
            Self::Hash => "h",
            Self::Details => "d",
            Self::SortedSet => "z",
            Self::Visitors => "p",
        }
    }

    /// Arguments per entry: a field (or member) and its count, or one
    /// element.
    fn width(self) -> usize {
        match self {
            Self::Hash | Self::SortedSet | Self::Details => 2,
            Self::Visitors => 1,
        }
    }
}

/// A sealed tally's operations, one per Redis key.
#[derive(Default)]
struct Ops {
    by_key: Map<String, Op>,
}

struct Op {
    letter: Letter,
    /// The TTL in seconds, `0` for none.
    ttl: String,
    args: Vec<String>,
}

impl Ops {
    fn get(&mut self, letter: Letter, key: String, ttl: &str) -> &mut Op {
        self.by_key.entry(key).or_insert_with(|| Op {
            letter,
            ttl: ttl.to_owned(),
            args: Vec::new(),
        })
    }

    fn pair(&mut self, letter: Letter, key: String, ttl: &str, field: &str, n: u64) {
        let op = self.get(letter, key, ttl);
        op.args.push(field.to_owned());
        op.args.push(n.to_string());
    }
}

/// A sealed batch: sent as it is until Redis answers for it.
struct Batch {
    lane: Lane,
    /// Its number in its lane, from 1: Redis applies a lane's batches in
    /// this order, each once.
    seq: u64,
    /// The hash noting the lane's last applied batch (`KEYS[1]`).
    applied: String,
    /// The keys its operations write (`KEYS[2]...`).
    keys: Vec<String>,
    args: Vec<String>,
    entries: usize,
    /// The tally it was sealed from.
    tally: u64,
}

/// A sealed tally: its clicks count as flushed, and its limited clicks are
/// settled, once Redis has applied all its batches.
struct SealedTally {
    batches: usize,
    clicks: u64,
    limited: HashMap<Box<str>, u64>,
}

/// A lane's numbers: the last batch sealed, and the last Redis applied.
#[derive(Default, Clone, Copy)]
struct LaneNumbers {
    sealed: u64,
    applied: u64,
}

/// A node's share of a flush: batches (indices into the sealed ones), and
/// whether the heartbeat goes there too.
#[derive(Default)]
struct Share {
    batches: Vec<usize>,
    beat: bool,
}

/// What Redis said of one batch.
enum Answer {
    /// Applied now, or before.
    Applied,
    /// Its lane's batch before it is not applied yet: sent again after it.
    Waiting,
    /// Not applied, for this reason (a `MOVED` among them: the slot map
    /// follows it, and the batch goes to the new node next time).
    Refused(String),
}

impl Share {
    fn waits(&self, settings: &CountSettings) -> bool {
        settings.replicas_to_ack > 0 && !self.batches.is_empty()
    }

    /// Replies to [`Flusher::pipeline`] of this share.
    fn replies(&self, settings: &CountSettings) -> usize {
        1 + self.batches.len() + usize::from(self.waits(settings)) + usize::from(self.beat)
    }

    /// What a node's replies say of each batch.
    fn outcome(
        &self,
        replies: Vec<redis::Value>,
        script_sha: &str,
        settings: &CountSettings,
    ) -> Result<Vec<Answer>, String> {
        let mut replies = replies.into_iter();
        let loaded = replies
            .next()
            .map(redis::from_redis_value::<String>)
            .transpose()
            .map_err(|e| format!("loading the flush script: {e}"))?;
        if loaded.as_deref() != Some(script_sha) {
            return Err(format!(
                "Redis named the flush script {loaded:?}, not {script_sha}"
            ));
        }
        let mut answers: Vec<Answer> = (self.batches.iter())
            .map(|_| answer_of(replies.next()))
            .collect();
        if self.waits(settings) {
            let confirmed = match replies.next() {
                Some(redis::Value::Int(n)) => n,
                other => return Err(format!("WAIT answered {other:?}")),
            };
            if confirmed < i64::from(settings.replicas_to_ack) {
                let why = format!(
                    "only {confirmed} of {} replicas confirmed the clicks in time; \
                     they will be sent again",
                    settings.replicas_to_ack
                );
                for answer in &mut answers {
                    if matches!(answer, Answer::Applied) {
                        *answer = Answer::Refused(why.clone());
                    }
                }
            }
        }
        Ok(answers)
    }
}

/// What the script's `reply` says of its batch.
fn answer_of(reply: Option<redis::Value>) -> Answer {
    match reply {
        Some(redis::Value::Int(0 | 1)) => Answer::Applied,
        Some(redis::Value::Int(-1)) => Answer::Waiting,
        Some(redis::Value::ServerError(error)) => {
            Answer::Refused(format!("applying clicks: {error:?}"))
        }
        other => Answer::Refused(format!("applying clicks: the script answered {other:?}")),
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
            sealed: VecDeque::new(),
            lanes: HashMap::new(),
            tallies: HashMap::new(),
            next_tally: 0,
            salts: HashMap::new(),
            sealed_visitors: Set::default(),
            reported: None,
        }
    }

    fn tick(&mut self, store: &ClickStore, settings: &CountSettings) {
        let clicks = store.take();
        let overflow = store.take_overflow();
        let counters = &store.counters;
        counters.counted.fetch_add(
            clicks.len() as u64 + overflow.values().sum::<u64>(),
            Ordering::Relaxed,
        );
        self.tally(&clicks, settings, store);
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
        let pending = self.open.clicks + self.tallies.values().map(|t| t.clicks).sum::<u64>();
        counters.pending.store(pending, Ordering::Relaxed);
        counters.generation.fetch_add(1, Ordering::Release);
    }

    /// Gives up every click this flusher holds: counted as dropped, and
    /// those on limited links settled.
    fn abandon(&mut self, store: &ClickStore) {
        let mut lost = self.open.clicks;
        store.settle(&self.open.limited);
        self.sealed.clear();
        for (_, tally) in self.tallies.drain() {
            lost += tally.clicks;
            store.settle(&tally.limited);
        }
        store.counters.dropped.fetch_add(lost, Ordering::Relaxed);
    }

    fn tally(&mut self, clicks: &[Click], settings: &CountSettings, store: &ClickStore) {
        if clicks.is_empty() {
            return;
        }
        let agents = self.agents.get_or_insert_with(Agents::new);
        let countries = match (&self.countries, &settings.geoip) {
            (Some((path, opened)), Some(wanted)) if path == wanted => opened.as_ref().ok(),
            (_, Some(wanted)) => {
                let opened = Countries::open(wanted);
                if let Err(error) = &opened {
                    eprintln!("shortlink: countries are not counted: {error}");
                }
                self.countries = Some((wanted.clone(), opened));
                self.countries.as_ref().and_then(|(_, c)| c.as_ref().ok())
            }
            (_, None) => None,
        };
        let room = settings
            .backlog
            .saturating_sub(self.sealed.iter().map(|b| b.entries).sum());
        let mut dropped = 0;
        let mut never_stored = HashMap::new();
        // First, so that whatever happens next they are settled: when
        // stored, when dropped below, or when a panic abandons the tally.
        for click in clicks {
            if click.outcome == Outcome::Limited {
                add_pending(&mut self.open.limited, click.key(), 1);
            }
        }
        let Tally {
            clicks: tallied,
            entries,
            links,
            names,
            limited,
        } = &mut self.open;
        for click in clicks {
            // `count` records only keys that pass the rules: this turns
            // the text back into the `Key` the layout is named from.
            // Past the backlog's room the click is dropped, but for a
            // click on a link with a click limit: it still counts against
            // the limit, in the link's total of people's clicks only (one
            // entry per limited link at most).
            let text = click.key();
            let scheme = store.names.scheme();
            let link = if *entries < room {
                link_of(links, text, scheme)
            } else if click.outcome == Outcome::Limited {
                if let Some(link) = link_of(links, text, scheme) {
                    *tallied += 1;
                    link.add_total(Total::People, entries);
                    continue;
                }
                None
            } else {
                dropped += u64::from(scheme.check(text).is_ok());
                None
            };
            let Some(link) = link else {
                if click.outcome == Outcome::Limited {
                    subtract_pending(limited, text, 1);
                    add_pending(&mut never_stored, text, 1);
                }
                continue;
            };
            *tallied += 1;
            // Gone answers and bots count in a total only: their user
            // agent (a HEAD is a bot's whatever it says) and country are
            // not looked up.
            if click.outcome == Outcome::Gone {
                link.add_total(Total::Gone, entries);
                continue;
            }
            if click.head {
                link.add_total(Total::Bots, entries);
                continue;
            }
            let agent = agents.classify(click.user_agent());
            if agent.bot {
                link.add_total(Total::Bots, entries);
                continue;
            }
            let country = countries.and_then(|c| click.client.and_then(|ip| c.country(ip)));
            let referrer = click.referrer().unwrap_or("(none)");
            let source = names.source(&agent, referrer, country.as_deref());
            link.add_person(click.at, source, click.client, entries);
        }
        store.counters.dropped.fetch_add(dropped, Ordering::Relaxed);
        store.settle(&never_stored);
    }

    /// Tallies clicks on limited links that found the store's queues full
    /// (see [`ClickStore::take_overflow`]): in their links' totals of
    /// people's clicks, whatever the backlog's room, so that they count
    /// against the limits as the clicks they stand for would have.
    fn tally_overflow(&mut self, overflow: HashMap<Box<str>, u64>, store: &ClickStore) {
        let mut never_stored = HashMap::new();
        let Tally {
            clicks,
            entries,
            links,
            limited,
            ..
        } = &mut self.open;
        for (key, n) in overflow {
            add_pending(limited, &key, n);
            let Some(link) = link_of(links, &key, store.names.scheme()) else {
                subtract_pending(limited, &key, n);
                add_pending(&mut never_stored, &key, n);
                continue;
            };
            *clicks += n;
            let total = &mut link.totals[total_slot(Total::People)];
            *entries += usize::from(*total == 0);
            *total += n;
        }
        store.settle(&never_stored);
    }

    /// Seals the open tally and sends every sealed batch, each lane's in
    /// order, to the node serving it; forgets those Redis applied.
    fn send(&mut self, store: &ClickStore, settings: &CountSettings) -> Result<(), String> {
        let destination = self
            .destination
            .get_or_insert_with(|| Destination::of(store));
        if self.open.is_empty() && self.sealed.is_empty() {
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
                    // Empty now, its map of links still allocated: the next
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
        tallies.retain(|_, tally| {
            if tally.batches > 0 {
                return true;
            }
            flushed += tally.clicks;
            store.settle(&tally.limited);
            false
        });
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

    /// Turns `tally` into batches of script arguments, numbered in order
    /// in each lane, and leaves it empty, its map of links still allocated
    /// unless far larger than this flush needed.
    fn seal(&mut self, tally: &mut Tally, counts: &CountNames, settings: &CountSettings) {
        let scheme = counts.scheme();
        let days_kept = settings.days_kept.as_secs().to_string();
        let hours_kept = settings.hours_kept.as_secs().to_string();
        let minutes_kept = ((MINUTES_KEPT + 1) * 60).to_string();
        if self.sealed_visitors.len() >= SEALED_VISITORS_MAX {
            self.sealed_visitors.clear();
        }
        let mut ops = Ops::default();
        let mut details: Map<String, u64> = Map::default();
        let links = tally.links.len();
        let names = &tally.names;
        for (key, link) in tally.links.drain() {
            let (head, field) = (scheme.head(&key), scheme.field(&key));
            for total in Total::ALL {
                let n = link.totals[total_slot(total)];
                if n > 0 {
                    ops.pair(Letter::Hash, counts.total_hash(total, head), "0", field, n);
                }
            }
            for (day, n) in link.days {
                let hash = counts.day_hash(day, head);
                ops.pair(Letter::Hash, hash, &days_kept, field, n);
            }
            for (hour, n) in link.hours {
                let hash = counts.hour_hash(hour, head);
                ops.pair(Letter::Hash, hash, &hours_kept, field, n);
            }
            for (minute, n) in link.minutes {
                let set = counts.minute_set(minute);
                ops.pair(Letter::SortedSet, set, &minutes_kept, key.as_str(), n);
            }
            if !link.sources.is_empty() {
                let op = ops.get(Letter::Details, counts.details(key.as_str()), &days_kept);
                for (source, n) in link.sources {
                    for (kind, value) in names.details(source) {
                        *details.entry(kind.field(value)).or_default() += n;
                    }
                }
                for (field, n) in details.drain() {
                    op.args.extend([field, n.to_string()]);
                }
            }
            self.add_visitors(&mut ops, &key, link.visitors, names, counts, &days_kept);
        }
        let mut by_lane: BTreeMap<Lane, Vec<(String, Op)>> = BTreeMap::new();
        for (key, op) in ops.by_key {
            by_lane
                .entry(lane_of(counts.layout(), &key))
                .or_default()
                .push((key, op));
        }
        self.next_tally += 1;
        let mut sealed = SealedTally {
            batches: 0,
            clicks: std::mem::take(&mut tally.clicks),
            limited: std::mem::take(&mut tally.limited),
        };
        let today = ClickTime::now().day();
        for (lane, ops) in by_lane {
            let mut batch = self.batch(lane, counts, today);
            for (key, op) in ops {
                let width = op.letter.width();
                let mut rest = op.args;
                while !rest.is_empty() {
                    // The call's own arguments, the batch's, this operation's.
                    let used = CALL_ARGS + batch.keys.len() + batch.args.len() + 1 + 4;
                    let room = BATCH_ARGS.saturating_sub(used).min(OP_ARGS) / width * width;
                    if room == 0 {
                        let next = self.batch(lane, counts, today);
                        self.sealed.push_back(std::mem::replace(&mut batch, next));
                        sealed.batches += 1;
                        continue;
                    }
                    let part: Vec<String> = rest.drain(..room.min(rest.len())).collect();
                    batch.entries += part.len() / width;
                    batch.keys.push(key.clone());
                    batch.args.extend([
                        op.letter.name().to_owned(),
                        (batch.keys.len() + 1).to_string(),
                        op.ttl.clone(),
                        part.len().to_string(),
                    ]);
                    batch.args.extend(part);
                }
            }
            if batch.keys.is_empty() {
                // Nothing went in: its number is given back.
                if let Some(numbers) = self.lanes.get_mut(&lane) {
                    numbers.sealed -= 1;
                }
            } else {
                self.sealed.push_back(batch);
                sealed.batches += 1;
            }
        }
        // A tally of no batches (clicks that wrote nothing) is done at the
        // next send.
        self.tallies.insert(self.next_tally, sealed);
        tally.entries = 0;
        tally.names.clear();
        // A burst of links is not kept allocated for good.
        if tally.links.capacity() > 4 * links.max(1024) {
            tally.links.shrink_to(links);
        }
    }

    /// An empty batch, numbered next in `lane`.
    fn batch(&mut self, lane: Lane, counts: &CountNames, today: Day) -> Batch {
        let numbers = self.lanes.entry(lane).or_default();
        numbers.sealed += 1;
        Batch {
            lane,
            seq: numbers.sealed,
            applied: counts.applied(today, lane.map(slot_tag)),
            keys: Vec::new(),
            args: Vec::new(),
            entries: 0,
            tally: self.next_tally,
        }
    }

    /// Adds the visitors of `key` not sealed yet to `ops`, salted.
    fn add_visitors(
        &mut self,
        ops: &mut Ops,
        key: &Key,
        visitors: Vec<(Day, Set<(IpAddr, u32)>)>,
        names: &Names,
        counts: &CountNames,
        days_kept: &str,
    ) {
        for (day, people) in visitors {
            let salt = self.salts.get(&day).map_or("", String::as_str);
            let sealed = &mut self.sealed_visitors;
            let mut new = people
                .iter()
                .filter_map(|&(client, agent)| {
                    let user_agent = &*names.agent(agent).header;
                    let hash =
                        (sealed.hasher()).hash_one((salt, day, key.as_str(), client, user_agent));
                    sealed
                        .insert(hash)
                        .then(|| visitor_digest(client, user_agent))
                })
                .peekable();
            if new.peek().is_none() {
                continue;
            }
            let op = ops.get(
                Letter::Visitors,
                counts.visitors(day, key.as_str()),
                days_kept,
            );
            op.args.extend(new.map(|digest| {
                let mut hash = sha1_smol::Sha1::new();
                hash.update(salt.as_bytes());
                hash.update(&digest);
                hash.digest().to_string()[..16].to_owned()
            }));
        }
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
    use crate::clicks::Reach;
    use redis_target::cluster::key_slot;
    use shortlink_core::clicks::Layout;

    const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

    fn click(key: &str, client: u8) -> Click {
        let address = IpAddr::from([192, 0, 2, client]);
        Click::new(Outcome::Redirect, false, Some(address), key, FIREFOX, None).unwrap()
    }

    #[test]
    fn more_clicks_on_a_tallied_link_cost_no_entries() {
        let store = ClickStore::detached(1000);
        let mut flusher = Flusher::new();
        let clicks: Vec<Click> = (0..500).map(|_| click("Lm25", 1)).collect();
        flusher.tally(&clicks, &store.settings(), &store);
        let entries = flusher.open.entries;
        flusher.tally(&clicks, &store.settings(), &store);
        assert_eq!(flusher.open.entries, entries);
        assert_eq!(flusher.open.clicks, 1000);
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_full_backlog_drops_clicks_and_counts_them() {
        let store = ClickStore::detached(1000);
        let mut flusher = Flusher::new();
        let clicks: Vec<Click> = (0..1000).map(|n| click(&format!("Key{n}"), 1)).collect();
        flusher.tally(&clicks, &store.settings(), &store);
        let dropped = store.counters.dropped.load(Ordering::Relaxed);
        assert!(dropped > 0, "1000 links tally far more than 1000 entries");
        assert_eq!(
            flusher.open.clicks + dropped,
            1000,
            "every click kept or counted"
        );
        // Sealed batches waiting for Redis take their share of the backlog.
        let mut tally = std::mem::take(&mut flusher.open);
        flusher.seal(&mut tally, &store.names, &store.settings());
        flusher.tally(&clicks[..10], &store.settings(), &store);
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), dropped + 10);
    }

    /// Every sealed batch's arguments, sorted, taken out of the flusher.
    fn sealed_args(flusher: &mut Flusher) -> Vec<String> {
        let mut args: Vec<String> = flusher.sealed.drain(..).flat_map(|b| b.args).collect();
        args.sort();
        args
    }

    /// The tally kept from one flush to the next starts each one empty:
    /// the same clicks seal into the same operations, details included,
    /// but for their visitor, sealed already.
    #[test]
    fn a_sealed_tally_starts_the_next_flush_empty() {
        let store = ClickStore::detached(1_000_000);
        let mut flusher = Flusher::new();
        flusher
            .salts
            .insert(ClickTime::now().day(), "salt".to_owned());
        let referred = |key: &str| {
            let address = IpAddr::from([192, 0, 2, 7]);
            Click::new(
                Outcome::Redirect,
                false,
                Some(address),
                key,
                FIREFOX,
                Some("news.example.com"),
            )
            .unwrap()
        };
        let clicks: Vec<Click> = (0..50)
            .map(|n| referred(&format!("Key{}", n % 20)))
            .collect();
        let mut sealed_flushes = Vec::new();
        for _ in 0..2 {
            flusher.tally(&clicks, &store.settings(), &store);
            let mut tally = std::mem::take(&mut flusher.open);
            flusher.seal(&mut tally, &store.names, &store.settings());
            assert_eq!((tally.clicks, tally.entries, tally.links.len()), (0, 0, 0));
            flusher.open = tally;
            sealed_flushes.push(sealed_args(&mut flusher));
        }
        let visitor_ops = |args: &[String]| args.iter().filter(|a| *a == "p").count();
        assert_eq!(
            visitor_ops(&sealed_flushes[0]),
            20,
            "one visitor on each link"
        );
        assert_eq!(
            visitor_ops(&sealed_flushes[1]),
            0,
            "known visitors are not sent"
        );
        let fields = &sealed_flushes[1];
        for expected in ["referrer:news.example.com", "browser:Firefox", "os:Linux"] {
            assert!(fields.iter().any(|a| a == expected), "no {expected}");
        }
        // Key0 is clicked 3 times in each flush: its referrer counts 3.
        assert!(fields.iter().any(|a| a == "3"));
    }

    /// A visitor is sealed once per link and day, and again once forgotten
    /// (as on a new connection: the Redis it reaches may have lost them).
    #[test]
    fn a_new_visitor_is_sealed_once() {
        let store = ClickStore::detached(1_000_000);
        let mut flusher = Flusher::new();
        flusher
            .salts
            .insert(ClickTime::now().day(), "salt".to_owned());
        let seal = |clicks: &[Click], flusher: &mut Flusher| {
            flusher.tally(clicks, &store.settings(), &store);
            let mut tally = std::mem::take(&mut flusher.open);
            flusher.seal(&mut tally, &store.names, &store.settings());
            flusher.open = tally;
            sealed_args(flusher)
                .into_iter()
                .filter(|a| a.len() == 16 && a.bytes().all(|b| b.is_ascii_hexdigit()))
                .count()
        };
        assert_eq!(seal(&[click("Lm25", 1), click("Lm25", 1)], &mut flusher), 1);
        assert_eq!(seal(&[click("Lm25", 1), click("Lm25", 2)], &mut flusher), 1);
        assert_eq!(seal(&[click("Lm26", 1)], &mut flusher), 1, "another link");
        assert_eq!(seal(&[click("Lm25", 1)], &mut flusher), 0);
        flusher.sealed_visitors.clear();
        assert_eq!(seal(&[click("Lm25", 1)], &mut flusher), 1);
    }

    #[test]
    fn slots_follow_the_order_of_all() {
        for (slot, total) in Total::ALL.into_iter().enumerate() {
            assert_eq!(total_slot(total), slot, "{total:?}");
        }
    }

    /// The fields and counts the sealed batches add to `hash`.
    fn sealed_counts(flusher: &Flusher, hash: &str) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for batch in &flusher.sealed {
            let mut i = 0;
            while i < batch.args.len() {
                let key = &batch.keys[batch.args[i + 1].parse::<usize>().unwrap() - 2];
                let n: usize = batch.args[i + 3].parse().unwrap();
                let pairs = &batch.args[i + 4..i + 4 + n];
                if key == hash {
                    for pair in pairs.chunks(2) {
                        *counts.entry(pair[0].clone()).or_default() +=
                            pair[1].parse::<u64>().unwrap();
                    }
                }
                i += 4 + n;
            }
        }
        counts
    }

    /// Past the backlog's room, a click on a link with a click limit is
    /// still tallied, in the link's total of people's clicks, and held
    /// against the limit until stored (or abandoned); other clicks are
    /// dropped.
    #[test]
    fn limited_clicks_past_the_backlog_still_count() {
        let store = ClickStore::detached(1);
        let address = IpAddr::from([192, 0, 2, 1]);
        let click = |outcome, key: &str| {
            Click::new(outcome, false, Some(address), key, FIREFOX, None).unwrap()
        };
        let mut clicks: Vec<Click> = (0..5)
            .map(|n| click(Outcome::Limited, &format!("Key{n}")))
            .collect();
        clicks.push(click(Outcome::Redirect, "Key9"));
        for c in &clicks {
            store.record(click(c.outcome, c.key()));
        }
        store.take();
        let mut flusher = Flusher::new();
        // A backlog of one entry takes the first click whole (its details
        // too); the other limited ones count in their totals only.
        flusher.tally(&clicks, &store.settings(), &store);
        let held: Vec<u64> = clicks.iter().map(|c| store.pending(c.key())).collect();
        assert_eq!(held, [1, 1, 1, 1, 1, 0]);
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(flusher.open.clicks, 5);
        let mut tally = std::mem::take(&mut flusher.open);
        flusher.seal(&mut tally, &store.names, &store.settings());
        let totals = sealed_counts(&flusher, "short:clicks:Ke");
        let expected: BTreeMap<String, u64> = (0..5).map(|n| (format!("y{n}"), 1)).collect();
        assert_eq!(totals, expected);
        flusher.abandon(&store);
        assert_eq!(store.pending("Key0"), 0);
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 6);
    }

    /// Clicks on a limited link that found the queues full reach the
    /// link's total of people's clicks, held against the limit meanwhile.
    #[test]
    fn limited_clicks_past_full_queues_reach_the_totals() {
        let store = ClickStore::detached(1_000_000);
        let mut settings = store.settings();
        settings.queue_bytes = 0;
        store.set(settings);
        for _ in 0..3 {
            store.record(Click::new(Outcome::Limited, false, None, "Lm25", "", None).unwrap());
        }
        let mut flusher = Flusher::new();
        flusher.tally_overflow(store.take_overflow(), &store);
        assert_eq!(store.pending("Lm25"), 3);
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 0);
        let mut tally = std::mem::take(&mut flusher.open);
        flusher.seal(&mut tally, &store.names, &store.settings());
        let totals = sealed_counts(&flusher, "short:clicks:Lm");
        assert_eq!(totals, BTreeMap::from([("25".to_owned(), 3)]));
        // Settled once Redis applied the batch.
        assert_eq!(flusher.sealed.len(), 1);
        flusher.forget_applied(&[true], &store);
        assert_eq!(store.pending("Lm25"), 0);
        assert_eq!(store.counters.flushed.load(Ordering::Relaxed), 3);
    }

    /// Seals 3,000 clicks on as many links in `layout`, and checks what
    /// every layout needs: batches numbered 1, 2, ... in each lane, none
    /// past the bound, every click in the tally's count, no address sent.
    fn seal_many(layout: Layout) -> Flusher {
        let store = ClickStore::detached(1_000_000);
        let counts = CountNames::new(store.names.scheme(), layout).unwrap();
        let mut flusher = Flusher::new();
        // 3,000 links of as many heads (split 2).
        let letters: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
        let clicks: Vec<Click> = (0..3000)
            .map(|n| {
                let key = format!("{}{}Key", letters[n % 62], letters[n / 62]);
                click(&key, u8::try_from(n % 200).unwrap())
            })
            .collect();
        flusher.tally(&clicks, &store.settings(), &store);
        flusher
            .salts
            .insert(ClickTime::now().day(), "salt".to_owned());
        let mut tally = std::mem::take(&mut flusher.open);
        flusher.seal(&mut tally, &counts, &store.settings());
        let mut numbers: BTreeMap<Lane, Vec<u64>> = BTreeMap::new();
        for batch in &flusher.sealed {
            numbers.entry(batch.lane).or_default().push(batch.seq);
            assert!(CALL_ARGS + batch.keys.len() + batch.args.len() <= BATCH_ARGS);
        }
        for (lane, seqs) in &numbers {
            let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
            assert_eq!(seqs, &expected, "lane {lane:?}");
            assert_eq!(flusher.lanes[lane].sealed, seqs.len() as u64);
        }
        let tally = &flusher.tallies[&flusher.next_tally];
        assert_eq!((tally.clicks, tally.batches), (3000, flusher.sealed.len()));
        // Visitor hashes are salted digests: no address in any argument.
        assert!(flusher
            .sealed
            .iter()
            .flat_map(|b| &b.args)
            .all(|arg| !arg.contains("192.0.2.")));
        flusher
    }

    #[test]
    fn batches_are_numbered_and_bounded() {
        let flusher = seal_many(Layout::Plain);
        assert!(flusher.sealed.len() > 1);
        assert!(flusher.sealed.iter().all(|b| b.lane.is_none()));
        let day = ClickTime::now().day();
        assert!(flusher
            .sealed
            .iter()
            .all(|b| b.applied == format!("short:applied:{day}")));
    }

    /// In a cluster, each batch writes keys of its lane's slot only, with
    /// the lane's note of applied batches in that slot too; the counts of
    /// keys starting alike share a slot, so a flush makes as few calls as
    /// on one Redis.
    #[test]
    fn cluster_batches_stay_in_their_slot() {
        let flusher = seal_many(Layout::Cluster);
        let mut lanes = HashSet::new();
        for batch in &flusher.sealed {
            let slot = batch.lane.expect("a cluster's lanes are slots");
            lanes.insert(slot);
            assert_eq!(
                key_slot(batch.applied.as_bytes()),
                slot,
                "{}",
                batch.applied
            );
            for key in &batch.keys {
                assert_eq!(key_slot(key.as_bytes()), slot, "{key}");
            }
        }
        // 62 first characters, and the minute set.
        assert_eq!(lanes.len(), 63);
        let keys: usize = flusher.sealed.iter().map(|b| b.keys.len()).sum();
        assert!(
            keys >= 3 * 3000,
            "totals, day, hour, details, visitors per link"
        );
        let plain = seal_many(Layout::Plain).sealed.len();
        assert!(
            flusher.sealed.len() <= plain + lanes.len(),
            "{} calls in a cluster, {plain} on one Redis",
            flusher.sealed.len()
        );
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
        let store = ClickStore::new(&redis.url, reach, names, settings.clone());
        let letters: Vec<char> = ('a'..='z').chain('A'..='Z').collect();
        for n in 0..2000 {
            let key = format!("{}{}Key", letters[n % 52], letters[n / 52 % 52]);
            let client = IpAddr::from([192, 0, 2, u8::try_from(n % 250).unwrap()]);
            let referrer = format!("r{n}.example");
            store.record(
                Click::new(
                    Outcome::Redirect,
                    false,
                    Some(client),
                    &key,
                    FIREFOX,
                    Some(&referrer),
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
        let store = ClickStore::new(&redis.url, reach, names, settings.clone());
        let letters: Vec<char> = ('a'..='z').chain('A'..='Z').collect();
        let mut flusher = Flusher::new();
        let mut recorded = 0u64;
        for round in 0..12 {
            for n in 0..1000 {
                let key = format!("{}{}Key", letters[n % 52], letters[(n / 52 + round) % 52]);
                let agent = if n % 3 == 0 { "curl/8.0" } else { FIREFOX };
                let client = IpAddr::from([192, 0, 2, u8::try_from(n % 250).unwrap()]);
                store.record(
                    Click::new(Outcome::Redirect, false, Some(client), &key, agent, None).unwrap(),
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
