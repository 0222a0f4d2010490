//! `DELETE /rest/v3/short-urls/{shortCode}`: the link answers as deleted
//! (410) from now on, and its code is never given to another link.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::access::Gatekeeper;
use crate::links::shortener::Shortener;
use crate::web::links::note_purge_failure;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, domain_param, Query};

pub(crate) async fn delete(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    short_code: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let query = Query::of(&request);
    let domain = shortener.domain(domain_param(&query))?;
    let written = shortener.delete(&who, domain, &short_code, None).await?;
    note_purge_failure(&request, written.purge_warning.as_ref());
    Ok(HttpResponse::NoContent().finish())
}
