//! The rules both sides share, each in one place: the key scheme and its
//! Redis layout (here), safe redirect targets (here), and the redirect and
//! Redis settings with their defaults and bounds ([`settings`]).
//!
//! Everything that decides what a key is and where it lives in Redis is
//! here, and nowhere else: the VMOD uses it to refuse bad keys before they
//! reach Redis, the writer uses it to store links, and the VCL generator
//! derives its URL pattern from it. Redis itself can be written by hand;
//! this module is the contract such a hand is held to.
//!
//! # Storage format
//!
//! A key is [`MIN_KEY_LEN`] to [`MAX_KEY_LEN`] characters of
//! `A-Z a-z 0-9 - _`. Key `Lm25`, with prefix `short:` and split 2, lives in
//! the Redis hash `short:Lm`, field `25`; the value is the long URL as a
//! plain string:
//!
//! ```text
//! redis-cli HSET short:Lm 25 https://example.org/
//! ```
//!
//! Splitting keys over many small hashes keeps each hash in Redis's compact
//! encoding, which costs far less memory per link than one string key each.

use std::fmt;

pub mod clicks;
pub mod domain;
pub mod query;
pub mod record;
pub mod rules;
pub mod settings;

pub use domain::{DomainError, DomainName, NotFoundKind, NotFoundRedirects};

pub use record::{ClickLimit, Expiry, Owner, Record, RecordError, Stored, DELETED};

pub use settings::{
    AdmissionWindow, Bounded, ClickBacklog, ClickQueueMb, DomainVisitsKept, DurationRule,
    FlushInterval, HeaderValue, PoolSize, RedirectStatus, ReplicasToAck, Retention, SettingError,
    Timeout, TimeoutRule, Ttl, TtlRule, VisitsKept,
};

/// Shortest key accepted anywhere. Shorter keys are refused before any
/// lookup: they would be guessable and would crowd the key space.
pub const MIN_KEY_LEN: usize = 3;

/// Longest key accepted anywhere. Keeps hostile URLs from reaching Redis.
pub const MAX_KEY_LEN: usize = 64;

/// Shortest key the writer generates from a URL's digest.
pub const MIN_GENERATED_LEN: usize = 4;

/// Hash-name prefix used unless configured otherwise.
pub const DEFAULT_PREFIX: &str = "short:";

/// Characters of a key that name its Redis hash, unless configured otherwise.
pub const DEFAULT_SPLIT: usize = 2;

/// Largest split allowed: 64^4 hashes is already far more than any
/// realistic link count needs.
pub const MAX_SPLIT: usize = 4;

/// Longest hash-name prefix allowed.
pub const MAX_PREFIX_LEN: usize = 64;

/// The key alphabet as a regular-expression character class, for VCL and docs.
pub const KEY_CHAR_CLASS: &str = "[A-Za-z0-9_-]";

/// Whether `byte` may appear in a key: the URL-safe base64 alphabet.
#[inline]
pub const fn is_key_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'
}

/// Why a key was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// Fewer characters than the scheme's minimum.
    TooShort { len: usize, min: usize },
    /// More than [`MAX_KEY_LEN`] characters.
    TooLong { len: usize },
    /// A byte outside `A-Z a-z 0-9 - _`, at this position.
    BadCharacter { position: usize },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort { len, min } => {
                write!(f, "key has {len} characters; use at least {min}")
            }
            Self::TooLong { len } => {
                write!(f, "key has {len} characters; use at most {MAX_KEY_LEN}")
            }
            Self::BadCharacter { position } => write!(
                f,
                "key has a character other than A-Z, a-z, 0-9, '-' or '_' at position {}",
                position + 1
            ),
        }
    }
}

impl std::error::Error for KeyError {}

/// Why a key scheme's settings were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemeError {
    /// Split outside `1..=MAX_SPLIT`.
    Split(usize),
    /// Prefix too long or with a character that has no place in a Redis key
    /// name or a VCL string.
    Prefix(String),
}

impl fmt::Display for SchemeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Split(split) => {
                write!(f, "split {split} is out of range: use 1 to {MAX_SPLIT}")
            }
            Self::Prefix(prefix) => write!(
                f,
                "hash prefix {prefix:?} is not allowed: use at most {MAX_PREFIX_LEN} characters \
                 of A-Z, a-z, 0-9 and : . _ - / {{ }}"
            ),
        }
    }
}

impl std::error::Error for SchemeError {}

/// Where a key lives in Redis: `HGET hash field`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot<'k> {
    /// The hash's name: the prefix followed by the key's first `split` characters.
    pub hash: String,
    /// The field inside the hash: the rest of the key, never empty.
    pub field: &'k str,
}

/// A key that passed the rules of the [`KeyScheme`] that made it: only a
/// scheme makes one, so whatever holds a `Key` needs no check of its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key(String);

impl Key {
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A map keyed by `Key` is searched with the text a request carried, so a
/// key already in it is neither checked nor copied again. (The derived
/// `Hash` hashes the text as `str` does, as `Borrow` requires.)
impl std::borrow::Borrow<str> for Key {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The key rules and Redis layout of one deployment: hash prefix and split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyScheme {
    prefix: String,
    split: usize,
}

impl Default for KeyScheme {
    fn default() -> Self {
        Self {
            prefix: DEFAULT_PREFIX.to_owned(),
            split: DEFAULT_SPLIT,
        }
    }
}

impl KeyScheme {
    /// A scheme storing key `k` in hash `prefix + k[..split]`, field `k[split..]`.
    pub fn new(prefix: &str, split: usize) -> Result<Self, SchemeError> {
        if !(1..=MAX_SPLIT).contains(&split) {
            return Err(SchemeError::Split(split));
        }
        let prefix_ok = prefix.len() <= MAX_PREFIX_LEN
            && prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b":._-/{}".contains(&b));
        if !prefix_ok {
            return Err(SchemeError::Prefix(prefix.to_owned()));
        }
        Ok(Self {
            prefix: prefix.to_owned(),
            split,
        })
    }

    /// A scheme whose prefix was built from checked parts (a domain's key
    /// space), past [`MAX_PREFIX_LEN`].
    fn with_prefix(prefix: String, split: usize) -> Self {
        Self { prefix, split }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn split(&self) -> usize {
        self.split
    }

    /// Shortest valid key: [`MIN_KEY_LEN`], or longer when the split needs it
    /// so that every key keeps a non-empty field.
    pub fn min_len(&self) -> usize {
        MIN_KEY_LEN.max(self.split + 1)
    }

    /// Checks `key` against the rules without touching Redis.
    pub fn check(&self, key: &str) -> Result<(), KeyError> {
        let len = key.len();
        if let Some(position) = key.bytes().position(|b| !is_key_byte(b)) {
            return Err(KeyError::BadCharacter { position });
        }
        if len < self.min_len() {
            return Err(KeyError::TooShort {
                len,
                min: self.min_len(),
            });
        }
        if len > MAX_KEY_LEN {
            return Err(KeyError::TooLong { len });
        }
        Ok(())
    }

    /// `text` as a [`Key`], or why it is refused.
    pub fn key(&self, text: &str) -> Result<Key, KeyError> {
        self.check(text)?;
        Ok(Key(text.to_owned()))
    }

    /// The Redis hash and field holding `key`, or why `key` is refused.
    pub fn locate<'k>(&self, key: &'k str) -> Result<Slot<'k>, KeyError> {
        self.check(key)?;
        Ok(self.slot_of(key))
    }

    /// The Redis hash and field holding `key`.
    #[must_use]
    pub fn slot<'k>(&self, key: &'k Key) -> Slot<'k> {
        self.slot_of(&key.0)
    }

    /// The field holding `key` inside its hash: [`Self::slot`] without
    /// building the hash's name.
    #[must_use]
    pub fn field<'k>(&self, key: &'k Key) -> &'k str {
        self.split_key(&key.0).1
    }

    /// The part of `key` that names its hash, after the prefix.
    #[must_use]
    pub fn head<'k>(&self, key: &'k Key) -> &'k str {
        self.split_key(&key.0).0
    }

    /// The keys the writer may give `url`, shortest first: the prefixes of
    /// its [`digest_key`] from `min_len` characters on. They share their
    /// first `split` characters, so all of them live in one hash.
    #[must_use]
    pub fn generated_keys(&self, url: &ValidUrl, min_len: usize) -> Vec<Key> {
        let digest = digest_key(url.as_str());
        (min_len.max(self.min_len())..=digest.len())
            .map(|len| Key(digest[..len].to_owned()))
            .collect()
    }

    /// `key`, which has passed the rules, as the part naming its hash and
    /// its field. The rules keep it ASCII, so byte indexing is a char
    /// boundary, and at least one character longer than the split; a key of
    /// another scheme with a larger split still gets a field, not a panic.
    fn split_key<'k>(&self, key: &'k str) -> (&'k str, &'k str) {
        key.split_at(self.split.min(key.len().saturating_sub(1)))
    }

    fn slot_of<'k>(&self, key: &'k str) -> Slot<'k> {
        let (head, field) = self.split_key(key);
        let mut hash = String::with_capacity(self.prefix.len() + head.len());
        hash.push_str(&self.prefix);
        hash.push_str(head);
        Slot { hash, field }
    }

    /// The stream of purges a Varnish node did not confirm, which the
    /// writers send again until they succeed or the answer they would
    /// remove has expired: `<prefix>purge:queue` (`:` is no key character).
    #[must_use]
    pub fn purge_queue(&self) -> String {
        format!("{}purge:queue", self.prefix)
    }

    /// The key every writer of this store signs its web form's tokens with,
    /// so that a form one writer served may be posted to another:
    /// `<prefix>form:key`.
    #[must_use]
    pub fn form_key(&self) -> String {
        format!("{}form:key", self.prefix)
    }

    /// When a client's next link is allowed under the rate limit writers
    /// share (GCRA's theoretical arrival time, in ms): `<prefix>rate:<client>`,
    /// expiring once the client's allowance is whole again.
    #[must_use]
    pub fn rate_limit(&self, client: &str) -> String {
        format!("{}rate:{client}", self.prefix)
    }

    /// The list of the keys created through the writer by `owner`, oldest
    /// first: `<prefix>@<owner>`, or `<prefix>@` for links created without
    /// a token. `@` is no key character, so it never names a link's hash.
    #[must_use]
    pub fn index(&self, owner: Option<&Owner>) -> String {
        format!(
            "{}@{}",
            self.prefix,
            owner.map_or("", |owner| owner.as_str())
        )
    }

    /// The Redis hash and field holding what the writer knows of `key`'s
    /// link beside its value (when it was created, its title and tags):
    /// `<prefix>meta:<head>`, field `<rest>`. Varnish never reads it, and
    /// `:` is no key character, so it never names a link's hash.
    #[must_use]
    pub fn meta_slot<'k>(&self, key: &'k Key) -> Slot<'k> {
        let (head, field) = self.split_key(&key.0);
        Slot {
            hash: format!("{}meta:{head}", self.prefix),
            field,
        }
    }

    /// The domain's redirects for visits to no link, set while the writer
    /// runs ([`NotFoundRedirects`]): `<prefix>domain:redirects`, a hash
    /// whose fields are [`NotFoundKind`] names. `:` is no key character,
    /// so it never names a link's hash.
    #[must_use]
    pub fn domain_redirects(&self) -> String {
        format!("{}domain:redirects", self.prefix)
    }

    /// The keys of this key space's crawlable links (`!c`), which its
    /// `/robots.txt` allows: `<prefix>crawlable:keys`, a sorted set whose
    /// members all score 0, so Redis reads them in byte order and at most
    /// [`MAX_ROBOTS_ALLOWS`] at a time. `:` is no key character, so it
    /// never names a link's hash.
    #[must_use]
    pub fn crawlable(&self) -> String {
        format!("{}crawlable:keys", self.prefix)
    }

    /// The owner whose index is named `name`: `None` inside for the index
    /// of links created without a token, `Err` for a name that is no index.
    pub fn index_owner(&self, name: &str) -> Result<Option<Owner>, RecordError> {
        let owner = name
            .strip_prefix(&self.prefix)
            .and_then(|rest| rest.strip_prefix('@'))
            .ok_or_else(|| RecordError::Owner(name.to_owned()))?;
        if owner.is_empty() {
            Ok(None)
        } else {
            Owner::try_from(owner).map(Some)
        }
    }

    /// A regular expression (without anchors) matching exactly the valid keys.
    pub fn key_pattern(&self) -> String {
        format!("{KEY_CHAR_CLASS}{{{},{MAX_KEY_LEN}}}", self.min_len())
    }

    /// [`Self::key_pattern`] for an HTML `pattern` attribute: browsers
    /// compile those in the `v` mode, where a literal `-` in a class must
    /// be escaped.
    pub fn html_key_pattern(&self) -> String {
        let class = KEY_CHAR_CLASS.replace("_-]", "_\\-]");
        format!("{class}{{{},{MAX_KEY_LEN}}}", self.min_len())
    }
}

/// The last path segment under a domain's link path that names its
/// robots.txt: `<link path>robots.txt`, the object Varnish caches it as and
/// the writer purges. A key holds no dot, so it is never a link's.
pub const ROBOTS_TXT: &str = "robots.txt";

/// Most crawlable links one robots.txt allows, the first in byte order:
/// at 64-byte keys under a short path, some 400 KB, within the 500 KiB a
/// crawler reads of a robots.txt.
pub const MAX_ROBOTS_ALLOWS: usize = 5000;

/// Length of a full digest key: 20 bytes of SHA-1 in unpadded base64.
pub const DIGEST_KEY_LEN: usize = 27;

const URL_SAFE_BASE64: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The full generated key of `url`: SHA-1 of its bytes in URL-safe base64
/// without padding. A link's key is the shortest free prefix of this (at
/// least [`MIN_GENERATED_LEN`] characters by default), so the same URL
/// always lands on the same key.
pub fn digest_key(url: &str) -> String {
    let digest = sha1_smol::Sha1::from(url).digest().bytes();
    let mut key = String::with_capacity(DIGEST_KEY_LEN);
    for chunk in digest.chunks(3) {
        let mut group = [0u8; 3];
        group[..chunk.len()].copy_from_slice(chunk);
        let bits = u32::from(group[0]) << 16 | u32::from(group[1]) << 8 | u32::from(group[2]);
        let symbols = chunk.len() + 1;
        for i in 0..symbols {
            let index = (bits >> (18 - 6 * i)) & 0x3f;
            key.push(char::from(URL_SAFE_BASE64[index as usize]));
        }
    }
    key
}

/// Longest redirect target written into a `Location` header.
pub const MAX_TARGET_LEN: usize = 8192;

/// Why a stored value may not be used as a redirect target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetError {
    Empty,
    TooLong,
    /// A control character, space, DEL or non-ASCII byte at this position.
    UnsafeByte {
        position: usize,
    },
    /// Anything but `http://` or `https://`.
    Scheme,
    /// No host after the scheme.
    NoHost,
    /// A backslash, which browsers read as `/` and so can change the host.
    Backslash,
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Empty => f.write_str("URL is empty"),
            Self::TooLong => write!(f, "URL is longer than {MAX_TARGET_LEN} bytes"),
            Self::UnsafeByte { position } => write!(
                f,
                "URL has a space, control or non-ASCII character at byte {}; percent-encode it",
                position + 1
            ),
            Self::Scheme => f.write_str("URL must start with http:// or https://"),
            Self::NoHost => f.write_str("URL has no host after the scheme"),
            Self::Backslash => f.write_str("URL has a backslash; percent-encode it as %5C"),
        }
    }
}

impl std::error::Error for TargetError {}

/// Whether `url` is safe to send as a `Location` header and to link to.
///
/// This is the last line of defence for values written into Redis by any
/// hand: an absolute `http` or `https` URL with a host, made only of visible
/// ASCII, so that nothing can split a header, smuggle a `javascript:` link,
/// or be read differently by a browser than by us.
pub fn check_redirect_target(url: &str) -> Result<(), TargetError> {
    let bytes = url.as_bytes();
    if bytes.is_empty() {
        return Err(TargetError::Empty);
    }
    if bytes.len() > MAX_TARGET_LEN {
        return Err(TargetError::TooLong);
    }
    if let Some(position) = bytes.iter().position(|b| !(0x21..=0x7e).contains(b)) {
        return Err(TargetError::UnsafeByte { position });
    }
    if bytes.contains(&b'\\') {
        return Err(TargetError::Backslash);
    }
    let rest = strip_prefix_ignore_case(url, "https://")
        .or_else(|| strip_prefix_ignore_case(url, "http://"))
        .ok_or(TargetError::Scheme)?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_and_port = authority.rsplit('@').next().unwrap_or_default();
    let host = if host_and_port.starts_with('[') {
        host_and_port
    } else {
        host_and_port.split(':').next().unwrap_or_default()
    };
    if host.is_empty() {
        return Err(TargetError::NoHost);
    }
    Ok(())
}

/// A URL that passed [`check_redirect_target`]: what the writer stores
/// (its validator returns one, in canonical form) and all the store takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidUrl(String);

impl ValidUrl {
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ValidUrl {
    type Error = TargetError;

    fn try_from(url: String) -> Result<Self, TargetError> {
        check_redirect_target(&url)?;
        Ok(Self(url))
    }
}

impl fmt::Display for ValidUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `digits` as a number if it is digits alone (`u64::from_str` would also
/// take a leading `+`) and fits a `u64`.
pub(crate) fn whole_number(digits: &str) -> Option<u64> {
    digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse().ok())
        .flatten()
}

/// Escapes `text` for HTML element content and quoted attribute values.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_example_splits_into_hash_and_field() {
        let slot = KeyScheme::default().locate("Lm25").unwrap();
        assert_eq!(slot.hash, "short:Lm");
        assert_eq!(slot.field, "25");
    }

    #[test]
    fn keys_are_made_only_by_the_rules_and_always_have_a_slot() {
        let scheme = KeyScheme::new("s:", 3).unwrap();
        assert_eq!(
            scheme.key("abc"),
            Err(KeyError::TooShort { len: 3, min: 4 })
        );
        let key = scheme.key("abcd").unwrap();
        let slot = scheme.slot(&key);
        assert_eq!((slot.hash.as_str(), slot.field), ("s:abc", "d"));
        // A key made under a smaller split still gets a field, not a panic.
        let short = KeyScheme::default().key("xyz").unwrap();
        let slot = KeyScheme::new("s:", 4).unwrap().slot(&short);
        assert_eq!((slot.hash.as_str(), slot.field), ("s:xy", "z"));
    }

    #[test]
    fn generated_keys_are_digest_prefixes_in_one_hash() {
        let url = ValidUrl::try_from("https://example.org/".to_owned()).unwrap();
        let digest = digest_key(url.as_str());
        let scheme = KeyScheme::default();
        let keys = scheme.generated_keys(&url, MIN_GENERATED_LEN);
        assert_eq!(keys.len(), DIGEST_KEY_LEN - MIN_GENERATED_LEN + 1);
        assert_eq!(keys[0].as_str(), &digest[..MIN_GENERATED_LEN]);
        assert_eq!(keys.last().unwrap().as_str(), digest);
        let hash = scheme.slot(&keys[0]).hash;
        assert!(keys.iter().all(|key| scheme.slot(key).hash == hash));
        assert!(keys
            .iter()
            .all(|key| scheme.field(key) == scheme.slot(key).field));
        assert!(keys
            .iter()
            .all(|key| format!("short:{}", scheme.head(key)) == hash));
        // Never shorter than the scheme allows, whatever is asked.
        let wide = KeyScheme::new("s:", 4).unwrap();
        assert_eq!(wide.generated_keys(&url, 1)[0].as_str().len(), 5);
    }

    #[test]
    fn only_safe_targets_become_valid_urls() {
        assert!(ValidUrl::try_from("https://example.org/a".to_owned()).is_ok());
        assert_eq!(
            ValidUrl::try_from("javascript:alert(1)".to_owned()),
            Err(TargetError::Scheme)
        );
    }

    #[test]
    fn indexes_never_share_a_name_with_a_hash() {
        let scheme = KeyScheme::default();
        let alice = Owner::try_from("alice").unwrap();
        assert_eq!(scheme.index(Some(&alice)), "short:@alice");
        assert_eq!(scheme.index(None), "short:@");
        assert_eq!(scheme.index_owner("short:@alice"), Ok(Some(alice)));
        assert_eq!(scheme.index_owner("short:@"), Ok(None));
        assert!(scheme.index_owner("short:Lm").is_err());
        assert!(scheme.locate("@alice").is_err());
    }

    #[test]
    fn a_links_details_live_beside_it_never_in_a_links_hash() {
        let scheme = KeyScheme::default();
        let key = scheme.key("Lm25").unwrap();
        let meta = scheme.meta_slot(&key);
        assert_eq!((meta.hash.as_str(), meta.field), ("short:meta:Lm", "25"));
        assert!(scheme.locate("meta:Lm25").is_err());
    }

    #[test]
    fn the_crawlable_set_is_never_a_links_hash() {
        let scheme = KeyScheme::default();
        assert_eq!(scheme.crawlable(), "short:crawlable:keys");
        assert!(scheme.locate("crawlable:keys").is_err());
        assert!(scheme.check(ROBOTS_TXT).is_err());
    }

    #[test]
    fn custom_prefix_and_split() {
        let scheme = KeyScheme::new("links-", 3).unwrap();
        let slot = scheme.locate("abcdef").unwrap();
        assert_eq!((slot.hash.as_str(), slot.field), ("links-abc", "def"));
    }

    #[test]
    fn every_alphabet_character_is_accepted() {
        let scheme = KeyScheme::default();
        let all: String = ('A'..='Z')
            .chain('a'..='z')
            .chain('0'..='9')
            .chain(['-', '_'])
            .collect();
        assert_eq!(all.len(), 64);
        assert_eq!(scheme.check(&all), Ok(()));
    }

    #[test]
    fn length_limits() {
        let scheme = KeyScheme::default();
        assert_eq!(
            scheme.check("ab"),
            Err(KeyError::TooShort { len: 2, min: 3 })
        );
        assert_eq!(scheme.check(""), Err(KeyError::TooShort { len: 0, min: 3 }));
        assert_eq!(scheme.check("abc"), Ok(()));
        assert_eq!(scheme.check(&"a".repeat(64)), Ok(()));
        assert_eq!(
            scheme.check(&"a".repeat(65)),
            Err(KeyError::TooLong { len: 65 })
        );
    }

    #[test]
    fn split_raises_the_minimum_so_fields_are_never_empty() {
        let scheme = KeyScheme::new("s:", 3).unwrap();
        assert_eq!(scheme.min_len(), 4);
        assert!(scheme.check("abc").is_err());
        assert_eq!(scheme.locate("abcd").unwrap().field, "d");
    }

    #[test]
    fn hostile_keys_are_refused() {
        let scheme = KeyScheme::default();
        for key in [
            "..",
            "../etc",
            "a/b/c",
            "%2F%2F",
            "abc%0d",
            "abc\r\nX: y",
            "abc def",
            "abc.def",
            "abç",
            "ключи",
            "abc=",
            "abc+/",
            "abc\0",
        ] {
            assert!(scheme.check(key).is_err(), "{key:?} was accepted");
        }
        assert_eq!(
            scheme.check("abc/def"),
            Err(KeyError::BadCharacter { position: 3 })
        );
    }

    #[test]
    fn scheme_settings_are_validated() {
        assert_eq!(KeyScheme::new("short:", 0), Err(SchemeError::Split(0)));
        assert_eq!(KeyScheme::new("short:", 5), Err(SchemeError::Split(5)));
        assert!(KeyScheme::new("{short}:", 2).is_ok());
        assert!(KeyScheme::new("", 2).is_ok());
        for bad in ["sh ort", "short\"", "short\n", &"p".repeat(65)] {
            assert!(KeyScheme::new(bad, 2).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn key_pattern_follows_the_scheme() {
        assert_eq!(KeyScheme::default().key_pattern(), "[A-Za-z0-9_-]{3,64}");
        assert_eq!(
            KeyScheme::new("x", 4).unwrap().key_pattern(),
            "[A-Za-z0-9_-]{5,64}"
        );
    }

    #[test]
    fn html_key_pattern_is_the_key_pattern_with_its_dash_escaped() {
        for scheme in [KeyScheme::default(), KeyScheme::new("x", 4).unwrap()] {
            let html = scheme.html_key_pattern();
            assert!(html.contains("_\\-]"), "{html}");
            assert_eq!(html.replace("\\-", "-"), scheme.key_pattern());
        }
    }

    #[test]
    fn digest_key_matches_the_seed_example() {
        // The design document's example: Nw9W82DjTt_wGeaVNpNqV8fuF0E= with padding.
        assert_eq!(
            digest_key("http://canyoucrackit.co.uk/soyoudidit.asp"),
            "Nw9W82DjTt_wGeaVNpNqV8fuF0E"
        );
        let key = digest_key("https://example.org/");
        assert_eq!(key.len(), DIGEST_KEY_LEN);
        assert!(key.bytes().all(is_key_byte));
        assert_eq!(key, digest_key("https://example.org/"));
        assert_ne!(key, digest_key("https://example.org"));
    }

    #[test]
    fn digest_key_uses_the_url_safe_alphabet() {
        // SHA-1("abc") = a9993e36..., whose base64 has '+' and '/' in the
        // standard alphabet: they must come out as '-' and '_'.
        let key = digest_key("abc");
        assert_eq!(key, "qZk-NkcGgWq6PiVxeFDCbJzQ2J0");
    }

    #[test]
    fn html_escaping() {
        assert_eq!(
            escape_html("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn safe_targets() {
        for url in [
            "https://example.org/",
            "http://example.org",
            "HTTPS://Example.org/a?b=c#d",
            "https://[2001:db8::1]:8443/x",
            "https://user@example.org/",
            "https://example.org/%0D%0A",
        ] {
            assert_eq!(check_redirect_target(url), Ok(()), "{url}");
        }
    }

    #[test]
    fn unsafe_targets() {
        let cases = [
            ("", TargetError::Empty),
            ("javascript:alert(1)", TargetError::Scheme),
            ("data:text/html,x", TargetError::Scheme),
            ("//example.org/", TargetError::Scheme),
            ("ftp://example.org/", TargetError::Scheme),
            ("https:///path", TargetError::NoHost),
            ("https://:80/", TargetError::NoHost),
            ("https://user@/", TargetError::NoHost),
            ("https://a.org\\@b.org/", TargetError::Backslash),
            (
                "https://example.org/\r\nSet-Cookie: x=y",
                TargetError::UnsafeByte { position: 20 },
            ),
            (
                "https://example.org/\n",
                TargetError::UnsafeByte { position: 20 },
            ),
            (
                "https://exa mple.org/",
                TargetError::UnsafeByte { position: 11 },
            ),
            (
                " https://example.org/",
                TargetError::UnsafeByte { position: 0 },
            ),
            (
                "https://exämple.org/",
                TargetError::UnsafeByte { position: 10 },
            ),
            (
                "https://example.org/\x7f",
                TargetError::UnsafeByte { position: 20 },
            ),
        ];
        for (url, expected) in cases {
            assert_eq!(check_redirect_target(url), Err(expected), "{url:?}");
        }
        let long = format!("https://example.org/{}", "a".repeat(MAX_TARGET_LEN));
        assert_eq!(check_redirect_target(&long), Err(TargetError::TooLong));
    }
}
