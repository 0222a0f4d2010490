//! What a link's field holds: the stored form of a link, read by the VMOD
//! on every cache miss and written by the writer.
//!
//! A plain URL is a link that redirects forever, so a link written by hand
//! with `HSET short:Lm 25 https://example.org/` stays valid. Words after the
//! URL, separated by single spaces (a valid URL has none), add to it, in
//! any order and at most once each:
//!
//! - `1767225600`: digits, the moment the link expires, in Unix seconds, at
//!   most [`Expiry::MAX`] (9999-12-31T23:59:59Z);
//! - `^1767225600`: `^` and digits, the moment the link **starts**, in
//!   Unix seconds (at most [`Expiry::MAX`]): before it, the link answers
//!   as a key holding nothing does. A VMOD older than this word answers
//!   404 for a value holding it, as for `?+`;
//! - `#100`: the most clicks (people's) the link answers; past them it
//!   answers as an expired link does;
//! - `@alice`: the name of the access token that created the link;
//! - `>https://example.org/expired`: where an expired link redirects
//!   instead of answering `410 Gone`;
//! - `?+` or `?-`: the link forwards the query string it is requested with
//!   to its target, or never does; without either, its domain decides.
//!   A VMOD older than this word answers 404 for a value holding it: see
//!   the upgrade order in `docs/deploying.md`;
//! - `~device=ios>https://apps.apple.com/app/id1`: a rule, a condition and
//!   a target, and `*50>https://example.org/a`: a split target with its
//!   weight; any number of each, in order, within the bounds of
//!   [`crate::rules`], which defines them. A VMOD older than these words
//!   answers 404 for a value holding them, as for `?+`;
//! - `!c`: crawlers may follow the link: its redirect goes without
//!   `X-Robots-Tag: noindex`. The writer lists the key in the domain's
//!   crawlable set too ([`crate::KeyScheme::crawlable`]), which robots.txt
//!   allows. A VMOD older than this word answers 404 for a value holding
//!   it, as for `?+`.
//!
//! The value `deleted` marks a deleted key: it answers `410 Gone` and is
//! never given to another link. A value that breaks these rules is never
//! served: the VMOD answers 404 and logs why.
//!
//! The words are short because every byte is paid once per link: an expiry
//! and a five-letter owner add 18 bytes to a plain link.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::rules::{RuleError, Targeting};
use crate::{check_redirect_target, whole_number, TargetError, ValidUrl};

/// The stored value of a deleted key.
pub const DELETED: &str = "deleted";

/// Longest owner name.
pub const MAX_OWNER_LEN: usize = 32;

/// The name of an access token, recorded as the owner of the links it
/// creates: 1 to [`MAX_OWNER_LEN`] characters of `A-Z a-z 0-9 . _ -`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(String);

impl Owner {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for Owner {
    type Error = RecordError;

    fn try_from(name: &str) -> Result<Self, RecordError> {
        let valid = (1..=MAX_OWNER_LEN).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if valid {
            Ok(Self(name.to_owned()))
        } else {
            Err(RecordError::Owner(name.to_owned()))
        }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The most people's clicks a link answers before it answers as expired:
/// 1 to [`ClickLimit::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClickLimit(u64);

impl ClickLimit {
    /// A trillion: more than any link is clicked, and exact in a JSON
    /// number and a Redis integer alike.
    pub const MAX: u64 = 1_000_000_000_000;

    pub const fn get(self) -> u64 {
        self.0
    }

    /// Clicks left after `clicks`; zero once the limit is reached.
    pub const fn left(self, clicks: u64) -> u64 {
        self.0.saturating_sub(clicks)
    }
}

impl TryFrom<u64> for ClickLimit {
    type Error = RecordError;

    fn try_from(clicks: u64) -> Result<Self, RecordError> {
        if (1..=Self::MAX).contains(&clicks) {
            Ok(Self(clicks))
        } else {
            Err(RecordError::ClickLimit(clicks.to_string()))
        }
    }
}

impl fmt::Display for ClickLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A moment a link expires, to the second: from 1970 to the last second of
/// the year 9999, [`Expiry::MAX`]. Every moment in that range can be added
/// to the system clock and written as an HTTP date (which has four-digit
/// years), so nothing downstream overflows on an expiry it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Expiry(u64);

impl Expiry {
    /// 9999-12-31T23:59:59Z, in Unix seconds: the last moment an HTTP date
    /// and an RFC 3339 time can both spell.
    pub const MAX: u64 = 253_402_300_799;

    pub const fn unix(self) -> u64 {
        self.0
    }

    pub fn time(self) -> SystemTime {
        // Within MAX by construction, so this cannot overflow; checked all
        // the same, since a panic here would reach Varnish.
        UNIX_EPOCH
            .checked_add(Duration::from_secs(self.0))
            .unwrap_or(UNIX_EPOCH)
    }

    /// The expiry as an HTTP date (`Fri, 31 Dec 9999 23:59:59 GMT`), for
    /// an `Expires` header.
    pub fn http_date(self) -> String {
        httpdate::fmt_http_date(self.time())
    }

    /// Time left before `now` reaches the expiry; zero once it has.
    pub fn left(self, now: SystemTime) -> Duration {
        self.time().duration_since(now).unwrap_or_default()
    }

    pub fn has_passed(self, now: SystemTime) -> bool {
        self.left(now).is_zero()
    }
}

impl TryFrom<u64> for Expiry {
    type Error = RecordError;

    /// The expiry `unix_seconds` after 1970-01-01T00:00:00Z, if it is no
    /// later than [`Expiry::MAX`].
    fn try_from(unix_seconds: u64) -> Result<Self, RecordError> {
        if unix_seconds <= Self::MAX {
            Ok(Self(unix_seconds))
        } else {
            Err(RecordError::Expiry(unix_seconds.to_string()))
        }
    }
}

/// A link as stored: its target and what was added to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub url: ValidUrl,
    pub expires: Option<Expiry>,
    /// When it starts answering: before, it answers as an unknown key.
    pub starts: Option<Expiry>,
    /// The most people's clicks it answers before it answers as expired.
    pub max_clicks: Option<ClickLimit>,
    pub owner: Option<Owner>,
    /// Where the link redirects once expired; `410 Gone` without one.
    pub expired_url: Option<ValidUrl>,
    /// Whether the request's query string is forwarded to the target:
    /// `None` leaves it to the link's domain.
    pub forward_query: Option<bool>,
    /// Targets chosen per request, instead of `url`, when one applies.
    pub targeting: Targeting,
    /// Crawlers may follow it: its redirect carries no `noindex`.
    pub crawlable: bool,
}

impl Record {
    /// A link to `url` that never expires, created by nobody in particular.
    pub fn plain(url: ValidUrl) -> Self {
        Self {
            url,
            expires: None,
            starts: None,
            max_clicks: None,
            owner: None,
            expired_url: None,
            forward_query: None,
            targeting: Targeting::default(),
            crawlable: false,
        }
    }

    /// Whether its expiry has passed at `now` (its click limit aside).
    pub fn has_expired(&self, now: SystemTime) -> bool {
        self.expires.is_some_and(|expiry| expiry.has_passed(now))
    }

    /// Whether it has started answering at `now`.
    pub fn has_started(&self, now: SystemTime) -> bool {
        self.starts.is_none_or(|start| start.has_passed(now))
    }
}

impl fmt::Display for Record {
    /// The stored form, each word in a fixed order so that equal records
    /// are equal strings.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.url.as_str())?;
        if let Some(expires) = self.expires {
            write!(f, " {}", expires.unix())?;
        }
        if let Some(starts) = self.starts {
            write!(f, " ^{}", starts.unix())?;
        }
        if let Some(limit) = self.max_clicks {
            write!(f, " #{limit}")?;
        }
        if let Some(owner) = &self.owner {
            write!(f, " @{owner}")?;
        }
        if let Some(url) = &self.expired_url {
            write!(f, " >{url}")?;
        }
        if let Some(forward) = self.forward_query {
            f.write_str(if forward { " ?+" } else { " ?-" })?;
        }
        if self.crawlable {
            f.write_str(" !c")?;
        }
        write!(f, "{}", self.targeting)
    }
}

/// What a key's field holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    Link(Record),
    /// The key was deleted: `410 Gone`, never reused.
    Deleted,
}

impl Stored {
    /// Reads a stored value, or says why it cannot be served.
    pub fn parse(value: &str) -> Result<Self, RecordError> {
        if value == DELETED {
            return Ok(Self::Deleted);
        }
        let mut words = value.split(' ');
        let url = valid_url(words.next().unwrap_or_default(), "URL")?;
        let mut record = Record::plain(url);
        let mut targeting = Targeting::default();
        for word in words {
            let duplicate = match word.as_bytes().first() {
                Some(b'@') => record.owner.replace(Owner::try_from(&word[1..])?).is_some(),
                Some(b'^') => {
                    let unix = whole_number(&word[1..])
                        .ok_or_else(|| RecordError::Word(word.to_owned()))?;
                    record.starts.replace(Expiry::try_from(unix)?).is_some()
                }
                Some(b'#') => {
                    let digits = &word[1..];
                    let limit = whole_number(digits)
                        .ok_or_else(|| RecordError::ClickLimit(digits.to_owned()))
                        .and_then(ClickLimit::try_from)?;
                    record.max_clicks.replace(limit).is_some()
                }
                Some(b'>') => record
                    .expired_url
                    .replace(valid_url(&word[1..], "expired URL")?)
                    .is_some(),
                Some(b'?') => {
                    let forward = match word {
                        "?+" => true,
                        "?-" => false,
                        _ => return Err(RecordError::Word(word.to_owned())),
                    };
                    record.forward_query.replace(forward).is_some()
                }
                Some(b'!') if word == "!c" => std::mem::replace(&mut record.crawlable, true),
                Some(b'~' | b'*') => {
                    targeting.push_word(word)?;
                    false
                }
                Some(b'0'..=b'9') => {
                    let unix =
                        whole_number(word).ok_or_else(|| RecordError::Word(word.to_owned()))?;
                    record.expires.replace(Expiry::try_from(unix)?).is_some()
                }
                _ => return Err(RecordError::Word(word.to_owned())),
            };
            if duplicate {
                return Err(RecordError::Repeated(word.to_owned()));
            }
        }
        record.targeting = targeting.finish()?;
        Ok(Self::Link(record))
    }
}

impl fmt::Display for Stored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Link(record) => record.fmt(f),
            Self::Deleted => f.write_str(DELETED),
        }
    }
}

fn valid_url(text: &str, what: &'static str) -> Result<ValidUrl, RecordError> {
    check_redirect_target(text).map_err(|source| RecordError::Url { what, source })?;
    Ok(ValidUrl(text.to_owned()))
}

/// Why a stored value cannot be served, or an owner name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("the {what} is not safe to redirect to: {source}")]
    Url {
        what: &'static str,
        #[source]
        source: TargetError,
    },
    #[error(
        "owner name {0:?} is not allowed: use 1 to {MAX_OWNER_LEN} characters \
         of A-Z, a-z, 0-9 and . _ -"
    )]
    Owner(String),
    #[error(
        "click limit {0:?} is not allowed: use a whole number from 1 to {max}",
        max = ClickLimit::MAX
    )]
    ClickLimit(String),
    #[error(
        "expiry {0:?} is not allowed: use Unix seconds no later than {max} \
         (9999-12-31T23:59:59Z)",
        max = Expiry::MAX
    )]
    Expiry(String),
    #[error(
        "the word {0:?} after the URL means nothing: use digits (expiry), \
         #clicks (click limit), @name (owner), >URL (where an expired link goes), \
         ?+ or ?- (forward the query string or not), !c (crawlable), \
         ~conditions>URL (a rule), *weight>URL (a split target)"
    )]
    Word(String),
    #[error(transparent)]
    Rule(#[from] RuleError),
    #[error("the word {0:?} repeats something already given")]
    Repeated(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> ValidUrl {
        ValidUrl::try_from(text.to_owned()).unwrap()
    }

    #[test]
    fn a_plain_url_is_a_link_forever() {
        let stored = Stored::parse("https://example.org/").unwrap();
        assert_eq!(
            stored,
            Stored::Link(Record::plain(url("https://example.org/")))
        );
        assert_eq!(stored.to_string(), "https://example.org/");
    }

    #[test]
    fn query_forwarding_is_a_word_of_its_own() {
        let forwarding = Stored::parse("https://example.org/ ?+").unwrap();
        let Stored::Link(record) = &forwarding else {
            panic!("{forwarding:?}");
        };
        assert_eq!(record.forward_query, Some(true));
        assert_eq!(forwarding.to_string(), "https://example.org/ ?+");
        let Ok(Stored::Link(plain)) = Stored::parse("https://example.org/") else {
            panic!("a plain URL is a link");
        };
        assert_eq!(
            plain.forward_query, None,
            "without the word, the domain decides"
        );
    }

    #[test]
    fn crawlable_is_a_word_of_its_own() {
        let crawlable = Stored::parse("https://example.org/ !c").unwrap();
        let Stored::Link(record) = &crawlable else {
            panic!("{crawlable:?}");
        };
        assert!(record.crawlable);
        assert_eq!(crawlable.to_string(), "https://example.org/ !c");
        let mut plain = Record::plain(url("https://example.org/"));
        assert!(!plain.crawlable, "without the word, no crawler is let in");
        plain.crawlable = true;
        assert_eq!(Stored::parse(&plain.to_string()), Ok(Stored::Link(plain)));
    }

    #[test]
    fn words_add_expiry_owner_and_expired_url_in_any_order() {
        let full = Record {
            url: url("https://example.org/a"),
            expires: Some(Expiry::try_from(1_767_225_600).unwrap()),
            starts: Some(Expiry::try_from(1_764_547_200).unwrap()),
            max_clicks: Some(ClickLimit::try_from(100).unwrap()),
            owner: Some(Owner::try_from("ci.bot-1").unwrap()),
            expired_url: Some(url("https://example.org/over")),
            forward_query: Some(false),
            targeting: Targeting::default(),
            crawlable: true,
        };
        let canonical = "https://example.org/a 1767225600 ^1764547200 #100 @ci.bot-1 \
                         >https://example.org/over ?- !c";
        assert_eq!(full.to_string(), canonical);
        for value in [
            canonical,
            "https://example.org/a !c ?- >https://example.org/over @ci.bot-1 #100 ^1764547200 1767225600",
        ] {
            assert_eq!(
                Stored::parse(value),
                Ok(Stored::Link(full.clone())),
                "{value}"
            );
        }
        assert_eq!(Stored::parse(DELETED), Ok(Stored::Deleted));
        assert_eq!(Stored::Deleted.to_string(), DELETED);
    }

    #[test]
    fn values_that_break_the_rules_are_never_served() {
        for value in [
            "",
            "deleted ",
            "Deleted",
            "javascript:alert(1)",
            "https://example.org/  1767225600",
            "https://example.org/ 17672256x0",
            "https://example.org/ 99999999999999999999999",
            "https://example.org/ 253402300800",
            "https://example.org/ 9223372036854775808",
            "https://example.org/ 18446744073709551615",
            "https://example.org/ 1+2",
            "https://example.org/ ^",
            "https://example.org/ ^x1",
            "https://example.org/ ^253402300800",
            "https://example.org/ ^1 ^2",
            "https://example.org/ @",
            "https://example.org/ @a/b",
            "https://example.org/ >javascript:alert(1)",
            "https://example.org/ >",
            "https://example.org/ expires=1",
            "https://example.org/ 1 2",
            "https://example.org/ @a @b",
            "https://example.org/ ?",
            "https://example.org/ ?+ ?-",
            "https://example.org/ ?1",
            "https://example.org/ #",
            "https://example.org/ #0",
            "https://example.org/ #-1",
            "https://example.org/ #1000000000001",
            "https://example.org/ #1 #2",
            "https://example.org/ #+5",
            "https://example.org/ \r\nX: y",
            "https://example.org/ !",
            "https://example.org/ !C",
            "https://example.org/ !cc",
            "https://example.org/ !c !c",
        ] {
            assert!(Stored::parse(value).is_err(), "{value:?} was accepted");
        }
    }

    #[test]
    fn owner_names() {
        assert!(Owner::try_from("alice").is_ok());
        assert!(Owner::try_from(&*"a".repeat(MAX_OWNER_LEN)).is_ok());
        for bad in ["", "a b", "a@b", "ä", &"a".repeat(MAX_OWNER_LEN + 1)] {
            assert!(Owner::try_from(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn click_limits_count_down_to_zero() {
        let limit = ClickLimit::try_from(3).unwrap();
        assert_eq!(limit.left(1), 2);
        assert_eq!(limit.left(3), 0);
        assert_eq!(limit.left(10), 0);
        assert!(ClickLimit::try_from(0).is_err());
        assert!(ClickLimit::try_from(ClickLimit::MAX).is_ok());
        assert!(ClickLimit::try_from(ClickLimit::MAX + 1).is_err());
    }

    #[test]
    fn the_last_expiry_is_the_last_second_of_9999() {
        let last = Stored::parse("https://example.org/ 253402300799").unwrap();
        let Stored::Link(record) = last else {
            panic!("not a link: {last:?}")
        };
        let expiry = record.expires.unwrap();
        assert_eq!(expiry.unix(), Expiry::MAX);
        assert!(!expiry.has_passed(SystemTime::now()));
        assert_eq!(expiry.http_date(), "Fri, 31 Dec 9999 23:59:59 GMT");
        assert!(Expiry::try_from(Expiry::MAX + 1).is_err());
        assert!(Expiry::try_from(u64::MAX).is_err());
    }

    #[test]
    fn expiry_counts_down_to_zero() {
        let expiry = Expiry::try_from(1000).unwrap();
        let before = UNIX_EPOCH + Duration::from_millis(999_500);
        assert_eq!(expiry.left(before), Duration::from_millis(500));
        assert!(!expiry.has_passed(before));
        assert!(expiry.has_passed(UNIX_EPOCH + Duration::from_secs(1000)));
        assert!(expiry.has_passed(UNIX_EPOCH + Duration::from_secs(2000)));
    }

    /// Rules and split words keep their order among themselves, wherever
    /// the other words stand, and come last when written.
    #[test]
    fn rules_and_split_words_follow_the_others() {
        let value =
            "https://example.org/ *1>https://example.org/a ~device=ios>https://apps.apple.com/ \
                     @alice *3>https://example.org/b ~lang=de>https://example.de/";
        let Ok(Stored::Link(record)) = Stored::parse(value) else {
            panic!("{value} is a link");
        };
        assert_eq!(record.targeting.rules().len(), 2);
        assert_eq!(record.targeting.split()[1].weight, 3);
        assert_eq!(
            record.to_string(),
            "https://example.org/ @alice ~device=ios>https://apps.apple.com/ \
             ~lang=de>https://example.de/ *1>https://example.org/a *3>https://example.org/b"
        );
        let error = Stored::parse("https://example.org/ ~country=XX>https://example.org/x")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("rule 1: condition \"country=XX\""),
            "{error}"
        );
    }
}
