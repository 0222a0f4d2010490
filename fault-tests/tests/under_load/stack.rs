//! The real servers of one test — Redis, Varnish, the writer — each stopped
//! by its guard's `Drop`, so a failing test leaves no process behind.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use test_support::{free_port, release_dir, repo_root, wait_for_port, Varnish};

use crate::resp::{self, Reply};

/// The lookup timeout configured in Varnish; a 503 must come within it
/// plus [`MARGIN`].
pub const COMMAND_TIMEOUT: Duration = Duration::from_millis(200);
/// The insert timeout configured in the writer (its default, made explicit).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// Scheduling slack on a busy 2-core machine, on top of the timeout.
pub const MARGIN: Duration = Duration::from_millis(200);
/// The prefix of every link hash (the writer's default).
pub const PREFIX: &str = "short:";

/// One test's directory under `target/test-work/`, removed when the test
/// passes and kept (for its logs) when it fails.
pub struct TestDir {
    pub path: PathBuf,
}

impl TestDir {
    pub fn new(name: &str) -> Result<Self, String> {
        Ok(Self {
            path: test_support::work_dir(&format!("fault-{name}"))?,
        })
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

/// `redis-server` running the shipped `redis/redis.conf` (AOF, fsync on
/// every write), with only its port and data directory set for the test,
/// as `make run` does. It runs in the foreground as our child, so it can
/// be hung, killed and restarted on the same data.
pub struct Redis {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
    /// How many times it was started, to keep each run's log.
    starts: u32,
}

impl Redis {
    pub fn start(dir: &Path) -> Result<Self, String> {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut redis = Self {
            port: free_port()?,
            dir: dir.to_path_buf(),
            child: None,
            starts: 0,
        };
        redis.restart()?;
        Ok(redis)
    }

    /// Starts it again from the same configuration and data directory;
    /// returns once it answers PING (its AOF loaded).
    pub fn restart(&mut self) -> Result<(), String> {
        if self.child.is_some() {
            return Err("Redis is still running".into());
        }
        self.starts += 1;
        let log_path = self.dir.join(format!("redis-{}.log", self.starts));
        let log = fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let child = Command::new("redis-server")
            .arg(repo_root().join("redis/redis.conf"))
            .args(["--port", &self.port.to_string()])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start redis-server: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.ping() {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!(
                    "redis-server exited ({status}); see {}",
                    log_path.display()
                ));
            }
            sleep(Duration::from_millis(5));
        }
        Err(format!(
            "Redis did not answer PING; see {}",
            log_path.display()
        ))
    }

    pub fn ping(&self) -> bool {
        resp::Conn::open(self.port)
            .and_then(|mut conn| conn.query(&["PING"]))
            .is_ok_and(|reply| matches!(reply, Reply::Status(s) if s == "PONG"))
    }

    /// Sends `signal` (`STOP`, `CONT`) to Redis.
    pub fn signal(&self, signal: &str) -> Result<(), String> {
        let pid = self.child.as_ref().ok_or("Redis is not running")?.id();
        test_support::command_output("kill", &[&format!("-{signal}"), &pid.to_string()]).map(drop)
    }

    /// SIGKILL, then waits until the process is gone.
    pub fn kill(&mut self) -> Result<(), String> {
        let mut child = self.child.take().ok_or("Redis is not running")?;
        child
            .kill()
            .map_err(|e| format!("cannot kill Redis: {e}"))?;
        child.wait().map_err(|e| e.to_string())?;
        Ok(())
    }

    pub fn conn(&self) -> Result<resp::Conn, String> {
        resp::Conn::open(self.port).map_err(|e| format!("Redis on port {}: {e}", self.port))
    }
}

/// What happens to Redis in a test.
#[derive(Clone, Copy)]
pub enum Fault {
    /// SIGSTOP, then SIGCONT: Redis hangs, its connections stay open.
    Hang,
    /// SIGKILL, then a new redis-server on the same configuration and data.
    Kill,
}

impl Fault {
    pub fn begin(self, redis: &mut Redis) -> Result<(), String> {
        match self {
            Self::Hang => redis.signal("STOP"),
            Self::Kill => redis.kill(),
        }
    }

    /// Ends the fault; returns once Redis answers again (after a SIGCONT,
    /// it answers at once).
    pub fn end(self, redis: &mut Redis) -> Result<(), String> {
        match self {
            Self::Hang => redis.signal("CONT"),
            Self::Kill => redis.restart(),
        }
    }

    /// How the fault and its end read in a summary.
    pub fn words(self) -> (&'static str, &'static str) {
        match self {
            Self::Hang => ("stopped (SIGSTOP)", "SIGCONT"),
            Self::Kill => ("killed (SIGKILL)", "restart (answering PING)"),
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGKILL ends a stopped process too.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Bearer token the writer exempts from its per-client rate limit: the
/// load would otherwise be refused with 429 after the first burst.
pub const ACCESS_TOKEN: &str = "fault-tests-token-9f1c2e7a5b3d4c6e8a0b";

/// The writer's configuration for a test: the one place to change when the
/// writer gains settings (see [`ACCESS_TOKEN`]). `varnish_port` is where
/// links are served and purged; `None` turns purging off.
pub fn writer_config(redis_port: u16, writer_port: u16, varnish_port: Option<u16>) -> String {
    let public = public_base(varnish_port);
    let purge = varnish_port.map_or_else(String::new, |p| format!("http://127.0.0.1:{p}"));
    format!(
        "listen = \"127.0.0.1:{writer_port}\"\n\
         public_base_url = \"{public}\"\n\
         [redis]\nurl = \"redis://127.0.0.1:{redis_port}/0\"\n\
         hash_prefix = \"{PREFIX}\"\nsplit = 2\n\
         connect_timeout_ms = 200\ncommand_timeout_ms = {}\nwrite_timeout_ms = {}\n\
         [varnish]\npurge_url = \"{purge}\"\n\
         [access]\ntokens = [\"{ACCESS_TOKEN}\"]\n",
        COMMAND_TIMEOUT.as_millis(),
        WRITE_TIMEOUT.as_millis()
    )
}

/// Where short links are served: the writer puts this before each key.
pub fn public_base(varnish_port: Option<u16>) -> String {
    format!("http://127.0.0.1:{}/l/", varnish_port.unwrap_or(6081))
}

/// Headers every insert carries.
pub fn insert_headers() -> Vec<(&'static str, String)> {
    vec![("Authorization", format!("Bearer {ACCESS_TOKEN}"))]
}

fn shortlink_binary() -> Result<PathBuf, String> {
    let binary = release_dir().join("shortlink");
    if binary.exists() && release_dir().join("libvmod_shortlink.so").exists() {
        Ok(binary)
    } else {
        Err("the release build is missing: run `cargo build --release --workspace` first".into())
    }
}

/// Writes the configuration into `dir` and the VCL `shortlink vcl`
/// generates from it; returns the configuration file and the VCL file.
pub fn configure(dir: &Path, config: &str) -> Result<(PathBuf, PathBuf), String> {
    let config_file = dir.join("shortlink.toml");
    fs::write(&config_file, config).map_err(|e| e.to_string())?;
    let vcl = test_support::command_output(
        &shortlink_binary()?.display().to_string(),
        &["vcl", "--config", &config_file.display().to_string()],
    )?;
    let vcl_file = dir.join("shortlink.vcl");
    fs::write(&vcl_file, vcl).map_err(|e| e.to_string())?;
    Ok((config_file, vcl_file))
}

/// The writer daemon (`shortlink serve`).
pub struct Writer {
    child: Child,
}

impl Writer {
    pub fn start(dir: &Path, config_file: &Path, port: u16) -> Result<Self, String> {
        let log = fs::File::create(dir.join("writer.log")).map_err(|e| e.to_string())?;
        let child = Command::new(shortlink_binary()?)
            .args(["serve", "--config"])
            .arg(config_file)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start the writer: {e}"))?;
        let writer = Self { child };
        wait_for_port(port, Duration::from_secs(10))?;
        Ok(writer)
    }

    /// The writer's process id, to show it was never restarted.
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

pub fn start_varnish(dir: &Path, vcl: &Path, port: u16) -> Result<Varnish, String> {
    fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    Varnish::start_on(dir, vcl, port)
}

fn varnish_tool(program: &str, varnish: &Varnish, args: &[&str]) -> Result<String, String> {
    let workdir = varnish.workdir.display().to_string();
    let mut all = vec!["-n", workdir.as_str()];
    all.extend_from_slice(args);
    test_support::command_output(program, &all)
}

/// Every counter of `varnishstat -1 -j`.
pub fn counters(varnish: &Varnish) -> Result<HashMap<String, u64>, String> {
    let json = varnish_tool("varnishstat", varnish, &["-1", "-j"])?;
    let parsed: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| format!("varnishstat -j: {e}"))?;
    let counters = parsed
        .get("counters")
        .and_then(serde_json::Value::as_object)
        .ok_or("varnishstat -j printed no counters")?;
    Ok(counters
        .iter()
        .filter_map(|(name, c)| Some((name.clone(), c.get("value")?.as_u64()?)))
        .collect())
}

/// What shows that Varnish's child (the process that serves) is the same
/// one: its start count, deaths, panics and uptime, and the loaded VCLs.
#[derive(Debug)]
pub struct ChildState {
    pub child_start: u64,
    pub child_died: u64,
    pub child_panic: u64,
    pub uptime: u64,
    pub vcls: Vec<String>,
}

impl ChildState {
    pub fn read(varnish: &Varnish) -> Result<Self, String> {
        let c = counters(varnish)?;
        let get = |name: &str| c.get(name).copied().ok_or(format!("no counter {name}"));
        // Name and status of each VCL: a reload would add a name or make
        // another one active. (The busy count changes under load.)
        let vcls = varnish_tool("varnishadm", varnish, &["vcl.list"])?
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                format!(
                    "{} {}",
                    words.first().unwrap_or(&""),
                    words.last().unwrap_or(&"")
                )
            })
            .collect();
        Ok(Self {
            child_start: get("MGT.child_start")?,
            child_died: get("MGT.child_died")?,
            child_panic: get("MGT.child_panic")?,
            uptime: get("MAIN.uptime")?,
            vcls,
        })
    }

    /// Fails unless `self` (read `elapsed` after `before`) is the same child,
    /// never panicked, running the same VCLs.
    pub fn same_child_as(
        &self,
        before: &Self,
        elapsed: Duration,
        varnish: &Varnish,
    ) -> Result<(), String> {
        let panic = panic_show(varnish)?;
        if !panic.contains("Child has not panicked") {
            return Err(format!("panic.show: {panic}"));
        }
        if self.child_start != 1
            || before.child_start != 1
            || self.child_died != 0
            || self.child_panic != 0
            // A new child would have restarted its uptime.
            || self.uptime + 1 < before.uptime + elapsed.as_secs()
        {
            return Err(format!(
                "Varnish's child restarted: before {before:?}, after {self:?} ({elapsed:?} later)"
            ));
        }
        if self.vcls != before.vcls {
            return Err(format!(
                "the VCLs changed (a reload?): before {:?}, after {:?}",
                before.vcls, self.vcls
            ));
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        format!(
            "child_start {}, child_died {}, child_panic {}, uptime {} s, VCL {}",
            self.child_start,
            self.child_died,
            self.child_panic,
            self.uptime,
            self.vcls.join("; ")
        )
    }
}

/// `varnishadm panic.show`, which exits with an error when there is no
/// panic to show: its text is what tells.
fn panic_show(varnish: &Varnish) -> Result<String, String> {
    let output = Command::new("varnishadm")
        .arg("-n")
        .arg(&varnish.workdir)
        .arg("panic.show")
        .output()
        .map_err(|e| format!("varnishadm: {e}"))?;
    Ok(format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}
