//! `DELETE /rest/v3/tags?tags[]=...`: the tags removed from every link
//! holding them (admin keys only, as in Shlink).

use actix_web::{web, HttpRequest, HttpResponse};

use crate::access::Gatekeeper;
use crate::links::shortener::Shortener;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, Query};

pub(crate) async fn delete(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let tags = Query::of(&request).list("tags");
    shortener.delete_tags(&who, &tags).await?;
    Ok(HttpResponse::NoContent().finish())
}
