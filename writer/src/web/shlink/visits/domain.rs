//! `GET /rest/v3/domains/{domain}/visits`: a domain's visits to its links
//! (`DEFAULT` for the default domain), newest first.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::access::Gatekeeper;
use crate::links::shortener::{Shortener, VisitScope};
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, Query};

pub(crate) async fn visits(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    domain: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let query = Query::of(&request);
    let name = (domain.as_str() != "DEFAULT").then_some(domain.as_str());
    let domain = shortener.domain(name)?;
    let visit_query = super::visit_query(&query, &shortener, false)?;
    let page = shortener
        .visits(&who, VisitScope::Domain(domain), &visit_query)
        .await?;
    Ok(super::answer(&page, &visit_query, &shortener))
}
