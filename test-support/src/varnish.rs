//! `varnishd` for every suite.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::{
    command_output, free_port, on_free_ports, serving, shipped_varnishd_params, spawn_logged,
    varnishd_args,
};

/// A `varnishd` in the foreground on a free loopback port, running a VCL file
/// with the shipped parameters (`vcl/varnishd.params`).
pub struct Varnish {
    pub port: u16,
    pub workdir: PathBuf,
    child: Child,
}

impl Varnish {
    /// Starts Varnish with `vcl` on a free port (others if it is taken
    /// before Varnish binds it); `shortlink` is found in the release build.
    pub fn start(dir: &Path, vcl: &Path) -> Result<Self, String> {
        on_free_ports(&dir.join("varnishd.log"), || {
            Self::start_on(dir, vcl, free_port()?)
        })
    }

    /// Starts Varnish with `vcl` on `port`.
    pub fn start_on(dir: &Path, vcl: &Path, port: u16) -> Result<Self, String> {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let workdir = dir.join("varnish");
        let log = dir.join("varnishd.log");
        let child = spawn_logged(
            Command::new("varnishd")
                .args(varnishd_args()?)
                .args(shipped_varnishd_params()?)
                .args(["-F", "-a"])
                .arg(format!("127.0.0.1:{port}"))
                .arg("-n")
                .arg(&workdir)
                .arg("-f")
                .arg(vcl)
                .args(["-T", "127.0.0.1:0", "-s", "malloc,64m"]),
            &log,
            "varnishd",
        )?;
        Ok(Self {
            port,
            workdir,
            child: serving(child, "varnishd", port, Duration::from_secs(30), &log)?,
        })
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Runs a Varnish tool (`varnishadm`, `varnishstat`, ...) against this
    /// instance and returns its output.
    pub fn tool(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let workdir = self.workdir.display().to_string();
        let mut all = vec!["-n", workdir.as_str()];
        all.extend_from_slice(args);
        command_output(program, &all)
    }

    /// The process id of the manager, whose child process serves.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Varnish {
    fn drop(&mut self) {
        // SIGTERM lets the manager stop its child; SIGKILL would orphan it.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}
