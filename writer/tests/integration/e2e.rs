//! The whole path: the writer stores and purges, Varnish serves the link
//! at once. The suite's Varnish caches 404s (`negative_ttl_s = 60`), so
//! that its inserts have one to purge; under the defaults they have none
//! (`lifecycle::unpurged_changes_say_so`).

use std::process::Command;
use std::time::Duration;

use shortlink_core::digest_key;

use crate::common::{ensure, get, post_form, run_writer, Suite, TEST_TOKEN, WRITER};

pub fn api_link_served_after_cached_404(suite: &Suite) -> Result<(), String> {
    let agent = Suite::agent();
    let url = "https://example.org/e2e/api";
    let key = &digest_key(url)[..4];
    let short = format!("{}/l/{key}", suite.varnish.base_url());
    // Asked for before it exists: Varnish caches the 404.
    ensure(get(&agent, &short)?.0 == 404, || {
        "expected 404 before insert".into()
    })?;
    ensure(get(&agent, &short)?.0 == 404, || {
        "expected cached 404".into()
    })?;
    let mut response = agent
        .post(format!("{}/api/links", suite.writer_url))
        .send_json(serde_json::json!({ "url": url }))
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body: serde_json::Value = response.body_mut().read_json().map_err(|e| e.to_string())?;
    ensure(status == 201 && body["short_url"] == short.as_str(), || {
        format!("{status} {body}")
    })?;
    // Served at once: the writer purged the cached 404.
    let (status, location) = get(&agent, &short)?;
    ensure(status == 301 && location.as_deref() == Some(url), || {
        format!("after insert: {status} {location:?}")
    })
}

/// The writer keeps its PURGE connections; one that Varnish closed while
/// idle must not cost a purge.
pub fn purge_survives_idle_close(suite: &Suite) -> Result<(), String> {
    let agent = Suite::agent();
    let insert = |url: &str| -> Result<String, String> {
        let mut response = agent
            .post(format!("{}/api/links", suite.writer_url))
            .send_json(serde_json::json!({ "url": url }))
            .map_err(|e| e.to_string())?;
        let body: serde_json::Value = response.body_mut().read_json().map_err(|e| e.to_string())?;
        body["short_url"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| body.to_string())
    };
    insert("https://example.org/e2e/idle/first")?;
    let workdir = suite.varnish.workdir.display().to_string();
    test_support::command_output(
        "varnishadm",
        &["-n", &workdir, "param.set", "timeout_idle", "0.5"],
    )?;
    std::thread::sleep(Duration::from_millis(1500));
    let url = "https://example.org/e2e/idle/second";
    let short = format!("{}/l/{}", suite.varnish.base_url(), &digest_key(url)[..4]);
    ensure(get(&agent, &short)?.0 == 404, || {
        "expected a cached 404 first".into()
    })?;
    let result = insert(url).and_then(|printed| {
        ensure(printed == short, || format!("{printed} != {short}"))?;
        let (status, location) = get(&agent, &short)?;
        ensure(status == 301 && location.as_deref() == Some(url), || {
            format!("after insert over a closed connection: {status} {location:?}")
        })
    });
    test_support::command_output(
        "varnishadm",
        &["-n", &workdir, "param.reset", "timeout_idle"],
    )?;
    result
}

/// Concurrent inserts share a purge lane, which sends their purges to
/// Varnish pipelined, several per write: every answer must still reach the
/// insert it belongs to, and every cached 404 must go.
pub fn concurrent_inserts_all_purged(suite: &Suite) -> Result<(), String> {
    const CLIENTS: usize = 16;
    const PER_CLIENT: usize = 8;
    let agent = Suite::agent();
    let urls: Vec<String> = (0..CLIENTS * PER_CLIENT)
        .map(|n| format!("https://example.org/e2e/batched/{n}"))
        .collect();
    let short = |url: &str| format!("{}/l/{}", suite.varnish.base_url(), &digest_key(url)[..4]);
    for url in &urls {
        ensure(get(&agent, &short(url))?.0 == 404, || {
            format!("expected a cached 404 for {url} first")
        })?;
    }
    let writer_url = &suite.writer_url;
    std::thread::scope(|scope| {
        let clients: Vec<_> = urls
            .chunks(PER_CLIENT)
            .map(|chunk| {
                scope.spawn(move || -> Result<(), String> {
                    let agent = Suite::agent();
                    for url in chunk {
                        // With the token: anonymous inserts are rate limited.
                        let response = agent
                            .post(format!("{writer_url}/api/links"))
                            .header("Authorization", format!("Bearer {TEST_TOKEN}"))
                            .send_json(serde_json::json!({ "url": url }))
                            .map_err(|e| format!("{url}: {e}"))?;
                        ensure(response.status() == 201, || {
                            format!("{url}: {}", response.status())
                        })?;
                    }
                    Ok(())
                })
            })
            .collect();
        clients
            .into_iter()
            .try_for_each(|client| client.join().map_err(|_| "a client panicked".to_owned())?)
    })?;
    for url in &urls {
        let (status, location) = get(&agent, &short(url))?;
        ensure(
            status == 301 && location.as_deref() == Some(url.as_str()),
            || format!("{url} after a concurrent insert: {status} {location:?}"),
        )?;
    }
    Ok(())
}

pub fn form_link_served_at_once(suite: &Suite) -> Result<(), String> {
    let agent = Suite::agent();
    let url = "https://example.org/e2e/form";
    let key = &digest_key(url)[..4];
    let short = format!("{}/l/{key}", suite.varnish.base_url());
    ensure(get(&agent, &short)?.0 == 404, || {
        "expected 404 before insert".into()
    })?;
    let (status, page) = post_form(&agent, &suite.writer_url, &[("url", url), ("key", "")], &[])?;
    ensure(
        status == 201 && page.contains(&format!("href=\"{short}\"")),
        || format!("{status} {page}"),
    )?;
    let (status, location) = get(&agent, &short)?;
    ensure(status == 301 && location.as_deref() == Some(url), || {
        format!("{status} {location:?}")
    })
}

pub fn cli_add_and_vcl(suite: &Suite) -> Result<(), String> {
    let agent = Suite::agent();
    let config = suite.config_file.display().to_string();
    ensure(
        get(&agent, &format!("{}/l/from-cli", suite.varnish.base_url()))?.0 == 404,
        || "expected 404 before insert".into(),
    )?;
    let printed = run_writer(&[
        "add",
        "https://example.org/e2e/cli",
        "--key",
        "from-cli",
        "--config",
        &config,
    ])?;
    let short = format!("{}/l/from-cli", suite.varnish.base_url());
    ensure(printed.trim() == short, || format!("printed {printed:?}"))?;
    let (status, location) = get(&agent, &short)?;
    ensure(
        status == 301 && location.as_deref() == Some("https://example.org/e2e/cli"),
        || format!("{status} {location:?}"),
    )?;
    let conflict = Command::new(WRITER)
        .args([
            "add",
            "https://example.org/other",
            "--key",
            "from-cli",
            "--config",
            &config,
        ])
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&conflict.stderr);
    ensure(
        !conflict.status.success() && stderr.contains("already taken"),
        || format!("conflicting add: {} {stderr}", conflict.status),
    )?;
    let vcl = run_writer(&["vcl", "--config", &config])?;
    ensure(
        vcl.contains(&format!("redis = \"{}\"", suite.redis.url)),
        || vcl.clone(),
    )
}
