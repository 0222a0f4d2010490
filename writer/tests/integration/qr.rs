//! QR codes of short links, read back by a real decoder (`zbarimg`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::http::header;
use actix_web::test as actix_test;
use serde_json::json;
use shortlink_writer::qr::RENDERS_AT_ONCE;

use crate::common::{api, create, ensure, Suite, ALICE_TOKEN, TEST_TOKEN};

/// `path` of the writer: status, `Content-Type` and body bytes.
fn fetch(suite: &Suite, path: &str) -> Result<(u16, String, Vec<u8>), String> {
    let url = format!("{}{path}", suite.writer_url);
    let mut response = Suite::agent()
        .get(&url)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response
        .body_mut()
        .with_config()
        .limit(16 * 1024 * 1024)
        .read_to_vec()
        .map_err(|e| e.to_string())?;
    Ok((response.status().as_u16(), kind, body))
}

/// A link's PNG QR code, decoded by `zbarimg`, gives its short URL back;
/// its SVG is served as SVG.
pub fn qr_code_decodes_to_the_short_url(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/qr/printed" }),
    )?;
    let short_url = format!("{}/l/{key}", suite.varnish.base_url());
    for size in ["", "?size=128", "?size=300", "?size=2048"] {
        let (status, kind, png) = fetch(suite, &format!("/api/links/{key}/qr.png{size}"))?;
        ensure(status == 200 && kind == "image/png", || {
            format!("qr.png{size}: {status} {kind}")
        })?;
        let file = suite.dir.join(format!("qr-{key}-{}.png", size.len()));
        std::fs::write(&file, &png).map_err(|e| e.to_string())?;
        let decoded = std::process::Command::new("zbarimg")
            .args(["--raw", "-q"])
            .arg(&file)
            .output()
            .map_err(|e| format!("zbarimg (scripts/install-deps.sh test): {e}"))?;
        let text = String::from_utf8_lossy(&decoded.stdout);
        ensure(text.trim() == short_url, || {
            format!(
                "zbarimg read {text:?} in qr.png{size}, not {short_url}: {}",
                String::from_utf8_lossy(&decoded.stderr)
            )
        })?;
    }
    let (status, kind, svg) = fetch(suite, &format!("/api/links/{key}/qr.svg"))?;
    let svg = String::from_utf8_lossy(&svg);
    ensure(
        status == 200 && kind == "image/svg+xml" && svg.contains("<svg"),
        || format!("qr.svg: {status} {kind} {svg:.80}"),
    )
}

/// A size out of bounds or not a number is refused with 422 and the
/// bounds; an unknown key answers 404 and a deleted link 410.
pub fn qr_code_refuses_bad_sizes_and_missing_links(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/qr/refused" }),
    )?;
    for size in ["10", "4096", "abc", "-1"] {
        let answer = api(
            suite,
            "GET",
            &format!("/api/links/{key}/qr.png?size={size}"),
            None,
            None,
            None,
        )?;
        let error = answer.body["error"].as_str().unwrap_or_default();
        ensure(answer.status == 422 && error.contains("size"), || {
            format!("size={size}: {} {}", answer.status, answer.body)
        })?;
    }
    let unknown = api(suite, "GET", "/api/links/NoSuchQr/qr.svg", None, None, None)?;
    ensure(unknown.status == 404, || {
        format!(
            "an unknown key's QR code: {} {}",
            unknown.status, unknown.body
        )
    })?;
    let deleted = api(
        suite,
        "DELETE",
        &format!("/api/links/{key}"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    ensure(deleted.status == 204, || {
        format!("delete: {}", deleted.status)
    })?;
    let gone = api(
        suite,
        "GET",
        &format!("/api/links/{key}/qr.png"),
        None,
        None,
        None,
    )?;
    ensure(gone.status == 410, || {
        format!("a deleted link's QR code: {} {}", gone.status, gone.body)
    })
}

/// A gauge of the writer's `/metrics`.
fn gauge(text: &str, name: &str) -> Result<u64, String> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| format!("no {name} in the metrics"))
}

/// One insert through the API, and how long its answer took.
fn timed_insert(suite: &Suite, url: &str) -> Result<Duration, String> {
    let started = Instant::now();
    create(suite, Some(ALICE_TOKEN), &json!({ "url": url }))?;
    Ok(started.elapsed())
}

/// 32 PNGs of 2048 pixels asked at once are drawn off the request threads,
/// [`RENDERS_AT_ONCE`] at a time (the others wait their turn, as the
/// metrics show while they run), and an insert sent meanwhile is answered
/// before they are all drawn.
pub fn big_pngs_take_turns_and_never_stall_an_insert(suite: &Suite) -> Result<(), String> {
    const ASKED: u32 = 32;
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/qr/crowded" }),
    )?;
    let alone = timed_insert(suite, "https://example.org/qr/insert-alone")?;
    let done = Arc::new(AtomicU32::new(0));
    let writer_url = suite.writer_url.clone();
    let renders: Vec<_> = (0..ASKED)
        .map(|n| {
            let (done, url) = (
                Arc::clone(&done),
                // Each a size of its own, so none is answered as kept.
                format!("{writer_url}/api/links/{key}/qr.png?size={}", 2048 - n),
            );
            std::thread::spawn(move || {
                let answer = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_mins(1)))
                    .build()
                    .new_agent()
                    .get(&url)
                    .header("authorization", format!("Bearer {ALICE_TOKEN}"))
                    .call()
                    .map(|r| r.status().as_u16());
                done.fetch_add(1, Ordering::SeqCst);
                answer.map_err(|e| e.to_string())
            })
        })
        .collect();
    let (mut most_drawing, mut most_waiting) = (0, 0);
    let mut during = None;
    while done.load(Ordering::SeqCst) < ASKED {
        let metrics = Suite::agent()
            .get(&format!("{}/metrics", suite.writer_url))
            .call()
            .map_err(|e| e.to_string())?
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?;
        let drawing = gauge(&metrics, "shortlink_qr_pngs_drawing")?;
        let waiting = gauge(&metrics, "shortlink_qr_pngs_waiting")?;
        most_drawing = most_drawing.max(drawing);
        most_waiting = most_waiting.max(waiting);
        if waiting > 0 && during.is_none() {
            let took = timed_insert(suite, "https://example.org/qr/insert-during")?;
            during = Some((took, done.load(Ordering::SeqCst)));
        }
    }
    let statuses: Vec<Result<u16, String>> = renders
        .into_iter()
        .map(|r| r.join().unwrap_or_else(|_| Err("panicked".into())))
        .collect();
    ensure(statuses.iter().all(|s| *s == Ok(200)), || {
        format!("the PNGs: {statuses:?}")
    })?;
    let bound = u64::try_from(RENDERS_AT_ONCE).map_err(|e| e.to_string())?;
    ensure(most_drawing >= 1 && most_drawing <= bound, || {
        format!("{most_drawing} PNGs drawn at once, at most {bound} may be")
    })?;
    let (took, drawn_by_then) = during.ok_or_else(|| {
        format!("no PNG was ever seen waiting its turn (at most {most_waiting} waited)")
    })?;
    eprintln!(
        "an insert alone: {alone:?}; during {ASKED} PNGs of 2048 px ({most_waiting} waiting at \
         most): {took:?}, answered when {drawn_by_then} of them were"
    );
    ensure(drawn_by_then < ASKED, || {
        format!("the insert was answered only once all {ASKED} PNGs were ({took:?})")
    })
}

/// Without a token a client's PNGs spend a rate limit of their own (the
/// links' size, apart from them): past its burst, 429 with when to come
/// back. A code drawn already costs nothing, a token holder is never
/// limited, and the client's links are untouched.
pub fn anonymous_pngs_are_rate_limited(suite: &Suite) -> Result<(), String> {
    let settings = suite.settings_with("t-qrrate:", 2, |config| {
        config.rate_limit.links_per_minute = 6;
        config.rate_limit.burst = 2;
    });
    actix_web::rt::System::new().block_on(async {
        let shortener = shortlink_writer::links::shortener::Shortener::new(settings)
            .map_err(|e| e.to_string())?;
        let app = api_app!(shortener);
        let (status, link) = call!(
            app,
            actix_test::TestRequest::post()
                .uri("/api/links")
                .insert_header((header::AUTHORIZATION, format!("Bearer {TEST_TOKEN}")))
                .set_json(json!({ "url": "https://example.org/qr/limited" }))
        );
        let key = link["key"].as_str().unwrap_or_default().to_owned();
        ensure(status == 201, || format!("create: {status} {link}"))?;
        let png = |size: u32, token: Option<&str>| {
            let mut request = actix_test::TestRequest::get()
                .uri(&format!("/api/links/{key}/qr.png?size={size}"))
                .peer_addr("192.0.2.70:40000".parse().expect("a socket address"));
            if let Some(token) = token {
                request = request.insert_header((header::AUTHORIZATION, format!("Bearer {token}")));
            }
            request.to_request()
        };
        let mut statuses = Vec::new();
        for size in [128, 129, 130] {
            let answer = actix_test::call_service(&app, png(size, None)).await;
            statuses.push(answer.status().as_u16());
            if answer.status() == 429 {
                let retry = answer
                    .headers()
                    .get(header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<u64>().ok());
                let body: serde_json::Value = actix_test::read_body_json(answer).await;
                ensure(
                    retry.is_some_and(|s| (1..=10).contains(&s))
                        && body["error"]
                            .as_str()
                            .is_some_and(|e| e.contains("QR codes")),
                    || format!("the 429: Retry-After {retry:?}, {body}"),
                )?;
            }
        }
        ensure(statuses == [200, 200, 429], || {
            format!("three new PNGs without a token, burst 2: {statuses:?}")
        })?;
        let kept = actix_test::call_service(&app, png(128, None))
            .await
            .status();
        let holder = actix_test::call_service(&app, png(131, Some(TEST_TOKEN)))
            .await
            .status();
        let (link_status, body) = call!(
            app,
            actix_test::TestRequest::post()
                .uri("/api/links")
                .peer_addr("192.0.2.70:40000".parse().expect("a socket address"))
                .set_json(json!({ "url": "https://example.org/qr/limited/link" }))
        );
        ensure(kept == 200 && holder == 200 && link_status == 201, || {
            format!(
                "a kept PNG: {kept}, a token holder's: {holder}, the client's link: \
                     {link_status} {body}"
            )
        })
    })
}
