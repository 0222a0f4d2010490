//! `GET /rest/v3/short-urls/{shortCode}`: one short URL.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::access::Gatekeeper;
use crate::links::shortener::Shortener;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, domain_param, Query};
use crate::web::shlink::short_url::ShortUrl;

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
    Ok(HttpResponse::Ok().json(ShortUrl::read(&link, &shortener).await?))
}
