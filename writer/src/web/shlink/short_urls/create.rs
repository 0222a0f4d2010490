//! `POST /rest/v3/short-urls`: a new short URL, from Shlink's fields.
//!
//! A generated code is the shortest free prefix of the long URL's digest,
//! as for every link here: the same URL from the same key with the same
//! settings finds the code it has, whether or not `findIfExists` asks to.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::access::{Caller, Gatekeeper};
use crate::links::shortener::{NewLink, Shortener};
use crate::links::store::Inserted;
use crate::web::links::note_purge_failure;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::request::{api_key, json_object};
use crate::web::shlink::short_url::ShortUrl;
use crate::web::shlink::short_urls::Fields;

/// The fields a create takes.
const KNOWN: &str = "longUrl, customSlug, shortCodeLength, domain, findIfExists, tags, title, \
                     crawlable, forwardQuery, validSince, validUntil, maxVisits, validateUrl";

pub(crate) async fn create(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    body: web::Bytes,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let mut fields = Fields::new(json_object(&body)?);
    let url = fields
        .text("longUrl")?
        .flatten()
        .ok_or_else(|| Problem::invalid("longUrl", "send the long URL as longUrl"))?;
    let key = fields.text("customSlug")?.flatten();
    let key_length = fields
        .count("shortCodeLength")?
        .flatten()
        .map(|length| usize::try_from(length).unwrap_or(usize::MAX));
    let domain = fields.text("domain")?.flatten();
    // Every create finds the link its URL already has (see above).
    fields.flag("findIfExists")?;
    // Deprecated by Shlink itself, which no longer checks the URL is up.
    fields.flag("validateUrl")?;
    let tags = fields.texts("tags")?.unwrap_or_default();
    let title = fields.text("title")?.flatten();
    let crawlable = fields.flag("crawlable")?.unwrap_or(false);
    let forward_query = fields.flag("forwardQuery")?;
    let valid_since = fields.text("validSince")?.flatten();
    let expires_at = fields.text("validUntil")?.flatten();
    let max_clicks = fields.count("maxVisits")?.flatten();
    fields.done(KNOWN)?;
    let new = NewLink {
        url: &url,
        key: key.as_deref(),
        expires_at: expires_at.as_deref(),
        valid_since: valid_since.as_deref(),
        max_clicks,
        forward_query,
        domain: domain.as_deref(),
        title: title.as_deref(),
        tags: &tags,
        crawlable,
        key_length,
        read_title: true,
        ..NewLink::default()
    };
    let written = shortener.create_as(&new, &Caller::TokenHolder(who)).await?;
    note_purge_failure(&request, written.purge_warning.as_ref());
    let link = match &written.outcome {
        Inserted::Created(link) | Inserted::Existing(link) => link,
    };
    Ok(HttpResponse::Ok().json(ShortUrl::read(link, &shortener).await?))
}
