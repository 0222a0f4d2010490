//! Who a bearer token belongs to.

// `#[utoipa::path]` writes the `params(...)` types out with their module
// path, which this lint flags in the code it generates.
#![allow(unused_qualifications)]

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::access::Gatekeeper;
use crate::links::shortener::Shortener;
use crate::web::error::{ApiError, ErrorBody};

/// Who a token belongs to.
#[derive(Debug, Serialize, ToSchema)]
pub struct WhoAmI {
    pub name: String,
    pub admin: bool,
    /// The short domains (canonical names) the token may act on: every
    /// domain served here unless it is limited to some.
    pub domains: Vec<String>,
    /// The token's YOURLS signature, which YOURLS' tools sign in with
    /// (`signature`) instead of the token itself.
    pub yourls_signature: String,
}

/// Who the bearer token belongs to: lets a client check a token before
/// using it, and the management page greet its user.
#[utoipa::path(
    get,
    path = "/api/whoami",
    tag = "operations",
    responses(
        (status = 200, description = "The token's name, whether it is an admin's, and the domains it may act on", body = WhoAmI),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
    ),
    security(("token" = []))
)]
pub(crate) async fn whoami(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let token = crate::access::bearer_token(&request).unwrap_or_default();
    let domains = shortener
        .domains_of(&who, None)?
        .into_iter()
        .map(|domain| domain.name.clone())
        .collect();
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(WhoAmI {
            name: who.owner.to_string(),
            admin: who.admin,
            domains,
            yourls_signature: crate::access::yourls_signature(&token),
        }))
}
