//! The short domains through the native API: those a token may use, and
//! where each sends visits to no link (its bare path, a path that is no
//! key, a key no link holds), which an admin, or a token limited to the
//! domain, may set while the writer runs.

// `#[utoipa::path]` writes the `params(...)` types out with their module
// path, which this lint flags in the code it generates.
#![allow(unused_qualifications)]

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use shortlink_core::{NotFoundKind, NotFoundRedirects};
use utoipa::ToSchema;

use crate::access::Gatekeeper;
use crate::config::Domain;
use crate::links::shortener::{RedirectsChange, Shortener};
use crate::links::validate::Field;
use crate::web::error::{ApiError, ErrorBody};
use crate::web::link_fields::Fields;
use crate::web::links::note_purge_failure;

/// A short domain and where it sends visits to no link.
#[derive(Debug, Serialize, ToSchema)]
pub struct DomainBody {
    /// Its canonical name.
    pub domain: String,
    /// Where its links are: a link is this followed by its key.
    pub base_url: String,
    pub is_default: bool,
    pub redirects: RedirectsBody,
    /// Set when a Varnish node was not told of a change: the purge is
    /// queued and sent again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Where a domain sends each kind of visit to no link (302), as set while
/// the writer runs or else configured; absent: the 404 page (the bare
/// domain at the root: what it answers without links).
#[derive(Debug, Serialize, ToSchema)]
// The wire names, the same as the fields' errors name.
#[allow(clippy::struct_field_names)]
pub struct RedirectsBody {
    /// The bare domain: its link path alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url_redirect: Option<String>,
    /// Any other path of the domain that is no key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regular_404_redirect: Option<String>,
    /// A key no link holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid_short_url_redirect: Option<String>,
}

impl From<&NotFoundRedirects> for RedirectsBody {
    fn from(redirects: &NotFoundRedirects) -> Self {
        let url = |kind| redirects.get(kind).map(ToString::to_string);
        Self {
            base_url_redirect: url(NotFoundKind::BaseUrl),
            regular_404_redirect: url(NotFoundKind::Regular404),
            invalid_short_url_redirect: url(NotFoundKind::InvalidShortUrl),
        }
    }
}

/// What `PATCH /api/domains/{domain}/redirects` takes: each redirect given
/// is set, `null` clears it (the configuration's answers again), and one
/// left out is kept.
#[derive(Debug, ToSchema)]
// Only described, never built: the handler reads the fields one by one to
// tell a `null` from one left out. The wire names, as above.
#[allow(dead_code, clippy::struct_field_names)]
pub struct RedirectsInput {
    /// The bare domain: its link path alone.
    base_url_redirect: Option<String>,
    /// Any other path of the domain that is no key.
    regular_404_redirect: Option<String>,
    /// A key no link holds.
    invalid_short_url_redirect: Option<String>,
}

/// The domains a token may use, the default first.
#[derive(Debug, Serialize, ToSchema)]
pub struct DomainsBody {
    pub domains: Vec<DomainBody>,
}

fn domain_body(domain: &Domain, redirects: &NotFoundRedirects) -> DomainBody {
    DomainBody {
        domain: domain.name.clone(),
        base_url: domain.base.to_string(),
        is_default: domain.is_default(),
        redirects: redirects.into(),
        warning: None,
    }
}

/// The short domains the token may use, with their redirects.
#[utoipa::path(
    get,
    path = "/api/domains",
    tag = "links",
    responses(
        (status = 200, description = "The domains, the default first", body = DomainsBody),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 503, description = "The store (Redis) is unreachable; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
pub(crate) async fn list_domains(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let mut domains = Vec::new();
    for domain in shortener.domains_of(&who, None)? {
        domains.push(domain_body(domain, &shortener.redirects_of(domain).await?));
    }
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(DomainsBody { domains }))
}

/// Sets where a domain sends visits to no link; Varnish redirects the new
/// way when this answers.
#[utoipa::path(
    patch,
    path = "/api/domains/{domain}/redirects",
    tag = "links",
    params(("domain" = String, Path, description = "The domain's name, or an alias")),
    request_body = RedirectsInput,
    responses(
        (status = 200, description = "The domain, with its redirects as they are now", body = DomainBody),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "The token is neither an admin's nor limited to this domain (`forbidden`), or limited to others (`domain-not-allowed`)", body = ErrorBody),
        (status = 422, description = "A redirect is no http(s) URL (the field is named), a field is unknown, or the domain is not served here (`unknown-domain`)", body = ErrorBody),
        (status = 503, description = "The store (Redis) is unreachable; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
pub(crate) async fn set_domain_redirects(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    domain: web::Path<String>,
    body: web::Json<serde_json::Map<String, serde_json::Value>>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let mut fields = Fields(body.into_inner());
    let mut change = RedirectsChange {
        domain: Some(domain.into_inner()),
        kinds: Vec::new(),
    };
    for kind in NotFoundKind::ALL {
        if let Some(url) = fields.text(Field::Redirect(kind), true)? {
            change.kinds.push((kind, url));
        }
    }
    fields.done_of(
        "a domain's redirects",
        &NotFoundKind::ALL.map(Field::Redirect),
    )?;
    let set = shortener.set_redirects(&who, change).await?;
    note_purge_failure(&request, set.warning.as_ref());
    let mut body = domain_body(set.domain, &set.redirects);
    body.warning = set.warning;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(body))
}
