//! `shortlink`: the writer daemon and its command line.

use std::path::PathBuf;
use std::process::ExitCode;

use actix_web::{middleware, web, App, HttpServer};
use clap::{Parser, Subcommand};
use shortlink_writer::access::Gatekeeper;
use shortlink_writer::config::Settings;
use shortlink_writer::shortener::Shortener;
use shortlink_writer::store::Inserted;
use shortlink_writer::{vcl, web as routes};

/// Short links served by Varnish from Redis: insert them, and generate the
/// VCL that serves them.
#[derive(Debug, Parser)]
#[command(version, about)]
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
        Command::Add { url, key } => add(settings, &url, key.as_deref()),
        Command::Serve => serve(settings),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("shortlink: {message}");
            ExitCode::FAILURE
        }
    }
}

fn add(settings: Settings, url: &str, key: Option<&str>) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let shortener = Shortener::new(settings).map_err(|e| e.to_string())?;
        let inserted = shortener
            .shorten(url, key)
            .await
            .map_err(|e| e.to_string())?;
        println!("{}", shortener.short_url(&inserted.link().key));
        if let Inserted::Existing(_) = inserted {
            eprintln!("(this URL already had that short link)");
        }
        Ok(())
    })
}

/// Warns when the split would push hashes out of Redis's compact encoding,
/// with the limit Redis itself reports, or the shipped one if it is away.
fn check_split(settings: &Settings) {
    let limit = redis::Client::open(settings.config.redis.url.as_str())
        .and_then(|client| client.get_connection_with_timeout(settings.connect_timeout()))
        .and_then(|mut connection| {
            redis::cmd("CONFIG")
                .arg("GET")
                .arg("hash-max-listpack-entries")
                .query::<(String, u64)>(&mut connection)
        })
        .map_or(512, |(_, limit)| limit);
    if let Some(warning) = settings.listpack_warning(limit) {
        log::warn!("{warning}");
    }
}

fn serve(settings: Settings) -> Result<(), String> {
    if let Some(refusal) = settings.serve_refusal() {
        return Err(refusal);
    }
    check_split(&settings);
    let listen = settings.config.listen;
    let max_body_bytes = settings.config.max_body_bytes;
    let guard = web::Data::new(Gatekeeper::new(&settings)?);
    actix_web::rt::System::new().block_on(async move {
        let checked = web::Data::new(Shortener::new(settings.clone()).map_err(|e| e.to_string())?);
        log::info!("writer listening on http://{listen}/");
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
                // The request line and status only: no header, so no token.
                .wrap(middleware::Logger::new("%a \"%r\" %s %b %Dms"))
                .configure(|config| routes::routes(config, max_body_bytes))
        })
        .bind(listen)
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?
        .run()
        .await
        .map_err(|e| e.to_string())
    })
}
