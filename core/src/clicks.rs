//! Where click counts live in Redis, next to the links they count.
//!
//! Varnish (the VMOD) writes these and the writer reads them; both take the
//! names from here. Counts of key `Lm25` (prefix `short:`, split 2) follow
//! the link's own layout, so they stay in small compact hashes:
//!
//! | what | Redis | written with |
//! |---|---|---|
//! | clicks by people, all time | hash `short:clicks:Lm`, field `25` | `HINCRBY` |
//! | clicks by bots, all time | hash `short:bots:Lm`, field `25` | `HINCRBY` |
//! | answers after expiry or delete (410, or the fallback) | hash `short:gone:Lm`, field `25` | `HINCRBY` |
//! | clicks by people on a day (UTC) | hash `short:day:20261123:Lm`, field `25` | `HINCRBY`, expires after the days kept |
//! | clicks by people in an hour (UTC) | hash `short:hour:2026112314:Lm`, field `25` | `HINCRBY`, expires after the hours kept |
//! | clicks of every link in a minute | hash `short:minute:202611231405`, field `Lm25` | `HINCRBY`, expires after an hour (a sorted set before 2026-11-27, which readers still read) |
//! | unique visitors on a day | `HyperLogLog` `short:visitors:20261123:Lm25` | `PFADD`, expires after the days kept |
//! | referrer hosts, countries, devices, browsers, systems | hash `short:details:Lm25`, fields `referrer:example.org`, `country:DE`, `device:mobile`, `browser:Firefox`, `os:Android`, `target:r1` (links with rules or a split) | `HINCRBY`, at most [`MAX_DETAIL_FIELDS`] fields, expires after the days kept from the link's last click |
//!
//! A name with a `:` after the prefix never names a link's hash (keys have
//! no `:`), so counts and links cannot collide.
//!
//! In a Redis Cluster ([`Layout::Cluster`]) the names about one link carry
//! its key's first character as a hash tag, so that they share one slot
//! with those of every key starting alike: 64 slots in all.
//!
//! | plain | cluster |
//! |---|---|
//! | `short:clicks:Lm`, `short:bots:Lm`, `short:gone:Lm` | `short:clicks:{L}m`, `short:bots:{L}m`, `short:gone:{L}m` |
//! | `short:day:20261123:Lm`, `short:hour:2026112314:Lm` | `short:day:20261123:{L}m`, `short:hour:2026112314:{L}m` |
//! | `short:visitors:20261123:Lm25`, `short:details:Lm25` | `short:visitors:20261123:{L}m25`, `short:details:{L}m25` |
//! | `short:applied:20261123` | `short:applied:20261123:{<tag>}`, one per slot |
//!
//! Minute hashes, salts and the flushers' heartbeats keep their names.
//! The visit log, one record per click, is [`visits`]'.
//! `short:applied:<day>` notes, per flusher, the last batch of counts it
//! sealed on `day` and applied (see the VMOD's `clicks/flusher/`); it is kept two
//! days from its first note.

pub mod visits;

use std::fmt;

use crate::KeyScheme;

/// How long per-minute counts are kept: the longest window trending reads.
pub const MINUTES_KEPT: u64 = 60;

/// Most distinct fields kept in one link's details hash; further referrer
/// hosts (or other values) count under `<kind>:other`, so a flood of made-up
/// referrers cannot grow a link's hash without end. With
/// [`MAX_DETAIL_VALUE`] this bounds a hash's bytes ([`MAX_DETAIL_BYTES`]).
pub const MAX_DETAIL_FIELDS: usize = 256;

/// Longest detail value counted under its own field (a referrer's host, a
/// browser's or system's family); a longer one counts under `<kind>:other`.
/// Real hosts and families are far shorter; made-up ones of 253 bytes made
/// a link's details 296 KB in Redis.
pub const MAX_DETAIL_VALUE: usize = 64;

/// Most bytes of a details field: the longest kind, `:`, the longest value.
pub const MAX_DETAIL_FIELD: usize = "referrer:".len() + MAX_DETAIL_VALUE;

/// Most bytes of field names and counts in one link's details hash
/// ([`MAX_DETAIL_FIELDS`] fields of [`MAX_DETAIL_FIELD`] bytes and a
/// 20-digit count, and each kind's `other`): some 22 KB. Redis's own
/// overhead comes on top; `docs/clicks.md` gives what `MEMORY USAGE` measured.
pub const MAX_DETAIL_BYTES: usize =
    (MAX_DETAIL_FIELDS + Detail::ALL.len()) * (MAX_DETAIL_FIELD + 20);

/// The Redis clicks are stored in apart from the links, if they have one:
/// `clicks_url` when it names a Redis other than `links_url`. Empty (the
/// default) keeps them with the links. The VMOD and the writer both decide
/// by this whether they open a second connection.
#[must_use]
pub fn own_redis<'u>(clicks_url: &'u str, links_url: &str) -> Option<&'u str> {
    (!clicks_url.is_empty() && clicks_url != links_url).then_some(clicks_url)
}

/// Sets a hash field (`KEYS[1]`, `ARGV[1]`) to a count (`ARGV[2]`) unless
/// it holds a larger one, and answers what it holds then. With clicks in a
/// Redis of their own, the people's total of each link with a click limit
/// is copied with it into the links' Redis, under the same name
/// ([`CountNames::total_slot`]), where lookups read it: a copy only grows,
/// whichever of several writers comes last.
pub const RAISE_COUNT_SCRIPT: &str = "local held = redis.call('HGET', KEYS[1], ARGV[1]) \
if not held or tonumber(ARGV[2]) > (tonumber(held) or 0) then \
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return ARGV[2] end \
return held";

/// The all-time counters of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Total {
    /// Redirects delivered to people.
    People,
    /// Redirects delivered to crawlers and other bots (and `HEAD` requests).
    Bots,
    /// Answers for the link after it expired or was deleted.
    Gone,
}

impl Total {
    pub const ALL: [Self; 3] = [Self::People, Self::Bots, Self::Gone];

    const fn word(self) -> &'static str {
        match self {
            Self::People => "clicks",
            Self::Bots => "bots",
            Self::Gone => "gone",
        }
    }
}

/// A kind of detail counted per link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Detail {
    Referrer,
    Country,
    Device,
    Browser,
    Os,
    /// The target a link with rules or a split sent the click to: `r2`
    /// (rule 2), `s1` (split target 1) or `url` (the link's own), the
    /// labels of [`crate::rules::Chosen`].
    Target,
}

impl Detail {
    pub const ALL: [Self; 6] = [
        Self::Referrer,
        Self::Country,
        Self::Device,
        Self::Browser,
        Self::Os,
        Self::Target,
    ];

    /// The field name's start in the details hash, before the `:`.
    #[must_use]
    pub const fn word(self) -> &'static str {
        match self {
            Self::Referrer => "referrer",
            Self::Country => "country",
            Self::Device => "device",
            Self::Browser => "browser",
            Self::Os => "os",
            Self::Target => "target",
        }
    }

    /// The field counting `value` of this kind: its `other` if the value
    /// is longer than [`MAX_DETAIL_VALUE`].
    #[must_use]
    pub fn field(self, value: &str) -> String {
        self.field_parts(value).concat()
    }

    /// [`Detail::field`] in its parts (word, `:`, value or `other`), for a
    /// writer that copies them where the field goes instead of making it.
    #[must_use]
    pub fn field_parts(self, value: &str) -> [&str; 3] {
        let value = if value.len() > MAX_DETAIL_VALUE {
            "other"
        } else {
            value
        };
        [self.word(), ":", value]
    }

    /// The kind and value a details field names.
    #[must_use]
    pub fn parse(field: &str) -> Option<(Self, &str)> {
        let (word, value) = field.split_once(':')?;
        Self::ALL
            .into_iter()
            .find(|kind| kind.word() == word)
            .map(|kind| (kind, value))
    }
}

/// A moment, in whole seconds since 1970 (UTC), as the buckets see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClickTime(pub u64);

/// A calendar day (UTC) written `YYYYMMDD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day(u32);

/// An hour (UTC) written `YYYYMMDDHH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hour(u32);

/// A minute (UTC) written `YYYYMMDDHHMM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Minute(u64);

impl ClickTime {
    #[must_use]
    pub fn now() -> Self {
        Self(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        )
    }

    /// Year, month and day of this moment's date (UTC).
    fn date(self) -> (u64, u64, u64) {
        civil_from_days(self.0 / 86_400)
    }

    #[must_use]
    pub fn day(self) -> Day {
        let (y, m, d) = self.date();
        Day(u32::try_from(y * 10_000 + m * 100 + d).unwrap_or(u32::MAX))
    }

    #[must_use]
    pub fn hour(self) -> Hour {
        let hour = (self.0 % 86_400) / 3600;
        Hour(self.day().0.saturating_mul(100).saturating_add(hour as u32))
    }

    #[must_use]
    pub fn minute(self) -> Minute {
        let minute = (self.0 % 3600) / 60;
        Minute(u64::from(self.hour().0) * 100 + minute)
    }

    /// This moment `seconds` earlier.
    #[must_use]
    pub fn before(self, seconds: u64) -> Self {
        Self(self.0.saturating_sub(seconds))
    }
}

impl fmt::Display for Day {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Day {
    /// `YYYY-MM-DD`, as people and JSON read dates.
    #[must_use]
    pub fn iso(self) -> String {
        format!(
            "{:04}-{:02}-{:02}",
            self.0 / 10_000,
            self.0 / 100 % 100,
            self.0 % 100
        )
    }
}

impl fmt::Display for Hour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Hour {
    /// `YYYY-MM-DDTHH:00Z`.
    #[must_use]
    pub fn iso(self) -> String {
        format!("{}T{:02}:00Z", Day(self.0 / 100).iso(), self.0 % 100)
    }
}

impl fmt::Display for Minute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Year, month (1-12) and day (1-31) of the `days`-th day after 1970-01-01
/// (H. Hinnant's `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Where a deployment's counts are kept, which decides how they are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// One Redis, or a Sentinel group: the names of the module's table.
    Plain,
    /// A Redis Cluster: each name about one link carries the key's first
    /// character as a hash tag (`short:clicks:{L}m`, `short:details:{L}m25`),
    /// so the counts of all keys starting alike share one slot, 64 slots
    /// in all. A flush writes each slot's counts in calls of thousands of
    /// arguments, as few calls as on one Redis, where a tag per head (4,096
    /// with split 2) makes a call of a few dozen arguments per head, and a
    /// script call costs Redis more per click the fewer it carries. A
    /// link's visitors over several days are counted together (`PFCOUNT` of
    /// keys in one slot). Names of no one link (minutes, salts, heartbeats)
    /// stay as they are, a slot each.
    Cluster,
}

/// The Redis names of one deployment's click counts (see the module's
/// table): its [`KeyScheme`] and [`Layout`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountNames {
    scheme: KeyScheme,
    layout: Layout,
}

/// Why counts cannot be named in a layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "hash prefix {0:?} holds '{{' or '}}', which would take the place of the hash tags \
     that keep each link's click counts in one slot of the Redis Cluster: \
     choose a prefix without braces, or keep clicks in a single Redis or a Sentinel group"
)]
pub struct LayoutError(String);

impl CountNames {
    /// The names of `scheme`'s counts in `layout`; a Redis Cluster's hash
    /// tags cannot follow a prefix that has braces of its own.
    pub fn new(scheme: &KeyScheme, layout: Layout) -> Result<Self, LayoutError> {
        if layout == Layout::Cluster && scheme.prefix().contains(['{', '}']) {
            return Err(LayoutError(scheme.prefix().to_owned()));
        }
        Ok(Self {
            scheme: scheme.clone(),
            layout,
        })
    }

    #[must_use]
    pub fn scheme(&self) -> &KeyScheme {
        &self.scheme
    }

    #[must_use]
    pub fn layout(&self) -> Layout {
        self.layout
    }

    fn prefix(&self) -> &str {
        self.scheme.prefix()
    }

    /// `text` (a link's head, or a key) as it ends a name: in a cluster,
    /// its first character is the hash tag.
    fn of_link(&self, text: &str) -> String {
        match (self.layout, text.chars().next()) {
            (Layout::Cluster, Some(first)) => {
                format!("{{{first}}}{}", &text[first.len_utf8()..])
            }
            _ => text.to_owned(),
        }
    }

    /// The hash holding `total` for every key whose hash part is `head`.
    #[must_use]
    pub fn total_hash(&self, total: Total, head: &str) -> String {
        format!("{}{}:{}", self.prefix(), total.word(), self.of_link(head))
    }

    /// The pattern of every `total` hash's name (for `SCAN`).
    #[must_use]
    pub fn total_hashes(&self, total: Total) -> String {
        format!("{}{}:*", self.prefix(), total.word())
    }

    /// The head a `total` hash's name counts for, if it names one.
    #[must_use]
    pub fn head_of(&self, total: Total, name: &str) -> Option<String> {
        let rest = name
            .strip_prefix(self.prefix())?
            .strip_prefix(total.word())?
            .strip_prefix(':')?;
        match self.layout {
            Layout::Plain => Some(rest.to_owned()),
            Layout::Cluster => {
                let (tag, after) = rest.strip_prefix('{')?.split_once('}')?;
                (tag.chars().count() == 1).then(|| [tag, after].concat())
            }
        }
    }

    /// Where the VMOD reads `key`'s `total` (a key that passed the rules):
    /// the field of `key` in its bucket's hash.
    #[must_use]
    pub fn total_slot<'k>(&self, total: Total, key: &'k str) -> crate::Slot<'k> {
        let (head, field) = self.scheme.split_key(key);
        crate::Slot {
            hash: self.total_hash(total, head),
            field,
        }
    }

    /// The hash of people's clicks on `day` for keys whose hash part is `head`.
    #[must_use]
    pub fn day_hash(&self, day: Day, head: &str) -> String {
        format!("{}day:{day}:{}", self.prefix(), self.of_link(head))
    }

    /// The hash of people's clicks in `hour` for keys whose hash part is `head`.
    #[must_use]
    pub fn hour_hash(&self, hour: Hour, head: &str) -> String {
        format!("{}hour:{hour}:{}", self.prefix(), self.of_link(head))
    }

    /// The hash of every link's clicks in `minute`, a field per key.
    #[must_use]
    pub fn minute_hash(&self, minute: Minute) -> String {
        format!("{}minute:{minute}", self.prefix())
    }

    /// The `HyperLogLog` of `key`'s visitors on `day`.
    #[must_use]
    pub fn visitors(&self, day: Day, key: &str) -> String {
        format!("{}visitors:{day}:{}", self.prefix(), self.of_link(key))
    }

    /// The hash of `key`'s details (referrers, countries, devices...).
    #[must_use]
    pub fn details(&self, key: &str) -> String {
        format!("{}details:{}", self.prefix(), self.of_link(key))
    }

    /// The day's secret salt for visitor hashes, shared by every Varnish
    /// and dropped after two days, so a visitor hash cannot be traced back
    /// to an address once its day is over.
    #[must_use]
    pub fn visitor_salt(&self, day: Day) -> String {
        format!("{}salt:{day}", self.prefix())
    }

    /// The hash where each Varnish's flusher notes when it last reached
    /// Redis (unix milliseconds), which the writer reports as flush lag.
    #[must_use]
    pub fn flushers(&self) -> String {
        format!("{}flushed:last", self.prefix())
    }

    /// The hash where flushes sealed on `day` note, per flusher, the last
    /// batch applied, so that a batch sent again is applied once. In a
    /// cluster, one per slot: `tag` is a hash tag of that slot.
    #[must_use]
    pub fn applied(&self, day: Day, tag: Option<&str>) -> String {
        match tag {
            None => format!("{}applied:{day}", self.prefix()),
            Some(tag) => format!("{}applied:{day}:{{{tag}}}", self.prefix()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clicks_have_a_redis_of_their_own_only_when_named_apart() {
        let links = "redis://127.0.0.1:6380/0";
        assert_eq!(own_redis("", links), None);
        assert_eq!(own_redis(links, links), None);
        assert_eq!(
            own_redis("redis://127.0.0.1:6381/0", links),
            Some("redis://127.0.0.1:6381/0")
        );
    }

    #[test]
    fn buckets_are_utc_calendar_times() {
        // 2026-11-23T14:05:09Z
        let at = ClickTime(1_795_442_709);
        assert_eq!(at.day().to_string(), "20261123");
        assert_eq!(at.hour().to_string(), "2026112314");
        assert_eq!(at.minute().to_string(), "202611231405");
        assert_eq!(at.day().iso(), "2026-11-23");
        assert_eq!(at.hour().iso(), "2026-11-23T14:00Z");
        assert_eq!(ClickTime(0).day().to_string(), "19700101");
        // A leap day, and the last second of a year.
        assert_eq!(ClickTime(1_709_208_000).day().iso(), "2024-02-29");
        assert_eq!(ClickTime(1_767_225_599).hour().iso(), "2025-12-31T23:00Z");
    }

    /// The names of the module's tables, in both layouts.
    #[test]
    fn names_follow_the_links_layout_and_never_name_a_link_hash() {
        let scheme = KeyScheme::default();
        let key = scheme.key("Lm25").unwrap();
        let at = ClickTime(1_795_442_709);
        let plain = CountNames::new(&scheme, Layout::Plain).unwrap();
        let cluster = CountNames::new(&scheme, Layout::Cluster).unwrap();
        let both = |name: &dyn Fn(&CountNames) -> String| (name(&plain), name(&cluster));
        let head = scheme.head(&key);
        assert_eq!(scheme.field(&key), "25");
        assert_eq!(
            both(&|n| n.total_hash(Total::People, head)),
            ("short:clicks:Lm".into(), "short:clicks:{L}m".into())
        );
        assert_eq!(
            both(&|n| n.total_slot(Total::Bots, "Lm25").hash),
            ("short:bots:Lm".into(), "short:bots:{L}m".into())
        );
        assert_eq!(
            both(&|n| n.day_hash(at.day(), head)),
            (
                "short:day:20261123:Lm".into(),
                "short:day:20261123:{L}m".into()
            )
        );
        assert_eq!(
            both(&|n| n.hour_hash(at.hour(), head)),
            (
                "short:hour:2026112314:Lm".into(),
                "short:hour:2026112314:{L}m".into()
            )
        );
        assert_eq!(
            both(&|n| n.visitors(at.day(), "Lm25")),
            (
                "short:visitors:20261123:Lm25".into(),
                "short:visitors:20261123:{L}m25".into()
            )
        );
        assert_eq!(
            both(&|n| n.details("Lm25")),
            ("short:details:Lm25".into(), "short:details:{L}m25".into())
        );
        assert_eq!(
            both(&|n| n.applied(at.day(), None)),
            (
                "short:applied:20261123".into(),
                "short:applied:20261123".into()
            )
        );
        assert_eq!(
            cluster.applied(at.day(), Some("x")),
            "short:applied:20261123:{x}"
        );
        for names in [&plain, &cluster] {
            assert_eq!(names.minute_hash(at.minute()), "short:minute:202611231405");
            let total = names.total_hash(Total::Gone, "Lm");
            assert_eq!(names.head_of(Total::Gone, &total).as_deref(), Some("Lm"));
            assert_eq!(names.head_of(Total::People, &total), None);
            for name in [
                total,
                names.hour_hash(at.hour(), "Lm"),
                names.minute_hash(at.minute()),
                names.details("Lm25"),
                names.applied(at.day(), Some("x")),
                names.flushers(),
                names.visitor_salt(at.day()),
            ] {
                let rest = name.strip_prefix(scheme.prefix()).unwrap();
                assert!(rest.contains(':'), "{name} could be a link's hash");
            }
        }
    }

    /// The table of both layouts in `docs/redis-cluster.md` spells the
    /// names as they are.
    #[test]
    fn the_docs_spell_both_layouts() {
        let doc = include_str!("../../docs/redis-cluster.md");
        let scheme = KeyScheme::default();
        let at = ClickTime(1_795_442_709);
        for layout in [Layout::Plain, Layout::Cluster] {
            let names = CountNames::new(&scheme, layout).unwrap();
            for name in [
                names.total_hash(Total::People, "Lm"),
                names.total_hash(Total::Bots, "Lm"),
                names.total_hash(Total::Gone, "Lm"),
                names.day_hash(at.day(), "Lm"),
                names.hour_hash(at.hour(), "Lm"),
                names.visitors(at.day(), "Lm25"),
                names.details("Lm25"),
                names.applied(at.day(), None),
            ] {
                assert!(
                    doc.contains(&format!("`{name}`")),
                    "docs/redis-cluster.md lacks `{name}`"
                );
            }
        }
    }

    #[test]
    fn a_cluster_layout_needs_a_prefix_without_braces() {
        let tagged = KeyScheme::new("{short}:", 2).unwrap();
        assert!(CountNames::new(&tagged, Layout::Plain).is_ok());
        let refused = CountNames::new(&tagged, Layout::Cluster).unwrap_err();
        assert!(refused.to_string().contains("without braces"), "{refused}");
    }

    #[test]
    fn detail_fields_read_back() {
        let field = Detail::Referrer.field("example.org");
        assert_eq!(field, "referrer:example.org");
        assert_eq!(
            Detail::parse(&field),
            Some((Detail::Referrer, "example.org"))
        );
        assert_eq!(Detail::parse("nothing"), None);
    }

    #[test]
    fn long_detail_values_count_as_other() {
        let longest = "a".repeat(MAX_DETAIL_VALUE);
        let field = Detail::Referrer.field(&longest);
        assert_eq!(field.len(), MAX_DETAIL_FIELD);
        assert_eq!(Detail::parse(&field), Some((Detail::Referrer, &*longest)));
        let junk = format!("{longest}a");
        assert_eq!(Detail::Referrer.field(&junk), "referrer:other");
        assert_eq!(Detail::Browser.field(&junk), "browser:other");
        for kind in Detail::ALL {
            assert!(kind.field(&junk).len() <= MAX_DETAIL_FIELD, "{kind:?}");
        }
    }
}
