//! Many Varnish nodes in front of one Redis: each change is purged on all
//! of them, a node that cannot be reached gets its purges later from the
//! queue in Redis, and their clicks add up.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use test_support::{free_port, Proxy, Varnish, Writer};

use crate::clicks::{click_on, stats_once, FIREFOX};
use crate::common::{api_at, create_at, ensure, get, Suite, ADMIN_TOKEN, ALICE_TOKEN, WRITER};

/// A second Varnish node on the suite's VCL: the same Redis, the same rules.
fn second_node(suite: &Suite, name: &str) -> Result<Varnish, String> {
    Varnish::start(&suite.dir.join(name), &suite.dir.join("shortlink.vcl"))
}

/// What `node` answers for `key`: the status and where it leads.
fn answer(node: &str, key: &str) -> Result<(u16, Option<String>), String> {
    get(&Suite::agent(), &format!("{node}/l/{key}"))
}

/// The queued purges of `node`, from the suite's Redis.
fn queued_for(suite: &Suite, node: &str) -> Result<Vec<String>, String> {
    let entries: Vec<(String, Vec<String>)> =
        suite
            .redis
            .query(&["XRANGE", "short:purge:queue", "-", "+"])?;
    Ok(entries
        .into_iter()
        .filter(|(_, fields)| {
            fields
                .chunks_exact(2)
                .any(|pair| pair[0] == "node" && pair[1] == node)
        })
        .filter_map(|(_, fields)| {
            fields
                .chunks_exact(2)
                .find(|pair| pair[0] == "key")
                .map(|pair| pair[1].clone())
        })
        .collect())
}

/// Writes a configuration for a writer on `port` purging `nodes`, the
/// suite's otherwise.
fn writer_config(suite: &Suite, path: &Path, port: u16, nodes: &[String]) -> Result<(), String> {
    let suite_config = fs::read_to_string(&suite.config_file).map_err(|e| e.to_string())?;
    let list = nodes
        .iter()
        .map(|node| format!("\"{node}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let text = suite_config
        .lines()
        .map(|line| {
            if line.starts_with("listen = ") {
                format!("listen = \"127.0.0.1:{port}\"")
            } else if line.starts_with("purge_url = ") {
                format!("purge_urls = [{list}]")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    fs::write(path, text).map_err(|e| e.to_string())
}

const EDITED: &str = "nodesEdited";
const DELETED: &str = "nodesDeleted";
const LATE: &str = "nodesLate";

/// What every node must answer once the changes reach it.
const CHANGED: [(&str, u16, Option<&str>); 3] = [
    (EDITED, 301, Some("https://example.org/nodes/after")),
    (DELETED, 410, None),
    (LATE, 301, Some("https://example.org/nodes/late")),
];

/// Edits, deletes and creates a link (over a cached 404) through the writer
/// at `writer_url`; returns the warnings the answers gave.
fn change_links(writer_url: &str) -> Result<Vec<String>, String> {
    let edit = api_at(
        writer_url,
        "PATCH",
        &format!("/api/links/{EDITED}"),
        Some(ADMIN_TOKEN),
        None,
        Some(&json!({ "url": "https://example.org/nodes/after" })),
    )?;
    let delete = api_at(
        writer_url,
        "DELETE",
        &format!("/api/links/{DELETED}"),
        Some(ADMIN_TOKEN),
        None,
        None,
    )?;
    let made = create_at(
        writer_url,
        Some(ADMIN_TOKEN),
        &json!({ "url": "https://example.org/nodes/late", "key": LATE }),
    )?;
    ensure(edit.status == 200 && delete.status / 100 == 2, || {
        format!(
            "edit {} {}, delete {} {}",
            edit.status, edit.body, delete.status, delete.body
        )
    })?;
    Ok([&edit.body, &delete.body, &made]
        .iter()
        .map(|body| body["warning"].as_str().unwrap_or_default().to_owned())
        .collect())
}

/// The changes `node` does not answer yet.
fn stale_on(node: &str) -> Result<Vec<String>, String> {
    let mut stale = Vec::new();
    for (key, status, location) in CHANGED {
        let (got, to) = answer(node, key)?;
        if got != status || to.as_deref() != location {
            stale.push(format!("{key}: {got} {to:?}"));
        }
    }
    Ok(stale)
}

/// A change made while one node cannot be reached answers at once from the
/// others, is queued for that node (through a restart of the writer), and
/// reaches it as soon as it is back: no stale redirect, 410 or 404 survives
/// its return. The node keeps serving its cache all along, as a node cut off
/// from the writers but not from its clients would.
pub fn a_node_out_of_reach_is_purged_when_it_returns(suite: &Suite) -> Result<(), String> {
    let node_a = suite.varnish.base_url();
    let varnish_b = second_node(suite, "node-b")?;
    let node_b = varnish_b.base_url();
    // The writer reaches node B only through the proxy; clients reach it directly.
    let proxy = Proxy::start(varnish_b.port)?;
    let nodes = [node_a.clone(), proxy.base_url()];
    let dir = suite.dir.join("nodes-writer");
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let config = dir.join("shortlink.toml");
    let port = free_port()?;
    writer_config(suite, &config, port, &nodes)?;
    let writer = Writer::start(Path::new(WRITER), &dir, &config, port, &[])?;
    let writer_url = writer.base_url();
    create_at(
        &writer_url,
        Some(ADMIN_TOKEN),
        &json!({ "url": "https://example.org/nodes/before", "key": EDITED }),
    )?;
    create_at(
        &writer_url,
        Some(ADMIN_TOKEN),
        &json!({ "url": "https://example.org/nodes/deleted", "key": DELETED }),
    )?;
    // Every node caches each link, and a 404 for the key not created yet.
    for node in [&node_a, &node_b] {
        for (key, status) in [(EDITED, 301), (DELETED, 301), (LATE, 404)] {
            for _ in 0..2 {
                let (got, _) = answer(node, key)?;
                ensure(got == status, || format!("{node}/l/{key}: {got}"))?;
            }
        }
    }

    proxy.pause();
    let started = Instant::now();
    let warnings = change_links(&writer_url)?;
    let took = started.elapsed();
    for warning in &warnings {
        ensure(
            warning.contains(&proxy.base_url())
                && warning.contains("queued")
                && !warning.contains(&node_a),
            || format!("warning: {warning:?}"),
        )?;
    }
    // Each change waited for node B's timeout (2 s) once, not for each node in turn.
    ensure(took < Duration::from_secs(9), || {
        format!("three changes took {took:?}")
    })?;
    // Node A answers the changes at once; node B still serves what it held.
    let stale = stale_on(&node_a)?;
    ensure(stale.is_empty(), || format!("node A: {stale:?}"))?;
    let stale = stale_on(&node_b)?;
    ensure(stale.len() == 3, || format!("node B held: {stale:?}"))?;
    let queued = queued_for(suite, &proxy.base_url())?;
    ensure(
        [EDITED, DELETED, LATE]
            .iter()
            .all(|key| queued.iter().any(|q| q == key)),
        || format!("queued for node B: {queued:?}"),
    )?;
    // A purge that is moot (its answer expired long ago) leaves the queue
    // without being sent.
    let moot: String = suite.redis.query(&[
        "XADD",
        "short:purge:queue",
        "*",
        "node",
        &proxy.base_url(),
        "key",
        "nodesMoot",
        "until",
        "1",
    ])?;

    // The queue outlives the writer: a new one sends it.
    drop(writer);
    let port = free_port()?;
    writer_config(suite, &config, port, &nodes)?;
    let mut writer = Writer::start(Path::new(WRITER), &dir, &config, port, &[])?;
    std::thread::sleep(Duration::from_millis(1500));
    let still = queued_for(suite, &proxy.base_url())?;
    ensure(
        still.len() >= 3 && !still.iter().any(|key| key == "nodesMoot"),
        || format!("queued for node B while away, entry {moot} moot: {still:?}"),
    )?;

    proxy.resume();
    let returned = Instant::now();
    loop {
        let stale = stale_on(&node_b)?;
        if stale.is_empty() && queued_for(suite, &proxy.base_url())?.is_empty() {
            break;
        }
        ensure(returned.elapsed() < Duration::from_secs(10), || {
            format!("node B, 10 s after it came back: {stale:?}")
        })?;
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "node B answered every change {} ms after it could be reached again",
        returned.elapsed().as_millis()
    );
    writer.pid().map(|_| ())
}

/// Clicks on one link through two nodes add up: each node's flushes add
/// to the counts, none overwrites another's.
pub fn clicks_from_every_node_add_up(suite: &Suite) -> Result<(), String> {
    let varnish_b = second_node(suite, "node-clicks")?;
    let answer = api_at(
        &suite.writer_url,
        "POST",
        "/api/links",
        Some(ALICE_TOKEN),
        None,
        Some(&json!({ "url": "https://example.org/nodes/clicks" })),
    )?;
    let key = answer.body["key"]
        .as_str()
        .ok_or_else(|| answer.body.to_string())?
        .to_owned();
    let per_node = 40;
    for _ in 0..per_node {
        click_on(&suite.varnish.base_url(), &key, FIREFOX, None)?;
        click_on(&varnish_b.base_url(), &key, FIREFOX, None)?;
    }
    let total = 2 * per_node;
    stats_once(suite, &key, ALICE_TOKEN, |stats| stats["clicks"] == total)?;
    // Two more flush intervals: nothing is counted twice.
    std::thread::sleep(Duration::from_millis(2500));
    let stats = stats_once(suite, &key, ALICE_TOKEN, |_| true)?;
    ensure(stats["clicks"] == total, || {
        format!("{total} clicks through two nodes: {stats}")
    })
}

/// A purge no node confirmed is queued with its link's domain (none for
/// the default domain, as before domains existed), and a retry that still
/// finds no node leaves both queued.
pub fn a_queued_purge_keeps_its_domain(suite: &Suite) -> Result<(), String> {
    let closed = free_port()?;
    let node = format!("http://127.0.0.1:{closed}");
    let settings = suite.settings_with("t-qdom:", 2, |config| {
        config.varnish.purge_url.clone_from(&node);
        // 404s cached, so that an insert has one to purge.
        config.redirect.negative_ttl_s = 60;
        config.domains = vec![shortlink_writer::config::DomainConfig {
            base_url: "https://go.example/".into(),
            ..Default::default()
        }];
    });
    crate::common::block_on(async {
        let shortener = shortlink_writer::links::shortener::Shortener::new(settings)
            .map_err(|e| e.to_string())?;
        for domain in [None, Some("go.example")] {
            let new = shortlink_writer::links::shortener::NewLink {
                url: "https://example.org/nodes/queued-domain",
                key: Some("qdom1"),
                domain,
                ..Default::default()
            };
            let created = shortener
                .create(&new, None)
                .await
                .map_err(|e| e.to_string())?;
            ensure(created.purge_warning.is_some(), || format!("{domain:?}"))?;
        }
        let entries: Vec<(String, Vec<String>)> =
            suite
                .redis
                .query(&["XRANGE", "t-qdom:purge:queue", "-", "+"])?;
        let fields: Vec<Vec<String>> = entries.into_iter().map(|(_, f)| f).collect();
        let has = |fields: &[String], name: &str, value: &str| {
            fields
                .chunks(2)
                .any(|pair| pair[0] == name && pair[1] == value)
        };
        ensure(
            fields.len() == 2
                && fields
                    .iter()
                    .all(|f| has(f, "node", &node) && has(f, "key", "qdom1"))
                && !fields[0].iter().any(|name| name == "domain")
                && has(&fields[1], "domain", "go.example"),
            || format!("queued: {fields:?}"),
        )?;
        let (queue, nodes) = shortener.purge_queue();
        let round = queue
            .retry(&nodes, std::time::SystemTime::now())
            .await
            .map_err(|e| e.to_string())?;
        ensure(round.left == 2 && round.sent == 0, || format!("{round:?}"))
    })
}
