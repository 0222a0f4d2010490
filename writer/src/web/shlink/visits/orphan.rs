//! `GET /rest/v3/visits/orphan`: visits to no link (`type` = `base_url`,
//! `invalid_short_url` or `regular_404`), newest first; admins' keys only.

use actix_web::{web, HttpRequest, HttpResponse};
use shortlink_core::clicks::visits::VisitKind;

use crate::access::Gatekeeper;
use crate::links::shortener::{Shortener, VisitScope};
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, Query};

pub(crate) async fn visits(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let query = Query::of(&request);
    let kind = match query.get("type").filter(|name| !name.is_empty()) {
        None => None,
        Some(name) => Some(VisitKind::of_orphan_type(name).ok_or_else(|| {
            Problem::invalid(
                "type",
                "type is one of base_url, invalid_short_url, regular_404",
            )
        })?),
    };
    let visit_query = super::visit_query(&query, &shortener, true)?;
    let page = shortener
        .visits(&who, VisitScope::Orphans(kind), &visit_query)
        .await?;
    Ok(super::answer(&page, &visit_query, &shortener))
}
