//! The operation encoding: a tally sealed into batches of arguments of the
//! flush script (`apply_batch.lua`), one operation per Redis key, each
//! batch in its lane (a cluster's slot) and numbered in it, bounded in
//! arguments; visitors salted and hashed on the way.

use std::hash::BuildHasher as _;
use std::net::IpAddr;

use redis_target::cluster::slot_tag;
use shortlink_core::clicks::{ClickTime, CountNames, Day, Hour, Minute, Total, MINUTES_KEPT};
use shortlink_core::Key;

use super::args::Args;
use super::batches::{Batch, SealedTally};
use super::tally::{total_slot, DayVisitors, Names, Tally};
use super::visits::{seal_link_visits, ListOrHash, LIST_LEAD};
use super::{Flusher, Map, SEALED_VISITORS_MAX};
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

/// What the flush script does with one Redis key (see [`APPLY_BATCH`](super::APPLY_BATCH)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Letter {
    Hash,
    Details,
    Visitors,
    /// A visit list: its lead (bound, oldest time kept), then records.
    List,
}

impl Letter {
    fn name(self) -> &'static str {
        match self {
            Self::Hash => "h",
            Self::Details => "d",
            Self::Visitors => "p",
            Self::List => "l",
        }
    }

    /// Arguments at the start of the operation's, repeated in every part
    /// of one split across calls.
    fn lead(self) -> usize {
        match self {
            Self::List => LIST_LEAD,
            Self::Hash | Self::Details | Self::Visitors => 0,
        }
    }

    /// Arguments per entry: a field (or member) and its count, or one
    /// element.
    fn width(self) -> usize {
        match self {
            Self::Hash | Self::Details => 2,
            Self::Visitors | Self::List => 1,
        }
    }
}

/// What the script does with one Redis key: its letter, the key, its TTL
/// in seconds (0 for none), and its fields and counts, or elements.
struct Op {
    letter: Letter,
    key: String,
    ttl: u64,
    args: Args,
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
        self.all.push(Op {
            letter,
            key,
            ttl,
            args: Args::default(),
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

    /// The arguments of `minute`'s hash, named by `name` when new.
    fn minute(&mut self, minute: Minute, name: impl FnOnce() -> String, ttl: u64) -> &mut Args {
        let known = (self.minutes.iter())
            .find(|(m, _)| *m == minute)
            .map(|&(_, index)| index);
        let index = known.unwrap_or_else(|| {
            self.push(Letter::Hash, name(), ttl);
            self.minutes.push((minute, self.all.len() - 1));
            self.all.len() - 1
        });
        &mut self.all[index].args
    }
}

impl Flusher {
    /// Turns `tally` into batches of script arguments, numbered in order
    /// in each lane: every link's totals, and every link's history but
    /// that of the links [`Pace`](super::pace::Pace) defers, which stays
    /// in the tally for a later seal. The rest is left empty, the map of
    /// links still allocated unless far larger than this flush needed.
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
        let visit_ttl = settings.visits.days.as_secs();
        if self.sealed_visitors.len() >= SEALED_VISITORS_MAX {
            self.sealed_visitors.clear();
        }
        let whole = self.pace.whole(tally.entries, settings.backlog);
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
        let mut waiting = 0;
        tally.links.retain(|key, link| {
            let (head, field) = (scheme.head(key), scheme.field(key));
            for total in Total::ALL {
                let n = std::mem::take(&mut link.totals[total_slot(total)]);
                if n > 0 {
                    let name = || counts.total_hash(total, head);
                    (ops.bucket(head, Bucket::Total(total), name, 0)).push_pair(&[field], n);
                }
            }
            if !link.has_history() {
                return false;
            }
            if self.pace.defers(key.as_str(), whole) {
                waiting += link.history_entries();
                return true;
            }
            for (day, n) in link.days.drain(..) {
                let name = || counts.day_hash(day, head);
                (ops.bucket(head, Bucket::Day(day), name, days_kept)).push_pair(&[field], n);
            }
            for (hour, n) in link.hours.drain(..) {
                let name = || counts.hour_hash(hour, head);
                (ops.bucket(head, Bucket::Hour(hour), name, hours_kept)).push_pair(&[field], n);
            }
            for (minute, n) in link.minutes.drain(..) {
                let name = || counts.minute_hash(minute);
                (ops.minute(minute, name, minutes_kept)).push_pair(&[key.as_str()], n);
            }
            if !link.sources.is_empty() {
                let args = ops.push(Letter::Details, counts.details(key.as_str()), days_kept);
                let single = link.sources.len() == 1;
                for (source, n) in link.sources.drain() {
                    for (kind, value) in names.details(source) {
                        let field = kind.field_parts(value);
                        if single {
                            args.push_pair(&field, n);
                        } else {
                            *details.entry(field).or_default() += n;
                        }
                    }
                }
                for (field, n) in details.drain() {
                    args.push_pair(&field, n);
                }
            }
            let visitors = std::mem::take(&mut link.visitors);
            self.add_visitors(&mut ops, key, visitors, names, counts, days_kept);
            if !link.visits.is_empty() {
                let args = ops.push(Letter::List, counts.visits(key.as_str()), visit_ttl);
                seal_link_visits(&mut link.visits, key.as_str(), names, settings.visits, args);
            }
            false
        });
        for (kind, key, args) in tally.log.seal(whole, names, counts, settings.visits) {
            let (letter, ttl) = match kind {
                ListOrHash::Hash => (Letter::Hash, 0),
                ListOrHash::List => (Letter::List, visit_ttl),
            };
            ops.all.push(Op {
                letter,
                key,
                ttl,
                args,
            });
        }
        waiting += tally.log.entries();
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
        tally.entries = waiting;
        if tally.links.is_empty() && tally.log.is_empty() {
            // The links and visits waiting number their texts by these names.
            tally.names.clear();
        }
        // A burst of links is not kept allocated for good.
        if tally.links.capacity() > 4 * links.max(1024) {
            tally.links.shrink_to(links);
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
                let (width, lead) = (op.letter.width(), op.letter.lead());
                let mut done = lead;
                while done < op.args.len() {
                    // The call's own arguments, the batch's, this operation's.
                    let used = CALL_ARGS + batch.keys.len() + batch.args.len() + 1 + 4 + lead;
                    let room = BATCH_ARGS.saturating_sub(used).min(OP_ARGS) / width * width;
                    if room == 0 {
                        let next = self.batch(lane, counts, today);
                        self.sealed.push_back(std::mem::replace(&mut batch, next));
                        sealed.batches += 1;
                        continue;
                    }
                    let end = op.args.len().min(done + room);
                    batch.entries += (end - done) / width;
                    let key = if end == op.args.len() {
                        std::mem::take(&mut op.key)
                    } else {
                        op.key.clone()
                    };
                    batch.keys.push(key);
                    batch.args.push(op.letter.name());
                    batch.args.push_number(batch.keys.len() as u64 + 1);
                    batch.args.push_number(op.ttl);
                    batch.args.push_number((lead + end - done) as u64);
                    batch.args.extend_from(&op.args, 0..lead);
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

    /// Adds the visitors of `key` not sealed yet to `ops`, salted.
    fn add_visitors(
        &mut self,
        ops: &mut Ops,
        key: &Key,
        visitors: DayVisitors,
        names: &Names,
        counts: &CountNames,
        days_kept: u64,
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
            let args = ops.push(
                Letter::Visitors,
                counts.visitors(day, key.as_str()),
                days_kept,
            );
            for digest in new {
                let mut hash = sha1_smol::Sha1::new();
                hash.update(salt.as_bytes());
                hash.update(&digest);
                // The salted digest's first 8 bytes, in hex.
                args.push_hex(&hash.digest().bytes()[..8]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clicks::click::{Click, Outcome};
    use crate::clicks::flusher::pace::{Pace, HISTORY_EVERY, HISTORY_SEALS};
    use crate::clicks::flusher::tests::{click, tally_clicks, FIREFOX};
    use crate::clicks::store::ClickStore;
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

    /// The tally kept from one flush to the next starts each one empty:
    /// the same clicks seal into the same operations, details included,
    /// but for their visitor, sealed already.
    #[test]
    fn a_sealed_tally_starts_the_next_flush_empty() {
        fn referred(key: &str) -> Click<'_> {
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
        }
        let store = ClickStore::detached(1_000_000);
        let mut flusher = Flusher::new();
        flusher
            .salts
            .insert(ClickTime::now().day(), "salt".to_owned());
        let keys: Vec<String> = (0..50).map(|n| format!("Key{}", n % 20)).collect();
        let clicks: Vec<Click> = keys.iter().map(|key| referred(key)).collect();
        let mut sealed_flushes = Vec::new();
        for _ in 0..2 {
            // A new round each time: no link's history waits.
            flusher.pace = Pace::default();
            tally_clicks(&mut flusher, &clicks, &store);
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
            // A new round each time: no link's history waits (`Pace`).
            flusher.pace = Pace::default();
            tally_clicks(flusher, clicks, &store);
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

    /// A link clicked at every flush has its totals sealed at every one,
    /// and its history (day, hour, minute, details, visitors) at the first
    /// two seals of the round and then at its whole seal, summed; a link
    /// first clicked in between is sealed whole at once, and a link
    /// waiting with no new click still reaches the whole seal.
    #[test]
    fn a_hot_links_history_waits_for_the_whole_seal() {
        let store = ClickStore::detached(1_000_000);
        let mut flusher = Flusher::new();
        flusher
            .salts
            .insert(ClickTime::now().day(), "salt".to_owned());
        let seal = |clicks: &[Click], flusher: &mut Flusher| {
            tally_clicks(flusher, clicks, &store);
            let mut tally = std::mem::take(&mut flusher.open);
            flusher.seal(&mut tally, &store.names, &store.settings());
            flusher.open = tally;
            let keys: Vec<String> = (flusher.sealed.iter())
                .flat_map(|b| b.keys.iter().cloned())
                .collect();
            // In order: a field is followed by its count.
            let args: Vec<String> = (flusher.sealed.drain(..))
                .flat_map(|b| b.args.texts().map(str::to_owned).collect::<Vec<_>>())
                .collect();
            (keys, args)
        };
        let every = HISTORY_EVERY as usize;
        let taken = usize::from(HISTORY_SEALS);
        let history = |keys: &[String], link: &str| {
            keys.iter().any(|k| k == &format!("short:details:{link}"))
        };
        let (keys, _) = seal(&[click("Lm25", 1)], &mut flusher);
        assert!(keys.contains(&"short:clicks:Lm".to_owned()));
        assert!(history(&keys, "Lm25"), "a first click is sealed whole");
        for seal_number in 2..every {
            let clicks = if seal_number == taken + 1 {
                vec![click("Lm25", 1), click("Lm26", 2)]
            } else {
                vec![click("Lm25", 1)]
            };
            let (keys, args) = seal(&clicks, &mut flusher);
            assert!(
                keys.contains(&"short:clicks:Lm".to_owned()),
                "totals at every seal"
            );
            assert_eq!(
                history(&keys, "Lm25"),
                seal_number <= taken,
                "seal {seal_number}: Lm25's history waits once taken {taken} times"
            );
            if seal_number == taken + 1 {
                assert!(
                    history(&keys, "Lm26"),
                    "a link first clicked now is sealed whole"
                );
            } else if seal_number > taken {
                assert!(
                    !keys.iter().any(|k| k.starts_with("short:day:")
                        || k.starts_with("short:minute:")
                        || k.starts_with("short:visitors:")
                        || k.starts_with("short:hour:")
                        || k.starts_with("short:details:")),
                    "seal {seal_number}: no history: {keys:?}"
                );
            }
            assert!(
                args.windows(2).any(|pair| pair == ["25", "1"]),
                "seal {seal_number}: Lm25's one click in its total: {args:?}"
            );
        }
        assert!(flusher.open.entries > 0, "Lm25's history is held");
        // The whole seal, with no new click on Lm25: its waiting history
        // goes, the clicks of the seals it waited through summed.
        let (keys, args) = seal(&[click("Lm27", 3)], &mut flusher);
        assert!(history(&keys, "Lm25") && history(&keys, "Lm27"));
        // Its day's field, and its hour's unless an hour turned meanwhile
        // (Lm25 has no total in this seal).
        let waited = (every - 1 - taken).to_string();
        assert!(
            args.windows(2).any(|pair| pair == ["25", waited.as_str()]),
            "Lm25's {waited} clicks since its first seal, in one count: {args:?}"
        );
        assert_eq!(
            (flusher.open.entries, flusher.open.links.len()),
            (0, 0),
            "nothing waits after a whole seal"
        );
        assert!(flusher.open.is_empty());
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
        let keys: Vec<String> = (0..3000)
            .map(|n| format!("{}{}Key", letters[n % 62], letters[n / 62]))
            .collect();
        let clicks: Vec<Click> = (keys.iter().enumerate())
            .map(|(n, key)| click(key, u8::try_from(n % 200).unwrap()))
            .collect();
        tally_clicks(&mut flusher, &clicks, &store);
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
        // The 62 first characters' slots, and the minute hash's, which
        // moves with the minute and may share one of theirs.
        let minute_hashes: HashSet<u16> = flusher
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
        // One minute's hash, or two if the clicks straddle a minute.
        assert!((1..=2).contains(&minute_hashes.len()), "{minute_hashes:?}");
        assert_eq!(lanes, &first_characters | &minute_hashes);
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
