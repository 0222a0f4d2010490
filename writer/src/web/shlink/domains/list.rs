//! `GET /rest/v3/domains`: the short domains the key may use, with where
//! each sends its bare path, a path that is no key and an unknown key: what
//! is set while the writer runs, or else configured.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::access::Gatekeeper;
use crate::links::shortener::Shortener;
use crate::web::shlink::domains::redirects_json;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::api_key;

pub(crate) async fn list(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let mut data = Vec::new();
    for domain in shortener.domains_of(&who, None)? {
        data.push(json!({
            "domain": domain.name,
            "isDefault": domain.is_default(),
            "redirects": redirects_json(&shortener.redirects_of(domain).await?),
        }));
    }
    let default = shortener.domain(None)?;
    Ok(HttpResponse::Ok().json(json!({
        "domains": {
            "data": data,
            "defaultRedirects": redirects_json(&shortener.redirects_of(default).await?),
        }
    })))
}
