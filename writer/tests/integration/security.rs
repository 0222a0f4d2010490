//! Who may create links: form posts from other sites, access tokens, the
//! per-client rate limit, and bodies refused before anything is stored.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use actix_web::http::header;
use actix_web::test as actix_test;
use shortlink_core::digest_key;
use test_support::{free_port, Writer};

use serde_json::{json, Value};

use crate::common::{
    api, create, ensure, form_credentials, get, post_form, send_form, Suite, ADMIN_TOKEN,
    ALICE_TOKEN, GO_ALIAS, GO_DOMAIN, SHOP_TOKEN, TEST_TOKEN, WRITER, YOURLS_TOKEN,
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
    body: Value,
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
        let shortener = shortlink_writer::links::shortener::Shortener::new(settings)
            .map_err(|e| e.to_string())?;
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
        ensure(
            limited.status == 429 && limited.body["code"] == "rate-limited",
            || format!("past the burst: {} {}", limited.status, limited.body),
        )?;
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
                    && a.body["code"] == "bad-token"
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
        let shortener = shortlink_writer::links::shortener::Shortener::new(required)
            .map_err(|e| e.to_string())?;
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
        let shortener = shortlink_writer::links::shortener::Shortener::new(settings)
            .map_err(|e| e.to_string())?;
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
    // YOURLS' tools send a token, or its signature, in the query string.
    let signature = shortlink_writer::access::yourls_signature(YOURLS_TOKEN);
    for query in [
        format!("action=version&format=json&username=yo&password={YOURLS_TOKEN}"),
        format!("action=version&format=json&signature={signature}"),
    ] {
        let _ = get(
            &agent,
            &format!("{}/yourls-api.php?{query}", suite.writer_url),
        )?;
    }
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
    ensure(log.contains("\"GET /yourls-api.php HTTP/1.1\" 200"), || {
        format!("YOURLS' requests are not in the log:\n{log}")
    })?;
    ensure(
        !log.contains(TEST_TOKEN)
            && !log.contains(ALICE_TOKEN)
            && !log.contains(wrong)
            && !log.contains(YOURLS_TOKEN)
            && !log.contains(&signature),
        || "a token, or a YOURLS signature, appears in the writer's log".into(),
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
        let policy = header("content-security-policy").unwrap_or_default();
        ensure(
            policy
                .split(';')
                .any(|d| d.trim() == "frame-ancestors 'none'")
                && header("x-frame-options").as_deref() == Some("DENY"),
            || format!("{path} may be framed: {:?}", response.headers()),
        )?;
    }
    Ok(())
}

/// An answer as [`raw_request`] reads it: status, headers (names in lower
/// case) and body.
struct RawAnswer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl RawAnswer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `head` (request line and headers, without the blank line) and
/// `body` to the writer at `writer_url` over a connection of its own, as no
/// HTTP client lets a test choose the `Host` header.
fn raw_request(writer_url: &str, head: &str, body: &str) -> Result<RawAnswer, String> {
    use std::io::{Read, Write};
    let address = writer_url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| e.to_string())?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no header end in {answer:?}"))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok(RawAnswer {
        status,
        headers,
        body: body.to_owned(),
    })
}

/// A request whose `Host` (or absolute URL) names another host than the
/// writer's gets 421 saying which setting to change, and creates nothing:
/// a hostile page whose name was rebound to the writer's loopback address
/// (DNS rebinding) passes the Origin check, as its Origin matches its Host,
/// but not this one. The writer's own names are answered.
pub fn requests_for_other_hosts_are_refused(suite: &Suite) -> Result<(), String> {
    let port = suite.writer_url.rsplit(':').next().unwrap_or_default();
    let url = "https://example.org/security/rebound";
    let body = format!("{{\"url\": \"{url}\"}}");
    let create = |host: &str| {
        raw_request(
            &suite.writer_url,
            &format!(
                "POST /api/links HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TEST_TOKEN}\r\n\
                 Content-Type: application/json"
            ),
            &body,
        )
    };
    let foreign = [
        format!("GET / HTTP/1.1\r\nHost: rebound.example:{port}"),
        "GET /manage HTTP/1.1\r\nHost: rebound.example".to_owned(),
        format!("GET /api/whoami HTTP/1.1\r\nHost: 127.0.0.1.rebound.example:{port}"),
        format!("GET http://rebound.example:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}"),
    ];
    for head in &foreign {
        let answer = raw_request(&suite.writer_url, head, "")?;
        ensure(
            answer.status == 421
                && answer.body.contains("allowed_hosts")
                && answer.body.contains("\"code\":\"wrong-host\"")
                && answer.header("x-content-type-options") == Some("nosniff"),
            || {
                format!(
                    "{head:?}: {} {:?} {}",
                    answer.status, answer.headers, answer.body
                )
            },
        )?;
    }
    // Whether the writer stored anything under the URL's key.
    let exists = || {
        let key = &digest_key(url)[..4];
        let (hash, field) = key.split_at(2);
        suite
            .redis
            .query::<bool>(&["HEXISTS", &format!("short:{hash}"), field])
    };
    let refused = create(&format!("rebound.example:{port}"))?;
    ensure(refused.status == 421, || {
        format!(
            "a creation for another host: {} {}",
            refused.status, refused.body
        )
    })?;
    ensure(!exists()?, || {
        "a creation for another host was stored".into()
    })?;
    for own in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "LocalHost".to_owned(),
    ] {
        let answer = raw_request(
            &suite.writer_url,
            &format!("GET / HTTP/1.1\r\nHost: {own}"),
            "",
        )?;
        ensure(answer.status == 200, || {
            format!("the writer's own name {own}: {}", answer.status)
        })?;
    }
    let created = create(&format!("127.0.0.1:{port}"))?;
    ensure(created.status == 201 && exists()?, || {
        format!(
            "the same creation for the writer's own host: {} {}",
            created.status, created.body
        )
    })
}

/// Whether a `Set-Cookie` value carries the `Secure` attribute.
fn is_secure(set_cookie: &str) -> bool {
    set_cookie
        .split(';')
        .skip(1)
        .any(|attribute| attribute.trim().eq_ignore_ascii_case("secure"))
}

/// The form cookie's `Secure` flag follows `X-Forwarded-Proto: https` only
/// from a proxy `rate_limit.trust_forwarded_for` trusts; from anyone else
/// it is a client's say, and is ignored, as is `Forwarded`.
pub fn forwarded_proto_is_believed_from_a_trusted_proxy_only(suite: &Suite) -> Result<(), String> {
    let form_cookie = |writer_url: &str, headers: &str| -> Result<String, String> {
        let answer = raw_request(
            writer_url,
            &format!("GET / HTTP/1.1\r\nHost: 127.0.0.1{headers}"),
            "",
        )?;
        answer
            .header("set-cookie")
            .filter(|_| answer.status == 200)
            .map(str::to_owned)
            .ok_or_else(|| format!("no form cookie: {} {:?}", answer.status, answer.headers))
    };
    for claim in [
        "\r\nX-Forwarded-Proto: https",
        "\r\nForwarded: proto=https",
        "\r\nX-Forwarded-Proto: https\r\nForwarded: proto=https;host=127.0.0.1",
    ] {
        let cookie = form_cookie(&suite.writer_url, claim)?;
        ensure(!is_secure(&cookie), || {
            format!("untrusted {claim:?} made the cookie Secure: {cookie}")
        })?;
    }

    let port = free_port()?;
    let config = suite.dir.join("behind-a-proxy.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\n[redis]\nurl = \"{}\"\nhash_prefix = \"t-proxy:\"\n\
             [varnish]\npurge_url = \"\"\n[rate_limit]\ntrust_forwarded_for = true\n",
            suite.redis.url
        ),
    )
    .map_err(|e| e.to_string())?;
    let dir = suite.dir.join("behind-a-proxy");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let writer = Writer::start(Path::new(WRITER), &dir, &config, port, &[])?;
    let proxied = writer.base_url();
    let secure = form_cookie(&proxied, "\r\nX-Forwarded-Proto: https")?;
    ensure(is_secure(&secure), || {
        format!("a trusted proxy's X-Forwarded-Proto: https left the cookie plain: {secure}")
    })?;
    for plain in [
        "",
        "\r\nX-Forwarded-Proto: http",
        "\r\nForwarded: proto=https",
    ] {
        let cookie = form_cookie(&proxied, plain)?;
        ensure(!is_secure(&cookie), || {
            format!("{plain:?} from the trusted proxy made the cookie Secure: {cookie}")
        })?;
    }
    drop(writer);
    Ok(())
}

/// The policy's directives, by name.
fn directives(policy: &str) -> Vec<(String, String)> {
    policy
        .split(';')
        .filter_map(|d| {
            let d = d.trim();
            let (name, value) = d.split_once(' ').unwrap_or((d, ""));
            (!name.is_empty()).then(|| (name.to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// Whether the page at `path` runs its one inline script by digest and
/// nothing else, and says nosniff.
fn check_page_policy(suite: &Suite, path: &str) -> Result<(), String> {
    use base64::Engine as _;
    use sha2::Digest as _;
    let agent = Suite::agent();
    let url = format!("{}{path}", suite.writer_url);
    let mut response = agent
        .get(&url)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .unwrap_or_default()
    };
    let (policy, sniff) = (
        header("content-security-policy"),
        header("x-content-type-options"),
    );
    let page = response
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    let scripts: Vec<&str> = page
        .split("<script>")
        .skip(1)
        .filter_map(|rest| rest.split_once("</script>").map(|(script, _)| script))
        .collect();
    let digests: Vec<String> = scripts
        .iter()
        .map(|script| {
            format!(
                "'sha256-{}'",
                base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(script))
            )
        })
        .collect();
    let expected = [
        ("script-src", digests.join(" ")),
        ("object-src", "'none'".to_owned()),
        ("base-uri", "'none'".to_owned()),
        ("frame-ancestors", "'none'".to_owned()),
    ]
    .map(|(n, v)| (n.to_owned(), v));
    ensure(
        scripts.len() == 1 && directives(&policy) == expected && sniff == "nosniff",
        || {
            format!(
                "{path}: policy {policy:?}, nosniff {sniff:?}, {} scripts",
                scripts.len()
            )
        },
    )
}

/// Every page runs its own inline script, allowed by digest, and nothing
/// else (no `'unsafe-inline'`, no other source, no plugin, no `<base>`, no
/// frame); every other answer (JSON, images, metrics, errors, refusals)
/// loads nothing at all. All say `X-Content-Type-Options: nosniff`.
pub fn every_answer_is_nosniff_with_a_script_policy(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(TEST_TOKEN),
        &serde_json::json!({
            "url": "https://example.org/security/policy"
        }),
    )?;
    for path in ["/", "/manage", &format!("/manage/stats/{key}"), "/api/docs"] {
        check_page_policy(suite, path)?;
    }
    let token = format!("Bearer {TEST_TOKEN}");
    let others: [(&str, String, &str, &str); 11] = [
        ("GET", "/api/openapi.json".into(), "", ""),
        ("GET", "/api/links".into(), "", ""),
        ("GET", "/api/whoami".into(), &token, ""),
        ("GET", format!("/api/links/{key}"), &token, ""),
        ("GET", format!("/api/links/{key}/qr.svg"), "", ""),
        ("GET", format!("/api/links/{key}/stats/report"), &token, ""),
        ("GET", "/metrics".into(), "", ""),
        ("GET", "/nowhere".into(), "", ""),
        ("POST", "/api/links".into(), &token, "{"),
        (
            "POST",
            "/api/links".into(),
            &token,
            "{\"url\": \"not a url\"}",
        ),
        ("DELETE", "/api/links/Zz9Q".into(), "", ""),
    ];
    let mut statuses = Vec::new();
    for (method, path, authorization, body) in &others {
        let mut head = vec![
            format!("{method} {path} HTTP/1.1"),
            "Host: 127.0.0.1".into(),
        ];
        if !authorization.is_empty() {
            head.push(format!("Authorization: {authorization}"));
        }
        if !body.is_empty() {
            head.push("Content-Type: application/json".into());
        }
        let head = head.join("\r\n");
        let answer = raw_request(&suite.writer_url, &head, body)?;
        let policy = answer.header("content-security-policy").unwrap_or_default();
        let expected = [
            ("default-src", "'none'"),
            ("base-uri", "'none'"),
            ("frame-ancestors", "'none'"),
        ]
        .map(|(n, v)| (n.to_owned(), v.to_owned()));
        ensure(
            directives(policy) == expected
                && answer.header("x-content-type-options") == Some("nosniff"),
            || format!("{method} {path}: {} {:?}", answer.status, answer.headers),
        )?;
        statuses.push(answer.status);
    }
    // Successes and failures alike.
    ensure(
        statuses.contains(&200)
            && statuses.contains(&401)
            && statuses.contains(&404)
            && statuses.contains(&400)
            && statuses.contains(&422),
        || format!("the answers checked were {statuses:?}"),
    )
}

/// The export `token` downloads from the suite's writer, as CSV lines
/// after the header.
pub fn exported_rows(suite: &Suite, token: &str, query: &str) -> Result<Vec<String>, String> {
    let url = format!("{}/api/links/export{query}", suite.writer_url);
    let mut response = Suite::agent()
        .get(&url)
        .header("authorization", format!("Bearer {token}"))
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let text = response
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok(text.lines().skip(1).map(str::to_owned).collect())
}

/// A token limited to one domain acts there (named by its name or an
/// alias) and nowhere else: 403 `domain-not-allowed` on the others, for a
/// change, a listing, an export, statistics, trending and each bulk row;
/// its listing and export hold its domain's links alone. An admin acts
/// on every domain.
pub fn a_domain_limited_token_is_refused_on_another_domain(suite: &Suite) -> Result<(), String> {
    let answer = |method: &str, path: &str, token: &str, body: Option<&Value>| {
        api(suite, method, path, Some(token), None, body)
    };
    let refused = answer(
        "POST",
        "/api/links",
        SHOP_TOKEN,
        Some(&json!({ "url": "https://example.org/shop/default", "key": "shopD1" })),
    )?;
    ensure(
        refused.status == 403 && refused.body["code"] == "domain-not-allowed",
        || {
            format!(
                "create on the default domain: {} {}",
                refused.status, refused.body
            )
        },
    )?;
    let stored: Option<String> = suite.redis.query(&["HGET", "short:sh", "opD1"])?;
    ensure(stored.is_none(), || format!("stored anyway: {stored:?}"))?;
    for (key, domain) in [("shopD1", GO_DOMAIN), ("shopD2", GO_ALIAS)] {
        let created = answer(
            "POST",
            "/api/links",
            SHOP_TOKEN,
            Some(
                &json!({ "url": format!("https://example.org/shop/{key}"), "key": key, "domain": domain }),
            ),
        )?;
        ensure(
            created.status == 201 && created.body["domain"] == GO_DOMAIN,
            || format!("create on {domain}: {} {}", created.status, created.body),
        )?;
    }
    // The same key on the default domain, the admin's: out of the shop's reach.
    let admins = answer(
        "POST",
        "/api/links",
        ADMIN_TOKEN,
        Some(&json!({ "url": "https://example.org/shop/admins", "key": "shopD1" })),
    )?;
    ensure(admins.status == 201, || format!("admin: {}", admins.body))?;
    let change = json!({ "url": "https://example.org/shop/changed" });
    refused_elsewhere(suite, &change)?;
    let changed = answer(
        "PATCH",
        &format!("/api/links/shopD1?domain={GO_ALIAS}"),
        SHOP_TOKEN,
        Some(&change),
    )?;
    ensure(changed.status == 200, || {
        format!("its own: {}", changed.body)
    })?;
    seen_on_its_domain_alone(suite)
}

/// The shop's token on the default domain: every route refuses it.
fn refused_elsewhere(suite: &Suite, change: &Value) -> Result<(), String> {
    for (method, path, body) in [
        ("PATCH", "/api/links/shopD1", Some(change)),
        ("DELETE", "/api/links/shopD1", None),
        ("GET", "/api/links/shopD1/stats", None),
        ("GET", "/api/links?domain=127.0.0.1", None),
        ("GET", "/api/links/export?domain=127.0.0.1", None),
        ("GET", "/api/trending?domain=127.0.0.1", None),
    ] {
        let refused = api(suite, method, path, Some(SHOP_TOKEN), None, body)?;
        ensure(
            refused.status == 403 && refused.body["code"] == "domain-not-allowed",
            || format!("{method} {path}: {} {}", refused.status, refused.body),
        )?;
    }
    Ok(())
}

/// What the shop's token sees: its domain's links alone; its bulk rows on
/// the default domain refused. An admin sees its links too.
fn seen_on_its_domain_alone(suite: &Suite) -> Result<(), String> {
    let answer = |method: &str, path: &str, token: &str, body: Option<&Value>| {
        api(suite, method, path, Some(token), None, body)
    };
    let whoami = answer("GET", "/api/whoami", SHOP_TOKEN, None)?;
    ensure(whoami.body["domains"] == json!([GO_DOMAIN]), || {
        format!("whoami: {}", whoami.body)
    })?;
    let listed = answer("GET", "/api/links?limit=100", SHOP_TOKEN, None)?;
    let links = listed.body["links"].as_array().cloned().unwrap_or_default();
    ensure(
        links.len() == 2 && links.iter().all(|link| link["domain"] == GO_DOMAIN),
        || format!("the shop's listing: {}", listed.body),
    )?;
    let rows = exported_rows(suite, SHOP_TOKEN, "")?;
    ensure(
        rows.len() == 2 && rows.iter().all(|row| row.contains(",shop,go.test,")),
        || format!("the shop's export: {rows:?}"),
    )?;
    let bulk = answer(
        "POST",
        "/api/links/bulk",
        SHOP_TOKEN,
        Some(&json!([
            { "url": "https://example.org/shop/bulk/default" },
            { "url": "https://example.org/shop/bulk/go", "domain": GO_DOMAIN },
        ])),
    )?;
    let results = &bulk.body["results"];
    ensure(
        results[0]["status"] == "refused"
            && results[0]["code"] == 403
            && results[1]["status"] == "created"
            && results[1]["domain"] == GO_DOMAIN,
        || format!("bulk: {}", bulk.body),
    )?;
    // An admin acts everywhere: the shop's link, on its domain.
    let shown = answer(
        "GET",
        &format!("/api/links/shopD1?domain={GO_DOMAIN}"),
        ADMIN_TOKEN,
        None,
    )?;
    ensure(
        shown.body["owner"] == "shop" && shown.body["url"] == "https://example.org/shop/changed",
        || format!("admin: {}", shown.body),
    )
}
