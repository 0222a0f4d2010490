//! Links and their clicks in a Redis Cluster of three primaries: written
//! by the writer, listed across primaries, served by Varnish through the
//! VMOD's per-node pipelines, counted in the cluster's layout, through a
//! slot migration under load and a primary's loss.
//!
//! The tests share one cluster, writer and Varnish, one test at a time
//! (they kill a node and move slots). Links are cached for no time
//! (`ttl_s = 0`), so every request is a lookup in the cluster.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis_target::cluster::key_slot;
use serde_json::{json, Value};
use shortlink_core::clicks::{CountNames, Layout, Total};
use shortlink_core::KeyScheme;
use test_support::{free_port, generate_vcl, release_dir, Redis, RedisCluster, Varnish, Writer};

use crate::clicks::{click_on, FIREFOX};
use crate::common::{
    api_at, create_at, ensure, get, Suite, ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, WRITER,
};

/// Hash prefix and split of the cluster's links: 64 hashes, so each holds
/// several links and a migrated slot carries many.
const PREFIX: &str = "cl:";
const SPLIT: usize = 1;

struct Stack {
    cluster: RedisCluster,
    varnish: Varnish,
    writer: Writer,
    _dir: PathBuf,
}

/// Started by the first test that needs it, held by one test at a time,
/// stopped by [`stop`] (a static is never dropped).
static STACK: Mutex<Option<Result<Stack, String>>> = Mutex::new(None);

/// Runs `test` on the shared stack, started first if no test did.
fn with_stack(
    suite: &Suite,
    test: impl FnOnce(&Stack) -> Result<(), String>,
) -> Result<(), String> {
    let mut held = STACK.lock().unwrap_or_else(PoisonError::into_inner);
    match held.get_or_insert_with(|| start(suite)) {
        Ok(stack) => test(stack),
        Err(error) => Err(format!("cannot start the cluster stack: {error}")),
    }
}

/// Stops the cluster, its Varnish and its writer, if a test started them.
pub fn stop() {
    let stack = STACK.lock().unwrap_or_else(PoisonError::into_inner).take();
    drop(stack);
}

fn start(suite: &Suite) -> Result<Stack, String> {
    let dir = suite.dir.join("cluster");
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let cluster = RedisCluster::start(&dir.join("redis"), 3, 0)?;
    let (varnish_port, writer_port) = (free_port()?, free_port()?);
    let config = dir.join("shortlink.toml");
    fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{writer_port}\"\n\
             public_base_url = \"http://127.0.0.1:{varnish_port}/l/\"\n\
             [redis]\nurl = \"{}\"\nhash_prefix = \"{PREFIX}\"\nsplit = {SPLIT}\n\
             [redirect]\nttl_s = 0\nnegative_ttl_s = 0\ngrace_s = 0\n\
             [varnish]\npurge_url = \"http://127.0.0.1:{varnish_port}\"\nvmod = \"{}\"\n\
             [access]\ntokens = [\n\
             {{ name = \"alice\", token = \"{ALICE_TOKEN}\" }},\n\
             {{ name = \"bob\", token = \"{BOB_TOKEN}\" }},\n\
             {{ name = \"ops\", token = \"{ADMIN_TOKEN}\", admin = true }}]\n",
            cluster.url,
            release_dir().join("libvmod_shortlink.so").display(),
        ),
    )
    .map_err(|e| e.to_string())?;
    let vcl = dir.join("shortlink.vcl");
    generate_vcl(Path::new(WRITER), &config, &vcl, &[])?;
    let varnish = Varnish::start_on(&dir, &vcl, varnish_port)?;
    let writer = Writer::start(Path::new(WRITER), &dir, &config, writer_port, &[])?;
    Ok(Stack {
        cluster,
        varnish,
        writer,
        _dir: dir,
    })
}

/// Creates `count` links for `token`'s owner, answering key and URL.
fn create_links(
    stack: &Stack,
    token: &str,
    tag: &str,
    count: usize,
) -> Result<Vec<(String, String)>, String> {
    (0..count)
        .map(|n| {
            let url = format!("https://example.org/cluster/{tag}/{n}");
            let created = create_at(
                &stack.writer.base_url(),
                Some(token),
                &json!({ "url": url }),
            )?;
            let key = created["key"].as_str().ok_or("no key")?.to_owned();
            Ok((key, url))
        })
        .collect()
}

/// The hash a key lives in.
fn hash_of(key: &str) -> String {
    let scheme = KeyScheme::new(PREFIX, SPLIT).expect("valid scheme");
    scheme.locate(key).expect("valid key").hash
}

/// The names of the cluster's click counts.
fn count_names() -> CountNames {
    let scheme = KeyScheme::new(PREFIX, SPLIT).expect("valid scheme");
    CountNames::new(&scheme, Layout::Cluster).expect("a prefix without braces")
}

/// Every answer counted for `key` (people's and bots'), as the writer
/// reads them.
fn answers_counted(stack: &Stack, key: &str) -> Result<u64, String> {
    let answer = api_at(
        &stack.writer.base_url(),
        "GET",
        &format!("/api/links/{key}/stats"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    ensure(answer.status == 200, || {
        format!("stats of {key}: {} {}", answer.status, answer.body)
    })?;
    Ok(answer.body["clicks"].as_u64().unwrap_or(0) + answer.body["bots"].as_u64().unwrap_or(0))
}

/// Waits (15 s at most: flushes retried after a redirect or a failed node
/// come a second later) until every link's answers counted equal
/// `expected`'s, and says which do not.
fn counted_exactly(stack: &Stack, expected: &[(String, u64)]) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let mut wrong = Vec::new();
        for (key, answers) in expected {
            let counted = answers_counted(stack, key)?;
            if counted != *answers {
                wrong.push(format!("{key}: {counted} counted of {answers}"));
            }
        }
        if wrong.is_empty() {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(15) {
            return Err(format!("clicks not counted once each: {wrong:?}"));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The status and `Location` Varnish answers for `key`.
fn redirect(stack: &Stack, key: &str) -> Result<(u16, Option<String>), String> {
    get(
        &Suite::agent(),
        &format!("{}/l/{key}", stack.varnish.base_url()),
    )
}

/// Every link of `answer` (a listing), by key.
fn listed_keys(answer: &Value) -> Vec<String> {
    answer["links"]
        .as_array()
        .map(|links| {
            links
                .iter()
                .filter_map(|link| link["key"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Links of two owners land on every primary; each is served by Varnish,
/// listed for its owner and for an admin (the index of each owner, and a
/// `SCAN` of every primary), edited and deleted; a link written by hand
/// with one `HSET` on its primary is served too; the form key is shared
/// through the cluster.
pub fn links_are_written_listed_and_served_across_primaries(suite: &Suite) -> Result<(), String> {
    with_stack(suite, |stack| {
        let alice = create_links(stack, ALICE_TOKEN, "alice", 20)?;
        let bob = create_links(stack, BOB_TOKEN, "bob", 20)?;
        let mut primaries: Vec<u16> = alice
            .iter()
            .chain(&bob)
            .map(|(key, _)| {
                stack
                    .cluster
                    .primary_for(&hash_of(key))
                    .map(|node| node.port)
            })
            .collect::<Result<_, _>>()?;
        primaries.sort_unstable();
        primaries.dedup();
        ensure(primaries.len() == 3, || {
            format!("40 links landed on {} primaries, not 3", primaries.len())
        })?;
        for (key, url) in alice.iter().chain(&bob) {
            let (status, location) = redirect(stack, key)?;
            ensure(status == 301 && location.as_deref() == Some(url), || {
                format!("{key}: {status} {location:?}, expected 301 to {url}")
            })?;
        }
        let writer = stack.writer.base_url();
        let listing = api_at(
            &writer,
            "GET",
            "/api/links?limit=100",
            Some(ALICE_TOKEN),
            None,
            None,
        )?;
        // Other tests of the stack add links of alice's too.
        let listed = listed_keys(&listing.body);
        ensure(alice.iter().all(|(key, _)| listed.contains(key)), || {
            format!("alice's listing misses links: {listed:?}")
        })?;
        ensure(bob.iter().all(|(key, _)| !listed.contains(key)), || {
            format!("alice's listing shows bob's links: {listed:?}")
        })?;
        let everything = api_at(
            &writer,
            "GET",
            "/api/links?limit=100",
            Some(ADMIN_TOKEN),
            None,
            None,
        )?;
        let everyone = listed_keys(&everything.body);
        ensure(
            alice
                .iter()
                .chain(&bob)
                .all(|(key, _)| everyone.contains(key)),
            || format!("the admin's listing misses links: {everyone:?}"),
        )?;
        // The writer shares its form key through the cluster too.
        let form_key = format!("{PREFIX}form:key");
        let shared: bool = stack
            .cluster
            .primary_for(&form_key)?
            .query(&["EXISTS", &form_key])?;
        ensure(shared, || format!("no {form_key} in the cluster"))?;
        changes_are_served(stack, &alice[0].0, &bob[0].0)?;
        exports_span_every_primary(stack, &alice, &bob)
    })
}

/// The keys of an export of the stack's writer with `token`, as JSON lines.
fn exported_keys(stack: &Stack, token: &str) -> Result<Vec<String>, String> {
    let url = format!("{}/api/links/export?format=jsonl", stack.writer.base_url());
    let mut response = Suite::agent()
        .get(&url)
        .header("authorization", format!("Bearer {token}"))
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    ensure(response.status() == 200, || {
        format!("export: {}", response.status())
    })?;
    let body = response
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    body.lines()
        .map(|line| {
            serde_json::from_str::<Value>(line)
                .map_err(|e| format!("{e}: {line}"))
                .map(|link| link["key"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

/// An admin's export reads every primary's link hashes (the link written
/// by hand too, the deleted one left out); alice's reads her index, whose
/// links live on every primary.
fn exports_span_every_primary(
    stack: &Stack,
    alice: &[(String, String)],
    bob: &[(String, String)],
) -> Result<(), String> {
    let everyone = exported_keys(stack, ADMIN_TOKEN)?;
    let deleted = &bob[0].0;
    ensure(
        alice
            .iter()
            .chain(&bob[1..])
            .all(|(key, _)| everyone.contains(key))
            && everyone.iter().any(|key| key == "HandMade")
            && !everyone.contains(deleted),
        || format!("the admin's export: {everyone:?}"),
    )?;
    let mut sorted = everyone.clone();
    sorted.sort();
    sorted.dedup();
    ensure(sorted.len() == everyone.len(), || {
        "the admin's export holds a link twice".to_owned()
    })?;
    let hers = exported_keys(stack, ALICE_TOKEN)?;
    ensure(
        alice.iter().all(|(key, _)| hers.contains(key))
            && !bob.iter().any(|(key, _)| hers.contains(key)),
        || format!("alice's export: {hers:?}"),
    )
}

/// `edited` (alice's) gets a new URL and `deleted` (bob's) is deleted,
/// which Varnish serves at once; a link written by hand is served too.
fn changes_are_served(stack: &Stack, edited: &str, deleted: &str) -> Result<(), String> {
    let writer = stack.writer.base_url();
    let moved_to = "https://example.org/cluster/edited";
    let answer = api_at(
        &writer,
        "PATCH",
        &format!("/api/links/{edited}"),
        Some(ALICE_TOKEN),
        None,
        Some(&json!({ "url": moved_to })),
    )?;
    ensure(answer.status == 200, || {
        format!("edit: {} {}", answer.status, answer.body)
    })?;
    let served = redirect(stack, edited)?;
    ensure(served == (301, Some(moved_to.to_owned())), || {
        format!("edited {edited}: {served:?}")
    })?;
    let answer = api_at(
        &writer,
        "DELETE",
        &format!("/api/links/{deleted}"),
        Some(BOB_TOKEN),
        None,
        None,
    )?;
    ensure(answer.status == 204, || {
        format!("delete: {} {}", answer.status, answer.body)
    })?;
    let served = redirect(stack, deleted)?;
    ensure(served.0 == 410, || format!("deleted {deleted}: {served:?}"))?;

    let by_hand = "HandMade";
    let hash = hash_of(by_hand);
    let primary = stack.cluster.primary_for(&hash)?;
    primary.query::<()>(&[
        "HSET",
        &hash,
        &by_hand[SPLIT..],
        "https://example.org/by-hand",
    ])?;
    let served = redirect(stack, by_hand)?;
    ensure(
        served == (301, Some("https://example.org/by-hand".into())),
        || format!("a link written with HSET: {served:?}"),
    )
}

/// Clicks on links of every primary are stored once each in the
/// cluster's layout: each link head's counts under
/// its hash tag, on the primary serving that tag's slot, where the writer
/// reads them for the link's statistics and the trending links.
pub fn clicks_are_counted_once_in_the_cluster_layout(suite: &Suite) -> Result<(), String> {
    with_stack(suite, |stack| {
        let links = create_links(stack, ALICE_TOKEN, "clicked", 24)?;
        let names = count_names();
        let scheme = names.scheme();
        let mut expected = Vec::new();
        for (n, (key, _)) in links.iter().enumerate() {
            let clicks = n as u64 % 4 + 1;
            for _ in 0..clicks {
                click_on(
                    &stack.varnish.base_url(),
                    key,
                    FIREFOX,
                    Some("https://news.example/"),
                )?;
            }
            expected.push((key.clone(), clicks));
        }
        counted_exactly(stack, &expected)?;
        let mut primaries = Vec::new();
        for (key, clicks) in &expected {
            let key = scheme.key(key).map_err(|e| e.to_string())?;
            let totals = names.total_hash(Total::People, scheme.head(&key));
            let primary = stack.cluster.primary_for(&totals)?;
            let stored: u64 = primary.query(&["HGET", &totals, scheme.field(&key)])?;
            ensure(stored == *clicks, || {
                format!(
                    "HGET {totals} {}: {stored}, not {clicks}",
                    scheme.field(&key)
                )
            })?;
            primaries.push(primary.port);
        }
        primaries.sort_unstable();
        primaries.dedup();
        ensure(primaries.len() > 1, || {
            "every link's counts landed on one primary".into()
        })?;
        let (key, clicks) = &expected[3];
        let stats = api_at(
            &stack.writer.base_url(),
            "GET",
            &format!("/api/links/{key}/stats"),
            Some(ALICE_TOKEN),
            None,
            None,
        )?
        .body;
        let today = stats["days"].as_array().and_then(|days| days.last());
        ensure(
            stats["visitors"] == 1
                && today.is_some_and(|day| day["clicks"] == *clicks && day["visitors"] == 1)
                && stats["referrers"][0]["name"] == "news.example",
            || format!("the statistics of {key}, clicked {clicks} times: {stats}"),
        )?;
        let trending = api_at(
            &stack.writer.base_url(),
            "GET",
            "/api/trending?minutes=5&limit=100",
            Some(ALICE_TOKEN),
            None,
            None,
        )?
        .body;
        let ranked = listed_keys(&trending);
        ensure(expected.iter().all(|(key, _)| ranked.contains(key)), || {
            format!("trending misses clicked links: {trending}")
        })
    })
}

/// While the slots of three hashes move to another primary (the `ASK`
/// window between a key's move and the slot's, then `MOVED` for a stale
/// slot map), requests for every link of those hashes never get a 404 or
/// a wrong `Location`, and at most a few 503s. Then the slots of their
/// click counts move too, under the same load: every redirect served is
/// counted once, through the flushes that met `ASK`, `TRYAGAIN` and
/// `MOVED` on the way.
pub fn a_slot_migrated_under_load_answers_no_wrong_redirect(suite: &Suite) -> Result<(), String> {
    with_stack(suite, |stack| {
        let links = create_links(stack, ALICE_TOKEN, "migrated", 60)?;
        let mut hashes: Vec<String> = links.iter().map(|(key, _)| hash_of(key)).collect();
        hashes.sort();
        hashes.dedup();
        hashes.truncate(3);
        let moving: Vec<&(String, String)> = links
            .iter()
            .filter(|(key, _)| hashes.contains(&hash_of(key)))
            .collect();
        // The counts of the moving links' heads: one slot per head.
        let names = count_names();
        let count_hashes: Vec<String> = hashes
            .iter()
            .map(|hash| names.total_hash(Total::Bots, &hash[PREFIX.len()..]))
            .collect();
        let failed_before = flush_failures(stack)?;
        let stop = AtomicBool::new(false);
        let (served, wrong, unavailable) = std::thread::scope(|scope| {
            let load = scope.spawn(|| {
                let mut served: HashMap<&str, u64> = HashMap::new();
                let (mut wrong, mut unavailable) = (Vec::new(), 0u64);
                while !stop.load(Ordering::Relaxed) {
                    for (key, url) in &moving {
                        match redirect(stack, key) {
                            Ok((301, Some(location))) if location == *url => {
                                *served.entry(key.as_str()).or_default() += 1;
                            }
                            Ok((503, _)) => unavailable += 1,
                            other => wrong.push(format!("{key}: {other:?}")),
                        }
                    }
                }
                (served, wrong, unavailable)
            });
            let migrated = migrate(&stack.cluster, &hashes).and_then(|()| {
                // Clicks were flushed meanwhile: their slots hold keys.
                migrate_counts(&stack.cluster, &count_hashes)
            });
            stop.store(true, Ordering::Relaxed);
            let counts = load
                .join()
                .map_err(|_| "the load thread panicked".to_owned());
            migrated.and(counts)
        })?;
        let answers = served.values().sum::<u64>() + unavailable + wrong.len() as u64;
        eprintln!(
            "slot migration under load: {answers} answers, {} wrong, {unavailable} × 503",
            wrong.len()
        );
        ensure(wrong.is_empty(), || format!("wrong answers: {wrong:?}"))?;
        ensure(answers >= 100, || {
            format!("only {answers} answers during the migration")
        })?;
        ensure(unavailable * 100 <= answers, || {
            format!("{unavailable} of {answers} answers were 503")
        })?;
        for (key, url) in &links {
            let served = redirect(stack, key)?;
            ensure(served == (301, Some(url.clone())), || {
                format!("after the migration, {key}: {served:?}")
            })?;
        }
        let expected: Vec<(String, u64)> = moving
            .iter()
            .map(|(key, _)| {
                (
                    key.clone(),
                    served.get(key.as_str()).copied().unwrap_or(0) + 1,
                )
            })
            .collect();
        counted_exactly(stack, &expected)?;
        eprintln!(
            "click counts after their slots moved: {} redirects of {} links, each counted \
             once, through {} flushes sent again",
            expected.iter().map(|(_, n)| n).sum::<u64>(),
            expected.len(),
            flush_failures(stack)? - failed_before,
        );
        Ok(())
    })
}

/// Flushes of clicks that Redis did not wholly apply, sent again later.
fn flush_failures(stack: &Stack) -> Result<u64, String> {
    let stats = stack
        .varnish
        .tool("varnishstat", &["-1", "-f", "*click_flush_failures"])?;
    Ok(stats
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum())
}

/// Moves the slot of each of `count_hashes` (counts of keys starting
/// alike) to the next primary in four steps, pausing in each step's `ASK`
/// window.
fn migrate_counts(cluster: &RedisCluster, count_hashes: &[String]) -> Result<(), String> {
    for hash in count_hashes {
        let from = cluster.primary_for(hash)?;
        let to = another_primary(cluster, from)?;
        let slot = key_slot(hash.as_bytes());
        // The first flush of the links' clicks may be a second away.
        let started = Instant::now();
        while from.query::<u64>(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])? < 2
            && started.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        let keys: usize = from.query(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])?;
        let per_step = keys.div_ceil(4).max(1);
        let moved = cluster.migrate_slot(slot, from, to, per_step, Duration::from_millis(300))?;
        ensure(moved >= 2, || {
            format!("slot {slot} of {hash}: moved {moved} keys, expected the links' counts")
        })?;
    }
    Ok(())
}

/// A primary of `cluster` other than `from`.
fn another_primary<'c>(cluster: &'c RedisCluster, from: &Redis) -> Result<&'c Redis, String> {
    cluster.nodes[..cluster.primaries]
        .iter()
        .find(|node| node.port != from.port)
        .ok_or_else(|| "no other primary".to_owned())
}

/// Moves the slot of each of `hashes` to the next primary, pausing in each
/// migration's `ASK` window.
fn migrate(cluster: &RedisCluster, hashes: &[String]) -> Result<(), String> {
    for hash in hashes {
        let from = cluster.primary_for(hash)?;
        let to = another_primary(cluster, from)?;
        let moved = cluster.migrate_slot(
            key_slot(hash.as_bytes()),
            from,
            to,
            1,
            Duration::from_millis(300),
        )?;
        ensure(moved == 1, || format!("{hash}: moved {moved} keys"))?;
    }
    Ok(())
}

/// Requests each of `links` once: those `owned` by the primary that is
/// `state` must answer 503, every other its redirect, and each within a
/// second (a hung primary holds up a batch for the 200 ms command timeout
/// at most).
fn only_its_own_fail(
    stack: &Stack,
    links: &[(String, String)],
    owned: &[bool],
    state: &str,
) -> Result<(), String> {
    let mut slowest = Duration::ZERO;
    for ((key, url), &owned) in links.iter().zip(owned) {
        let began = Instant::now();
        let served = redirect(stack, key)?;
        let took = began.elapsed();
        slowest = slowest.max(took);
        let expected = if owned {
            (503, None)
        } else {
            (301, Some(url.clone()))
        };
        ensure(served == expected && took < Duration::from_secs(1), || {
            format!(
                "{key} (on the {state} primary: {owned}): {served:?} after {took:?}, \
                 expected {expected:?} within 1 s"
            )
        })?;
    }
    eprintln!(
        "with a primary {state}: {} links answered, the slowest in {slowest:?}",
        links.len()
    );
    Ok(())
}

/// With one primary hung (`SIGSTOP`), its links answer 503 and every other
/// link its redirect; once it resumes, every link is served again.
pub fn a_hung_primary_fails_only_its_own_keys(suite: &Suite) -> Result<(), String> {
    with_stack(suite, |stack| {
        let links = create_links(stack, ALICE_TOKEN, "hang", 30)?;
        let victim: &Redis = stack.cluster.primary_for(&hash_of(&links[0].0))?;
        let owned: Vec<bool> = links
            .iter()
            .map(|(key, _)| {
                stack
                    .cluster
                    .primary_for(&hash_of(key))
                    .is_ok_and(|node| node.port == victim.port)
            })
            .collect();
        ensure(owned.iter().any(|&owned| !owned), || {
            "every link landed on one primary".into()
        })?;
        victim.hang()?;
        let result = only_its_own_fail(stack, &links, &owned, "hung");
        victim.revive()?;
        result?;
        // It is left alone for up to a second after its last timeout.
        let resumed = Instant::now();
        for (key, url) in &links {
            let expected = (301, Some(url.clone()));
            let mut served = redirect(stack, key)?;
            while served != expected && resumed.elapsed() < Duration::from_secs(3) {
                std::thread::sleep(Duration::from_millis(50));
                served = redirect(stack, key)?;
            }
            ensure(served == expected, || {
                format!("{key} after the primary resumed: {served:?}")
            })?;
        }
        Ok(())
    })
}

/// With one primary killed, its links answer 503 and every other link its
/// redirect, at once; once it is back (empty: it kept nothing on disk),
/// links whose hash it serves are stored within 5 s, and served.
pub fn a_primary_down_fails_only_its_own_keys(suite: &Suite) -> Result<(), String> {
    with_stack(suite, |stack| {
        let links = create_links(stack, BOB_TOKEN, "outage", 30)?;
        let victim: &Redis = stack.cluster.primary_for(&hash_of(&links[0].0))?;
        let on_victim = |key: &str| {
            stack
                .cluster
                .primary_for(&hash_of(key))
                .is_ok_and(|node| node.port == victim.port)
        };
        let owned: Vec<bool> = links.iter().map(|(key, _)| on_victim(key)).collect();
        ensure(owned.iter().any(|&owned| !owned), || {
            "every link landed on one primary".into()
        })?;
        victim.kill()?;
        let result = only_its_own_fail(stack, &links, &owned, "dead");
        victim.revive()?;
        result?;
        // Links whose hash the returned primary serves: the writer must
        // store them again within a few seconds of its return.
        let revived = Instant::now();
        let probes: Vec<String> = (0..)
            .map(|n| format!("https://example.org/cluster/outage-probe/{n}"))
            .filter(|url| on_victim(&shortlink_core::digest_key(url)))
            .take(5)
            .collect();
        let mut stored = 0;
        while stored < probes.len() && revived.elapsed() < Duration::from_secs(5) {
            let answer = api_at(
                &stack.writer.base_url(),
                "POST",
                "/api/links",
                Some(BOB_TOKEN),
                None,
                Some(&json!({ "url": probes[stored] })),
            )?;
            if answer.status == 201 {
                stored += 1;
            } else {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        eprintln!(
            "inserts on the returned primary: {stored} of {} stored, the last {:?} after its return",
            probes.len(),
            revived.elapsed()
        );
        ensure(stored == probes.len(), || {
            format!(
                "{stored} of {} inserts on the returned primary stored within 5 s",
                probes.len()
            )
        })?;
        let again = create_links(stack, BOB_TOKEN, "outage-again", 30)?;
        for (key, url) in again.iter().filter(|(key, _)| on_victim(key)) {
            let served = redirect(stack, key)?;
            ensure(served == (301, Some(url.clone())), || {
                format!("after the primary's return, {key}: {served:?}")
            })?;
        }
        Ok(())
    })
}
