//! Values as anyone can write them with `redis-cli HSET`, through what the
//! VMOD and the writer do with a stored value: parse it, render it again,
//! and turn its expiry into an HTTP date, an RFC 3339 time, a TTL.
//!
//! Nothing of this may panic, whatever the value: in the VMOD a panic is a
//! 503 for the link, in the writer a dropped connection. A value that parses
//! must render back to a value that parses to the same link, and both dates
//! of its expiry must name the same second.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shortlink_core::{escape_html, Expiry, Stored};
use shortlink_writer::links::validate::format_expiry;

/// Checks one input: its longest valid UTF-8 prefix, as a stored value.
///
/// # Panics
///
/// When the input breaks one of the properties above: the panic says which.
pub fn check(data: &[u8]) {
    let Some(value) = crate::decode::<&str>(data) else {
        return;
    };
    let Ok(stored) = Stored::parse(value) else {
        return;
    };
    let rendered = stored.to_string();
    assert_eq!(
        Stored::parse(&rendered).as_ref(),
        Ok(&stored),
        "{value:?} renders as {rendered:?}, which reads back as another value"
    );
    let Stored::Link(record) = stored else {
        return;
    };
    // What the VMOD sends: the escaped page never lets the URL out of its
    // attribute, and no header value carries a line break.
    let page = escape_html(record.url.as_str());
    assert!(!page.contains(['<', '>', '"']), "{page:?}");
    assert!(!rendered.contains(['\r', '\n']), "{rendered:?}");
    if let Some(expiry) = record.expires {
        check_expiry(expiry);
    }
    for now in [UNIX_EPOCH, SystemTime::now()] {
        let _ = record.has_expired(now);
    }
}

fn check_expiry(expiry: Expiry) {
    assert!(expiry.unix() <= Expiry::MAX);
    let http = expiry.http_date();
    let read_back = httpdate::parse_http_date(&http).expect("an HTTP date the VMOD wrote");
    assert_eq!(read_back, expiry.time(), "{http}");
    let rfc3339 = format_expiry(expiry);
    let at = time::OffsetDateTime::parse(&rfc3339, &time::format_description::well_known::Rfc3339)
        .expect("an RFC 3339 time the writer wrote");
    assert_eq!(
        u64::try_from(at.unix_timestamp()).ok(),
        Some(expiry.unix()),
        "{rfc3339}"
    );
    // A TTL from any moment stays within the expiry's distance from 1970.
    assert!(expiry.left(UNIX_EPOCH) <= Duration::from_secs(Expiry::MAX));
    assert_eq!(expiry.left(expiry.time()), Duration::ZERO);
}
