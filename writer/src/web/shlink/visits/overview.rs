//! `GET /rest/v3/visits`: the visits overview, from the exact click totals
//! of the links the key may change, and the orphans' counts (an admin's).

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::access::Gatekeeper;
use crate::clicks::Totals;
use crate::links::shortener::Shortener;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::api_key;
use crate::web::shlink::short_url::VisitsSummary;

pub(crate) async fn overview(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let mut totals = Totals::default();
    for entry in shortener.catalog(&who, None).await? {
        totals.people += entry.totals.people;
        totals.bots += entry.totals.bots;
    }
    let links = VisitsSummary::from(totals);
    let orphans = VisitsSummary::from(shortener.orphan_totals(&who).await?);
    Ok(HttpResponse::Ok().json(json!({
        "visits": {
            "nonOrphanVisits": links,
            "orphanVisits": orphans,
            // Shlink 3's own fields, which its older clients read.
            "visitsCount": links.total,
            "orphanVisitsCount": orphans.total,
        }
    })))
}
