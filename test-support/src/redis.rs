//! `redis-server` for every suite: on a free loopback port, in a directory of
//! its own, in the foreground (no `daemonize`, so it stays in the session
//! and scheduling group of the test that started it, as under systemd).
//!
//! Everything a launcher needs to know lives in that directory: the
//! configuration names the port and the pid file. So a second process (the
//! `redisctl` command VTC files call) can hang, kill and restart the same
//! server through [`Redis::attach`], with the same code.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::{
    command_output, free_port, on_free_ports, poll_until, ready_or_failed, repo_root, spawn_logged,
};

/// How long a start may take: the shipped configuration replays its AOF first.
const START_WITHIN: Duration = Duration::from_secs(10);
/// How long a `SIGTERM` may take before `SIGKILL`.
const STOP_WITHIN: Duration = Duration::from_secs(5);

/// What the server keeps on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persistence {
    /// Nothing: a scratch store for tests of serving and writing.
    Scratch,
    /// The shipped `redis/redis.conf`, as `make run` runs it: an AOF with
    /// `appendfsync always`, so a restart finds every acknowledged write.
    Shipped,
}

pub struct Redis {
    pub dir: PathBuf,
    pub port: u16,
    /// `redis://127.0.0.1:<port>/0`
    pub url: String,
    config: PathBuf,
    /// The process this one started, kept only to reap it: whoever started
    /// the server, it is found through its pid file.
    child: Mutex<Option<Child>>,
    /// Made by [`Redis::start`], so stopped when dropped. `redisctl`
    /// attaches for one action and must leave the server running.
    owner: bool,
}

impl Redis {
    /// Starts Redis with its files in `dir`; `extra` is appended to its
    /// configuration.
    pub fn start(dir: &Path, persistence: Persistence, extra: &str) -> Result<Self, String> {
        Self::start_with(dir, persistence, || Ok(extra.to_owned()))
    }

    /// [`Redis::start`] with `extra` written anew for each try, for settings
    /// that hold ports of their own (a cluster node's bus port).
    ///
    /// A server that finds a port taken is started again on others.
    pub fn start_with(
        dir: &Path,
        persistence: Persistence,
        extra: impl Fn() -> Result<String, String>,
    ) -> Result<Self, String> {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let config = dir.join("redis.conf");
        let log = dir.join("redis.log");
        let base = match persistence {
            Persistence::Shipped => format!(
                "include {}\n",
                repo_root().join("redis/redis.conf").display()
            ),
            Persistence::Scratch => "save \"\"\nappendonly no\n".to_owned(),
        };
        on_free_ports(&log, || {
            let port = free_port()?;
            fs::write(
                &config,
                format!(
                    "{base}port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\n\
                     pidfile {dir}/redis.pid\nlogfile {log}\n{extra}",
                    dir = dir.display(),
                    log = log.display(),
                    extra = extra()?
                ),
            )
            .map_err(|e| format!("{}: {e}", config.display()))?;
            let mut redis = Self::attach(&config)?;
            redis.owner = true;
            redis.launch()?;
            Ok(redis)
        })
    }

    /// A Sentinel with its files in `dir`: `monitor` holds its `sentinel`
    /// lines. It rewrites its configuration as it learns the group.
    pub fn start_sentinel(dir: &Path, monitor: &str) -> Result<Self, String> {
        Self::start(dir, Persistence::Scratch, monitor)
    }

    /// The server `config` (written by [`Redis::start`]) describes, running
    /// or not.
    pub fn attach(config: &Path) -> Result<Self, String> {
        let text = fs::read_to_string(config).map_err(|e| format!("{}: {e}", config.display()))?;
        let setting = |name: &str| {
            text.lines()
                .filter_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
                .next_back()
                .map(str::trim)
                .ok_or_else(|| format!("{}: no `{name}` line", config.display()))
        };
        let port: u16 = setting("port")?
            .parse()
            .map_err(|e| format!("{}: port: {e}", config.display()))?;
        Ok(Self {
            dir: PathBuf::from(setting("dir")?),
            port,
            url: format!("redis://127.0.0.1:{port}/0"),
            config: config.to_path_buf(),
            child: Mutex::new(None),
            owner: false,
        })
    }

    /// Whether its configuration makes it a Sentinel.
    fn is_sentinel(&self) -> bool {
        fs::read_to_string(&self.config).is_ok_and(|text| {
            text.lines()
                .any(|line| line.starts_with("sentinel monitor "))
        })
    }

    /// The configuration file, for [`Redis::attach`] in another process.
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// `redis-cli` options that reach this server.
    pub fn cli_command(&self) -> String {
        format!("redis-cli -h 127.0.0.1 -p {}", self.port)
    }

    /// Starts the process and returns once it answers `PING` (its AOF, if
    /// any, loaded).
    pub fn launch(&self) -> Result<(), String> {
        if let Some(pid) = self.pid() {
            return Err(format!("Redis is running already (pid {pid})"));
        }
        // Its own log is `logfile`; what lands here first is why it would
        // not start.
        let log_path = self.dir.join("redis.log");
        let mut command = Command::new("redis-server");
        command.arg(&self.config);
        if self.is_sentinel() {
            command.arg("--sentinel");
        }
        inherit_only_stdio(&mut command);
        let child = spawn_logged(&mut command, &log_path, "redis-server")?;
        let child = ready_or_failed(
            child,
            "redis-server",
            START_WITHIN,
            &log_path,
            "answer PING",
            || self.ping(),
        )?;
        let mut held = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(mut previous) = held.replace(child) {
            // Killed earlier, maybe by another process: reap it.
            let _ = previous.wait();
        }
        Ok(())
    }

    /// The running server's process id, from its pid file.
    pub fn pid(&self) -> Option<u32> {
        let pid: u32 = fs::read_to_string(self.dir.join("redis.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        is_alive(pid).then_some(pid)
    }

    /// Whether it answers `PING` at once.
    pub fn ping(&self) -> bool {
        self.connection()
            .and_then(|mut conn| {
                redis::cmd("PING")
                    .query::<String>(&mut conn)
                    .map_err(|e| e.to_string())
            })
            .is_ok_and(|answer| answer == "PONG")
    }

    /// A new connection, with timeouts so a hung server fails the test
    /// instead of holding it.
    pub fn connection(&self) -> Result<redis::Connection, String> {
        let client = redis::Client::open(self.url.as_str()).map_err(|e| e.to_string())?;
        let conn = client
            .get_connection_with_timeout(Duration::from_secs(1))
            .map_err(|e| format!("Redis on port {}: {e}", self.port))?;
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .and_then(|()| conn.set_write_timeout(Some(Duration::from_secs(10))))
            .map_err(|e| e.to_string())?;
        Ok(conn)
    }

    /// Runs one command, e.g. `query::<Option<String>>(&["HGET", hash, field])`.
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> Result<T, String> {
        let (name, rest) = args.split_first().ok_or("no command")?;
        let mut command = redis::cmd(name);
        for arg in rest {
            command.arg(*arg);
        }
        command
            .query(&mut self.connection()?)
            .map_err(|e| format!("{args:?}: {e}"))
    }

    /// `SIGSTOP`: the server hangs, its connections stay open.
    pub fn hang(&self) -> Result<(), String> {
        self.signal("STOP")
    }

    /// `SIGCONT`: a hung server answers again at once.
    pub fn resume(&self) -> Result<(), String> {
        self.signal("CONT")
    }

    /// `SIGKILL`; returns once the process is gone. Its data stays for
    /// [`Redis::launch`].
    pub fn kill(&self) -> Result<(), String> {
        let pid = self.pid().ok_or("Redis is not running")?;
        self.signal("KILL")?;
        wait_until_gone(pid, STOP_WITHIN)?;
        self.reap();
        let _ = fs::remove_file(self.dir.join("redis.pid"));
        Ok(())
    }

    /// Brings the server back to answering, whatever a test left it in:
    /// resumed if hung, started again if killed. A test that fails halfway
    /// through a fault then leaves no fault to the next one.
    pub fn revive(&self) -> Result<(), String> {
        if self.pid().is_none() {
            return self.launch();
        }
        self.resume()?;
        if poll_until(START_WITHIN, || self.ping()) {
            Ok(())
        } else {
            Err(format!(
                "Redis on port {} runs but does not answer PING",
                self.port
            ))
        }
    }

    /// `SIGTERM` (after `SIGCONT`, should it hang), then `SIGKILL` if it
    /// takes too long.
    pub fn shutdown(&self) -> Result<(), String> {
        let Some(pid) = self.pid() else {
            self.reap();
            return Ok(());
        };
        let _ = self.signal("CONT");
        self.signal("TERM")?;
        if wait_until_gone(pid, STOP_WITHIN).is_err() {
            self.signal("KILL")?;
            wait_until_gone(pid, STOP_WITHIN)?;
        }
        self.reap();
        Ok(())
    }

    fn signal(&self, name: &str) -> Result<(), String> {
        let pid = self.pid().ok_or("Redis is not running")?;
        command_output("kill", &[&format!("-{name}"), &pid.to_string()]).map(drop)
    }

    /// Collects the exit of the process this one started, once it is gone.
    fn reap(&self) {
        let mut held = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        if held
            .as_mut()
            .is_some_and(|child| child.try_wait().is_ok_and(|status| status.is_some()))
        {
            *held = None;
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if self.owner {
            if let Err(message) = self.shutdown() {
                eprintln!("warning: Redis on port {}: {message}", self.port);
            }
        }
    }
}

/// Keeps every inherited descriptor but 0, 1 and 2 from the server. A VTC
/// `shell` command inherits `varnishtest`'s pipes to `varnishd`; a server
/// holding them open would keep `varnishtest` waiting at the end of the test.
fn inherit_only_stdio(command: &mut Command) {
    // SAFETY: runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: `close_range` is one system call
    // and touches no memory. With CLOEXEC it closes nothing before the exec,
    // so the descriptors `Command` itself uses stay valid until then.
    unsafe {
        command.pre_exec(|| {
            let flags = libc::c_int::try_from(libc::CLOSE_RANGE_CLOEXEC).unwrap_or_default();
            if libc::close_range(3, libc::c_uint::MAX, flags) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

/// Whether `pid` runs: a zombie (killed, not yet reaped by its parent) does not.
fn is_alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the command name, which is in parentheses.
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with(['Z', 'X']))
    })
}

fn wait_until_gone(pid: u32, within: Duration) -> Result<(), String> {
    if poll_until(within, || !is_alive(pid)) {
        Ok(())
    } else {
        Err(format!("Redis (pid {pid}) still runs after {within:?}"))
    }
}
