//! `DELETE /rest/v3/short-urls/{shortCode}/visits`: forgets a link's visit
//! log; its totals, which click limits read, stay.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::access::Gatekeeper;
use crate::links::shortener::{Shortener, VisitScope};
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, domain_param, Query};

pub(crate) async fn delete(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    short_code: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let query = Query::of(&request);
    let domain = shortener.domain(domain_param(&query))?;
    let scope = VisitScope::Link {
        domain,
        key: &short_code,
    };
    let deleted = shortener.delete_visits(&who, scope).await?;
    Ok(HttpResponse::Ok().json(json!({ "deletedVisits": deleted })))
}
