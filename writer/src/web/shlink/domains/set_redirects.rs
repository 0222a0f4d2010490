//! `PATCH /rest/v3/domains/redirects`: `{"domain", "baseUrlRedirect",
//! "regular404Redirect", "invalidShortUrlRedirect"}` sets where the
//! domain sends visits to no link; a redirect left out is kept, `null`
//! clears it (the configuration's answers again). Answers the domain's
//! redirects as they are now; Varnish has read them by then.

use actix_web::{web, HttpRequest, HttpResponse};
use shortlink_core::NotFoundKind;

use crate::access::Gatekeeper;
use crate::links::shortener::{RedirectsChange, Shortener};
use crate::web::links::note_purge_failure;
use crate::web::shlink::domains::redirects_json;
use crate::web::shlink::problem::{shlink_redirect_name, Problem};
use crate::web::shlink::request::{api_key, json_object};
use crate::web::shlink::short_urls::Fields;

pub(crate) async fn set(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    body: web::Bytes,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let mut fields = Fields::new(json_object(&body)?);
    let Some(Some(domain)) = fields.text("domain")? else {
        return Err(Problem::invalid(
            "domain",
            "name the domain whose redirects to set, such as {\"domain\": \"go.example\"}",
        ));
    };
    let mut change = RedirectsChange {
        domain: Some(domain),
        kinds: Vec::new(),
    };
    for kind in NotFoundKind::ALL {
        if let Some(url) = fields.text(shlink_redirect_name(kind))? {
            change.kinds.push((kind, url));
        }
    }
    fields.done("domain, baseUrlRedirect, regular404Redirect, invalidShortUrlRedirect")?;
    let set = shortener.set_redirects(&who, change).await?;
    note_purge_failure(&request, set.warning.as_ref());
    Ok(HttpResponse::Ok().json(redirects_json(&set.redirects)))
}
