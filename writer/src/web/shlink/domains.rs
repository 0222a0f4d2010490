//! `GET /rest/v3/domains`: the short domains the key may use, with where
//! each sends a bare domain and an unknown code.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::access::Gatekeeper;
use crate::config::Domain;
use crate::links::shortener::Shortener;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::api_key;

pub(crate) async fn list(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let data: Vec<serde_json::Value> = shortener
        .domains_of(&who, None)?
        .into_iter()
        .map(|domain| {
            json!({
                "domain": domain.name,
                "isDefault": domain.is_default(),
                "redirects": redirects(domain),
            })
        })
        .collect();
    let default = shortener.domain(None)?;
    Ok(HttpResponse::Ok().json(json!({
        "domains": { "data": data, "defaultRedirects": redirects(default) }
    })))
}

/// A domain's redirects in Shlink's names: its bare domain's, and its
/// unknown keys'. Other paths on a short domain answer 404.
fn redirects(domain: &Domain) -> serde_json::Value {
    json!({
        "baseUrlRedirect": domain.bare.as_ref().map(ToString::to_string),
        "regular404Redirect": null,
        "invalidShortUrlRedirect": domain.not_found.as_ref().map(ToString::to_string),
    })
}
