//! Shlink's REST API v3, so that Shlink's clients (its web app, its SDK,
//! scripts written for it) manage the links served here. Every route
//! translates Shlink's wire format into the links area's one typed request
//! and back; nothing here decides what a link may be.
//!
//! | file | what |
//! | --- | --- |
//! | `request.rs` | what every route reads: the key, a JSON body, Shlink's query strings |
//! | `problem.rs` | Shlink's `problem+json` errors, one type per case |
//! | `short_url.rs` | Shlink's `ShortUrl` object, and its dates |
//! | `short_urls/` | list, create, get, edit, delete a short URL |
//! | `redirect_rules/` | a short URL's rules, in Shlink's conditions |
//! | `tags/` | list, stats, rename, delete tags |
//! | `domains/` | the short domains, and their redirects for visits to no link |
//! | `visits/` | the visits overview, from the click totals; visit lists from the visit log |
//! | `health.rs` | `health`, and `mercure-info` (not offered) |
//!
//! Auth: `X-Api-Key` carries the native API's tokens, with their owners,
//! admins and domain limits. CORS is open to the origins of
//! `[access] cors_origins`: these routes take no cookie, so another origin
//! can do no more than the key it sends.

use actix_cors::Cors;
use actix_web::http::{header, Method};
use actix_web::{web, HttpRequest};

mod domains;
mod health;
pub mod problem;
mod redirect_rules;
mod request;
pub mod short_url;
mod short_urls;
mod tags;
mod visits;

pub use health::SHLINK_VERSION;
pub use problem::{Problem, ProblemType};

/// Shlink's routes, under `/rest`, for `App::configure`.
pub fn routes(config: &mut web::ServiceConfig, origins: &[String]) {
    config.service(
        web::scope("/rest")
            .wrap(cors(origins))
            .route("/health", web::get().to(health::health))
            .route("/v3/health", web::get().to(health::health))
            .route("/v3/mercure-info", web::get().to(health::mercure_info))
            .route("/v3/short-urls", web::get().to(short_urls::list::list))
            .route("/v3/short-urls", web::post().to(short_urls::create::create))
            .route(
                "/v3/short-urls/{short_code}",
                web::get().to(short_urls::get::get),
            )
            .route(
                "/v3/short-urls/{short_code}",
                web::patch().to(short_urls::edit::edit),
            )
            .route(
                "/v3/short-urls/{short_code}",
                web::delete().to(short_urls::delete::delete),
            )
            .route(
                "/v3/short-urls/{short_code}/redirect-rules",
                web::get().to(redirect_rules::get::get),
            )
            .route(
                "/v3/short-urls/{short_code}/redirect-rules",
                web::post().to(redirect_rules::set::set),
            )
            .route(
                "/v3/short-urls/{short_code}/redirect-rules",
                web::patch().to(redirect_rules::set::set),
            )
            .route("/v3/tags", web::get().to(tags::list::list))
            .route("/v3/tags/stats", web::get().to(tags::stats::stats))
            .route("/v3/tags", web::put().to(tags::rename::rename))
            .route("/v3/tags", web::delete().to(tags::delete::delete))
            .route("/v3/domains", web::get().to(domains::list::list))
            .route(
                "/v3/domains/redirects",
                web::patch().to(domains::set_redirects::set),
            )
            .route("/v3/visits", web::get().to(visits::overview::overview))
            .route(
                "/v3/short-urls/{short_code}/visits",
                web::get().to(visits::short_url::visits),
            )
            .route(
                "/v3/short-urls/{short_code}/visits",
                web::delete().to(visits::delete_short_url::delete),
            )
            .route("/v3/tags/{tag}/visits", web::get().to(visits::tag::visits))
            .route(
                "/v3/domains/{domain}/visits",
                web::get().to(visits::domain::visits),
            )
            .route(
                "/v3/visits/non-orphan",
                web::get().to(visits::non_orphan::visits),
            )
            .route("/v3/visits/orphan", web::get().to(visits::orphan::visits))
            .route(
                "/v3/visits/orphan",
                web::delete().to(visits::delete_orphans::delete),
            )
            .default_service(web::to(not_found)),
    );
}

/// CORS for browser apps on other origins: any of `origins` (`*`: any),
/// with the methods and headers Shlink's clients send.
fn cors(origins: &[String]) -> Cors {
    let mut cors = Cors::default()
        .allowed_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ])
        .allowed_headers([
            header::HeaderName::from_static("x-api-key"),
            header::CONTENT_TYPE,
            header::ACCEPT,
        ])
        .max_age(3600);
    if origins.iter().any(|origin| origin == "*") {
        cors = cors.allow_any_origin().send_wildcard();
    } else {
        for origin in origins {
            cors = cors.allowed_origin(origin);
        }
    }
    cors
}

async fn not_found(request: HttpRequest) -> Result<actix_web::HttpResponse, Problem> {
    Err(Problem::new(
        ProblemType::NotFound,
        format!(
            "{} {} is not a route of this Shlink API; see docs/shlink.md for those it has",
            request.method(),
            request.path()
        ),
    ))
}
