//! Links that change: edit, delete, expiry and listing through the API, as
//! served by Varnish on the very next request; who may change what; and
//! changes that must change nothing.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use shortlink_core::Stored;
use shortlink_writer::access::Identity;
use shortlink_writer::error_code::ErrorCode;
use shortlink_writer::links::shortener::{Change, ShortenError};
use shortlink_writer::links::store::StoreError;
use test_support::{Persistence, Redis};

use crate::clicks::{click, FIREFOX};
use crate::common::{
    api, block_on, create, ensure, get, run_writer, Suite, ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN,
    GO_ALIAS, GO_DOMAIN, TEST_TOKEN,
};

/// What Varnish answers for `key`: status and Location.
fn served(suite: &Suite, key: &str) -> Result<(u16, Option<String>), String> {
    get(
        &Suite::agent(),
        &format!("{}/l/{key}", suite.varnish.base_url()),
    )
}

fn rfc3339_in(seconds: u64) -> String {
    let at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + seconds;
    time::OffsetDateTime::from_unix_timestamp(i64::try_from(at).unwrap_or(i64::MAX))
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

pub fn edit_is_served_at_once(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/lifecycle/before" }),
    )?;
    // Cached in Varnish before the edit.
    for _ in 0..2 {
        let (status, location) = served(suite, &key)?;
        ensure(
            status == 301 && location.as_deref() == Some("https://example.org/lifecycle/before"),
            || format!("before: {status} {location:?}"),
        )?;
    }
    let read = api(
        suite,
        "GET",
        &format!("/api/links/{key}"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    let etag = read.etag.ok_or("GET gave no ETag")?;
    ensure(read.body["owner"] == "alice", || read.body.to_string())?;
    let change = json!({ "url": "https://example.org/lifecycle/after" });
    let edited = api(
        suite,
        "PATCH",
        &format!("/api/links/{key}"),
        Some(ALICE_TOKEN),
        Some(&etag),
        Some(&change),
    )?;
    ensure(
        edited.status == 200
            && edited.body["url"] == "https://example.org/lifecycle/after"
            && edited.body["key"] == key.as_str()
            && edited.body.get("warning").is_none(),
        || format!("edit: {} {}", edited.status, edited.body),
    )?;
    // The very next request: the purge came before the answer.
    let (status, location) = served(suite, &key)?;
    ensure(
        status == 301 && location.as_deref() == Some("https://example.org/lifecycle/after"),
        || format!("after: {status} {location:?}"),
    )?;
    // The old tag is stale now: 412, and nothing changes.
    let stale = api(
        suite,
        "PATCH",
        &format!("/api/links/{key}"),
        Some(ALICE_TOKEN),
        Some(&etag),
        Some(&json!({ "url": "https://example.org/lifecycle/lost" })),
    )?;
    ensure(stale.status == 412, || {
        format!("stale edit: {} {}", stale.status, stale.body)
    })?;
    let now = api(suite, "GET", &format!("/api/links/{key}"), None, None, None)?;
    ensure(
        now.body["url"] == "https://example.org/lifecycle/after" && now.etag == edited.etag,
        || format!("after the stale edit: {}", now.body),
    )
}

pub fn delete_answers_410_and_keeps_the_key(suite: &Suite) -> Result<(), String> {
    let url = "https://example.org/lifecycle/deleted";
    let key = create(suite, Some(ALICE_TOKEN), &json!({ "url": url }))?;
    ensure(served(suite, &key)?.0 == 301, || "not served before".into())?;
    let deleted = api(
        suite,
        "DELETE",
        &format!("/api/links/{key}"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    ensure(deleted.status == 204, || {
        format!("delete: {} {}", deleted.status, deleted.body)
    })?;
    let (status, location) = served(suite, &key)?;
    ensure(status == 410 && location.is_none(), || {
        format!("after delete: {status} {location:?}")
    })?;
    let shown = api(suite, "GET", &format!("/api/links/{key}"), None, None, None)?;
    ensure(shown.status == 410, || format!("GET: {}", shown.status))?;
    // The same URL again gets a longer key; the deleted key stays deleted.
    let again = create(suite, Some(ALICE_TOKEN), &json!({ "url": url }))?;
    ensure(again != key && again.starts_with(&key), || {
        format!("{again} after deleting {key}")
    })?;
    let custom = api(
        suite,
        "POST",
        "/api/links",
        Some(ALICE_TOKEN),
        None,
        Some(&json!({ "url": "https://example.org/other", "key": key })),
    )?;
    ensure(
        custom.status == 409 && custom.body["field"] == "key" && custom.body["code"] == "key-taken",
        || {
            format!(
                "custom key over a deleted one: {} {}",
                custom.status, custom.body
            )
        },
    )?;
    ensure(served(suite, &key)?.0 == 410, || "the key came back".into())
}

pub fn only_owners_and_admins_change_links(suite: &Suite) -> Result<(), String> {
    let alices = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/lifecycle/alices" }),
    )?;
    let anonymous = create(
        suite,
        None,
        &json!({ "url": "https://example.org/lifecycle/anonymous" }),
    )?;
    // Written by hand: a link forever, which only an admin may change.
    suite
        .redis
        .query::<()>(&["HSET", "short:hA", "nd1", "https://example.org/by-hand"])?;
    let change = json!({ "url": "https://example.org/lifecycle/changed" });
    let patch = |key: &str, token: Option<&str>| {
        api(
            suite,
            "PATCH",
            &format!("/api/links/{key}"),
            token,
            None,
            Some(&change),
        )
        .map(|answer| answer.status)
    };
    for (key, token, expected) in [
        (alices.as_str(), None, 401),
        (
            alices.as_str(),
            Some("not-a-token-0123456789abcdef0123456789"),
            401,
        ),
        (alices.as_str(), Some(BOB_TOKEN), 403),
        (alices.as_str(), Some(TEST_TOKEN), 403),
        (anonymous.as_str(), Some(ALICE_TOKEN), 403),
        ("hAnd1", Some(ALICE_TOKEN), 403),
        (alices.as_str(), Some(ALICE_TOKEN), 200),
        (anonymous.as_str(), Some(ADMIN_TOKEN), 200),
        ("hAnd1", Some(ADMIN_TOKEN), 200),
        ("nOpe1", Some(ADMIN_TOKEN), 404),
    ] {
        let status = patch(key, token)?;
        ensure(status == expected, || {
            format!("PATCH {key} with {token:?}: {status}, expected {expected}")
        })?;
    }
    let deleted = api(
        suite,
        "DELETE",
        &format!("/api/links/{alices}"),
        Some(BOB_TOKEN),
        None,
        None,
    )?;
    ensure(
        deleted.status == 403 && deleted.body["code"] == "not-owner",
        || format!("bob's delete: {}", deleted.status),
    )?;
    // Each token can ask who it is, as the management page does.
    for (token, expected) in [
        (
            Some(ALICE_TOKEN),
            json!({
                "name": "alice", "admin": false, "domains": crate::common::DOMAINS,
                "yourls_signature": shortlink_writer::access::yourls_signature(ALICE_TOKEN),
            }),
        ),
        (
            Some(ADMIN_TOKEN),
            json!({
                "name": "ops", "admin": true, "domains": crate::common::DOMAINS,
                "yourls_signature": shortlink_writer::access::yourls_signature(ADMIN_TOKEN),
            }),
        ),
        (None, json!(401)),
    ] {
        let answer = api(suite, "GET", "/api/whoami", token, None, None)?;
        let seen = if answer.status == 200 {
            answer.body
        } else {
            json!(answer.status)
        };
        ensure(seen == expected, || format!("whoami {token:?}: {seen}"))?;
    }
    // An admin's edit keeps the link's owner.
    let shown = api(
        suite,
        "GET",
        &format!("/api/links/{anonymous}"),
        None,
        None,
        None,
    )?;
    ensure(shown.body["owner"].is_null(), || shown.body.to_string())?;
    let (status, location) = served(suite, "hAnd1")?;
    ensure(
        status == 301 && location.as_deref() == Some("https://example.org/lifecycle/changed"),
        || format!("hand-written link after the admin's edit: {status} {location:?}"),
    )
}

pub fn bad_changes_change_nothing(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/lifecycle/kept" }),
    )?;
    let stored = |suite: &Suite| -> Result<Option<String>, String> {
        suite
            .redis
            .query(&["HGET", &format!("short:{}", &key[..2]), &key[2..]])
    };
    let before = stored(suite)?;
    for (body, field) in [
        (json!({ "expires_at": "tomorrow" }), "expires_at"),
        (
            json!({ "expires_at": "2001-01-01T00:00:00Z" }),
            "expires_at",
        ),
        (json!({ "expires_at": 5 }), "expires_at"),
        (json!({ "url": "javascript:alert(1)" }), "url"),
        (json!({ "url": null }), "url"),
        (
            json!({ "expired_url": "ftp://example.org/" }),
            "expired_url",
        ),
        (json!({ "max_clicks": 0 }), "max_clicks"),
        (json!({ "max_clicks": -3 }), "max_clicks"),
        (json!({ "max_clicks": 2.5 }), "max_clicks"),
        (json!({ "max_clicks": "10" }), "max_clicks"),
        (json!({ "max_clicks": 1_000_000_000_001_u64 }), "max_clicks"),
        (json!({ "colour": "red" }), "unknown"),
        (json!({ "key": "other" }), "key"),
        (json!({}), "url"),
    ] {
        let answer = api(
            suite,
            "PATCH",
            &format!("/api/links/{key}"),
            Some(ALICE_TOKEN),
            None,
            Some(&body),
        )?;
        ensure(
            answer.status == 422 && answer.body["field"] == field,
            || format!("{body}: {} {}", answer.status, answer.body),
        )?;
    }
    ensure(stored(suite)? == before, || {
        "a refused change was stored".into()
    })
}

pub fn expiry_needs_no_writer(suite: &Suite) -> Result<(), String> {
    let soon = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/lifecycle/soon", "expires_at": rfc3339_in(2) }),
    )?;
    let fallback = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({
            "url": "https://example.org/lifecycle/offer",
            "expires_at": rfc3339_in(2),
            "expired_url": "https://example.org/lifecycle/offer-over",
        }),
    )?;
    for key in [&soon, &fallback] {
        ensure(served(suite, key)?.0 == 301, || {
            format!("{key} before expiry")
        })?;
    }
    std::thread::sleep(Duration::from_millis(3100));
    let (status, _) = served(suite, &soon)?;
    ensure(status == 410, || format!("expired: {status}"))?;
    let (status, location) = served(suite, &fallback)?;
    ensure(
        status == 302 && location.as_deref() == Some("https://example.org/lifecycle/offer-over"),
        || format!("expired with a fallback: {status} {location:?}"),
    )?;
    // A new expiry brings it back at once.
    let renewed = api(
        suite,
        "PATCH",
        &format!("/api/links/{soon}"),
        Some(ALICE_TOKEN),
        None,
        Some(&json!({ "expires_at": null })),
    )?;
    ensure(
        renewed.status == 200 && renewed.body["expires_at"].is_null(),
        || format!("renew: {} {}", renewed.status, renewed.body),
    )?;
    ensure(served(suite, &soon)?.0 == 301, || {
        "not back after renewal".into()
    })
}

pub fn listing_pages_newest_first(suite: &Suite) -> Result<(), String> {
    let mut bobs = Vec::new();
    for n in 0..5 {
        bobs.push(create(
            suite,
            Some(BOB_TOKEN),
            &json!({ "url": format!("https://example.org/lifecycle/bob/{n}") }),
        )?);
    }
    let list = |token: &str, query: &str| {
        api(
            suite,
            "GET",
            &format!("/api/links?{query}"),
            Some(token),
            None,
            None,
        )
    };
    let mut seen = Vec::new();
    let mut query = "limit=2".to_owned();
    loop {
        let page = list(BOB_TOKEN, &query)?;
        ensure(page.status == 200, || page.body.to_string())?;
        let links = page.body["links"].as_array().ok_or("no links")?;
        ensure(links.len() <= 2, || page.body.to_string())?;
        seen.extend(
            links
                .iter()
                .filter_map(|l| l["key"].as_str().map(str::to_owned)),
        );
        match page.body["next_cursor"].as_str() {
            Some(cursor) => query = format!("limit=2&cursor={cursor}"),
            None => break,
        }
    }
    let newest_first: Vec<String> = bobs.iter().rev().cloned().collect();
    ensure(seen == newest_first, || {
        format!("bob's pages: {seen:?}, expected {newest_first:?}")
    })?;
    let found = list(BOB_TOKEN, "search=bob/3")?;
    ensure(
        found.body["links"].as_array().map(Vec::len) == Some(1)
            && found.body["links"][0]["key"] == bobs[3].as_str(),
        || format!("search: {}", found.body),
    )?;
    // Alice sees none of bob's; she may not ask for them.
    let alices = list(ALICE_TOKEN, "limit=100")?;
    ensure(
        alices.body["links"]
            .as_array()
            .is_some_and(|links| links.iter().all(|l| l["owner"] == "alice")),
        || alices.body.to_string(),
    )?;
    ensure(list(ALICE_TOKEN, "owner=bob")?.status == 403, || {
        "alice listed bob's".into()
    })?;
    ensure(list(ALICE_TOKEN, "limit=0")?.status == 422, || {
        "limit 0".into()
    })?;
    ensure(list(ALICE_TOKEN, "cursor=nonsense")?.status == 422, || {
        "bad cursor".into()
    })?;
    // The admin sees bob's too, and can ask for bob's only.
    let admins = list(ADMIN_TOKEN, "owner=bob&limit=100")?;
    ensure(
        admins.body["links"].as_array().map(Vec::len) == Some(5),
        || format!("admin, owner=bob: {}", admins.body),
    )?;
    let everything = list(ADMIN_TOKEN, "search=lifecycle/bob/&limit=100")?;
    ensure(
        everything.body["links"].as_array().map(Vec::len) == Some(5),
        || format!("admin, everyone: {}", everything.body),
    )
}

/// Expiries written by hand past 9999-12-31T23:59:59Z, the last moment an
/// HTTP date can spell: the API answers that the value is no link (409,
/// saying how to fix it) instead of dropping the connection, and the
/// export leaves them out and carries on; the last second itself is a link.
pub fn out_of_range_expiries_are_refused_everywhere(suite: &Suite) -> Result<(), String> {
    for (field, value) in [
        ("9a", "https://example.org/lifecycle/far 253402300800"),
        (
            "9b",
            "https://example.org/lifecycle/far 9223372036854775808",
        ),
        (
            "9c",
            "https://example.org/lifecycle/far 18446744073709551615",
        ),
        ("9e", "https://example.org/lifecycle/last 253402300799"),
    ] {
        suite
            .redis
            .query::<()>(&["HSET", "short:Zz", field, value])?;
    }
    for key in ["Zz9a", "Zz9b", "Zz9c"] {
        let read = api(
            suite,
            "GET",
            &format!("/api/links/{key}"),
            Some(ADMIN_TOKEN),
            None,
            None,
        )?;
        ensure(
            read.status == 409
                && read.body["code"] == "unreadable-value"
                && read.body["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("9999-12-31T23:59:59Z") && e.contains("redis-cli")),
            || format!("GET {key}: {} {}", read.status, read.body),
        )?;
    }
    let last = api(
        suite,
        "GET",
        "/api/links/Zz9e",
        Some(ADMIN_TOKEN),
        None,
        None,
    )?;
    ensure(
        last.status == 200 && last.body["expires_at"] == "9999-12-31T23:59:59Z",
        || format!("GET Zz9e: {} {}", last.status, last.body),
    )?;
    let (status, _, body) = crate::import_export::export(suite, ADMIN_TOKEN, "?format=jsonl")?;
    let keys: Vec<String> = body
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|link| link["key"].as_str().map(str::to_owned))
        .filter(|key| key.starts_with("Zz9"))
        .collect();
    ensure(status == 200 && keys == ["Zz9e"], || {
        format!("export: {status}, keys of short:Zz {keys:?}")
    })
}

/// Changes while Redis hangs: 503 within the write timeout, and nothing
/// stored once Redis comes back; while it is down: 503 at once. On a Redis
/// of its own, as it is hung and killed.
pub fn changes_while_redis_hangs_or_is_down_store_nothing(suite: &Suite) -> Result<(), String> {
    let redis = Redis::start(&suite.dir.join("hung-redis"), Persistence::Scratch, "")?;
    let settings = suite.settings_with("t-hung:", 2, |config| {
        config.redis.url.clone_from(&redis.url);
        config.redis.write_timeout_ms = 500;
    });
    let admin = Identity::admin(shortlink_core::Owner::try_from("ops").map_err(|e| e.to_string())?);
    let hash = "t-hung:hu";
    let change = Change {
        url: Some("https://example.org/lifecycle/half"),
        ..Change::default()
    };
    block_on(async {
        let shortener = shortlink_writer::links::shortener::Shortener::new(settings)
            .map_err(|e| e.to_string())?;
        shortener
            .shorten("https://example.org/lifecycle/hung", Some("hung1"))
            .await
            .map_err(|e| e.to_string())?;
        let default = shortener.domain(None).map_err(|e| e.to_string())?;
        let before: Option<String> = redis.query(&["HGET", hash, "ng1"])?;
        redis.hang()?;
        let started = std::time::Instant::now();
        let edit = shortener
            .edit(&admin, default, "hung1", &change, None)
            .await;
        let delete = shortener.delete(&admin, default, "hung1", None).await;
        let waited = started.elapsed();
        redis.resume()?;
        for (what, outcome) in [("edit", edit.map(|_| ())), ("delete", delete.map(|_| ()))] {
            ensure(
                matches!(
                    outcome,
                    Err(ShortenError::Store(StoreError::Unavailable(_)))
                ),
                || format!("{what} while Redis hung: {outcome:?}"),
            )?;
        }
        ensure(waited < Duration::from_secs(3), || {
            format!("two changes took {waited:?} against a hung Redis")
        })?;
        // Whatever reached Redis's socket runs now, past its deadline.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after: Option<String> = redis.query(&["HGET", hash, "ng1"])?;
        ensure(after == before, || format!("{before:?} became {after:?}"))?;
        ensure(
            after
                .as_deref()
                .is_some_and(|v| matches!(Stored::parse(v), Ok(Stored::Link(_)))),
            || format!("{after:?}"),
        )?;
        redis.kill()?;
        let started = std::time::Instant::now();
        let edit = shortener
            .edit(&admin, default, "hung1", &change, None)
            .await;
        let delete = shortener.delete(&admin, default, "hung1", None).await;
        let waited = started.elapsed();
        for (what, outcome) in [("edit", edit.map(|_| ())), ("delete", delete.map(|_| ()))] {
            let error = outcome
                .err()
                .ok_or_else(|| format!("{what} with Redis down succeeded"))?;
            let (code, _) = error.code_and_field();
            let status = code.status();
            ensure(
                status == 503
                    && code == ErrorCode::StoreUnavailable
                    && matches!(error, ShortenError::Store(StoreError::Unavailable(_))),
                || format!("{what} with Redis down: {status} {error:?}"),
            )?;
        }
        ensure(waited < Duration::from_secs(3), || {
            format!("two changes took {waited:?} against a Redis that is down")
        })
    })
}

/// The command line changes any link, as the operator it is run by.
pub fn command_line_shows_edits_deletes_and_lists(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/lifecycle/cli/before" }),
    )?;
    ensure(served(suite, &key)?.0 == 301, || "not served".into())?;
    let config = suite.config_file.display().to_string();
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--config", &config]);
        run_writer(&all)
    };
    let shown = run(&["show", &key])?;
    ensure(
        shown.contains("https://example.org/lifecycle/cli/before")
            && shown.contains("owner       alice")
            && shown.contains("etag        \""),
        || format!("show: {shown}"),
    )?;
    run(&[
        "edit",
        &key,
        "--url",
        "https://example.org/lifecycle/cli/after",
    ])?;
    let (status, location) = served(suite, &key)?;
    ensure(
        status == 301 && location.as_deref() == Some("https://example.org/lifecycle/cli/after"),
        || format!("after the edit: {status} {location:?}"),
    )?;
    // The requests so far were a bot's (the test client's user agent), so
    // the link has no people's clicks and a limit of one leaves it one.
    let limited = run(&["edit", &key, "--max-clicks", "1"])?;
    ensure(limited.contains("max_clicks  1"), || {
        format!("edit --max-clicks: {limited}")
    })?;
    // A person's: a bot's click would be held only until the next flush
    // stored it as a bot's, and a flush between the two requests would
    // then let the second through.
    click(suite, &key, FIREFOX, None).map_err(|e| format!("the one click: {e}"))?;
    ensure(served(suite, &key)?.0 == 410, || "past the limit".into())?;
    let unlimited = run(&["edit", &key, "--no-max-clicks"])?;
    ensure(!unlimited.contains("max_clicks"), || {
        format!("edit --no-max-clicks: {unlimited}")
    })?;
    ensure(served(suite, &key)?.0 == 301, || "without a limit".into())?;
    let listed = run(&["list", "--owner", "alice", "--search", "lifecycle/cli/"])?;
    ensure(
        listed.starts_with(&format!(
            "{key}\thttps://example.org/lifecycle/cli/after\t-\talice"
        )),
        || format!("list: {listed}"),
    )?;
    run(&["delete", &key])?;
    ensure(served(suite, &key)?.0 == 410, || "not gone".into())?;
    let again = std::process::Command::new(crate::common::WRITER)
        .args([
            "edit",
            &key,
            "--url",
            "https://example.org/x",
            "--config",
            &config,
        ])
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&again.stderr);
    ensure(
        !again.status.success() && stderr.contains("was deleted"),
        || format!("editing a deleted link: {stderr}"),
    )
}

/// `show`, `edit`, `delete` and `list` on the command line act on the
/// domain `--domain` names (by any of its names), and on the default
/// domain without it: the same key on two domains is two links there too.
pub fn command_line_acts_on_the_domain_named(suite: &Suite) -> Result<(), String> {
    let config = suite.config_file.display().to_string();
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--config", &config]);
        run_writer(&all)
    };
    let key = "cliDomA";
    run(&[
        "add",
        "https://example.org/cli-domain/default",
        "--key",
        key,
    ])?;
    run(&[
        "add",
        "https://example.org/cli-domain/go",
        "--key",
        key,
        "--domain",
        GO_DOMAIN,
    ])?;
    run(&[
        "edit",
        key,
        "--domain",
        GO_ALIAS,
        "--url",
        "https://example.org/cli-domain/go-edited",
    ])?;
    let on_go = run(&["show", key, "--domain", GO_DOMAIN])?;
    let on_default = run(&["show", key])?;
    ensure(
        on_go.contains("https://example.org/cli-domain/go-edited")
            && on_default.contains("https://example.org/cli-domain/default")
            && !on_default.contains("go-edited"),
        || format!("show on go: {on_go}\nshow on the default domain: {on_default}"),
    )?;
    let listed = run(&["list", "--domain", GO_DOMAIN, "--search", "cli-domain/"])?;
    ensure(
        listed.lines().count() == 1 && listed.starts_with(&format!("{key}\t")),
        || format!("list --domain: {listed}"),
    )?;
    run(&["delete", key, "--domain", GO_DOMAIN])?;
    let gone = std::process::Command::new(crate::common::WRITER)
        .args(["show", key, "--domain", GO_DOMAIN, "--config", &config])
        .output()
        .map_err(|e| e.to_string())?;
    let still = run(&["show", key])?;
    ensure(
        String::from_utf8_lossy(&gone.stdout).contains("deleted")
            || String::from_utf8_lossy(&gone.stderr).contains("deleted"),
        || format!("show after delete on go: {gone:?}"),
    )?;
    ensure(
        still.contains("https://example.org/cli-domain/default"),
        || format!("the default domain's link after the delete on go: {still}"),
    )
}

/// A change Varnish was not told of says so, and is stored all the same.
/// Under the defaults Varnish caches no 404, so an insert has nothing to
/// purge and says nothing.
pub fn unpurged_changes_say_so(suite: &Suite) -> Result<(), String> {
    let closed = test_support::free_port()?;
    let unpurged = |negative_ttl_s| {
        suite.settings_with("t-unpurged:", 2, |config| {
            config.varnish.purge_url = format!("http://127.0.0.1:{closed}");
            config.redirect.negative_ttl_s = negative_ttl_s;
        })
    };
    block_on(async {
        let shortener = shortlink_writer::links::shortener::Shortener::new(unpurged(0))
            .map_err(|e| e.to_string())?;
        let new = shortlink_writer::links::shortener::NewLink {
            url: "https://example.org/lifecycle/unpurged-uncached",
            key: Some("uncached"),
            ..Default::default()
        };
        let created = shortener
            .create(&new, None)
            .await
            .map_err(|e| e.to_string())?;
        ensure(created.purge_warning.is_none(), || {
            format!(
                "an insert without negative caching: {:?}",
                created.purge_warning
            )
        })
    })?;
    let settings = unpurged(60);
    let admin = Identity::admin(shortlink_core::Owner::try_from("ops").map_err(|e| e.to_string())?);
    block_on(async {
        let shortener = shortlink_writer::links::shortener::Shortener::new(settings)
            .map_err(|e| e.to_string())?;
        let new = shortlink_writer::links::shortener::NewLink {
            url: "https://example.org/lifecycle/unpurged",
            key: Some("unpurged"),
            ..Default::default()
        };
        let created = shortener
            .create(&new, None)
            .await
            .map_err(|e| e.to_string())?;
        let change = Change {
            url: Some("https://example.org/lifecycle/unpurged-2"),
            ..Change::default()
        };
        let edited = shortener
            .edit(
                &admin,
                shortener.domain(None).map_err(|e| e.to_string())?,
                "unpurged",
                &change,
                None,
            )
            .await
            .map_err(|e| e.to_string())?;
        let deleted = shortener
            .delete(
                &admin,
                shortener.domain(None).map_err(|e| e.to_string())?,
                "unpurged",
                None,
            )
            .await
            .map_err(|e| e.to_string())?;
        for (what, warning) in [
            ("create", created.purge_warning),
            ("edit", edited.purge_warning),
            ("delete", deleted.purge_warning),
        ] {
            ensure(
                warning
                    .as_deref()
                    .is_some_and(|w| w.contains("Varnish was not told")),
                || format!("{what}: {warning:?}"),
            )?;
        }
        let stored: Option<String> = suite.redis.query(&["HGET", "t-unpurged:un", "purged"])?;
        ensure(stored.as_deref() == Some("deleted"), || {
            format!("{stored:?}")
        })
    })
}
