//! A link's QR code, as SVG or as PNG of a chosen size.

// `#[utoipa::path]` writes the `params(...)` types out with their module
// path, which this lint flags in the code it generates.
#![allow(unused_qualifications)]

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::access::Gatekeeper;
use crate::error_code::ErrorCode;
use crate::links::shortener::Shortener;
use crate::web::error::{ApiError, ErrorBody};
use crate::web::links::DomainParams;
use crate::web::query;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct QrParams {
    size: Option<u64>,
    /// The link's short domain, by its name or an alias; absent: the
    /// default one.
    domain: Option<String>,
}

/// How long a link's QR code may be kept: its short URL never changes,
/// but the link may be deleted.
const QR_CACHE_CONTROL: &str = "public, max-age=3600";

/// The short URL of `key` on the domain named `domain`, a link that
/// exists (404 or 410 otherwise, as for the link itself): what its QR code
/// holds.
async fn qr_target(
    shortener: &Shortener,
    domain: Option<&str>,
    key: &str,
) -> Result<String, ApiError> {
    let domain = shortener.domain(domain)?;
    let (link, _) = shortener.show(domain, key).await?;
    Ok(shortener.link_url(&link))
}

fn qr_failed(error: &crate::qr::QrError) -> ApiError {
    log::error!("QR code: {error}");
    ApiError::new(ErrorCode::QrFailed, error.to_string())
}

/// The short link of `key` as an SVG QR code, for anyone (the link is).
#[utoipa::path(
    get,
    path = "/api/links/{key}/qr.svg",
    tag = "links",
    params(("key" = String, Path, description = "The link's key"), DomainParams),
    responses(
        (status = 200, description = "The short URL as a QR code", content_type = "image/svg+xml", body = String),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 410, description = "The link was deleted; its key is never given to another link", body = ErrorBody),
        (status = 422, description = "The domain is not served here (`unknown-domain`), or the query is not valid", body = ErrorBody),
        (status = 500, description = "The QR code could not be drawn", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    )
)]
pub(crate) async fn link_qr_svg(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let params = query::<DomainParams>(&request, "domain")?;
    let url = qr_target(&shortener, params.domain.as_deref(), &key).await?;
    let svg = crate::qr::svg(&url).map_err(|e| qr_failed(&e))?;
    Ok(HttpResponse::Ok()
        .content_type("image/svg+xml")
        .insert_header((header::CACHE_CONTROL, QR_CACHE_CONTROL))
        .body(svg))
}

/// The short link of `key` as a PNG QR code of `?size=N` pixels (128 to
/// 2048; 512 by default). A code drawn lately is answered as kept; a new
/// one is drawn off the request threads, a few at once, and costs a
/// client without a token one image of its rate limit.
#[utoipa::path(
    get,
    path = "/api/links/{key}/qr.png",
    tag = "links",
    params(("key" = String, Path, description = "The link's key"), QrParams),
    responses(
        (status = 200, description = "The short URL as a QR code", content_type = "image/png", body = Vec<u8>),
        (status = 401, description = "An access token that is not valid (`WWW-Authenticate` says so)", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 410, description = "The link was deleted; its key is never given to another link", body = ErrorBody),
        (status = 422, description = "size is out of bounds, or the domain is not served here (`unknown-domain`)", body = ErrorBody),
        (status = 429, description = "Too many codes drawn for this address without a token; `Retry-After` says when to come back", body = ErrorBody),
        (status = 500, description = "The QR code could not be drawn", body = ErrorBody),
        (status = 503, description = "Too many codes are being drawn, or the link store (Redis) is unreachable; `Retry-After` says when to try again", body = ErrorBody),
    ),
    security((), ("token" = []))
)]
pub(crate) async fn link_qr_png(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    use crate::qr::{RenderError, BUSY_RETRY_AFTER_S, RENDERER};
    let params = query::<QrParams>(&request, "size and domain")?;
    let size = params.size.map_or(Ok(crate::qr::QrSize::DEFAULT), |size| {
        crate::qr::QrSize::try_from(size)
            .map_err(|e| ApiError::new(ErrorCode::InvalidInput, e.to_string()))
    })?;
    let url = qr_target(&shortener, params.domain.as_deref(), &key).await?;
    let png = if let Some(png) = RENDERER.kept(&url, size) {
        png
    } else {
        guard.spend_image(&request).await.map_err(|refusal| {
            let mut error = ApiError::from(refusal);
            if let Some(seconds) = error.retry_after_s {
                error.message = format!(
                    "too many QR codes drawn for your address; try again in {seconds} s, \
                     fetch the SVG, or use an access token"
                );
            }
            error
        })?;
        RENDERER.draw(&url, size).await.map_err(|e| match e {
            RenderError::Busy => ApiError {
                retry_after_s: Some(BUSY_RETRY_AFTER_S),
                ..ApiError::new(ErrorCode::QrBusy, e.to_string())
            },
            RenderError::Qr(e) => qr_failed(&e),
        })?
    };
    Ok(HttpResponse::Ok()
        .content_type("image/png")
        .insert_header((header::CACHE_CONTROL, QR_CACHE_CONTROL))
        .body(png))
}
