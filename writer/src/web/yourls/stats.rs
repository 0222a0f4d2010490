//! `stats` (`filter` top, bottom, last or rand; `limit`; `start`) and
//! `db-stats`: the links the token may see (an admin's: every link) and
//! their totals, on the default domain, or `domain`'s. `top` is the
//! default filter, as in YOURLS; ties go by key. Without a `limit` (or
//! with 0), no links, only the totals, as YOURLS answers.

use serde_json::{json, Map, Value};

use crate::access::Identity;
use crate::links::shortener::{Entry, Shortener};
use crate::web::yourls::answer::Answer;
use crate::web::yourls::link::stats_object;
use crate::web::yourls::request::Params;
use crate::web::yourls::url_stats::STATS_SIMPLE;

pub async fn stats(params: &Params, who: &Identity, shortener: &Shortener) -> Answer {
    let number = |name: &str| -> Result<usize, Answer> {
        let Some(text) = params.get(name) else {
            return Ok(0);
        };
        text.parse::<usize>().map_err(|_| {
            Answer::error(
                "400",
                &format!("{name} must be a whole number, 0 or more, not {text:?}"),
            )
        })
    };
    let (limit, start) = match (number("limit"), number("start")) {
        (Ok(limit), Ok(start)) => (limit, start),
        (Err(refused), _) | (_, Err(refused)) => return refused,
    };
    let mut entries = match read(params, who, shortener).await {
        Ok(entries) => entries,
        Err(refused) => return refused,
    };
    let totals = totals(&entries);
    let mut answer = Answer::new(STATS_SIMPLE);
    if limit > 0 && start < entries.len() {
        order(&mut entries, params.get("filter").unwrap_or("top"));
        let links: Map<String, Value> = entries
            .iter()
            .skip(start)
            .take(limit)
            .enumerate()
            .map(|(n, entry)| {
                let object = stats_object(&entry.link, &entry.details, entry.totals, shortener);
                (format!("link_{}", n + 1), object)
            })
            .collect();
        answer = answer.with("links", links);
    }
    answer
        .with("stats", totals)
        .with("statusCode", "200")
        .with("message", "success")
}

pub async fn db_stats(params: &Params, who: &Identity, shortener: &Shortener) -> Answer {
    match read(params, who, shortener).await {
        Ok(entries) => Answer::new(STATS_SIMPLE)
            .with("db-stats", totals(&entries))
            .with("statusCode", "200")
            .with("message", "success"),
        Err(refused) => refused,
    }
}

async fn read(
    params: &Params,
    who: &Identity,
    shortener: &Shortener,
) -> Result<Vec<Entry>, Answer> {
    let domain = shortener
        .domain(params.domain())
        .map_err(|error| Answer::error("404", &error.to_string()))?;
    shortener
        .catalog(who, Some(&domain.name))
        .await
        .map_err(|error| Answer::failure(&error))
}

fn totals(entries: &[Entry]) -> Value {
    let clicks: u64 = entries
        .iter()
        .map(|e| e.totals.people + e.totals.bots)
        .sum();
    json!({ "total_links": entries.len(), "total_clicks": clicks })
}

/// Orders `entries` as `filter` says: most clicks first (`top`, and any
/// other filter, as in YOURLS), fewest (`bottom`), newest (`last`), or at
/// random (`rand`, `random`).
fn order(entries: &mut [Entry], filter: &str) {
    let clicks = |entry: &Entry| entry.totals.people + entry.totals.bots;
    match filter {
        "bottom" => entries.sort_by(|a, b| {
            clicks(a)
                .cmp(&clicks(b))
                .then_with(|| a.link.key.cmp(&b.link.key))
        }),
        "last" => entries.sort_by(|a, b| {
            b.details
                .created
                .cmp(&a.details.created)
                .then_with(|| a.link.key.cmp(&b.link.key))
        }),
        "rand" | "random" => {
            let mut seed = [0u8; 8];
            let _ = getrandom::fill(&mut seed);
            let seed = u64::from_le_bytes(seed);
            entries.sort_by_cached_key(|entry| {
                use std::hash::{Hash, Hasher};
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                (seed, &entry.link.key).hash(&mut hasher);
                hasher.finish()
            });
        }
        _ => entries.sort_by(|a, b| {
            clicks(b)
                .cmp(&clicks(a))
                .then_with(|| a.link.key.cmp(&b.link.key))
        }),
    }
}
