//! HTTP interfaces: the JSON API under `/api/links` and the web pages.
//!
//! This module holds the routes table and the middleware around every
//! route (the host check, the security headers, the write counts); each
//! resource's handlers live in a file of their own:
//!
//! | file | what |
//! | --- | --- |
//! | `error.rs` | the API's error type and its JSON body |
//! | `link_fields.rs` | a link's JSON object read field by field |
//! | `links.rs` | one link: create, read, change, delete; the list |
//! | `bulk.rs` | many links in one request (JSON array or CSV) |
//! | `export.rs` | every link, streamed as CSV or JSON lines |
//! | `stats.rs` | a link's click counts, and the trending links |
//! | `visits.rs` | a link's visit log |
//! | `domains.rs` | the short domains, and their redirects for visits to no link |
//! | `qr.rs` | a link's QR code, SVG or PNG |
//! | `whoami.rs` | who a token belongs to |
//! | `openapi.rs` | the OpenAPI document and the page that draws it |
//! | `shlink/` | Shlink's REST API v3, for Shlink's clients |
//! | `yourls/` | YOURLS' `yourls-api.php`, for YOURLS' tools |
//! | `pages/` | the HTML pages: the form, management, statistics |
//!
//! The children use this module's helpers (`html_page`, `query`) and the
//! shared error; none of them knows the routes table.

use actix_web::http::{header, StatusCode};
use actix_web::{guard, middleware, web, HttpRequest, HttpResponse, ResponseError};

use crate::config::Settings;
use crate::error_code::ErrorCode;
use crate::links::shortener::Shortener;
use crate::metrics::{count_writes, serve_metrics};
use crate::web::bulk::create_links_in_bulk;
use crate::web::error::{form_error, json_error};
use crate::web::export::export_links;
use crate::web::links::{create_link, delete_link, edit_link, get_link, list_links};
use crate::web::openapi::{api_docs_page, openapi_json};
use crate::web::pages::form::{form_page, form_submit, form_upload};
use crate::web::pages::manage::manage_page;
use crate::web::pages::stats_page::stats_page;
use crate::web::qr::{link_qr_png, link_qr_svg};
use crate::web::stats::{link_stats, link_stats_report, trending};
use crate::web::whoami::whoami;

pub mod bulk;
pub mod domains;
pub mod error;
pub mod export;
pub mod link_fields;
pub mod links;
pub mod openapi;
pub mod pages;
pub mod qr;
pub mod shlink;
pub mod stats;
pub mod visits;
pub mod whoami;
pub mod yourls;

pub use bulk::bulk_body_limit;
pub use error::ApiError;

/// Routes of the writer, for `App::configure`; bodies over `max_body_bytes`
/// get 413. The app must also hold a `Shortener`, a `Gatekeeper` and the
/// writer's one `Metrics`.
pub fn routes(config: &mut web::ServiceConfig, settings: &Settings) {
    let max_body_bytes = settings.config.max_body_bytes;
    let cors_origins = settings.config.access.cors_origins.clone();
    config
        .app_data(
            web::JsonConfig::default()
                .limit(max_body_bytes)
                .error_handler(move |error, _req| json_error(&error, max_body_bytes).into()),
        )
        .app_data(
            web::FormConfig::default()
                .limit(max_body_bytes)
                .error_handler(move |error, _req| form_error(&error, max_body_bytes).into()),
        )
        .service(
            // One scope for every route: its middleware counts each write,
            // and, outermost, refuses other hosts and hardens every answer.
            web::scope("")
                .wrap(middleware::from_fn(count_writes))
                .wrap(middleware::from_fn(harden))
                .configure(|config| shlink::routes(config, &cors_origins))
                .configure(yourls::routes)
                .route("/", web::get().to(form_page))
                .route("/", web::post().to(form_submit))
                .route("/bulk", web::post().to(form_upload))
                .route("/manage", web::get().to(manage_page))
                .route("/metrics", web::get().to(serve_metrics))
                .route("/api/whoami", web::get().to(whoami))
                .route("/api/openapi.json", web::get().to(openapi_json))
                .route("/api/docs", web::get().to(api_docs_page))
                .route("/api/links", web::post().to(create_link))
                .route("/api/links", web::get().to(list_links))
                // Before `{key}`, guarded by method, so that a link whose key
                // is `bulk` or `export` is still read, changed and deleted.
                .service(
                    web::resource("/api/links/bulk")
                        .guard(guard::Post())
                        .to(create_links_in_bulk),
                )
                .service(
                    web::resource("/api/links/export")
                        .guard(guard::Get())
                        .to(export_links),
                )
                .route("/api/links/{key}", web::get().to(get_link))
                .route("/api/links/{key}", web::patch().to(edit_link))
                .route("/api/links/{key}", web::delete().to(delete_link))
                .route("/api/links/{key}/stats", web::get().to(link_stats))
                .route(
                    "/api/links/{key}/visits",
                    web::get().to(visits::link_visits),
                )
                .route("/api/links/{key}/qr.svg", web::get().to(link_qr_svg))
                .route("/api/links/{key}/qr.png", web::get().to(link_qr_png))
                .route(
                    "/api/links/{key}/stats/report",
                    web::get().to(link_stats_report),
                )
                .route("/manage/stats/{key}", web::get().to(stats_page))
                .route("/api/trending", web::get().to(trending))
                .route("/api/domains", web::get().to(domains::list_domains))
                .route(
                    "/api/domains/{domain}/redirects",
                    web::patch().to(domains::set_domain_redirects),
                ),
        );
}

/// The request's query string as `T`, or a 422 naming what it may hold.
pub(crate) fn query<T: serde::de::DeserializeOwned>(
    request: &HttpRequest,
    known: &str,
) -> Result<T, ApiError> {
    web::Query::<T>::from_query(request.query_string())
        .map(web::Query::into_inner)
        .map_err(|e| {
            ApiError::new(
                ErrorCode::InvalidInput,
                format!("the query is not valid: {e}; use {known}"),
            )
        })
}

/// The start of an HTML page's answer: never cached, never shown in
/// another site's frame, where a hidden button could be clicked through it,
/// and running no script but `script`, the page's own inline one (see
/// [`page_policy`]); none at all without one.
pub(crate) fn html_page(
    status: StatusCode,
    script: Option<&str>,
) -> actix_web::HttpResponseBuilder {
    let mut response = HttpResponse::build(status);
    response
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            script.map_or_else(|| NON_PAGE_POLICY.to_owned(), page_policy),
        ))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"));
    response
}

/// A page's `Content-Security-Policy`: the one inline script it was built
/// with runs, allowed by its SHA-256, and no other: not one injected into
/// the page (which could read the access token the management page keeps in
/// `sessionStorage`), nor one from elsewhere, nor a plugin; no `<base>` can
/// move its links, and no other site may frame it.
fn page_policy(script: &str) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let digest = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(script));
    format!("script-src 'sha256-{digest}'; {OTHER_POLICY}")
}

/// What every answer's `Content-Security-Policy` holds besides a page's
/// `script-src`.
const OTHER_POLICY: &str = "object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/// Every answer that is not a page (JSON, images, errors, metrics) loads
/// and runs nothing, should a browser be made to open it as a document.
const NON_PAGE_POLICY: &str = "default-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/// Around every route: a request whose `Host` (or absolute URL) names a
/// host that is not this writer's gets 421, so that a page whose name was
/// rebound to the writer's address (DNS rebinding) cannot use it; every
/// answer, refusals and errors included, says `X-Content-Type-Options:
/// nosniff` and has a `Content-Security-Policy`: a page's own, or
/// [`NON_PAGE_POLICY`].
async fn harden(
    request: actix_web::dev::ServiceRequest,
    next: middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    let refusal = request
        .app_data::<web::Data<Shortener>>()
        .and_then(|shortener| foreign_host(request.request(), &shortener.settings));
    // Handlers answer their errors themselves (actix turns a handler's or
    // an extractor's error into its response), so every answer passes here.
    let mut response = match refusal {
        Some(message) => request
            .into_response(ApiError::new(ErrorCode::WrongHost, message).error_response())
            .map_into_right_body(),
        None => next.call(request).await?.map_into_left_body(),
    };
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            header::HeaderValue::from_static(NON_PAGE_POLICY),
        );
    }
    Ok(response)
}

/// Why the writer does not answer `request`: its `Host` header, or the
/// host of its absolute URL, is not one of the writer's
/// ([`Settings::host_refusal`]). A request naming no host (HTTP/1.0)
/// comes from no browser, and is answered.
fn foreign_host(request: &HttpRequest, settings: &Settings) -> Option<String> {
    let named = request.uri().authority().map(|a| a.as_str().to_owned());
    let headers = request
        .headers()
        .get_all(header::HOST)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    named
        .into_iter()
        .chain(headers)
        .find_map(|authority| settings.host_refusal(&authority))
}

/// Whether the browser reached the writer over HTTPS: the writer itself
/// speaks plain HTTP, so only a proxy in front of it can say, through
/// `X-Forwarded-Proto`, and only a proxy trusted by
/// `rate_limit.trust_forwarded_for` is believed.
pub(crate) fn came_over_https(request: &HttpRequest, settings: &Settings) -> bool {
    let trusted = request
        .peer_addr()
        .is_some_and(|peer| settings.config.rate_limit.trusts_forwarded_from(peer.ip()));
    trusted
        && request
            .headers()
            .get_all("x-forwarded-proto")
            .last()
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.rsplit(',').next())
            .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}
