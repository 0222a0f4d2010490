//! `GET /rest/v3/short-urls`: the short URLs the key may change, filtered,
//! ordered and paged as Shlink does.

use std::cmp::Ordering;
use std::time::SystemTime;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::access::Gatekeeper;
use crate::links::details::Tag;
use crate::links::shortener::{found_by, Entry, Shortener};
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, Query};
use crate::web::shlink::short_url::{parse_date, ShortUrl};
use crate::web::shlink::short_urls::{page_of, paging};

/// Short URLs a page holds unless asked otherwise, as in Shlink.
const DEFAULT_PER_PAGE: usize = 10;

pub(crate) async fn list(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let query = Query::of(&request);
    let (page, per_page) = paging(&query, Some(DEFAULT_PER_PAGE))?;
    let filter = Filter::of(&query)?;
    let order = Order::of(query.get("orderBy"))?;
    let domain = query.get("domain").map(|name| match name {
        "DEFAULT" => shortener.domain(None).map(|domain| domain.name.as_str()),
        name => shortener
            .domain(Some(name))
            .map(|domain| domain.name.as_str()),
    });
    let domain = domain.transpose()?;
    let mut entries: Vec<Entry> = shortener
        .catalog(&who, domain)
        .await?
        .into_iter()
        .filter(|entry| filter.keeps(entry))
        .collect();
    entries.sort_by(|a, b| order.compare(a, b));
    let (entries, pagination) = page_of(entries, page, per_page);
    let data: Vec<ShortUrl> = entries
        .iter()
        .map(|entry| ShortUrl::of(entry, &shortener))
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "shortUrls": { "data": data, "pagination": pagination }
    })))
}

/// Whether a list of tags must all be held, or any one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Any,
    All,
}

impl Mode {
    fn of(query: &Query, name: &'static str) -> Result<Self, Problem> {
        match query.get(name) {
            None | Some("any") => Ok(Self::Any),
            Some("all") => Ok(Self::All),
            Some(other) => Err(Problem::invalid(
                name,
                format!("{name} is any or all, not {other:?}"),
            )),
        }
    }

    /// Whether `held` holds `wanted` as this mode asks.
    fn matches(self, held: &[Tag], wanted: &[Tag]) -> bool {
        match self {
            Self::Any => wanted.iter().any(|tag| held.contains(tag)),
            Self::All => wanted.iter().all(|tag| held.contains(tag)),
        }
    }
}

/// What a listing keeps.
struct Filter {
    search: Option<String>,
    tags: Vec<Tag>,
    tags_mode: Mode,
    exclude_tags: Vec<Tag>,
    exclude_tags_mode: Mode,
    start: Option<i64>,
    end: Option<i64>,
    exclude_max_visits_reached: bool,
    exclude_past_valid_until: bool,
    owner: Option<String>,
}

impl Filter {
    fn of(query: &Query) -> Result<Self, Problem> {
        let tags = |name: &'static str| -> Result<Vec<Tag>, Problem> {
            query
                .list(name)
                .into_iter()
                .map(|text| Tag::try_from(text).map_err(|e| Problem::invalid(name, e.message)))
                .collect()
        };
        let date = |name: &'static str| -> Result<Option<i64>, Problem> {
            query
                .get(name)
                .map(|text| {
                    parse_date(text).ok_or_else(|| {
                        Problem::invalid(
                            name,
                            format!("{name} {text:?} is not an ISO 8601 date with an offset"),
                        )
                    })
                })
                .transpose()
        };
        Ok(Self {
            search: query.get("searchTerm").map(str::to_lowercase),
            tags: tags("tags")?,
            tags_mode: Mode::of(query, "tagsMode")?,
            exclude_tags: tags("excludeTags")?,
            exclude_tags_mode: Mode::of(query, "excludeTagsMode")?,
            start: date("startDate")?,
            end: date("endDate")?,
            exclude_max_visits_reached: query.flag("excludeMaxVisitsReached"),
            exclude_past_valid_until: query.flag("excludePastValidUntil"),
            owner: query.get("apiKeyName").map(str::to_owned),
        })
    }

    fn keeps(&self, entry: &Entry) -> bool {
        let (link, details) = (&entry.link, &entry.details);
        let record = &link.record;
        let found = self
            .search
            .as_deref()
            .is_none_or(|search| found_by(link, details, search));
        let created = details.created.and_then(|unix| i64::try_from(unix).ok());
        let in_dates = match (self.start, self.end) {
            (None, None) => true,
            (start, end) => created.is_some_and(|created| {
                start.is_none_or(|start| created >= start) && end.is_none_or(|end| created <= end)
            }),
        };
        let reached = record
            .max_clicks
            .is_some_and(|limit| entry.totals.people >= limit.get());
        found
            && in_dates
            && (self.tags.is_empty() || self.tags_mode.matches(&details.tags, &self.tags))
            && (self.exclude_tags.is_empty()
                || !self
                    .exclude_tags_mode
                    .matches(&details.tags, &self.exclude_tags))
            && !(self.exclude_max_visits_reached && reached)
            && !(self.exclude_past_valid_until && record.has_expired(SystemTime::now()))
            && self.owner.as_deref().is_none_or(|owner| {
                record
                    .owner
                    .as_ref()
                    .is_some_and(|held| held.as_str() == owner)
            })
    }
}

/// What a listing is ordered by; newest first unless asked otherwise.
#[derive(Debug, Clone, Copy)]
struct Order {
    by: By,
    descending: bool,
}

#[derive(Debug, Clone, Copy)]
enum By {
    DateCreated,
    ShortCode,
    LongUrl,
    Title,
    Visits,
    NonBotVisits,
}

impl Order {
    fn of(text: Option<&str>) -> Result<Self, Problem> {
        let Some(text) = text else {
            return Ok(Self {
                by: By::DateCreated,
                descending: true,
            });
        };
        let (field, direction) = text.split_once('-').unwrap_or((text, "ASC"));
        let by = match field {
            "dateCreated" => By::DateCreated,
            "shortCode" => By::ShortCode,
            "longUrl" => By::LongUrl,
            "title" => By::Title,
            "visits" => By::Visits,
            "nonBotVisits" => By::NonBotVisits,
            _ => {
                return Err(Problem::invalid(
                    "orderBy",
                    format!(
                        "orderBy {text:?} names no field: use dateCreated, shortCode, longUrl, \
                         title, visits or nonBotVisits, then -ASC or -DESC"
                    ),
                ))
            }
        };
        let descending = match direction.to_ascii_uppercase().as_str() {
            "ASC" => false,
            "DESC" => true,
            _ => {
                return Err(Problem::invalid(
                    "orderBy",
                    format!("orderBy {text:?} ends in -ASC or -DESC"),
                ))
            }
        };
        Ok(Self { by, descending })
    }

    fn compare(self, a: &Entry, b: &Entry) -> Ordering {
        let visits = |entry: &Entry| entry.totals.people + entry.totals.bots;
        let ordered = match self.by {
            By::DateCreated => a.details.created.cmp(&b.details.created),
            By::ShortCode => a.link.key.cmp(&b.link.key),
            By::LongUrl => a.link.record.url.as_str().cmp(b.link.record.url.as_str()),
            By::Title => {
                let title =
                    |entry: &Entry| entry.details.title.as_ref().map(|t| t.as_str().to_owned());
                title(a).cmp(&title(b))
            }
            By::Visits => visits(a).cmp(&visits(b)),
            By::NonBotVisits => a.totals.people.cmp(&b.totals.people),
        };
        let ordered = if self.descending {
            ordered.reverse()
        } else {
            ordered
        };
        // Equal ones in a stable order, so that pages never overlap.
        ordered
            .then_with(|| a.link.domain.cmp(&b.link.domain))
            .then_with(|| a.link.key.cmp(&b.link.key))
    }
}
