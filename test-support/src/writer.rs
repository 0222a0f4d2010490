//! The writer (`shortlink serve`) for every suite, and the VCL it generates.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::{command_output, release_dir, serving, spawn_logged};

/// The release build of `shortlink`, with the VMOD beside it.
pub fn shortlink_binary() -> Result<PathBuf, String> {
    let binary = release_dir().join("shortlink");
    if binary.exists() && release_dir().join("libvmod_shortlink.so").exists() {
        Ok(binary)
    } else {
        Err("the release build is missing: run `make build` first".into())
    }
}

/// Writes to `vcl_file` the VCL `shortlink vcl ARGS` generates from
/// `config_file` (`--include` for the form a site's VCL includes).
pub fn generate_vcl(
    writer: &Path,
    config_file: &Path,
    vcl_file: &Path,
    args: &[&str],
) -> Result<(), String> {
    let config = config_file.display().to_string();
    let mut all = vec!["vcl", "--config", config.as_str()];
    all.extend_from_slice(args);
    let vcl = command_output(&writer.display().to_string(), &all)?;
    fs::write(vcl_file, vcl).map_err(|e| format!("{}: {e}", vcl_file.display()))
}

/// `shortlink serve` in the foreground, its output in `writer.log`.
pub struct Writer {
    pub port: u16,
    child: Child,
}

impl Writer {
    /// Starts `writer` (a `shortlink` binary) with `config_file`, which
    /// listens on `port`, and `env` added to its environment; returns once
    /// it accepts connections.
    pub fn start(
        writer: &Path,
        dir: &Path,
        config_file: &Path,
        port: u16,
        env: &[(&str, &str)],
    ) -> Result<Self, String> {
        // A new log each start: a test reads what this writer logged.
        let log = dir.join("writer.log");
        let _ = fs::remove_file(&log);
        let child = spawn_logged(
            Command::new(writer)
                .args(["serve", "--config"])
                .arg(config_file)
                .envs(env.iter().copied()),
            &log,
            "the writer",
        )?;
        Ok(Self {
            port,
            child: serving(child, "the writer", port, Duration::from_secs(10), &log)?,
        })
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its process id, failing if it exited (to show it never restarted).
    pub fn pid(&mut self) -> Result<u32, String> {
        match self.child.try_wait() {
            Ok(None) => Ok(self.child.id()),
            Ok(Some(status)) => Err(format!("the writer exited: {status}")),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
