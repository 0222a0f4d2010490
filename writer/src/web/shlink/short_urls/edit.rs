//! `PATCH /rest/v3/short-urls/{shortCode}`: changes what is sent; `null`
//! removes an expiry, a visit limit or a title.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::access::Gatekeeper;
use crate::links::shortener::{Change, Shortener};
use crate::web::links::note_purge_failure;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, domain_param, json_object, Query};
use crate::web::shlink::short_url::ShortUrl;
use crate::web::shlink::short_urls::Fields;

/// The fields an edit takes.
const KNOWN: &str =
    "longUrl, tags, title, crawlable, forwardQuery, validSince, validUntil, maxVisits, validateUrl";

pub(crate) async fn edit(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    short_code: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let query = Query::of(&request);
    let domain = shortener.domain(domain_param(&query))?;
    let mut fields = Fields::new(json_object(&body)?);
    let url = fields.text("longUrl")?.flatten();
    let tags = fields.texts("tags")?;
    let title = fields.text("title")?;
    let crawlable = fields.flag("crawlable")?;
    let forward_query = fields.flag("forwardQuery")?;
    let valid_since = fields.text("validSince")?;
    let expires_at = fields.text("validUntil")?;
    let max_clicks = fields.count("maxVisits")?;
    fields.flag("validateUrl")?;
    fields.done(KNOWN)?;
    let change = Change {
        url: url.as_deref(),
        expires_at: expires_at.as_ref().map(Option::as_deref),
        valid_since: valid_since.as_ref().map(Option::as_deref),
        max_clicks,
        forward_query: forward_query.map(Some),
        title: title.as_ref().map(Option::as_deref),
        tags: tags.as_deref(),
        crawlable,
        ..Change::default()
    };
    let written = if change.is_empty() {
        // Nothing to change: Shlink answers the short URL as it is.
        shortener.show_to(&who, domain, &short_code).await?
    } else {
        let written = shortener
            .edit(&who, domain, &short_code, &change, None)
            .await?;
        note_purge_failure(&request, written.purge_warning.as_ref());
        written.outcome
    };
    let link = &written.0;
    Ok(HttpResponse::Ok().json(ShortUrl::read(link, &shortener).await?))
}
