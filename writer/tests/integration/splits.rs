//! A split through the suite's Varnish, as many visitors see it: the
//! shares its weights promise, each visitor kept on one target, and every
//! click counted under the target it was sent to.

use std::thread;
use std::time::{Duration, Instant};

use crate::common::{ensure, Suite};

/// Visitors of the split: each a user agent of its own, from loopback.
const VISITORS: u32 = 10_000;

/// Threads asking at once, each for its share of the visitors.
const THREADS: u32 = 4;

/// 10,000 visitors of a 50/50 split, each asking twice: each target gets
/// 50 % ± 3 % of them, every visitor's second answer is its first, and the
/// link's details count each target's clicks.
pub fn a_fifty_fifty_split_holds_over_10000_visitors_and_keeps_each(
    suite: &Suite,
) -> Result<(), String> {
    let (a, b) = ("https://example.org/split/a", "https://example.org/split/b");
    // Written by hand, as the storage format allows.
    suite.redis.query::<i64>(&[
        "HSET",
        "short:Sp",
        "lt5050",
        &format!("https://example.org/split/own *50>{a} *50>{b}"),
    ])?;
    let url = format!("{}/l/Splt5050", suite.varnish.base_url());
    let workers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let url = url.clone();
            thread::spawn(move || -> Result<(u32, u32), String> {
                let agent = Suite::agent();
                let ask = |visitor: u32| -> Result<String, String> {
                    let answer = agent
                        .get(&url)
                        .header(
                            "user-agent",
                            format!(
                                "Mozilla/5.0 (X11; Linux x86_64; rv:126.0) Gecko/20100101 \
                                 Firefox/126.0 visitor/{visitor}"
                            ),
                        )
                        .call()
                        .map_err(|e| format!("GET {url}: {e}"))?;
                    answer
                        .headers()
                        .get("location")
                        .and_then(|location| location.to_str().ok())
                        .map(str::to_owned)
                        .ok_or_else(|| format!("GET {url}: {} without a Location", answer.status()))
                };
                let mut sent_to_a = 0;
                let mut moved = 0;
                for visitor in (thread..VISITORS).step_by(THREADS as usize) {
                    let first = ask(visitor)?;
                    if ask(visitor)? != first {
                        moved += 1;
                    }
                    sent_to_a += u32::from(first.ends_with("/a"));
                }
                Ok((sent_to_a, moved))
            })
        })
        .collect();
    let (mut sent_to_a, mut moved) = (0, 0);
    for worker in workers {
        let (a, m) = worker.join().map_err(|_| "a visitor thread panicked")??;
        sent_to_a += a;
        moved += m;
    }
    let sent_to_b = VISITORS - sent_to_a;
    ensure(moved == 0, || {
        format!("{moved} visitors moved to the other target")
    })?;
    // ±3 % of 10,000 visitors: 4,850 to 5,150 each.
    ensure((4_850..=5_150).contains(&sent_to_a), || {
        format!("{sent_to_a} visitors sent to {a}, {sent_to_b} to {b}")
    })?;
    // Each visitor's two clicks counted under its target, within a few
    // flushes (other tests may hold Redis meanwhile).
    let expected = (2 * sent_to_a, 2 * sent_to_b);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let count = |field: &str| -> Result<u32, String> {
            let stored: Option<u32> =
                suite
                    .redis
                    .query(&["HGET", "short:details:Splt5050", field])?;
            Ok(stored.unwrap_or(0))
        };
        let counted = (count("target:s1")?, count("target:s2")?);
        if counted == expected {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "clicks per target {counted:?}, not {expected:?} (a, b)"
            ));
        }
        thread::sleep(Duration::from_millis(200));
    }
}
