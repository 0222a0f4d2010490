//! The link store against the suite's Redis: keys, growth on collision,
//! custom keys, concurrent writers.

use std::collections::{HashMap, HashSet};
use std::process::Command;

use shortlink_core::digest_key;
use shortlink_writer::config::Settings;
use shortlink_writer::links::shortener::{ShortenError, Shortener};
use shortlink_writer::links::store::{Inserted, StoreError};

use crate::common::{block_on, ensure, Suite};

/// Shortens `url` with a fresh shortener (and connection) under `prefix`.
fn shorten_once(
    suite: &Suite,
    prefix: &str,
    url: &str,
    key: Option<&str>,
) -> Result<Inserted, ShortenError> {
    block_on(async { suite.shortener(prefix).shorten(url, key).await })
}

pub fn same_url_same_key(suite: &Suite) -> Result<(), String> {
    let url = "https://example.org/determinism";
    let first = shorten_once(suite, "t-same:", url, None).map_err(|e| e.to_string())?;
    let again = shorten_once(suite, "t-same:", url, None).map_err(|e| e.to_string())?;
    let expected = &digest_key(url)[..4];
    ensure(
        matches!(&first, Inserted::Created(link) if link.key == expected),
        || format!("first insert: {first:?}, expected key {expected}"),
    )?;
    ensure(
        matches!(&again, Inserted::Existing(link) if link.key == expected),
        || format!("second insert: {again:?}"),
    )?;
    let stored: Option<String> = suite.redis.query(&[
        "HGET",
        &format!("t-same:{}", &expected[..2]),
        &expected[2..],
    ])?;
    ensure(stored.as_deref() == Some(url), || {
        format!("Redis holds {stored:?}")
    })
}

pub fn grows_on_collision(suite: &Suite) -> Result<(), String> {
    let url = "https://example.org/collision";
    let digest = digest_key(url);
    let hash = format!("t-grow:{}", &digest[..2]);
    // Someone else's URL already sits in the 4- and 5-character slots.
    suite
        .redis
        .query::<()>(&["HSET", &hash, &digest[2..4], "https://other.example/4"])?;
    suite
        .redis
        .query::<()>(&["HSET", &hash, &digest[2..5], "https://other.example/5"])?;
    let inserted = shorten_once(suite, "t-grow:", url, None).map_err(|e| e.to_string())?;
    ensure(
        matches!(&inserted, Inserted::Created(link) if link.key == digest[..6]),
        || {
            format!(
                "expected the 6-character key {}, got {inserted:?}",
                &digest[..6]
            )
        },
    )?;
    let again = shorten_once(suite, "t-grow:", url, None).map_err(|e| e.to_string())?;
    ensure(
        matches!(&again, Inserted::Existing(link) if link.key == digest[..6]),
        || format!("re-submission gave {again:?}"),
    )?;
    let untouched: Option<String> = suite.redis.query(&["HGET", &hash, &digest[2..4]])?;
    ensure(
        untouched.as_deref() == Some("https://other.example/4"),
        || format!("the 4-character slot was overwritten: {untouched:?}"),
    )
}

pub fn custom_keys(suite: &Suite) -> Result<(), String> {
    let first = shorten_once(
        suite,
        "t-custom:",
        "https://example.org/talk",
        Some("my-talk"),
    );
    ensure(
        matches!(first, Ok(Inserted::Created(ref l)) if l.key == "my-talk"),
        || format!("{first:?}"),
    )?;
    let again = shorten_once(
        suite,
        "t-custom:",
        "https://example.org/talk",
        Some("my-talk"),
    );
    ensure(matches!(again, Ok(Inserted::Existing(_))), || {
        format!("{again:?}")
    })?;
    let taken = shorten_once(
        suite,
        "t-custom:",
        "https://example.org/other",
        Some("my-talk"),
    );
    ensure(
        matches!(taken, Err(ShortenError::Store(StoreError::KeyTaken { ref key })) if key == "my-talk"),
        || format!("{taken:?}"),
    )?;
    let stored: Option<String> = suite.redis.query(&["HGET", "t-custom:my", "-talk"])?;
    ensure(
        stored.as_deref() == Some("https://example.org/talk"),
        || format!("conflict changed the stored URL: {stored:?}"),
    )
}

/// 16 writers, 200 distinct URLs each, split 1 and 3-character keys, so that
/// the 64 hashes are shared by everyone and slots collide.
pub fn concurrent_distinct_urls(suite: &Suite) -> Result<(), String> {
    let mut config = suite.settings("t-conc:", 1).config;
    config.min_generated_key_length = 3;
    let settings = Settings::new(config).map_err(|e| e.to_string())?;
    let threads: Vec<_> = (0..16)
        .map(|thread| {
            let settings = settings.clone();
            std::thread::spawn(move || {
                block_on(async {
                    let shortener = Shortener::new(settings).expect("shortener");
                    let mut links = Vec::new();
                    for i in 0..200 {
                        let url = format!("https://example.org/concurrent/{thread}/{i}");
                        let inserted = shortener.shorten(&url, None).await;
                        links.push((url, inserted.map_err(|e| e.to_string())));
                    }
                    links
                })
            })
        })
        .collect();
    let mut keys = HashSet::new();
    let mut longer = 0;
    let mut links = Vec::new();
    for thread in threads {
        for (url, inserted) in thread.join().map_err(|_| "a writer thread panicked")? {
            let Ok(Inserted::Created(link)) = inserted else {
                return Err(format!("{url}: {inserted:?}"));
            };
            ensure(keys.insert(link.key.clone()), || {
                format!("key {} given twice", link.key)
            })?;
            longer += usize::from(link.key.len() > 3);
            links.push((url, link.key));
        }
    }
    block_on(async {
        let shortener = Shortener::new(settings).map_err(|e| e.to_string())?;
        for (url, key) in &links {
            let default = shortener.domain(None).map_err(|e| e.to_string())?;
            let (stored, _) = shortener
                .show(default, key)
                .await
                .map_err(|e| e.to_string())?;
            ensure(stored.record.url.as_str() == url, || {
                format!("{key} holds {stored:?}, expected {url}")
            })?;
        }
        Ok::<_, String>(())
    })?;
    ensure(keys.len() == 3200, || {
        format!("{} links stored", keys.len())
    })?;
    // With 3200 URLs in 64^3 three-character keys, some digests collide;
    // those links must have grown past three characters.
    ensure(longer > 0, || {
        "no collision happened; the test proves nothing".into()
    })?;
    eprintln!("    {longer} of 3200 links needed a longer key");
    Ok(())
}

/// 16 writers submitting the same URL at once: one creates it, all agree.
pub fn concurrent_same_url(suite: &Suite) -> Result<(), String> {
    let settings = suite.settings("t-race:", 2);
    let results: Vec<_> = (0..16)
        .map(|_| {
            let settings = settings.clone();
            std::thread::spawn(move || {
                block_on(async {
                    let shortener = Shortener::new(settings).expect("shortener");
                    shortener.shorten("https://example.org/race", None).await
                })
                .map_err(|e| e.to_string())
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect::<Result<_, _>>()?;
    let created = results
        .iter()
        .filter(|r| matches!(r, Inserted::Created(_)))
        .count();
    let keys: HashSet<_> = results.iter().map(|r| r.link().key.clone()).collect();
    ensure(created == 1 && keys.len() == 1, || {
        format!("{created} creations, keys {keys:?}")
    })
}

/// `make bench` writes its links straight into Redis, with keys it chooses
/// itself (`make_links` in `bench/bench.py`): they must be the keys the
/// writer would choose, or the bench would measure another store.
pub fn bench_keys_are_the_writers(suite: &Suite) -> Result<(), String> {
    // Enough links that some 4-character keys collide and have to grow.
    const LINKS: usize = 20_000;
    let script = format!(
        "import json, sys; sys.path.insert(0, 'bench'); import bench; \
         print(json.dumps(bench.make_links({LINKS}, 'keys-check')))"
    );
    let output = Command::new("python3")
        .args(["-c", &script])
        .current_dir(test_support::repo_root())
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    ensure(output.status.success(), || {
        format!(
            "bench.make_links failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let links: Vec<(String, String)> = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("bench.make_links printed no links: {e}"))?;
    ensure(links.len() == LINKS, || format!("{} links", links.len()))?;
    for (key, url) in &links {
        let digest = digest_key(url);
        ensure(digest.starts_with(key.as_str()), || {
            format!("the bench's key {key} for {url} is no prefix of the writer's digest {digest}")
        })?;
    }
    // Only links whose shortest key collides depend on the order of
    // inserts: those go through the writer, in the bench's order.
    let mut sharing: HashMap<String, usize> = HashMap::new();
    for (_, url) in &links {
        *sharing.entry(digest_key(url)[..4].to_owned()).or_default() += 1;
    }
    let colliding: Vec<&(String, String)> = links
        .iter()
        .filter(|(_, url)| sharing[&digest_key(url)[..4]] > 1)
        .collect();
    ensure(colliding.iter().any(|(key, _)| key.len() > 4), || {
        "no key grew past 4 characters: the check would prove nothing".to_owned()
    })?;
    block_on(async {
        let shortener = suite.shortener("t-bench:");
        for (key, url) in colliding {
            let inserted = shortener
                .shorten(url, None)
                .await
                .map_err(|e| e.to_string())?;
            ensure(&inserted.link().key == key, || {
                format!(
                    "the writer gave {url} the key {}, the bench {key}",
                    inserted.link().key
                )
            })?;
        }
        Ok(())
    })
}
