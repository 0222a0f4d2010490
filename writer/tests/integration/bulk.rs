//! `POST /api/links/bulk` and the form's CSV upload: many links at once,
//! each under a single insert's rules, one result per row in input order.

use std::fmt::Write as _;

use actix_web::http::header;
use actix_web::test as actix_test;
use serde_json::{json, Value};

use crate::common::{api, create, ensure, form_credentials, Suite, ALICE_TOKEN, TEST_TOKEN};

/// Posts `body` as `content_type` to the bulk API with `token`.
fn post_bulk(
    suite: &Suite,
    token: Option<&str>,
    content_type: &str,
    body: String,
) -> Result<(u16, Value), String> {
    let url = format!("{}/api/links/bulk", suite.writer_url);
    let mut request = Suite::agent()
        .post(&url)
        .header("content-type", content_type);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let mut response = request.send(body).map_err(|e| format!("POST {url}: {e}"))?;
    let text = response
        .body_mut()
        .with_config()
        .limit(64 * 1024 * 1024)
        .read_to_string()
        .map_err(|e| e.to_string())?;
    let body = serde_json::from_str(&text).map_err(|e| format!("{e}: {text:.300}"))?;
    Ok((response.status().as_u16(), body))
}

/// What `key` holds now, through the API: its URL, or the status.
fn url_of(suite: &Suite, key: &str) -> Result<Result<String, u16>, String> {
    let answer = api(suite, "GET", &format!("/api/links/{key}"), None, None, None)?;
    Ok(match answer.status {
        200 => Ok(answer.body["url"].as_str().unwrap_or_default().to_owned()),
        status => Err(status),
    })
}

/// A JSON array's items each get a result in order: created, existing,
/// refused with the status and field a single insert would answer. The
/// refused ones stored nothing; the others did, with their expiry.
pub fn bulk_json_answers_each_item_in_order(suite: &Suite) -> Result<(), String> {
    create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/bulk/taken", "key": "bulkTaken" }),
    )?;
    let items = json!([
        { "url": "https://example.org/bulk/one", "key": "bulkOne" },
        { "url": "https://example.org/bulk/two", "expires_at": "2099-01-01T00:00:00Z", "max_clicks": 3 },
        { "url": "https://example.org/bulk/one", "key": "bulkOne" },
        { "url": "ftp://example.org/bulk/bad" },
        { "url": "https://example.org/bulk/other", "key": "bulkTaken" },
        "https://example.org/bulk/not-an-object",
        { "url": "https://example.org/bulk/extra", "colour": "blue" },
        { "url": "https://example.org/bulk/last" },
    ]);
    let (status, body) = post_bulk(
        suite,
        Some(ALICE_TOKEN),
        "application/json",
        items.to_string(),
    )?;
    ensure(status == 200, || format!("{status} {body}"))?;
    let results = body["results"].as_array().ok_or("no results")?;
    let statuses: Vec<(&str, Option<u64>, Option<&str>)> = results
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap_or_default(),
                r["code"].as_u64(),
                r["field"].as_str(),
            )
        })
        .collect();
    ensure(
        statuses
            == [
                ("created", None, None),
                ("created", None, None),
                ("existing", None, None),
                ("refused", Some(422), Some("url")),
                ("refused", Some(409), Some("key")),
                ("refused", Some(422), None),
                ("refused", Some(422), Some("unknown")),
                ("created", None, None),
            ],
        || format!("{statuses:?}\n{body:#}"),
    )?;
    let indexes: Vec<u64> = results.iter().filter_map(|r| r["index"].as_u64()).collect();
    ensure(indexes == (0..8).collect::<Vec<u64>>(), || {
        format!("indexes {indexes:?}")
    })?;
    ensure(
        body["summary"] == json!({ "created": 3, "existing": 1, "conflicts": 1, "refused": 4 }),
        || format!("summary {}", body["summary"]),
    )?;
    ensure(
        url_of(suite, "bulkOne")? == Ok("https://example.org/bulk/one".into())
            && url_of(suite, "bulkTaken")? == Ok("https://example.org/bulk/taken".into()),
        || "bulkOne or bulkTaken changed".into(),
    )?;
    let two = results[1]["key"].as_str().ok_or("no key for item 1")?;
    let shown = api(
        suite,
        "GET",
        &format!("/api/links/{two}"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    ensure(
        shown.body["expires_at"] == "2099-01-01T00:00:00Z"
            && shown.body["max_clicks"] == 3
            && shown.body["owner"] == "alice",
        || format!("item 1 stored as {}", shown.body),
    )?;
    // A short link from the bulk answer redirects like any other.
    let short = results[7]["short_url"].as_str().ok_or("no short_url")?;
    let (status, location) = crate::common::get(&Suite::agent(), short)?;
    ensure(
        status == 301 && location.as_deref() == Some("https://example.org/bulk/last"),
        || format!("{short}: {status} {location:?}"),
    )
}

/// CSV lines (`url[,key]`, no header) each get a result with their line;
/// a line that is not a link does not stop the lines after it.
pub fn bulk_csv_answers_each_line(suite: &Suite) -> Result<(), String> {
    let csv = "https://example.org/bulk/csv/1,bulkCsv1\n\
               not a url,bulkCsv2\n\
               \"https://example.org/bulk/csv/3?a=1,2\"\n\
               https://example.org/bulk/csv/4,b!\n\
               https://example.org/bulk/csv/5,bulkCsv5\n";
    let (status, body) = post_bulk(suite, Some(TEST_TOKEN), "text/csv", csv.to_owned())?;
    ensure(status == 200, || format!("{status} {body}"))?;
    let results = body["results"].as_array().ok_or("no results")?;
    let seen: Vec<(u64, &str)> = results
        .iter()
        .map(|r| {
            (
                r["line"].as_u64().unwrap_or(0),
                r["status"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    ensure(
        seen == [
            (1, "created"),
            (2, "refused"),
            (3, "created"),
            (4, "refused"),
            (5, "created"),
        ],
        || format!("{seen:?}\n{body:#}"),
    )?;
    ensure(
        results[3]["field"] == "key" && results[1]["field"] == "url",
        || format!("{body:#}"),
    )?;
    ensure(
        url_of(suite, "bulkCsv2")? == Err(404)
            && url_of(suite, "bulkCsv5")? == Ok("https://example.org/bulk/csv/5".into()),
        || "line 2 stored, or line 5 not".into(),
    )?;
    let third = results[2]["key"].as_str().ok_or("no key on line 3")?;
    ensure(
        url_of(suite, third)? == Ok("https://example.org/bulk/csv/3?a=1,2".into()),
        || "the quoted URL with a comma was not kept whole".into(),
    )
}

/// 10,000 links in one request are all created; 10,001 are refused with
/// 413 before any is stored; neither JSON nor CSV is 415.
pub fn bulk_takes_ten_thousand_links_and_refuses_more(suite: &Suite) -> Result<(), String> {
    let limit = shortlink_writer::links::bulk::MAX_BULK_LINKS;
    let items = |n: usize, tag: &str| -> String {
        let items: Vec<Value> = (0..n)
            .map(|i| json!({ "url": format!("https://example.org/bulk/{tag}/{i}") }))
            .collect();
        Value::Array(items).to_string()
    };
    let (status, body) = post_bulk(
        suite,
        Some(TEST_TOKEN),
        "application/json",
        items(limit + 1, "over"),
    )?;
    ensure(
        status == 413
            && body["error"]
                .as_str()
                .is_some_and(|e| e.contains("at most 10000")),
        || format!("{} over: {status} {body}", limit + 1),
    )?;
    ensure(url_of_first_over(suite)?.is_none(), || {
        "a link of the refused request was stored".into()
    })?;
    let started = std::time::Instant::now();
    let (status, body) = post_bulk(
        suite,
        Some(TEST_TOKEN),
        "application/json",
        items(limit, "full"),
    )?;
    let took = started.elapsed();
    ensure(status == 200 && body["summary"]["created"] == limit, || {
        format!("{limit} links: {status} {}", body["summary"])
    })?;
    eprintln!(
        "    bulk: {limit} links created in {:.2} s",
        took.as_secs_f64()
    );
    // Tiny items are counted as they are read, not held by the million.
    let zeros = format!("[{}0]", "0,".repeat(limit));
    let (status, body) = post_bulk(suite, Some(TEST_TOKEN), "application/json", zeros)?;
    ensure(status == 413, || {
        format!("{} zeros: {status} {body}", limit + 1)
    })?;
    let (status, body) = post_bulk(suite, Some(TEST_TOKEN), "text/plain", "x".into())?;
    ensure(status == 415, || format!("text/plain: {status} {body}"))
}

/// Whether a link of the refused 10,001 got stored: its generated key is
/// the URL's digest, so look the URL's first candidate up.
fn url_of_first_over(suite: &Suite) -> Result<Option<String>, String> {
    let key = &shortlink_core::digest_key("https://example.org/bulk/over/0")[..4];
    Ok(url_of(suite, key)?.ok())
}

/// An anonymous client spends its rate limit row by row: the first rows
/// fill its burst, the rest are refused with 429 and when to come back; a
/// token holder's rows are never limited.
pub fn bulk_spends_the_rate_limit_row_by_row(suite: &Suite) -> Result<(), String> {
    let settings = suite.settings_with("t-bulkrate:", 2, |config| {
        config.rate_limit.links_per_minute = 6;
        config.rate_limit.burst = 2;
    });
    actix_web::rt::System::new().block_on(async {
        let shortener = shortlink_writer::links::shortener::Shortener::new(settings)
            .map_err(|e| e.to_string())?;
        let app = api_app!(shortener);
        let rows = |tag: &str| {
            (0..5)
                .map(|n| format!("https://example.org/bulk-rate/{tag}/{n}\n"))
                .collect::<Vec<_>>()
                .concat()
        };
        let request = |body: String, token: Option<&str>| {
            let mut request = actix_test::TestRequest::post()
                .uri("/api/links/bulk")
                .peer_addr("192.0.2.40:40000".parse().expect("a socket address"))
                .insert_header((header::CONTENT_TYPE, "text/csv"))
                .set_payload(body);
            if let Some(token) = token {
                request = request.insert_header((header::AUTHORIZATION, format!("Bearer {token}")));
            }
            request
        };
        let (status, body) = call!(app, request(rows("anonymous"), None));
        let statuses: Vec<&str> = body["results"]
            .as_array()
            .map(|r| {
                r.iter()
                    .map(|r| r["status"].as_str().unwrap_or(""))
                    .collect()
            })
            .unwrap_or_default();
        ensure(
            status == 200 && statuses == ["created", "created", "refused", "refused", "refused"],
            || format!("anonymous: {status} {body:#}"),
        )?;
        let limited = &body["results"][2];
        ensure(
            limited["code"] == 429
                && limited["retry_after_s"]
                    .as_u64()
                    .is_some_and(|s| (1..=10).contains(&s))
                && limited["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("access token")),
            || format!("the refused row: {limited}"),
        )?;
        let (status, body) = call!(app, request(rows("token"), Some(TEST_TOKEN)));
        ensure(status == 200 && body["summary"]["created"] == 5, || {
            format!("token holder: {status} {body:#}")
        })?;
        let (status, body) = call!(app, request(rows("wrong"), Some("not-a-token-at-all")));
        ensure(status == 401, || format!("a wrong token: {status} {body}"))?;
        // Without a token a body holds no more than the burst's worth of
        // rows: the rest would be refused anyway, so it is not even read.
        let big = (0..40)
            .map(|n| {
                format!(
                    "https://example.org/bulk-rate/big/{n}/{}\n",
                    "x".repeat(200)
                )
            })
            .collect::<Vec<_>>()
            .concat();
        let (status, body) = call!(app, request(big.clone(), None));
        ensure(status == 413, || {
            format!("anonymous, 40 long rows: {status} {body}")
        })?;
        let (status, body) = call!(app, request(big, Some(TEST_TOKEN)));
        ensure(status == 200 && body["summary"]["created"] == 40, || {
            format!("token holder, 40 long rows: {status} {body}")
        })
    })
}

/// The form takes a CSV file: each line's outcome is shown with its short
/// link or the reason it was refused.
pub fn form_uploads_a_csv_file(suite: &Suite) -> Result<(), String> {
    let agent = Suite::agent();
    let (cookie, csrf) = form_credentials(&agent, &suite.writer_url)?;
    let csv = "url,key\nhttps://example.org/upload/1,upload1\njavascript:alert(1),upload2\n\
               https://example.org/upload/3\n";
    let boundary = "----shortlink-test-boundary";
    let body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{csrf}\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\n{TEST_TOKEN}\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"csv\"; filename=\"links.csv\"\r\n\
         Content-Type: text/csv\r\n\r\n{csv}\r\n--{boundary}--\r\n"
    );
    let mut response = agent
        .post(format!("{}/bulk", suite.writer_url))
        .header("cookie", format!("shortlink_csrf={cookie}"))
        .header("origin", suite.writer_url.as_str())
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .send(body)
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let page = response
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    ensure(status == 200, || format!("{status}: {page:.2000}"))?;
    ensure(
        page.contains("<p id=\"bulk-summary\">2 created, 0 already there, 1 refused.</p>"),
        || format!("no summary in {page}"),
    )?;
    let short = format!("{}/l/upload1", suite.varnish.base_url());
    ensure(page.contains(&format!("<a href=\"{short}\">")), || {
        format!("no link to {short} in {page}")
    })?;
    ensure(
        page.contains("<tr><td>3</td><td class=\"refused\">refused</td>"),
        || format!("line 3 not shown refused in {page}"),
    )?;
    ensure(url_of(suite, "upload2")? == Err(404), || {
        "the refused line was stored".into()
    })?;
    // Without the form token, nothing is created.
    let mut response = agent
        .post(format!("{}/bulk", suite.writer_url))
        .header("cookie", format!("shortlink_csrf={cookie}"))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .send(format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"csv\"; filename=\"a.csv\"\r\n\r\n\
             https://example.org/upload/forged,uploadForged\r\n--{boundary}--\r\n"
        ))
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let _ = response.body_mut().read_to_string();
    ensure(
        status == 403 && url_of(suite, "uploadForged")? == Err(404),
        || format!("an upload without the form token: {status}"),
    )
}

/// A form upload to an in-process writer with `settings`: the form's own
/// cookie and token, then the file, from one client address.
struct FormUploads {
    cookie: String,
    csrf: String,
}

const BOUNDARY: &str = "----shortlink-upload-boundary";

impl FormUploads {
    fn new(settings: &shortlink_writer::config::Settings) -> Result<Self, String> {
        // The form key is shared through Redis: this guard's tokens are the
        // app's.
        let guard = shortlink_writer::access::Gatekeeper::new(settings)?;
        let cookie = shortlink_writer::access::new_form_cookie()?;
        let csrf = guard.form_token(&cookie);
        Ok(Self { cookie, csrf })
    }

    /// The parts before the file, and the file's part header.
    fn head(&self, token: &str) -> String {
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{}\r\n\
             --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\n{token}\r\n\
             --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"csv\"; filename=\"l.csv\"\r\n\
             Content-Type: text/csv\r\n\r\n",
            self.csrf
        )
    }

    fn request(&self) -> actix_test::TestRequest {
        actix_test::TestRequest::post()
            .uri("/bulk")
            .peer_addr("192.0.2.50:40000".parse().expect("a socket address"))
            .cookie(actix_web::cookie::Cookie::new(
                "shortlink_csrf",
                self.cookie.clone(),
            ))
            .insert_header((
                header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={BOUNDARY}"),
            ))
    }
}

/// Every link stored under `prefix`.
fn stored_under(suite: &Suite, prefix: &str) -> Result<usize, String> {
    let mut count = 0;
    for hash in suite.hashes(prefix)? {
        count += suite.redis.query::<usize>(&["HLEN", &hash])?;
    }
    Ok(count)
}

/// The form's upload without a token spends the rate limit row by row, as
/// the bulk API does: of 5 lines with a burst of 3, the first 3 are created
/// and the other 2 refused with when to come back; with a token all are.
pub fn form_upload_spends_the_rate_limit_row_by_row(suite: &Suite) -> Result<(), String> {
    let prefix = "t-formrate:";
    let settings = suite.settings_with(prefix, 2, |config| {
        config.rate_limit.links_per_minute = 6;
        config.rate_limit.burst = 3;
    });
    actix_web::rt::System::new().block_on(async {
        let shortener = shortlink_writer::links::shortener::Shortener::new(settings.clone())
            .map_err(|e| e.to_string())?;
        let app = api_app!(shortener);
        let form = FormUploads::new(&settings)?;
        let upload = |tag: &str, token: &str| {
            let rows: String = (0..5).fold(String::new(), |mut rows, n| {
                let _ = writeln!(rows, "https://example.org/form-rate/{tag}/{n}");
                rows
            });
            form.request()
                .set_payload(format!("{}{rows}\r\n--{BOUNDARY}--\r\n", form.head(token)))
        };
        let response = actix_test::call_service(&app, upload("anonymous", "").to_request()).await;
        let status = response.status().as_u16();
        let page = String::from_utf8_lossy(&actix_test::read_body(response).await).into_owned();
        ensure(
            status == 200
                && page
                    .contains("<p id=\"bulk-summary\">3 created, 0 already there, 2 refused.</p>")
                && page.matches("try again in").count() == 2,
            || format!("anonymous, 5 lines, burst 3: {status} {page}"),
        )?;
        ensure(stored_under(suite, prefix)? == 3, || {
            "the anonymous upload did not store exactly its burst's 3 links".into()
        })?;
        let response =
            actix_test::call_service(&app, upload("token", TEST_TOKEN).to_request()).await;
        let status = response.status().as_u16();
        let page = String::from_utf8_lossy(&actix_test::read_body(response).await).into_owned();
        ensure(
            status == 200
                && page
                    .contains("<p id=\"bulk-summary\">5 created, 0 already there, 0 refused.</p>"),
            || format!("a token holder's 5 lines: {status} {page}"),
        )
    })
}

/// Without a token the form's file may hold no more than the rate limit's
/// burst of links, as the bulk API's body: an 18 MB upload is refused with
/// 413 once that much is read, not read whole, and stores nothing. The
/// same file under that size is taken from a token holder.
pub fn form_upload_is_sized_by_its_caller(suite: &Suite) -> Result<(), String> {
    use futures_util::StreamExt as _;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    const CHUNK_ROWS: usize = 16;
    const TOTAL: usize = 18 * 1024 * 1024;
    let prefix = "t-formsize:";
    let settings = suite.settings_with(prefix, 2, |config| {
        config.rate_limit.links_per_minute = 6;
        config.rate_limit.burst = 3;
    });
    let anonymous_limit = shortlink_writer::web::bulk_body_limit(&settings, false);
    actix_web::rt::System::new().block_on(async {
        let shortener = shortlink_writer::links::shortener::Shortener::new(settings.clone())
            .map_err(|e| e.to_string())?;
        let app = api_app!(shortener);
        let form = FormUploads::new(&settings)?;
        // 256-byte lines, 4 KiB at a time, 18 MB in all, counted as the
        // writer reads them; no Content-Length, as a browser streaming it.
        let row = |n: usize| {
            let line = format!("https://example.org/form-size/{n}/");
            format!("{line}{}\n", "x".repeat(255 - line.len()))
        };
        let read = Arc::new(AtomicUsize::new(0));
        let head = web_bytes(form.head(""));
        let counted = Arc::clone(&read);
        let chunks = futures_util::stream::iter(std::iter::once(head).chain(
            (0..TOTAL / (CHUNK_ROWS * 256)).map(move |chunk| {
                web_bytes(
                    (0..CHUNK_ROWS)
                        .map(|n| row(chunk * CHUNK_ROWS + n))
                        .collect::<String>(),
                )
            }),
        ))
        // Each chunk after a pause, as from a network: what is read is
        // what the writer asked for, not all there is.
        .then(move |chunk| {
            let counted = Arc::clone(&counted);
            async move {
                tokio::task::yield_now().await;
                counted.fetch_add(chunk.len(), Ordering::SeqCst);
                Ok::<_, actix_web::error::PayloadError>(chunk)
            }
        });
        let payload: actix_web::dev::Payload = actix_web::dev::Payload::Stream {
            payload: Box::pin(chunks),
        };
        let (request, _) = form.request().to_request().replace_payload(payload);
        let response = actix_test::call_service(&app, request).await;
        let status = response.status().as_u16();
        let page = String::from_utf8_lossy(&actix_test::read_body(response).await).into_owned();
        let read = read.load(Ordering::SeqCst);
        eprintln!(
            "an anonymous 18 MB upload: {status} after {read} bytes read (the anonymous \
             limit {anonymous_limit} bytes)"
        );
        ensure(
            status == 413 && page.contains(&format!("the file is over {anonymous_limit} bytes")),
            || format!("an anonymous 18 MB upload: {status} {page:.3000}"),
        )?;
        // The multipart reader reads a few chunks ahead.
        ensure(read < anonymous_limit + 16 * CHUNK_ROWS * 256, || {
            format!("{read} bytes read before the 413, past the anonymous {anonymous_limit}")
        })?;
        ensure(stored_under(suite, prefix)? == 0, || {
            "the refused upload stored links".into()
        })?;
        // The same lines, as many as fit under the anonymous limit and
        // more than the burst, from a token holder: all created.
        let lines = anonymous_limit / 256 + 1;
        let rows: String = (0..lines).map(row).collect();
        let response = actix_test::call_service(
            &app,
            form.request()
                .set_payload(format!(
                    "{}{rows}\r\n--{BOUNDARY}--\r\n",
                    form.head(TEST_TOKEN)
                ))
                .to_request(),
        )
        .await;
        let status = response.status().as_u16();
        let page = String::from_utf8_lossy(&actix_test::read_body(response).await).into_owned();
        ensure(
            status == 200
                && page.contains(&format!(
                    "<p id=\"bulk-summary\">{lines} created, 0 already there, 0 refused.</p>"
                )),
            || format!("a token holder's {lines} lines: {status} {page:.3000}"),
        )
    })
}

fn web_bytes(text: String) -> actix_web::web::Bytes {
    actix_web::web::Bytes::from(text)
}
