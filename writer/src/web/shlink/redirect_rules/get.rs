//! `GET /rest/v3/short-urls/{shortCode}/redirect-rules`: the link's URL and
//! its rules, in Shlink's shape.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::access::Gatekeeper;
use crate::links::rules::bodies_of;
use crate::links::shortener::Shortener;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::redirect_rules::conditions::shlink_rules_of;
use crate::web::shlink::request::{api_key, domain_param, Query};

pub(crate) async fn get(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    short_code: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let query = Query::of(&request);
    let domain = shortener.domain(domain_param(&query))?;
    let (link, _) = shortener.show_to(&who, domain, &short_code).await?;
    Ok(HttpResponse::Ok().json(rules_answer(&link)))
}

/// A link's rules as Shlink answers them.
pub(crate) fn rules_answer(link: &crate::links::store::Link) -> serde_json::Value {
    let (rules, _) = bodies_of(&link.record.targeting);
    json!({
        "defaultLongUrl": link.record.url.to_string(),
        "redirectRules": shlink_rules_of(&rules),
    })
}
