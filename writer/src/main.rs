//! `shortlink`: the writer daemon and its command line.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use actix_web::{middleware, web, App, HttpServer};
use clap::{Parser, Subcommand};
use futures_util::StreamExt as _;
use indicatif::{ProgressBar, ProgressStyle};
use shortlink_core::Owner;
use shortlink_writer::access::{Gatekeeper, Identity};
use shortlink_writer::config::Settings;
use shortlink_writer::links::bulk::{create_all, CsvRows, Format, RowOutcome, Summary};
use shortlink_writer::links::export::ExportFormat;
use shortlink_writer::links::shortener::{Change, ListQuery, NewLink, Shortener, Written};
use shortlink_writer::links::store::{Inserted, Link};
use shortlink_writer::links::validate::format_expiry;
use shortlink_writer::metrics::Metrics;
use shortlink_writer::varnish::vcl;
use shortlink_writer::web as routes;

/// Short links served by Varnish from Redis: insert them, and generate the
/// VCL that serves them.
#[derive(Debug, Parser)]
// The crate is `shortlink-writer`; `--version`, the man pages and the
// completions name the command.
#[command(name = "shortlink", version, about)]
struct Cli {
    /// Configuration file (TOML); without one, every default applies.
    #[arg(long, short, env = "SHORTLINK_CONFIG", global = true)]
    config: Option<PathBuf>,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the web form and JSON API (the default).
    Serve,
    /// Shorten one URL and print its short link.
    Add {
        /// The long URL.
        url: String,
        /// A custom key instead of a generated one.
        #[arg(long, short)]
        key: Option<String>,
        /// When the link expires, as RFC 3339 (2026-12-31T23:59:59Z).
        #[arg(long)]
        expires_at: Option<String>,
        /// Where the link goes once expired, instead of answering 410.
        #[arg(long)]
        expired_url: Option<String>,
        /// After this many people's clicks the link answers as expired.
        #[arg(long)]
        max_clicks: Option<u64>,
    },
    /// Print a link: its target, expiry, click limit, owner and `ETag`.
    Show { key: String },
    /// Change a link's target, expiry or click limit; Varnish serves the
    /// change at once.
    /// Run by an operator, so any link may be changed.
    Edit {
        key: String,
        /// The new long URL.
        #[arg(long)]
        url: Option<String>,
        /// The new expiry, as RFC 3339 (2026-12-31T23:59:59Z).
        #[arg(long, conflicts_with = "no_expiry")]
        expires_at: Option<String>,
        /// Remove the expiry: the link stays forever.
        #[arg(long)]
        no_expiry: bool,
        /// Where the link goes once expired, instead of answering 410.
        #[arg(long, conflicts_with = "no_expired_url")]
        expired_url: Option<String>,
        /// Remove the expired URL: once expired, the link answers 410.
        #[arg(long)]
        no_expired_url: bool,
        /// The new click limit: after this many people's clicks the link
        /// answers as expired.
        #[arg(long, conflicts_with = "no_max_clicks")]
        max_clicks: Option<u64>,
        /// Remove the click limit.
        #[arg(long)]
        no_max_clicks: bool,
        /// Change only if the link still has this `ETag` (from `show`).
        #[arg(long)]
        if_match: Option<String>,
    },
    /// Delete a link: it answers 410 Gone from now on, and its key is never
    /// given to another link.
    Delete {
        key: String,
        /// Delete only if the link still has this `ETag` (from `show`).
        #[arg(long)]
        if_match: Option<String>,
    },
    /// List links created through the writer, owner by owner, newest first.
    List {
        /// Only the links of the token with this name.
        #[arg(long)]
        owner: Option<String>,
        /// Only links whose key or URL contains this.
        #[arg(long)]
        search: Option<String>,
        /// Most links to print.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Go on from where an earlier listing stopped.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Load the hottest links into Varnish's cache (every node of
    /// `varnish.purge_urls`, or `purge_url`), as after Varnish starts with
    /// an empty one: those clicked most over the last hour, then the most
    /// clicked of all time. These requests are not counted as clicks.
    Warm {
        /// How many links to load.
        #[arg(long, default_value_t = 10_000)]
        links: usize,
        /// Only this node (one of the configured URLs), as after it alone
        /// restarted.
        #[arg(long)]
        node: Option<String>,
    },
    /// Create the links of a CSV file: this writer's own (`url[,key]`, or
    /// an export of it), or another shortener's export, keeping its short
    /// codes as keys. Prints each row refused (a code taken by another URL,
    /// a code these keys cannot be...), then a summary; exits 1 if any was.
    Import {
        /// The CSV file (`-` reads standard input).
        file: PathBuf,
        /// Whose export the file is.
        #[arg(long, value_enum, default_value_t = Format::Csv)]
        format: Format,
        /// Record the links as this token's, so that its holder may change
        /// them; otherwise they belong to no token (admins may change them).
        #[arg(long)]
        owner: Option<String>,
    },
    /// Write every link (or one owner's) as CSV or JSON lines, with its
    /// expiry and click limit: `import --format csv` reads the CSV back.
    Export {
        #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
        format: ExportFormat,
        /// Only the links of the token with this name.
        #[arg(long)]
        owner: Option<String>,
        /// Write into this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Print the VCL for this configuration: a whole VCL for a Varnish that
    /// serves short links only.
    Vcl {
        /// Print instead a file to `include` from a site's own VCL, near its
        /// top: it answers requests for links and leaves every other request
        /// to the site.
        #[arg(long)]
        include: bool,
    },
    /// Write the man pages and the bash, zsh and fish completions into a
    /// directory (`make deb` packages them).
    #[command(hide = true)]
    Generate {
        /// The directory to write them into.
        #[arg(long)]
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let settings = match Settings::load(cli.config.as_deref()) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("shortlink: configuration: {error}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command.unwrap_or(Command::Serve) {
        Command::Vcl { include } => {
            let source = cli
                .config
                .as_deref()
                .map_or_else(|| "the defaults".to_owned(), |p| p.display().to_string());
            let form = if include {
                vcl::Form::Include
            } else {
                vcl::Form::Standalone
            };
            match vcl::generate(&settings, &source, form) {
                Ok(text) => {
                    print!("{text}");
                    Ok(())
                }
                Err(error) => {
                    eprintln!("shortlink: configuration: {error}");
                    return ExitCode::from(2);
                }
            }
        }
        Command::Add {
            url,
            key,
            expires_at,
            expired_url,
            max_clicks,
        } => {
            let new = NewLink {
                url: &url,
                key: key.as_deref(),
                expires_at: expires_at.as_deref(),
                expired_url: expired_url.as_deref(),
                max_clicks,
            };
            with_shortener(
                settings,
                |shortener| async move { add(&shortener, &new).await },
            )
        }
        Command::Import {
            file,
            format,
            owner,
        } => with_shortener(settings, |shortener| async move {
            import(&shortener, &file, format, owner.as_deref()).await
        }),
        Command::Export {
            format,
            owner,
            output,
        } => with_shortener(settings, |shortener| async move {
            export(&shortener, format, owner.as_deref(), output.as_deref()).await
        }),
        Command::Serve => serve(settings),
        Command::Generate { out } => generate(&out),
        command => with_shortener(settings, |shortener| manage(shortener, command)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("shortlink: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Writes `shortlink.1` (and a page per command) and the completions into
/// `out`. A build step could not do it: `Cli` lives in this binary, and
/// generating from it keeps them from drifting from the real options.
fn generate(out: &Path) -> Result<(), String> {
    use clap::CommandFactory;
    let failed = |e: std::io::Error| format!("{}: {e}", out.display());
    std::fs::create_dir_all(out).map_err(failed)?;
    let mut command = Cli::command();
    clap_mangen::generate_to(command.clone(), out).map_err(failed)?;
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
    ] {
        clap_complete::generate_to(shell, &mut command, "shortlink", out).map_err(failed)?;
    }
    Ok(())
}

/// A part of a change: `remove` it, set it to `value`, or leave it.
#[allow(clippy::option_option)]
fn change_of<T>(value: Option<T>, remove: bool) -> Option<Option<T>> {
    if remove {
        Some(None)
    } else {
        value.map(Some)
    }
}

/// The commands that read or change links, as an operator.
async fn manage(shortener: Shortener, command: Command) -> Result<(), String> {
    match command {
        Command::Warm { links, node } => {
            let started = std::time::Instant::now();
            let warmed = shortener
                .warm(links, node.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            let on = match warmed.nodes {
                1 => String::new(),
                nodes => format!(" (over {nodes} nodes)"),
            };
            println!(
                "warmed {} links{on} in {:.1} s",
                warmed.cached,
                started.elapsed().as_secs_f64()
            );
            match warmed.problem {
                Some(problem) => Err(format!("{} links not warmed: {problem}", warmed.failed)),
                None => Ok(()),
            }
        }
        Command::Show { key } => {
            let (link, current) = shortener.show(&key).await.map_err(|e| e.to_string())?;
            print_link(&shortener, &link);
            println!("etag        {}", current.etag());
            Ok(())
        }
        Command::Edit {
            key,
            url,
            expires_at,
            no_expiry,
            expired_url,
            no_expired_url,
            max_clicks,
            no_max_clicks,
            if_match,
        } => {
            let change = Change {
                url: url.as_deref(),
                expires_at: change_of(expires_at.as_deref(), no_expiry),
                expired_url: change_of(expired_url.as_deref(), no_expired_url),
                max_clicks: change_of(max_clicks, no_max_clicks),
            };
            let written = shortener
                .edit(&operator(), &key, &change, if_match.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            print_link(&shortener, &written.outcome.0);
            warn_purge(written.purge_warning);
            Ok(())
        }
        Command::Delete { key, if_match } => {
            let written = shortener
                .delete(&operator(), &key, if_match.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            println!("deleted {key}: it answers 410 Gone from now on");
            warn_purge(written.purge_warning);
            Ok(())
        }
        Command::List {
            owner,
            search,
            limit,
            cursor,
        } => {
            let query = ListQuery {
                limit,
                cursor: cursor.as_deref(),
                search: search.as_deref(),
                owner: owner.as_deref(),
            };
            let listing = shortener
                .list(&operator(), &query)
                .await
                .map_err(|e| e.to_string())?;
            for link in &listing.links {
                let record = &link.record;
                println!(
                    "{}\t{}\t{}\t{}",
                    link.key,
                    record.url,
                    record.expires.map_or_else(|| "-".to_owned(), format_expiry),
                    record.owner.as_ref().map_or("-", Owner::as_str),
                );
            }
            if let Some(next) = listing.next_cursor {
                eprintln!("more: shortlink list --cursor '{next}'");
            }
            Ok(())
        }
        other => unreachable!("{other:?} is handled by main"),
    }
}

/// Rows read ahead of the inserts: enough to keep them all busy.
const IMPORT_READ_AHEAD: usize = 256;

/// Creates the links of `file`, showing progress on a terminal. The file
/// is read on a thread of its own, so that a slow pipe never holds up the
/// inserts in flight.
async fn import(
    shortener: &Shortener,
    file: &Path,
    format: Format,
    owner: Option<&str>,
) -> Result<(), String> {
    let owner = owner
        .map(|name| Owner::try_from(name).map_err(|e| format!("--owner: {e}")))
        .transpose()?;
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
        while let Some((line, item)) = rows.next() {
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
    let mut outcomes = std::pin::pin!(create_all(shortener, owner, true, rows));
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

/// Writes every link `owner` (or anyone) has, a page at a time.
async fn export(
    shortener: &Shortener,
    format: ExportFormat,
    owner: Option<&str>,
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
        .export(&operator(), owner)
        .await
        .map_err(|e| e.to_string())?;
    out.write_all(&format.head()).map_err(failed)?;
    let mut links = 0usize;
    while let Some(page) = export.next_page().await.map_err(|e| e.to_string())? {
        links += page.len();
        out.write_all(&format.page(&page, shortener))
            .map_err(failed)?;
    }
    out.flush().map_err(failed)?;
    if output.is_some() {
        eprintln!("exported {links} links");
    }
    Ok(())
}

/// Runs `work` with a shortener on a runtime of its own.
fn with_shortener<F, Fut>(settings: Settings, work: F) -> Result<(), String>
where
    F: FnOnce(Shortener) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let shortener = Shortener::new(settings).map_err(|e| e.to_string())?;
        work(shortener).await
    })
}

/// Whoever runs the command line holds the store's credentials: an admin.
fn operator() -> Identity {
    Identity {
        owner: Owner::try_from("operator").expect("a valid name"),
        admin: true,
    }
}

async fn add(shortener: &Shortener, new: &NewLink<'_>) -> Result<(), String> {
    let Written {
        outcome: inserted,
        purge_warning,
    } = shortener
        .create(new, None)
        .await
        .map_err(|e| e.to_string())?;
    println!("{}", shortener.short_url(&inserted.link().key));
    if let Inserted::Existing(_) = inserted {
        eprintln!("(this URL already had that short link)");
    }
    warn_purge(purge_warning);
    Ok(())
}

fn print_link(shortener: &Shortener, link: &Link) {
    let record = &link.record;
    println!("key         {}", link.key);
    println!("url         {}", record.url);
    println!("short_url   {}", shortener.short_url(&link.key));
    if let Some(expires) = record.expires {
        println!("expires_at  {}", format_expiry(expires));
    }
    if let Some(url) = &record.expired_url {
        println!("expired_url {url}");
    }
    if let Some(limit) = record.max_clicks {
        println!("max_clicks  {limit}");
    }
    println!(
        "owner       {}",
        record.owner.as_ref().map_or("(none)", Owner::as_str)
    );
}

fn warn_purge(warning: Option<String>) {
    if let Some(warning) = warning {
        eprintln!("shortlink: warning: {warning}");
    }
}

/// Warns, from what the links' Redis reports at start, when the split
/// would push hashes out of Redis's compact encoding (with the shipped
/// limit if Redis is away), and when Redis has fewer replicas than
/// `replicas_to_ack` waits for: every change would then answer 503.
fn check_store(settings: &Settings) {
    let mut connection = shortlink_writer::redis::master::connect_to_links_redis(settings).ok();
    let limit = connection
        .as_mut()
        .and_then(|connection| {
            redis::cmd("CONFIG")
                .arg("GET")
                .arg("hash-max-listpack-entries")
                .query::<(String, u64)>(connection.as_mut())
                .ok()
        })
        .map_or(512, |(_, limit)| limit);
    if let Some(warning) = settings.listpack_warning(limit) {
        log::warn!("{warning}");
    }
    let wanted = settings.config.redis.replicas_to_ack.get();
    let replicas = connection.as_mut().and_then(|connection| {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(connection.as_mut())
            .ok()?;
        info.lines()
            .find_map(|line| line.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse::<u32>().ok())
    });
    if let Some(replicas) = replicas.filter(|&replicas| replicas < wanted) {
        log::warn!(
            "redis.replicas_to_ack is {wanted} but the links' Redis has {replicas} replicas \
             connected: changes will answer 503 until enough replicas are; start them, or \
             lower replicas_to_ack"
        );
    }
}

fn serve(settings: Settings) -> Result<(), String> {
    if let Some(refusal) = settings.serve_refusal() {
        return Err(refusal);
    }
    check_store(&settings);
    let listen = settings.config.listen;
    let max_body_bytes = settings.config.max_body_bytes;
    let guard = web::Data::new(Gatekeeper::new(&settings)?);
    let metrics = web::Data::new(Metrics::new());
    actix_web::rt::System::new().block_on(async move {
        let checked = web::Data::new(Shortener::new(settings.clone()).map_err(|e| e.to_string())?);
        // Purges a Varnish node missed are sent again for as long as this
        // writer runs (and by every other writer of the same Redis).
        let (purge_queue, nodes) = checked.purge_queue();
        actix_web::rt::spawn(purge_queue.retry_forever(nodes));
        log::info!("writer listening on http://{listen}/");
        let access_log =
            log::log_enabled!(target: "actix_web::middleware::logger", log::Level::Info);
        HttpServer::new(move || {
            // Each worker thread gets a shortener of its own, whose Redis
            // connection and purge lane run on that worker's runtime: their
            // replies wake the worker directly, not through another thread.
            // The same settings opened `checked`, so this cannot fail; if
            // it did, the worker would share that one.
            let shortener =
                Shortener::new(settings.clone()).map_or_else(|_| checked.clone(), web::Data::new);
            App::new()
                .app_data(shortener)
                .app_data(guard.clone())
                .app_data(metrics.clone())
                // The request line and status only: no header, so no token.
                // Off when RUST_LOG hides it: the logger formats every
                // request before `log` drops the line.
                .wrap(middleware::Condition::new(
                    access_log,
                    middleware::Logger::new("%a \"%r\" %s %b %Dms"),
                ))
                .configure(|config| routes::routes(config, max_body_bytes))
        })
        .bind(listen)
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?
        .run()
        .await
        .map_err(|e| e.to_string())
    })
}
