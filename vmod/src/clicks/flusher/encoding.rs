//! The operation encoding: a tally sealed into batches of arguments of the
//! flush script (`apply_batch.lua`), one operation per Redis key, each
//! batch in its lane (a cluster's slot) and numbered in it, bounded in
//! arguments; visitors salted and hashed on the way.

use std::collections::hash_map::Entry;
use std::hash::BuildHasher as _;
use std::net::IpAddr;

use redis_target::cluster::slot_tag;
use shortlink_core::clicks::{
    ClickTime, CountNames, Day, FirstClicksWriter, Hour, Minute, Total, MINUTES_KEPT,
};
use shortlink_core::Key;
use smallvec::SmallVec;

use super::args::Args;
use super::batches::{Batch, SealedTally};
use super::tally::{total_slot, Names, Source, Tally};
use super::{Flusher, Map, Set, SEALED_VISITORS_MAX};
use crate::clicks::destination::{lane_of, Lane};
use crate::clicks::store::CountSettings;

/// Arguments per script call: small enough that no call holds Redis long
/// (calls of 4,000 took up to 38 ms in Redis's `SLOWLOG` on the saturated
/// 2-core bench machine), and large enough that calls are few: Redis syncs
/// its append-only file after each, and fresh links' clicks cost it 30 to
/// 33 µs of CPU each in calls of 4,000, 36 to 50 µs in calls of 1,000.
pub(super) const BATCH_ARGS: usize = 4000;

/// Arguments of a call besides its operations' (`KEYS[1]`, `ARGV[1..4]`).
const CALL_ARGS: usize = 5;

/// Arguments of one operation within a call: Lua's `unpack` (of a
/// `PFADD`'s elements) takes far more.
const OP_ARGS: usize = 1000;
const _: () = assert!(OP_ARGS <= BATCH_ARGS);

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

/// A visitor's salted digest: the first 8 bytes of a SHA-1.
type Digest = [u8; 8];

/// The digests of a link's new visitors on one day: a few, mostly one.
type Digests = SmallVec<[Digest; 4]>;

/// What the flush script does with one Redis key (see [`APPLY_BATCH`](super::APPLY_BATCH)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Letter {
    Hash,
    Details,
    SortedSet,
    Visitors,
    /// A link's first clicks on a day, a field of the day's hash of them.
    FirstClicks,
    /// A link's first clicks' visitors moved into its register of the day.
    FoldFirstClicks,
}

impl Letter {
    fn name(self) -> &'static str {
        match self {
            Self::Hash => "h",
            Self::Details => "d",
            Self::SortedSet => "z",
            Self::Visitors => "p",
            Self::FirstClicks => "f",
            Self::FoldFirstClicks => "r",
        }
    }

    /// Arguments per entry: a field (or member) and its count, or one
    /// element; a link's field and first clicks, or its field.
    fn width(self) -> usize {
        match self {
            Self::Hash | Self::SortedSet | Self::Details | Self::FirstClicks => 2,
            Self::Visitors | Self::FoldFirstClicks => 1,
        }
    }
}

/// What the script does with one Redis key: its letter, the key, its TTL
/// in seconds (0 for none), and its fields and counts, or elements; and
/// the keys it may write besides (`KEYS` after its own): first clicks'
/// details hash and register, a fold's register.
struct Op {
    letter: Letter,
    key: String,
    ttl: u64,
    args: Args,
    more_keys: Vec<String>,
    /// The backlog's entries it holds, if not one per `width` arguments:
    /// first clicks hold their fields and visitors.
    entries: Option<usize>,
}

/// Which of a head's hashes an operation writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bucket {
    Total(Total),
    Day(Day),
    Hour(Hour),
}

/// A sealed tally's operations, one per Redis key. The hashes links share
/// are found by head and period, so no key's name is made per link; a
/// link's own keys (details, visitors) are new operations.
#[derive(Default)]
struct Ops {
    all: Vec<Op>,
    /// Per head, its buckets' operations (a few: three totals, a day, an
    /// hour or two) as indices into `all`.
    buckets: Map<Box<str>, Vec<(Bucket, usize)>>,
    minutes: Vec<(Minute, usize)>,
}

impl Ops {
    fn push(&mut self, letter: Letter, key: String, ttl: u64) -> &mut Args {
        self.push_keyed(letter, key, ttl, Vec::new())
    }

    /// An operation writing `more_keys` besides `key`.
    fn push_keyed(
        &mut self,
        letter: Letter,
        key: String,
        ttl: u64,
        more_keys: Vec<String>,
    ) -> &mut Args {
        self.all.push(Op {
            letter,
            key,
            ttl,
            args: Args::default(),
            more_keys,
            entries: None,
        });
        let last = self.all.len() - 1;
        &mut self.all[last].args
    }

    /// The arguments of `head`'s `bucket` hash, named by `name` when new.
    fn bucket(
        &mut self,
        head: &str,
        bucket: Bucket,
        name: impl FnOnce() -> String,
        ttl: u64,
    ) -> &mut Args {
        let known = (self.buckets.get(head))
            .and_then(|ops| ops.iter().find(|(b, _)| *b == bucket))
            .map(|&(_, index)| index);
        let index = known.unwrap_or_else(|| {
            self.push(Letter::Hash, name(), ttl);
            let index = self.all.len() - 1;
            match self.buckets.get_mut(head) {
                Some(ops) => ops.push((bucket, index)),
                None => {
                    self.buckets.insert(head.into(), vec![(bucket, index)]);
                }
            }
            index
        });
        &mut self.all[index].args
    }

    /// The arguments of `minute`'s sorted set, named by `name` when new.
    fn minute(&mut self, minute: Minute, name: impl FnOnce() -> String, ttl: u64) -> &mut Args {
        let known = (self.minutes.iter())
            .find(|(m, _)| *m == minute)
            .map(|&(_, index)| index);
        let index = known.unwrap_or_else(|| {
            self.push(Letter::SortedSet, name(), ttl);
            self.minutes.push((minute, self.all.len() - 1));
            self.all.len() - 1
        });
        &mut self.all[index].args
    }
}

/// What one link's clicks in a tally write besides the buckets it shares
/// with others: its details and its new visitors.
struct Own<'t> {
    key: &'t Key,
    head: &'t str,
    field: &'t str,
    /// The day of all its people's clicks, if one.
    one_day: Option<Day>,
    sources: &'t Map<Source, u64>,
    visitors: SmallVec<[(Day, Digests); 1]>,
}

impl Flusher {
    /// Turns `tally` into batches of script arguments, numbered in order
    /// in each lane, and leaves it empty, its map of links still allocated
    /// unless far larger than this flush needed.
    pub(super) fn seal(
        &mut self,
        tally: &mut Tally,
        counts: &CountNames,
        settings: &CountSettings,
    ) {
        let scheme = counts.scheme();
        let days_kept = settings.days_kept.as_secs();
        let hours_kept = settings.hours_kept.as_secs();
        let minutes_kept = (MINUTES_KEPT + 1) * 60;
        if self.sealed_visitors.len() >= SEALED_VISITORS_MAX {
            self.sealed_visitors.clear();
        }
        if self.first_clicks.len() >= SEALED_VISITORS_MAX {
            self.first_clicks.clear();
        }
        let links = tally.links.len();
        // A fresh link makes two operations of its own (details, visitors).
        let mut ops = Ops {
            all: Vec::with_capacity(2 * links),
            ..Ops::default()
        };
        let names = &tally.names;
        // A link's details by field, when its clicks came from more than
        // one source (which may share a field).
        let mut details: Map<[&str; 3], u64> = Map::default();
        for (key, link) in tally.links.drain() {
            let (head, field) = (scheme.head(&key), scheme.field(&key));
            let one_day = match link.days.as_slice() {
                [(day, _)] => Some(*day),
                _ => None,
            };
            for total in Total::ALL {
                let n = link.totals[total_slot(total)];
                if n > 0 {
                    let name = || counts.total_hash(total, head);
                    (ops.bucket(head, Bucket::Total(total), name, 0)).push_pair(&[field], n);
                }
            }
            for (day, n) in link.days {
                let name = || counts.day_hash(day, head);
                (ops.bucket(head, Bucket::Day(day), name, days_kept)).push_pair(&[field], n);
            }
            for (hour, n) in link.hours {
                let name = || counts.hour_hash(hour, head);
                (ops.bucket(head, Bucket::Hour(hour), name, hours_kept)).push_pair(&[field], n);
            }
            for (minute, n) in link.minutes {
                let name = || counts.minute_set(minute);
                (ops.minute(minute, name, minutes_kept)).push_pair(&[key.as_str()], n);
            }
            let visitors: SmallVec<[(Day, Digests); 1]> = (link.visitors.into_iter())
                .map(|(day, people)| (day, self.new_visitors(&key, day, &people, names)))
                .filter(|(_, digests)| !digests.is_empty())
                .collect();
            let own = Own {
                key: &key,
                head,
                field,
                one_day,
                sources: &link.sources,
                visitors,
            };
            self.add_own(&mut ops, own, names, counts, days_kept, &mut details);
        }
        self.next_tally += 1;
        let mut sealed = SealedTally {
            batches: 0,
            clicks: std::mem::take(&mut tally.clicks),
            limited: std::mem::take(&mut tally.limited),
        };
        self.batch_ops(ops, counts, &mut sealed);
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

    /// Adds `own`'s operations: its first clicks of the day, if this
    /// flusher has not written the link on that day yet and they fit; else
    /// its details hash and registers, each register after moving the
    /// first clicks' visitors into it (unless this flusher did already).
    fn add_own<'n>(
        &mut self,
        ops: &mut Ops,
        own: Own<'_>,
        names: &'n Names,
        counts: &CountNames,
        days_kept: u64,
        details: &mut Map<[&'n str; 3], u64>,
    ) {
        let Own {
            key,
            head,
            field,
            one_day,
            sources,
            visitors,
        } = own;
        if sources.is_empty() && visitors.is_empty() {
            return;
        }
        if let Some(day) = one_day {
            let id = self.first_clicks.hasher().hash_one((day, key.as_str()));
            if let Entry::Vacant(vacant) = self.first_clicks.entry(id) {
                let more_keys = vec![
                    counts.details(key.as_str()),
                    counts.visitors(day, key.as_str()),
                ];
                let name = counts.first_clicks(day, head);
                let args = ops.push_keyed(Letter::FirstClicks, name, days_kept, more_keys);
                args.push(field);
                let mut entries = 0;
                let written = args.push_with(|bytes| {
                    let mut first = FirstClicksWriter::new(bytes);
                    each_detail(sources, names, details, |field, n| {
                        first.detail(&field, n);
                        entries += 1;
                    });
                    for digest in visitors.iter().flat_map(|(_, digests)| digests) {
                        first.visitor(digest);
                        entries += 1;
                    }
                    first.finish()
                });
                if written {
                    ops.all.last_mut().expect("just pushed").entries = Some(entries);
                    vacant.insert(visitors.is_empty());
                    return;
                }
                ops.all.pop();
            }
        }
        if !sources.is_empty() {
            let args = ops.push(Letter::Details, counts.details(key.as_str()), days_kept);
            each_detail(sources, names, details, |field, n| {
                args.push_pair(&field, n);
            });
        }
        for (day, digests) in visitors {
            let id = self.first_clicks.hasher().hash_one((day, key.as_str()));
            if self.first_clicks.insert(id, true) != Some(true) {
                let name = counts.first_clicks(day, head);
                let more_keys = vec![counts.visitors(day, key.as_str())];
                (ops.push_keyed(Letter::FoldFirstClicks, name, days_kept, more_keys)).push(field);
            }
            let args = ops.push(
                Letter::Visitors,
                counts.visitors(day, key.as_str()),
                days_kept,
            );
            for digest in digests {
                args.push_hex(&digest);
            }
        }
    }

    /// Puts `ops` into batches of their lanes, numbered in order in each,
    /// split where a batch is full; `sealed` counts them.
    fn batch_ops(&mut self, mut ops: Ops, counts: &CountNames, sealed: &mut SealedTally) {
        // Operations in lane order (one lane but in a cluster), each
        // lane's in the order made; sorted as indices, as an `Op` is large.
        let mut order: Vec<(Lane, usize)> = (ops.all.iter().enumerate())
            .map(|(index, op)| (lane_of(counts.layout(), &op.key), index))
            .collect();
        order.sort_unstable();
        let today = ClickTime::now().day();
        for lane_ops in order.chunk_by(|a, b| a.0 == b.0) {
            let lane = lane_ops[0].0;
            let mut batch = self.batch(lane, counts, today);
            for &(_, index) in lane_ops {
                let op = &mut ops.all[index];
                let width = op.letter.width();
                let mut done = 0;
                while done < op.args.len() {
                    // The call's own arguments, the batch's, this operation's.
                    let used = CALL_ARGS
                        + batch.keys.len()
                        + batch.args.len()
                        + 1
                        + op.more_keys.len()
                        + 4;
                    let room = BATCH_ARGS.saturating_sub(used).min(OP_ARGS) / width * width;
                    if room == 0 {
                        let next = self.batch(lane, counts, today);
                        self.sealed.push_back(std::mem::replace(&mut batch, next));
                        sealed.batches += 1;
                        continue;
                    }
                    let end = op.args.len().min(done + room);
                    batch.entries += op.entries.unwrap_or((end - done) / width);
                    let key = if end == op.args.len() {
                        std::mem::take(&mut op.key)
                    } else {
                        op.key.clone()
                    };
                    batch.keys.push(key);
                    let index = batch.keys.len() as u64 + 1;
                    batch.keys.extend(op.more_keys.iter().cloned());
                    batch.args.push(op.letter.name());
                    batch.args.push_number(index);
                    batch.args.push_number(op.ttl);
                    batch.args.push_number((end - done) as u64);
                    batch.args.extend_from(&op.args, done..end);
                    done = end;
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
            args: Args::default(),
            entries: 0,
            tally: self.next_tally,
        }
    }

    /// The salted digests of `key`'s visitors on `day` not sealed yet,
    /// which are sealed now.
    fn new_visitors(
        &mut self,
        key: &Key,
        day: Day,
        people: &Set<(IpAddr, u32)>,
        names: &Names,
    ) -> Digests {
        let salt = self.salts.get(&day).map_or("", String::as_str);
        let sealed = &mut self.sealed_visitors;
        people
            .iter()
            .filter_map(|&(client, agent)| {
                let user_agent = &*names.agent(agent).header;
                let hash =
                    (sealed.hasher()).hash_one((salt, day, key.as_str(), client, user_agent));
                sealed.insert(hash).then(|| {
                    let mut hash = sha1_smol::Sha1::new();
                    hash.update(salt.as_bytes());
                    hash.update(&visitor_digest(client, user_agent));
                    let mut digest = Digest::default();
                    digest.copy_from_slice(&hash.digest().bytes()[..8]);
                    digest
                })
            })
            .collect()
    }
}

/// Calls `each` with every detail field of a link's `sources` (in its
/// parts) and its clicks; a field several sources share, once, with their
/// sum (added up in `shared`, left empty).
fn each_detail<'n>(
    sources: &Map<Source, u64>,
    names: &'n Names,
    shared: &mut Map<[&'n str; 3], u64>,
    mut each: impl FnMut([&'n str; 3], u64),
) {
    if let (1, Some((&source, &n))) = (sources.len(), sources.iter().next()) {
        for (kind, value) in names.details(source) {
            each(kind.field_parts(value), n);
        }
        return;
    }
    for (&source, &n) in sources {
        for (kind, value) in names.details(source) {
            *shared.entry(kind.field_parts(value)).or_default() += n;
        }
    }
    for (field, n) in shared.drain() {
        each(field, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clicks::flusher::tests::{click, FIREFOX};
    use crate::clicks::store::{Click, ClickStore, Outcome};
    use redis_target::cluster::key_slot;
    use shortlink_core::clicks::Layout;
    use std::collections::BTreeMap;
    use std::collections::HashSet;

    /// Every sealed batch's arguments, sorted, taken out of the flusher.
    fn sealed_args(flusher: &mut Flusher) -> Vec<String> {
        let mut args: Vec<String> = (flusher.sealed.drain(..))
            .flat_map(|b| b.args.texts().map(str::to_owned).collect::<Vec<_>>())
            .collect();
        args.sort();
        args
    }

    /// The visitors' digests among sealed arguments: their own, or in
    /// first clicks.
    fn digests(args: &[String]) -> usize {
        let digest = |a: &str| a.len() == 16 && a.bytes().all(|b| b.is_ascii_hexdigit());
        let own = args.iter().filter(|a| digest(a)).count();
        let in_first_clicks = (args.iter())
            .flat_map(|a| a.lines())
            .filter_map(|line| line.strip_prefix("visitors "))
            .flat_map(str::split_whitespace)
            .filter(|a| digest(a))
            .count();
        own + in_first_clicks
    }

    /// The tally kept from one flush to the next starts each one empty:
    /// the same clicks seal into the same counts, details included, but
    /// for their visitor, sealed already. The first flush writes each
    /// link's details and visitor as its first clicks of the day, the next
    /// its details in its own hash.
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
                None,
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
        let ops = |args: &[String], letter: &str| args.iter().filter(|a| *a == letter).count();
        let first = &sealed_flushes[0];
        assert_eq!(ops(first, "f"), 20, "each link's first clicks");
        assert_eq!((ops(first, "d"), ops(first, "p")), (0, 0));
        assert_eq!(digests(first), 20, "one visitor on each link");
        // Key0 is clicked 3 times in each flush: its referrer counts 3.
        assert!(first
            .iter()
            .any(|a| a.starts_with("3 referrer:news.example.com\n")));
        let second = &sealed_flushes[1];
        assert_eq!((ops(second, "f"), ops(second, "d")), (0, 20));
        assert_eq!(digests(second), 0, "known visitors are not sent");
        for expected in ["referrer:news.example.com", "browser:Firefox", "os:Linux"] {
            assert!(second.iter().any(|a| a == expected), "no {expected}");
        }
        assert!(second.iter().any(|a| a == "3"));
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
            digests(&sealed_args(flusher))
        };
        assert_eq!(seal(&[click("Lm25", 1), click("Lm25", 1)], &mut flusher), 1);
        assert_eq!(seal(&[click("Lm25", 1), click("Lm25", 2)], &mut flusher), 1);
        assert_eq!(seal(&[click("Lm26", 1)], &mut flusher), 1, "another link");
        assert_eq!(seal(&[click("Lm25", 1)], &mut flusher), 0);
        flusher.sealed_visitors.clear();
        assert_eq!(seal(&[click("Lm25", 1)], &mut flusher), 1);
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
            .flat_map(|b| b.args.texts())
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
        // The 62 first characters' slots, and the minute set's, which
        // moves with the minute and may share one of theirs.
        let minute_sets: HashSet<u16> = flusher
            .sealed
            .iter()
            .flat_map(|b| &b.keys)
            .filter(|key| key.contains("minute:"))
            .map(|key| key_slot(key.as_bytes()))
            .collect();
        let first_characters: HashSet<u16> = flusher
            .sealed
            .iter()
            .flat_map(|b| &b.keys)
            .filter(|key| !key.contains("minute:"))
            .map(|key| key_slot(key.as_bytes()))
            .collect();
        assert_eq!(first_characters.len(), 62);
        // One minute's set, or two if the clicks straddle a minute.
        assert!((1..=2).contains(&minute_sets.len()), "{minute_sets:?}");
        assert_eq!(lanes, &first_characters | &minute_sets);
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
}
