//! The visit log: one record per click, the newest kept, beside the exact
//! totals. The VMOD's flusher writes the records and the writer reads them;
//! both take the names and the record's form from here.
//!
//! | what | Redis | bound |
//! |---|---|---|
//! | a link's visits, newest first | list `short:visits:Lm25` (cluster: `short:visits:{L}m25`) | [`VisitsKept`](crate::VisitsKept) records |
//! | a domain's visits to its links | list `short:visits:@links` | [`DomainVisitsKept`](crate::DomainVisitsKept) records |
//! | a domain's orphan visits | list `short:visits:@orphans` | [`DomainVisitsKept`](crate::DomainVisitsKept) records |
//! | a domain's orphan visits, counted | hash `short:orphans`, fields `<type>` (people) and `<type>:bots` | none: totals |
//!
//! Each list is pushed at its head (`LPUSH`), cut to its bound (`LTRIM`),
//! and rid of records older than the days kept from its tail; it expires
//! that long after its last visit. A name after `visits:` starting with
//! `@` is no key's (keys are letters, digits, `_` and `-`).
//!
//! A record is one line of tab-separated fields, its time first so that
//! the flush script reads it without parsing the rest:
//!
//! ```text
//! 1765200000.123456<TAB>vp<TAB>DE<TAB>url<TAB>Lm25<TAB>news.example.org<TAB>Mozilla/5.0 …
//! ```
//!
//! time (Unix seconds and microseconds: a link's visits from one client
//! come a round trip apart, so they sort in the order made, even from
//! Varnish's worker threads' different queues); kind (`v` a link's visit, `b` the bare domain, `i`
//! an unknown key, `r` another 404) and `p` (a person) or `b` (a bot);
//! country (ISO code, or empty); the target a link with rules or a split
//! chose (`url`, `r2`, `s1`; empty for none); what was asked (the key, or
//! an orphan's path); the referrer's host (empty for none); the user agent.

use std::fmt::Write as _;

use super::CountNames;
use crate::NotFoundKind;

/// Most bytes of an orphan's path kept in its record.
pub const MAX_ASKED: usize = 255;

/// What a visit was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VisitKind {
    /// A click on a link.
    Link,
    /// The bare domain: its link path alone.
    BaseUrl,
    /// A key no link holds (or one not started yet).
    InvalidShortUrl,
    /// Any other path of the short domain that answers 404.
    Regular404,
}

impl VisitKind {
    pub const ORPHANS: [Self; 3] = [Self::BaseUrl, Self::InvalidShortUrl, Self::Regular404];

    const fn letter(self) -> char {
        match self {
            Self::Link => 'v',
            Self::BaseUrl => 'b',
            Self::InvalidShortUrl => 'i',
            Self::Regular404 => 'r',
        }
    }

    fn of_letter(letter: char) -> Option<Self> {
        [
            Self::Link,
            Self::BaseUrl,
            Self::InvalidShortUrl,
            Self::Regular404,
        ]
        .into_iter()
        .find(|kind| kind.letter() == letter)
    }

    /// What an orphan visit asked for; `None` for a link's visit.
    #[must_use]
    pub const fn not_found(self) -> Option<NotFoundKind> {
        match self {
            Self::Link => None,
            Self::BaseUrl => Some(NotFoundKind::BaseUrl),
            Self::InvalidShortUrl => Some(NotFoundKind::InvalidShortUrl),
            Self::Regular404 => Some(NotFoundKind::Regular404),
        }
    }

    /// An orphan's type as Shlink names it, and the field counting it in
    /// the orphans' hash; `None` for a link's visit.
    #[must_use]
    pub fn orphan_type(self) -> Option<&'static str> {
        self.not_found().map(NotFoundKind::name)
    }

    /// The orphan kind Shlink's `type` names.
    #[must_use]
    pub fn of_orphan_type(name: &str) -> Option<Self> {
        NotFoundKind::of_name(name).map(Self::from)
    }
}

impl From<NotFoundKind> for VisitKind {
    fn from(kind: NotFoundKind) -> Self {
        match kind {
            NotFoundKind::BaseUrl => Self::BaseUrl,
            NotFoundKind::Regular404 => Self::Regular404,
            NotFoundKind::InvalidShortUrl => Self::InvalidShortUrl,
        }
    }
}

/// One visit, its texts borrowed: what the flusher writes and the writer
/// reads back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Visit<'t> {
    /// Unix microseconds.
    pub at_us: u64,
    pub kind: VisitKind,
    pub bot: bool,
    /// ISO 3166 code, or empty.
    pub country: &'t str,
    /// The label of the target chosen (`url`, `r2`, `s1`), or empty.
    pub target: &'t str,
    /// The key, or an orphan's path.
    pub asked: &'t str,
    /// The referrer's host, or empty.
    pub referrer: &'t str,
    pub agent: &'t str,
}

impl Visit<'_> {
    /// Appends the record to `out`. A tab or line break in a text (a user
    /// agent may hold one) becomes a space, so each field stays one.
    pub fn write(&self, out: &mut String) {
        let _ = write!(
            out,
            "{}.{:06}\t{}{}\t",
            self.at_us / MICROS,
            self.at_us % MICROS,
            self.kind.letter(),
            if self.bot { 'b' } else { 'p' }
        );
        let fields = [self.country, self.target, self.asked, self.referrer];
        for field in fields {
            push_clean(out, field);
            out.push('\t');
        }
        push_clean(out, self.agent);
    }

    /// The record as one string.
    #[must_use]
    pub fn record(&self) -> String {
        let mut out = String::with_capacity(64 + self.agent.len() + self.asked.len());
        self.write(&mut out);
        out
    }
}

impl<'t> Visit<'t> {
    /// The visit a record holds; `None` for anything else.
    #[must_use]
    pub fn parse(record: &'t str) -> Option<Self> {
        let mut fields = record.splitn(7, '\t');
        let at_us = parse_time(fields.next()?)?;
        let mut flags = fields.next()?.chars();
        let kind = VisitKind::of_letter(flags.next()?)?;
        let bot = match flags.next()? {
            'b' => true,
            'p' => false,
            _ => return None,
        };
        Some(Self {
            at_us,
            kind,
            bot,
            country: fields.next()?,
            target: fields.next()?,
            asked: fields.next()?,
            referrer: fields.next()?,
            agent: fields.next()?,
        })
    }
}

/// Microseconds in a second.
const MICROS: u64 = 1_000_000;

/// `seconds[.micros]` as Unix microseconds.
fn parse_time(text: &str) -> Option<u64> {
    let (seconds, fraction) = text.split_once('.').unwrap_or((text, ""));
    let micros = if fraction.is_empty() {
        0
    } else {
        let digits = fraction.get(..fraction.len().min(6))?;
        let scale = 10_u64.pow(u32::try_from(6 - digits.len()).ok()?);
        digits.parse::<u64>().ok()?.checked_mul(scale)?
    };
    seconds
        .parse::<u64>()
        .ok()?
        .checked_mul(MICROS)?
        .checked_add(micros)
}

impl Visit<'_> {
    /// The visit's time in whole Unix seconds.
    #[must_use]
    pub fn seconds(&self) -> u64 {
        self.at_us / MICROS
    }
}

fn push_clean(out: &mut String, text: &str) {
    if text.contains(['\t', '\n', '\r']) {
        out.extend(text.chars().map(|c| {
            if matches!(c, '\t' | '\n' | '\r') {
                ' '
            } else {
                c
            }
        }));
    } else {
        out.push_str(text);
    }
}

/// `path` cut to [`MAX_ASKED`] bytes, on a character boundary.
#[must_use]
pub fn cut_asked(path: &str) -> &str {
    let mut end = path.len().min(MAX_ASKED);
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    &path[..end]
}

impl CountNames {
    /// The list of `key`'s visits.
    #[must_use]
    pub fn visits(&self, key: &str) -> String {
        format!("{}visits:{}", self.prefix(), self.of_link(key))
    }

    /// The list of the domain's visits to any of its links.
    #[must_use]
    pub fn domain_visits(&self) -> String {
        format!("{}visits:@links", self.prefix())
    }

    /// The list of the domain's orphan visits.
    #[must_use]
    pub fn orphan_visits(&self) -> String {
        format!("{}visits:@orphans", self.prefix())
    }

    /// The hash counting the domain's orphan visits by type (see
    /// [`CountNames::orphan_field`]).
    #[must_use]
    pub fn orphan_counts(&self) -> String {
        format!("{}orphans", self.prefix())
    }

    /// The field of the orphans' hash counting visits of `kind` by people
    /// or by bots.
    #[must_use]
    pub fn orphan_field(kind: VisitKind, bot: bool) -> Option<String> {
        let name = kind.orphan_type()?;
        Some(if bot {
            format!("{name}:bots")
        } else {
            name.to_owned()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clicks::Layout;
    use crate::KeyScheme;

    fn visit() -> Visit<'static> {
        Visit {
            at_us: 1_765_200_000_123_456,
            kind: VisitKind::Link,
            bot: false,
            country: "DE",
            target: "url",
            asked: "Lm25",
            referrer: "news.example.org",
            agent: "Mozilla/5.0 (X11; Linux x86_64)",
        }
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let record = visit().record();
        assert_eq!(
            record,
            "1765200000.123456\tvp\tDE\turl\tLm25\tnews.example.org\tMozilla/5.0 (X11; Linux x86_64)"
        );
        assert_eq!(Visit::parse(&record), Some(visit()));
        let orphan = Visit {
            kind: VisitKind::Regular404,
            bot: true,
            country: "",
            target: "",
            asked: "/wp-login.php",
            referrer: "",
            agent: "",
            ..visit()
        };
        assert_eq!(Visit::parse(&orphan.record()), Some(orphan));
    }

    #[test]
    fn tabs_and_line_breaks_in_a_text_stay_inside_its_field() {
        let odd = Visit {
            agent: "evil\tagent\r\nX: 1",
            ..visit()
        };
        let back = odd.record();
        let parsed = Visit::parse(&back).unwrap();
        assert_eq!(parsed.agent, "evil agent  X: 1");
        assert_eq!(parsed.referrer, "news.example.org");
    }

    #[test]
    fn times_read_with_or_without_their_microseconds() {
        for (text, at_us) in [
            ("1765200000", 1_765_200_000_000_000),
            ("1765200000.5", 1_765_200_000_500_000),
            ("1765200000.000007", 1_765_200_000_000_007),
            ("1765200000.1234567", 1_765_200_000_123_456),
        ] {
            let record = format!("{text}\tvp\t\t\tLm25\t\t");
            assert_eq!(
                Visit::parse(&record).map(|v| v.at_us),
                Some(at_us),
                "{text}"
            );
        }
        assert_eq!(Visit::parse("1.x\tvp\t\t\tLm25\t\t"), None);
        assert_eq!(visit().seconds(), 1_765_200_000);
    }

    #[test]
    fn anything_else_is_no_record() {
        for junk in [
            "",
            "x\tvp\t\t\t\t\t",
            "1\tzp\t\t\t\t\t",
            "1\tvq\t\t\t\t\t",
            "1\tvp\t\t",
        ] {
            assert_eq!(Visit::parse(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn paths_are_cut_on_a_character() {
        let long = "é".repeat(MAX_ASKED);
        let cut = cut_asked(&long);
        assert!(cut.len() <= MAX_ASKED && long.starts_with(cut));
        assert_eq!(cut_asked("/a"), "/a");
    }

    #[test]
    fn visit_lists_never_share_a_name_with_a_link_or_each_other() {
        let scheme = KeyScheme::new("short:", 2).unwrap();
        let plain = CountNames::new(&scheme, Layout::Plain).unwrap();
        let cluster = CountNames::new(&scheme, Layout::Cluster).unwrap();
        assert_eq!(plain.visits("Lm25"), "short:visits:Lm25");
        assert_eq!(cluster.visits("Lm25"), "short:visits:{L}m25");
        assert_eq!(plain.domain_visits(), "short:visits:@links");
        assert_eq!(plain.orphan_visits(), "short:visits:@orphans");
        assert_eq!(plain.orphan_counts(), "short:orphans");
        assert_eq!(
            CountNames::orphan_field(VisitKind::InvalidShortUrl, true).as_deref(),
            Some("invalid_short_url:bots")
        );
        assert_eq!(CountNames::orphan_field(VisitKind::Link, false), None);
        for kind in VisitKind::ORPHANS {
            assert_eq!(
                VisitKind::of_orphan_type(kind.orphan_type().unwrap()),
                Some(kind)
            );
        }
    }
}
