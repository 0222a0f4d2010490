//! Real servers for the test suites, one launcher each: Redis, Varnish and
//! the writer. Each starts on a free loopback port, in a directory of its
//! own under `target/`, and is stopped when dropped. Also the data files
//! they read, such as a `GeoIP` database, and a proxy that can cut one
//! off.

mod cluster;
mod geoip;
mod proxy;
mod redis;
mod sentinel;
mod varnish;
mod writer;

pub use crate::cluster::{RedisCluster, NODE_TIMEOUT};
pub use crate::geoip::write_country_database;
pub use crate::proxy::Proxy;
pub use crate::redis::{Persistence, Redis};
pub use crate::sentinel::SentinelGroup;
pub use crate::varnish::Varnish;
pub use crate::writer::{generate_vcl, shortlink_binary, Writer};

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
    if poll_until(within, || TcpStream::connect(("127.0.0.1", port)).is_ok()) {
        Ok(())
    } else {
        Err(format!(
            "nothing listens on 127.0.0.1:{port} after {within:?}"
        ))
    }
}

/// The servers `starting` threads started, or the first error.
fn started(
    starting: Vec<std::thread::ScopedJoinHandle<'_, Result<Redis, String>>>,
) -> Result<Vec<Redis>, String> {
    starting
        .into_iter()
        .map(|thread| {
            thread
                .join()
                .map_err(|_| "a launcher panicked".to_owned())?
        })
        .collect()
}

/// Whether `done` became true within `within`, asking every few milliseconds.
pub fn poll_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Spawns `command` with no input and its output appended to `log`; `what`
/// names it in errors.
fn spawn_logged(command: &mut Command, log: &Path, what: &str) -> Result<Child, String> {
    let file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    command
        .stdin(Stdio::null())
        .stdout(file.try_clone().map_err(|e| e.to_string())?)
        .stderr(file)
        .spawn()
        .map_err(|e| format!("cannot start {what} (is it installed?): {e}"))
}

/// Waits until `child` (`what`, for errors) serves on `port`; kills it if
/// it does not in time. A child that exits fails at once, its log named.
fn serving(
    child: Child,
    what: &str,
    port: u16,
    within: Duration,
    log: &Path,
) -> Result<Child, String> {
    ready_or_failed(
        child,
        what,
        within,
        log,
        &format!("listen on 127.0.0.1:{port}"),
        || TcpStream::connect(("127.0.0.1", port)).is_ok(),
    )
}

/// Waits until `ready()` holds for `child` (`what`, for errors); the error
/// of a child not ready within `within` (killed then) says it did not
/// `readiness`. A child that exits fails at once. Either error names `log`.
fn ready_or_failed(
    mut child: Child,
    what: &str,
    within: Duration,
    log: &Path,
    readiness: &str,
    mut ready: impl FnMut() -> bool,
) -> Result<Child, String> {
    let exited = |child: &mut Child| child.try_wait().ok().flatten();
    let answered = poll_until(within, || exited(&mut child).is_some() || ready());
    if let Some(status) = exited(&mut child) {
        return Err(format!("{what} exited ({status}); see {}", log.display()));
    }
    if answered {
        return Ok(child);
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(format!(
        "{what} did not {readiness} within {within:?}; see {}",
        log.display()
    ))
}

/// Runs `start`, which picks free ports and starts a server logging to
/// `log`, again on other ports while the server could not listen on one.
/// A port free when picked may be taken before the server binds it, e.g.
/// by a port picked at the same time for another node of a cluster.
fn on_free_ports<T>(log: &Path, mut start: impl FnMut() -> Result<T, String>) -> Result<T, String> {
    const TRIES: u32 = 5;
    let mut tries = 1;
    loop {
        // Only this try's log tells whether a port was taken.
        let _ = fs::remove_file(log);
        match start() {
            Err(message) if tries < TRIES && port_was_taken(log) => {
                eprintln!("{message}: a port was taken meanwhile, trying others");
                tries += 1;
            }
            result => return result,
        }
    }
}

fn port_was_taken(log: &Path) -> bool {
    fs::read_to_string(log).is_ok_and(|text| text.contains("Address already in use"))
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
