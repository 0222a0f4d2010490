//! Short domains: the names links are served under, each with a key space
//! of its own in Redis.
//!
//! The default domain (the host of the writer's `public_base_url`) keeps
//! the layout links have always had: key `Lm25` in hash `short:Lm`. Any
//! other domain's links live under the prefix followed by the domain's name
//! and a colon, so key `Lm25` of `go.example` is
//!
//! ```text
//! redis-cli HSET short:go.example:Lm 25 https://example.org/
//! ```
//!
//! A domain name always holds a dot, and no key holds one, so a domain's
//! hashes and counts never share a name with the default domain's (whose
//! click counts are named `short:total:…`, `short:day:…`).

use std::fmt;

use crate::KeyScheme;

mod redirects;

pub use redirects::{NotFoundKind, NotFoundRedirects};

/// Longest domain name (RFC 1035).
pub const MAX_DOMAIN_LEN: usize = 253;

/// The canonical name of a short domain: a host name of lowercase letters,
/// digits and `-` in dot-separated labels, with at least one dot (or an IPv4
/// address). Aliases are names of this kind too.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DomainName(String);

impl DomainName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why a domain name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "domain name {0:?} is not allowed: use a host name with at least one dot, \
     such as go.example (labels of letters, digits and -, at most {MAX_DOMAIN_LEN} \
     characters in all), or an IPv4 address"
)]
pub struct DomainError(pub String);

impl TryFrom<&str> for DomainName {
    type Error = DomainError;

    /// Takes `name` in any case; it is kept in lowercase, as DNS compares it.
    fn try_from(name: &str) -> Result<Self, DomainError> {
        let lower = name.to_ascii_lowercase();
        let label_ok = |label: &str| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        };
        let valid =
            lower.len() <= MAX_DOMAIN_LEN && lower.contains('.') && lower.split('.').all(label_ok);
        if valid {
            Ok(Self(lower))
        } else {
            Err(DomainError(name.to_owned()))
        }
    }
}

impl fmt::Display for DomainName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The domains other than the default one, as the VMOD's `domains`
/// parameter spells them: names separated by spaces.
pub fn parse_domain_list(text: &str) -> Result<Vec<DomainName>, DomainError> {
    let mut names: Vec<DomainName> = Vec::new();
    for word in text.split_ascii_whitespace() {
        let name = DomainName::try_from(word)?;
        if names.contains(&name) {
            return Err(DomainError(format!("{word} (named twice)")));
        }
        names.push(name);
    }
    Ok(names)
}

impl KeyScheme {
    /// The key scheme of `domain`'s links: this one's split, and its prefix
    /// followed by the domain's name and `:`. Everything named after a
    /// scheme (link hashes, owner indexes, click counts) follows.
    #[must_use]
    pub fn for_domain(&self, domain: &DomainName) -> KeyScheme {
        KeyScheme::with_prefix(format!("{}{domain}:", self.prefix()), self.split())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_host_names_with_a_dot_in_lowercase() {
        for good in ["go.example", "GO.Example", "a-b.c1.example", "127.0.0.1"] {
            let name = DomainName::try_from(good).unwrap();
            assert_eq!(name.as_str(), good.to_ascii_lowercase());
        }
        let long = format!("{}.example", "a".repeat(250));
        for bad in [
            "",
            "localhost",
            "total",
            "go..example",
            ".go.example",
            "go.example.",
            "-go.example",
            "go_x.example",
            "go.example:80",
            "[::1]",
            "go example",
            long.as_str(),
        ] {
            assert!(DomainName::try_from(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_domain_has_a_key_space_of_its_own() {
        let scheme = KeyScheme::default();
        let domain = DomainName::try_from("go.example").unwrap();
        let spaced = scheme.for_domain(&domain);
        let key = spaced.key("Lm25").unwrap();
        let slot = spaced.slot(&key);
        assert_eq!(
            (slot.hash.as_str(), slot.field),
            ("short:go.example:Lm", "25")
        );
        assert_eq!(scheme.slot(&key).hash, "short:Lm");
        // Derived names follow, and never meet the default domain's.
        assert_eq!(spaced.index(None), "short:go.example:@");
    }

    #[test]
    fn the_vmod_list_is_names_separated_by_spaces() {
        let names = parse_domain_list(" go.example  s.example\t").unwrap();
        assert_eq!(
            names.iter().map(DomainName::as_str).collect::<Vec<_>>(),
            ["go.example", "s.example"]
        );
        assert_eq!(parse_domain_list("").unwrap(), []);
        assert!(parse_domain_list("go.example go.example").is_err());
        assert!(parse_domain_list("go.example,s.example").is_err());
    }
}
