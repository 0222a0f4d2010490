//! Click counts through the API: a link's statistics (as JSON, or drawn
//! for the statistics page), and the trending links.

// `#[utoipa::path]` writes the `params(...)` types out with their module
// path, which this lint flags in the code it generates.
#![allow(unused_qualifications)]

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::access::Gatekeeper;
use crate::clicks::{LinkStats, Trending};
use crate::links::shortener::Shortener;
use crate::web::error::{ApiError, ErrorBody};
use crate::web::{html_page, query};

/// A link's counts, with the short domain it is on.
#[derive(Debug, Serialize, ToSchema)]
pub struct DomainStats {
    /// The short domain the link is on (its canonical name): the same key
    /// on two domains is two links, each with its own counts.
    pub domain: String,
    #[serde(flatten)]
    pub stats: LinkStats,
}

/// The links with the most clicks lately.
#[derive(Debug, Serialize, ToSchema)]
pub struct TrendingLinks {
    pub links: Vec<Trending>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StatsParams {
    days: Option<u64>,
    /// The link's short domain, by its name or an alias; absent: the
    /// default one.
    domain: Option<String>,
}

/// A link's click counts, for its owner or an admin.
#[utoipa::path(
    get,
    path = "/api/links/{key}/stats",
    tag = "clicks",
    params(("key" = String, Path, description = "The link's key"), StatsParams),
    responses(
        (status = 200, description = "The link's click counts, with its domain", body = DomainStats),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "The link belongs to another token (`not-owner`), or the token is limited to other domains (`domain-not-allowed`)", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 422, description = "days is out of bounds, or the domain is not served here (`unknown-domain`)", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
pub(crate) async fn link_stats(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let params = query::<StatsParams>(&request, "days and domain")?;
    let domain = shortener.domain(params.domain.as_deref())?;
    let (stats, _) = shortener.stats(&who, domain, &key, params.days).await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(DomainStats {
            domain: domain.name.clone(),
            stats,
        }))
}

/// A link's click counts drawn as HTML (charts and tables), for the
/// statistics page; the same rules as [`link_stats`].
#[utoipa::path(
    get,
    path = "/api/links/{key}/stats/report",
    tag = "clicks",
    params(("key" = String, Path, description = "The link's key"), StatsParams),
    responses(
        (status = 200, description = "The counts drawn as HTML, for the statistics page", content_type = "text/html"),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "The link belongs to another token (`not-owner`), or the token is limited to other domains (`domain-not-allowed`)", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 422, description = "days is out of bounds, or the domain is not served here (`unknown-domain`)", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
pub(crate) async fn link_stats_report(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let params = query::<StatsParams>(&request, "days and domain")?;
    let domain = shortener.domain(params.domain.as_deref())?;
    // A deleted link (admins may read its counts) has no target to show.
    let (stats, record) = shortener.stats(&who, domain, &key, params.days).await?;
    let target = record.as_ref().map(|record| record.url.as_str());
    let body = crate::web::pages::stats_page::report(&stats, &domain.short_url(&key), target);
    // A fragment the statistics page shows: it runs no script of its own.
    Ok(html_page(StatusCode::OK, None).body(body))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TrendingParams {
    minutes: Option<u64>,
    limit: Option<usize>,
    /// Only this short domain's links (by its name or an alias); absent:
    /// every domain the token may use, ranked together.
    domain: Option<String>,
}

/// The links with the most clicks in the last minutes.
#[utoipa::path(
    get,
    path = "/api/trending",
    tag = "clicks",
    params(TrendingParams),
    responses(
        (status = 200, description = "The links with the most people's clicks lately, each with its domain: the token's own, or for an admin everyone's", body = TrendingLinks),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "The token is limited to other domains (`domain-not-allowed`)", body = ErrorBody),
        (status = 422, description = "minutes or limit is out of bounds, or the domain is not served here (`unknown-domain`)", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
pub(crate) async fn trending(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let params = query::<TrendingParams>(&request, "minutes, limit and domain")?;
    let links = shortener
        .trending(&who, params.domain.as_deref(), params.minutes, params.limit)
        .await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(TrendingLinks { links }))
}
