//! A link's statistics: its totals, days, hours, visitors and details,
//! read in one round trip.

use std::collections::HashMap;

use redis::RedisResult;
use serde::Serialize;
use shortlink_core::clicks::{ClickTime, Detail, Total};
use shortlink_core::rules::Chosen;
use shortlink_core::{Key, Record};

use super::ClickReader;

/// Entries listed per detail kind.
const TOP: usize = 10;

/// A link's counts, as `GET /api/links/{key}/stats` answers them.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct LinkStats {
    pub key: String,
    /// Redirects delivered to people, all time.
    pub clicks: u64,
    /// Redirects delivered to bots (crawlers, scripts, `HEAD`), all time.
    pub bots: u64,
    /// Answers after the link expired, answered its click limit, or was
    /// deleted.
    pub gone: u64,
    /// The link's click limit; `null`: none.
    pub max_clicks: Option<u64>,
    /// People's clicks left before the limit, as stored (each Varnish may
    /// hold up to a flush interval of clicks not sent yet); `null`: no limit.
    pub clicks_left: Option<u64>,
    /// Unique visitors over `days` (estimated, ±1 %).
    pub visitors: u64,
    /// People's clicks per day, oldest first, today last.
    pub days: Vec<DayCount>,
    /// People's clicks per hour over the last `hours`, oldest first.
    pub hours: Vec<HourCount>,
    pub referrers: Vec<Share>,
    pub countries: Vec<Share>,
    pub devices: Vec<Share>,
    pub browsers: Vec<Share>,
    pub os: Vec<Share>,
    /// People's clicks per target, for a link with rules or a split:
    /// each rule, each split target, and the link's own URL, with the
    /// target's URL now (`[]` for a link without either).
    pub targets: Vec<TargetClicks>,
}

/// The clicks a rule, a split target or the link's own URL was chosen
/// for, at the edge.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct TargetClicks {
    /// `r1` for rule 1, `s2` for split target 2, `url` for the link's own
    /// URL: the name the edge counts it under.
    pub target: String,
    /// `rule`, `split` or `url`.
    pub kind: String,
    /// The rule's or split target's number, from 1; `null` for `url`.
    pub number: Option<usize>,
    /// Where it sends now; `null` for a rule or split target counted
    /// before it was removed.
    pub url: Option<String>,
    pub clicks: u64,
}

/// The targets counted in a link's details, named by their URLs once
/// joined with the link's record ([`LinkStats::join_targets`]).
fn counted_targets(details: &HashMap<String, u64>) -> Vec<TargetClicks> {
    details
        .iter()
        .filter_map(|(field, clicks)| {
            let (Detail::Target, label) = Detail::parse(field)? else {
                return None;
            };
            let chosen = Chosen::from_label(label)?;
            Some(TargetClicks {
                target: chosen.label().to_owned(),
                kind: String::new(),
                number: None,
                url: None,
                clicks: *clicks,
            })
        })
        .collect()
}

impl LinkStats {
    /// The per-target clicks counted (`targets`, as read from the details)
    /// joined with the link's current rules and split, each named by its
    /// URL: every current target, clicked or not, in order, then targets
    /// counted that the link no longer has.
    pub fn join_targets(&mut self, record: &Record) {
        let targeting = &record.targeting;
        let counted: HashMap<String, u64> = self
            .targets
            .drain(..)
            .map(|target| (target.target, target.clicks))
            .collect();
        if targeting.is_empty() && counted.is_empty() {
            return;
        }
        let mut current: Vec<Chosen> = (1..=targeting.rules().len()).map(Chosen::Rule).collect();
        current.extend((1..=targeting.split().len()).map(Chosen::Split));
        // The own URL is chosen only when no rule matches and no split is.
        if targeting.split().is_empty() {
            current.push(Chosen::Url);
        }
        let mut gone: Vec<Chosen> = counted
            .keys()
            .filter_map(|label| Chosen::from_label(label))
            .filter(|chosen| !current.contains(chosen))
            .collect();
        gone.sort_by_key(|chosen| match chosen {
            Chosen::Rule(n) => (0, *n),
            Chosen::Split(n) => (1, *n),
            Chosen::Url => (2, 0),
        });
        let (now, before) = (current.len(), gone.len());
        self.targets = current
            .into_iter()
            .chain(gone)
            .enumerate()
            .map(|(n, chosen)| {
                let url = match chosen {
                    _ if n >= now => None,
                    Chosen::Url => Some(record.url.to_string()),
                    chosen => targeting.target(chosen).map(ToString::to_string),
                };
                let (kind, number) = match chosen {
                    Chosen::Rule(n) => ("rule", Some(n)),
                    Chosen::Split(n) => ("split", Some(n)),
                    Chosen::Url => ("url", None),
                };
                let target = chosen.label().to_owned();
                TargetClicks {
                    clicks: counted.get(&target).copied().unwrap_or(0),
                    target,
                    kind: kind.to_owned(),
                    number,
                    url,
                }
            })
            .collect();
        debug_assert_eq!(self.targets.len(), now + before);
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct DayCount {
    pub date: String,
    pub clicks: u64,
    pub visitors: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct HourCount {
    pub hour: String,
    pub clicks: u64,
}

/// One value of a detail and its clicks.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Share {
    pub name: String,
    pub clicks: u64,
}

impl ClickReader {
    /// `key`'s counts, with `days` days and `hours` hours of history, in
    /// one round trip.
    pub async fn link(&self, key: &Key, days: u64, hours: u64) -> RedisResult<LinkStats> {
        let (names, scheme) = (&self.names, self.names.scheme());
        let (head, field) = (scheme.head(key), scheme.field(key));
        let now = ClickTime::now();
        let day_list: Vec<_> = (0..days)
            .rev()
            .map(|n| now.before(n * 86_400).day())
            .collect();
        let hour_list: Vec<_> = (0..hours)
            .rev()
            .map(|n| now.before(n * 3600).hour())
            .collect();
        let visitor_keys: Vec<String> = day_list
            .iter()
            .map(|day| names.visitors(*day, key.as_str()))
            .collect();
        let mut pipe = redis::pipe();
        for total in Total::ALL {
            pipe.hget(names.total_hash(total, head), field);
        }
        for day in &day_list {
            pipe.hget(names.day_hash(*day, head), field);
        }
        for hour in &hour_list {
            pipe.hget(names.hour_hash(*hour, head), field);
        }
        for visitors in &visitor_keys {
            pipe.cmd("PFCOUNT").arg(visitors);
        }
        pipe.cmd("PFCOUNT").arg(&visitor_keys);
        pipe.hgetall(names.details(key.as_str()));
        let mut connection = self.connection.get()?;
        let answers: Vec<redis::Value> = pipe.query_async(&mut connection).await?;
        let mut answers = answers.into_iter();
        let mut next = || -> u64 {
            answers
                .next()
                .and_then(|value| redis::from_redis_value::<Option<u64>>(value).ok())
                .flatten()
                .unwrap_or(0)
        };
        let [clicks, bots, gone] = [next(), next(), next()];
        let day_clicks: Vec<u64> = day_list.iter().map(|_| next()).collect();
        let hours = hour_list
            .iter()
            .map(|hour| HourCount {
                hour: hour.iso(),
                clicks: next(),
            })
            .collect();
        let days = day_list
            .iter()
            .zip(day_clicks)
            .map(|(day, clicks)| DayCount {
                date: day.iso(),
                clicks,
                visitors: next(),
            })
            .collect();
        let visitors = next();
        let details: HashMap<String, u64> = answers
            .next()
            .and_then(|value| redis::from_redis_value(value).ok())
            .unwrap_or_default();
        let top = |kind: Detail| -> Vec<Share> {
            let mut shares: Vec<Share> = details
                .iter()
                .filter_map(|(field, clicks)| match Detail::parse(field) {
                    Some((found, name)) if found == kind => Some(Share {
                        name: name.to_owned(),
                        clicks: *clicks,
                    }),
                    _ => None,
                })
                .collect();
            shares.sort_by(|a, b| b.clicks.cmp(&a.clicks).then(a.name.cmp(&b.name)));
            shares.truncate(TOP);
            shares
        };
        Ok(LinkStats {
            key: key.to_string(),
            clicks,
            bots,
            gone,
            max_clicks: None,
            clicks_left: None,
            visitors,
            days,
            hours,
            referrers: top(Detail::Referrer),
            countries: top(Detail::Country),
            devices: top(Detail::Device),
            browsers: top(Detail::Browser),
            os: top(Detail::Os),
            targets: counted_targets(&details),
        })
    }
}
