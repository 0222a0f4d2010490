//! The operation encoding: a tally sealed into batches of arguments of the
//! flush script (`apply_batch.lua`), one operation per Redis key, each
//! batch in its lane (a cluster's slot) and numbered in it, bounded in
//! arguments; visitors salted and hashed on the way.

use std::collections::BTreeMap;
use std::hash::BuildHasher as _;
use std::net::IpAddr;

use redis_target::cluster::slot_tag;
use shortlink_core::clicks::{ClickTime, CountNames, Day, Total, MINUTES_KEPT};
use shortlink_core::Key;

use super::batches::{Batch, SealedTally};
use super::tally::{total_slot, Names, Tally};
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

/// What the flush script does with one Redis key (see [`APPLY_BATCH`](super::APPLY_BATCH)).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clicks::flusher::tests::{click, FIREFOX};
    use crate::clicks::store::{Click, ClickStore, Outcome};
    use redis_target::cluster::key_slot;
    use shortlink_core::clicks::Layout;
    use std::collections::HashSet;

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
