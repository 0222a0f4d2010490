//! Hangs, kills and restarts a suite's Redis from a VTC `shell` command,
//! through the launcher every suite uses:
//!
//! ```text
//! redisctl CONFIG start|stop|cont|kill
//! ```
//!
//! `CONFIG` is the file `test_support::Redis::start` wrote (the `${redisctl}`
//! macro names it). Data goes in with `redis-cli`, as an operator's would.

use std::path::Path;
use std::process::ExitCode;

use test_support::Redis;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [config, action] = args.as_slice() else {
        eprintln!("usage: redisctl CONFIG start|stop|cont|kill");
        return ExitCode::from(2);
    };
    let outcome = Redis::attach(Path::new(config)).and_then(|redis| match action.as_str() {
        "start" => redis.launch(),
        "stop" => redis.hang(),
        "cont" => redis.resume(),
        "kill" => redis.kill(),
        other => Err(format!("unknown action {other}: start, stop, cont or kill")),
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("redisctl: {message}");
            ExitCode::FAILURE
        }
    }
}
