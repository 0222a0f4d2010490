//! `GET /rest/v3/tags`: the tags of the links the key may change, by name.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::access::Gatekeeper;
use crate::links::shortener::Shortener;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, Query};
use crate::web::shlink::short_urls::{page_of, paging};

pub(crate) async fn list(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let query = Query::of(&request);
    let (page, per_page) = paging(&query, None)?;
    let search = query.get("searchTerm").map(str::to_lowercase);
    let names: Vec<String> = shortener
        .tag_stats(&who)
        .await?
        .into_keys()
        .map(String::from)
        .filter(|name| {
            search
                .as_deref()
                .is_none_or(|search| name.to_lowercase().contains(search))
        })
        .collect();
    let (data, pagination) = page_of(names, page, per_page);
    Ok(HttpResponse::Ok().json(json!({ "tags": { "data": data, "pagination": pagination } })))
}
