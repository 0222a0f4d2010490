//! `shortlink`: the writer daemon and its command line.
//!
//! `main` parses the command line and sends each command to its module in
//! `cli/`, which defines the command line and holds the commands.

use std::process::ExitCode;

use clap::Parser;
use shortlink_writer::config::Settings;

mod cli;

use cli::{with_shortener, Cli, Command};

fn main() -> ExitCode {
    let args = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let settings = match Settings::load(args.config.as_deref()) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("shortlink: configuration: {error}");
            return ExitCode::from(2);
        }
    };
    let result = match args.command.unwrap_or(Command::Serve) {
        Command::Vcl { include } => {
            match cli::varnish::vcl(&settings, args.config.as_deref(), include) {
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
        Command::Warm {
            links,
            node,
            domain,
        } => with_shortener(settings, |shortener| async move {
            cli::varnish::warm(&shortener, links, node.as_deref(), domain.as_deref()).await
        }),
        Command::Import {
            file,
            format,
            owner,
            domain,
        } => with_shortener(settings, |shortener| async move {
            let into = cli::bulk::ImportTo {
                owner: owner.as_deref(),
                domain: domain.as_deref(),
            };
            cli::bulk::import(&shortener, &file, format, into).await
        }),
        Command::Export {
            format,
            owner,
            domain,
            output,
        } => with_shortener(settings, |shortener| async move {
            let export = cli::bulk::ExportOf {
                owner: owner.as_deref(),
                domain: domain.as_deref(),
            };
            cli::bulk::export(&shortener, format, export, output.as_deref()).await
        }),
        Command::Serve => cli::serve::serve(settings),
        Command::Generate { out } => cli::generate::generate(&out),
        Command::YourlsSignature { name } => settings
            .config
            .access
            .tokens
            .iter()
            .find(|token| token.owner().is_ok_and(|owner| owner.as_str() == name))
            .map(|token| {
                println!(
                    "{}",
                    shortlink_writer::access::yourls_signature(token.expose())
                );
            })
            .ok_or_else(|| format!("no token is named {name:?} in [access] tokens")),
        command => with_shortener(settings, |shortener| cli::links::manage(shortener, command)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("shortlink: {message}");
            ExitCode::FAILURE
        }
    }
}
