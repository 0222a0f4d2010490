//! Servers of the suite, and the tests that need no browser.

use std::collections::HashSet;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use actix_web::{test as actix_test, web, App};
use shortlink_keys::digest_key;
use shortlink_writer::config::{AccessToken, Config, Settings};
use shortlink_writer::shortener::{ShortenError, Shortener};
use shortlink_writer::store::{Inserted, StoreError};
use test_support::{free_port, release_dir, wait_for_port, work_dir, RedisServer, Varnish};

pub type Test = fn(&Suite) -> Result<(), String>;

/// The access token of the suite's writer.
pub const TEST_TOKEN: &str = "test-token-0123456789abcdef0123456789";

pub const WRITER: &str = env!("CARGO_BIN_EXE_shortlink");

/// Redis, Varnish, the writer and a landing page, shared by every test.
pub struct Suite {
    pub dir: PathBuf,
    pub redis: RedisServer,
    pub varnish: Varnish,
    pub writer_url: String,
    pub landing_url: String,
    pub config_file: PathBuf,
    writer: Child,
}

impl Suite {
    pub fn start() -> Result<Self, String> {
        let dir = work_dir("writer")?;
        let redis = RedisServer::start(&dir.join("redis"), "")?;
        let varnish_port = free_port()?;
        let writer_port = free_port()?;
        let config_file = dir.join("shortlink.toml");
        fs::write(
            &config_file,
            format!(
                "listen = \"127.0.0.1:{writer_port}\"\n\
                 public_base_url = \"http://127.0.0.1:{varnish_port}/l/\"\n\
                 # The browser test's landing page is on loopback.\n\
                 allow_private_targets = true\n\
                 [redis]\nurl = \"{}\"\n\
                 [varnish]\npurge_url = \"http://127.0.0.1:{varnish_port}\"\n\
                 vmod = \"{}\"\n\
                 [access]\ntokens = [\"{TEST_TOKEN}\"]\n",
                redis.url,
                release_dir().join("libvmod_shortlink.so").display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let vcl = run_writer(&["vcl", "--config", &config_file.display().to_string()])?;
        let vcl_file = dir.join("shortlink.vcl");
        fs::write(&vcl_file, vcl).map_err(|e| e.to_string())?;
        let varnish = Varnish::start_on(&dir, &vcl_file, varnish_port)?;

        let log = fs::File::create(dir.join("writer.log")).map_err(|e| e.to_string())?;
        let writer = Command::new(WRITER)
            .args(["serve", "--config"])
            .arg(&config_file)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start the writer: {e}"))?;
        let writer_url = format!("http://127.0.0.1:{writer_port}");
        let suite = Self {
            landing_url: start_landing_server(&writer_url)?,
            writer_url,
            dir,
            redis,
            varnish,
            config_file,
            writer,
        };
        wait_for_port(writer_port, Duration::from_secs(10))?;
        Ok(suite)
    }

    /// Settings for in-process tests: this suite's Redis, keys under `prefix`,
    /// no purging (these tests have no Varnish of their own).
    pub fn settings(&self, prefix: &str, split: usize) -> Settings {
        self.settings_with(prefix, split, |_| {})
    }

    /// [`Self::settings`], changed by `edit`.
    pub fn settings_with(
        &self,
        prefix: &str,
        split: usize,
        edit: impl FnOnce(&mut Config),
    ) -> Settings {
        let mut config = Config::default();
        config.redis.url.clone_from(&self.redis.url);
        prefix.clone_into(&mut config.redis.hash_prefix);
        config.redis.split = split;
        config.varnish.purge_url = String::new();
        config.access.tokens = vec![AccessToken::new(TEST_TOKEN)];
        edit(&mut config);
        Settings::new(config).expect("test settings are valid")
    }

    pub fn shortener(&self, prefix: &str) -> Shortener {
        Shortener::new(self.settings(prefix, 2)).expect("shortener")
    }

    /// Every hash name under `prefix` in Redis.
    pub fn hashes(&self, prefix: &str) -> Result<Vec<String>, String> {
        let out = self
            .redis
            .cli(&["--scan", "--pattern", &format!("{prefix}*")])?;
        Ok(out.lines().map(str::to_owned).collect())
    }

    pub fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into()
    }
}

impl Drop for Suite {
    fn drop(&mut self) {
        let _ = self.writer.kill();
        let _ = self.writer.wait();
    }
}

pub fn run_writer(args: &[&str]) -> Result<String, String> {
    test_support::command_output(WRITER, args)
}

/// A page the test's short links lead to, on an origin of its own; its
/// `/attack` page posts the writer's form from there, as a hostile site would.
fn start_landing_server(writer_url: &str) -> Result<String, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let attack = format!(
        "<!DOCTYPE html><html><head><title>Win a prize</title></head><body>\
         <form method=\"post\" action=\"{writer_url}/\">\
         <input name=\"url\" value=\"{CROSS_SITE_URL}\"></form>\
         <script>document.forms[0].submit()</script></body></html>"
    );
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let is_attack = line.starts_with("GET /attack ");
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let body = if is_attack {
                attack.as_str()
            } else {
                "<!DOCTYPE html><html><head><title>Landed</title></head>\
                 <body><h1 id=\"landed\">You landed</h1></body></html>"
            };
            let _ = write!(
                &stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Ok(format!("http://127.0.0.1:{port}/welcome"))
}

/// The URL the landing server's `/attack` page tries to shorten.
pub const CROSS_SITE_URL: &str = "https://example.org/planted-by-another-site";

pub fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(message())
    }
}

/// Shortens `url` with a fresh shortener (and connection) under `prefix`.
fn shorten_once(
    suite: &Suite,
    prefix: &str,
    url: &str,
    key: Option<&str>,
) -> Result<Inserted, ShortenError> {
    block_on(async { suite.shortener(prefix).shorten(url, key).await })
}

pub fn same_url_same_key(suite: &Suite) -> Result<(), String> {
    let url = "https://example.org/determinism";
    let first = shorten_once(suite, "t-same:", url, None).map_err(|e| e.to_string())?;
    let again = shorten_once(suite, "t-same:", url, None).map_err(|e| e.to_string())?;
    let expected = &digest_key(url)[..4];
    ensure(
        matches!(&first, Inserted::Created(link) if link.key == expected),
        || format!("first insert: {first:?}, expected key {expected}"),
    )?;
    ensure(
        matches!(&again, Inserted::Existing(link) if link.key == expected),
        || format!("second insert: {again:?}"),
    )?;
    let stored = suite.redis.cli(&[
        "HGET",
        &format!("t-same:{}", &expected[..2]),
        &expected[2..],
    ])?;
    ensure(stored.trim() == url, || format!("Redis holds {stored:?}"))
}

pub fn grows_on_collision(suite: &Suite) -> Result<(), String> {
    let url = "https://example.org/collision";
    let digest = digest_key(url);
    let hash = format!("t-grow:{}", &digest[..2]);
    // Someone else's URL already sits in the 4- and 5-character slots.
    suite
        .redis
        .cli(&["HSET", &hash, &digest[2..4], "https://other.example/4"])?;
    suite
        .redis
        .cli(&["HSET", &hash, &digest[2..5], "https://other.example/5"])?;
    let inserted = shorten_once(suite, "t-grow:", url, None).map_err(|e| e.to_string())?;
    ensure(
        matches!(&inserted, Inserted::Created(link) if link.key == digest[..6]),
        || {
            format!(
                "expected the 6-character key {}, got {inserted:?}",
                &digest[..6]
            )
        },
    )?;
    let again = shorten_once(suite, "t-grow:", url, None).map_err(|e| e.to_string())?;
    ensure(
        matches!(&again, Inserted::Existing(link) if link.key == digest[..6]),
        || format!("re-submission gave {again:?}"),
    )?;
    let untouched = suite.redis.cli(&["HGET", &hash, &digest[2..4]])?;
    ensure(untouched.trim() == "https://other.example/4", || {
        format!("the 4-character slot was overwritten: {untouched:?}")
    })
}

pub fn custom_keys(suite: &Suite) -> Result<(), String> {
    let first = shorten_once(
        suite,
        "t-custom:",
        "https://example.org/talk",
        Some("my-talk"),
    );
    ensure(
        matches!(first, Ok(Inserted::Created(ref l)) if l.key == "my-talk"),
        || format!("{first:?}"),
    )?;
    let again = shorten_once(
        suite,
        "t-custom:",
        "https://example.org/talk",
        Some("my-talk"),
    );
    ensure(matches!(again, Ok(Inserted::Existing(_))), || {
        format!("{again:?}")
    })?;
    let taken = shorten_once(
        suite,
        "t-custom:",
        "https://example.org/other",
        Some("my-talk"),
    );
    ensure(
        matches!(taken, Err(ShortenError::Store(StoreError::KeyTaken { ref key })) if key == "my-talk"),
        || format!("{taken:?}"),
    )?;
    let stored = suite.redis.cli(&["HGET", "t-custom:my", "-talk"])?;
    ensure(stored.trim() == "https://example.org/talk", || {
        format!("conflict changed the stored URL: {stored:?}")
    })
}

/// 16 writers, 200 distinct URLs each, split 1 and 3-character keys, so that
/// the 64 hashes are shared by everyone and slots collide.
pub fn concurrent_distinct_urls(suite: &Suite) -> Result<(), String> {
    let mut config = suite.settings("t-conc:", 1).config;
    config.min_generated_key_length = 3;
    let settings = Settings::new(config).map_err(|e| e.to_string())?;
    let threads: Vec<_> = (0..16)
        .map(|thread| {
            let settings = settings.clone();
            std::thread::spawn(move || {
                block_on(async {
                    let shortener = Shortener::new(settings).expect("shortener");
                    let mut links = Vec::new();
                    for i in 0..200 {
                        let url = format!("https://example.org/concurrent/{thread}/{i}");
                        let inserted = shortener.shorten(&url, None).await;
                        links.push((url, inserted.map_err(|e| e.to_string())));
                    }
                    links
                })
            })
        })
        .collect();
    let mut keys = HashSet::new();
    let mut longer = 0;
    let mut links = Vec::new();
    for thread in threads {
        for (url, inserted) in thread.join().map_err(|_| "a writer thread panicked")? {
            let Ok(Inserted::Created(link)) = inserted else {
                return Err(format!("{url}: {inserted:?}"));
            };
            ensure(keys.insert(link.key.clone()), || {
                format!("key {} given twice", link.key)
            })?;
            longer += usize::from(link.key.len() > 3);
            links.push((url, link.key));
        }
    }
    block_on(async {
        let shortener = Shortener::new(settings).map_err(|e| e.to_string())?;
        for (url, key) in &links {
            let stored = shortener.get(key).await.map_err(|e| e.to_string())?;
            ensure(stored.as_ref().map(|l| &l.url) == Some(url), || {
                format!("{key} holds {stored:?}, expected {url}")
            })?;
        }
        Ok::<_, String>(())
    })?;
    ensure(keys.len() == 3200, || {
        format!("{} links stored", keys.len())
    })?;
    // With 3200 URLs in 64^3 three-character keys, some digests collide;
    // those links must have grown past three characters.
    ensure(longer > 0, || {
        "no collision happened; the test proves nothing".into()
    })?;
    eprintln!("    {longer} of 3200 links needed a longer key");
    Ok(())
}

/// 16 writers submitting the same URL at once: one creates it, all agree.
pub fn concurrent_same_url(suite: &Suite) -> Result<(), String> {
    let settings = suite.settings("t-race:", 2);
    let results: Vec<_> = (0..16)
        .map(|_| {
            let settings = settings.clone();
            std::thread::spawn(move || {
                block_on(async {
                    let shortener = Shortener::new(settings).expect("shortener");
                    shortener.shorten("https://example.org/race", None).await
                })
                .map_err(|e| e.to_string())
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect::<Result<_, _>>()?;
    let created = results
        .iter()
        .filter(|r| matches!(r, Inserted::Created(_)))
        .count();
    let keys: HashSet<_> = results.iter().map(|r| r.link().key.clone()).collect();
    ensure(created == 1 && keys.len() == 1, || {
        format!("{created} creations, keys {keys:?}")
    })
}

/// The writer's routes in an in-process actix service.
macro_rules! api_app {
    ($shortener:expr) => {
        actix_test::init_service({
            let shortener = $shortener;
            let guard = shortlink_writer::guard::Guard::new(&shortener.settings)
                .expect("a guard for the test settings");
            let max_body_bytes = shortener.settings.config.max_body_bytes;
            App::new()
                .app_data(web::Data::new(shortener))
                .app_data(web::Data::new(guard))
                .configure(|config| shortlink_writer::web::routes(config, max_body_bytes))
        })
        .await
    };
}

macro_rules! call {
    ($app:expr, $request:expr) => {{
        let response = actix_test::call_service(&$app, $request.to_request()).await;
        let status = response.status().as_u16();
        let body: serde_json::Value = actix_test::read_body_json(response).await;
        (status, body)
    }};
}

fn api_app_test<F, Fut>(suite: &Suite, prefix: &str, test: F) -> Result<(), String>
where
    F: FnOnce(Shortener) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    actix_web::rt::System::new().block_on(async { test(suite.shortener(prefix)).await })
}

pub fn api_create_and_get(suite: &Suite) -> Result<(), String> {
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
        ensure(status == 200 && got == body, || format!("{status} {got}"))?;
        let (status, missing) = call!(app, actix_test::TestRequest::get().uri("/api/links/nope1"));
        ensure(status == 404 && missing["error"].is_string(), || {
            format!("{status} {missing}")
        })?;
        let conflict = actix_test::TestRequest::post()
            .uri("/api/links")
            .set_json(serde_json::json!({ "url": "https://example.org/b", "key": key }));
        let (status, body) = call!(app, conflict);
        ensure(
            status == 409 && body["error"].as_str().is_some_and(|e| e.contains(&key)),
            || format!("{status} {body}"),
        )
    })
}

pub fn api_every_validation_rule(suite: &Suite) -> Result<(), String> {
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
            ensure(status == 422 && body["field"] == field, || {
                format!("{input}: {status} {body}")
            })?;
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

pub fn api_malformed_requests(suite: &Suite) -> Result<(), String> {
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
            (json("{\"link\": \"https://example.org/\"}"), 400),
            (json("{\"url\": 42}"), 400),
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

pub fn api_redis_unreachable(suite: &Suite) -> Result<(), String> {
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

pub fn form_submit_and_errors(suite: &Suite) -> Result<(), String> {
    let agent = Suite::agent();
    let page = agent
        .get(&suite.writer_url)
        .call()
        .map_err(|e| e.to_string())?
        .into_body()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    ensure(page.contains("<form method=\"post\" action=\"/\""), || {
        page.clone()
    })?;
    let (status, page) = post_form(
        &agent,
        &suite.writer_url,
        &[("url", "notaurl"), ("key", "")],
        &[],
    )?;
    ensure(status == 422, || format!("invalid URL answered {status}"))?;
    ensure(page.contains("value=\"notaurl\""), || {
        "the typed URL was lost".into()
    })?;
    ensure(
        page.contains("id=\"url-help\" role=\"alert\">the URL must be absolute"),
        || "no error next to the URL field".into(),
    )
}

/// Loads the form as a browser would (its cookie and form token), then
/// posts `fields` with them and with `headers`.
pub fn post_form(
    agent: &ureq::Agent,
    writer_url: &str,
    fields: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> Result<(u16, String), String> {
    let (cookie, csrf) = form_credentials(agent, writer_url)?;
    let mut fields = fields.to_vec();
    fields.push(("csrf", &csrf));
    send_form(agent, writer_url, Some(&cookie), &fields, headers)
}

/// Posts `fields` to `url` with exactly this form cookie and these headers.
pub fn send_form(
    agent: &ureq::Agent,
    url: &str,
    cookie: Option<&str>,
    fields: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> Result<(u16, String), String> {
    let mut request = agent.post(url);
    if let Some(cookie) = cookie {
        request = request.header("cookie", format!("shortlink_csrf={cookie}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request
        .send_form(fields.to_vec())
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let page = response
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok((status, page))
}

/// The form cookie and form token a fresh browser gets with the page.
pub fn form_credentials(agent: &ureq::Agent, writer_url: &str) -> Result<(String, String), String> {
    let mut response = agent.get(writer_url).call().map_err(|e| e.to_string())?;
    let cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("shortlink_csrf="))
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
        .ok_or("the form page set no shortlink_csrf cookie")?;
    let page = response
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    let csrf = page
        .split_once("name=\"csrf\" value=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(value, _)| value.to_owned())
        .ok_or("the form has no csrf field")?;
    Ok((cookie, csrf))
}

pub fn get(agent: &ureq::Agent, url: &str) -> Result<(u16, Option<String>), String> {
    let response = agent
        .get(url)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok((response.status().as_u16(), location))
}

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

/// Runs `varnishd -C` on the VCL of `config_toml`, as Varnish would load it.
pub fn compiles(dir: &Path, name: &str, config_toml: &str) -> Result<(), String> {
    let config = dir.join(format!("{name}.toml"));
    fs::write(&config, config_toml).map_err(|e| e.to_string())?;
    let vcl = run_writer(&["vcl", "--config", &config.display().to_string()])?;
    let file = dir.join(format!("{name}.vcl"));
    fs::write(&file, vcl).map_err(|e| e.to_string())?;
    let mut args = test_support::varnishd_args()?;
    args.extend([
        "-C".into(),
        "-n".into(),
        dir.join(format!("{name}-varnish")).display().to_string(),
        "-f".into(),
        file.display().to_string(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    test_support::command_output("varnishd", &args)
        .map(drop)
        .map_err(|e| format!("{name}: {e}"))
}
