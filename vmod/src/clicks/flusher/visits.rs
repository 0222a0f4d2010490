//! The visit log's share of a tally: each click's visit, numbered by the
//! tally's names as its sources are, the newest kept per link and per
//! domain within the bounds (older ones in the tally make way as they
//! would in Redis, so a flood costs the bound, not the flood); orphan
//! visits counted and kept the same way; and their records sealed into
//! list operations of the flush script.
//!
//! A link's visits go to Redis with its history (see [`super::pace`]); the
//! domain's and the orphans' lists at a whole seal, or at once while they
//! hold few: a quiet domain's visits show within a flush, a busy one's
//! cost Redis one push of at most its bound every round.

use std::collections::VecDeque;
use std::rc::Rc;

use shortlink_core::clicks::visits::{Visit, VisitKind};
use shortlink_core::clicks::{ClickTime, CountNames};
use shortlink_core::rules::Chosen;

use super::args::Args;
use super::tally::{Names, NO_COUNTRY};
use crate::clicks::store::VisitBounds;
use crate::clicks::visitor::Agent;

/// Visits of a domain's list or its orphans' waiting below which a seal
/// takes them at once, whole or not.
const PROMPT_VISITS: usize = 100;

/// One visit, its texts numbered by the tally's [`Names`].
#[derive(Debug, Clone, Copy)]
pub(super) struct LoggedVisit {
    /// Unix microseconds.
    at_us: u64,
    bot: bool,
    agent: u32,
    referrer: u32,
    country: u32,
    target: Option<Chosen>,
}

/// The visits of a tally that belong to no one link: the domain's list,
/// its orphans, and the orphans' counts.
#[derive(Default)]
pub(super) struct DomainLog {
    /// Visits to any link, with its key; oldest first.
    links: VecDeque<(Box<str>, LoggedVisit)>,
    /// Orphan visits with their kind and path; oldest first.
    orphans: VecDeque<(VisitKind, Box<str>, LoggedVisit)>,
    /// Orphan visits by kind and bot (see [`orphan_slot`]).
    orphan_counts: [u64; 6],
}

fn orphan_slot(kind: VisitKind, bot: bool) -> usize {
    let kind = match kind {
        VisitKind::BaseUrl => 0,
        VisitKind::InvalidShortUrl => 1,
        VisitKind::Link | VisitKind::Regular404 => 2,
    };
    2 * kind + usize::from(bot)
}

/// Pushes `item` at the back of `list`, within `bound`: the oldest makes
/// way when full; a new entry in the tally otherwise.
pub(super) fn push_bounded<T>(list: &mut VecDeque<T>, item: T, bound: usize, entries: &mut usize) {
    if bound == 0 {
        return;
    }
    if list.len() >= bound {
        list.pop_front();
    } else {
        *entries += 1;
    }
    list.push_back(item);
}

impl Names {
    /// The visit of a click by `agent` at `at`, its texts numbered.
    pub(super) fn visit(
        &mut self,
        agent: &Rc<Agent>,
        referrer: &str,
        country: Option<&str>,
        target: Option<Chosen>,
        at_us: u64,
        bot: bool,
    ) -> LoggedVisit {
        let source = self.source(agent, referrer, country, target);
        LoggedVisit {
            at_us,
            bot,
            agent: source.agent,
            referrer: source.referrer,
            country: source.country,
            target,
        }
    }

    /// `visit` as its record.
    fn record(&self, visit: &LoggedVisit, kind: VisitKind, asked: &str, out: &mut String) {
        let agent = self.agent(visit.agent);
        let country = if visit.country == NO_COUNTRY {
            ""
        } else {
            self.countries.name(visit.country)
        };
        Visit {
            at_us: visit.at_us,
            kind,
            bot: visit.bot,
            country,
            target: visit.target.map_or("", |target| target.label()),
            asked,
            referrer: self.referrers.name(visit.referrer),
            agent: &agent.header,
        }
        .write(out);
    }
}

impl DomainLog {
    /// A visit to the link `key`, for the domain's list.
    pub(super) fn link_visit(
        &mut self,
        key: &str,
        visit: LoggedVisit,
        bounds: VisitBounds,
        entries: &mut usize,
    ) {
        let item = (Box::from(key), visit);
        push_bounded(&mut self.links, item, bounds.per_domain, entries);
    }

    /// An orphan visit: counted whatever the bounds, kept within them.
    pub(super) fn orphan(
        &mut self,
        kind: VisitKind,
        asked: &str,
        visit: LoggedVisit,
        bounds: VisitBounds,
        entries: &mut usize,
    ) {
        let count = &mut self.orphan_counts[orphan_slot(kind, visit.bot)];
        *entries += usize::from(*count == 0);
        *count += 1;
        let item = (kind, Box::from(asked), visit);
        push_bounded(&mut self.orphans, item, bounds.per_domain, entries);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.links.is_empty() && self.orphans.is_empty() && self.orphan_counts == [0; 6]
    }

    /// Entries the log holds, as the tally counts them.
    pub(super) fn entries(&self) -> usize {
        self.links.len()
            + self.orphans.len()
            + self.orphan_counts.iter().filter(|n| **n > 0).count()
    }

    /// The log's operations for this seal, each its kind, key and
    /// arguments: the orphans' counts always; each list if `whole`, or
    /// while it holds few. What waits stays.
    pub(super) fn seal(
        &mut self,
        whole: bool,
        names: &Names,
        counts: &CountNames,
        bounds: VisitBounds,
    ) -> Vec<(ListOrHash, String, Args)> {
        let mut ops = Vec::new();
        if self.orphan_counts != [0; 6] {
            let args = op(&mut ops, ListOrHash::Hash, counts.orphan_counts());
            for kind in VisitKind::ORPHANS {
                for bot in [false, true] {
                    let n = std::mem::take(&mut self.orphan_counts[orphan_slot(kind, bot)]);
                    if let (true, Some(field)) = (n > 0, CountNames::orphan_field(kind, bot)) {
                        args.push_pair(&[&field], n);
                    }
                }
            }
        }
        let mut record = String::new();
        if !self.links.is_empty() && (whole || self.links.len() <= PROMPT_VISITS) {
            let args = op(&mut ops, ListOrHash::List, counts.domain_visits());
            push_lead(args, bounds.per_domain, bounds);
            for (key, visit) in self.links.drain(..) {
                record.clear();
                names.record(&visit, VisitKind::Link, &key, &mut record);
                args.push(&record);
            }
        }
        if !self.orphans.is_empty() && (whole || self.orphans.len() <= PROMPT_VISITS) {
            let args = op(&mut ops, ListOrHash::List, counts.orphan_visits());
            push_lead(args, bounds.per_domain, bounds);
            for (kind, asked, visit) in self.orphans.drain(..) {
                record.clear();
                names.record(&visit, kind, &asked, &mut record);
                args.push(&record);
            }
        }
        ops
    }
}

/// A new operation of `kind` on `key` at the end of `ops`: its arguments.
fn op(ops: &mut Vec<(ListOrHash, String, Args)>, kind: ListOrHash, key: String) -> &mut Args {
    ops.push((kind, key, Args::default()));
    let last = ops.len() - 1;
    &mut ops[last].2
}

/// Which operation [`DomainLog::seal`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ListOrHash {
    List,
    Hash,
}

/// A list operation's lead: its bound and the oldest time it keeps.
fn push_lead(args: &mut Args, bound: usize, bounds: VisitBounds) {
    args.push_number(bound as u64);
    args.push_number(ClickTime::now().before(bounds.days.as_secs()).0);
}

/// The records of a link's `visits`, oldest first, after the lead, into
/// `args`.
pub(super) fn seal_link_visits(
    visits: &mut VecDeque<LoggedVisit>,
    key: &str,
    names: &Names,
    bounds: VisitBounds,
    args: &mut Args,
) {
    push_lead(args, bounds.per_link, bounds);
    let mut record = String::new();
    for visit in visits.drain(..) {
        record.clear();
        names.record(&visit, VisitKind::Link, key, &mut record);
        args.push(&record);
    }
}

/// Arguments of a list operation before its records, repeated in each
/// part of one split across calls.
pub(super) const LIST_LEAD: usize = 2;

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::time::Duration;

    use shortlink_core::clicks::Layout;
    use shortlink_core::KeyScheme;

    use super::*;
    use crate::clicks::click::{Click, Outcome};
    use crate::clicks::flusher::tests::FIREFOX;
    use crate::clicks::flusher::Flusher;
    use crate::clicks::store::{ClickStore, Reach};

    fn list(redis: &test_support::Redis, key: &str) -> Vec<String> {
        redis.query(&["LRANGE", key, "0", "-1"]).unwrap()
    }

    /// Records 12 clicks on `Lm25` (every fourth a bot's, each from its
    /// own referrer), a gone answer and a HEAD on `Lm26`, and 20 orphan
    /// visits; answers the orphans' paths in order.
    fn record_sample(store: &ClickStore) -> Vec<String> {
        let client = Some(IpAddr::from([192, 0, 2, 1]));
        let referrers: Vec<String> = (0..12).map(|n| format!("r{n}.example")).collect();
        for (n, referrer) in referrers.iter().enumerate() {
            let agent = if n % 4 == 3 { "curl/8.0" } else { FIREFOX };
            let click = Click::new(
                Outcome::Redirect,
                false,
                client,
                "Lm25",
                agent,
                Some(referrer),
                None,
            );
            store.record(&click.unwrap());
        }
        let gone = Click::new(Outcome::Gone, false, client, "Lm26", FIREFOX, None, None);
        store.record(&gone.unwrap());
        let once = Click::new(Outcome::Redirect, true, client, "Lm26", FIREFOX, None, None);
        store.record(&once.unwrap());
        let kinds = [
            VisitKind::InvalidShortUrl,
            VisitKind::Regular404,
            VisitKind::BaseUrl,
        ];
        let paths: Vec<String> = (0..20).map(|n| format!("/junk{n}")).collect();
        for (n, path) in paths.iter().enumerate() {
            let agent = if n % 2 == 0 { "curl/8.0" } else { FIREFOX };
            let kind = kinds[n % 3];
            let click = Click::new(
                Outcome::Orphan(kind),
                false,
                client,
                path,
                agent,
                None,
                None,
            );
            store.record(&click.unwrap());
        }
        paths
    }

    /// Clicks through the flusher into a real Redis: each link keeps its
    /// newest visits, the domain its newest across links and its newest
    /// orphans, each list within its bound, newest first; orphans are
    /// counted whole by kind and bot; records past the days kept leave.
    #[test]
    fn the_log_keeps_the_newest_visits_within_its_bounds() {
        let dir = test_support::work_dir("flush-visits").unwrap();
        let redis =
            test_support::Redis::start(&dir, test_support::Persistence::Scratch, "").unwrap();
        let mut settings = ClickStore::detached(1_000_000).settings();
        settings.visits = VisitBounds {
            per_link: 5,
            per_domain: 8,
            days: Duration::from_hours(24),
        };
        let reach = Reach::Master(
            redis_target::Locator::open(&redis.url, settings.redis_timeouts()).unwrap(),
        );
        let names = CountNames::new(&KeyScheme::default(), Layout::Plain).unwrap();
        let store = ClickStore::new(&redis.url, reach, names, settings.clone(), None);
        // A record a day and more old, by hand, at the tail of a list.
        let _: i64 = redis
            .query(&["RPUSH", "short:visits:Lm26", "1000\tvp\t\t\tLm26\t\t"])
            .unwrap();
        let paths = record_sample(&store);
        let mut flusher = Flusher::new();
        flusher.tick(&store, &settings);
        assert_eq!(
            store
                .counters
                .flush_failures
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );

        let link = list(&redis, "short:visits:Lm25");
        let visits: Vec<Visit> = link.iter().map(|r| Visit::parse(r).unwrap()).collect();
        let seen: Vec<&str> = visits.iter().map(|v| v.referrer).collect();
        assert_eq!(
            seen,
            [
                "r11.example",
                "r10.example",
                "r9.example",
                "r8.example",
                "r7.example"
            ]
        );
        let bots: Vec<bool> = visits.iter().map(|v| v.bot).collect();
        assert_eq!(bots, [true, false, false, false, true], "curl's are bots");
        assert!(visits
            .iter()
            .all(|v| v.kind == VisitKind::Link && v.asked == "Lm25"));
        assert_eq!(visits[1].agent, FIREFOX);

        let other = list(&redis, "short:visits:Lm26");
        assert_eq!(
            other.len(),
            1,
            "the HEAD's visit (a bot's); no gone answer; none too old"
        );
        assert!(Visit::parse(&other[0]).unwrap().bot);

        let domain = list(&redis, "short:visits:@links");
        assert_eq!(domain.len(), 8);
        let asked: Vec<&str> = domain
            .iter()
            .map(|r| Visit::parse(r).unwrap().asked)
            .collect();
        assert_eq!(asked[0], "Lm26", "the newest first");
        assert!(asked[1..].iter().all(|key| *key == "Lm25"));

        let orphans = list(&redis, "short:visits:@orphans");
        let asked: Vec<String> = orphans
            .iter()
            .map(|r| Visit::parse(r).unwrap().asked.to_owned())
            .collect();
        let newest: Vec<String> = paths.iter().rev().take(8).cloned().collect();
        assert_eq!(asked, newest);
        let counted: std::collections::BTreeMap<String, u64> =
            redis.query(&["HGETALL", "short:orphans"]).unwrap();
        assert_eq!(
            counted.values().sum::<u64>(),
            20,
            "every orphan counted: {counted:?}"
        );
        assert_eq!(
            counted["invalid_short_url"] + counted["invalid_short_url:bots"],
            7
        );
        let ttl: i64 = redis.query(&["TTL", "short:visits:Lm25"]).unwrap();
        assert!(ttl > 86_000 && ttl <= 86_400, "kept the days: {ttl}");
        let ttl: i64 = redis.query(&["TTL", "short:orphans"]).unwrap();
        assert_eq!(ttl, -1, "a total");

        a_later_flush_cuts_the_full_list(&redis, &store, &settings, &mut flusher);
        drop(redis);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A later flush onto `short:visits:Lm25`, full: its oldest make way
    /// in Redis too.
    fn a_later_flush_cuts_the_full_list(
        redis: &test_support::Redis,
        store: &ClickStore,
        settings: &crate::clicks::CountSettings,
        flusher: &mut Flusher,
    ) {
        for referrer in ["later1.example", "later2.example"] {
            let click = Click::new(
                Outcome::Redirect,
                false,
                None,
                "Lm25",
                FIREFOX,
                Some(referrer),
                None,
            );
            store.record(&click.unwrap());
        }
        flusher.tick(store, settings);
        let link = list(redis, "short:visits:Lm25");
        let seen: Vec<&str> = (link.iter())
            .map(|r| Visit::parse(r).unwrap().referrer)
            .collect();
        let newest = [
            "later2.example",
            "later1.example",
            "r11.example",
            "r10.example",
            "r9.example",
        ];
        assert_eq!(seen, newest);
    }

    /// Off, the log writes nothing and the tally holds no visit.
    #[test]
    fn an_empty_bound_keeps_no_visit() {
        let store = ClickStore::detached(1000);
        let mut settings = store.settings();
        settings.visits = VisitBounds {
            per_link: 0,
            per_domain: 0,
            days: Duration::from_hours(1),
        };
        store.set(settings, None);
        assert!(!store.visits_on());
        let mut flusher = Flusher::new();
        let clicks: Vec<Click> = (0..10)
            .map(|n| crate::clicks::flusher::tests::click("Lm25", n))
            .collect();
        crate::clicks::flusher::tests::tally_clicks(&mut flusher, &clicks, &store);
        assert!(flusher.open.log.is_empty());
        assert!(flusher
            .open
            .links
            .values()
            .all(|link| link.visits.is_empty()));
    }
}
