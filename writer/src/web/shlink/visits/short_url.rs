//! `GET /rest/v3/short-urls/{shortCode}/visits`: a link's visits, newest
//! first, from its visit log.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::access::Gatekeeper;
use crate::links::shortener::{Shortener, VisitScope};
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, domain_param, Query};

pub(crate) async fn visits(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    short_code: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let query = Query::of(&request);
    let domain = shortener.domain(domain_param(&query))?;
    let visit_query = super::visit_query(&query, &shortener, false)?;
    let scope = VisitScope::Link {
        domain,
        key: &short_code,
    };
    let page = shortener.visits(&who, scope, &visit_query).await?;
    Ok(super::answer(&page, &visit_query, &shortener))
}
