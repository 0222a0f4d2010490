//! The real servers of one test — Redis, Varnish, the writer — each stopped
//! by its guard's `Drop`, so a failing test leaves no process behind.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use shortlink_core::Stored;
use test_support::{generate_vcl, shortlink_binary, Persistence, Redis, Varnish, Writer};

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

/// `redis-server` on the shipped `redis/redis.conf` (AOF, fsync on every
/// write), as `make run` runs it, with only its port and files set for the
/// test.
pub fn start_redis(dir: &Path) -> Result<Redis, String> {
    Redis::start(dir, Persistence::Shipped, "")
}

/// Every link under `prefix`, read back whole: key to URL. Links live in
/// the hashes named by the prefix and two key characters (split 2, as the
/// tests configure it); the owners' lists, click counts and the purge queue
/// under the same prefix are not links.
pub fn dump_links(redis: &Redis, prefix: &str) -> Result<BTreeMap<String, String>, String> {
    let mut hashes: Vec<String> = redis.query(&["KEYS", &format!("{prefix}*")])?;
    hashes.retain(|name| {
        let head = &name[prefix.len()..];
        head.len() == 2
            && head
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    let mut conn = redis.connection()?;
    let mut pipe = redis::pipe();
    for hash in &hashes {
        pipe.hgetall(hash);
    }
    let contents: Vec<BTreeMap<String, String>> =
        pipe.query(&mut conn).map_err(|e| format!("HGETALL: {e}"))?;
    Ok(hashes
        .iter()
        .zip(contents)
        .flat_map(|(hash, fields)| {
            let slot = &hash[prefix.len()..];
            fields
                .into_iter()
                .map(move |(field, value)| (format!("{slot}{field}"), url_of(value)))
        })
        .collect())
}

/// The URL a stored value leads to; the value itself when it is no link.
fn url_of(value: String) -> String {
    match Stored::parse(&value) {
        Ok(Stored::Link(record)) => record.url.to_string(),
        _ => value,
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
    pub fn begin(self, redis: &Redis) -> Result<(), String> {
        match self {
            Self::Hang => redis.hang(),
            Self::Kill => redis.kill(),
        }
    }

    /// Ends the fault; returns once Redis answers again (after a SIGCONT,
    /// it answers at once).
    pub fn end(self, redis: &Redis) -> Result<(), String> {
        match self {
            Self::Hang => redis.resume(),
            Self::Kill => redis.launch(),
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

/// Bearer token the writer exempts from its per-client rate limit: the
/// load would otherwise be refused with 429 after the first burst.
pub const ACCESS_TOKEN: &str = "fault-tests-token-9f1c2e7a5b3d4c6e8a0b";

/// The writer's configuration for a test: the one place to change when the
/// writer gains settings (see [`ACCESS_TOKEN`]). `varnish_port` is where
/// links are served and purged; `None` turns purging off.
pub fn writer_config(redis_url: &str, writer_port: u16, varnish_port: Option<u16>) -> String {
    let public = public_base(varnish_port);
    let purge = varnish_port.map_or_else(String::new, |p| format!("http://127.0.0.1:{p}"));
    format!(
        "listen = \"127.0.0.1:{writer_port}\"\n\
         public_base_url = \"{public}\"\n\
         [redis]\nurl = \"{redis_url}\"\n\
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

/// Writes the configuration into `dir` and the VCL `shortlink vcl`
/// generates from it; returns the configuration file and the VCL file.
pub fn configure(dir: &Path, config: &str) -> Result<(PathBuf, PathBuf), String> {
    let config_file = dir.join("shortlink.toml");
    fs::write(&config_file, config).map_err(|e| e.to_string())?;
    let vcl_file = dir.join("shortlink.vcl");
    generate_vcl(&shortlink_binary()?, &config_file, &vcl_file, &[])?;
    Ok((config_file, vcl_file))
}

/// The writer daemon (`shortlink serve`) of the release build.
pub fn start_writer(dir: &Path, config_file: &Path, port: u16) -> Result<Writer, String> {
    Writer::start(&shortlink_binary()?, dir, config_file, port, &[])
}

/// Every counter of `varnishstat -1 -j`.
pub fn counters(varnish: &Varnish) -> Result<HashMap<String, u64>, String> {
    let json = varnish.tool("varnishstat", &["-1", "-j"])?;
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
        let vcls = varnish
            .tool("varnishadm", &["vcl.list"])?
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
