//! `GET /rest/health` (and `/rest/v3/health`): whether the links' store
//! answers, with no key needed; and `mercure-info`, which answers that
//! real-time updates are not offered.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde_json::json;

use crate::links::shortener::Shortener;
use crate::web::shlink::problem::{Problem, ProblemType};

/// The Shlink version whose API this one answers as: the web app switches
/// on the features of the version a server reports, so it is the newest
/// whose features used by the web app work here.
pub const SHLINK_VERSION: &str = "3.7.0";

pub(crate) async fn health(shortener: web::Data<Shortener>) -> HttpResponse {
    let (status, word) = match shortener.ping().await {
        Ok(()) => (StatusCode::OK, "pass"),
        Err(error) => {
            log::warn!("health: the links' store does not answer: {error}");
            (StatusCode::SERVICE_UNAVAILABLE, "fail")
        }
    };
    HttpResponse::build(status)
        .content_type("application/health+json")
        .insert_header(("Cache-Control", "no-store"))
        .body(
            json!({
                "status": word,
                "version": SHLINK_VERSION,
                "links": {
                    "about": "https://shlink.io",
                    "project": "https://github.com/shlinkio/shlink",
                },
            })
            .to_string(),
        )
}

pub(crate) async fn mercure_info() -> Result<HttpResponse, Problem> {
    Err(Problem::new(
        ProblemType::MercureNotConfigured,
        "This Shlink API offers no Mercure hub: read changes by listing again",
    ))
}
