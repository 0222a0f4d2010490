//! `PUT /rest/v3/tags`: `{oldName, newName}`, on every link holding the
//! old one (admin keys only, as in Shlink).

use actix_web::{web, HttpRequest, HttpResponse};

use crate::access::Gatekeeper;
use crate::links::shortener::Shortener;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, json_object};
use crate::web::shlink::short_urls::Fields;

pub(crate) async fn rename(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    body: web::Bytes,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let mut fields = Fields::new(json_object(&body)?);
    let old = fields.text("oldName")?.flatten();
    let new = fields.text("newName")?.flatten();
    fields.done("oldName and newName")?;
    let (Some(old), Some(new)) = (old, new) else {
        return Err(Problem::invalid("oldName", "send both oldName and newName"));
    };
    shortener.rename_tag(&who, &old, &new).await?;
    Ok(HttpResponse::NoContent().finish())
}
