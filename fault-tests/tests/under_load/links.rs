//! Short links for the redirect tests: stored straight into Redis, warmed
//! into Varnish's cache, and requested under load.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use test_support::Redis;

use crate::http::Client;
use crate::load::{ms, Record, Sequence, Worker};
use crate::stack::{COMMAND_TIMEOUT, MARGIN, PREFIX};

/// Alphabet of keys, so links spread over many hashes as real ones do.
const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// `count` links whose keys start with two characters spread over the
/// alphabet, then `tag`, then their number; targets are public-looking.
pub fn make(tag: &str, count: usize) -> Arc<Vec<(String, String)>> {
    Arc::new(
        (0..count)
            .map(|i| {
                let first = char::from(ALPHABET[i % 64]);
                let second = char::from(ALPHABET[(i / 64) % 64]);
                (
                    format!("{first}{second}{tag}{i}"),
                    format!("https://example.org/fault/{tag}/{i}"),
                )
            })
            .collect(),
    )
}

/// `HSET <prefix><2 chars> <rest> <url>` for every link, pipelined.
pub fn store(redis: &Redis, links: &[(String, String)]) -> Result<(), String> {
    let mut conn = redis.connection()?;
    for chunk in links.chunks(2000) {
        // One round trip (and one fsync under `appendfsync always`) per chunk.
        let mut pipe = redis::pipe();
        for (key, url) in chunk {
            pipe.hset(format!("{PREFIX}{}", &key[..2]), &key[2..], url);
        }
        let added: Vec<u32> = pipe.query(&mut conn).map_err(|e| format!("HSET: {e}"))?;
        if let Some(position) = added.iter().position(|&fields| fields != 1) {
            return Err(format!(
                "HSET of {} added {} fields, not 1",
                chunk[position].0, added[position]
            ));
        }
    }
    Ok(())
}

/// What `warm` answers each link's requests with: its first answered from
/// its lookup alone (Varnish caches a key from its second request), its
/// second fetched and cached, its third from the cache.
const WARMING: [&str; 3] = ["MISS", "MISS", "HIT"];

/// Requests `warm` makes per link, each a click counted.
pub const WARMING_REQUESTS: u64 = WARMING.len() as u64;

/// Requests every link until it is a hit: a 301 from Redis twice, then the
/// same from cache.
pub fn warm(port: u16, links: &[(String, String)]) -> Result<(), String> {
    let mut client = Client::new(port, Duration::from_secs(5));
    for (key, url) in links {
        for expected in WARMING {
            let response = client
                .get(&format!("/l/{key}"))
                .map_err(|e| format!("warming {key}: {e}"))?;
            let cache = response.header("x-cache").unwrap_or_default();
            if response.status != 301
                || response.header("location") != Some(url.as_str())
                || cache != expected
            {
                return Err(format!(
                    "warming {key}: {} {:?} {cache}, expected 301 {url} {expected}",
                    response.status,
                    response.header("location")
                ));
            }
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// In Varnish's cache before the run.
    Cached,
    /// Never requested before: each request of the run asks for a new key.
    Fresh,
}

/// One short-link request of a run.
#[derive(Debug, Clone)]
pub struct Hit {
    pub class: Class,
    pub key: usize,
    /// 0: no answer (connection refused or broken).
    pub status: u16,
    /// A 301 carried the link's URL as `Location`.
    pub right_location: bool,
    pub from_cache: bool,
}

/// A worker requesting `links` round-robin, shared by its threads.
pub fn cycling(links: &Arc<Vec<(String, String)>>) -> Worker<Hit> {
    let links = Arc::clone(links);
    let next = AtomicUsize::new(0);
    Arc::new(move |client: &mut Client| {
        let key = next.fetch_add(1, Ordering::Relaxed) % links.len();
        Some(request(client, &links, key, Class::Cached))
    })
}

/// A worker requesting each of `links` once, in order, shared by its
/// threads; it has nothing left to send when they are all used.
pub fn once_each(links: &Arc<Vec<(String, String)>>) -> Worker<Hit> {
    let links = Arc::clone(links);
    let sequence = Sequence::new(links.len());
    Arc::new(move |client: &mut Client| {
        let key = sequence.take()?;
        Some(request(client, &links, key, Class::Fresh))
    })
}

fn request(client: &mut Client, links: &[(String, String)], key: usize, class: Class) -> Hit {
    let (name, url) = &links[key];
    match client.get(&format!("/l/{name}")) {
        Ok(response) => Hit {
            class,
            key,
            status: response.status,
            right_location: response.header("location") == Some(url.as_str()),
            from_cache: response.header("x-cache") == Some("HIT"),
        },
        Err(_) => Hit {
            class,
            key,
            status: 0,
            right_location: false,
            from_cache: false,
        },
    }
}

/// The longest a 503 may take: the lookup timeout plus scheduling slack.
pub fn max_503_latency() -> Duration {
    COMMAND_TIMEOUT + MARGIN
}

/// Statuses of `records` as `301×n 503×m` (`error` for no answer).
pub fn tally<'a>(records: impl IntoIterator<Item = &'a Record<Hit>>) -> String {
    let mut counts = BTreeMap::new();
    for record in records {
        *counts.entry(record.what.status).or_insert(0_usize) += 1;
    }
    if counts.is_empty() {
        return "none".into();
    }
    let mut text = String::new();
    for (status, count) in counts {
        let name = if status == 0 {
            "error".to_owned()
        } else {
            status.to_string()
        };
        let _ = write!(
            text,
            "{}{name}×{count}",
            if text.is_empty() { "" } else { " " }
        );
    }
    text
}

/// Checks that holds for every run: a cached link is always a 301 hit
/// with its own URL; any other answer is a 301 with the right URL or a
/// 503 within the lookup timeout.
pub fn check_every_answer(records: &[Record<Hit>]) -> Result<(), String> {
    for record in records {
        let hit = &record.what;
        let fine = match (hit.class, hit.status) {
            (Class::Cached, 301) => hit.right_location && hit.from_cache,
            (Class::Fresh, 301) => hit.right_location,
            (Class::Fresh, 503) => record.latency <= max_503_latency(),
            _ => false,
        };
        if !fine {
            return Err(format!(
                "at {}: {hit:?} after {} (a 503 may take at most {})",
                ms(record.sent),
                ms(record.latency),
                ms(max_503_latency())
            ));
        }
    }
    Ok(())
}

/// The longest latency among `records`.
pub fn max_latency<'a>(records: impl IntoIterator<Item = &'a Record<Hit>>) -> Duration {
    records
        .into_iter()
        .map(|r| r.latency)
        .max()
        .unwrap_or_default()
}

/// How fresh keys came back after Redis did at `back` (from the start of
/// the run): when the last failed answer arrived, and when the first 301
/// after it did; both from `back`.
pub struct Recovery {
    pub last_failure: Option<Duration>,
    pub first_success: Duration,
}

impl Recovery {
    pub fn of(records: &[Record<Hit>], back: Duration) -> Result<Self, String> {
        let fresh = || records.iter().filter(|r| r.what.class == Class::Fresh);
        let last_failure = fresh()
            .filter(|r| r.what.status != 301 && r.done() > back)
            .map(Record::done)
            .max();
        let normal_from = last_failure.unwrap_or(back);
        let first_success = fresh()
            .filter(|r| r.what.status == 301 && r.done() > normal_from)
            .map(Record::done)
            .min()
            .ok_or("no fresh key was served after Redis came back")?;
        Ok(Self {
            last_failure: last_failure.map(|t| t.saturating_sub(back)),
            first_success: first_success.saturating_sub(back),
        })
    }

    pub fn describe(&self) -> String {
        match self.last_failure {
            Some(last) => format!(
                "recovered in {} (last 503 answered at +{}, first 301 after it at +{})",
                ms(self.first_success),
                ms(last),
                ms(self.first_success)
            ),
            None => format!(
                "recovered in {} (no 503 after it, first 301 at +{})",
                ms(self.first_success),
                ms(self.first_success)
            ),
        }
    }
}
