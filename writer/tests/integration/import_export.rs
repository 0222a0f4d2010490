//! `shortlink import` of this writer's and other shorteners' CSV exports,
//! and the export (`shortlink export`, `GET /api/links/export`) that
//! streams every link the caller may see.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::common::{
    api, create, ensure, Suite, ADMIN_TOKEN, ALICE_TOKEN, CAROL_TOKEN, GO_ALIAS, GO_DOMAIN, WRITER,
};

/// What `shortlink` printed, and whether it succeeded.
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

pub fn shortlink(config: &Path, args: &[&str]) -> Result<Run, String> {
    let output = Command::new(WRITER)
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .map_err(|e| format!("{WRITER}: {e}"))?;
    Ok(Run {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// The suite's configuration with the links under `prefix` instead.
pub fn config_with_prefix(suite: &Suite, prefix: &str) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(&suite.config_file).map_err(|e| e.to_string())?;
    let text = text.replacen(
        "[redis]\n",
        &format!("[redis]\nhash_prefix = \"{prefix}\"\n"),
        1,
    );
    let file = suite
        .dir
        .join(format!("shortlink-{}.toml", prefix.trim_end_matches(':')));
    std::fs::write(&file, text).map_err(|e| e.to_string())?;
    Ok(file)
}

fn write(suite: &Suite, name: &str, text: &str) -> Result<PathBuf, String> {
    let file = suite.dir.join(name);
    std::fs::write(&file, text).map_err(|e| e.to_string())?;
    Ok(file)
}

/// What `key` holds, through the API: its URL, or the status.
fn url_of(suite: &Suite, key: &str) -> Result<Result<String, u16>, String> {
    let answer = api(suite, "GET", &format!("/api/links/{key}"), None, None, None)?;
    Ok(match answer.status {
        200 => Ok(answer.body["url"].as_str().unwrap_or_default().to_owned()),
        status => Err(status),
    })
}

/// A small file in each format, the links it must leave stored, and the
/// summary its import prints.
type ToolExport = (
    &'static str,
    &'static str,
    Vec<(&'static str, &'static str)>,
    &'static str,
);

fn tool_exports() -> [ToolExport; 4] {
    [
        (
            "csv",
            "url,key,expires_at,expired_url,max_clicks\n\
             https://example.org/import/csv/1,impCsv1,2099-01-01T00:00:00Z,https://example.org/,7\n\
             https://example.org/import/csv/2,,,,\n",
            vec![("impCsv1", "https://example.org/import/csv/1")],
            "2 created, 0 already there, 0 refused",
        ),
        (
            "shlink",
            // Shlink's short URL export (web client and `short-url:list`).
            "createdAt,domain,shortCode,shortUrl,longUrl,title,tags,visits\n\
             2024-03-01T10:00:00+00:00,,impShl1,https://s.test/impShl1,https://example.org/import/shlink/1,One,\"a,b\",3\n\
             2024-03-02T10:00:00+00:00,go.test,impShl2,https://go.test/impShl2,https://example.org/import/shlink/2,,,0\n",
            // impShl2 keeps its domain: see `import_keeps_shlinks_domain`.
            vec![("impShl1", "https://example.org/import/shlink/1")],
            "2 created, 0 already there, 0 refused",
        ),
        (
            "yourls",
            // YOURLS's `yourls_url` table, as export plugins write it.
            "keyword,url,title,timestamp,ip,clicks\n\
             impYrl1,https://example.org/import/yourls/1,One,2024-03-01 10:00:00,192.0.2.1,12\n\
             impTaken,https://example.org/import/yourls/other,Taken,2024-03-01 10:00:00,192.0.2.1,0\n\
             a,https://example.org/import/yourls/short,Short,2024-03-01 10:00:00,192.0.2.1,0\n\
             impYrl4,https://example.org/import/yourls/4,Four,2024-03-01 10:00:00,192.0.2.1,1\n",
            vec![
                ("impYrl1", "https://example.org/import/yourls/1"),
                ("impTaken", "https://example.org/import/first"),
                ("impYrl4", "https://example.org/import/yourls/4"),
            ],
            "2 created, 0 already there, 2 refused (1 of them conflicts",
        ),
        (
            "bitly",
            // Bitly's link export: the bitlink's path is the code.
            "id,link,long_url,title,created_at,custom_bitlinks,tags\n\
             bit.ly/impBit1,https://bit.ly/impBit1,https://example.org/import/bitly/1,One,2024-03-01T10:00:00+0000,,\n\
             bit.ly/impBit2,https://bit.ly/impBit2,https://example.org/import/bitly/2,Two,2024-03-02T10:00:00+0000,,\n",
            vec![
                ("impBit1", "https://example.org/import/bitly/1"),
                ("impBit2", "https://example.org/import/bitly/2"),
            ],
            "2 created, 0 already there, 0 refused",
        ),
    ]
}

/// A file in each format, written after the tool's documented export
/// columns, keeps its short codes as keys. A code that holds another URL
/// is reported as a conflict, a code these keys cannot be as refused, and
/// the summary counts them; the import then exits 1.
pub fn import_reads_each_tools_export(suite: &Suite) -> Result<(), String> {
    create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/import/first", "key": "impTaken" }),
    )?;
    for (format, text, stored, summary) in tool_exports() {
        let file = write(suite, &format!("import-{format}.csv"), text)?;
        let file_arg = file.to_string_lossy();
        let run = shortlink(
            &suite.config_file,
            &["import", &file_arg, "--format", format],
        )?;
        ensure(run.stdout.contains(summary), || {
            format!("{format}: {}\n{}", run.stdout, run.stderr)
        })?;
        for (key, url) in stored {
            ensure(url_of(suite, key)? == Ok(url.to_owned()), || {
                format!("{format}: {key} does not hold {url}")
            })?;
        }
        if format == "yourls" {
            ensure(
                !run.success
                    && run.stderr.contains("line 3: conflict (409)")
                    && run.stderr.contains("line 4: refused (422)"),
                || format!("yourls: {}", run.stderr),
            )?;
        } else {
            ensure(run.success, || format!("{format}: {}", run.stderr))?;
        }
    }
    let shown = api(
        suite,
        "GET",
        "/api/links/impCsv1",
        Some(ADMIN_TOKEN),
        None,
        None,
    )?;
    ensure(
        shown.body["expires_at"] == "2099-01-01T00:00:00Z"
            && shown.body["max_clicks"] == 7
            && shown.body["expired_url"] == "https://example.org/",
        || format!("impCsv1 stored as {}", shown.body),
    )?;
    // A second import of the same file changes nothing.
    let again = shortlink(
        &suite.config_file,
        &[
            "import",
            &suite.dir.join("import-bitly.csv").to_string_lossy(),
            "--format",
            "bitly",
        ],
    )?;
    ensure(
        again.success
            && again
                .stdout
                .contains("0 created, 2 already there, 0 refused"),
        || format!("again: {}{}", again.stdout, again.stderr),
    )?;
    // A file without the tool's URL column is refused whole.
    let wrong = write(
        suite,
        "import-wrong.csv",
        "code,target\nx,https://example.org/\n",
    )?;
    let run = shortlink(
        &suite.config_file,
        &["import", &wrong.to_string_lossy(), "--format", "shlink"],
    )?;
    ensure(!run.success && run.stderr.contains("longUrl"), || {
        format!("wrong columns: {}", run.stderr)
    })
}

/// The body of `GET /api/links/export` with `token`, and whether it came
/// in chunks (streamed) rather than with a length.
pub fn export(suite: &Suite, token: &str, query: &str) -> Result<(u16, bool, String), String> {
    let url = format!("{}/api/links/export{query}", suite.writer_url);
    let mut response = Suite::agent()
        .get(&url)
        .header("authorization", format!("Bearer {token}"))
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let chunked = response
        .headers()
        .get("transfer-encoding")
        .is_some_and(|v| v.as_bytes() == b"chunked")
        && response.headers().get("content-length").is_none();
    let body = response
        .body_mut()
        .with_config()
        .limit(256 * 1024 * 1024)
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok((response.status().as_u16(), chunked, body))
}

/// A token holder's export holds its links and no one else's, deleted ones
/// left out, with their lifecycle fields; an admin's holds every link, one
/// written by hand too. It comes streamed, as JSON lines or CSV.
pub fn export_streams_every_link_the_caller_may_see(suite: &Suite) -> Result<(), String> {
    let mine = create(
        suite,
        Some(CAROL_TOKEN),
        &json!({ "url": "https://example.org/export/carol/1", "key": "expCarol1",
                 "expires_at": "2099-06-01T00:00:00Z", "max_clicks": 9 }),
    )?;
    create(
        suite,
        Some(CAROL_TOKEN),
        &json!({ "url": "https://example.org/export/carol/gone", "key": "expCarolGone" }),
    )?;
    let deleted = api(
        suite,
        "DELETE",
        "/api/links/expCarolGone",
        Some(CAROL_TOKEN),
        None,
        None,
    )?;
    ensure(deleted.status == 204, || {
        format!("delete: {}", deleted.status)
    })?;
    create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/export/alice/1", "key": "expAlice1" }),
    )?;
    suite.redis.query::<i64>(&[
        "HSET",
        "short:ex",
        "pHand",
        "https://example.org/export/by-hand",
    ])?;

    let (status, chunked, body) = export(suite, CAROL_TOKEN, "?format=jsonl")?;
    ensure(status == 200 && chunked, || {
        format!("carol's export: {status}, chunked {chunked}")
    })?;
    let links: Vec<Value> = body
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{e}: {body}"))?;
    let keys: BTreeSet<&str> = links.iter().filter_map(|l| l["key"].as_str()).collect();
    ensure(
        keys.contains(mine.as_str())
            && !keys.contains("expCarolGone")
            && !keys.contains("expAlice1")
            && !keys.contains("expHand")
            && links.iter().all(|l| l["owner"] == "carol"),
        || format!("carol's export: {keys:?}"),
    )?;
    let bob1 = links
        .iter()
        .find(|l| l["key"] == "expCarol1")
        .ok_or("no expCarol1")?;
    ensure(
        bob1["expires_at"] == "2099-06-01T00:00:00Z"
            && bob1["max_clicks"] == 9
            && bob1["expired"] == false
            && bob1["short_url"]
                .as_str()
                .is_some_and(|s| s.ends_with("/l/expCarol1")),
        || format!("expCarol1 exported as {bob1}"),
    )?;

    let (status, chunked, csv) = export(suite, ADMIN_TOKEN, "")?;
    ensure(status == 200 && chunked, || {
        format!("admin export: {status}")
    })?;
    let mut csv_rows = csv.lines();
    ensure(
        csv_rows.next() == Some(&*shortlink_writer::links::export::CSV_COLUMNS.join(",")),
        || format!("header: {:?}", csv.lines().next()),
    )?;
    let keys: BTreeSet<&str> = csv_rows.filter_map(|l| l.split(',').nth(1)).collect();
    ensure(
        ["expCarol1", "expAlice1", "expHand"]
            .iter()
            .all(|k| keys.contains(k))
            && !keys.contains("expCarolGone"),
        || {
            format!(
                "the admin export lacks a link or holds the deleted one: {} keys",
                keys.len()
            )
        },
    )?;

    let (status, _, body) = export(suite, CAROL_TOKEN, "?owner=alice")?;
    ensure(status == 403, || {
        format!("carol exporting alice's: {status} {body}")
    })?;
    let (status, _, body) = export(suite, CAROL_TOKEN, "?format=xml")?;
    ensure(status == 422, || format!("format=xml: {status} {body}"))?;
    let answer = api(suite, "GET", "/api/links/export", None, None, None)?;
    ensure(answer.status == 401, || {
        format!("without a token: {}", answer.status)
    })
}

/// `shortlink export` writes the CSV `shortlink import` reads: a store's
/// export imported into another gives the same links, lifecycle fields
/// and all, and that one's export is the same file.
pub fn export_imports_back_into_another_store(suite: &Suite) -> Result<(), String> {
    let first = config_with_prefix(suite, "t-export-a:")?;
    let second = config_with_prefix(suite, "t-export-b:")?;
    let links = write(
        suite,
        "export-seed.csv",
        "url,key,expires_at,expired_url,max_clicks,owner\n\
         https://example.org/round/1,round1,2099-01-01T00:00:00Z,https://example.org/after,,\n\
         https://example.org/round/2,round2,,,25,alice\n\
         \"https://example.org/round/3?q=a,b\",,,,,\n\
         https://example.org/round/gone,roundGone,,,,\n",
    )?;
    let seeded = shortlink(&first, &["import", &links.to_string_lossy()])?;
    ensure(seeded.success, || format!("seed: {}", seeded.stderr))?;
    let deleted = shortlink(&first, &["delete", "roundGone"])?;
    ensure(deleted.success, || format!("delete: {}", deleted.stderr))?;
    suite.redis.query::<i64>(&[
        "HSET",
        "t-export-a:ro",
        "undHand",
        "https://example.org/round/by-hand",
    ])?;

    let exported = suite.dir.join("export-a.csv");
    let run = shortlink(&first, &["export", "--output", &exported.to_string_lossy()])?;
    ensure(
        run.success && run.stderr.contains("exported 4 links"),
        || format!("export a: {}{}", run.stdout, run.stderr),
    )?;
    let imported = shortlink(&second, &["import", &exported.to_string_lossy()])?;
    ensure(
        imported.success
            && imported
                .stdout
                .contains("4 created, 0 already there, 0 refused"),
        || format!("import b: {}{}", imported.stdout, imported.stderr),
    )?;
    // The same file again: every link is there already, the one with a
    // click limit (never shared by two rows) included.
    let twice = shortlink(&second, &["import", &exported.to_string_lossy()])?;
    ensure(
        twice.success
            && twice
                .stdout
                .contains("0 created, 4 already there, 0 refused"),
        || format!("import b again: {}{}", twice.stdout, twice.stderr),
    )?;
    let again = shortlink(&second, &["export"])?;
    ensure(again.success, || format!("export b: {}", again.stderr))?;
    let sorted = |text: &str| {
        let mut rows: Vec<String> = text.lines().map(str::to_owned).collect();
        rows.sort();
        rows
    };
    let a = sorted(&std::fs::read_to_string(&exported).map_err(|e| e.to_string())?);
    let b = sorted(&again.stdout);
    ensure(a == b && a.len() == 5, || {
        format!("the two exports differ:\n{a:#?}\n{b:#?}")
    })?;
    ensure(
        a.iter().any(|l| l.starts_with("https://example.org/round/1,round1,2099-01-01T00:00:00Z,https://example.org/after,,"))
            && a.iter().any(|l| l.starts_with("https://example.org/round/2,round2,,,25,")
                && l.contains(",false,alice,,,,,,,false,"))
            && a.iter().any(|l| l.starts_with("\"https://example.org/round/3?q=a,b\","))
            && a.iter().any(|l| l.starts_with("https://example.org/round/by-hand,round"))
            && !a.iter().any(|l| l.contains("roundGone")),
        || format!("{a:#?}"),
    )?;
    let jsonl = shortlink(&second, &["export", "--format", "jsonl"])?;
    let count = jsonl.stdout.lines().filter(|l| l.starts_with('{')).count();
    ensure(jsonl.success && count == 4, || {
        format!("jsonl: {count} lines: {}", jsonl.stdout)
    })
}

/// A hash past Redis's compact encoding takes several `HSCAN` pages: the
/// export gives each of its links once, and leaves out a field written by
/// hand that is no key.
pub fn export_reads_a_hash_past_one_page(suite: &Suite) -> Result<(), String> {
    let config = config_with_prefix(suite, "t-export-c:")?;
    let mut command: Vec<String> = vec!["HSET".into(), "t-export-c:Bg".into()];
    for n in 0..1500 {
        command.push(format!("f{n:04}"));
        command.push(format!("https://example.org/big/{n}"));
    }
    command.push("no key".into());
    command.push("https://example.org/big/junk".into());
    let args: Vec<&str> = command.iter().map(String::as_str).collect();
    suite.redis.query::<i64>(&args)?;
    let encoding: String = suite
        .redis
        .query(&["OBJECT", "ENCODING", "t-export-c:Bg"])?;
    ensure(encoding == "hashtable", || {
        format!("the hash is {encoding}, not past the compact encoding")
    })?;
    let run = shortlink(&config, &["export"])?;
    ensure(run.success, || format!("export: {}", run.stderr))?;
    let keys: Vec<&str> = run
        .stdout
        .lines()
        .skip(1)
        .filter_map(|line| line.split(',').nth(1))
        .collect();
    let unique: BTreeSet<&str> = keys.iter().copied().collect();
    ensure(keys.len() == 1500 && unique.len() == 1500, || {
        format!("{} rows, {} keys", keys.len(), unique.len())
    })
}

/// Shlink's domain column is kept: a row of a domain served here goes into
/// that domain's key space, a row without one (or `DEFAULT`) into the
/// default domain's, and a domain not served here is refused by name.
pub fn import_keeps_shlinks_domain(suite: &Suite) -> Result<(), String> {
    let file = write(
        suite,
        "import-shlink-domains.csv",
        "createdAt,domain,shortCode,shortUrl,longUrl,title,tags,visits\n\
         2024-03-01T10:00:00+00:00,go.test,impDom1,https://go.test/impDom1,https://example.org/import/domain/go,,,0\n\
         2024-03-01T10:00:00+00:00,,impDom2,https://s.test/impDom2,https://example.org/import/domain/default,,,0\n\
         2024-03-01T10:00:00+00:00,DEFAULT,impDom3,https://s.test/impDom3,https://example.org/import/domain/default3,,,0\n\
         2024-03-01T10:00:00+00:00,elsewhere.test,impDom4,https://elsewhere.test/impDom4,https://example.org/import/domain/x,,,0\n",
    )?;
    let run = shortlink(
        &suite.config_file,
        &["import", &file.to_string_lossy(), "--format", "shlink"],
    )?;
    ensure(
        !run.success
            && run.stdout.contains("3 created, 0 already there, 1 refused")
            && run.stderr.contains("line 5: refused (422)")
            && run.stderr.contains("elsewhere.test"),
        || format!("{}{}", run.stdout, run.stderr),
    )?;
    for (hash, field, url) in [
        (
            "short:go.test:im",
            "pDom1",
            "https://example.org/import/domain/go",
        ),
        (
            "short:im",
            "pDom2",
            "https://example.org/import/domain/default",
        ),
        (
            "short:im",
            "pDom3",
            "https://example.org/import/domain/default3",
        ),
    ] {
        let value: Option<String> = suite.redis.query(&["HGET", hash, field])?;
        ensure(value.as_deref() == Some(url), || {
            format!("{hash} {field}: {value:?}")
        })?;
    }
    let elsewhere: Vec<String> = suite.redis.query(&["KEYS", "short:elsewhere.test:*"])?;
    let absent: Option<String> = suite.redis.query(&["HGET", "short:im", "pDom1"])?;
    ensure(elsewhere.is_empty() && absent.is_none(), || {
        format!("{elsewhere:?} {absent:?}")
    })
}

/// An export carries each link's domain (empty for the default one) and
/// its query forwarding, `--domain` and `?domain=` keep one domain, and
/// the file imports back with each link on its domain.
pub fn export_carries_and_filters_by_domain(suite: &Suite) -> Result<(), String> {
    let first = config_with_prefix(suite, "t-exdom-a:")?;
    let second = config_with_prefix(suite, "t-exdom-b:")?;
    let first_arg = first.to_string_lossy().into_owned();
    for args in [
        vec!["add", "https://example.org/exdom/default", "--key", "exd1"],
        vec![
            "add",
            "https://example.org/exdom/go",
            "--key",
            "exd1",
            "--domain",
            GO_ALIAS,
            "--forward-query",
        ],
    ] {
        let run = shortlink(&first, &args)?;
        ensure(run.success, || format!("{args:?}: {}", run.stderr))?;
    }
    let every = shortlink(&first, &["export"])?;
    let rows: Vec<&str> = every.stdout.lines().collect();
    ensure(
        rows.first()
            .is_some_and(|head| head.contains(",owner,domain,forward_query,rules,"))
            && rows.iter().any(|row| {
                row.starts_with(&format!(
                    "https://example.org/exdom/default,exd1,,,,{}l/exd1,false,,,,,",
                    suite.varnish.base_url() + "/"
                ))
            })
            && rows.iter().any(|row| {
                row.starts_with("https://example.org/exdom/go,exd1,")
                    && row.contains(",go.test,true,")
            }),
        || format!("export: {rows:#?}"),
    )?;
    let go = shortlink(&first, &["export", "--domain", GO_DOMAIN])?;
    let go_rows: Vec<&str> = go.stdout.lines().skip(1).collect();
    ensure(
        go_rows.len() == 1 && go_rows[0].contains("/exdom/go,"),
        || format!("--domain: {go_rows:?}"),
    )?;
    let file = write(suite, "export-domains.csv", &every.stdout)?;
    let imported = shortlink(&second, &["import", &file.to_string_lossy()])?;
    ensure(
        imported.success && imported.stdout.contains("2 created"),
        || format!("import: {}{}", imported.stdout, imported.stderr),
    )?;
    let default: Option<String> = suite.redis.query(&["HGET", "t-exdom-b:ex", "d1"])?;
    let on_go: Option<String> = suite.redis.query(&["HGET", "t-exdom-b:go.test:ex", "d1"])?;
    ensure(
        default.as_deref() == Some("https://example.org/exdom/default")
            && on_go.as_deref() == Some("https://example.org/exdom/go ?+"),
        || format!("imported: {default:?} {on_go:?} (from {first_arg})"),
    )?;
    // Through the API: the suite's own links of the second domain alone.
    let rows = crate::security::exported_rows(suite, ADMIN_TOKEN, "?domain=go.test")?;
    ensure(
        !rows.is_empty() && rows.iter().all(|row| row.contains(",go.test,")),
        || format!("?domain=: {rows:?}"),
    )
}
