//! `shortlink generate` (hidden): the man pages and completions, made from
//! the real `Cli`.

use std::path::Path;

use super::Cli;

/// Writes `shortlink.1` (and a page per command) and the completions into
/// `out`. A build step could not do it: `Cli` lives in this binary, and
/// generating from it keeps them from drifting from the real options.
pub fn generate(out: &Path) -> Result<(), String> {
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
