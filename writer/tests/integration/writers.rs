//! Several writers behind a load balancer, as stateless as they must be:
//! a form one writer served may be posted to another, and with
//! `[rate_limit] shared = true` they share one limit per client through
//! Redis instead of giving a client one each.

use std::fs;
use std::path::Path;

use serde_json::json;
use test_support::{free_port, Writer};

use crate::common::{api_at, ensure, form_credentials, send_form, Suite, WRITER};

/// A writer of the suite's Redis on a port of its own, with keys (and
/// rate-limit buckets, and the form key) under `writers:`, and
/// `rate_limit` as its `[rate_limit]` section.
fn writer_with(suite: &Suite, name: &str, rate_limit: &str) -> Result<Writer, String> {
    writer_of(suite, name, "writers:", rate_limit)
}

/// [`writer_with`] with keys under `prefix`.
fn writer_of(suite: &Suite, name: &str, prefix: &str, rate_limit: &str) -> Result<Writer, String> {
    let dir = suite.dir.join(name);
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let port = free_port()?;
    let suite_config = fs::read_to_string(&suite.config_file).map_err(|e| e.to_string())?;
    // The suite's own [rate_limit] section gives way to `rate_limit`.
    let mut in_rate_limit = false;
    let mut text: String = suite_config
        .lines()
        .filter_map(|line| {
            if line.starts_with('[') {
                in_rate_limit = line == "[rate_limit]";
            }
            if in_rate_limit {
                None
            } else if line.starts_with("listen = ") {
                Some(format!("listen = \"127.0.0.1:{port}\"\n"))
            } else if line == "[redis]" {
                Some(format!("[redis]\nhash_prefix = \"{prefix}\"\n"))
            } else {
                Some(format!("{line}\n"))
            }
        })
        .collect();
    text.push_str("[rate_limit]\n");
    text.push_str(rate_limit);
    let config = dir.join("shortlink.toml");
    fs::write(&config, text).map_err(|e| e.to_string())?;
    Writer::start(Path::new(WRITER), &dir, &config, port, &[])
}

/// The statuses of `count` anonymous inserts from this machine, sent to
/// `writers` in turn.
fn insert_in_turn(writers: &[Writer], count: usize, tag: &str) -> Result<Vec<u16>, String> {
    (0..count)
        .map(|n| {
            let writer = &writers[n % writers.len()];
            let body = json!({ "url": format!("https://example.org/writers/{tag}/{n}") });
            api_at(
                &writer.base_url(),
                "POST",
                "/api/links",
                None,
                None,
                Some(&body),
            )
            .map(|answer| answer.status)
        })
        .collect()
}

/// Two writers, a limit of 6 links a minute after a burst of 3: shared,
/// the client's fourth link is refused whichever writer it reaches; kept
/// by each writer alone, the client gets 3 from each.
pub fn two_writers_share_one_rate_limit(suite: &Suite) -> Result<(), String> {
    let limit = "links_per_minute = 6\nburst = 3\n";
    let shared = [
        writer_with(
            suite,
            "writers-shared-a",
            &format!("{limit}shared = true\n"),
        )?,
        writer_with(
            suite,
            "writers-shared-b",
            &format!("{limit}shared = true\n"),
        )?,
    ];
    let statuses = insert_in_turn(&shared, 5, "shared")?;
    ensure(statuses == [201, 201, 201, 429, 429], || {
        format!("two writers sharing a burst of 3 answered {statuses:?}")
    })?;
    let bucket: Option<String> = suite.redis.query(&["GET", "writers:rate:127.0.0.1"])?;
    ensure(bucket.is_some(), || {
        "no bucket for 127.0.0.1 in Redis under writers:rate:".into()
    })?;
    drop(shared);
    let alone = [
        writer_with(suite, "writers-alone-a", limit)?,
        writer_with(suite, "writers-alone-b", limit)?,
    ];
    let statuses = insert_in_turn(&alone, 6, "alone")?;
    ensure(statuses.iter().all(|&status| status == 201), || {
        format!("two writers limiting alone (3 each) answered {statuses:?}")
    })
}

/// A browser loads the form from one writer and the load balancer sends
/// its post to another: the second takes it, as both sign forms with the
/// key the first one to start put in Redis. A writer of another store
/// (another prefix, so another key) refuses it.
pub fn a_form_served_by_one_writer_is_taken_by_another(suite: &Suite) -> Result<(), String> {
    let limit = "links_per_minute = 0\n";
    let writers = [
        writer_with(suite, "writers-form-a", limit)?,
        writer_with(suite, "writers-form-b", limit)?,
        writer_of(suite, "writers-form-other", "writers-other:", limit)?,
    ];
    let agent = Suite::agent();
    let (cookie, csrf) = form_credentials(&agent, &writers[0].base_url())?;
    let url = "https://example.org/writers/form-across";
    let post_to = |writer: &Writer| {
        send_form(
            &agent,
            &format!("{}/", writer.base_url()),
            Some(&cookie),
            &[("url", url), ("key", ""), ("csrf", &csrf)],
            &[],
        )
    };
    let (status, page) = post_to(&writers[1])?;
    ensure(status == 201 && page.contains(url), || {
        format!("the form served by one writer, posted to another, answered {status}: {page}")
    })?;
    let (status, _) = post_to(&writers[2])?;
    ensure(status == 403, || {
        format!("a writer with another form key answered {status}, not 403")
    })
}
