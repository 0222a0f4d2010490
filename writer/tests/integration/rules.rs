//! Rules and splits (issue 38) through the writer: the JSON API, the
//! command line, the statistics per target, and the CSV export read back.
//! The stored value is checked in Redis: a link with rules is still one
//! hash field, its rules and split the `~` and `*` words of its value.

use actix_web::test as actix_test;
use serde_json::{json, Value};
use shortlink_writer::links::shortener::Shortener;

use crate::common::{ensure, Suite, TEST_TOKEN};
use crate::import_export::{config_with_prefix, shortlink};

fn in_app<F, Fut>(suite: &Suite, prefix: &str, test: F) -> Result<(), String>
where
    F: FnOnce(Shortener) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    actix_web::rt::System::new().block_on(async { test(suite.shortener(prefix)).await })
}

/// Every field of the links' hashes under `prefix`: `(field, value)`.
fn stored(suite: &Suite, prefix: &str) -> Result<Vec<(String, String)>, String> {
    let mut fields = Vec::new();
    for hash in suite.hashes(prefix)? {
        let pairs: Vec<String> = suite.redis.query(&["HGETALL", &hash])?;
        for pair in pairs.chunks(2) {
            fields.push((format!("{hash}/{}", pair[0]), pair[1].clone()));
        }
    }
    Ok(fields)
}

/// The one stored value of `key` (a split of 2), checked to be the only
/// field that holds it.
fn value_of(suite: &Suite, prefix: &str, key: &str) -> Result<String, String> {
    let value: Option<String> =
        suite
            .redis
            .query(&["HGET", &format!("{prefix}{}", &key[..2]), &key[2..]])?;
    value.ok_or_else(|| format!("{key} is not stored"))
}

fn patch(key: &str, body: &Value) -> actix_test::TestRequest {
    actix_test::TestRequest::patch()
        .uri(&format!("/api/links/{key}"))
        .insert_header(("authorization", format!("Bearer {TEST_TOKEN}")))
        .set_json(body)
}

fn post(body: &Value) -> actix_test::TestRequest {
    actix_test::TestRequest::post()
        .uri("/api/links")
        .insert_header(("authorization", format!("Bearer {TEST_TOKEN}")))
        .set_json(body)
}

/// A link created with rules and a split shows them to its owner, not to
/// anyone; each change replaces its list, `null` or `[]` removes it, and
/// the stored value stays one field with the words.
pub fn api_sets_shows_changes_and_removes_rules(suite: &Suite) -> Result<(), String> {
    let prefix = "t-rules-api:";
    in_app(suite, prefix, |shortener| async move {
        let app = api_app!(shortener);
        let rules = json!([
            { "device": ["ios"], "url": "https://apps.example.com/app/id1" },
            { "country": ["de", "AT"], "language": ["de"],
              "query": { "ref": ["news letter"] },
              "from": "2026-01-01T00:00:00Z", "until": "2027-01-01T00:00:00+01:00",
              "url": "https://example.de/" }
        ]);
        let split = json!([
            { "weight": 50, "url": "https://a.example.org/" },
            { "weight": 50, "url": "https://b.example.org/" }
        ]);
        let (status, body) = call!(
            app,
            post(&json!({ "url": "https://example.org/rules", "rules": rules, "split": split }))
        );
        ensure(status == 201, || format!("{status} {body}"))?;
        let key = body["key"].as_str().unwrap_or_default().to_owned();
        let shown_rules = json!([
            { "device": ["ios"], "url": "https://apps.example.com/app/id1" },
            { "country": ["DE", "AT"], "language": ["de"],
              "query": { "ref": ["news letter"] },
              "from": "2026-01-01T00:00:00Z", "until": "2026-12-31T23:00:00Z",
              "url": "https://example.de/" }
        ]);
        ensure(
            body["rules"] == shown_rules && body["split"] == split,
            || body.to_string(),
        )?;
        let value = value_of(suite, prefix, &key)?;
        ensure(
            value
                == "https://example.org/rules @test \
                    ~device=ios>https://apps.example.com/app/id1 \
                    ~country=DE,AT&lang=de&q.ref=news%20letter&from=1767225600&until=1798758000>https://example.de/ \
                    *50>https://a.example.org/ *50>https://b.example.org/"
                || (value.contains(" ~device=ios>https://apps.example.com/app/id1 ~country=DE,AT")
                    && value.ends_with(" *50>https://a.example.org/ *50>https://b.example.org/")),
            || format!("stored: {value}"),
        )?;
        let fields = stored(suite, prefix)?;
        ensure(fields.len() == 1, || format!("one field: {fields:?}"))?;

        let (status, public) = call!(
            app,
            actix_test::TestRequest::get().uri(&format!("/api/links/{key}"))
        );
        ensure(
            status == 200 && public.get("rules").is_none() && public.get("split").is_none(),
            || format!("public view: {status} {public}"),
        )?;

        // The rules change, the split stays.
        let (status, body) = call!(
            app,
            patch(
                &key,
                &json!({ "rules": [{ "device": ["android", "mobile"], "url": "https://play.example.com/x" }] })
            )
        );
        ensure(status == 200 && body["split"] == split, || {
            format!("{status} {body}")
        })?;
        let value = value_of(suite, prefix, &key)?;
        ensure(
            value.contains(" ~device=android,mobile>https://play.example.com/x *50>")
                && !value.contains("apps.example.com"),
            || format!("after the rules changed: {value}"),
        )?;
        // The split goes (null), the rules stay.
        let (status, body) = call!(app, patch(&key, &json!({ "split": null })));
        ensure(status == 200 && body["split"] == json!([]), || {
            format!("{status} {body}")
        })?;
        let value = value_of(suite, prefix, &key)?;
        ensure(
            value.contains(" ~device=android") && !value.contains(" *"),
            || format!("after the split went: {value}"),
        )?;
        // The rules go ([]): a plain link again.
        let (status, body) = call!(app, patch(&key, &json!({ "rules": [] })));
        ensure(status == 200 && body["rules"] == json!([]), || {
            format!("{status} {body}")
        })?;
        let value = value_of(suite, prefix, &key)?;
        ensure(
            value.starts_with("https://example.org/rules") && !value.contains(['~', '*']),
            || format!("without rules: {value}"),
        )
    })
}

/// Rules and splits a new link is refused for: what each adds to the
/// link, what the error says, and the field it blames.
fn bad_creations(ok: &Value) -> Vec<(Value, &'static str, &'static str)> {
    let too_many: Vec<Value> = (0..17).map(|_| ok.clone()).collect();
    let long_url = format!("https://example.org/{}", "x".repeat(1000));
    let too_long: Vec<Value> = (0..9)
        .map(|_| json!({ "device": ["ios"], "url": long_url }))
        .collect();
    vec![
        (
            json!({ "rules": [ok, { "country": ["XX"], "url": "https://example.de/" }] }),
            "rule 2: condition \"country=XX\": \"XX\" is not an ISO 3166-1 country code",
            "rules",
        ),
        (
            json!({ "split": [{ "weight": 0, "url": "https://a.example.org/" }, { "weight": 0, "url": "https://b.example.org/" }] }),
            "the split's weights add up to 0",
            "split",
        ),
        (
            json!({ "split": [{ "weight": 1001, "url": "https://a.example.org/" }] }),
            "split target 1: weight",
            "split",
        ),
        (
            json!({ "rules": [ok, ok, { "device": ["ios"], "url": "http://localhost/app" }] }),
            "rule 3: target \"http://localhost/app\": the URL's host localhost is a loopback name",
            "rules",
        ),
        (
            json!({ "split": [{ "weight": 1, "url": "javascript:alert(1)" }] }),
            "split target 1: target \"javascript:alert(1)\": only http:// and https://",
            "split",
        ),
        (
            json!({ "rules": [{ "url": "https://example.de/" }] }),
            "rule 1: a rule needs at least one condition",
            "rules",
        ),
        (
            json!({ "rules": [ok, { "device": ["fridge"], "url": "https://example.de/" }] }),
            "rule 2: condition \"device=fridge\"",
            "rules",
        ),
        (
            json!({ "rules": [{ "from": "tomorrow", "url": "https://example.de/" }] }),
            "rule 1: from \"tomorrow\" is not an RFC 3339 time",
            "rules",
        ),
        (
            json!({ "rules": [{ "colour": ["blue"], "url": "https://example.de/" }] }),
            "rule 1: unknown field `colour`",
            "rules",
        ),
        (
            json!({ "rules": [{ "from": "2027-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z",
                                "url": "https://example.de/" }] }),
            "rule 1: from 2027-01-01T00:00:00Z is not before until 2026-01-01T00:00:00Z",
            "rules",
        ),
        (
            json!({ "rules": too_many }),
            "a link has at most 16 rules",
            "rules",
        ),
        (
            json!({ "rules": too_long }),
            "at most 8192 are kept with a link",
            "rules",
        ),
    ]
}

/// Each bad rule or split is 422 `bad-rule` naming it, and stores
/// nothing: neither a new link nor a change to one.
pub fn bad_rules_are_refused_naming_the_rule(suite: &Suite) -> Result<(), String> {
    let prefix = "t-rules-bad:";
    in_app(suite, prefix, |shortener| async move {
        let app = api_app!(shortener);
        let ok = json!({ "device": ["ios"], "url": "https://apps.example.com/" });
        let cases = bad_creations(&ok);
        for (extra, said, field) in &cases {
            let mut body = json!({ "url": "https://example.org/rules/bad" });
            for (name, value) in extra.as_object().into_iter().flatten() {
                body[name] = value.clone();
            }
            let (status, answer) = call!(app, post(&body));
            ensure(
                status == 422
                    && answer["code"] == "bad-rule"
                    && answer["field"] == *field
                    && answer["error"].as_str().is_some_and(|e| e.contains(said)),
                || format!("{extra}: {status} {answer}"),
            )?;
        }
        let fields = stored(suite, prefix)?;
        ensure(fields.is_empty(), || {
            format!("refused links stored: {fields:?}")
        })?;

        // A short link as a target is a loop, as for a link's own URL.
        let (status, body) = call!(
            app,
            post(&json!({ "url": "https://example.org/rules/kept", "rules": [ok] }))
        );
        ensure(status == 201, || format!("{status} {body}"))?;
        let key = body["key"].as_str().unwrap_or_default().to_owned();
        let short_url = body["short_url"].as_str().unwrap_or_default().to_owned();
        let before = value_of(suite, prefix, &key)?;
        for (change, said) in [
            (
                json!({ "rules": [ok, { "device": ["ios"], "url": short_url }] }),
                "points at this shortener itself",
            ),
            (
                json!({ "split": [{ "weight": 5, "url": "ftp://example.org/" }] }),
                "split target 1: target \"ftp://example.org/\"",
            ),
            (json!({ "rules": "ios" }), "rules must be a list"),
        ] {
            let (status, answer) = call!(app, patch(&key, &change));
            ensure(
                status == 422
                    && answer["code"] == "bad-rule"
                    && answer["error"].as_str().is_some_and(|e| e.contains(said)),
                || format!("{change}: {status} {answer}"),
            )?;
        }
        let after = value_of(suite, prefix, &key)?;
        ensure(before == after, || {
            format!("a refused change stored: {after}")
        })
    })
}

/// The statistics name each target's clicks as the edge counts them
/// (`target:r1` ... in the link's details hash), with its URL now.
pub fn stats_report_clicks_per_target(suite: &Suite) -> Result<(), String> {
    let prefix = "t-rules-stats:";
    in_app(suite, prefix, |shortener| async move {
        let app = api_app!(shortener);
        let (status, body) = call!(
            app,
            post(&json!({
                "url": "https://example.org/rules/stats",
                "rules": [{ "device": ["ios"], "url": "https://apps.example.com/" }],
                "split": [{ "weight": 1, "url": "https://a.example.org/" },
                          { "weight": 3, "url": "https://b.example.org/" }]
            }))
        );
        ensure(status == 201, || format!("{status} {body}"))?;
        let key = body["key"].as_str().unwrap_or_default().to_owned();
        // The storage contract the VMOD counts by.
        let details = format!("{prefix}details:{key}");
        for (field, clicks) in [("target:r1", "12"), ("target:s2", "3"), ("target:r4", "1")] {
            suite
                .redis
                .query::<i64>(&["HINCRBY", &details, field, clicks])?;
        }
        let (status, answered) = call!(
            app,
            actix_test::TestRequest::get()
                .uri(&format!("/api/links/{key}/stats"))
                .insert_header(("authorization", format!("Bearer {TEST_TOKEN}")))
        );
        let expected = json!([
            { "target": "r1", "kind": "rule", "number": 1, "url": "https://apps.example.com/", "clicks": 12 },
            { "target": "s1", "kind": "split", "number": 1, "url": "https://a.example.org/", "clicks": 0 },
            { "target": "s2", "kind": "split", "number": 2, "url": "https://b.example.org/", "clicks": 3 },
            { "target": "r4", "kind": "rule", "number": 4, "url": null, "clicks": 1 }
        ]);
        ensure(status == 200 && answered["targets"] == expected, || {
            format!("{status} {}", answered["targets"])
        })?;
        // Without a split, the link's own URL is a target too.
        let (status, _) = call!(app, patch(&key, &json!({ "split": null })));
        ensure(status == 200, || format!("dropping the split: {status}"))?;
        suite
            .redis
            .query::<i64>(&["HINCRBY", &details, "target:url", "7"])?;
        let response = actix_test::call_service(
            &app,
            actix_test::TestRequest::get()
                .uri(&format!("/api/links/{key}/stats/report"))
                .insert_header(("authorization", format!("Bearer {TEST_TOKEN}")))
                .to_request(),
        )
        .await;
        let report = String::from_utf8_lossy(&actix_test::read_body(response).await).into_owned();
        ensure(
            report.contains("Clicks per target")
                && report.contains("rule 1: https://apps.example.com/")
                && report.contains("own URL: https://example.org/rules/stats")
                && report.contains("split target 2 (removed since)"),
            || format!("report: {report}"),
        )
    })
}

/// `shortlink add --rule --split`, `show`, `edit --no-rules --no-split`,
/// and a bad rule named on standard error with nothing stored.
pub fn command_line_adds_shows_and_removes_rules(suite: &Suite) -> Result<(), String> {
    let prefix = "t-rules-cli:";
    let config = config_with_prefix(suite, prefix)?;
    let added = shortlink(
        &config,
        &[
            "add",
            "https://example.org/rules/cli",
            "--rule",
            "device=ios>https://apps.example.com/x",
            "--rule",
            "country=DE&lang=de>https://example.de/",
            "--split",
            "50>https://a.example.org/",
            "--split",
            "*50>https://b.example.org/",
        ],
    )?;
    ensure(added.success, || format!("add: {}", added.stderr))?;
    let key = added
        .stdout
        .trim()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let value = value_of(suite, prefix, &key)?;
    ensure(
        value
            == "https://example.org/rules/cli ~device=ios>https://apps.example.com/x \
                ~country=DE&lang=de>https://example.de/ *50>https://a.example.org/ \
                *50>https://b.example.org/",
        || format!("stored: {value}"),
    )?;
    let shown = shortlink(&config, &["show", &key])?;
    ensure(
        shown
            .stdout
            .contains("rule 1      device=ios>https://apps.example.com/x")
            && shown
                .stdout
                .contains("rule 2      country=DE&lang=de>https://example.de/")
            && shown
                .stdout
                .contains("split 2     50>https://b.example.org/"),
        || format!("show: {}", shown.stdout),
    )?;
    let listed = shortlink(&config, &["list"])?;
    ensure(listed.stdout.contains("2 rules, 2 split"), || {
        format!("list: {}", listed.stdout)
    })?;
    let edited = shortlink(
        &config,
        &[
            "edit",
            &key,
            "--rule",
            "q.ref=mail>https://example.org/mail",
            "--no-split",
        ],
    )?;
    ensure(edited.success, || format!("edit: {}", edited.stderr))?;
    let value = value_of(suite, prefix, &key)?;
    ensure(
        value == "https://example.org/rules/cli ~q.ref=mail>https://example.org/mail",
        || format!("after edit: {value}"),
    )?;
    let removed = shortlink(&config, &["edit", &key, "--no-rules"])?;
    ensure(removed.success, || {
        format!("edit --no-rules: {}", removed.stderr)
    })?;
    let value = value_of(suite, prefix, &key)?;
    ensure(value == "https://example.org/rules/cli", || {
        format!("after --no-rules: {value}")
    })?;
    let refused = shortlink(
        &config,
        &[
            "add",
            "https://example.org/rules/cli/bad",
            "--rule",
            "device=ios>https://apps.example.com/x",
            "--rule",
            "country=XX>https://example.de/",
        ],
    )?;
    ensure(
        !refused.success && refused.stderr.contains("rule 2: condition \"country=XX\""),
        || format!("a bad rule: {}", refused.stderr),
    )?;
    let fields = stored(suite, prefix)?;
    ensure(fields.len() == 1, || {
        format!("the refused link stored: {fields:?}")
    })
}

/// The CSV export carries the rules as their stored words, and an import
/// of it stores the same value in another store.
pub fn export_and_import_keep_rules(suite: &Suite) -> Result<(), String> {
    let (first, second) = ("t-rules-ex-a:", "t-rules-ex-b:");
    let (from, into) = (
        config_with_prefix(suite, first)?,
        config_with_prefix(suite, second)?,
    );
    let added = shortlink(
        &from,
        &[
            "add",
            "https://example.org/rules/export",
            "--key",
            "rulesX",
            "--rule",
            "device=ios,android&q.ref=a%2Cb>https://apps.example.com/x",
            "--split",
            "3>https://a.example.org/?a=1,2",
            "--split",
            "0>https://b.example.org/",
        ],
    )?;
    ensure(added.success, || format!("add: {}", added.stderr))?;
    let exported = suite.dir.join("rules-export.csv");
    let run = shortlink(&from, &["export", "--output", &exported.to_string_lossy()])?;
    ensure(run.success, || format!("export: {}", run.stderr))?;
    let csv = std::fs::read_to_string(&exported).map_err(|e| e.to_string())?;
    ensure(
        csv.lines()
            .next()
            .is_some_and(|head| head.contains(",rules,"))
            && csv.contains(
                "\"~device=ios,android&q.ref=a%2Cb>https://apps.example.com/x \
                 *3>https://a.example.org/?a=1,2 *0>https://b.example.org/\"",
            ),
        || format!("export: {csv}"),
    )?;
    let imported = shortlink(&into, &["import", &exported.to_string_lossy()])?;
    ensure(
        imported.success
            && imported
                .stdout
                .contains("1 created, 0 already there, 0 refused"),
        || format!("import: {}{}", imported.stdout, imported.stderr),
    )?;
    let (a, b) = (
        value_of(suite, first, "rulesX")?,
        value_of(suite, second, "rulesX")?,
    );
    ensure(
        a == b && a.contains(" ~device=ios,android&q.ref=a%2Cb>"),
        || format!("{a}\n{b}"),
    )?;
    let jsonl = shortlink(&from, &["export", "--format", "jsonl"])?;
    let line: Value = serde_json::from_str(jsonl.stdout.trim()).map_err(|e| e.to_string())?;
    ensure(
        line["rules"][0]["query"]["ref"] == json!(["a,b"]) && line["split"][1]["weight"] == 0,
        || format!("jsonl: {line}"),
    )
}
