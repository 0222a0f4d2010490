//! Who may create links: form posts from other sites, access tokens, the
//! per-client rate limit, and bodies refused before anything is stored.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use actix_web::http::header;
use actix_web::test as actix_test;
use shortlink_core::digest_key;
use test_support::{free_port, Writer};

use crate::common::{
    create, ensure, form_credentials, get, post_form, send_form, Suite, ALICE_TOKEN, TEST_TOKEN,
    WRITER,
};

/// Whether the suite's writer stored a link for `url` (under its digest key).
fn stored(suite: &Suite, url: &str) -> Result<bool, String> {
    let key = &digest_key(url)[..4];
    let (hash, field) = key.split_at(2);
    let value: Option<String> = suite
        .redis
        .query(&["HGET", &format!("short:{hash}"), field])?;
    Ok(value.as_deref() == Some(url))
}

/// Every field under `prefix`, over all its hashes.
fn links_under(suite: &Suite, prefix: &str) -> Result<usize, String> {
    let mut count = 0;
    for hash in suite.hashes(prefix)? {
        count += suite.redis.query::<usize>(&["HLEN", &hash])?;
    }
    Ok(count)
}

/// A form post to the suite's writer with exactly this cookie, form token
/// and headers.
fn post(
    suite: &Suite,
    cookie: Option<&str>,
    fields: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> Result<(u16, String), String> {
    send_form(&Suite::agent(), &suite.writer_url, cookie, fields, headers)
}

/// What a form post is sent with: a description, the cookie, the form
/// token and extra headers.
type Case<'a> = (&'a str, Option<&'a str>, &'a str, &'a [(&'a str, &'a str)]);

/// Form posts from another site, or without the page's own form token, get
/// 403 and store nothing; the same post from the page itself works.
pub fn cross_site_form_posts(suite: &Suite) -> Result<(), String> {
    let url = "https://example.org/security/cross-site";
    let agent = Suite::agent();
    let (cookie, csrf) = form_credentials(&agent, &suite.writer_url)?;
    let (other_cookie, other_csrf) = form_credentials(&agent, &suite.writer_url)?;
    ensure(cookie != other_cookie && csrf != other_csrf, || {
        "two browsers got the same form token".into()
    })?;
    let own_origin = suite.writer_url.as_str();
    let cases: [Case; 8] = [
        (
            "Sec-Fetch-Site: cross-site",
            Some(&cookie),
            &csrf,
            &[("sec-fetch-site", "cross-site")],
        ),
        (
            "Sec-Fetch-Site: same-site",
            Some(&cookie),
            &csrf,
            &[("sec-fetch-site", "same-site")],
        ),
        (
            "a foreign Origin",
            Some(&cookie),
            &csrf,
            &[("origin", "http://evil.example")],
        ),
        ("Origin: null", Some(&cookie), &csrf, &[("origin", "null")]),
        (
            "another port's Origin",
            Some(&cookie),
            &csrf,
            &[("origin", "http://127.0.0.1:1")],
        ),
        ("no cookie", None, &csrf, &[]),
        (
            "another browser's form token",
            Some(&cookie),
            &other_csrf,
            &[],
        ),
        ("no form token", Some(&cookie), "", &[]),
    ];
    for (what, cookie, csrf, headers) in cases {
        let (status, page) = post(
            suite,
            cookie,
            &[("url", url), ("key", ""), ("csrf", csrf)],
            headers,
        )?;
        ensure(status == 403, || format!("{what}: answered {status}"))?;
        ensure(
            page.contains("role=\"alert\"")
                && page.contains("value=\"https://example.org/security/cross-site\""),
            || format!("{what}: the page shows no error or lost the URL: {page}"),
        )?;
        ensure(!stored(suite, url)?, || {
            format!("{what}: the link was stored")
        })?;
    }
    let (status, page) = post(
        suite,
        Some(&cookie),
        &[("url", url), ("key", ""), ("csrf", &csrf)],
        &[("sec-fetch-site", "same-origin"), ("origin", own_origin)],
    )?;
    ensure(status == 201, || {
        format!("the page's own post answered {status}: {page}")
    })?;
    ensure(stored(suite, url)?, || {
        "the page's own post stored nothing".into()
    })
}

/// Answers of the in-process API, with the headers this test reads.
struct Answer {
    status: u16,
    retry_after: Option<u64>,
    challenge: Option<String>,
    body: serde_json::Value,
}

/// Without a token a client gets `burst` links at once, then 429 with
/// Retry-After; another client has its own bucket; token holders are never
/// limited; a wrong token is 401, never a fallback to anonymous.
pub fn tokens_and_rate_limit(suite: &Suite) -> Result<(), String> {
    let settings = suite.settings_with("t-rate:", 2, |config| {
        config.rate_limit.links_per_minute = 6;
        config.rate_limit.burst = 2;
    });
    actix_web::rt::System::new().block_on(async {
        let shortener =
            shortlink_writer::shortener::Shortener::new(settings).map_err(|e| e.to_string())?;
        let app = api_app!(shortener);
        let mut n = 0;
        let mut create = |peer: &str, authorization: Option<&str>| {
            n += 1;
            let mut request = actix_test::TestRequest::post()
                .uri("/api/links")
                .peer_addr(format!("{peer}:40000").parse().expect("a socket address"))
                .set_json(serde_json::json!({ "url": format!("https://example.org/rate/{n}") }));
            if let Some(value) = authorization {
                request = request.insert_header((header::AUTHORIZATION, value.to_owned()));
            }
            request.to_request()
        };
        let answer = |response: actix_web::dev::ServiceResponse| async move {
            let headers = response.headers().clone();
            let text = |name| {
                headers
                    .get(name)
                    .and_then(|v: &header::HeaderValue| v.to_str().ok())
                    .map(str::to_owned)
            };
            Answer {
                status: response.status().as_u16(),
                retry_after: text(header::RETRY_AFTER).and_then(|v| v.parse().ok()),
                challenge: text(header::WWW_AUTHENTICATE),
                body: actix_test::read_body_json(response).await,
            }
        };
        for _ in 0..2 {
            let a = answer(actix_test::call_service(&app, create("192.0.2.10", None)).await).await;
            ensure(a.status == 201, || {
                format!("within the burst: {} {}", a.status, a.body)
            })?;
        }
        let limited =
            answer(actix_test::call_service(&app, create("192.0.2.10", None)).await).await;
        ensure(limited.status == 429, || {
            format!("past the burst: {} {}", limited.status, limited.body)
        })?;
        ensure(
            limited.retry_after.is_some_and(|s| (1..=10).contains(&s)),
            || {
                format!(
                    "Retry-After {:?} (6 a minute: at most 10 s)",
                    limited.retry_after
                )
            },
        )?;
        ensure(
            limited.body["error"]
                .as_str()
                .is_some_and(|e| e.contains("try again in")),
            || limited.body.to_string(),
        )?;
        let other = answer(actix_test::call_service(&app, create("192.0.2.11", None)).await).await;
        ensure(other.status == 201, || {
            format!("another client: {}", other.status)
        })?;
        let bearer = format!("Bearer {TEST_TOKEN}");
        for _ in 0..5 {
            let a =
                answer(actix_test::call_service(&app, create("192.0.2.10", Some(&bearer))).await)
                    .await;
            ensure(a.status == 201, || {
                format!("token holder: {} {}", a.status, a.body)
            })?;
        }
        for wrong in [
            format!("Bearer {TEST_TOKEN}0"),
            "Bearer".to_owned(),
            "Basic dXNlcjpwYXNz".to_owned(),
        ] {
            let a =
                answer(actix_test::call_service(&app, create("192.0.2.12", Some(&wrong))).await)
                    .await;
            ensure(
                a.status == 401
                    && a.challenge
                        .as_deref()
                        .is_some_and(|c| c.contains("invalid_token")),
                || format!("{wrong:?}: {} {:?}", a.status, a.challenge),
            )?;
        }
        Ok::<(), String>(())
    })?;
    // 2 in the burst, 1 from another client, 5 with the token.
    let count = links_under(suite, "t-rate:")?;
    ensure(count == 8, || format!("{count} links stored, expected 8"))
}

/// With `require_token`, nothing is created without a token: 401 with a
/// Bearer challenge.
pub fn required_token(suite: &Suite) -> Result<(), String> {
    let required = suite.settings_with("t-required:", 2, |config| {
        config.access.require_token = true;
    });
    actix_web::rt::System::new().block_on(async {
        let shortener =
            shortlink_writer::shortener::Shortener::new(required).map_err(|e| e.to_string())?;
        let app = api_app!(shortener);
        let request = |authorization: Option<String>| {
            let mut request = actix_test::TestRequest::post()
                .uri("/api/links")
                .set_json(serde_json::json!({ "url": "https://example.org/required" }));
            if let Some(value) = authorization {
                request = request.insert_header((header::AUTHORIZATION, value));
            }
            request.to_request()
        };
        let refused = actix_test::call_service(&app, request(None)).await;
        let challenge = refused.headers().get(header::WWW_AUTHENTICATE).cloned();
        ensure(refused.status() == 401 && challenge.is_some(), || {
            format!("no token: {} {challenge:?}", refused.status())
        })?;
        let admitted =
            actix_test::call_service(&app, request(Some(format!("Bearer {TEST_TOKEN}")))).await;
        ensure(admitted.status() == 201, || {
            format!("with the token: {}", admitted.status())
        })
    })?;
    let count = links_under(suite, "t-required:")?;
    ensure(count == 1, || format!("{count} links stored, expected 1"))
}

/// Bodies over the configured limit get 413, JSON and form alike, and
/// nothing is stored.
pub fn refused_bodies_store_nothing(suite: &Suite) -> Result<(), String> {
    let settings = suite.settings_with("t-size:", 2, |config| {
        config.max_url_length = 300;
        config.max_body_bytes = 2048;
    });
    actix_web::rt::System::new().block_on(async {
        let shortener =
            shortlink_writer::shortener::Shortener::new(settings).map_err(|e| e.to_string())?;
        let app = api_app!(shortener);
        let long = format!("https://example.org/{}", "x".repeat(2100));
        let json = actix_test::TestRequest::post()
            .uri("/api/links")
            .set_json(serde_json::json!({ "url": long }));
        let (status, body) = call!(app, json);
        ensure(
            status == 413 && body["error"].as_str().is_some_and(|e| e.contains("2048")),
            || format!("JSON over the limit: {status} {body}"),
        )?;
        let form = actix_test::TestRequest::post()
            .uri("/")
            .set_form([("url", long.as_str()), ("key", "")]);
        let (status, body) = call!(app, form);
        ensure(status == 413, || {
            format!("form over the limit: {status} {body}")
        })?;
        let short = actix_test::TestRequest::post()
            .uri("/api/links")
            .set_json(serde_json::json!({ "url": "https://example.org/size" }));
        let (status, body) = call!(app, short);
        ensure(status == 201, || {
            format!("under the limit: {status} {body}")
        })
    })?;
    let count = links_under(suite, "t-size:")?;
    ensure(count == 1, || format!("{count} links stored, expected 1"))
}

/// `serve` refuses to listen beyond loopback without a token; a token from
/// the environment counts, and with `require_token` nothing is created
/// without it.
pub fn off_loopback_needs_a_token(suite: &Suite) -> Result<(), String> {
    let config = suite.dir.join("open.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"0.0.0.0:{}\"\n[redis]\nurl = \"{}\"\n",
            free_port()?,
            suite.redis.url
        ),
    )
    .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let refused = Command::new(WRITER)
        .args(["serve", "--config"])
        .arg(&config)
        .env_remove("SHORTLINK_TOKENS")
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    ensure(
        !refused.status.success() && stderr.contains("needs a bearer token"),
        || format!("open listen without a token: {} {stderr}", refused.status),
    )?;
    ensure(started.elapsed() < Duration::from_secs(5), || {
        "the refusal took long".into()
    })?;

    let port = free_port()?;
    let config = suite.dir.join("required.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\n[redis]\nurl = \"{}\"\nhash_prefix = \"t-env:\"\n\
             [varnish]\npurge_url = \"\"\n[access]\nrequire_token = true\n",
            suite.redis.url
        ),
    )
    .map_err(|e| e.to_string())?;
    let env_token = "from-the-environment-0123456789abcdef";
    let tokens = format!("{env_token},{TEST_TOKEN}");
    let dir = suite.dir.join("required");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let writer = Writer::start(
        Path::new(WRITER),
        &dir,
        &config,
        port,
        &[("SHORTLINK_TOKENS", &tokens)],
    )?;
    let result = (|| {
        let agent = Suite::agent();
        let api = format!("http://127.0.0.1:{port}/api/links");
        let body = serde_json::json!({ "url": "https://example.org/env-token" });
        let status = agent
            .post(&api)
            .send_json(&body)
            .map_err(|e| e.to_string())?
            .status();
        ensure(status == 401, || format!("no token: {status}"))?;
        let status = agent
            .post(&api)
            .header("authorization", format!("Bearer {env_token}"))
            .send_json(&body)
            .map_err(|e| e.to_string())?
            .status();
        ensure(status == 201, || {
            format!("the environment's token: {status}")
        })?;
        // The form asks for the token, and takes it.
        let page_url = format!("http://127.0.0.1:{port}");
        let (status, page) = post_form(
            &agent,
            &page_url,
            &[
                ("url", "https://example.org/env-form"),
                ("token", TEST_TOKEN),
            ],
            &[],
        )?;
        ensure(status == 201 && page.contains("id=\"short-link\""), || {
            format!("form with token: {status}")
        })
    })();
    drop(writer);
    result?;
    let count = links_under(suite, "t-env:")?;
    ensure(count == 2, || format!("{count} links stored, expected 2"))
}

/// The writer logs each request, but neither a valid nor a wrong token.
pub fn tokens_never_logged(suite: &Suite) -> Result<(), String> {
    let agent = Suite::agent();
    let api = format!("{}/api/links", suite.writer_url);
    let wrong = "wrong-token-that-must-not-be-logged-0123456789";
    for (token, expected) in [(TEST_TOKEN, 201), (wrong, 401)] {
        let status = agent
            .post(&api)
            .header("authorization", format!("Bearer {token}"))
            .send_json(serde_json::json!({ "url": "https://example.org/security/logged" }))
            .map_err(|e| e.to_string())?
            .status()
            .as_u16();
        ensure(
            status == expected || (expected == 201 && status == 200),
            || format!("token {expected}: answered {status}"),
        )?;
    }
    // Changing and listing send the token the same way.
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &serde_json::json!({ "url": "https://example.org/security/logged-change" }),
    )?;
    let path = format!("/api/links/{key}");
    let change = serde_json::json!({ "url": "https://example.org/security/logged-changed" });
    for (method, path, token, body, expected) in [
        ("PATCH", path.as_str(), ALICE_TOKEN, Some(&change), 200),
        ("DELETE", path.as_str(), wrong, None, 401),
        ("GET", "/api/links", ALICE_TOKEN, None, 200),
        ("GET", "/api/whoami", ALICE_TOKEN, None, 200),
    ] {
        let answer = crate::common::api(suite, method, path, Some(token), None, body)?;
        ensure(answer.status == expected, || {
            format!(
                "{method} {path}: answered {} {}",
                answer.status, answer.body
            )
        })?;
    }
    let _ = get(&agent, &format!("{}/", suite.writer_url))?;
    // env_logger writes each line as it is logged; give the workers a moment.
    std::thread::sleep(Duration::from_millis(200));
    let log = std::fs::read_to_string(suite.dir.join("writer.log")).map_err(|e| e.to_string())?;
    ensure(log.contains("\"POST /api/links HTTP/1.1\" 401"), || {
        format!("the refused request is not in the log:\n{log}")
    })?;
    ensure(
        log.contains(&format!("\"PATCH {path} HTTP/1.1\" 200")),
        || format!("the change is not in the log:\n{log}"),
    )?;
    ensure(
        !log.contains(TEST_TOKEN) && !log.contains(ALICE_TOKEN) && !log.contains(wrong),
        || "a token appears in the writer's log".into(),
    )
}

/// The form and the management page refuse to be framed by another site,
/// where their buttons could be clicked through a disguise.
pub fn pages_refuse_frames(suite: &Suite) -> Result<(), String> {
    let agent = Suite::agent();
    for path in ["/", "/manage"] {
        let url = format!("{}{path}", suite.writer_url);
        let response = agent
            .get(&url)
            .call()
            .map_err(|e| format!("GET {url}: {e}"))?;
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        ensure(
            header("content-security-policy").as_deref() == Some("frame-ancestors 'none'")
                && header("x-frame-options").as_deref() == Some("DENY"),
            || format!("{path} may be framed: {:?}", response.headers()),
        )?;
    }
    Ok(())
}
