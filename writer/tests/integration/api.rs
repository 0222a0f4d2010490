//! The JSON API in an in-process actix service against the suite's Redis.

use std::time::Duration;

use actix_web::test as actix_test;
use shortlink_core::digest_key;
use shortlink_writer::links::shortener::Shortener;
use test_support::free_port;

use serde_json::{json, Value};

use crate::common::{
    api, create, ensure, varnish_get, Suite, ADMIN_TOKEN, ALICE_TOKEN, GO_ALIAS, GO_DOMAIN,
    TEST_TOKEN,
};

fn api_app_test<F, Fut>(suite: &Suite, prefix: &str, test: F) -> Result<(), String>
where
    F: FnOnce(Shortener) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    actix_web::rt::System::new().block_on(async { test(suite.shortener(prefix)).await })
}

pub fn create_and_get(suite: &Suite) -> Result<(), String> {
    api_app_test(suite, "t-api:", |shortener| async move {
        let app = api_app!(shortener);
        let url = "https://example.org/api";
        let post = || {
            actix_test::TestRequest::post()
                .uri("/api/links")
                .set_json(serde_json::json!({ "url": url }))
        };
        let (status, body) = call!(app, post());
        let key = digest_key(url)[..4].to_owned();
        ensure(status == 201, || format!("{status} {body}"))?;
        ensure(body["key"] == key.as_str() && body["url"] == url, || {
            body.to_string()
        })?;
        ensure(
            body["short_url"] == format!("http://127.0.0.1:6081/l/{key}").as_str(),
            || body.to_string(),
        )?;
        let (status, _) = call!(app, post());
        ensure(status == 200, || format!("re-submission answered {status}"))?;
        let (status, got) = call!(
            app,
            actix_test::TestRequest::get().uri(&format!("/api/links/{key}"))
        );
        // Without a token: what following the link shows, no more.
        let public = serde_json::json!({
            "domain": body["domain"], "key": body["key"], "url": body["url"],
            "short_url": body["short_url"]
        });
        ensure(status == 200 && got == public, || format!("{status} {got}"))?;
        let (status, missing) = call!(app, actix_test::TestRequest::get().uri("/api/links/nope1"));
        ensure(
            status == 404 && missing["error"].is_string() && missing["code"] == "not-found",
            || format!("{status} {missing}"),
        )?;
        let conflict = actix_test::TestRequest::post()
            .uri("/api/links")
            .set_json(serde_json::json!({ "url": "https://example.org/b", "key": key }));
        let (status, body) = call!(app, conflict);
        ensure(
            status == 409
                && body["code"] == "key-taken"
                && body["error"].as_str().is_some_and(|e| e.contains(&key)),
            || format!("{status} {body}"),
        )
    })
}

pub fn every_validation_rule(suite: &Suite) -> Result<(), String> {
    api_app_test(suite, "t-valid:", |shortener| async move {
        let app = api_app!(shortener);
        let long = format!("https://example.org/{}", "x".repeat(2100));
        let cases = [
            (serde_json::json!({ "url": "" }), "url"),
            (serde_json::json!({ "url": "example.org" }), "url"),
            (serde_json::json!({ "url": "ftp://example.org/" }), "url"),
            (serde_json::json!({ "url": "javascript:alert(1)" }), "url"),
            (serde_json::json!({ "url": "https://" }), "url"),
            (serde_json::json!({ "url": " https://example.org/" }), "url"),
            (
                serde_json::json!({ "url": "https://example.org/a b" }),
                "url",
            ),
            (
                serde_json::json!({ "url": "https://example.org/\r\nX: y" }),
                "url",
            ),
            (serde_json::json!({ "url": long }), "url"),
            (
                serde_json::json!({ "url": "http://127.0.0.1:6081/l/abcd" }),
                "url",
            ),
            (serde_json::json!({ "url": "//example.org/x" }), "url"),
            (
                serde_json::json!({ "url": "https://user:pass@example.org/" }),
                "url",
            ),
            (
                serde_json::json!({ "url": "https://example.org:0/" }),
                "url",
            ),
            (
                serde_json::json!({ "url": "https://example.org:70000/" }),
                "url",
            ),
            (
                serde_json::json!({ "url": "http://localhost:8080/" }),
                "url",
            ),
            (serde_json::json!({ "url": "http://10.0.0.1/" }), "url"),
            (serde_json::json!({ "url": "http://[::1]/" }), "url"),
            (
                serde_json::json!({ "url": "http://169.254.169.254/latest" }),
                "url",
            ),
            (
                serde_json::json!({ "url": "https://example.org/\u{0}" }),
                "url",
            ),
            (
                serde_json::json!({ "url": "https://example.org/", "key": "ab" }),
                "key",
            ),
            (
                serde_json::json!({ "url": "https://example.org/", "key": "a/b/c" }),
                "key",
            ),
            (
                serde_json::json!({ "url": "https://example.org/", "key": "k".repeat(65) }),
                "key",
            ),
        ];
        for (input, field) in cases {
            let request = actix_test::TestRequest::post()
                .uri("/api/links")
                .set_json(&input);
            let (status, body) = call!(app, request);
            ensure(
                status == 422 && body["field"] == field && body["code"] == "invalid-input",
                || format!("{input}: {status} {body}"),
            )?;
            ensure(body["error"].as_str().is_some_and(|e| e.len() > 10), || {
                body.to_string()
            })?;
        }
        Ok(())
    })?;
    let stored = suite.hashes("t-valid:")?;
    ensure(stored.is_empty(), || {
        format!("refused input was stored: {stored:?}")
    })
}

pub fn malformed_requests(suite: &Suite) -> Result<(), String> {
    api_app_test(suite, "t-bad:", |shortener| async move {
        let app = api_app!(shortener);
        let json = |body: &str| {
            actix_test::TestRequest::post()
                .uri("/api/links")
                .insert_header(("content-type", "application/json"))
                .set_payload(body.to_owned())
        };
        for (request, expected) in [
            (json("{\"url\": "), 400),
            (json("[]"), 400),
            // Readable JSON that is no link: 422, naming the field.
            (json("{\"link\": \"https://example.org/\"}"), 422),
            (json("{\"url\": 42}"), 422),
            (
                json("{\"url\": \"https://example.org/\", \"colour\": \"red\"}"),
                422,
            ),
            (
                actix_test::TestRequest::post()
                    .uri("/api/links")
                    .insert_header(("content-type", "text/plain"))
                    .set_payload("https://example.org/"),
                415,
            ),
            (
                json(&format!(
                    "{{\"url\": \"https://example.org/{}\"}}",
                    "x".repeat(20_000)
                )),
                413,
            ),
        ] {
            let (status, body) = call!(app, request);
            ensure(status == expected && body["error"].is_string(), || {
                format!("expected {expected}, got {status} {body}")
            })?;
        }
        Ok(())
    })?;
    let stored = suite.hashes("t-bad:")?;
    ensure(stored.is_empty(), || {
        format!("malformed input was stored: {stored:?}")
    })
}

pub fn redis_unreachable(suite: &Suite) -> Result<(), String> {
    let mut settings = suite.settings("t-away:", 2);
    settings.config.redis.url = format!("redis://127.0.0.1:{}/0", free_port()?);
    let started = std::time::Instant::now();
    actix_web::rt::System::new().block_on(async {
        let shortener = Shortener::new(settings).map_err(|e| e.to_string())?;
        let app = api_app!(shortener);
        let request = actix_test::TestRequest::post()
            .uri("/api/links")
            .set_json(serde_json::json!({ "url": "https://example.org/away" }));
        let (status, body) = call!(app, request);
        ensure(
            status == 503
                && body["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("unreachable")),
            || format!("{status} {body}"),
        )
    })?;
    ensure(started.elapsed() < Duration::from_secs(5), || {
        format!("the 503 took {:?}", started.elapsed())
    })
}

/// `GET /metrics` counts each write by its answer, in Prometheus' text
/// format: new links (not existing ones), edits, deletes, and refusals by
/// reason.
pub fn metrics_count_writes_by_outcome(suite: &Suite) -> Result<(), String> {
    api_app_test(suite, "t-metrics:", |shortener| async move {
        let app = api_app!(shortener);
        let bearer = || ("authorization", format!("Bearer {TEST_TOKEN}"));
        let create = |url: &str| {
            actix_test::TestRequest::post()
                .uri("/api/links")
                .insert_header(bearer())
                .set_json(serde_json::json!({ "url": url }))
        };
        let status = |request: actix_test::TestRequest| {
            let app = &app;
            async move {
                actix_test::call_service(app, request.to_request())
                    .await
                    .status()
                    .as_u16()
            }
        };
        let (created, body) = call!(app, create("https://example.org/metrics/1"));
        ensure(created == 201, || format!("create: {created} {body}"))?;
        let key = body["key"].as_str().ok_or("no key")?.to_owned();
        let link = format!("/api/links/{key}");
        let patch = || {
            actix_test::TestRequest::patch()
                .uri(&link)
                .insert_header(bearer())
                .set_json(serde_json::json!({ "url": "https://example.org/metrics/2" }))
        };
        for (what, request, expected) in [
            (
                "the same URL again",
                create("https://example.org/metrics/1"),
                200,
            ),
            ("a bad URL", create("not a url"), 422),
            ("an edit", patch(), 200),
            (
                "a stale edit",
                patch().insert_header(("if-match", "\"stale\"")),
                412,
            ),
            (
                "a delete without a token",
                actix_test::TestRequest::delete().uri(&link),
                401,
            ),
            (
                "a delete",
                actix_test::TestRequest::delete()
                    .uri(&link)
                    .insert_header(bearer()),
                204,
            ),
        ] {
            let got = status(request).await;
            ensure(got == expected, || format!("{what}: {got}, not {expected}"))?;
        }
        let response = actix_test::call_service(
            &app,
            actix_test::TestRequest::get().uri("/metrics").to_request(),
        )
        .await;
        ensure(response.status() == 200, || {
            format!("/metrics answered {}", response.status())
        })?;
        let text = String::from_utf8(actix_test::read_body(response).await.to_vec())
            .map_err(|e| e.to_string())?;
        for line in [
            "shortlink_links_created_total 1",
            "shortlink_links_edited_total 1",
            "shortlink_links_deleted_total 1",
            "shortlink_purge_failures_total 0",
            // Read from the queue in Redis: empty, not unknown (NaN).
            "shortlink_purges_queued 0",
            "shortlink_writes_refused_total{reason=\"invalid\"} 1",
            "shortlink_writes_refused_total{reason=\"stale\"} 1",
            "shortlink_writes_refused_total{reason=\"unauthorized\"} 1",
        ] {
            ensure(text.lines().any(|l| l == line), || {
                format!("no {line:?} in\n{text}")
            })?;
        }
        Ok(())
    })
}

/// Reading a link without a token, or with another owner's, shows what
/// following it shows (key, URL, short URL) and nothing else: not its
/// owner, fallback, click limit or expiry. Its owner and an admin see
/// every field; a token that is not valid is refused.
pub fn a_link_shows_its_details_to_its_owner_only(suite: &Suite) -> Result<(), String> {
    use crate::common::{api, create, ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN};
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &serde_json::json!({
            "url": "https://example.org/api/private-details",
            "expires_at": "2099-01-01T00:00:00Z",
            "expired_url": "https://example.org/api/private-details/over",
            "max_clicks": 40,
        }),
    )?;
    let path = format!("/api/links/{key}");
    let details = [
        "owner",
        "expired_url",
        "max_clicks",
        "expires_at",
        "expired",
    ];
    for (who, token) in [("anonymous", None), ("bob", Some(BOB_TOKEN))] {
        let answer = api(suite, "GET", &path, token, None, None)?;
        let mut fields: Vec<&String> = answer
            .body
            .as_object()
            .map(|object| object.keys().collect())
            .unwrap_or_default();
        fields.sort();
        ensure(
            answer.status == 200
                && answer.body["url"] == "https://example.org/api/private-details"
                && answer.body["short_url"].is_string()
                && fields == ["domain", "key", "short_url", "url"],
            || format!("{who}: {} {}", answer.status, answer.body),
        )?;
    }
    for (who, token) in [("alice", ALICE_TOKEN), ("the admin", ADMIN_TOKEN)] {
        let answer = api(suite, "GET", &path, Some(token), None, None)?;
        let body = &answer.body;
        ensure(
            answer.status == 200
                && body["owner"] == "alice"
                && body["max_clicks"] == 40
                && body["expires_at"] == "2099-01-01T00:00:00Z"
                && body["expired_url"] == "https://example.org/api/private-details/over"
                && body["expired"] == false
                && details.iter().all(|field| body.get(field).is_some()),
            || format!("{who}: {} {body}", answer.status),
        )?;
    }
    let wrong = api(
        suite,
        "GET",
        &path,
        Some("not-a-token-at-all-0123456789"),
        None,
        None,
    )?;
    ensure(wrong.status == 401, || {
        format!("a token that is not valid: {} {}", wrong.status, wrong.body)
    })
}

/// What `path` answers `token` on the suite's writer, refused: its status
/// and code.
fn refusal(
    suite: &Suite,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Value>,
) -> Result<(u16, String), String> {
    let answer = api(suite, method, path, Some(token), None, body)?;
    Ok((
        answer.status,
        answer.body["code"].as_str().unwrap_or_default().to_owned(),
    ))
}

/// The same key on two domains is two links: each in its domain's hash,
/// each read, changed, served and deleted on its own, the second domain
/// reached by its alias too.
pub fn same_key_on_two_domains_is_two_links(suite: &Suite) -> Result<(), String> {
    let key = "twoDom1";
    let port = suite.varnish.port;
    let mut created = Vec::new();
    for (domain, url) in [
        (None, "https://example.org/domains/default"),
        (Some(GO_ALIAS), "https://example.org/domains/go"),
    ] {
        let mut body = json!({ "url": url, "key": key });
        if let Some(domain) = domain {
            body["domain"] = json!(domain);
        }
        let answer = api(
            suite,
            "POST",
            "/api/links",
            Some(ALICE_TOKEN),
            None,
            Some(&body),
        )?;
        ensure(answer.status == 201, || {
            format!("{domain:?}: {} {}", answer.status, answer.body)
        })?;
        created.push(answer.body);
    }
    ensure(
        created[0]["domain"] == "127.0.0.1"
            && created[0]["short_url"] == format!("http://127.0.0.1:{port}/l/{key}")
            && created[1]["domain"] == GO_DOMAIN
            && created[1]["short_url"] == format!("http://{GO_DOMAIN}:{port}/{key}"),
        || format!("{created:?}"),
    )?;
    let stored = |hash: &str| -> Result<String, String> {
        let value: Option<String> = suite.redis.query(&["HGET", hash, "oDom1"])?;
        Ok(value.unwrap_or_default())
    };
    ensure(
        stored("short:tw")?.starts_with("https://example.org/domains/default ")
            && stored("short:go.test:tw")?.starts_with("https://example.org/domains/go "),
        || format!("{:?} {:?}", stored("short:tw"), stored("short:go.test:tw")),
    )?;
    for (query, url) in [
        ("", "https://example.org/domains/default"),
        ("?domain=go.test", "https://example.org/domains/go"),
        ("?domain=GO-ALIAS.test", "https://example.org/domains/go"),
    ] {
        let shown = api(
            suite,
            "GET",
            &format!("/api/links/{key}{query}"),
            None,
            None,
            None,
        )?;
        ensure(shown.status == 200 && shown.body["url"] == url, || {
            format!("{query}: {} {}", shown.status, shown.body)
        })?;
    }
    let served = |host: &str, path: &str| varnish_get(suite, host, path, "curl/8");
    for (host, path, url) in [
        (
            "127.0.0.1",
            format!("/l/{key}"),
            "https://example.org/domains/default",
        ),
        (
            GO_DOMAIN,
            format!("/{key}"),
            "https://example.org/domains/go",
        ),
        (
            GO_ALIAS,
            format!("/{key}"),
            "https://example.org/domains/go",
        ),
    ] {
        let (status, location) = served(host, &path)?;
        ensure(status == 301 && location.as_deref() == Some(url), || {
            format!("{host}{path}: {status} {location:?}")
        })?;
    }
    changes_stay_on_their_domain(suite, key)
}

/// `key`'s link on the second domain, changed and deleted: each change is
/// purged there (by its Host) and served at once; the same key's link on
/// the default domain stays as it was.
fn changes_stay_on_their_domain(suite: &Suite, key: &str) -> Result<(), String> {
    let stored = |hash: &str| -> Result<String, String> {
        let value: Option<String> = suite.redis.query(&["HGET", hash, "oDom1"])?;
        Ok(value.unwrap_or_default())
    };
    let served = |host: &str, path: &str| varnish_get(suite, host, path, "curl/8");
    let go_path = format!("/api/links/{key}?domain={GO_DOMAIN}");
    let edited = api(
        suite,
        "PATCH",
        &go_path,
        Some(ALICE_TOKEN),
        None,
        Some(&json!({ "url": "https://example.org/domains/go2", "forward_query": true })),
    )?;
    ensure(
        edited.status == 200
            && edited.body["forward_query"] == true
            && edited.body["domain"] == GO_DOMAIN
            && stored("short:go.test:tw")?.contains(" ?+"),
        || format!("{} {}", edited.status, edited.body),
    )?;
    let (status, location) = served(GO_DOMAIN, &format!("/{key}"))?;
    ensure(
        status == 301 && location.as_deref() == Some("https://example.org/domains/go2"),
        || format!("go after the edit: {status} {location:?}"),
    )?;
    let unset = api(
        suite,
        "PATCH",
        &go_path,
        Some(ALICE_TOKEN),
        None,
        Some(&json!({ "forward_query": null })),
    )?;
    ensure(
        unset.body["forward_query"].is_null() && !stored("short:go.test:tw")?.contains('?'),
        || format!("forward_query null: {}", unset.body),
    )?;
    let deleted = api(suite, "DELETE", &go_path, Some(ALICE_TOKEN), None, None)?;
    ensure(deleted.status == 204, || {
        format!("delete: {}", deleted.status)
    })?;
    let (gone, _) = served(GO_DOMAIN, &format!("/{key}"))?;
    let (kept, location) = served("127.0.0.1", &format!("/l/{key}"))?;
    let shown = api(suite, "GET", &format!("/api/links/{key}"), None, None, None)?;
    ensure(
        gone == 410
            && kept == 301
            && location.as_deref() == Some("https://example.org/domains/default")
            && shown.status == 200
            && stored("short:go.test:tw")? == "deleted",
        || {
            format!(
                "after the delete: go {gone}, default {kept} {location:?}, API {}",
                shown.status
            )
        },
    )
}

/// A domain the writer does not serve is refused with `unknown-domain`,
/// on every route that takes one, and nothing is stored.
pub fn unknown_domain_is_refused(suite: &Suite) -> Result<(), String> {
    let body = json!({ "url": "https://example.org/domains/unknown", "domain": "nowhere.test" });
    let answer = api(
        suite,
        "POST",
        "/api/links",
        Some(ALICE_TOKEN),
        None,
        Some(&body),
    )?;
    ensure(
        answer.status == 422
            && answer.body["code"] == "unknown-domain"
            && answer.body["field"] == "domain"
            && answer.body["error"]
                .as_str()
                .is_some_and(|e| e.contains("go.test")),
        || format!("create: {} {}", answer.status, answer.body),
    )?;
    for (method, path) in [
        ("GET", "/api/links/twoDom1?domain=nowhere.test"),
        ("DELETE", "/api/links/twoDom1?domain=nowhere.test"),
        ("GET", "/api/links/twoDom1/stats?domain=nowhere.test"),
        ("GET", "/api/links/twoDom1/qr.svg?domain=nowhere.test"),
        ("GET", "/api/links?domain=nowhere.test"),
        ("GET", "/api/links/export?domain=nowhere.test"),
        ("GET", "/api/trending?domain=nowhere.test"),
    ] {
        let (status, code) = refusal(suite, method, path, ADMIN_TOKEN, None)?;
        ensure(status == 422 && code == "unknown-domain", || {
            format!("{method} {path}: {status} {code}")
        })?;
    }
    let stored: Vec<String> = suite.redis.query(&["KEYS", "short:nowhere.test:*"])?;
    ensure(stored.is_empty(), || format!("stored: {stored:?}"))
}

/// A listing holds every domain, the default one first, each link with its
/// domain; its cursor walks from one domain into the next; `?domain=`
/// keeps one.
pub fn listing_carries_and_filters_by_domain(suite: &Suite) -> Result<(), String> {
    for (key, domain) in [
        ("ldA", None),
        ("ldB", Some(GO_DOMAIN)),
        ("ldC", Some(GO_DOMAIN)),
    ] {
        let mut body = json!({ "url": format!("https://example.org/listdom/{key}"), "key": key });
        if let Some(domain) = domain {
            body["domain"] = json!(domain);
        }
        create(suite, Some(ALICE_TOKEN), &body)?;
    }
    let walk = |filter: &str| -> Result<Vec<(String, String, String)>, String> {
        let mut seen = Vec::new();
        let mut cursor = String::new();
        for _ in 0..50 {
            let page = api(
                suite,
                "GET",
                &format!("/api/links?search=listdom/&limit=1{filter}{cursor}"),
                Some(ALICE_TOKEN),
                None,
                None,
            )?;
            ensure(page.status == 200, || {
                format!("{} {}", page.status, page.body)
            })?;
            for link in page.body["links"].as_array().into_iter().flatten() {
                let text = |field: &str| link[field].as_str().unwrap_or_default().to_owned();
                seen.push((text("domain"), text("key"), text("short_url")));
            }
            match page.body["next_cursor"].as_str() {
                Some(next) => cursor = format!("&cursor={}", urlencoding(next)),
                None => return Ok(seen),
            }
        }
        Err(format!("the cursor never ended: {seen:?}"))
    };
    let port = suite.varnish.port;
    let every = walk("")?;
    let keys: Vec<(&str, &str)> = every
        .iter()
        .map(|(domain, key, _)| (domain.as_str(), key.as_str()))
        .collect();
    ensure(
        keys == [("127.0.0.1", "ldA"), (GO_DOMAIN, "ldC"), (GO_DOMAIN, "ldB")]
            && every[1].2 == format!("http://{GO_DOMAIN}:{port}/ldC"),
        || format!("every domain: {every:?}"),
    )?;
    let go = walk(&format!("&domain={GO_ALIAS}"))?;
    let keys: Vec<&str> = go.iter().map(|(_, key, _)| key.as_str()).collect();
    ensure(keys == ["ldC", "ldB"], || format!("?domain=: {go:?}"))
}

/// `text` for a query string: cursors hold `/`, which a query may hold
/// as it is, and nothing else to encode but `&`, `=`, `+` and `%`.
fn urlencoding(text: &str) -> String {
    text.replace('%', "%25")
        .replace('&', "%26")
        .replace('=', "%3D")
        .replace('+', "%2B")
}
