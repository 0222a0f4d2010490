//! Faults on the writing side: Redis away while inserts keep coming, and
//! Redis killed right after a burst of acknowledged inserts.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use test_support::{free_port, Redis, Varnish};

use crate::http::Client;
use crate::load::{ms, Load, Phase, Record, Sequence, Timeline, Worker};
use crate::stack::{
    configure, dump_links, insert_headers, public_base, start_redis, start_writer, writer_config,
    Fault, TestDir, MARGIN, PREFIX, WRITE_TIMEOUT,
};

/// What one `POST /api/links` got.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// 201 (created) or 200 (already there), with the link as sent.
    Acked { key: String, created: bool },
    /// 503 with a JSON error saying Redis is unreachable, or that too few
    /// replicas confirmed the insert.
    Unreachable,
    /// Anything else: never allowed.
    Other(String),
}

#[derive(Debug, Clone)]
pub struct Insert {
    pub url: String,
    pub outcome: Outcome,
}

/// Target of the `n`-th insert of a test.
fn target(tag: &str, n: usize) -> String {
    format!("https://example.org/fault/{tag}/{n}")
}

/// A worker inserting `target(tag, n)` for n = 0, 1, ... up to `count`.
pub fn inserter(tag: &str, count: usize, public_base: String) -> Worker<Insert> {
    let tag = tag.to_owned();
    let sequence = Arc::new(Sequence::new(count));
    let headers = insert_headers();
    Arc::new(move |client: &mut Client| {
        let url = target(&tag, sequence.take()?);
        let body = serde_json::json!({ "url": url }).to_string();
        let outcome = match client.post_json("/api/links", &headers, &body) {
            Ok(response) => classify(response.status, &response.body, &url, &public_base),
            Err(e) => Outcome::Other(format!("no answer: {e}")),
        };
        Some(Insert { url, outcome })
    })
}

fn classify(status: u16, body: &[u8], url: &str, public_base: &str) -> Outcome {
    let text = String::from_utf8_lossy(body);
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Outcome::Other(format!("{status} with a body that is not JSON: {text}"));
    };
    match status {
        200 | 201 => {
            let key = json["key"].as_str().unwrap_or_default();
            let short = format!("{public_base}{key}");
            if key.len() < 3 || json["url"] != url || json["short_url"] != short.as_str() {
                return Outcome::Other(format!("{status} {text}"));
            }
            Outcome::Acked {
                key: key.to_owned(),
                created: status == 201,
            }
        }
        // Redis away, or (with replicas_to_ack) too few replicas confirmed.
        503 if json["error"].as_str().is_some_and(|e| {
            e.contains("Redis") && (e.contains("unreachable") || e.contains("replicas confirmed"))
        }) =>
        {
            Outcome::Unreachable
        }
        _ => Outcome::Other(format!("{status} {text}")),
    }
}

/// Acknowledged links as key → URL; fails if one key was given to two URLs.
pub fn acknowledged(records: &[Record<Insert>]) -> Result<BTreeMap<String, String>, String> {
    let mut acked = BTreeMap::new();
    for record in records {
        if let Outcome::Acked { key, .. } = &record.what.outcome {
            if let Some(other) = acked.insert(key.clone(), record.what.url.clone()) {
                if other != record.what.url {
                    return Err(format!(
                        "key {key} acknowledged for {other} and {}",
                        record.what.url
                    ));
                }
            }
        }
    }
    Ok(acked)
}

/// What the store holds against what was acknowledged: links missing or
/// wrong (described), and links stored but never acknowledged (key, URL).
pub fn compare<'a>(
    acked: &BTreeMap<String, String>,
    stored: &'a BTreeMap<String, String>,
) -> (Vec<String>, Vec<(&'a String, &'a String)>) {
    let lost = acked
        .iter()
        .filter(|(key, url)| stored.get(*key) != Some(url))
        .map(|(key, url)| format!("{key} → {url} (stored: {:?})", stored.get(key)))
        .collect();
    let extra = stored
        .iter()
        .filter(|(key, _)| !acked.contains_key(*key))
        .collect();
    (lost, extra)
}

/// Outcomes of `records` as `201×n 200×n 503×n other×n`.
pub fn count<'a>(records: impl IntoIterator<Item = &'a Record<Insert>>) -> String {
    let (mut created, mut existing, mut unreachable, mut other) = (0, 0, 0, 0);
    for r in records {
        match r.what.outcome {
            Outcome::Acked { created: true, .. } => created += 1,
            Outcome::Acked { created: false, .. } => existing += 1,
            Outcome::Unreachable => unreachable += 1,
            Outcome::Other(_) => other += 1,
        }
    }
    format!("201×{created} 200×{existing} 503×{unreachable} other×{other}")
}

/// How the inserts of a run around a fault were answered.
struct Answers {
    max_503: Duration,
    /// Outcomes of inserts sent once Redis was surely away and answered
    /// before it was back.
    while_down: String,
    /// From Redis being back: the last 503, and the first acknowledgement
    /// after it.
    failed_after: Option<Duration>,
    first_ack: Duration,
}

impl Answers {
    /// Every insert answered 201/200 or 503 "unreachable" (within the write
    /// timeout); only 503 while Redis was away; normal within a second of
    /// Redis answering again.
    fn check(
        records: &[Record<Insert>],
        timeline: &Timeline,
        clients: usize,
    ) -> Result<Self, String> {
        let back = timeline.back;
        let unreachable = |r: &&Record<Insert>| matches!(r.what.outcome, Outcome::Unreachable);
        for r in records {
            if let Outcome::Other(answer) = &r.what.outcome {
                return Err(format!(
                    "at {}, {} answered {answer}",
                    ms(r.sent),
                    r.what.url
                ));
            }
        }
        let max_503 = records
            .iter()
            .filter(unreachable)
            .map(|r| r.latency)
            .max()
            .unwrap_or_default();
        if max_503 > WRITE_TIMEOUT + MARGIN {
            return Err(format!(
                "a 503 took {}, over the write timeout",
                ms(max_503)
            ));
        }
        let while_down: Vec<_> = records
            .iter()
            .filter(|r| timeline.phase(r) == Phase::During)
            .collect();
        if let Some(r) = while_down.iter().find(|r| !unreachable(r)) {
            return Err(format!("acknowledged while Redis was away: {:?}", r.what));
        }
        let failed_after = records
            .iter()
            .filter(|r| unreachable(r) && r.done() > back)
            .map(Record::done)
            .max();
        let normal_from = failed_after.unwrap_or(back);
        let first_ack = records
            .iter()
            .filter(|r| !unreachable(r) && r.done() > normal_from)
            .map(Record::done)
            .min()
            .ok_or("no insert was acknowledged after Redis came back")?
            .saturating_sub(back);
        let acked_after = records.iter().filter(|r| r.sent > normal_from).count();
        // Fewer than one 503 per client would mean Redis was not away long
        // enough for the test to prove anything.
        if first_ack >= Duration::from_secs(1) || acked_after < 100 || while_down.len() < clients {
            return Err(format!(
                "not normal within 1 s of Redis being back: first acknowledgement at +{}, \
                 then {acked_after} inserts; {} answered while Redis was away",
                ms(first_ack),
                while_down.len()
            ));
        }
        Ok(Self {
            max_503,
            while_down: count(while_down.iter().copied()),
            failed_after: failed_after.map(|t| t.saturating_sub(back)),
            first_ack,
        })
    }
}

/// Test 4: Redis hung or killed for `down` while clients keep inserting:
/// each insert answers 201/200 or 503 "unreachable"; the store then holds
/// exactly the acknowledged links; the same writer is normal again.
pub fn writer_redis_away(name: &str, fault: Fault, down: Duration) -> Result<(), String> {
    const CLIENTS: usize = 4;
    let dir = TestDir::new(name)?;
    let redis = start_redis(&dir.join("redis"))?;
    let writer_port = free_port()?;
    let (config, _) = configure(&dir.path, &writer_config(&redis.url, writer_port, None))?;
    let mut writer = start_writer(&dir.path, &config, writer_port)?;
    let pid = writer.pid()?;
    let public = public_base(None);
    let (before, after) = (Duration::from_secs(1), Duration::from_secs(2));
    // Each client inserts at most once per 4 ms.
    let load = Load::start(
        writer_port,
        before + down + after,
        &[(
            CLIENTS,
            Duration::from_millis(4),
            inserter(name, 100_000, public.clone()),
        )],
    );
    let timeline = Timeline::run(&load, before, down, fault, &redis)?;
    let records = load.finish()?;
    if writer.pid()? != pid {
        return Err("the writer was restarted".into());
    }

    let answers = Answers::check(&records, &timeline, CLIENTS)?;
    let timeline = &timeline;
    let in_phase = |phase: Phase| records.iter().filter(move |r| timeline.phase(r) == phase);
    let store = StoreCheck::run(&redis, writer_port, &public, &records, timeline)?;
    let (down_words, back_words) = fault.words();
    let back = timeline.back;
    println!(
        "    {name}: {} inserts by {CLIENTS} clients. Before (answered before the fault, {}): \
         {} | Redis {down_words} for {} (sent after the signal, answered before it ended): \
         {} | across a signal: {} | after {back_words} (sent in the {} after it): {}; {} \
         first 201 at +{} | max latency of any 503: {} | {} | same writer (pid unchanged)",
        records.len(),
        ms(timeline.begins),
        count(in_phase(Phase::Before)),
        ms(timeline.ends.saturating_sub(timeline.begins)),
        answers.while_down,
        count(in_phase(Phase::Across)),
        ms(records.last().map_or(back, |r| r.sent).saturating_sub(back)),
        count(in_phase(Phase::After)),
        answers
            .failed_after
            .map_or("no 503 after it,".to_owned(), |t| format!(
                "last 503 answered at +{},",
                ms(t)
            )),
        ms(answers.first_ack),
        ms(answers.max_503),
        store.summary,
    );
    store.verdict
}

/// The store against what the clients were told.
struct StoreCheck {
    summary: String,
    verdict: Result<(), String>,
}

impl StoreCheck {
    /// Every acknowledged link must be stored and right. A link stored
    /// without acknowledgement is allowed only for an insert in flight
    /// when the fault's signal was sent: Redis may have run it and lost
    /// only the reply, which no client-server exchange can rule out.
    /// Then every insert answered 503 is sent again, as its error says:
    /// each must be acknowledged (200 under the stored key if it was
    /// stored anyway), after which the store is exactly the acknowledged
    /// set.
    fn run(
        redis: &Redis,
        writer_port: u16,
        public: &str,
        records: &[Record<Insert>],
        timeline: &Timeline,
    ) -> Result<Self, String> {
        let mut acked = acknowledged(records)?;
        let acked_during_run = acked.len();
        let stored = dump_links(redis, PREFIX)?;
        let (lost, extra) = compare(&acked, &stored);
        let refused: Vec<&Record<Insert>> = records
            .iter()
            .filter(|r| matches!(r.what.outcome, Outcome::Unreachable))
            .collect();
        let in_flight: HashSet<&String> = refused
            .iter()
            .filter(|r| r.sent < timeline.done)
            .map(|r| &r.what.url)
            .collect();
        let unexplained: Vec<_> = extra
            .iter()
            .filter(|(_, url)| !in_flight.contains(url))
            .collect();
        let stored_anyway: HashMap<&String, &String> =
            extra.iter().map(|(key, url)| (*url, *key)).collect();

        let mut client = Client::new(writer_port, Duration::from_secs(5));
        let (mut created, mut existing, mut wrong) = (0, 0, Vec::new());
        for record in &refused {
            let url = &record.what.url;
            let body = serde_json::json!({ "url": url }).to_string();
            let response = client
                .post_json("/api/links", &insert_headers(), &body)
                .map_err(|e| format!("retrying {url}: {e}"))?;
            match classify(response.status, &response.body, url, public) {
                Outcome::Acked { key, created: true } if !stored_anyway.contains_key(url) => {
                    created += 1;
                    acked.insert(key, url.clone());
                }
                Outcome::Acked {
                    key,
                    created: false,
                } if stored_anyway.get(url) == Some(&&key) => {
                    existing += 1;
                    acked.insert(key, url.clone());
                }
                other => wrong.push(format!("{url}: {other:?}")),
            }
        }
        let after_retry = dump_links(redis, PREFIX)?;
        let summary = format!(
            "acknowledged {}, in Redis {}, lost {}, stored without acknowledgement {} \
             (answered 503 while in flight at the signal: {} of the {} in flight; not in \
             flight: {}) | the {} inserts answered 503 sent again: 201×{created} \
             200×{existing} (same key as stored) other×{}; then Redis holds {} links, the \
             acknowledged set: {}",
            acked_during_run,
            stored.len(),
            lost.len(),
            extra.len(),
            extra.len() - unexplained.len(),
            in_flight.len(),
            unexplained.len(),
            refused.len(),
            wrong.len(),
            after_retry.len(),
            after_retry == acked,
        );
        let verdict = if !lost.is_empty() || !unexplained.is_empty() {
            Err(format!(
                "the store is not the acknowledged set: {} lost or wrong {:?}; stored but \
                 never acknowledged, and not in flight at the signal: {unexplained:?}",
                lost.len(),
                &lost[..lost.len().min(5)],
            ))
        } else if !wrong.is_empty() || after_retry != acked {
            Err(format!(
                "after sending the refused inserts again: {wrong:?}; store == acknowledged: {}",
                after_retry == acked
            ))
        } else {
            Ok(())
        };
        Ok(Self { summary, verdict })
    }
}

/// Test 5: 8 clients insert a few hundred links at once through the
/// writer; Redis (shipped configuration: AOF, fsync always) is killed
/// right after the last acknowledgement and restarted on the same data:
/// every acknowledged link is there and served through Varnish.
pub fn durability() -> Result<(), String> {
    const CLIENTS: usize = 8;
    const LINKS: usize = 320;
    let dir = TestDir::new("durability")?;
    let redis = start_redis(&dir.join("redis"))?;
    let (varnish_port, writer_port) = (free_port()?, free_port()?);
    let (config, vcl) = configure(
        &dir.path,
        &writer_config(&redis.url, writer_port, Some(varnish_port)),
    )?;
    let varnish = Varnish::start_on(&dir.join("varnish"), &vcl, varnish_port)?;
    let _writer = start_writer(&dir.path, &config, writer_port)?;
    let public_base = public_base(Some(varnish_port));

    let load = Load::start(
        writer_port,
        Duration::from_secs(30),
        &[(
            CLIENTS,
            Duration::ZERO,
            inserter("durable", LINKS, public_base),
        )],
    );
    let origin = load.origin;
    let records = load.finish_burst()?;
    redis.kill()?;
    let killed = origin.elapsed();
    let last_ack = records
        .iter()
        .map(Record::done)
        .max()
        .ok_or("nothing was inserted")?;
    let acked = acknowledged(&records)?;
    if acked.len() != LINKS {
        let refused: Vec<_> = records
            .iter()
            .filter(|r| !matches!(r.what.outcome, Outcome::Acked { created: true, .. }))
            .take(3)
            .collect();
        return Err(format!(
            "{} of {LINKS} inserts created a link: {refused:?}",
            acked.len()
        ));
    }
    let burst = records.first().map_or(Duration::ZERO, |r| r.sent);

    let restart = Instant::now();
    redis.launch()?;
    let restarted_in = restart.elapsed();
    let stored = dump_links(&redis, PREFIX)?;
    let (mut lost, extra) = compare(&acked, &stored);
    let mut client = Client::new(varnish.port, Duration::from_secs(5));
    let mut served = 0;
    for (key, url) in &acked {
        let response = client
            .get(&format!("/l/{key}"))
            .map_err(|e| format!("GET /l/{key}: {e}"))?;
        if response.status == 301 && response.header("location") == Some(url.as_str()) {
            served += 1;
        } else {
            lost.push(format!(
                "{key} served {} {:?}",
                response.status,
                response.header("location")
            ));
        }
    }
    println!(
        "    durability: {CLIENTS} clients acknowledged {} links (201) in {}; redis-server \
         SIGKILLed {} after the last acknowledgement; restarted from the same configuration \
         and data in {}: {} links in Redis, {} served 301 with the right Location through \
         Varnish; links lost: {}",
        acked.len(),
        ms(last_ack.saturating_sub(burst)),
        ms(killed.saturating_sub(last_ack)),
        ms(restarted_in),
        stored.len(),
        served,
        acked.len() - served.min(acked.len()),
    );
    if !lost.is_empty() || !extra.is_empty() || served != acked.len() {
        return Err(format!(
            "lost: {:?}; stored but never acknowledged: {:?}",
            &lost[..lost.len().min(5)],
            &extra[..extra.len().min(5)]
        ));
    }
    Ok(())
}
