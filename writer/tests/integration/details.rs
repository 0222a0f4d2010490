//! A link's start, title, tags and crawlable flag through the command line,
//! an export and an import: each kept, shown and changed the same way as
//! the link's other parts.

use crate::common::{ensure, Suite};
use crate::import_export::{config_with_prefix, shortlink};

/// 2020-01-01T00:00:00Z, a start already past.
const STARTED: u64 = 1_577_836_800;

pub fn command_line_export_and_import_keep_starts_titles_and_tags(
    suite: &Suite,
) -> Result<(), String> {
    let (first, second) = ("t-details-a:", "t-details-b:");
    let (from, into) = (
        config_with_prefix(suite, first)?,
        config_with_prefix(suite, second)?,
    );
    let added = shortlink(
        &from,
        &[
            "add",
            "https://example.org/details",
            "--key",
            "detailsA",
            "--valid-since",
            "2020-01-01T00:00:00Z",
            "--title",
            "Winter sale",
            "--tag",
            "sale",
            "--tag",
            "winter",
            "--crawlable",
        ],
    )?;
    ensure(added.success, || format!("add: {}", added.stderr))?;
    let value: Option<String> = suite
        .redis
        .query(&["HGET", &format!("{first}de"), "tailsA"])?;
    ensure(
        value.as_deref() == Some(&*format!("https://example.org/details ^{STARTED} !c")),
        || format!("stored: {value:?}"),
    )?;
    let shown = shortlink(&from, &["show", "detailsA"])?.stdout;
    for line in [
        "valid_since 2020-01-01T00:00:00Z",
        "title       Winter sale",
        "tags        sale, winter",
        "crawlable   true",
        "created_at  ",
    ] {
        ensure(shown.contains(line), || format!("{line:?} not in: {shown}"))?;
    }
    let edited = shortlink(
        &from,
        &[
            "edit",
            "detailsA",
            "--no-title",
            "--tag",
            "spring",
            "--crawlable",
            "false",
        ],
    )?;
    ensure(edited.success, || format!("edit: {}", edited.stderr))?;
    ensure(
        edited.stdout.contains("tags        spring")
            && !edited.stdout.contains("title")
            && !edited.stdout.contains("crawlable"),
        || format!("edit: {}", edited.stdout),
    )?;
    refusals(&from)?;

    let exported = suite.dir.join("details-export.csv");
    let run = shortlink(&from, &["export", "--output", &exported.to_string_lossy()])?;
    ensure(run.success, || format!("export: {}", run.stderr))?;
    let csv = std::fs::read_to_string(&exported).map_err(|e| e.to_string())?;
    ensure(
        csv.lines().next().is_some_and(|head| {
            head.ends_with(",rules,valid_since,title,tags,crawlable,created_at")
        }) && csv.contains(",2020-01-01T00:00:00Z,,spring,false,"),
        || format!("export: {csv}"),
    )?;
    let imported = shortlink(&into, &["import", &exported.to_string_lossy()])?;
    ensure(
        imported.success && imported.stdout.contains("1 created"),
        || format!("import: {}{}", imported.stdout, imported.stderr),
    )?;
    let copy = shortlink(&into, &["show", "detailsA"])?.stdout;
    ensure(
        copy.contains("valid_since 2020-01-01T00:00:00Z") && copy.contains("tags        spring"),
        || format!("imported: {copy}"),
    )
}

/// A change or a link that breaks the time rules is refused, saying why.
fn refusals(config: &std::path::Path) -> Result<(), String> {
    let refused = shortlink(
        config,
        &["edit", "detailsA", "--expires-at", "2019-06-01T00:00:00Z"],
    )?;
    ensure(!refused.success, || {
        "an expiry in the past is refused".into()
    })?;
    let late = shortlink(
        config,
        &[
            "add",
            "https://example.org/details/late",
            "--valid-since",
            "2031-01-01T00:00:00Z",
            "--expires-at",
            "2030-01-01T00:00:00Z",
        ],
    )?;
    ensure(
        !late.success
            && late
                .stderr
                .contains("valid_since must come before expires_at"),
        || format!("a start after the expiry: {}", late.stderr),
    )?;
    Ok(())
}
