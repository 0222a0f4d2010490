//! What a request offers a link's rules, each part worked out only when a
//! rule first asks for it and at most once per request.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::net::IpAddr;

use super::conditions::{percent_decoded, Country, Device};

/// The request as a link's rules see it.
pub trait Visit {
    fn device(&self) -> Device;
    /// The client's country, if known.
    fn country(&self) -> Option<Country>;
    /// The preferred language of `Accept-Language`, as sent (rules
    /// compare it in any case).
    fn language(&self) -> Option<&str>;
    /// The decoded value of the query parameter named `name` (decoded),
    /// its first if it is given more than once.
    fn param(&self, name: &str) -> Option<Cow<'_, str>>;
    /// Now, in Unix seconds.
    fn now(&self) -> u64;
    /// A number standing for the visitor: the same for the same address
    /// and user agent, on every Varnish, every day.
    fn visitor(&self) -> u64;
}

/// Longest `Accept-Language` read: real ones are under 100 bytes.
const ACCEPT_LANGUAGE_READ: usize = 256;

/// A request's headers, its query and its client, with the country looked
/// up by `country_of` when a rule asks.
pub struct RequestVisit<'a, F: Fn(IpAddr) -> Option<Country>> {
    pub user_agent: &'a str,
    pub accept_language: &'a str,
    /// The query string without its `?`.
    pub query: &'a str,
    pub client: Option<IpAddr>,
    pub now: u64,
    pub country_of: F,
    device: OnceCell<Device>,
    country: OnceCell<Option<Country>>,
    language: OnceCell<Option<&'a str>>,
}

impl<'a, F: Fn(IpAddr) -> Option<Country>> RequestVisit<'a, F> {
    pub fn new(
        user_agent: &'a str,
        accept_language: &'a str,
        query: &'a str,
        client: Option<IpAddr>,
        now: u64,
        country_of: F,
    ) -> Self {
        Self {
            user_agent,
            accept_language,
            query,
            client,
            now,
            country_of,
            device: OnceCell::new(),
            country: OnceCell::new(),
            language: OnceCell::new(),
        }
    }
}

impl<F: Fn(IpAddr) -> Option<Country>> Visit for RequestVisit<'_, F> {
    fn device(&self) -> Device {
        *self.device.get_or_init(|| Device::of(self.user_agent))
    }

    fn country(&self) -> Option<Country> {
        *self
            .country
            .get_or_init(|| self.client.and_then(|client| (self.country_of)(client)))
    }

    fn language(&self) -> Option<&str> {
        *self
            .language
            .get_or_init(|| preferred_language(self.accept_language))
    }

    fn param(&self, name: &str) -> Option<Cow<'_, str>> {
        if self.query.is_empty() {
            return None;
        }
        self.query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decoded(key) == name).then(|| percent_decoded(value))
        })
    }

    fn now(&self) -> u64 {
        self.now
    }

    fn visitor(&self) -> u64 {
        let address = match self.client {
            Some(IpAddr::V4(v4)) => v4.to_ipv6_mapped().octets(),
            Some(IpAddr::V6(v6)) => v6.octets(),
            None => [0; 16],
        };
        let hash = fnv1a(FNV_OFFSET, &address);
        mix(fnv1a(hash, self.user_agent.as_bytes()))
    }
}

/// The language of `accept_language` with the highest weight (the first
/// of equals), as sent; `*` and weight 0 are no preference. Borrowed: it
/// is read at every delivery of a link with a language rule.
pub fn preferred_language(accept_language: &str) -> Option<&str> {
    let read = &accept_language[..floor_char_boundary(accept_language, ACCEPT_LANGUAGE_READ)];
    let mut best: Option<(&str, u16)> = None;
    for entry in read.split(',') {
        let (tag, params) = entry.split_once(';').unwrap_or((entry, ""));
        let tag = tag.trim_ascii();
        let weight = params
            .split(';')
            .find_map(|param| param.trim_ascii().strip_prefix("q="))
            .map_or(Some(1000), quality);
        let Some(weight) = weight else { continue };
        if tag.is_empty() || tag == "*" || weight == 0 {
            continue;
        }
        if best.is_none_or(|(_, top)| weight > top) {
            best = Some((tag, weight));
        }
    }
    best.map(|(tag, _)| tag)
}

/// An HTTP quality value (`0.8`) in thousandths, if it reads as one.
fn quality(text: &str) -> Option<u16> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // "8" is 800 thousandths, "08" 80, "008" 8.
    let thousandths = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0_u16, |sum, digit| sum * 10 + u16::from(digit - b'0'));
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// The largest index at most `at` that starts a character of `text`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    (0..=at.min(text.len()))
        .rev()
        .find(|&n| text.is_char_boundary(n))
        .unwrap_or(0)
}

/// FNV-1a: stable across builds and machines, unlike the standard library's
/// hasher, so that every Varnish sends a visitor to the same target.
pub(super) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

pub(super) fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// `SplitMix64`'s finaliser: spreads FNV's weak low bits over the whole word,
/// so that a remainder by a split's total weight is even.
pub(super) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preferred_language_has_the_highest_weight() {
        assert_eq!(preferred_language("de-AT,de;q=0.9,en;q=0.8"), Some("de-AT"));
        assert_eq!(preferred_language("en;q=0.5, fr;q=0.9"), Some("fr"));
        assert_eq!(preferred_language("fr;q=0.9, nl;q=0.9"), Some("fr"));
        assert_eq!(preferred_language("*, es;q=0.1"), Some("es"));
        assert_eq!(preferred_language("de;q=0, en;q=0.001"), Some("en"));
        assert_eq!(preferred_language("a;q=0.08, b;q=0.1"), Some("b"));
        assert_eq!(preferred_language("a;q=0.125, b;q=0.12"), Some("a"));
        assert_eq!(preferred_language("de;q=2, it;q=abc"), None);
        assert_eq!(preferred_language(""), None);
        // Only the first bytes are read.
        let long = format!("{}, ja", "x-y;q=0.1, ".repeat(40));
        assert_eq!(preferred_language(&long), Some("x-y"));
    }

    fn visit(query: &str) -> RequestVisit<'_, fn(IpAddr) -> Option<Country>> {
        RequestVisit::new("", "", query, None, 0, |_| None)
    }

    #[test]
    fn parameters_are_read_decoded() {
        let visit = visit("utm_source=news%20letter&ref=a&ref=b&empty&sp%61ce=x+y");
        assert_eq!(visit.param("utm_source").as_deref(), Some("news letter"));
        assert_eq!(visit.param("ref").as_deref(), Some("a"));
        assert_eq!(visit.param("empty").as_deref(), Some(""));
        assert_eq!(visit.param("space").as_deref(), Some("x y"));
        assert_eq!(visit.param("missing"), None);
    }

    #[test]
    fn a_visitor_is_its_address_and_agent() {
        let of = |ip: &str, agent| {
            RequestVisit::new(agent, "", "", ip.parse().ok(), 0, |_| None).visitor()
        };
        assert_eq!(of("192.0.2.1", "a"), of("192.0.2.1", "a"));
        assert_ne!(of("192.0.2.1", "a"), of("192.0.2.2", "a"));
        assert_ne!(of("192.0.2.1", "a"), of("192.0.2.1", "b"));
        // The same address, written either way, is the same visitor.
        assert_eq!(of("192.0.2.1", "a"), of("::ffff:192.0.2.1", "a"));
    }
}
