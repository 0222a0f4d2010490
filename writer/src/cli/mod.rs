//! The command line: its definition (`Cli`, one variant of `Command` per
//! subcommand, with the help texts the man pages and completions are made
//! from), and the commands, one file per group:
//!
//! | file | what |
//! | --- | --- |
//! | `serve.rs` | `serve`: the web form and JSON API, after checking the links' Redis |
//! | `varnish.rs` | `vcl` and `warm`: the VCL, and Varnish's cache loaded with the hottest links |
//! | `links.rs` | `add`, `show`, `edit`, `delete`, `list`: one link at a time, as an operator |
//! | `bulk.rs` | `import` and `export`: many links, from and to CSV (or JSON lines) |
//! | `generate.rs` | `generate` (hidden): the man pages and completions, from `Cli` |
//!
//! `main.rs` parses the command line and sends each command to its file.
//! The files use the writer's library and this module's helpers, never
//! one another.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use shortlink_core::rules::Place;
use shortlink_core::Owner;
use shortlink_writer::access::Identity;
use shortlink_writer::config::Settings;
use shortlink_writer::links::bulk::Format;
use shortlink_writer::links::export::ExportFormat;
use shortlink_writer::links::rules::{RuleBody, SplitBody};
use shortlink_writer::links::shortener::Shortener;

pub mod bulk;
pub mod generate;
pub mod links;
pub mod serve;
pub mod varnish;

/// Short links served by Varnish from Redis: insert them, and generate the
/// VCL that serves them.
#[derive(Debug, Parser)]
// The crate is `shortlink-writer`; `--version`, the man pages and the
// completions name the command.
#[command(name = "shortlink", version, about)]
pub struct Cli {
    /// Configuration file (TOML); without one, every default applies.
    #[arg(long, short, env = "SHORTLINK_CONFIG", global = true)]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the web form and JSON API (the default).
    Serve,
    /// Shorten one URL and print its short link.
    Add(AddArgs),
    /// Print a link: its domain, target, expiry, click limit, owner and
    /// `ETag`.
    Show {
        key: String,
        /// The link's short domain (a name or an alias of `[[domains]]`);
        /// the default domain without it.
        #[arg(long)]
        domain: Option<String>,
    },
    /// Change a link's target, expiry or click limit; Varnish serves the
    /// change at once.
    /// Run by an operator, so any link may be changed.
    Edit(EditArgs),
    /// Delete a link: it answers 410 Gone from now on, and its key is never
    /// given to another link.
    Delete {
        key: String,
        /// The link's short domain (a name or an alias of `[[domains]]`);
        /// the default domain without it.
        #[arg(long)]
        domain: Option<String>,

        /// Delete only if the link still has this `ETag` (from `show`).
        #[arg(long)]
        if_match: Option<String>,
    },
    /// List links created through the writer, domain by domain, owner by
    /// owner, newest first.
    List {
        /// Only the links of the token with this name.
        #[arg(long)]
        owner: Option<String>,
        /// Only the links of this short domain (a name or an alias).
        #[arg(long)]
        domain: Option<String>,
        /// Only links whose key, URL, title or a tag contains this.
        #[arg(long)]
        search: Option<String>,
        /// Only links holding this tag.
        #[arg(long)]
        tag: Option<String>,
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
        /// Only the links of this short domain (a name or an alias); without
        /// it, each domain's hottest in turn.
        #[arg(long)]
        domain: Option<String>,
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
        /// The short domain of the rows that name none (a name or an
        /// alias); rows with a domain column keep theirs.
        #[arg(long)]
        domain: Option<String>,
    },
    /// Write every link (or one owner's, or one domain's) as CSV or JSON
    /// lines, with its domain, expiry and click limit: `import --format
    /// csv` reads the CSV back.
    Export {
        #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
        format: ExportFormat,
        /// Only the links of the token with this name.
        #[arg(long)]
        owner: Option<String>,
        /// Only the links of this short domain (a name or an alias).
        #[arg(long)]
        domain: Option<String>,
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
    /// Print the YOURLS signature of the token named NAME in `[access]
    /// tokens`: what YOURLS' tools send as `signature` to sign in as it.
    YourlsSignature {
        /// The token's name.
        name: String,
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

/// Runs `work` with a shortener on a runtime of its own.
pub fn with_shortener<F, Fut>(settings: Settings, work: F) -> Result<(), String>
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
pub fn operator() -> Identity {
    Identity::admin(Owner::try_from("operator").expect("a valid name"))
}

/// The rules and split targets of `--rule` and `--split`, each as the
/// stored word without its `~` or `*` (which may be given all the same).
pub fn targeting(
    rules: &[String],
    split: &[String],
) -> Result<(Vec<RuleBody>, Vec<SplitBody>), String> {
    let rules = rules
        .iter()
        .enumerate()
        .map(|(n, text)| {
            RuleBody::parse_text(text.strip_prefix('~').unwrap_or(text), Place::Rule(n + 1))
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let split = split
        .iter()
        .enumerate()
        .map(|(n, text)| {
            SplitBody::parse_text(text.strip_prefix('*').unwrap_or(text), Place::Split(n + 1))
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    Ok((rules, split))
}

/// `--forward-query` and `--no-forward-query`: the link's own choice, if
/// either was given.
pub fn forwarding(forward: bool, never: bool) -> Option<bool> {
    match (forward, never) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

/// What `add` takes: a link to create.
#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The long URL.
    pub url: String,
    /// A custom key instead of a generated one.
    #[arg(long, short)]
    pub key: Option<String>,
    /// When the link expires, as RFC 3339 (2026-12-31T23:59:59Z).
    #[arg(long)]
    pub expires_at: Option<String>,
    /// Where the link goes once expired, instead of answering 410.
    #[arg(long)]
    pub expired_url: Option<String>,
    /// After this many people's clicks the link answers as expired.
    #[arg(long)]
    pub max_clicks: Option<u64>,
    /// The short domain to create the link on (a name or an alias of
    /// `[[domains]]`); the default domain without it.
    #[arg(long)]
    pub domain: Option<String>,
    /// Forward the query string the short link is requested with to
    /// the target, whatever the domain's default.
    #[arg(long, conflicts_with = "no_forward_query")]
    pub forward_query: bool,
    /// Never forward the query string, whatever the domain's default.
    #[arg(long)]
    pub no_forward_query: bool,
    /// A rule, `CONDITIONS>URL`: conditions joined by `&`, all to hold
    /// (`device=ios,android`, `country=DE,AT`, `lang=de`, `q.ref=mail`,
    /// `from=UNIX`, `until=UNIX`); the first rule that matches wins.
    /// Give it once per rule.
    #[arg(long = "rule", value_name = "CONDITIONS>URL")]
    pub rules: Vec<String>,
    /// A split target, `WEIGHT>URL` (weight 0 to 1000): visitors no
    /// rule took are spread by weight. Give it once per target.
    #[arg(long = "split", value_name = "WEIGHT>URL")]
    pub split: Vec<String>,
    /// When the link starts answering, as RFC 3339; before, it answers
    /// as an unknown key does.
    #[arg(long)]
    pub valid_since: Option<String>,
    /// What the link is called in listings.
    #[arg(long)]
    pub title: Option<String>,
    /// A word the link is found by. Give it once per tag.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Crawlers may follow the link.
    #[arg(long)]
    pub crawlable: bool,
}

/// What `edit` takes: a link's key and what changes. Its flags are
/// command-line switches (`--no-title`), as clap reads them.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, clap::Args)]
pub struct EditArgs {
    pub key: String,
    /// The link's short domain (a name or an alias of `[[domains]]`);
    /// the default domain without it.
    #[arg(long)]
    pub domain: Option<String>,
    /// The new long URL.
    #[arg(long)]
    pub url: Option<String>,
    /// The new expiry, as RFC 3339 (2026-12-31T23:59:59Z).
    #[arg(long, conflicts_with = "no_expiry")]
    pub expires_at: Option<String>,
    /// Remove the expiry: the link stays forever.
    #[arg(long)]
    pub no_expiry: bool,
    /// Where the link goes once expired, instead of answering 410.
    #[arg(long, conflicts_with = "no_expired_url")]
    pub expired_url: Option<String>,
    /// Remove the expired URL: once expired, the link answers 410.
    #[arg(long)]
    pub no_expired_url: bool,
    /// The new click limit: after this many people's clicks the link
    /// answers as expired.
    #[arg(long, conflicts_with = "no_max_clicks")]
    pub max_clicks: Option<u64>,
    /// Remove the click limit.
    #[arg(long)]
    pub no_max_clicks: bool,
    /// Forward the query string the short link is requested with to
    /// the target.
    #[arg(long, conflicts_with_all = ["no_forward_query", "domain_forwards_query"])]
    pub forward_query: bool,
    /// Never forward the query string.
    #[arg(long, conflicts_with = "domain_forwards_query")]
    pub no_forward_query: bool,
    /// Forward the query string as the link's domain does.
    #[arg(long)]
    pub domain_forwards_query: bool,
    /// The new rules, all of them, `CONDITIONS>URL` each (as `add`
    /// takes them); the link's split stays.
    #[arg(
        long = "rule",
        value_name = "CONDITIONS>URL",
        conflicts_with = "no_rules"
    )]
    pub rules: Vec<String>,
    /// Remove the link's rules.
    #[arg(long)]
    pub no_rules: bool,
    /// The new split, all of it, `WEIGHT>URL` each; the rules stay.
    #[arg(long = "split", value_name = "WEIGHT>URL", conflicts_with = "no_split")]
    pub split: Vec<String>,
    /// Remove the link's split.
    #[arg(long)]
    pub no_split: bool,
    /// The new start, as RFC 3339.
    #[arg(long, conflicts_with = "no_valid_since")]
    pub valid_since: Option<String>,
    /// Remove the start: the link answers at once.
    #[arg(long)]
    pub no_valid_since: bool,
    /// The new title.
    #[arg(long, conflicts_with = "no_title")]
    pub title: Option<String>,
    /// Remove the title.
    #[arg(long)]
    pub no_title: bool,
    /// The new tags, all of them, once per tag.
    #[arg(long = "tag", value_name = "TAG", conflicts_with = "no_tags")]
    pub tags: Vec<String>,
    /// Remove the tags.
    #[arg(long)]
    pub no_tags: bool,
    /// Whether crawlers may follow the link.
    #[arg(long, value_name = "true|false")]
    pub crawlable: Option<bool>,
    /// Change only if the link still has this `ETag` (from `show`).
    #[arg(long)]
    pub if_match: Option<String>,
}
