//! A new link's title read from its target page, against pages of the
//! suite's landing server: within the bounds of `[titles]`, public
//! addresses only unless allowed, and in the background of the insert.

use std::time::{Duration, Instant};

use serde_json::json;
use shortlink_writer::config::TitlesConfig;
use shortlink_writer::titles::{TitleError, TitleReader};

use crate::common::{api, ensure, Suite, ALICE_TOKEN};

pub fn titles_are_read_within_their_bounds(suite: &Suite) -> Result<(), String> {
    let page = |path: &str| suite.landing_url.replace("/welcome", path);
    let bounds = TitlesConfig {
        timeout_ms: 1000,
        max_bytes: 8192,
        max_redirects: 2,
        private_addresses: true,
        ..TitlesConfig::default()
    };
    let reader = TitleReader::new(&bounds);
    let read = |path: &str| reader.read(&page(path));
    let titled = read("/titled").map_err(|e| e.to_string())?;
    ensure(titled.as_deref() == Some("A landing & its title"), || {
        format!("titled: {titled:?}")
    })?;
    let followed = read("/titled-elsewhere").map_err(|e| e.to_string())?;
    ensure(followed == titled, || {
        format!("after a redirect: {followed:?}")
    })?;
    let none = read("/untitled").map_err(|e| e.to_string())?;
    ensure(none.is_none(), || format!("untitled: {none:?}"))?;
    let looped = read("/loop");
    ensure(
        matches!(
            looped,
            Err(TitleError::Fetch(ureq::Error::TooManyRedirects))
        ),
        || format!("a redirect loop: {looped:?}"),
    )?;
    let started = Instant::now();
    let huge = read("/huge").map_err(|e| e.to_string())?;
    ensure(huge.is_none(), || {
        format!("a title past max_bytes: {huge:?}")
    })?;
    let started_slow = Instant::now();
    let slow = read("/slow");
    let waited = started_slow.elapsed();
    ensure(slow.is_err() && waited < Duration::from_secs(3), || {
        format!("a slow page: {slow:?} after {waited:?}")
    })?;
    ensure(started.elapsed() < Duration::from_secs(5), || {
        format!("the bounded reads took {:?}", started.elapsed())
    })?;
    let private = TitleReader::new(&TitlesConfig {
        private_addresses: false,
        ..bounds
    })
    .read(&page("/titled"));
    ensure(
        matches!(&private, Err(error) if error.to_string().contains("no public address")),
        || format!("a loopback page with private_addresses off: {private:?}"),
    )
}

/// The suite's writer reads a link's title after answering its insert,
/// and keeps a title the link was given.
pub fn a_new_link_gets_its_pages_title(suite: &Suite) -> Result<(), String> {
    let page = suite.landing_url.replace("/welcome", "/titled");
    let made = api(
        suite,
        "POST",
        "/api/links",
        Some(ALICE_TOKEN),
        None,
        Some(&json!({ "url": page })),
    )?;
    ensure(made.status == 201 || made.status == 200, || {
        format!("create: {} {}", made.status, made.body)
    })?;
    let key = made.body["key"].as_str().unwrap_or_default().to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let shown = api(
            suite,
            "GET",
            &format!("/api/links/{key}"),
            Some(ALICE_TOKEN),
            None,
            None,
        )?;
        if shown.body["title"] == "A landing & its title" {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("no title read in 10 s: {}", shown.body));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let given = api(
        suite,
        "POST",
        "/api/links",
        Some(ALICE_TOKEN),
        None,
        Some(&json!({ "url": format!("{page}?given"), "title": "Given" })),
    )?;
    std::thread::sleep(Duration::from_millis(500));
    let key = given.body["key"].as_str().unwrap_or_default();
    let shown = api(
        suite,
        "GET",
        &format!("/api/links/{key}"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    ensure(shown.body["title"] == "Given", || {
        format!("given: {}", shown.body)
    })
}
