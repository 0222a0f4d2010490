//! Forwarding a short link's query string to its target: the rule the
//! VMOD applies when it delivers a redirect, and the writer when its form
//! adds campaign (`utm_*`) parameters to a target.
//!
//! The request's parameters are added to the target's own; a target
//! parameter the request names again is replaced (the request's campaign
//! is the more specific), and the target's fragment stays last:
//! `https://example.org/p?a=1&utm_source=x#top` requested with
//! `?utm_source=mail&b=2` goes to
//! `https://example.org/p?a=1&utm_source=mail&b=2#top`.

use crate::MAX_TARGET_LEN;

/// Longest query string forwarded, in bytes as requested; a longer one is
/// dropped (the redirect still answered, to the target alone).
pub const MAX_FORWARDED_QUERY: usize = 1024;

/// Why a query string was not forwarded: the target is answered as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotForwarded {
    #[error("the query string is longer than {MAX_FORWARDED_QUERY} bytes")]
    QueryTooLong,
    #[error("the target with the query string would be longer than {MAX_TARGET_LEN} bytes")]
    TargetTooLong,
}

/// The path of a request URL: what comes before its query string or
/// fragment. A link's cache entry and its key are the path's, so that
/// tracking parameters neither split the cache nor reach Redis.
#[must_use]
pub fn path_of(url: &str) -> &str {
    url.find(['?', '#']).map_or(url, |end| &url[..end])
}

/// The query string of a request URL, without its `?` and without a
/// fragment after it; empty when it has none.
#[must_use]
pub fn query_of(url: &str) -> &str {
    let Some((before, after)) = url.split_once(['?', '#']) else {
        return "";
    };
    // A fragment before any `?` leaves no query: `/l/Lm25#a?b`.
    if url.as_bytes()[before.len()] == b'#' {
        return "";
    }
    after.split_once('#').map_or(after, |(query, _)| query)
}

/// `target` with `query` (a request's query string, without its `?`)
/// merged in. Bytes a URL's query may not hold are percent-encoded; an
/// escape already there (`%20`) is kept.
pub fn forward_query(target: &str, query: &str) -> Result<String, NotForwarded> {
    let mut out = String::new();
    forward_query_into(target, query, &mut out)?;
    Ok(out)
}

/// [`forward_query`] written into `out`, emptied first: the VMOD keeps
/// one buffer per worker thread, so that a delivery allocates nothing.
/// `out` holds no complete target when this fails.
pub fn forward_query_into(target: &str, query: &str, out: &mut String) -> Result<(), NotForwarded> {
    out.clear();
    if query.len() > MAX_FORWARDED_QUERY {
        return Err(NotForwarded::QueryTooLong);
    }
    let (before_fragment, fragment) = match target.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (target, None),
    };
    let (base, own) = before_fragment
        .split_once('?')
        .unwrap_or((before_fragment, ""));
    let asked = query.split('&').filter(|pair| !pair.is_empty());
    let named_again = |pair: &str| {
        let name = pair.split('=').next().unwrap_or_default();
        query
            .split('&')
            .any(|asked| asked.split('=').next().unwrap_or_default() == name)
    };
    out.reserve(target.len() + query.len() + 8);
    out.push_str(base);
    let mut separator = '?';
    for pair in own.split('&').filter(|pair| !pair.is_empty()) {
        if !named_again(pair) {
            out.push(separator);
            out.push_str(pair);
            separator = '&';
        }
    }
    for pair in asked {
        out.push(separator);
        push_encoded(out, pair);
        separator = '&';
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    if out.len() > MAX_TARGET_LEN {
        return Err(NotForwarded::TargetTooLong);
    }
    Ok(())
}

/// Appends `text` with every byte a query may not hold (RFC 3986: anything
/// but unreserved, sub-delimiters, `:`, `@`, `/`, `?` and escapes)
/// percent-encoded. Runs of bytes that need nothing are copied whole: a
/// campaign query usually is one run.
fn push_encoded(out: &mut String, text: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let bytes = text.as_bytes();
    let mut copied = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let is_escape = byte == b'%'
            && bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
            && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
        if is_escape || QUERY_MAY_HOLD[usize::from(byte)] {
            continue;
        }
        // From `copied` to `i` every byte is ASCII and kept: both ends
        // are boundaries when the run is not empty.
        if copied < i {
            out.push_str(&text[copied..i]);
        }
        out.push('%');
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 15)]));
        copied = i + 1;
    }
    // Every byte of a multi-byte character is encoded, so what is left
    // starts with an ASCII byte, or is empty.
    out.push_str(text.get(copied..).unwrap_or_default());
}

/// The bytes a query may hold as they are: a table, as each byte of every
/// forwarded query is looked up at delivery.
const QUERY_MAY_HOLD: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        #[allow(clippy::cast_possible_truncation)]
        let b = byte as u8;
        table[byte] = b.is_ascii_alphanumeric();
        byte += 1;
    }
    let others = b"-._~!$&'()*+,;=:@/?";
    let mut n = 0;
    while n < others.len() {
        table[others[n] as usize] = true;
        n += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_splits_into_its_path_and_query() {
        for (url, path, query) in [
            ("/l/Lm25", "/l/Lm25", ""),
            ("/l/Lm25?", "/l/Lm25", ""),
            ("/l/Lm25?utm_source=x&b", "/l/Lm25", "utm_source=x&b"),
            ("/l/Lm25?a=1#top", "/l/Lm25", "a=1"),
            ("/l/Lm25?a=1?b#c#d", "/l/Lm25", "a=1?b"),
            ("/l/Lm25#a?b", "/l/Lm25", ""),
            ("", "", ""),
        ] {
            assert_eq!((path_of(url), query_of(url)), (path, query), "{url}");
        }
    }

    #[test]
    fn the_query_is_added_before_the_fragment() {
        for (target, query, expected) in [
            (
                "https://e.org/",
                "utm_source=x",
                "https://e.org/?utm_source=x",
            ),
            ("https://e.org/p?a=1", "b=2", "https://e.org/p?a=1&b=2"),
            (
                "https://e.org/p?a=1#top",
                "b=2&c",
                "https://e.org/p?a=1&b=2&c#top",
            ),
            ("https://e.org/p#f?x", "b=2", "https://e.org/p?b=2#f?x"),
            ("https://e.org/p?", "b=2", "https://e.org/p?b=2"),
            ("https://e.org/p?a=1", "", "https://e.org/p?a=1"),
            ("https://e.org/p?a=1", "&&", "https://e.org/p?a=1"),
        ] {
            assert_eq!(
                forward_query(target, query).unwrap(),
                expected,
                "{target} {query}"
            );
        }
    }

    #[test]
    fn a_reused_buffer_holds_only_the_latest_target() {
        let mut out = String::from("https://left.over/?x=1");
        forward_query_into("https://e.org/p?a=1#top", "b=2", &mut out).unwrap();
        assert_eq!(out, "https://e.org/p?a=1&b=2#top");
        forward_query_into("https://e.org/", "utm_source=x", &mut out).unwrap();
        assert_eq!(
            out,
            forward_query("https://e.org/", "utm_source=x").unwrap()
        );
        let long = "a".repeat(MAX_FORWARDED_QUERY + 1);
        assert_eq!(
            forward_query_into("https://e.org/", &long, &mut out),
            Err(NotForwarded::QueryTooLong)
        );
    }

    #[test]
    fn a_parameter_named_again_takes_the_requests_value() {
        assert_eq!(
            forward_query("https://e.org/?utm_source=site&a=1", "utm_source=mail").unwrap(),
            "https://e.org/?a=1&utm_source=mail"
        );
    }

    #[test]
    fn what_a_query_may_not_hold_is_encoded() {
        assert_eq!(
            forward_query("https://e.org/", "q=a b\"<>`{}\u{e9}&r=%41%zz").unwrap(),
            "https://e.org/?q=a%20b%22%3C%3E%60%7B%7D%C3%A9&r=%41%25zz"
        );
        // Characters of several bytes, side by side and last.
        assert_eq!(
            forward_query("https://e.org/", "x=\u{e9}\u{1f600}").unwrap(),
            "https://e.org/?x=%C3%A9%F0%9F%98%80"
        );
    }

    #[test]
    fn long_queries_are_dropped() {
        let query = "a".repeat(MAX_FORWARDED_QUERY + 1);
        assert_eq!(
            forward_query("https://e.org/", &query),
            Err(NotForwarded::QueryTooLong)
        );
        let long_target = format!("https://e.org/{}", "p".repeat(MAX_TARGET_LEN - 20));
        assert_eq!(
            forward_query(&long_target, "utm_source=abcdefgh"),
            Err(NotForwarded::TargetTooLong)
        );
        let query = "b".repeat(MAX_FORWARDED_QUERY);
        assert!(forward_query("https://e.org/", &query).is_ok());
    }
}
