//! Shlink's visit routes, read from the visit log (see
//! `links::shortener::visits`); the overview from the exact totals.
//!
//! | file | route |
//! | --- | --- |
//! | `overview.rs` | `GET /visits` |
//! | `short_url.rs` | `GET /short-urls/{shortCode}/visits` |
//! | `delete_short_url.rs` | `DELETE /short-urls/{shortCode}/visits` |
//! | `tag.rs` | `GET /tags/{tag}/visits` |
//! | `domain.rs` | `GET /domains/{domain}/visits` |
//! | `non_orphan.rs` | `GET /visits/non-orphan` |
//! | `orphan.rs` | `GET /visits/orphan` |
//! | `delete_orphans.rs` | `DELETE /visits/orphan` |

pub mod delete_orphans;
pub mod delete_short_url;
pub mod domain;
pub mod non_orphan;
pub mod orphan;
pub mod overview;
pub mod short_url;
pub mod tag;

use actix_web::HttpResponse;
use serde::Serialize;
use serde_json::json;
use shortlink_core::clicks::visits::VisitKind;

use crate::clicks::VisitRecord;
use crate::links::shortener::{Shortener, VisitPage, VisitQuery};
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{domain_param, Query};
use crate::web::shlink::short_url::{iso_date, parse_date};
use crate::web::shlink::short_urls::{paging, Pagination};

/// Shlink's visit object.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct VisitObject {
    /// The referrer's host: the log keeps no more of a `Referer`.
    referer: String,
    date: String,
    user_agent: String,
    visit_location: Option<Location>,
    potential_bot: bool,
    visited_url: String,
    /// Where a link's visit was sent, as the link reads now: the log keeps
    /// which of its targets was chosen, not that target's URL then.
    redirect_url: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    orphan_type: Option<&'static str>,
}

/// Shlink's location: a country alone, which is what the log keeps.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Location {
    country_code: String,
    country_name: Option<String>,
    region_name: Option<String>,
    city_name: Option<String>,
    latitude: Option<f64>,
    longitude: Option<f64>,
    timezone: Option<String>,
    is_empty: bool,
}

impl VisitObject {
    fn of(visit: &VisitRecord, shortener: &Shortener) -> Self {
        let visited_url = match (shortener.domain(Some(&visit.domain)), visit.kind) {
            (Err(_), _) => String::new(),
            (Ok(domain), VisitKind::Link) => domain.short_url(&visit.asked),
            // An orphan's path is the whole path asked, from the origin.
            (Ok(domain), _) => format!(
                "{}{}",
                domain.base.origin().ascii_serialization(),
                visit.asked
            ),
        };
        Self {
            referer: visit.referrer.clone(),
            date: iso_date(visit.seconds()),
            user_agent: visit.agent.clone(),
            visit_location: (!visit.country.is_empty()).then(|| Location {
                country_code: visit.country.clone(),
                country_name: None,
                region_name: None,
                city_name: None,
                latitude: None,
                longitude: None,
                timezone: None,
                is_empty: false,
            }),
            potential_bot: visit.bot,
            visited_url,
            redirect_url: visit.redirect.clone(),
            orphan_type: visit.kind.orphan_type(),
        }
    }
}

/// The visit query of Shlink's `startDate`, `endDate`, `excludeBots` and,
/// where a route takes it, `domain`.
fn visit_query(
    query: &Query,
    shortener: &Shortener,
    by_domain: bool,
) -> Result<VisitQuery, Problem> {
    let date = |name: &'static str| -> Result<Option<u64>, Problem> {
        query
            .get(name)
            .filter(|text| !text.is_empty())
            .map(|text| {
                parse_date(text)
                    .and_then(|unix| u64::try_from(unix).ok())
                    .ok_or_else(|| {
                        Problem::invalid(name, format!("{name} must be an ISO-8601 date"))
                    })
            })
            .transpose()
    };
    let domain = match domain_param(query) {
        Some(name) if by_domain => Some(shortener.domain(Some(name))?.name.clone()),
        _ => None,
    };
    // Every visit on one page unless asked otherwise.
    let (page, per_page) = paging(query, None)?;
    Ok(VisitQuery {
        domain,
        since: date("startDate")?,
        until: date("endDate")?,
        exclude_bots: query.flag("excludeBots"),
        page,
        per_page,
    })
}

/// Shlink's answer of a visit list: `found`, the page `asked` of it.
fn answer(found: &VisitPage, asked: &VisitQuery, shortener: &Shortener) -> HttpResponse {
    let pagination = Pagination::of(found.total, asked.page, asked.per_page, found.visits.len());
    let data: Vec<VisitObject> = found
        .visits
        .iter()
        .map(|visit| VisitObject::of(visit, shortener))
        .collect();
    HttpResponse::Ok().json(json!({
        "visits": { "data": data, "pagination": pagination }
    }))
}
