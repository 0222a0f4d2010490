//! Faults on the serving side: Redis hung, killed, or down when Varnish
//! starts, and Varnish itself restarted, each while the load generator
//! keeps requesting cached and never-requested (fresh) links.

use std::collections::HashSet;
use std::thread::sleep;
use std::time::{Duration, Instant};

use test_support::{free_port, Redis, Varnish};

use crate::links::{self, Class, Hit, Recovery};
use crate::load::{ms, Load, Phase, Record, Timeline};
use crate::stack::{configure, start_redis, writer_config, ChildState, Fault, TestDir};

/// Threads per key class, and the pause between one thread's requests:
/// about 2 × 1000 cached and 2 × 500 fresh requests a second at most.
const CACHED_THREADS: usize = 2;
const CACHED_INTERVAL: Duration = Duration::from_millis(1);
const FRESH_THREADS: usize = 2;
const FRESH_INTERVAL: Duration = Duration::from_millis(2);
/// Links in cache before a run, and never-requested ones (more than a
/// run can use: running out fails the test).
const CACHED_LINKS: usize = 200;
const FRESH_LINKS: usize = 12_000;
/// Load before the fault, and after Redis is back: recovery must be done
/// within the first second of it.
const BEFORE: Duration = Duration::from_secs(1);
const AFTER: Duration = Duration::from_millis(1500);
const RECOVERY_LIMIT: Duration = Duration::from_secs(1);

/// Redis, and Varnish on the VCL generated for it, with links stored.
struct Serving {
    dir: TestDir,
    redis: Redis,
    varnish: Varnish,
    cached: std::sync::Arc<Vec<(String, String)>>,
    fresh: std::sync::Arc<Vec<(String, String)>>,
}

impl Serving {
    /// With `redis_down`, Redis is killed (its links safe in its AOF)
    /// before Varnish starts.
    fn start(name: &str, redis_down: bool) -> Result<Self, String> {
        let dir = TestDir::new(name)?;
        let redis = start_redis(&dir.join("redis"))?;
        let cached = links::make("c", CACHED_LINKS);
        let fresh = links::make("f", FRESH_LINKS);
        links::store(&redis, &cached)?;
        links::store(&redis, &fresh)?;
        if redis_down {
            redis.kill()?;
        }
        let varnish_port = free_port()?;
        let config = writer_config(&redis.url, free_port()?, Some(varnish_port));
        let (_, vcl) = configure(&dir.path, &config)?;
        let varnish = Varnish::start_on(&dir.join("varnish"), &vcl, varnish_port)?;
        if !redis_down {
            links::warm(varnish.port, &cached)?;
        }
        Ok(Self {
            dir,
            redis,
            varnish,
            cached,
            fresh,
        })
    }

    /// Cached and fresh links requested for at most `duration`.
    fn load(&self, duration: Duration, with_cached: bool) -> Load<Hit> {
        let mut groups = vec![(FRESH_THREADS, FRESH_INTERVAL, links::once_each(&self.fresh))];
        if with_cached {
            groups.push((
                CACHED_THREADS,
                CACHED_INTERVAL,
                links::cycling(&self.cached),
            ));
        }
        Load::start(self.varnish.port, duration, &groups)
    }
}

/// Tests 1 and 2: cached links stay up through the fault, fresh keys fail
/// fast, and all is normal within a second of Redis being back, with the
/// same Varnish child on the same VCL.
pub fn redis_fault(name: &str, fault: Fault, down: Duration) -> Result<(), String> {
    let serving = Serving::start(name, false)?;
    let before = ChildState::read(&serving.varnish)?;
    let began = Instant::now();
    let load = serving.load(BEFORE + down + AFTER, true);
    let timeline = Timeline::run(&load, BEFORE, down, fault, &serving.redis)?;
    let records = load.finish()?;
    let after = ChildState::read(&serving.varnish)?;
    after.same_child_as(&before, began.elapsed(), &serving.varnish)?;

    links::check_every_answer(&records)?;
    let (begins, ends, back) = (timeline.begins, timeline.ends, timeline.back);
    let timeline = &timeline;
    let phase = |class: Class, phase: Phase| {
        records
            .iter()
            .filter(move |r| r.what.class == class && timeline.phase(r) == phase)
    };
    if let Some(r) = phase(Class::Fresh, Phase::During).find(|r| r.what.status != 503) {
        return Err(format!(
            "a fresh key answered {} while Redis was down",
            r.what.status
        ));
    }
    let recovery = Recovery::of(&records, back)?;
    let normal_after = records
        .iter()
        .filter(|r| r.what.class == Class::Fresh && r.sent >= back + RECOVERY_LIMIT)
        .count();
    if recovery.first_success >= RECOVERY_LIMIT || normal_after < 100 {
        return Err(format!(
            "not normal within {RECOVERY_LIMIT:?} of Redis being back: {}, \
             then {normal_after} fresh requests",
            recovery.describe()
        ));
    }
    let (fresh_during, cached_during) = (
        phase(Class::Fresh, Phase::During).count(),
        phase(Class::Cached, Phase::During).count(),
    );
    if fresh_during < 5 || cached_during < 500 {
        return Err(format!(
            "too little load while Redis was down ({fresh_during} fresh, {cached_during} cached)"
        ));
    }
    let (down_words, back_words) = fault.words();
    println!(
        "    {name}: {} requests. Before (answered before the fault, {}): cached {}, fresh {} | \
         Redis {down_words} for {} (sent after the signal, answered before it ended): \
         cached {} (max latency {}), fresh {} (max latency {}) | across a signal: \
         cached {}, fresh {} | after {back_words} (sent in the {} after it): cached {}, \
         fresh {}; {} | max latency of any 503: {} | Varnish: {} -> {}, no panic",
        records.len(),
        ms(begins),
        links::tally(phase(Class::Cached, Phase::Before)),
        links::tally(phase(Class::Fresh, Phase::Before)),
        ms(ends.saturating_sub(begins)),
        links::tally(phase(Class::Cached, Phase::During)),
        ms(links::max_latency(phase(Class::Cached, Phase::During))),
        links::tally(phase(Class::Fresh, Phase::During)),
        ms(links::max_latency(phase(Class::Fresh, Phase::During))),
        links::tally(phase(Class::Cached, Phase::Across)),
        links::tally(phase(Class::Fresh, Phase::Across)),
        ms(records.last().map_or(back, |r| r.sent).saturating_sub(back)),
        links::tally(phase(Class::Cached, Phase::After)),
        links::tally(phase(Class::Fresh, Phase::After)),
        recovery.describe(),
        ms(links::max_latency(
            records.iter().filter(|r| r.what.status == 503)
        )),
        before.describe(),
        after.describe(),
    );
    Ok(())
}

/// Test 3: Varnish starts while Redis is down; its VCL loads, fresh keys
/// answer 503 until Redis is up, then 301.
pub fn redis_down_at_start() -> Result<(), String> {
    let serving = Serving::start("redis-down-at-start", true)?;
    let before = ChildState::read(&serving.varnish)?;
    if !before.vcls.iter().any(|v| v.starts_with("active")) {
        return Err(format!("no active VCL: {:?}", before.vcls));
    }
    let began = Instant::now();
    let down = Duration::from_millis(1500);
    let load = serving.load(down + AFTER, false);
    sleep(down);
    let ends = load.now();
    serving.redis.launch()?;
    // Down from the start: the fault "began" before the first request.
    let timeline = Timeline {
        begins: Duration::ZERO,
        done: Duration::ZERO,
        ends,
        back: load.now(),
    };
    let records = load.finish()?;
    let after = ChildState::read(&serving.varnish)?;
    after.same_child_as(&before, began.elapsed(), &serving.varnish)?;

    links::check_every_answer(&records)?;
    let phase = |phase: Phase| records.iter().filter(move |r| timeline.phase(r) == phase);
    if let Some(r) = phase(Phase::During).find(|r| r.what.status != 503) {
        return Err(format!("answered {} before Redis was up", r.what.status));
    }
    let up = timeline.back;
    let recovery = Recovery::of(&records, up)?;
    let normal_after = records
        .iter()
        .filter(|r| r.sent >= up + RECOVERY_LIMIT)
        .count();
    let down_answers = phase(Phase::During).count();
    if recovery.first_success >= RECOVERY_LIMIT || normal_after < 100 || down_answers < 5 {
        return Err(format!(
            "{down_answers} requests while Redis was down; {}, then {normal_after}",
            recovery.describe()
        ));
    }
    println!(
        "    redis-down-at-start: {} requests (fresh keys only). VCL loaded with Redis down \
         ({}) | Redis down for the first {} (answered before it was started): fresh {} (max \
         latency {}) | across its start: fresh {} | after Redis up (answering PING, sent in the {} \
         after it): fresh {}; {} | Varnish: {} -> {}",
        records.len(),
        before.vcls.join("; "),
        ms(ends),
        links::tally(phase(Phase::During)),
        ms(links::max_latency(phase(Phase::During))),
        links::tally(phase(Phase::Across)),
        ms(records.last().map_or(up, |r| r.sent).saturating_sub(up)),
        links::tally(phase(Phase::After)),
        recovery.describe(),
        before.describe(),
        after.describe(),
    );
    Ok(())
}

/// Test 6: varnishd stopped and a new one started on the same VCL and
/// port while links are requested: it serves every link from Redis at
/// once; only requests during the restart go unanswered.
pub fn varnish_restart() -> Result<(), String> {
    let serving = Serving::start("varnish-restart", false)?;
    let Serving {
        dir,
        redis: _redis,
        varnish,
        cached,
        ..
    } = serving;
    let port = varnish.port;
    // A time limit only in case the restart hangs: the run is stopped
    // AFTER the new Varnish accepts.
    let load = Load::start(
        port,
        Duration::from_secs(20),
        &[(
            CACHED_THREADS + FRESH_THREADS,
            FRESH_INTERVAL,
            links::cycling(&cached),
        )],
    );
    sleep(BEFORE);
    let stop_begins = load.now();
    drop(varnish);
    let stopped = load.now();
    let varnish = Varnish::start_on(&dir.join("varnish-2"), &dir.join("shortlink.vcl"), port)?;
    let ready = load.now();
    let records = load.stop_after(AFTER)?;

    // No answer is allowed only while no varnishd was there to give one.
    let in_restart = |r: &Record<Hit>| r.done() >= stop_begins && r.sent <= ready;
    let (during, outside): (Vec<_>, Vec<_>) = records.iter().partition(|r| in_restart(r));
    if let Some(r) = during.iter().find(|r| !matches!(r.what.status, 0 | 301)) {
        return Err(format!("answered {} during the restart", r.what.status));
    }
    if let Some(r) = outside
        .iter()
        .find(|r| r.what.status != 301 || !r.what.right_location)
    {
        return Err(format!("at {}: {:?}", ms(r.sent), r.what));
    }
    // Answers that came after the old varnishd was gone are the new one's.
    let from_new: Vec<_> = records
        .iter()
        .filter(|r| r.what.status != 0 && r.done() > stopped)
        .collect();
    let served: HashSet<usize> = from_new.iter().map(|r| r.what.key).collect();
    let lost = cached.len() - served.len();
    let first_answer = from_new
        .iter()
        .map(|r| r.done().saturating_sub(ready))
        .min()
        .ok_or("nothing was answered after the restart")?;
    // Each link looked up in Redis twice, found, and then served from cache:
    // its first request answered from its lookup alone, its second fetched
    // and cached (requests coming meanwhile wait for that fetch).
    let counters = crate::stack::counters(&varnish)?;
    let counter = |name: &str| counters.get(name).copied().unwrap_or(u64::MAX);
    let (lookups, found) = (
        counter("shortlink.shortlink_links.lookups"),
        counter("shortlink.shortlink_links.found"),
    );
    let links = cached.len() as u64;
    if lost > 0 || lookups != 2 * links || found != 2 * links {
        return Err(format!(
            "after the restart: {lost} of {links} links never served; the new Varnish made \
             {lookups} lookups and found {found}"
        ));
    }
    println!(
        "    varnish-restart: before {}: {} | varnishd stopped in {}, new one accepting {} later; \
         during the restart: {} | after {}: {} (max latency {}), first answer {} after it \
         accepted; {} of {links} links served again, each looked up in Redis twice \
         (lookups {lookups}, found {found}); links lost: {lost}",
        ms(stop_begins),
        links::tally(records.iter().filter(|r| r.done() < stop_begins)),
        ms(stopped.saturating_sub(stop_begins)),
        ms(ready.saturating_sub(stopped)),
        links::tally(during.iter().copied()),
        ms(AFTER),
        links::tally(records.iter().filter(|r| r.sent > ready)),
        ms(links::max_latency(
            records.iter().filter(|r| r.sent > ready)
        )),
        ms(first_answer),
        served.len(),
    );
    Ok(())
}
