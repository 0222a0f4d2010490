//! `shortlink import` and `shortlink export`: many links at once, from and
//! to a file.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use futures_util::StreamExt as _;
use indicatif::{ProgressBar, ProgressStyle};
use shortlink_core::Owner;
use shortlink_writer::access::{Caller, Identity};
use shortlink_writer::links::bulk::{create_all, CsvRows, Format, RowOutcome, Summary};
use shortlink_writer::links::export::ExportFormat;
use shortlink_writer::links::shortener::Shortener;

use super::operator;

/// Rows read ahead of the inserts: enough to keep them all busy.
const IMPORT_READ_AHEAD: usize = 256;

/// Whose links an import records (`--owner`), and on which short domain
/// the rows naming none go (`--domain`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ImportTo<'a> {
    pub owner: Option<&'a str>,
    pub domain: Option<&'a str>,
}

/// Which links an export writes: one owner's, one domain's, or all.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExportOf<'a> {
    pub owner: Option<&'a str>,
    pub domain: Option<&'a str>,
}

/// Creates the links of `file`, showing progress on a terminal. The file
/// is read on a thread of its own, so that a slow pipe never holds up the
/// inserts in flight.
pub async fn import(
    shortener: &Shortener,
    file: &Path,
    format: Format,
    into: ImportTo<'_>,
) -> Result<(), String> {
    // Rows name their owner in the same way: the operator acts for no one.
    let caller = match into.owner {
        Some(name) => Caller::TokenHolder(Identity::admin(
            Owner::try_from(name).map_err(|e| format!("--owner: {e}"))?,
        )),
        None => Caller::Anonymous,
    };
    let domain = match into.domain {
        Some(name) => Some(
            shortener
                .domain(Some(name))
                .map_err(|e| format!("--domain: {e}"))?
                .name
                .clone(),
        ),
        None => None,
    };
    let (input, size): (Box<dyn Read + Send>, Option<u64>) = if file == Path::new("-") {
        (Box::new(std::io::stdin()), None)
    } else {
        let opened = File::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let size = opened.metadata().ok().map(|m| m.len());
        (Box::new(BufReader::new(opened)), size)
    };
    let rows = CsvRows::new(input, format).map_err(|e| format!("{}: {e}", file.display()))?;
    let (send, mut receive) = tokio::sync::mpsc::channel(IMPORT_READ_AHEAD);
    let reader = std::thread::spawn(move || {
        let mut rows = rows;
        while let Some((line, mut item)) = rows.next() {
            if let Ok(row) = &mut item {
                if row.domain.is_none() {
                    row.domain.clone_from(&domain);
                }
            }
            if send
                .blocking_send(((line, rows.bytes_read()), item))
                .is_err()
            {
                break;
            }
        }
    });
    let rows = futures_util::stream::poll_fn(move |cx| receive.poll_recv(cx));
    let progress = size.map_or_else(ProgressBar::no_length, ProgressBar::new);
    progress.set_style(
        ProgressStyle::with_template(
            "{spinner} {bar:30} {bytes}/{total_bytes} {msg} ({elapsed}, {eta} left)",
        )
        .map_err(|e| e.to_string())?,
    );
    let mut summary = Summary::default();
    // A row naming its owner (an export's) keeps it: this runs as an admin.
    let mut outcomes = std::pin::pin!(create_all(shortener, caller, true, rows));
    while let Some(((line, read), outcome)) = outcomes.next().await {
        summary.add(&outcome);
        if let RowOutcome::Refused(refused) = &outcome {
            let what = if refused.is_conflict() {
                "conflict"
            } else {
                "refused"
            };
            progress.suspend(|| {
                eprintln!("line {line}: {what} ({}): {}", refused.code, refused.error);
            });
        }
        progress.set_position(read);
        progress.set_message(format!(
            "{} created, {} existing, {} refused",
            summary.created, summary.existing, summary.refused
        ));
    }
    progress.finish_and_clear();
    let _ = reader.join();
    println!(
        "imported {}: {} created, {} already there, {} refused ({} of them conflicts: the key \
         holds another link)",
        file.display(),
        summary.created,
        summary.existing,
        summary.refused,
        summary.conflicts
    );
    if summary.refused > 0 {
        return Err(format!(
            "{} rows were not imported; the lines above say why",
            summary.refused
        ));
    }
    Ok(())
}

/// Writes every link `which` names, a page at a time.
pub async fn export(
    shortener: &Shortener,
    format: ExportFormat,
    which: ExportOf<'_>,
    output: Option<&Path>,
) -> Result<(), String> {
    let mut out: Box<dyn Write> = match output {
        Some(path) => Box::new(BufWriter::new(
            File::create(path).map_err(|e| format!("{}: {e}", path.display()))?,
        )),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    };
    let failed = |e: std::io::Error| format!("cannot write the export: {e}");
    let mut export = shortener
        .export(&operator(), which.owner, which.domain)
        .await
        .map_err(|e| e.to_string())?;
    out.write_all(&format.head()).map_err(failed)?;
    let mut links = 0usize;
    while let Some(page) = export.next_page().await.map_err(|e| e.to_string())? {
        links += page.len();
        let details = shortener.details(&page).await.map_err(|e| e.to_string())?;
        out.write_all(&format.page(&page, &details, shortener))
            .map_err(failed)?;
    }
    out.flush().map_err(failed)?;
    if output.is_some() {
        eprintln!("exported {links} links");
    }
    Ok(())
}
