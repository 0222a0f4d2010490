//! Who a bearer token belongs to.

// `#[utoipa::path]` writes the `params(...)` types out with their module
// path, which this lint flags in the code it generates.
#![allow(unused_qualifications)]

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::access::Gatekeeper;
use crate::web::error::{ApiError, ErrorBody};

/// Who a token belongs to.
#[derive(Debug, Serialize, ToSchema)]
pub struct WhoAmI {
    pub name: String,
    pub admin: bool,
}

/// Who the bearer token belongs to: lets a client check a token before
/// using it, and the management page greet its user.
#[utoipa::path(
    get,
    path = "/api/whoami",
    tag = "operations",
    responses(
        (status = 200, description = "The token's name and whether it is an admin's", body = WhoAmI),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
    ),
    security(("token" = []))
)]
pub(crate) async fn whoami(
    request: HttpRequest,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(WhoAmI {
            name: who.owner.to_string(),
            admin: who.admin,
        }))
}
