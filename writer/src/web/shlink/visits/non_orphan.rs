//! `GET /rest/v3/visits/non-orphan`: visits to any link the key may see,
//! over every domain (or the one `domain` names), newest first.

use actix_web::{web, HttpRequest, HttpResponse};

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
    let visit_query = super::visit_query(&query, &shortener, true)?;
    let page = shortener
        .visits(&who, VisitScope::Links, &visit_query)
        .await?;
    Ok(super::answer(&page, &visit_query, &shortener))
}
