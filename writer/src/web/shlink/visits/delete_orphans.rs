//! `DELETE /rest/v3/visits/orphan`: forgets every domain's orphan visits
//! and their counts; admins' keys only.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::access::Gatekeeper;
use crate::links::shortener::{Shortener, VisitScope};
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::api_key;

pub(crate) async fn delete(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let deleted = shortener
        .delete_visits(&who, VisitScope::Orphans(None))
        .await?;
    Ok(HttpResponse::Ok().json(json!({ "deletedVisits": deleted })))
}
