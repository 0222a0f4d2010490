//! Runs every VTC suite under `varnish-tests/` with `varnishtest`, against
//! the release build of the VMOD, the shipped VCL and a real `redis-server`.
//!
//! Each suite directory gets one Redis, started once on a free loopback port
//! and shut down at the end. Tests of the `serving` suite share theirs and run
//! in parallel; tests of the `faults` suite hang, kill and restart theirs and
//! measure how fast Varnish answers meanwhile, so each runs alone.
//!
//! Every test sees these macros:
//! - `${vcl}`: the shipped VCL, pointed at the suite's Redis;
//! - `${vcl_short_ttl}`: the same with a 2s TTL and 1s negative TTL;
//! - `${vmod_path}`: a `vmod_path` that finds `shortlink` and Varnish's own VMODs;
//! - `${redis_url}`, `${redis_port}`, `${redis_socket}` (its unix socket),
//!   `${redis_password}` (of the ACL user `shortlink`), and `${redisctl}`
//!   (a command: `start|stop|cont|kill|cli ARGS`).

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::{Arc, PoisonError, RwLock};

use libtest_mimic::{Arguments, Failed, Trial};

const SHIPPED_REDIS_URL: &str = "redis://127.0.0.1:6380/0";

/// Password of the ACL user `shortlink` every suite's Redis has, beside the
/// password-less default user.
const TEST_PASSWORD: &str = "s3cret-for-tests";

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crate lives in the workspace")
        .to_path_buf();
    let setup = match Setup::new(&root) {
        Ok(setup) => setup,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };

    let mut trials = Vec::new();
    let exclusive = Arc::new(RwLock::new(()));
    let mut servers = Vec::new();
    for (suite, serial) in [("serving", false), ("faults", true)] {
        let dir = root.join("varnish-tests").join(suite);
        let files = vtc_files(&dir);
        if files.is_empty() {
            continue;
        }
        let server = match RedisServer::start(&setup, suite) {
            Ok(server) => server,
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::FAILURE;
            }
        };
        let macros = match setup.macros_for(&server) {
            Ok(macros) => Arc::new(macros),
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::FAILURE;
            }
        };
        for file in files {
            let name = format!(
                "{suite}::{}",
                file.file_stem().unwrap_or_default().to_string_lossy()
            );
            let macros = Arc::clone(&macros);
            let exclusive = Arc::clone(&exclusive);
            let work = setup.work.clone();
            trials.push(Trial::test(name, move || {
                if serial {
                    let _alone = exclusive.write().unwrap_or_else(PoisonError::into_inner);
                    run_varnishtest(&file, &macros, &work)
                } else {
                    let _shared = exclusive.read().unwrap_or_else(PoisonError::into_inner);
                    run_varnishtest(&file, &macros, &work)
                }
            }));
        }
        servers.push(server);
    }

    let conclusion = libtest_mimic::run(&args, trials);
    drop(servers);
    conclusion.exit_code()
}

struct Setup {
    root: PathBuf,
    work: PathBuf,
    vmod_path: String,
}

impl Setup {
    fn new(root: &Path) -> Result<Self, String> {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| root.join("target"), PathBuf::from);
        let release = target.join("release");
        if !release.join("libvmod_shortlink.so").exists() {
            return Err(format!(
                "{} not found: build it first with `make build`",
                release.join("libvmod_shortlink.so").display()
            ));
        }
        let varnish_vmods = command_output("pkg-config", &["--variable=vmoddir", "varnishapi"])
            .map_err(|e| format!("cannot find Varnish's VMOD directory: {e}"))?;
        let work = target.join("vtc-work").join(std::process::id().to_string());
        fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
        Ok(Self {
            root: root.to_path_buf(),
            work,
            vmod_path: format!("{}:{}", release.display(), varnish_vmods.trim()),
        })
    }

    fn macros_for(&self, redis: &RedisServer) -> Result<Vec<(String, String)>, String> {
        let shipped = self.root.join("vcl").join("shortlink.vcl");
        let vcl = fs::read_to_string(&shipped)
            .map_err(|e| format!("{}: {e}", shipped.display()))?;
        if !vcl.contains(SHIPPED_REDIS_URL) {
            return Err(format!("{} no longer names {SHIPPED_REDIS_URL}", shipped.display()));
        }
        let vcl = vcl.replace(SHIPPED_REDIS_URL, &redis.url);
        let short_ttl = vcl
            .replace("ttl = 86400s,", "ttl = 2s,")
            .replace("negative_ttl = 60s,", "negative_ttl = 1s,");
        let vcl_file = redis.dir.join("shortlink.vcl");
        let short_file = redis.dir.join("shortlink-short-ttl.vcl");
        for (file, text) in [(&vcl_file, &vcl), (&short_file, &short_ttl)] {
            fs::write(file, text).map_err(|e| format!("{}: {e}", file.display()))?;
        }
        let redisctl = format!(
            "{} {}",
            self.root.join("varnish-tests/redisctl").display(),
            redis.config.display()
        );
        Ok(vec![
            ("vcl".into(), vcl_file.display().to_string()),
            ("vcl_short_ttl".into(), short_file.display().to_string()),
            ("vmod_path".into(), self.vmod_path.clone()),
            ("redis_url".into(), redis.url.clone()),
            ("redis_port".into(), redis.port.to_string()),
            ("redis_socket".into(), redis.dir.join("redis.sock").display().to_string()),
            ("redis_password".into(), TEST_PASSWORD.into()),
            ("redisctl".into(), redisctl),
        ])
    }
}

fn vtc_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "vtc"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn run_varnishtest(file: &Path, macros: &[(String, String)], work: &Path) -> Result<(), Failed> {
    let mut cmd = Command::new("varnishtest");
    cmd.arg("-t").arg("60").arg("-b").arg("1M");
    for (name, value) in macros {
        cmd.arg("-D").arg(format!("{name}={value}"));
    }
    cmd.arg(file).current_dir(work);
    let output = cmd
        .output()
        .map_err(|e| format!("cannot run varnishtest (is Varnish installed?): {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let log = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    Err(format!(
        "varnishtest {} failed ({}):\n{}{}",
        file.display(),
        output.status,
        tail(&log, 120),
        err
    )
    .into())
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n") + "\n"
}

fn command_output(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!("{program} {args:?} failed: {}", output.status))
    }
}

/// A `redis-server` of one suite, on a free loopback port, stopped on drop.
struct RedisServer {
    dir: PathBuf,
    config: PathBuf,
    port: u16,
    url: String,
    redisctl: PathBuf,
}

impl RedisServer {
    fn start(setup: &Setup, suite: &str) -> Result<Self, String> {
        let dir = setup.work.join(suite);
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let port = free_port()?;
        let config = dir.join("redis.conf");
        fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\ndaemonize yes\npidfile {dir}/redis.pid\n\
                 dir {dir}\nlogfile {dir}/redis.log\nsave \"\"\nappendonly no\n\
                 unixsocket {dir}/redis.sock\nunixsocketperm 777\n\
                 user shortlink on >{TEST_PASSWORD} ~* +@all\n",
                dir = dir.display()
            ),
        )
        .map_err(|e| format!("{}: {e}", config.display()))?;
        let server = Self {
            dir,
            config,
            port,
            url: format!("redis://127.0.0.1:{port}/0"),
            redisctl: setup.root.join("varnish-tests/redisctl"),
        };
        server.ctl("start")?;
        Ok(server)
    }

    fn ctl(&self, action: &str) -> Result<(), String> {
        let status = Command::new(&self.redisctl)
            .arg(&self.config)
            .arg(action)
            .status()
            .map_err(|e| format!("{}: {e}", self.redisctl.display()))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("redisctl {action} failed ({status}); see {}/redis.log", self.dir.display()))
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Err(message) = self.ctl("shutdown") {
            eprintln!("warning: {message}");
        }
    }
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}
