//! Real servers for the test suites: each starts on a free loopback port,
//! in a directory of its own under `target/`, and is stopped when dropped.

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The workspace root.
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Where `make build` puts the release build.
pub fn release_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo_root().join("target"), PathBuf::from)
        .join("release")
}

/// The `varnishd` arguments every test Varnish runs with:
///
/// - `-j none`: run as root, varnishd compiles and loads VCL as its own
///   unprivileged users, who cannot read a checkout inside a private
///   directory (a clone under `mktemp -d`, or root's home);
/// - a `vmod_path` that finds `shortlink` in the release build and Varnish's
///   own VMODs (`std`) where Varnish installed them.
pub fn varnishd_args() -> Result<Vec<String>, String> {
    let varnish_vmods = command_output("pkg-config", &["--variable=vmoddir", "varnishapi"])
        .map_err(|e| format!("cannot find Varnish's VMOD directory: {e}"))?;
    Ok(vec![
        "-j".into(),
        "none".into(),
        "-p".into(),
        format!(
            "vmod_path={}:{}",
            release_dir().display(),
            varnish_vmods.trim()
        ),
    ])
}

/// `-p name=value` for every parameter in the shipped `vcl/varnishd.params`,
/// the ones `make run` and `make bench` start Varnish with.
pub fn shipped_varnishd_params() -> Result<Vec<String>, String> {
    let path = repo_root().join("vcl/varnishd.params");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(|line| line.split('#').next().unwrap_or_default().trim())
        .filter(|line| !line.is_empty())
        .flat_map(|line| ["-p".to_owned(), line.to_owned()])
        .collect())
}

/// A fresh directory for one test run's files, under `target/test-work/`.
pub fn work_dir(name: &str) -> Result<PathBuf, String> {
    let dir = release_dir()
        .parent()
        .unwrap_or(Path::new("target"))
        .join("test-work")
        .join(format!("{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

/// Waits until something accepts connections on `port`.
pub fn wait_for_port(port: u16, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "nothing listens on 127.0.0.1:{port} after {within:?}"
    ))
}

/// Output of a command that must succeed.
pub fn command_output(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {args:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// A `redis-server` on a free loopback port, driven by `varnish-tests/redisctl`
/// so that tests (VTC ones included) can hang, kill and restart it.
pub struct RedisServer {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub port: u16,
    /// `redis://127.0.0.1:<port>/0`
    pub url: String,
    redisctl: PathBuf,
}

impl RedisServer {
    /// Starts Redis with its data in `dir`; `extra` is appended to its config.
    pub fn start(dir: &Path, extra: &str) -> Result<Self, String> {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let port = free_port()?;
        let config = dir.join("redis.conf");
        fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\ndaemonize yes\npidfile {dir}/redis.pid\n\
                 dir {dir}\nlogfile {dir}/redis.log\nsave \"\"\nappendonly no\n{extra}",
                dir = dir.display()
            ),
        )
        .map_err(|e| format!("{}: {e}", config.display()))?;
        let server = Self {
            dir: dir.to_path_buf(),
            config,
            port,
            url: format!("redis://127.0.0.1:{port}/0"),
            redisctl: repo_root().join("varnish-tests/redisctl"),
        };
        server.ctl(&["start"])?;
        Ok(server)
    }

    /// Brings the server back to answering, whatever a test left it in:
    /// resumed if stopped, started again if killed. A test that fails
    /// halfway through a fault then leaves no fault to the next one.
    pub fn revive(&self) -> Result<(), String> {
        // Fails when no process is left; starting it again settles that.
        let _ = self.ctl(&["cont"]);
        if self
            .cli(&["ping"])
            .is_ok_and(|answer| answer.trim() == "PONG")
        {
            return Ok(());
        }
        self.ctl(&["start"])
    }

    /// The `redisctl` command line for this server, for VTC `shell` commands.
    pub fn redisctl_command(&self) -> String {
        format!("{} {}", self.redisctl.display(), self.config.display())
    }

    /// Runs `redis-cli ARGS` against this server and returns its output.
    pub fn cli(&self, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["cli"];
        all.extend_from_slice(args);
        self.ctl_output(&all)
    }

    /// Runs `redisctl ACTION`: start, stop, cont, kill or shutdown.
    pub fn ctl(&self, args: &[&str]) -> Result<(), String> {
        self.ctl_output(args).map(drop)
    }

    fn ctl_output(&self, args: &[&str]) -> Result<String, String> {
        let config = self.config.display().to_string();
        let mut all = vec![config.as_str()];
        all.extend_from_slice(args);
        command_output(&self.redisctl.display().to_string(), &all)
            .map_err(|e| format!("{e}; see {}/redis.log", self.dir.display()))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Err(message) = self.ctl(&["shutdown"]) {
            eprintln!("warning: {message}");
        }
    }
}

/// A `varnishd` in the foreground on a free loopback port, running a VCL file
/// with the shipped parameters (`vcl/varnishd.params`).
pub struct Varnish {
    pub port: u16,
    pub workdir: PathBuf,
    child: Child,
}

impl Varnish {
    /// Starts Varnish with `vcl` on a free port; `shortlink` is found in
    /// the release build.
    pub fn start(dir: &Path, vcl: &Path) -> Result<Self, String> {
        Self::start_on(dir, vcl, free_port()?)
    }

    /// Starts Varnish with `vcl` on `port`.
    pub fn start_on(dir: &Path, vcl: &Path, port: u16) -> Result<Self, String> {
        let workdir = dir.join("varnish");
        let log = fs::File::create(dir.join("varnishd.log")).map_err(|e| e.to_string())?;
        let child = Command::new("varnishd")
            .args(varnishd_args()?)
            .args(shipped_varnishd_params()?)
            .args(["-F", "-a"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-n")
            .arg(&workdir)
            .arg("-f")
            .arg(vcl)
            .args(["-T", "127.0.0.1:0", "-s", "malloc,64m"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start varnishd: {e}"))?;
        let mut varnish = Self {
            port,
            workdir,
            child,
        };
        if let Err(e) = wait_for_port(port, Duration::from_secs(30)) {
            let _ = varnish.child.kill();
            return Err(format!("{e}; see {}/varnishd.log", dir.display()));
        }
        Ok(varnish)
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
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
