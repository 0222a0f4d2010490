//! The tally: clicks gathered per link between two flushes, their sources
//! (agent, referrer host, country) numbered once, within the backlog's
//! bound; and the flusher's taking of the store's clicks into it.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use smallvec::SmallVec;

use shortlink_core::clicks::{ClickTime, Day, Detail, Hour, Minute, Total};
use shortlink_core::rules::Chosen;
use shortlink_core::{Key, KeyScheme};

use super::visits::{push_bounded, DomainLog, LoggedVisit};
use super::{Flusher, Map, Set};
use crate::clicks::click::Outcome;
use crate::clicks::store::{add_pending, subtract_pending, ClickStore, CountSettings};
use crate::clicks::visitor::{Agent, Agents, Countries};

/// Clicks waiting to be sealed, gathered per link: a click costs one
/// lookup of its key, and more clicks on a link add to its counts instead
/// of making entries.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) clicks: u64,
    /// Fields and visitors the tally will write: what the backlog bounds.
    pub(super) entries: usize,
    /// Kept allocated from one flush to the next (see [`Flusher::seal`]).
    pub(super) links: Map<Key, LinkTally>,
    pub(super) names: Names,
    /// Clicks on links with a click limit, pending in the store until
    /// their batch is stored.
    pub(super) limited: HashMap<Box<str>, u64>,
    /// The domain's visits and orphans (see [`super::visits`]).
    pub(super) log: DomainLog,
}

/// Where people's clicks came from, as a tally numbers them: agent,
/// referrer host and country.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Source {
    pub(super) agent: u32,
    pub(super) referrer: u32,
    /// [`NO_COUNTRY`] when not known.
    pub(super) country: u32,
    /// The target a link with rules or a split sent the click to.
    pub(super) target: Option<Chosen>,
}

pub(super) const NO_COUNTRY: u32 = u32::MAX;

impl Source {
    /// How many detail fields a click from here counts in.
    fn fields(self) -> usize {
        4 + usize::from(self.country != NO_COUNTRY) + usize::from(self.target.is_some())
    }
}

/// The agents, referrer hosts and countries of a tally's clicks, each
/// numbered once: a person's click adds to its link's count of a
/// [`Source`], three numbers, where counting each detail under its field
/// name took four names written and looked up per click (`perf`: two
/// thirds of the flusher's time on hot links, with the visitor's digest).
#[derive(Default)]
pub(super) struct Names {
    /// Held so that their addresses, which number them, stay theirs.
    pub(super) agents: Vec<Rc<Agent>>,
    pub(super) agent_numbers: Map<usize, u32>,
    pub(super) referrers: Numbered,
    pub(super) countries: Numbered,
}

impl Names {
    /// The source of a click by `agent` from `referrer` and `country`.
    pub(super) fn source(
        &mut self,
        agent: &Rc<Agent>,
        referrer: &str,
        country: Option<&str>,
        target: Option<Chosen>,
    ) -> Source {
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
            target,
        }
    }

    pub(super) fn agent(&self, number: u32) -> &Agent {
        &self.agents[number as usize]
    }

    /// The detail fields `source` counts in, as kind and value.
    pub(super) fn details(&self, source: Source) -> impl Iterator<Item = (Detail, &str)> {
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
        .chain(source.target.map(|target| (Detail::Target, target.label())))
    }

    /// Forgets every name, keeping the room they took.
    pub(super) fn clear(&mut self) {
        self.agents.clear();
        self.agent_numbers.clear();
        self.referrers.clear();
        self.countries.clear();
    }
}

/// Names numbered in the order they were first seen.
#[derive(Default)]
pub(super) struct Numbered {
    pub(super) numbers: Map<Box<str>, u32>,
    pub(super) names: Vec<Box<str>>,
}

impl Numbered {
    pub(super) fn number(&mut self, name: &str) -> u32 {
        if let Some(number) = self.numbers.get(name) {
            return *number;
        }
        let number = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(name.into());
        self.numbers.insert(name.into(), number);
        number
    }

    pub(super) fn name(&self, number: u32) -> &str {
        self.names.get(number as usize).map_or("", |name| &**name)
    }

    fn clear(&mut self) {
        self.numbers.clear();
        self.names.clear();
    }
}

impl Tally {
    /// Neither clicks nor a link's history waiting (see [`super::pace`]).
    pub(super) fn is_empty(&self) -> bool {
        self.clicks == 0 && self.links.is_empty() && self.log.is_empty()
    }
}

/// The tally of the link `text` names; `None` if the scheme refuses it.
/// A key already tallied is found by its text, neither checked nor copied.
pub(super) fn link_of<'t>(
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
pub(super) struct LinkTally {
    /// In [`Total::ALL`]'s order.
    pub(super) totals: [u64; Total::ALL.len()],
    pub(super) days: Dated<Day>,
    pub(super) hours: Dated<Hour>,
    pub(super) minutes: Dated<Minute>,
    /// People's clicks by source: one map, empty and unallocated for bots
    /// and gone answers, keeps the tally small, and the map of links cheap
    /// to grow.
    pub(super) sources: Map<Source, u64>,
    /// People by address and agent (numbered in [`Names`]); hashed and
    /// salted when sealed.
    pub(super) visitors: DayVisitors,
    /// The newest visits, oldest first, within the log's bound per link.
    pub(super) visits: VecDeque<LoggedVisit>,
}

impl LinkTally {
    /// Whether the link has counts besides its totals: its history.
    pub(super) fn has_history(&self) -> bool {
        !(self.days.is_empty()
            && self.hours.is_empty()
            && self.minutes.is_empty()
            && self.sources.is_empty()
            && self.visitors.is_empty()
            && self.visits.is_empty())
    }

    /// The backlog's entries the link's history holds, counted as the
    /// tally counts them.
    pub(super) fn history_entries(&self) -> usize {
        self.days.len()
            + self.hours.len()
            + self.minutes.len()
            + self
                .sources
                .keys()
                .map(|source| source.fields())
                .sum::<usize>()
            + self
                .visitors
                .iter()
                .map(|(_, people)| people.len())
                .sum::<usize>()
            + self.visits.len()
    }

    /// A click that adds to one of the link's totals only: a bot's, or an
    /// answer after expiry or deletion.
    fn add_total(&mut self, total: Total, entries: &mut usize) {
        let count = &mut self.totals[total_slot(total)];
        *entries += usize::from(*count == 0);
        *count += 1;
    }

    /// A person's click at `at` in the counts alone: total, day, hour and
    /// minute, without its details and visitor.
    fn add_person_counts(&mut self, at: ClickTime, entries: &mut usize) {
        self.add_total(Total::People, entries);
        add_dated(&mut self.days, at.day(), entries);
        add_dated(&mut self.hours, at.hour(), entries);
        add_dated(&mut self.minutes, at.minute(), entries);
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
        self.add_person_counts(at, entries);
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

/// Counts by day, hour or minute: one, but for a tally that spans the
/// turn of one, kept in place (a fresh link's first click made three
/// vectors, three allocations).
pub(super) type Dated<T> = SmallVec<[(T, u64); 1]>;

/// People by address and agent, for each day of a tally (one, but across
/// midnight).
pub(super) type DayVisitors = SmallVec<[(Day, Set<(IpAddr, u32)>); 1]>;

/// Adds a click to the count of `at`, a new entry if `at` has none yet.
pub(super) fn add_dated<T: PartialEq>(counts: &mut Dated<T>, at: T, entries: &mut usize) {
    if let Some((_, count)) = counts.iter_mut().rev().find(|(known, _)| *known == at) {
        *count += 1;
    } else {
        counts.push((at, 1));
        *entries += 1;
    }
}

/// Bytes of clicks taken out of the store's queue bound, given back to it
/// when dropped: once a tally rather than once a click, since every worker
/// writes that counter as it records a click and each write of the
/// flusher's moved its line between the cores; and on a panic too, so that
/// what was tallied leaves the bound.
struct Released<'s> {
    store: &'s ClickStore,
    bytes: usize,
}

impl Drop for Released<'_> {
    fn drop(&mut self) {
        self.store.release(self.bytes);
    }
}

pub(super) const fn total_slot(total: Total) -> usize {
    match total {
        Total::People => 0,
        Total::Bots => 1,
        Total::Gone => 2,
    }
}

impl Flusher {
    /// Tallies the waiting clicks (`Flusher::carried`) in order while the
    /// backlog has room, and answers how many it took; the others wait for
    /// room, still in the store's queue bound, rather than being dropped.
    /// A limited click is held by the tally as it is taken, and the
    /// clicks taken leave the queue bound when the tally ends, even by a
    /// panic, so that a panic abandoning the tally finds each click in one
    /// place: waiting, or tallied.
    pub(super) fn tally(&mut self, settings: &CountSettings, store: &ClickStore) -> usize {
        if self.carried.is_empty() {
            return 0;
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
        let sealed: usize = self.sealed.iter().map(|b| b.entries).sum();
        let room = settings.backlog.saturating_sub(sealed);
        // Past half the backlog a person's click counts without its
        // details and visitor: a fresh link's click then makes 4 entries,
        // not about 10, and costs the clicks' Redis about a third as much,
        // so a pipeline behind (Redis away, or slower than the clicks come)
        // keeps every click in the totals longer and catches up sooner.
        let whole_room = (settings.backlog / 2).saturating_sub(sealed);
        let mut without_details = 0;
        let mut never_stored = HashMap::new();
        let Tally {
            clicks: tallied,
            entries,
            links,
            names,
            limited,
            log,
        } = &mut self.open;
        let bounds = settings.visits;
        let mut taken = 0;
        let mut released = Released { store, bytes: 0 };
        // Past the backlog's room the rest wait, in order, for Redis to
        // take what is sealed.
        while *entries < room {
            let Some(click) = self.carried.pop_front() else {
                break;
            };
            taken += 1;
            released.bytes += click.bytes();
            // Whole: with details, visitor and visit.
            let whole = *entries < whole_room;
            let country_of = |click: &crate::clicks::Click<'_>| {
                countries.and_then(|c| click.client.and_then(|ip| c.country(ip)))
            };
            if let Outcome::Orphan(kind) = click.outcome {
                *tallied += 1;
                let agent = agents.classify(click.user_agent());
                let country = if whole { country_of(&click) } else { None };
                let bot = click.head || agent.bot;
                let referrer = click.referrer().unwrap_or_default();
                let visit = names.visit(&agent, referrer, country, None, click.at_us, bot);
                log.orphan(kind, click.key(), visit, bounds, entries);
                continue;
            }
            if click.outcome == Outcome::Limited {
                add_pending(limited, click.key(), 1);
            }
            // `count` records only keys that pass the rules: this turns
            // the text back into the `Key` the layout is named from.
            let text = click.key();
            let Some(link) = link_of(links, text, store.names.scheme()) else {
                if click.outcome == Outcome::Limited {
                    subtract_pending(limited, text, 1);
                    add_pending(&mut never_stored, text, 1);
                }
                continue;
            };
            *tallied += 1;
            // Gone answers count in a total only, and make no visit.
            if click.outcome == Outcome::Gone {
                link.add_total(Total::Gone, entries);
                continue;
            }
            let logged = whole && bounds.on();
            // A bot's click counts in a total only, but for its visit: its
            // agent (a HEAD is a bot's whatever it says) and country are
            // looked up only for that.
            let agent = (logged || !click.head).then(|| agents.classify(click.user_agent()));
            let bot = click.head || agent.as_ref().is_none_or(|agent| agent.bot);
            let country = if logged || (whole && !bot) {
                country_of(&click)
            } else {
                None
            };
            if let (true, Some(agent)) = (logged, &agent) {
                let referrer = click.referrer().unwrap_or_default();
                let target = click.target();
                let visit = names.visit(agent, referrer, country, target, click.at_us, bot);
                push_bounded(&mut link.visits, visit, bounds.per_link, entries);
                log.link_visit(text, visit, bounds, entries);
            }
            let Some(agent) = agent.filter(|_| !bot) else {
                link.add_total(Total::Bots, entries);
                continue;
            };
            if !whole {
                link.add_person_counts(click.at(), entries);
                without_details += 1;
                continue;
            }
            let referrer = click.referrer().unwrap_or("(none)");
            let source = names.source(&agent, referrer, country, click.target());
            link.add_person(click.at(), source, click.client, entries);
        }
        (store.counters.without_details).fetch_add(without_details, Ordering::Relaxed);
        store.settle(&never_stored);
        taken
    }

    /// Tallies clicks on limited links that found the store's queues full
    /// (see [`ClickStore::take_overflow`]): in their links' totals of
    /// people's clicks, whatever the backlog's room, so that they count
    /// against the limits as the clicks they stand for would have.
    pub(super) fn tally_overflow(&mut self, overflow: HashMap<Box<str>, u64>, store: &ClickStore) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clicks::click::Click;
    use crate::clicks::flusher::tests::{click, tally_clicks, FIREFOX};
    use std::collections::BTreeMap;

    #[test]
    fn slots_follow_the_order_of_all() {
        for (slot, total) in Total::ALL.into_iter().enumerate() {
            assert_eq!(total_slot(total), slot, "{total:?}");
        }
    }

    #[test]
    fn more_clicks_on_a_tallied_link_cost_no_entries() {
        let store = ClickStore::detached(1000);
        let mut flusher = Flusher::new();
        let clicks: Vec<Click> = (0..500).map(|_| click("Lm25", 1)).collect();
        tally_clicks(&mut flusher, &clicks, &store);
        let entries = flusher.open.entries;
        tally_clicks(&mut flusher, &clicks, &store);
        assert_eq!(flusher.open.entries, entries);
        assert_eq!(flusher.open.clicks, 1000);
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_full_backlog_leaves_clicks_for_later() {
        let store = ClickStore::detached(1000);
        let mut flusher = Flusher::new();
        let keys: Vec<String> = (0..1000).map(|n| format!("Key{n}")).collect();
        let clicks: Vec<Click> = keys.iter().map(|key| click(key, 1)).collect();
        let taken = tally_clicks(&mut flusher, &clicks, &store);
        assert!(taken < 1000, "1000 links tally far more than 1000 entries");
        assert_eq!(flusher.open.clicks, taken as u64, "a prefix, in order");
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 0);
        // Sealed batches waiting for Redis take their share of the backlog.
        let mut tally = std::mem::take(&mut flusher.open);
        flusher.seal(&mut tally, &store.names, &store.settings());
        assert_eq!(tally_clicks(&mut flusher, &clicks[taken..], &store), 0);
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 0);
    }

    /// Past half the backlog, people's clicks on fresh links count in
    /// their totals, days, hours and minutes, and no longer in details or
    /// visitors: each then takes 4 entries, so more clicks are kept.
    #[test]
    fn past_half_the_backlog_clicks_count_without_details() {
        let store = ClickStore::detached(2000);
        let mut flusher = Flusher::new();
        let keys: Vec<String> = (0..200).map(|n| format!("Ky{n:03}")).collect();
        let clicks: Vec<Click> = keys.iter().map(|key| click(key, 1)).collect();
        tally_clicks(&mut flusher, &clicks, &store);
        let without = store.counters.without_details.load(Ordering::Relaxed);
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 0);
        // A whole click of a fresh link is 9 entries (total, day, hour,
        // minute, four details, a visitor): half of 2,000 holds 112.
        assert_eq!(200 - without, 112, "clicks counted whole");
        let mut tally = std::mem::take(&mut flusher.open);
        flusher.seal(&mut tally, &store.names, &store.settings());
        let totals = sealed_counts(&flusher, "short:clicks:Ky");
        assert_eq!(
            totals.values().sum::<u64>(),
            200,
            "every click in the totals"
        );
        let keys_named = |prefix: &str| {
            (flusher.sealed.iter())
                .flat_map(|batch| batch.keys.iter())
                .filter(|key| key.starts_with(prefix))
                .count() as u64
        };
        assert_eq!(keys_named("short:details:"), 200 - without);
        assert_eq!(keys_named("short:visitors:"), 200 - without);
    }

    /// The fields and counts the sealed batches add to `hash`.
    fn sealed_counts(flusher: &Flusher, hash: &str) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for batch in &flusher.sealed {
            let args: Vec<String> = batch.args.texts().map(str::to_owned).collect();
            let mut i = 0;
            while i < args.len() {
                let key = &batch.keys[args[i + 1].parse::<usize>().unwrap() - 2];
                let n: usize = args[i + 3].parse().unwrap();
                let pairs = &args[i + 4..i + 4 + n];
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

    /// Past the backlog's room, clicks on links with a click limit wait
    /// with the others, held against their limits all the while; a flusher
    /// that gives up settles them, counts them dropped, and frees their
    /// room in the queues' bound.
    #[test]
    fn limited_clicks_left_for_later_stay_held() {
        fn click(outcome: Outcome, key: &str) -> Click<'_> {
            let address = IpAddr::from([192, 0, 2, 1]);
            Click::new(outcome, false, Some(address), key, FIREFOX, None, None).unwrap()
        }
        let store = ClickStore::detached(1);
        let mut settings = store.settings();
        settings.queue_bytes = 6 * click(Outcome::Limited, "Key0").bytes();
        store.set(settings.clone(), None);
        let outcomes = [Outcome::Limited; 5].into_iter().chain([Outcome::Redirect]);
        let keys: Vec<String> = (0..6).map(|n| format!("Key{n}")).collect();
        for (key, outcome) in keys.iter().zip(outcomes) {
            store.record(&click(outcome, key));
        }
        let mut flusher = Flusher::new();
        flusher.carried.extend(store.take());
        // A backlog of one entry takes the first click; the others wait.
        assert_eq!(flusher.tally(&settings, &store), 1);
        let held: Vec<u64> = keys.iter().map(|key| store.pending(key)).collect();
        assert_eq!(held, [1, 1, 1, 1, 1, 0]);
        assert_eq!(flusher.open.limited.len(), 1, "the tally holds its own");
        assert_eq!(flusher.carried.len(), 5);
        flusher.abandon(&store);
        assert!(keys.iter().all(|key| store.pending(key) == 0));
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 6);
        // All their room is free again.
        for key in &keys {
            store.record(&click(Outcome::Redirect, key));
        }
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 6);
    }

    /// Clicks left for later are tallied, in order, once Redis takes what
    /// was sealed: none twice, none lost.
    #[test]
    fn clicks_left_for_later_are_tallied_once_there_is_room() {
        let store = ClickStore::detached(1000);
        let mut flusher = Flusher::new();
        let keys: Vec<String> = (0..300).map(|n| format!("Key{n:03}")).collect();
        let clicks: Vec<Click> = keys.iter().map(|key| click(key, 1)).collect();
        let mut taken = vec![tally_clicks(&mut flusher, &clicks, &store)];
        let mut tallied_keys: Vec<String> = Vec::new();
        while !flusher.carried.is_empty() {
            tallied_keys.extend(flusher.open.links.keys().map(ToString::to_string));
            let mut tally = std::mem::take(&mut flusher.open);
            flusher.seal(&mut tally, &store.names, &store.settings());
            flusher.open = tally;
            // As if Redis applied every sealed batch.
            flusher.sealed.clear();
            taken.push(flusher.tally(&store.settings(), &store));
            assert!(taken.len() < 10, "each round takes some: {taken:?}");
        }
        tallied_keys.extend(flusher.open.links.keys().map(ToString::to_string));
        assert!(taken[0] < 300 && taken.len() > 1, "{taken:?}");
        assert_eq!(taken.iter().sum::<usize>(), 300);
        tallied_keys.sort();
        let expected: Vec<String> = clicks.iter().map(|c| c.key().to_owned()).collect();
        assert_eq!(tallied_keys, expected, "each click once");
        assert_eq!(store.counters.dropped.load(Ordering::Relaxed), 0);
    }

    /// Clicks on a limited link that found the queues full reach the
    /// link's total of people's clicks, held against the limit meanwhile.
    #[test]
    fn limited_clicks_past_full_queues_reach_the_totals() {
        let store = ClickStore::detached(1_000_000);
        let mut settings = store.settings();
        settings.queue_bytes = 0;
        store.set(settings, None);
        for _ in 0..3 {
            store.record(
                &Click::new(Outcome::Limited, false, None, "Lm25", "", None, None).unwrap(),
            );
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
}
