//! `shortlink vcl` and `shortlink warm`: the VCL that serves the links,
//! and Varnish's cache loaded with the hottest of them.

use std::path::Path;

use shortlink_writer::config::{ConfigError, Settings};
use shortlink_writer::links::shortener::Shortener;
use shortlink_writer::varnish::vcl;

/// The VCL for `settings`, read from `config` (or the defaults): a whole
/// VCL, or with `include` a file to include from a site's own.
pub fn vcl(
    settings: &Settings,
    config: Option<&Path>,
    include: bool,
) -> Result<String, ConfigError> {
    let source = config.map_or_else(|| "the defaults".to_owned(), |p| p.display().to_string());
    let form = if include {
        vcl::Form::Include
    } else {
        vcl::Form::Standalone
    };
    vcl::generate(settings, &source, form)
}

/// Loads the `links` hottest links into Varnish's cache (on `node` alone,
/// of `domain` alone, if given), and says how long it took.
pub async fn warm(
    shortener: &Shortener,
    links: usize,
    node: Option<&str>,
    domain: Option<&str>,
) -> Result<(), String> {
    let started = std::time::Instant::now();
    let warmed = shortener
        .warm(links, node, domain)
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
