//! `GET /rest/v3/tags/stats`: each tag with how many links hold it and
//! their visits, from the click totals.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::access::Gatekeeper;
use crate::links::shortener::Shortener;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, Query};
use crate::web::shlink::short_url::VisitsSummary;
use crate::web::shlink::short_urls::{page_of, paging};

pub(crate) async fn stats(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let query = Query::of(&request);
    let (page, per_page) = paging(&query, None)?;
    let search = query.get("searchTerm").map(str::to_lowercase);
    let stats: Vec<serde_json::Value> = shortener
        .tag_stats(&who)
        .await?
        .into_iter()
        .filter(|(tag, _)| {
            search
                .as_deref()
                .is_none_or(|search| tag.as_str().to_lowercase().contains(search))
        })
        .map(|(tag, stats)| {
            let visits = VisitsSummary::from(stats.totals);
            json!({
                "tag": tag.as_str(),
                "shortUrlsCount": stats.links,
                "visitsSummary": visits,
                // Shlink 3's own fields, which its older clients read.
                "visitsCount": visits.total,
            })
        })
        .collect();
    let (data, pagination) = page_of(stats, page, per_page);
    Ok(HttpResponse::Ok().json(json!({ "tags": { "data": data, "pagination": pagination } })))
}
