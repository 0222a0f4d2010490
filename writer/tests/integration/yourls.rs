//! YOURLS' `yourls-api.php`: driven by YOURLS' own published Python client
//! (`writer/tests/yourls/`, `yourls` pinned there and installed by `make
//! test`'s install step), and action by action with raw HTTP for what the
//! client does not send: the formats, the timestamp signatures, `update`
//! and `delete`, every refusal.

use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use md5::{Digest, Md5};
use sha2::Sha512;
use shortlink_writer::access::yourls_signature;

use crate::common::{
    api, ensure, run_writer, varnish_get, Suite, ADMIN_TOKEN, BOB_TOKEN, ERIN_TOKEN, YOURLS_TOKEN,
};

const CLIENT_TESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/yourls");
const PYTHON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../target/tools/venv/bin/python"
);
const CLIENT_DEADLINE: Duration = Duration::from_mins(2);
const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

pub fn the_yourls_client_shortens_expands_and_counts(suite: &Suite) -> Result<(), String> {
    let mut python = Command::new(PYTHON)
        .current_dir(CLIENT_TESTS)
        .args(["-m", "unittest", "-v", "client_test"])
        .env("YOURLS_API", format!("{}/yourls-api.php", suite.writer_url))
        .env("SIGNATURE", yourls_signature(YOURLS_TOKEN))
        .env("OTHER_SIGNATURE", yourls_signature(BOB_TOKEN))
        .env("VARNISH", format!("127.0.0.1:{}", suite.varnish.port))
        .env("RUN", run())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{PYTHON}: {e} (make test installs YOURLS' client into it)"))?;
    let started = Instant::now();
    while python.try_wait().map_err(|e| e.to_string())?.is_none() {
        if started.elapsed() > CLIENT_DEADLINE {
            let _ = python.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = python.wait_with_output().map_err(|e| e.to_string())?;
    let report = String::from_utf8_lossy(&output.stderr);
    ensure(
        output.status.success() && report.contains("Ran 2 tests"),
        || {
            format!(
                "YOURLS' client's tests failed ({}):\n{report}",
                output.status
            )
        },
    )
}

/// A word of this run's own.
fn run() -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("r{millis}")
}

/// What `yourls-api.php` answered: status, content type and body.
struct Answered {
    status: u16,
    content_type: String,
    body: String,
}

impl Answered {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// GET `yourls-api.php` with `query`, or POST it as a form body.
fn call(suite: &Suite, query: &[(&str, &str)], post: bool) -> Result<Answered, String> {
    let encoded: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(query)
        .finish();
    let agent = Suite::agent();
    let base = format!("{}/yourls-api.php", suite.writer_url);
    let answer = if post {
        agent
            .post(&base)
            .header("content-type", "application/x-www-form-urlencoded")
            .send(encoded.as_str())
    } else {
        agent.get(&format!("{base}?{encoded}")).call()
    };
    let mut response = answer.map_err(|e| format!("{base}: {e}"))?;
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok(Answered {
        status: response.status().as_u16(),
        content_type,
        body,
    })
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

pub fn every_action_format_and_sign_in_answers_as_yourls_does(suite: &Suite) -> Result<(), String> {
    let signature = yourls_signature(YOURLS_TOKEN);
    // The command line and whoami show it to the token's holder.
    let config = suite.config_file.display().to_string();
    let printed = run_writer(&["yourls-signature", "yo", "--config", &config])?;
    ensure(printed.trim() == signature, || {
        format!("yourls-signature printed {printed:?}")
    })?;
    let whoami = api(suite, "GET", "/api/whoami", Some(YOURLS_TOKEN), None, None)?;
    ensure(
        whoami.body["yourls_signature"] == signature.as_str(),
        || format!("whoami: {}", whoami.body),
    )?;
    let signed = |pairs: &[(&'static str, &str)]| {
        let mut all = pairs.to_vec();
        all.push(("signature", signature.as_str()));
        all.into_iter()
            .map(|(k, v)| (k, v.to_owned()))
            .collect::<Vec<(&str, String)>>()
    };
    let get = |pairs: &[(&'static str, &str)]| {
        let pairs = signed(pairs);
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        call(suite, &borrowed, false)
    };
    // Formats: XML by default, as YOURLS; JSON, JSONP, simple text.
    let xml = get(&[("action", "version")])?;
    ensure(
        xml.status == 200
            && xml.content_type.starts_with("application/xml")
            && xml.body.contains("<root><version>1.10.4</version></root>"),
        || {
            format!(
                "version as XML: {} {} {}",
                xml.status, xml.content_type, xml.body
            )
        },
    )?;
    let simple = get(&[("action", "version"), ("format", "simple")])?;
    ensure(simple.body == "1.10.4", || {
        format!("simple: {}", simple.body)
    })?;
    let jsonp = get(&[
        ("action", "db-stats"),
        ("format", "jsonp"),
        ("callback", "show_1"),
    ])?;
    ensure(
        jsonp.status == 200
            && jsonp.body.starts_with("show_1({")
            && jsonp.body.contains("\"db-stats\""),
        || format!("jsonp: {}", jsonp.body),
    )?;
    let bad_callback = get(&[
        ("action", "version"),
        ("format", "jsonp"),
        ("callback", "alert(1)"),
    ])?;
    ensure(bad_callback.status == 400, || {
        format!("a bad callback: {}", bad_callback.body)
    })?;
    let unknown = get(&[("action", "nothing"), ("format", "json")])?;
    ensure(unknown.status == 400, || {
        format!("an unknown action: {}", unknown.body)
    })?;

    sign_ins(suite, &signature)?;
    make_update_delete(suite, &signature)
}

/// One way of signing in tried on `version`, and the status it gets.
struct SignIn {
    what: &'static str,
    pairs: Vec<(&'static str, String)>,
    status: u16,
}

/// Every way of signing in, and every refusal: 403 alike.
fn sign_ins(suite: &Suite, signature: &str) -> Result<(), String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let at = now.to_string();
    let old = (now - 13 * 3600).to_string();
    let md5 = |text: String| hex(&Md5::digest(text.as_bytes()));
    let sha512 = hex(&Sha512::digest(format!("{signature}{at}").as_bytes()));
    let case = |what, pairs: &[(&'static str, &str)], status| SignIn {
        what,
        pairs: pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
        status,
    };
    let cases = [
        case(
            "md5 of timestamp and signature",
            &[
                ("timestamp", &at),
                ("signature", &md5(format!("{at}{signature}"))),
            ],
            200,
        ),
        case(
            "sha512 of signature and timestamp",
            &[
                ("timestamp", &at),
                ("signature", &sha512),
                ("hash", "sha512"),
            ],
            200,
        ),
        case(
            "name and token",
            &[("username", "yo"), ("password", YOURLS_TOKEN)],
            200,
        ),
        case("nothing", &[], 403),
        case("a wrong signature", &[("signature", &"0".repeat(32))], 403),
        case(
            "a timestamp 13 hours old",
            &[
                ("timestamp", &old),
                ("signature", &md5(format!("{old}{signature}"))),
            ],
            403,
        ),
        case(
            "an unknown hash",
            &[
                ("timestamp", &at),
                ("signature", &sha512),
                ("hash", "crc32b"),
            ],
            403,
        ),
        case(
            "a wrong password",
            &[("username", "yo"), ("password", "wrong")],
            403,
        ),
        case(
            "another's name",
            &[("username", "bob"), ("password", YOURLS_TOKEN)],
            403,
        ),
    ];
    for SignIn {
        what,
        pairs,
        status,
    } in cases
    {
        let mut sent = vec![("action", "version"), ("format", "json")];
        sent.extend(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        let answer = call(suite, &sent, false)?;
        let message = answer.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        ensure(
            answer.status == status
                && (status == 200
                    || message.starts_with("Please log in")
                    || message == "Invalid username or password"),
            || format!("{what}: {} {}", answer.status, answer.body),
        )?;
    }
    // A token limited to another domain makes no link on this one.
    let erin = yourls_signature(ERIN_TOKEN);
    let elsewhere = call(
        suite,
        &[
            ("action", "shorturl"),
            ("format", "json"),
            ("url", "https://example.org/yourls/elsewhere"),
            ("signature", &erin),
        ],
        false,
    )?;
    ensure(elsewhere.status == 403, || {
        format!("another domain's token: {}", elsewhere.body)
    })
}

/// `shorturl` posted as a form, its refusals, then `update` and `delete`,
/// each followed through Varnish.
fn make_update_delete(suite: &Suite, signature: &str) -> Result<(), String> {
    let run = run();
    let url = format!("https://example.org/yourls/{run}/raw");
    let keyword = format!("raw-{run}");
    let post = |pairs: &[(&str, &str)]| {
        let mut all = pairs.to_vec();
        all.extend([("signature", signature), ("format", "json")]);
        call(suite, &all, true)
    };
    let made = post(&[
        ("action", "shorturl"),
        ("url", &url),
        ("keyword", &keyword),
        ("title", "Raw"),
    ])?;
    let body = made.json();
    ensure(
        made.status == 200
            && body["status"] == "success"
            && body["url"]["keyword"] == keyword.as_str()
            && body["title"] == "Raw",
        || format!("shorturl: {} {}", made.status, made.body),
    )?;
    let short_url = body["shorturl"].as_str().unwrap_or_default().to_owned();
    let path = format!("/l/{keyword}");
    let followed = varnish_get(suite, "127.0.0.1", &path, FIREFOX)?;
    ensure(followed.1.as_deref() == Some(url.as_str()), || {
        format!("followed: {followed:?}")
    })?;
    // A URL this token shortened before, with a generated keyword.
    let generated = format!("{url}/generated");
    let first = post(&[("action", "shorturl"), ("url", &generated)])?;
    let first_short = first.json()["shorturl"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for (pairs, code, what) in [
        (
            vec![("action", "shorturl"), ("url", generated.as_str())],
            "error:url",
            "the same URL again",
        ),
        (
            vec![
                ("action", "shorturl"),
                ("url", "https://example.org/yourls/other"),
                ("keyword", keyword.as_str()),
            ],
            "error:keyword",
            "a keyword taken",
        ),
        (
            vec![
                ("action", "shorturl"),
                ("url", "https://example.org/"),
                ("keyword", "no.dots"),
            ],
            "error:keyword",
            "a keyword the key rules refuse",
        ),
        (
            vec![("action", "shorturl"), ("url", "javascript:alert(1)")],
            "error:nourl",
            "a URL that is none",
        ),
    ] {
        let refused = post(&pairs)?;
        let body = refused.json();
        ensure(
            refused.status == 400 && body["code"] == code && body["status"] == "fail",
            || format!("{what}: {} {}", refused.status, refused.body),
        )?;
        if code == "error:url" {
            ensure(
                !first_short.is_empty() && body["shorturl"] == first_short.as_str(),
                || format!("{what}: {}", refused.body),
            )?;
        }
    }
    update_and_delete(suite, signature, &short_url, &keyword, &url)
}

/// `update`, then `delete` by another's token and by an admin's, each
/// followed through Varnish; both again for a link that is not there.
fn update_and_delete(
    suite: &Suite,
    signature: &str,
    short_url: &str,
    keyword: &str,
    url: &str,
) -> Result<(), String> {
    let post = |pairs: &[(&str, &str)]| {
        let mut all = pairs.to_vec();
        all.extend([("signature", signature), ("format", "json")]);
        call(suite, &all, true)
    };
    let path = format!("/l/{keyword}");
    let moved = format!("{url}/moved");
    let updated = post(&[
        ("action", "update"),
        ("shorturl", short_url),
        ("url", &moved),
    ])?;
    ensure(
        updated.status == 200 && updated.json()["message"] == "success: updated",
        || format!("update: {} {}", updated.status, updated.body),
    )?;
    let now = varnish_get(suite, "127.0.0.1", &path, FIREFOX)?;
    ensure(now.1.as_deref() == Some(moved.as_str()), || {
        format!("after update: {now:?}")
    })?;
    // Another's token changes nothing; an admin's may.
    let bob = yourls_signature(BOB_TOKEN);
    let theirs = call(
        suite,
        &[
            ("action", "delete"),
            ("shorturl", keyword),
            ("signature", &bob),
            ("format", "json"),
        ],
        true,
    )?;
    ensure(theirs.status == 403, || {
        format!("another's delete: {} {}", theirs.status, theirs.body)
    })?;
    let admin = yourls_signature(ADMIN_TOKEN);
    let deleted = call(
        suite,
        &[
            ("action", "delete"),
            ("shorturl", keyword),
            ("signature", &admin),
            ("format", "json"),
        ],
        true,
    )?;
    ensure(
        deleted.status == 200 && deleted.json()["message"] == "success: deleted",
        || format!("delete: {} {}", deleted.status, deleted.body),
    )?;
    let gone = varnish_get(suite, "127.0.0.1", &path, FIREFOX)?;
    ensure(gone.0 == 410, || format!("after delete: {gone:?}"))?;
    let again = post(&[("action", "delete"), ("shorturl", keyword)])?;
    ensure(again.status == 404, || {
        format!("delete again: {} {}", again.status, again.body)
    })?;
    let missing = post(&[
        ("action", "update"),
        ("shorturl", &format!("none-{keyword}")),
        ("url", &moved),
    ])?;
    ensure(missing.status == 404, || {
        format!("update of nothing: {} {}", missing.status, missing.body)
    })
}
