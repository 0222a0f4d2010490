//! Crawlable links at the edge: created through the API, a crawlable link
//! is served by Varnish without `X-Robots-Tag: noindex` and allowed in its
//! domain's `/robots.txt`; made not crawlable, or deleted, it leaves both
//! at once, the cached robots.txt purged by the writer.

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::json;

use crate::common::{api, create, ensure, Suite, ALICE_TOKEN, GO_DOMAIN};

/// `GET path` from the suite's Varnish with `Host: host`: the head (its
/// header names in lowercase) and the body.
fn fetch(suite: &Suite, host: &str, path: &str) -> Result<(String, String), String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", suite.varnish.port))
        .map_err(|e| format!("Varnish: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| e.to_string())?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    Ok((head.to_ascii_lowercase(), body.to_owned()))
}

/// The robots.txt of the second domain, asked for twice so that the second
/// answer is cached (a key is cached from its second request).
fn robots_txt(suite: &Suite) -> Result<String, String> {
    let (_, first) = fetch(suite, GO_DOMAIN, "/robots.txt")?;
    let (head, again) = fetch(suite, GO_DOMAIN, "/robots.txt")?;
    ensure(head.starts_with("http/1.1 200") && first == again, || {
        format!("robots.txt: {head}\n{first}\n{again}")
    })?;
    Ok(again)
}

/// A link to `url` on the second domain.
fn link(url: &str, crawlable: bool) -> serde_json::Value {
    json!({ "url": url, "domain": GO_DOMAIN, "crawlable": crawlable })
}

pub fn a_crawlable_link_is_indexable_and_allowed_in_robots_txt(
    suite: &Suite,
) -> Result<(), String> {
    let crawled = create(
        suite,
        Some(ALICE_TOKEN),
        &link("https://example.org/crawlable/a", true),
    )?;
    let plain = create(
        suite,
        Some(ALICE_TOKEN),
        &link("https://example.org/crawlable/b", false),
    )?;
    let stored: Option<String> = suite.redis.query(&[
        "HGET",
        &format!("short:go.test:{}", &crawled[..2]),
        &crawled[2..],
    ])?;
    ensure(
        stored.as_deref().is_some_and(|v| v.ends_with(" !c")),
        || format!("stored: {stored:?}"),
    )?;
    let allow = format!("Allow: /{crawled}\n");
    let robots = robots_txt(suite)?;
    ensure(
        robots.starts_with("User-agent: *\n")
            && robots.contains(&allow)
            && !robots.contains(&format!("/{plain}\n"))
            && robots.ends_with("\nUser-agent: *\nDisallow: /\n"),
        || format!("robots.txt: {robots}"),
    )?;
    for _ in 0..2 {
        let (head, _) = fetch(suite, GO_DOMAIN, &format!("/{crawled}"))?;
        ensure(
            head.starts_with("http/1.1 301") && !head.contains("x-robots-tag"),
            || format!("crawlable: {head}"),
        )?;
        let (head, _) = fetch(suite, GO_DOMAIN, &format!("/{plain}"))?;
        ensure(head.contains("x-robots-tag: noindex"), || {
            format!("not crawlable: {head}")
        })?;
    }
    not_crawlable_any_more(suite, &crawled, &allow)
}

/// `key`'s link made not crawlable, then crawlable again and deleted: each
/// change reaches its redirect and the cached robots.txt at once.
fn not_crawlable_any_more(suite: &Suite, key: &str, allow: &str) -> Result<(), String> {
    let path = format!("/api/links/{key}?domain={GO_DOMAIN}");
    let edit = |crawlable: bool| {
        api(
            suite,
            "PATCH",
            &path,
            Some(ALICE_TOKEN),
            None,
            Some(&json!({ "crawlable": crawlable })),
        )
    };
    let edited = edit(false)?;
    ensure(
        edited.status == 200 && edited.body["crawlable"] == false,
        || format!("edit: {} {}", edited.status, edited.body),
    )?;
    let robots = robots_txt(suite)?;
    ensure(!robots.contains(allow), || format!("robots.txt: {robots}"))?;
    let (head, _) = fetch(suite, GO_DOMAIN, &format!("/{key}"))?;
    ensure(head.contains("x-robots-tag: noindex"), || {
        format!("after the edit: {head}")
    })?;
    ensure(edit(true)?.status == 200, || "edit back".to_owned())?;
    let robots = robots_txt(suite)?;
    ensure(robots.contains(allow), || format!("robots.txt: {robots}"))?;
    let deleted = api(suite, "DELETE", &path, Some(ALICE_TOKEN), None, None)?;
    ensure(deleted.status == 204, || {
        format!("delete: {}", deleted.status)
    })?;
    let robots = robots_txt(suite)?;
    ensure(!robots.contains(allow), || {
        format!("robots.txt after the delete: {robots}")
    })
}
