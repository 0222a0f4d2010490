//! Clicks counted by Varnish, read back through the writer's API.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use shortlink_core::clicks::ClickTime;
use shortlink_writer::access::Identity;

use crate::common::{
    api, block_on, create, ensure, run_writer, varnish_get, Suite, ADMIN_TOKEN, ALICE_TOKEN,
    BOB_TOKEN, GO_ALIAS, GO_DOMAIN, PURGE_SECRET, TEST_TOKEN,
};

pub const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
pub const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) \
    AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";

/// Follows the short link `key` through Varnish as a browser with
/// `user_agent` would, coming from `referer`.
pub fn click(
    suite: &Suite,
    key: &str,
    user_agent: &str,
    referer: Option<&str>,
) -> Result<(), String> {
    click_on(&suite.varnish.base_url(), key, user_agent, referer)
}

/// [`click`] through the Varnish at `varnish` (`http://host:port`).
pub fn click_on(
    varnish: &str,
    key: &str,
    user_agent: &str,
    referer: Option<&str>,
) -> Result<(), String> {
    let url = format!("{varnish}/l/{key}");
    let mut request = Suite::agent().get(&url).header("user-agent", user_agent);
    if let Some(referer) = referer {
        request = request.header("referer", referer);
    }
    let response = request.call().map_err(|e| format!("GET {url}: {e}"))?;
    ensure(response.status().as_u16() == 301, || {
        format!("GET {url}: {}", response.status())
    })
}

/// `key`'s statistics as `token` reads them, once `done` holds for them (or
/// what they are after 15 s: Varnish flushes every second, but other tests
/// hang this suite's Redis for a while).
pub fn stats_once(
    suite: &Suite,
    key: &str,
    token: &str,
    done: impl Fn(&Value) -> bool,
) -> Result<Value, String> {
    read_once(suite, &format!("/api/links/{key}/stats"), token, done)
}

/// What `GET path` answers `token` once `done` holds for it, as for
/// [`stats_once`].
pub fn read_once(
    suite: &Suite,
    path: &str,
    token: &str,
    done: impl Fn(&Value) -> bool,
) -> Result<Value, String> {
    let started = Instant::now();
    loop {
        let answer = api(suite, "GET", path, Some(token), None, None)?;
        if answer.status == 200 && done(&answer.body) {
            return Ok(answer.body);
        }
        if started.elapsed() > Duration::from_secs(15) {
            return Err(format!("GET {path}: {} {}", answer.status, answer.body));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn share<'v>(stats: &'v Value, kind: &str, name: &str) -> Option<&'v Value> {
    stats[kind]
        .as_array()?
        .iter()
        .find(|entry| entry["name"] == name)
        .map(|entry| &entry["clicks"])
}

pub fn stats_count_people_and_bots_apart(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/clicks/stats" }),
    )?;
    // One miss, then hits: all counted.
    for _ in 0..3 {
        click(
            suite,
            &key,
            FIREFOX,
            Some("https://news.example.com/item?id=1"),
        )?;
    }
    click(suite, &key, IPHONE, None)?;
    click(suite, &key, "curl/8.5.0", None)?;
    click(suite, &key, "Mozilla/5.0 (compatible; Googlebot/2.1)", None)?;
    let stats = stats_once(suite, &key, ALICE_TOKEN, |s| {
        s["clicks"] == 4 && s["bots"] == 2
    })?;
    let today = stats["days"].as_array().and_then(|d| d.last()).cloned();
    let this_hour = stats["hours"].as_array().and_then(|h| h.last()).cloned();
    ensure(
        stats["gone"] == 0
            && stats["days"].as_array().map(Vec::len) == Some(30)
            && today
                .as_ref()
                .is_some_and(|d| d["clicks"] == 4 && d["visitors"] == 2)
            && this_hour.is_some_and(|h| h["clicks"] == 4)
            && stats["visitors"] == 2
            && share(&stats, "referrers", "news.example.com") == Some(&json!(3))
            && share(&stats, "referrers", "(none)") == Some(&json!(1))
            && share(&stats, "devices", "desktop") == Some(&json!(3))
            && share(&stats, "devices", "mobile") == Some(&json!(1))
            && share(&stats, "browsers", "Firefox") == Some(&json!(3))
            && share(&stats, "os", "iOS") == Some(&json!(1))
            && share(&stats, "countries", "NL") == Some(&json!(4)),
        || format!("stats: {stats}"),
    )?;
    // Only the owner and admins may read them, like changing the link.
    let path = format!("/api/links/{key}/stats");
    let bob = api(suite, "GET", &path, Some(BOB_TOKEN), None, None)?;
    let nobody = api(suite, "GET", &path, None, None, None)?;
    let admin = api(
        suite,
        "GET",
        &format!("{path}?days=7"),
        Some(ADMIN_TOKEN),
        None,
        None,
    )?;
    ensure(
        bob.status == 403 && nobody.status == 401 && admin.status == 200,
        || {
            format!(
                "bob {}, nobody {}, admin {}",
                bob.status, nobody.status, admin.status
            )
        },
    )?;
    ensure(
        admin.body["days"].as_array().map(Vec::len) == Some(7) && admin.body["clicks"] == 4,
        || format!("admin, 7 days: {}", admin.body),
    )?;
    for bad in ["days=0", "days=401", "days=x", "weeks=2"] {
        let refused = api(
            suite,
            "GET",
            &format!("{path}?{bad}"),
            Some(ALICE_TOKEN),
            None,
            None,
        )?;
        ensure(refused.status == 422, || {
            format!("{bad}: {} {}", refused.status, refused.body)
        })?;
    }
    let unknown = api(
        suite,
        "GET",
        "/api/links/Nope0/stats",
        Some(ADMIN_TOKEN),
        None,
        None,
    )?;
    ensure(unknown.status == 404, || {
        format!("unknown key: {}", unknown.status)
    })
}

pub fn trending_ranks_recent_clicks(suite: &Suite) -> Result<(), String> {
    let hot = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/clicks/hot" }),
    )?;
    // Another holder's link: not bob's, whose listing another test checks
    // link for link.
    let warm = create(
        suite,
        Some(TEST_TOKEN),
        &json!({ "url": "https://example.org/clicks/warm" }),
    )?;
    for _ in 0..6 {
        click(suite, &hot, FIREFOX, None)?;
    }
    for _ in 0..5 {
        click(suite, &warm, FIREFOX, None)?;
    }
    stats_once(suite, &hot, ADMIN_TOKEN, |s| s["clicks"] == 6)?;
    stats_once(suite, &warm, ADMIN_TOKEN, |s| s["clicks"] == 5)?;
    let rank = |token: &str| -> Result<Vec<(String, u64)>, String> {
        let answer = api(
            suite,
            "GET",
            "/api/trending?minutes=5&limit=100",
            Some(token),
            None,
            None,
        )?;
        ensure(answer.status == 200, || answer.body.to_string())?;
        Ok(answer.body["links"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| {
                (
                    l["key"].as_str().unwrap_or_default().to_owned(),
                    l["clicks"].as_u64().unwrap_or(0),
                )
            })
            .collect())
    };
    let everyone = rank(ADMIN_TOKEN)?;
    let position = |key: &str| everyone.iter().position(|(k, _)| k == key);
    ensure(
        everyone.contains(&(hot.clone(), 6))
            && everyone.contains(&(warm.clone(), 5))
            && position(&hot) < position(&warm),
        || format!("admin's trending: {everyone:?}"),
    )?;
    let alices = rank(ALICE_TOKEN)?;
    ensure(
        alices.contains(&(hot.clone(), 6)) && !alices.iter().any(|(k, _)| *k == warm),
        || format!("alice's trending: {alices:?}"),
    )?;
    let refused = api(
        suite,
        "GET",
        "/api/trending?minutes=61",
        Some(ADMIN_TOKEN),
        None,
        None,
    )?;
    ensure(refused.status == 422, || refused.body.to_string())?;
    // Varnish reached Redis lately: the writer's metrics say how lately.
    let metrics = Suite::agent()
        .get(&format!("{}/metrics", suite.writer_url))
        .call()
        .map_err(|e| e.to_string())?
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    let lag: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("shortlink_click_flush_lag_seconds "))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no flush lag in\n{metrics}"))?;
    ensure((0.0..5.0).contains(&lag), || format!("flush lag {lag}"))
}

/// Debian's `prometheus-varnish-exporter`, pointed at the suite's Varnish,
/// serves the VMOD's click counters beside Varnish's own.
pub fn varnish_exporter_carries_the_click_counters(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/clicks/exported" }),
    )?;
    click(suite, &key, FIREFOX, None)?;
    stats_once(suite, &key, ALICE_TOKEN, |s| s["clicks"] == 1)?;
    // The click counters reach varnishstat with the next answer.
    click(suite, &key, FIREFOX, None)?;
    let port = test_support::free_port()?;
    let mut exporter = std::process::Command::new("prometheus-varnish-exporter")
        .arg("-n")
        .arg(&suite.varnish.workdir)
        .arg("-web.listen-address")
        .arg(format!("127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("prometheus-varnish-exporter (scripts/install-deps.sh test): {e}"))?;
    let url = format!("http://127.0.0.1:{port}/metrics");
    let started = Instant::now();
    let scraped = loop {
        let answer = Suite::agent().get(&url).call();
        if let Ok(mut response) = answer {
            break response
                .body_mut()
                .read_to_string()
                .map_err(|e| e.to_string());
        }
        if started.elapsed() > Duration::from_secs(10) {
            break Err(format!("{url} never answered"));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = exporter.kill();
    let _ = exporter.wait();
    let text = scraped?;
    let counter = |name: &str| {
        text.lines()
            .filter(|l| !l.starts_with('#') && l.contains(name))
            .find_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    ensure(
        counter("clicks_counted").is_some_and(|n| n >= 1.0)
            && counter("clicks_flushed").is_some_and(|n| n >= 1.0)
            && counter("clicks_dropped").is_some()
            && counter("varnish_main_client_req").is_some(),
        || {
            let ours: Vec<&str> = text.lines().filter(|l| l.contains("shortlink")).collect();
            format!("exporter output lacks the click counters: {ours:#?}")
        },
    )
}

/// The links a new cache is warmed with: those clicked in the last hour by
/// their clicks then, then the rest by their clicks of all time.
pub fn hottest_are_recent_then_all_time(suite: &Suite) -> Result<(), String> {
    let prefix = "t-hot:";
    let names = suite.settings(prefix, 2).count_names;
    // Written as Varnish writes them (the layout is the contract).
    for (key, clicks) in [("Aaaa", "50"), ("Bbbb", "5"), ("Cccc", "30"), ("Dddd", "1")] {
        suite.redis.query::<()>(&[
            "HSET",
            &format!("{prefix}clicks:{}", &key[..2]),
            &key[2..],
            clicks,
        ])?;
    }
    let minute = names.minute_hash(ClickTime::now().minute());
    suite
        .redis
        .query::<()>(&["HSET", &minute, "Bbbb", "3", "Eeee", "1"])?;
    for (limit, expected) in [
        (1, &["Bbbb"][..]),
        (4, &["Bbbb", "Eeee", "Aaaa", "Cccc"][..]),
        (10, &["Bbbb", "Eeee", "Aaaa", "Cccc", "Dddd"][..]),
    ] {
        let hottest = block_on(async {
            let shortener = suite.shortener(prefix);
            shortener
                .hottest(&shortener.settings.domains[0], limit)
                .await
        })
        .map_err(|e| e.to_string())?;
        ensure(hottest == expected, || {
            format!("hottest {limit}: {hottest:?}, expected {expected:?}")
        })?;
    }
    Ok(())
}

/// With `[clicks] redis_url`, the writer reads every count there (stats,
/// trending, hottest), never the links' Redis; links stay where they are.
pub fn clicks_apart_are_read_in_their_redis(suite: &Suite) -> Result<(), String> {
    let prefix = "t-apart:";
    let clicks_url = format!("redis://127.0.0.1:{}/1", suite.redis.port);
    let settings = suite.settings_with(prefix, 2, |config| {
        config.clicks.redis_url.clone_from(&clicks_url);
    });
    let (scheme, names) = (settings.scheme.clone(), settings.count_names.clone());
    let admin = Identity::admin(shortlink_core::Owner::try_from("ops").map_err(|e| e.to_string())?);
    // One runtime: the shortener's connections live on the one that made them.
    block_on(async {
        let shortener = shortlink_writer::links::shortener::Shortener::new(settings)
            .map_err(|e| e.to_string())?;
        let inserted = shortener
            .shorten("https://example.org/apart", None)
            .await
            .map_err(|e| e.to_string())?;
        let key = scheme
            .key(&inserted.link().key)
            .map_err(|e| e.to_string())?;
        let (head, field) = (scheme.head(&key), scheme.field(&key));
        let totals = format!("{prefix}clicks:{head}");
        let mut clicks = redis::Client::open(clicks_url.as_str())
            .and_then(|client| client.get_connection())
            .map_err(|e| e.to_string())?;
        redis::pipe()
            .hset(&totals, field, 7)
            .hset(
                names.minute_hash(ClickTime::now().minute()),
                key.as_str(),
                7,
            )
            .query::<()>(&mut clicks)
            .map_err(|e| e.to_string())?;
        // Counts in the links' Redis are no longer read.
        suite.redis.query::<()>(&["HSET", &totals, field, "100"])?;
        let (stats, record) = shortener
            .stats(
                &admin,
                &shortener.settings.domains[0],
                key.as_str(),
                Some(1),
            )
            .await
            .map_err(|e| e.to_string())?;
        let trending = shortener
            .trending(&admin, None, Some(5), Some(10))
            .await
            .map_err(|e| e.to_string())?;
        let hottest = shortener
            .hottest(shortener.domain(None).map_err(|e| e.to_string())?, 10)
            .await
            .map_err(|e| e.to_string())?;
        ensure(
            stats.clicks == 7
                && record.is_some()
                && trending
                    .iter()
                    .map(|t| (t.key.as_str(), t.clicks))
                    .eq([(key.as_str(), 7)])
                && hottest == [key.to_string()],
            || {
                format!(
                    "stats {} clicks, trending {trending:?}, hottest {hottest:?}",
                    stats.clicks
                )
            },
        )
    })
}

/// With `[clicks] redis_url`, a link with a click limit gets a copy of its
/// people's clicks next to the links, where Varnish reads it (no lookup
/// waits behind the clicks' Redis): 0 for a new link, the clicks stored so
/// far for a link given a limit by an edit; none for a link without one.
pub fn limited_links_get_a_copy_of_their_count_next_to_the_links(
    suite: &Suite,
) -> Result<(), String> {
    use shortlink_writer::links::shortener::{Change, NewLink, Shortener};
    let prefix = "t-copy:";
    let clicks_url = format!("redis://127.0.0.1:{}/1", suite.redis.port);
    let settings = suite.settings_with(prefix, 2, |config| {
        config.clicks.redis_url.clone_from(&clicks_url);
    });
    let admin = Identity::admin(shortlink_core::Owner::try_from("ops").map_err(|e| e.to_string())?);
    let totals = format!("{prefix}clicks:cp");
    let copy = |field: &str| {
        suite
            .redis
            .query::<Option<String>>(&["HGET", &totals, field])
    };
    block_on(async {
        let shortener = Shortener::new(settings).map_err(|e| e.to_string())?;
        let domain = shortener.domain(None).map_err(|e| e.to_string())?.clone();
        for (key, max_clicks) in [("cplimited", Some(5)), ("cpplain", None)] {
            let new = NewLink {
                url: "https://example.org/copy",
                key: Some(key),
                max_clicks,
                ..Default::default()
            };
            shortener
                .create(&new, None)
                .await
                .map_err(|e| e.to_string())?;
        }
        ensure(copy("limited")?.as_deref() == Some("0"), || {
            format!("a new limited link's copy: {:?}", copy("limited"))
        })?;
        ensure(copy("plain")?.is_none(), || {
            "a copy for a link without a limit".into()
        })?;
        let mut clicks = redis::Client::open(clicks_url.as_str())
            .and_then(|client| client.get_connection())
            .map_err(|e| e.to_string())?;
        redis::cmd("HSET")
            .arg(&totals)
            .arg("plain")
            .arg(4)
            .query::<()>(&mut clicks)
            .map_err(|e| e.to_string())?;
        let limit = Change {
            max_clicks: Some(Some(10)),
            ..Default::default()
        };
        shortener
            .edit(&admin, &domain, "cpplain", &limit, None)
            .await
            .map_err(|e| e.to_string())?;
        ensure(copy("plain")?.as_deref() == Some("4"), || {
            format!(
                "a link given a limit: copy {:?}, 4 clicks stored",
                copy("plain")
            )
        })
    })
}

/// Ranking recent clicks reads the minute hashes in pieces, yet ranks as
/// one union of them would: totals summed over the window, most first,
/// ties by key. Minutes larger than a piece, overlapping, with many ties;
/// the oldest a sorted set, as VMODs from before 2026-11-27 wrote them.
pub fn ranking_in_pieces_equals_the_union(suite: &Suite) -> Result<(), String> {
    let prefix = "t-rank:";
    let names = suite.settings(prefix, 2).count_names;
    let now = ClickTime::now();
    let mut expected: HashMap<String, u64> = HashMap::new();
    // A fixed pseudo-random walk: reproducible, and no two runs differ.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    // The oldest is 58 minutes old: still in the hour's window if the
    // minute turns while the test runs.
    for minutes_ago in [0, 1, 30, 58] {
        let minute = names.minute_hash(now.before(minutes_ago * 60).minute());
        let sorted_set = minutes_ago == 58;
        let verb = if sorted_set { "ZADD" } else { "HSET" };
        let mut command = vec![verb.to_owned(), minute];
        let mut members = HashSet::new();
        for _ in 0..4000 {
            let key = format!("R{:05}", next(6000));
            let clicks = 1 + next(3);
            if !members.insert(key.clone()) {
                continue;
            }
            if sorted_set {
                command.extend([clicks.to_string(), key.clone()]);
            } else {
                command.extend([key.clone(), clicks.to_string()]);
            }
            *expected.entry(key).or_default() += clicks;
        }
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        suite.redis.query::<()>(&args)?;
    }
    let mut expected: Vec<(String, u64)> = expected.into_iter().collect();
    expected.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let hottest = block_on(async {
        let shortener = suite.shortener(prefix);
        shortener
            .hottest(&shortener.settings.domains[0], expected.len() + 10)
            .await
    })
    .map_err(|e| e.to_string())?;
    let order: Vec<&str> = expected.iter().map(|(key, _)| key.as_str()).collect();
    ensure(hottest == order, || {
        let differs = hottest.iter().zip(&order).position(|(a, b)| a != b);
        format!(
            "hottest has {} links, the union {}; first difference at {differs:?}",
            hottest.len(),
            order.len()
        )
    })?;
    let admin = Identity::admin(shortlink_core::Owner::try_from("ops").map_err(|e| e.to_string())?);
    let trending = block_on(async {
        suite
            .shortener(prefix)
            .trending(&admin, None, Some(60), Some(100))
            .await
    })
    .map_err(|e| e.to_string())?;
    let trending: Vec<(String, u64)> = trending.into_iter().map(|t| (t.key, t.clicks)).collect();
    ensure(trending == expected[..100], || {
        format!(
            "trending: {:?}, expected {:?}",
            &trending[..5],
            &expected[..5]
        )
    })
}

/// `shortlink warm` fetches the hottest links into a cache that lost them,
/// and those fetches are not clicks.
pub fn warm_fills_the_cache_without_clicks(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/clicks/warm" }),
    )?;
    click(suite, &key, FIREFOX, None)?;
    click(suite, &key, FIREFOX, None)?;
    stats_once(suite, &key, ALICE_TOKEN, |s| s["clicks"] == 2)?;
    // Varnish forgets the link, as a restarted one would have.
    let url = format!("{}/l/{key}", suite.varnish.base_url());
    // (ureq sends no PURGE: the request is written by hand.)
    let address = suite.varnish.base_url().replace("http://", "");
    let mut varnish = TcpStream::connect(&address).map_err(|e| format!("{address}: {e}"))?;
    write!(
        varnish,
        "PURGE /l/{key} HTTP/1.1\r\nHost: {address}\r\nShortlink-Secret: {PURGE_SECRET}\r\n\
         Connection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    varnish
        .read_to_string(&mut answer)
        .map_err(|e| e.to_string())?;
    ensure(answer.starts_with("HTTP/1.1 200"), || {
        format!("PURGE: {answer}")
    })?;
    let config = suite.config_file.display().to_string();
    let printed = run_writer(&["warm", "--config", &config])?;
    ensure(printed.starts_with("warmed "), || {
        format!("shortlink warm printed {printed:?}")
    })?;
    let response = Suite::agent()
        .get(&url)
        .header("user-agent", FIREFOX)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let cache = response
        .headers()
        .get("x-cache")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    ensure(response.status() == 301 && cache == "HIT", || {
        format!("after warming: {} {cache}", response.status())
    })?;
    // That click is counted; the warming fetch is not, flushes later or not.
    stats_once(suite, &key, ALICE_TOKEN, |s| s["clicks"] == 3)?;
    std::thread::sleep(Duration::from_millis(2500));
    let stats = stats_once(suite, &key, ALICE_TOKEN, |_| true)?;
    ensure(stats["clicks"] == 3 && stats["bots"] == 0, || {
        format!("after warming and one click: {stats}")
    })
}

/// Clicks `url` as a browser until it leads to the sold-out fallback;
/// its redirects, and how many of them came from the cache.
fn click_until_sold_out(url: &str, most: u64) -> Result<(u64, u64), String> {
    let agent = Suite::agent();
    let (mut redirects, mut cached) = (0, 0);
    for _ in 0..most {
        let response = agent
            .get(url)
            .header("user-agent", FIREFOX)
            .call()
            .map_err(|e| format!("GET {url}: {e}"))?;
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        match response.status().as_u16() {
            301 => redirects += 1,
            302 if header("location").ends_with("/sold-out") => return Ok((redirects, cached)),
            other => return Err(format!("GET {url}: {other}")),
        }
        if header("x-cache") == "HIT" {
            cached += 1;
        }
    }
    Err(format!(
        "GET {url}: still redirecting after {most} clicks of one client"
    ))
}

/// A link with `max_clicks` answers its redirect that many times, then as
/// an expired link. Counting is batched, so the bound is stated and tested:
/// one Varnish adds the clicks it counted and has not stored yet, so it
/// overshoots by at most the requests it has in flight at once (here the
/// clients: each waits for its answer before the next request).
pub fn click_limit_overshoots_by_at_most_the_requests_in_flight(
    suite: &Suite,
) -> Result<(), String> {
    const LIMIT: u64 = 40;
    const CLIENTS: u64 = 8;
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({
            "url": "https://example.org/clicks/limited",
            "max_clicks": LIMIT,
            "expired_url": "https://example.org/clicks/sold-out",
        }),
    )?;
    // The same limited link again is a new link, with clicks of its own.
    let again = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({
            "url": "https://example.org/clicks/limited",
            "max_clicks": LIMIT,
            "expired_url": "https://example.org/clicks/sold-out",
        }),
    )?;
    ensure(again != key, || format!("both limited links got {key}"))?;
    let shown = api(
        suite,
        "GET",
        &format!("/api/links/{key}"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    ensure(shown.body["max_clicks"] == LIMIT, || {
        format!("the link shows {}", shown.body)
    })?;
    let url = format!("{}/l/{key}", suite.varnish.base_url());
    // Every client clicks until it is sent to the fallback.
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || click_until_sold_out(&url, LIMIT))
        })
        .collect();
    let (mut redirects, mut cached) = (0, 0);
    for client in clients {
        let (r, c) = client
            .join()
            .map_err(|_| "a client panicked".to_owned())??;
        redirects += r;
        cached += c;
    }
    ensure(cached == 0, || {
        format!("{cached} redirects came from the cache")
    })?;
    ensure((LIMIT..LIMIT + CLIENTS).contains(&redirects), || {
        format!("{redirects} redirects for a limit of {LIMIT} and {CLIENTS} clients")
    })?;
    // Once stored, the count is what was answered, and the limit still holds.
    let stats = stats_once(suite, &key, ALICE_TOKEN, |s| {
        s["clicks"] == redirects && s["gone"] == CLIENTS
    })?;
    ensure(
        stats["max_clicks"] == LIMIT && stats["clicks_left"] == 0,
        || format!("stats {stats}"),
    )?;
    let after = Suite::agent()
        .get(&url)
        .header("user-agent", FIREFOX)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    ensure(after.status().as_u16() == 302, || {
        format!("after the flush: {}", after.status())
    })?;
    // Raising the limit opens the link again at once.
    let raised = api(
        suite,
        "PATCH",
        &format!("/api/links/{key}"),
        Some(ALICE_TOKEN),
        None,
        Some(&json!({ "max_clicks": null })),
    )?;
    ensure(
        raised.status == 200 && raised.body["max_clicks"].is_null(),
        || format!("removing the limit: {} {}", raised.status, raised.body),
    )?;
    click(suite, &key, FIREFOX, None)
}

/// A ranking of recent clicks is kept for `TRENDING_KEPT` per window,
/// limit and caller: a click counted between two calls is not seen by the
/// second (no ranking was made for it), nor until the kept one expires;
/// other parameters get a ranking of their own at once.
pub fn trending_is_kept_a_few_seconds_per_query(suite: &Suite) -> Result<(), String> {
    use actix_web::http::header;
    use actix_web::test as actix_test;
    use shortlink_writer::clicks::TRENDING_KEPT;
    use shortlink_writer::config::AccessToken;
    let settings = suite.settings_with("t-trendkept:", 2, |config| {
        config
            .access
            .tokens
            .push(AccessToken::named("ops", ADMIN_TOKEN, true));
    });
    let minute_hash = settings.count_names.minute_hash(ClickTime::now().minute());
    let count = |key: &str, clicks: u32| {
        suite
            .redis
            .query::<()>(&["HINCRBY", &minute_hash, key, &clicks.to_string()])
    };
    actix_web::rt::System::new().block_on(async {
        let shortener = shortlink_writer::links::shortener::Shortener::new(settings)
            .map_err(|e| e.to_string())?;
        let app = api_app!(shortener);
        let rank = |limit: u32| {
            actix_test::TestRequest::get()
                .uri(&format!("/api/trending?minutes=5&limit={limit}"))
                .insert_header((header::AUTHORIZATION, format!("Bearer {ADMIN_TOKEN}")))
        };
        let ranked = |body: &Value| -> Vec<(String, u64)> {
            body["links"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|l| {
                    (
                        l["key"].as_str().unwrap_or_default().to_owned(),
                        l["clicks"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        };
        count("kept1", 3)?;
        let (status, first) = call!(app, rank(10));
        let made = Instant::now();
        let once = vec![("kept1".to_owned(), 3)];
        ensure(status == 200 && ranked(&first) == once, || {
            format!("the first ranking: {status} {first}")
        })?;
        count("kept1", 4)?;
        count("kept2", 9)?;
        let (status, again) = call!(app, rank(10));
        ensure(
            status == 200 && ranked(&again) == once && made.elapsed() < TRENDING_KEPT,
            || format!("within {TRENDING_KEPT:?}, the kept ranking: {status} {again}"),
        )?;
        let anew = vec![("kept2".to_owned(), 9), ("kept1".to_owned(), 7)];
        let (status, other) = call!(app, rank(11));
        ensure(status == 200 && ranked(&other) == anew, || {
            format!("another limit, ranked anew: {status} {other}")
        })?;
        actix_web::rt::time::sleep(TRENDING_KEPT.saturating_sub(made.elapsed())).await;
        let (status, later) = call!(app, rank(10));
        ensure(status == 200 && ranked(&later) == anew, || {
            format!("after {TRENDING_KEPT:?}, the new ranking: {status} {later}")
        })
    })
}

/// Clicks are counted per domain: the same key on two domains has counts
/// of its own on each, its statistics name their domain, and trending on
/// one domain ranks that domain's links alone.
pub fn stats_are_kept_per_domain(suite: &Suite) -> Result<(), String> {
    let key = "clkDom1";
    for domain in [None, Some(GO_DOMAIN)] {
        let mut body = json!({
            "url": format!("https://example.org/clicks/domain/{}", domain.unwrap_or("default")),
            "key": key,
        });
        if let Some(domain) = domain {
            body["domain"] = json!(domain);
        }
        create(suite, Some(ALICE_TOKEN), &body)?;
    }
    for host in [GO_DOMAIN, GO_ALIAS] {
        let (status, _) = varnish_get(suite, host, &format!("/{key}"), FIREFOX)?;
        ensure(status == 301, || format!("{host}: {status}"))?;
    }
    click(suite, key, FIREFOX, None)?;
    let stats_of = |query: &str, clicks: u64| -> Result<Value, String> {
        let started = Instant::now();
        loop {
            let answer = api(
                suite,
                "GET",
                &format!("/api/links/{key}/stats{query}"),
                Some(ALICE_TOKEN),
                None,
                None,
            )?;
            if answer.status == 200 && answer.body["clicks"] == clicks {
                return Ok(answer.body);
            }
            if started.elapsed() > Duration::from_secs(15) {
                return Err(format!("stats{query}: {} {}", answer.status, answer.body));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let go = stats_of(&format!("?domain={GO_DOMAIN}"), 2)?;
    let default = stats_of("", 1)?;
    ensure(
        go["domain"] == GO_DOMAIN && default["domain"] == "127.0.0.1",
        || format!("go {go}\ndefault {default}"),
    )?;
    let trending = api(
        suite,
        "GET",
        &format!("/api/trending?domain={GO_ALIAS}&minutes=60&limit=100"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    let links = trending.body["links"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    ensure(
        links.iter().all(|link| link["domain"] == GO_DOMAIN)
            && links
                .iter()
                .any(|link| link["key"] == key && link["clicks"] == 2),
        || format!("trending on {GO_DOMAIN}: {}", trending.body),
    )
}
