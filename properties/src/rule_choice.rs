//! A link's rules and split as anyone can store them, and a request as
//! anyone can send it, through the choice Varnish makes at every delivery
//! of a cached redirect.
//!
//! Nothing of this may panic: in the VMOD a panic is the link's own URL at
//! best. The choice reads the stored words without parsing them, so it
//! must agree with the parser on every table the parser accepts: the
//! target it names is the table's own target of that label.

use std::net::{IpAddr, Ipv6Addr};

use arbitrary::Arbitrary;
use shortlink_core::rules::{choose, target_of, Chosen, Country, RequestVisit};
use shortlink_core::{Stored, ValidUrl};

#[derive(Debug, Arbitrary)]
struct Delivery<'a> {
    words: &'a str,
    key: &'a str,
    user_agent: &'a str,
    accept_language: &'a str,
    query: &'a str,
    client: Option<[u8; 16]>,
    now: u64,
    country: Option<[u8; 2]>,
}

/// Checks one input, decoded into a delivery as libFuzzer's targets decode
/// theirs.
///
/// # Panics
///
/// When the input breaks one of the properties above: the panic says which.
pub fn check(data: &[u8]) {
    let Some(delivery) = crate::decode::<Delivery>(data) else {
        return;
    };
    let country = delivery
        .country
        .and_then(|code| std::str::from_utf8(&code).ok().and_then(Country::parse));
    let visit = RequestVisit::new(
        delivery.user_agent,
        delivery.accept_language,
        delivery.query,
        delivery
            .client
            .map(|octets| IpAddr::V6(Ipv6Addr::from(octets))),
        delivery.now,
        |_| country,
    );
    let (chosen, target) = choose(delivery.words, delivery.key, &visit);
    assert_eq!(target_of(delivery.words, chosen), target, "{delivery:?}");
    // A table the VMOD would have cached: the choice names its targets,
    // under a label `.count()` reads back.
    let value = format!("https://example.org/ {}", delivery.words);
    if let Ok(Stored::Link(record)) = Stored::parse(&value) {
        if !record.targeting.is_empty() {
            let own = record.targeting.target(chosen).map(ValidUrl::as_str);
            assert_eq!(own, target, "{delivery:?}");
            assert_eq!(Chosen::from_label(chosen.label()), Some(chosen));
        }
    }
}
