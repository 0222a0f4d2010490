//! The key scheme against plain models of its documented rules.
//!
//! Varnish decides from the regex of `key_pattern` which URLs are short
//! links, and the VMOD and the writer decide with `check`: if the two ever
//! disagreed, a key could be stored that Varnish never serves, or a URL
//! could reach Redis that the VMOD would refuse.
//!
//! Input: text (invalid UTF-8 replaced). Without a newline it is both a key
//! and a hash prefix; with one, the part before it is the prefix and the
//! rest the key.

use std::sync::LazyLock;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use regex::Regex;
use shortlink_core::{
    digest_key, KeyError, KeyScheme, SchemeError, DIGEST_KEY_LEN, MAX_KEY_LEN, MAX_PREFIX_LEN,
    MAX_SPLIT, MIN_KEY_LEN,
};

/// Schemes every key is checked against, each with the regex its VCL gets.
/// `\A…\z` anchor it as `^…$` does in Varnish's PCRE, except that PCRE's `$`
/// also matches before a final newline, which no request URL can carry.
static SCHEMES: LazyLock<Vec<(KeyScheme, Regex)>> = LazyLock::new(|| {
    let mut schemes = vec![KeyScheme::default()];
    for (prefix, split) in [("short:", 1), ("", 2), ("{links}:", 3), ("a/b.c-d_e", 4)] {
        schemes.push(KeyScheme::new(prefix, split).expect("a valid scheme"));
    }
    schemes
        .into_iter()
        .map(|scheme| {
            let pattern = format!(r"\A(?:{})\z", scheme.key_pattern());
            let regex = Regex::new(&pattern).expect("key_pattern is a valid regex");
            (scheme, regex)
        })
        .collect()
});

/// Checks one input: the key scheme's properties above.
///
/// # Panics
///
/// When the input breaks one of the properties above: the panic says which.
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (prefix, key) = text.split_once('\n').unwrap_or((&text, &text));
    for (scheme, regex) in SCHEMES.iter() {
        check_key(scheme, regex, key);
    }
    check_scheme(prefix, key);
    check_digest(&text);
}

/// The alphabet as documented: `A-Z a-z 0-9 - _`.
fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

fn check_key(scheme: &KeyScheme, regex: &Regex, key: &str) {
    let min = scheme.min_len();
    assert!(min >= MIN_KEY_LEN && min > scheme.split());
    let accepted = scheme.check(key);
    let model = (min..=MAX_KEY_LEN).contains(&key.len()) && key.bytes().all(is_key_byte);
    assert_eq!(accepted.is_ok(), model, "check({key:?}) = {accepted:?}");
    assert_eq!(
        regex.is_match(key),
        model,
        "the VCL's regex {regex} disagrees with check({key:?}) = {accepted:?}"
    );
    // The error names a real fault: its message tells the user what to fix.
    match accepted {
        Ok(()) => {}
        Err(KeyError::BadCharacter { position }) => {
            let bytes = key.as_bytes();
            assert!(!is_key_byte(bytes[position]), "{key:?}: {position}");
            assert!(bytes[..position].iter().copied().all(is_key_byte));
        }
        Err(KeyError::TooShort { len, min: said }) => {
            assert_eq!((len, said), (key.len(), min));
            assert!(len < min);
        }
        Err(KeyError::TooLong { len }) => {
            assert_eq!(len, key.len());
            assert!(len > MAX_KEY_LEN);
        }
    }
    match scheme.locate(key) {
        Ok(slot) => {
            assert!(model);
            let (head, field) = key.split_at(scheme.split());
            assert_eq!(slot.hash, format!("{}{head}", scheme.prefix()));
            assert_eq!(slot.field, field);
            assert!(!slot.field.is_empty());
        }
        Err(error) => assert_eq!(Err(error), accepted),
    }
}

/// `KeyScheme::new` against its documented rule: split 1 to `MAX_SPLIT`, and
/// a prefix of at most `MAX_PREFIX_LEN` of `A-Z a-z 0-9 : . _ - / { }`, so
/// that it fits in a Redis key name and a VCL string unquoted.
fn check_scheme(prefix: &str, key: &str) {
    let prefix_ok = prefix.len() <= MAX_PREFIX_LEN
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b":._-/{}".contains(&b));
    for split in 0..=MAX_SPLIT + 1 {
        let split_ok = (1..=MAX_SPLIT).contains(&split);
        match KeyScheme::new(prefix, split) {
            Ok(scheme) => {
                assert!(split_ok && prefix_ok, "{prefix:?} split {split} accepted");
                assert_eq!((scheme.prefix(), scheme.split()), (prefix, split));
                if let Ok(slot) = scheme.locate(key) {
                    assert!(slot.hash.starts_with(prefix));
                    assert_eq!(format!("{prefix}{key}"), slot.hash + slot.field);
                }
            }
            Err(SchemeError::Split(said)) => {
                assert_eq!(said, split);
                assert!(!split_ok);
            }
            Err(SchemeError::Prefix(said)) => {
                assert_eq!(said, prefix);
                assert!(!prefix_ok, "{prefix:?} refused");
            }
        }
    }
}

/// A generated key is SHA-1 in unpadded URL-safe base64, and every prefix
/// the writer may use of it is a valid key for every scheme.
fn check_digest(url: &str) {
    let key = digest_key(url);
    assert_eq!(key.len(), DIGEST_KEY_LEN);
    let expected = URL_SAFE_NO_PAD.encode(sha1_smol::Sha1::from(url).digest().bytes());
    assert_eq!(key, expected, "digest_key({url:?})");
    for (scheme, regex) in SCHEMES.iter() {
        for len in scheme.min_len()..=DIGEST_KEY_LEN {
            let prefix = &key[..len];
            assert_eq!(scheme.check(prefix), Ok(()), "{prefix:?}");
            assert!(regex.is_match(prefix), "{prefix:?}");
        }
    }
}
