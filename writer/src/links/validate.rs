//! Checks on what users submit, before anything is written.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::SystemTime;

use shortlink_core::{ClickLimit, Expiry, Key, NotFoundKind, ValidUrl};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use url::{Host, Url};

use crate::config::Settings;

/// An input of the link form and the JSON API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Url,
    Key,
    ExpiresAt,
    ExpiredUrl,
    MaxClicks,
    /// Whether the link forwards its request's query string.
    ForwardQuery,
    /// The short domain a link is on.
    Domain,
    /// The rules that choose a target per request.
    Rules,
    /// The weighted targets visitors are spread over.
    Split,
    /// The words a link is found by.
    Tags,
    /// What a link is called in listings.
    Title,
    /// Whether crawlers may follow a link.
    Crawlable,
    /// When a link starts answering.
    ValidSince,
    /// The shortest a generated key may be.
    KeyLength,
    /// When a link was made, as an import gives it.
    CreatedAt,
    Cursor,
    Limit,
    Page,
    PerPage,
    Days,
    Minutes,
    Owner,
    /// Where a domain sends one kind of visit to no link.
    Redirect(NotFoundKind),
    /// A field the API does not know.
    Unknown,
}

impl Field {
    /// The input's name in the form and in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Url => "url",
            Self::Key => "key",
            Self::ExpiresAt => "expires_at",
            Self::ExpiredUrl => "expired_url",
            Self::MaxClicks => "max_clicks",
            Self::ForwardQuery => "forward_query",
            Self::Domain => "domain",
            Self::Rules => "rules",
            Self::Split => "split",
            Self::Tags => "tags",
            Self::Title => "title",
            Self::Crawlable => "crawlable",
            Self::ValidSince => "valid_since",
            Self::KeyLength => "key_length",
            Self::CreatedAt => "created_at",
            Self::Cursor => "cursor",
            Self::Limit => "limit",
            Self::Page => "page",
            Self::PerPage => "per_page",
            Self::Days => "days",
            Self::Minutes => "minutes",
            Self::Owner => "owner",
            Self::Redirect(NotFoundKind::BaseUrl) => "base_url_redirect",
            Self::Redirect(NotFoundKind::Regular404) => "regular_404_redirect",
            Self::Redirect(NotFoundKind::InvalidShortUrl) => "invalid_short_url_redirect",
            Self::Unknown => "unknown",
        }
    }
}

/// Why a submitted URL or key was refused. The text tells the user what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Invalid {
    /// Which input is wrong.
    pub field: Field,
    pub message: String,
}

impl Invalid {
    pub fn new(field: Field, message: impl Into<String>) -> Self {
        Self {
            field,
            message: message.into(),
        }
    }

    fn url(message: impl Into<String>) -> Self {
        Self::new(Field::Url, message)
    }
}

/// Where an expired link goes: a URL under the same rules as a link's.
pub fn normalize_expired_url(input: &str, settings: &Settings) -> Result<ValidUrl, Invalid> {
    normalize_url(input, settings).map_err(|e| Invalid {
        field: Field::ExpiredUrl,
        message: e.message.replacen("the URL", "the expired URL", 1),
    })
}

/// An expiry given as an RFC 3339 time (`2026-12-31T23:59:59Z`, or with an
/// offset such as `+01:00`), which must be later than `now`. Stored to the
/// second: a fraction is dropped.
pub fn parse_expiry(input: &str, now: SystemTime) -> Result<Expiry, Invalid> {
    let at = OffsetDateTime::parse(input, &Rfc3339).map_err(|e| {
        Invalid::new(
            Field::ExpiresAt,
            format!(
                "expires_at {input:?} is not an RFC 3339 time ({e}); write it like \
                 2026-12-31T23:59:59Z"
            ),
        )
    })?;
    let not_in_the_future = || {
        Invalid::new(
            Field::ExpiresAt,
            format!(
                "expires_at {input:?} is not in the future; give a later time, or null for none"
            ),
        )
    };
    // Before 1970 is in the past; past 9999 cannot be written in RFC 3339.
    let unix = u64::try_from(at.unix_timestamp()).map_err(|_| not_in_the_future())?;
    let expiry =
        Expiry::try_from(unix).map_err(|e| Invalid::new(Field::ExpiresAt, e.to_string()))?;
    if expiry.has_passed(now) {
        return Err(not_in_the_future());
    }
    Ok(expiry)
}

/// A start given as an RFC 3339 time: any moment, past ones too (a link
/// that has started already). Stored to the second.
pub fn parse_start(input: &str) -> Result<Expiry, Invalid> {
    parse_moment(input, Field::ValidSince)
}

/// Any moment from 1970 to 9999, given as an RFC 3339 time for `field`.
pub fn parse_moment(input: &str, field: Field) -> Result<Expiry, Invalid> {
    let name = field.name();
    let at = OffsetDateTime::parse(input, &Rfc3339).map_err(|e| {
        Invalid::new(
            field,
            format!(
                "{name} {input:?} is not an RFC 3339 time ({e}); write it like \
                 2026-12-31T23:59:59Z"
            ),
        )
    })?;
    u64::try_from(at.unix_timestamp())
        .ok()
        .and_then(|unix| Expiry::try_from(unix).ok())
        .ok_or_else(|| {
            Invalid::new(
                field,
                format!("{name} {input:?} is before 1970 or after 9999"),
            )
        })
}

/// Refuses a link that would end before it starts.
pub fn check_window(record: &shortlink_core::Record) -> Result<(), Invalid> {
    match (record.starts, record.expires) {
        (Some(starts), Some(expires)) if starts >= expires => Err(Invalid::new(
            Field::ValidSince,
            "valid_since must come before expires_at: the link would never answer",
        )),
        _ => Ok(()),
    }
}

/// The shortest a generated key may be asked to be: from
/// [`shortlink_core::MIN_GENERATED_LEN`] to the whole digest.
pub fn check_key_length(length: usize) -> Result<(), Invalid> {
    let longest = shortlink_core::digest_key("").len();
    if (shortlink_core::MIN_GENERATED_LEN..=longest).contains(&length) {
        return Ok(());
    }
    Err(Invalid::new(
        Field::KeyLength,
        format!(
            "a generated key is {} to {longest} characters long, not {length}",
            shortlink_core::MIN_GENERATED_LEN
        ),
    ))
}

/// A click limit, for a writer whose Varnish counts clicks.
pub fn check_click_limit(clicks: u64, settings: &Settings) -> Result<ClickLimit, Invalid> {
    if !settings.config.clicks.enabled {
        return Err(Invalid::new(
            Field::MaxClicks,
            "max_clicks needs click counting, which is off: set [clicks] enabled = true \
             and load the VCL again",
        ));
    }
    ClickLimit::try_from(clicks).map_err(|e| Invalid::new(Field::MaxClicks, e.to_string()))
}

/// `expiry` as RFC 3339, in UTC.
pub fn format_expiry(expiry: Expiry) -> String {
    i64::try_from(expiry.unix())
        .ok()
        .and_then(|unix| OffsetDateTime::from_unix_timestamp(unix).ok())
        .and_then(|at| at.format(&Rfc3339).ok())
        .unwrap_or_else(|| "9999-12-31T23:59:59Z".to_owned())
}

/// The URL to store: `input` checked and in its canonical form (lower-case
/// host, non-ASCII percent-encoded), so equal URLs get equal keys.
pub fn normalize_url(input: &str, settings: &Settings) -> Result<ValidUrl, Invalid> {
    let max = settings.config.max_url_length;
    if input.is_empty() {
        return Err(Invalid::url("enter the long URL to shorten"));
    }
    if input.len() > max {
        return Err(Invalid::url(format!(
            "the URL is {} bytes long; the limit is {max}",
            input.len()
        )));
    }
    if let Some(c) = input.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(Invalid::url(format!(
            "the URL contains {}; remove it or percent-encode it",
            describe(c)
        )));
    }
    if input.starts_with("//") {
        return Err(Invalid::url(
            "the URL is scheme-relative (it starts with //); put https: or http: in front",
        ));
    }
    let url = Url::parse(input).map_err(|e| match e {
        url::ParseError::RelativeUrlWithoutBase => {
            Invalid::url("the URL must be absolute, starting with http:// or https://")
        }
        other => Invalid::url(format!("the URL is not valid: {other}")),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Invalid::url(format!(
            "only http:// and https:// URLs can be shortened, not {}:",
            url.scheme()
        )));
    }
    let Some(host) = url.host().filter(|h| !matches!(h, Host::Domain(""))) else {
        return Err(Invalid::url("the URL has no host name"));
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Invalid::url(
            "the URL contains a user name or password (user:pass@); remove them, as \
             everyone who gets the short link would see them",
        ));
    }
    if url.port() == Some(0) {
        return Err(Invalid::url(
            "the URL's port 0 is not a port; use 1 to 65535",
        ));
    }
    let base = &settings.public_base;
    let same_host = match (&host, base.host()) {
        (Host::Domain(name), Some(Host::Domain(own))) => {
            name.trim_end_matches('.') == own.trim_end_matches('.')
        }
        (host, own) => Some(host) == own.as_ref(),
    };
    // Any name Varnish serves a domain's links under leads to its links: a
    // short link there, under any scheme or port, is a loop too, every hop
    // a click.
    let name = host.to_string();
    let name = name.trim_end_matches('.');
    let short_link = settings.domains.iter().any(|domain| {
        let served = domain.name.eq_ignore_ascii_case(name)
            || domain
                .hosts
                .iter()
                .any(|served| served.trim_end_matches('.').eq_ignore_ascii_case(name));
        served && url.path().starts_with(&domain.link_path)
    });
    // The shortener's own address, or a short link: a loop.
    if (same_host && url.port_or_known_default() == base.port_or_known_default()) || short_link {
        return Err(Invalid::url(
            "the URL points at this shortener itself; shorten the final destination instead",
        ));
    }
    if !settings.config.allow_private_targets {
        if let Some(kind) = non_public(&host) {
            return Err(Invalid::url(format!(
                "the URL's host {host} is {kind}, which visitors from the internet cannot \
                 reach; link to a public host"
            )));
        }
    }
    let normalized = String::from(url);
    if normalized.len() > max {
        return Err(Invalid::url(format!(
            "the URL is {} bytes long once encoded; the limit is {max}",
            normalized.len()
        )));
    }
    ValidUrl::try_from(normalized).map_err(|e| Invalid::url(format!("the {e}")))
}

/// A custom key, checked against the shared key rules.
pub fn check_custom_key(key: &str, settings: &Settings) -> Result<Key, Invalid> {
    settings.scheme.key(key).map_err(|e| Invalid {
        field: Field::Key,
        message: format!("the {e}"),
    })
}

/// What makes `host` unreachable from the internet, if anything. Names are
/// judged by their form, not resolved: the writer never fetches the URL, and
/// a name's address can change after the check.
fn non_public(host: &Host<&str>) -> Option<&'static str> {
    match host {
        Host::Ipv4(ip) => non_public_v4(*ip),
        Host::Ipv6(ip) => non_public_v6(*ip),
        Host::Domain(name) => {
            let name = name.trim_end_matches('.');
            let under = |zone: &str| {
                name == zone
                    || name
                        .strip_suffix(zone)
                        .is_some_and(|rest| rest.ends_with('.'))
            };
            if under("localhost") {
                Some("a loopback name")
            } else if under("local") {
                Some("a link-local name")
            } else if under("internal") || under("home.arpa") || under("lan") {
                Some("a private name")
            } else if !name.contains('.') {
                Some("an intranet name without a domain")
            } else {
                None
            }
        }
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        // 100.64.0.0/10 is carrier-grade NAT: private to an ISP.
        Some("a private address")
    } else if ip.is_link_local() {
        Some("a link-local address")
    } else if a == 0 || a >= 224 || (a == 198 && (b & 0xfe) == 18) {
        // 0/8, multicast, 240/4 reserved, broadcast; 198.18/15 is for
        // benchmarking networks.
        Some("not a host address")
    } else {
        None
    }
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = embedded_v4(ip) {
        return non_public_v4(v4);
    }
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("a loopback address")
    } else if first & 0xfe00 == 0xfc00 || first & 0xffc0 == 0xfec0 {
        // Unique local, and the site-local addresses they replaced.
        Some("a private address")
    } else if first & 0xffc0 == 0xfe80 {
        Some("a link-local address")
    } else if ip.is_unspecified() || ip.is_multicast() {
        Some("not a host address")
    } else {
        None
    }
}

/// The IPv4 address an IPv6 address carries and reaches: mapped
/// (`::ffff:0:0/96`, `::ffff:0:0:0/96`), compatible (`::/96`), NAT64
/// (`64:ff9b::/96`) and 6to4 (`2002::/16`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let v4 = |high: u16, low: u16| Ipv4Addr::from((u32::from(high) << 16) | u32::from(low));
    let low = v4(s[6], s[7]);
    match s {
        [0, 0, 0, 0, 0, 0, _, _] if ip.is_loopback() || ip.is_unspecified() => None,
        [0, 0, 0, 0, 0, 0 | 0xffff, _, _]
        | [0, 0, 0, 0, 0xffff, 0, _, _]
        | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        [0x2002, high, low16, ..] => Some(v4(high, low16)),
        _ => None,
    }
}

fn describe(c: char) -> String {
    match c {
        ' ' => "a space".into(),
        '\t' => "a tab".into(),
        '\r' | '\n' => "a line break".into(),
        c => format!("the character U+{:04X}", u32::from(c)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn settings() -> Settings {
        Settings::new(Config::default()).unwrap()
    }

    #[test]
    fn canonical_forms() {
        let s = settings();
        assert_eq!(
            normalize_url("https://Example.ORG", &s).unwrap().as_str(),
            "https://example.org/"
        );
        assert_eq!(
            normalize_url("https://example.org/caf\u{e9}?q=\u{e9}", &s)
                .unwrap()
                .as_str(),
            "https://example.org/caf%C3%A9?q=%C3%A9"
        );
        assert_eq!(
            normalize_url("https://b\u{fc}cher.example/", &s)
                .unwrap()
                .as_str(),
            "https://xn--bcher-kva.example/"
        );
        assert_eq!(
            normalize_url("http://canyoucrackit.co.uk/soyoudidit.asp", &s)
                .unwrap()
                .as_str(),
            "http://canyoucrackit.co.uk/soyoudidit.asp"
        );
    }

    #[test]
    fn every_rule_has_a_message() {
        let s = settings();
        let long = format!("https://example.org/{}", "a".repeat(2048));
        for (input, expected) in [
            ("", "enter the long URL"),
            (long.as_str(), "the limit is 2048"),
            (" https://example.org/", "a space"),
            ("https://example.org/ ", "a space"),
            ("https://example.org/\tx", "a tab"),
            ("https://example.org/\r\nX: y", "a line break"),
            ("https://example.org/\u{7f}", "U+007F"),
            ("https://exa mple.org/", "a space"),
            ("example.org/page", "must be absolute"),
            ("/relative", "must be absolute"),
            ("javascript:alert(1)", "not javascript:"),
            ("ftp://example.org/", "not ftp:"),
            ("data:text/html,hi", "not data:"),
            ("http://", "not valid"),
            ("https://[::1", "not valid"),
            ("https://example.org:99999/", "not valid"),
            ("http://127.0.0.1:6081/l/abcd", "this shortener itself"),
            ("//example.org/page", "scheme-relative"),
            ("https://user:pass@example.org/", "user name or password"),
            ("https://user@example.org/", "user name or password"),
            ("https://:pass@example.org/", "user name or password"),
            ("https://example.org:0/", "port 0"),
            ("https://example.org:-1/", "not valid"),
            ("https://example.org:8o/", "not valid"),
            ("https://example.org/\u{0}", "U+0000"),
            ("https://example.org/\u{85}", "U+0085"),
            ("https://example.org/\u{a0}", "U+00A0"),
            ("https://example.org/\u{2028}", "U+2028"),
            ("https://example.org/\u{3000}", "U+3000"),
        ] {
            let error = normalize_url(input, &s).unwrap_err();
            assert_eq!(error.field, Field::Url);
            assert!(error.message.contains(expected), "{input:?}: {error}");
        }
    }

    #[test]
    fn hosts_the_internet_cannot_reach_are_refused() {
        let s = settings();
        for (input, kind) in [
            ("http://127.0.0.1:9000/page", "loopback"),
            ("http://127.1/", "loopback"),
            ("http://2130706433/", "loopback"),
            ("http://0x7f.0.0.1/", "loopback"),
            ("http://[::1]/", "loopback"),
            ("http://[::ffff:127.0.0.1]/", "loopback"),
            ("http://[::7f00:1]/", "loopback"),
            ("http://[::ffff:0:7f00:1]/", "loopback"),
            ("http://[64:ff9b::a00:1]/", "private"),
            ("http://[2002:7f00:1::]/", "loopback"),
            ("http://[fec0::1]/", "private"),
            ("http://198.18.0.1/", "not a host address"),
            ("http://240.0.0.1/", "not a host address"),
            ("http://localhost:8080/", "loopback name"),
            ("http://LocalHost./", "loopback name"),
            ("http://api.localhost/", "loopback name"),
            ("http://10.1.2.3/", "private"),
            ("http://172.16.0.1/", "private"),
            ("http://172.31.255.255/", "private"),
            ("http://192.168.1.1/admin", "private"),
            ("http://100.64.0.1/", "private"),
            ("http://[fd00::1]/", "private"),
            ("http://[::ffff:10.0.0.1]/", "private"),
            ("http://router.internal/", "private name"),
            ("http://nas.home.arpa/", "private name"),
            ("http://169.254.169.254/latest/meta-data/", "link-local"),
            ("http://[fe80::1]/", "link-local"),
            ("http://printer.local/", "link-local name"),
            ("http://0.0.0.0/", "not a host address"),
            ("http://[::]/", "not a host address"),
            ("http://255.255.255.255/", "not a host address"),
            ("http://224.0.0.1/", "not a host address"),
            ("http://intranet/", "intranet name"),
        ] {
            let error = normalize_url(input, &s).unwrap_err();
            assert!(error.message.contains(kind), "{input:?}: {error}");
        }
        for public in [
            "http://172.32.0.1/",
            "http://100.128.0.1/",
            "http://8.8.8.8/",
            "http://[2001:4860:4860::8888]/",
            "http://[64:ff9b::808:808]/",
            "http://[2002:808:808::1]/",
            "http://198.20.0.1/",
            "http://localhost.example.org/",
            "http://local.example/",
            "http://example.local.org/",
        ] {
            assert!(normalize_url(public, &s).is_ok(), "{public}");
        }
    }

    #[test]
    fn private_hosts_can_be_allowed() {
        let s = Settings::new(Config {
            allow_private_targets: true,
            ..Config::default()
        })
        .unwrap();
        assert!(normalize_url("http://127.0.0.1:9000/page", &s).is_ok());
        assert!(normalize_url("http://intranet/", &s).is_ok());
        // The shortener itself stays refused, under any spelling of a loop.
        for own in [
            "http://127.0.0.1:6081/l/abcd",
            "https://127.0.0.1/l/abcd",
            "http://127.0.0.1:8443/l/abcd",
        ] {
            let error = normalize_url(own, &s).unwrap_err();
            assert!(
                error.message.contains("this shortener itself"),
                "{own}: {error}"
            );
        }
        assert!(normalize_url("http://127.0.0.1:9000/page", &s).is_ok());
        assert!(normalize_url("http://u:p@10.0.0.1/", &s).is_err());
    }

    #[test]
    fn a_public_shortener_refuses_loops_however_spelled() {
        let s = Settings::new(Config {
            public_base_url: "https://s.example/l/".into(),
            ..Config::default()
        })
        .unwrap();
        for own in [
            "https://s.example/l/abcd",
            "https://S.Example./l/abcd",
            "http://s.example/l/abcd",
            "https://s.example/about",
        ] {
            let error = normalize_url(own, &s).unwrap_err();
            assert!(
                error.message.contains("this shortener itself"),
                "{own}: {error}"
            );
        }
        assert!(normalize_url("http://s.example/about", &s).is_ok());
    }

    #[test]
    fn every_name_the_links_are_served_under_is_a_loop() {
        let mut config = Config {
            public_base_url: "https://s.example/l/".into(),
            ..Config::default()
        };
        config.varnish.hosts = vec![
            "s.example".into(),
            "go.example".into(),
            "Short.Example".into(),
        ];
        config.domains = toml::from_str::<Config>(
            "[[domains]]\nbase_url = \"https://b.example/\"\naliases = [\"www.b.example\"]\n",
        )
        .unwrap()
        .domains;
        let s = Settings::new(config).unwrap();
        for own in [
            "https://go.example/l/abcd",
            "http://GO.example.:8080/l/abcd",
            "https://short.example/l/abcd",
            "https://s.example:8443/l/abcd",
            // Another domain's links are at its root, under each of its names.
            "https://b.example/abcd",
            "http://WWW.b.example/anything",
        ] {
            let error = normalize_url(own, &s).unwrap_err();
            assert!(
                error.message.contains("this shortener itself"),
                "{own}: {error}"
            );
        }
        // Pages of those sites that are no short links stay fine to link to.
        assert!(normalize_url("https://go.example/about", &s).is_ok());
        assert!(normalize_url("https://other.example/l/abcd", &s).is_ok());
    }

    #[test]
    fn custom_keys_follow_the_shared_rules() {
        let s = settings();
        assert!(check_custom_key("my-talk_2026", &s).is_ok());
        for key in ["ab", "has space", "slash/y", "dot.y", &"k".repeat(65)] {
            let error = check_custom_key(key, &s).unwrap_err();
            assert_eq!(error.field, Field::Key);
        }
    }
}
