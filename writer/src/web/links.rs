//! One link through the API: create, read, change and delete it, and list
//! the links a token may change; and how a link's JSON object is read.

// `#[utoipa::path]` writes the `params(...)` types out with their module
// path, which this lint flags in the code it generates.
#![allow(unused_qualifications)]

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::access::Gatekeeper;
use crate::config::Domain;
use crate::links::body::LinkBody;
use crate::links::bulk::Row;
use crate::links::rules::{RuleBody, SplitBody};
use crate::links::shortener::{
    Change, ListQuery, NewLink, ShortenError, Shortener, Written, DEFAULT_PAGE,
};
use crate::links::store::{Current, Inserted, Link};
use crate::links::validate::{Field, Invalid};
use crate::metrics::Metrics;
use crate::web::error::{ApiError, ErrorBody};
use crate::web::link_fields::Fields;
use crate::web::query;

/// A link to create. Fields other than these are refused with 422.
#[derive(Debug, Serialize, ToSchema)]
pub struct LinkInput {
    /// The long URL: `http` or `https`.
    pub url: String,
    /// A custom key; absent, empty or `null` for a generated one.
    pub key: Option<String>,
    /// When the link expires, RFC 3339 (`2026-12-31T23:59:59Z`).
    pub expires_at: Option<String>,
    /// When the link starts answering, RFC 3339; before, it answers as an
    /// unknown key does. Absent: at once.
    pub valid_since: Option<String>,
    /// Where the link goes once expired; absent: it answers 410.
    pub expired_url: Option<String>,
    /// After this many people's clicks the link answers as expired.
    pub max_clicks: Option<u64>,
    /// Forward the query string the short link is requested with to the
    /// target (`true`), never (`false`); absent or `null`: as the domain
    /// does.
    pub forward_query: Option<bool>,
    /// The short domain, by its name or an alias; absent, empty or `null`:
    /// the default domain. A token limited to domains may name those only.
    pub domain: Option<String>,
    /// Rules choosing a target per request (at most 16; the first that
    /// matches wins); absent or `null`: none. A bad one is refused with
    /// 422 `bad-rule`, naming it (`rule 2: ...`).
    pub rules: Option<Vec<RuleBody>>,
    /// Weighted targets (at most 8, weights 0 to 1000 adding up to more
    /// than 0) for the visitors no rule took, each kept on one; absent or
    /// `null`: none, the link's own URL.
    pub split: Option<Vec<SplitBody>>,
    /// What the link is called in listings (at most 512 characters).
    pub title: Option<String>,
    /// Words it is found by (at most 32, each 1 to 64 characters).
    pub tags: Option<Vec<String>>,
    /// Whether crawlers may follow it; absent: no.
    pub crawlable: Option<bool>,
}

/// A change to a link: absent fields stay; `null` removes an expiry, an
/// expired URL or a click limit, or leaves query forwarding to the
/// domain; `rules` and `split` replace the link's whole list, and `null`
/// (or `[]`) removes it. A key and a domain never change.
#[derive(Debug, Serialize, ToSchema)]
pub struct LinkChange {
    pub url: Option<String>,
    pub expires_at: Option<String>,
    /// `null` removes the start.
    pub valid_since: Option<String>,
    pub expired_url: Option<String>,
    pub max_clicks: Option<u64>,
    pub forward_query: Option<bool>,
    pub rules: Option<Vec<RuleBody>>,
    pub split: Option<Vec<SplitBody>>,
    /// `null` removes the title.
    pub title: Option<String>,
    /// All of them; `[]` or `null` removes them.
    pub tags: Option<Vec<String>>,
    pub crawlable: Option<bool>,
}

/// Which domain's link a per-key route means.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DomainParams {
    /// The short domain, by its name or an alias; absent: the default one.
    /// The same key on two domains is two links.
    pub domain: Option<String>,
}

/// The domain a per-key route's `?domain=` names (the default one without).
pub(crate) fn domain_of<'s>(
    request: &HttpRequest,
    shortener: &'s Shortener,
) -> Result<&'s Domain, ApiError> {
    let params = query::<DomainParams>(request, "domain")?;
    Ok(shortener.domain(params.domain.as_deref())?)
}

/// Where the API answers `link`: with `?domain=` for a domain but the
/// default one.
pub(crate) fn api_path(link: &Link, shortener: &Shortener) -> String {
    match shortener.domain(Some(&link.domain)) {
        Ok(domain) if !domain.is_default() => {
            format!("/api/links/{}?domain={}", link.key, domain.name)
        }
        _ => format!("/api/links/{}", link.key),
    }
}

/// A page of links.
#[derive(Debug, Serialize, ToSchema)]
pub struct LinkPage {
    pub links: Vec<LinkBody>,
    /// Pass as `cursor` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// A deletion Varnish could not be told about.
#[derive(Debug, Serialize, ToSchema)]
pub struct Deleted {
    pub deleted: String,
    pub warning: String,
}

pub use crate::web::link_fields::LINK_FIELDS;

/// Creates a link: with a token it is the token's, without one it
/// spends the address's rate limit.
#[utoipa::path(
    post,
    path = "/api/links",
    tag = "links",
    request_body = LinkInput,
    responses(
        (status = 201, description = "Created; `Location` names it", body = LinkBody,
         headers(("Location" = String, description = "/api/links/{key}"))),
        (status = 200, description = "The same URL, owner and expiry already had this link", body = LinkBody),
        (status = 400, description = "The body is not a JSON object", body = ErrorBody),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "The token is limited to other domains (`domain-not-allowed`)", body = ErrorBody),
        (status = 409, description = "The custom key holds another link on its domain (or every generated key is taken)", body = ErrorBody),
        (status = 413, description = "The body is over max_body_bytes", body = ErrorBody),
        (status = 415, description = "The body is not sent as application/json", body = ErrorBody),
        (status = 422, description = "A field is not valid, or unknown; `field` names it (`unknown-domain`: a domain not served here; `bad-rule`: a rule or split target, named in the message as `rule 2: ...`, with `field` `rules` or `split`)", body = ErrorBody),
        (status = 429, description = "Too many links from this address without a token; `Retry-After` says when to come back", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security((), ("token" = []))
)]
pub(crate) async fn create_link(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    body: web::Json<Map<String, Value>>,
) -> Result<HttpResponse, ApiError> {
    let caller = guard.admit(&request, None).await?;
    let row = row_of(body.into_inner())?;
    let Written {
        outcome: inserted,
        purge_warning,
    } = shortener
        .create_as(
            &NewLink {
                read_title: true,
                ..row.new_link()
            },
            &caller,
        )
        .await?;
    note_purge_failure(&request, purge_warning.as_ref());
    let status = match inserted {
        Inserted::Created(_) => StatusCode::CREATED,
        Inserted::Existing(_) => StatusCode::OK,
    };
    let link = inserted.link();
    let details = shortener.details(std::slice::from_ref(link)).await?;
    Ok(HttpResponse::build(status)
        .insert_header((header::LOCATION, api_path(link, &shortener)))
        .json(
            LinkBody::new(link, &shortener)
                .detailed(&details[0])
                .warned(purge_warning),
        ))
}

/// The link a JSON object describes, as a single insert and each item of
/// a bulk one take it.
pub(crate) fn row_of(object: Map<String, Value>) -> Result<Row, ShortenError> {
    let mut fields = Fields(object);
    let url = fields
        .text(Field::Url, false)?
        .flatten()
        .ok_or_else(|| Invalid::new(Field::Url, "send the long URL: {\"url\": \"https://...\"}"))?;
    let row = Row {
        url,
        key: fields.text(Field::Key, true)?.flatten(),
        expires_at: fields.text(Field::ExpiresAt, true)?.flatten(),
        valid_since: fields.text(Field::ValidSince, true)?.flatten(),
        expired_url: fields.text(Field::ExpiredUrl, true)?.flatten(),
        max_clicks: fields.count(Field::MaxClicks)?.flatten(),
        forward_query: fields.flag(Field::ForwardQuery)?.flatten(),
        domain: fields.text(Field::Domain, true)?.flatten(),
        owner: None,
        rules: fields.rules()?.unwrap_or_default(),
        split: fields.split()?.unwrap_or_default(),
        title: fields.text(Field::Title, true)?.flatten(),
        tags: fields.texts(Field::Tags)?.unwrap_or_default(),
        crawlable: fields.flag(Field::Crawlable)?.flatten().unwrap_or(false),
        created_at: None,
    };
    fields.done()?;
    Ok(row)
}

/// Counts a change that was stored but not purged.
pub(crate) fn note_purge_failure(request: &HttpRequest, warning: Option<&String>) {
    if warning.is_some() {
        if let Some(metrics) = request.app_data::<web::Data<Metrics>>() {
            metrics.purge_failed();
        }
    }
}

/// A link, with its `ETag` for a later `If-Match`.
async fn link_response(
    link: &Link,
    current: &Current,
    shortener: &Shortener,
    warning: Option<String>,
) -> Result<HttpResponse, ApiError> {
    let details = shortener.details(std::slice::from_ref(link)).await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::ETAG, current.etag()))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(
            LinkBody::new(link, shortener)
                .detailed(&details[0])
                .warned(warning),
        ))
}

/// A link: where it leads for anyone; its expiry, click limit and owner
/// too for its owner or an admin.
#[utoipa::path(
    get,
    path = "/api/links/{key}",
    tag = "links",
    params(("key" = String, Path, description = "The link's key"), DomainParams),
    responses(
        (status = 200, description = "The link (without a token, or with another owner's: only domain, key, url and short_url); its `ETag` makes a later change conditional", body = LinkBody,
         headers(("ETag" = String))),
        (status = 401, description = "An access token that is not valid (`WWW-Authenticate` says so)", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 410, description = "The link was deleted; its key is never given to another link", body = ErrorBody),
        (status = 422, description = "The domain is not served here (`unknown-domain`), or the query is not valid", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security((), ("token" = []))
)]
pub(crate) async fn get_link(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify_if_sent(&request)?;
    let domain = domain_of(&request, &shortener)?;
    let (link, current) = shortener.show(domain, &key).await?;
    let body = match who {
        Some(who) if who.may_change(link.record.owner.as_ref()) && who.may_use(&domain.name) => {
            let details = shortener.details(std::slice::from_ref(&link)).await?;
            LinkBody::new(&link, &shortener).detailed(&details[0])
        }
        _ => LinkBody::public(&link, &shortener),
    };
    Ok(HttpResponse::Ok()
        .insert_header((header::ETAG, current.etag()))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(body))
}

fn if_match(request: &HttpRequest) -> Option<&str> {
    request
        .headers()
        .get(header::IF_MATCH)
        .map(|value| value.to_str().unwrap_or("\"unreadable\""))
}

/// Changes a link's target, expiry, expired URL, click limit, rules or
/// split; Varnish serves the change at once.
#[utoipa::path(
    patch,
    path = "/api/links/{key}",
    tag = "links",
    params(
        ("key" = String, Path, description = "The link's key"),
        DomainParams,
        ("If-Match" = Option<String>, Header, description = "Change only if the link still has this ETag")
    ),
    request_body = LinkChange,
    responses(
        (status = 200, description = "The changed link; Varnish serves the change at once", body = LinkBody,
         headers(("ETag" = String))),
        (status = 400, description = "The body is not a JSON object", body = ErrorBody),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "The link belongs to another token (`not-owner`), or the token is limited to other domains (`domain-not-allowed`)", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 410, description = "The link was deleted; its key is never given to another link", body = ErrorBody),
        (status = 412, description = "The link changed since the ETag in If-Match was read", body = ErrorBody),
        (status = 413, description = "The body is over max_body_bytes", body = ErrorBody),
        (status = 415, description = "The body is not sent as application/json", body = ErrorBody),
        (status = 422, description = "A field is not valid, unknown, or the key or domain; the domain is not served here (`unknown-domain`); a rule or split target is not valid (`bad-rule`, the message names it: `rule 2: ...`); or nothing to change", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
pub(crate) async fn edit_link(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
    body: web::Json<Map<String, Value>>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let domain = domain_of(&request, &shortener)?;
    let mut fields = Fields(body.into_inner());
    let url = fields.text(Field::Url, false)?.flatten();
    let expires_at = fields.text(Field::ExpiresAt, true)?;
    let valid_since = fields.text(Field::ValidSince, true)?;
    let expired_url = fields.text(Field::ExpiredUrl, true)?;
    let max_clicks = fields.count(Field::MaxClicks)?;
    let forward_query = fields.flag(Field::ForwardQuery)?;
    let rules = fields.rules().map_err(ShortenError::from)?;
    let split = fields.split().map_err(ShortenError::from)?;
    let title = fields.text(Field::Title, true)?;
    let tags = fields.texts(Field::Tags)?;
    let crawlable = fields
        .flag(Field::Crawlable)?
        .map(|flag| flag.unwrap_or(false));
    if fields.0.contains_key(Field::Key.name()) {
        return Err(Invalid::new(
            Field::Key,
            "a link's key cannot change: create a new link with the new key instead",
        )
        .into());
    }
    if fields.0.contains_key(Field::Domain.name()) {
        return Err(Invalid::new(
            Field::Domain,
            "a link's domain cannot change: name the link's domain with ?domain=, or \
             create a new link on the other domain",
        )
        .into());
    }
    fields.done()?;
    let change = Change {
        url: url.as_deref(),
        expires_at: expires_at.as_ref().map(Option::as_deref),
        valid_since: valid_since.as_ref().map(Option::as_deref),
        expired_url: expired_url.as_ref().map(Option::as_deref),
        max_clicks,
        forward_query,
        rules: rules.as_deref(),
        split: split.as_deref(),
        title: title.as_ref().map(Option::as_deref),
        tags: tags.as_deref(),
        crawlable,
    };
    if change.is_empty() {
        return Err(Invalid::new(
            Field::Url,
            "nothing to change: send url, expires_at, valid_since, expired_url, max_clicks, \
             forward_query, rules, split, title, tags or crawlable",
        )
        .into());
    }
    let written = shortener
        .edit(&who, domain, &key, &change, if_match(&request))
        .await?;
    note_purge_failure(&request, written.purge_warning.as_ref());
    let (link, current) = &written.outcome;
    link_response(link, current, &shortener, written.purge_warning).await
}

/// Deletes a link: it answers 410 from now on, and its key is never
/// given to another link.
#[utoipa::path(
    delete,
    path = "/api/links/{key}",
    tag = "links",
    params(
        ("key" = String, Path, description = "The link's key"),
        DomainParams,
        ("If-Match" = Option<String>, Header, description = "Delete only if the link still has this ETag")
    ),
    responses(
        (status = 204, description = "Deleted: it answers 410 from now on"),
        (status = 200, description = "Deleted, but Varnish could not be told: it may redirect until its TTL", body = Deleted),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "The link belongs to another token (`not-owner`), or the token is limited to other domains (`domain-not-allowed`)", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 410, description = "The link was deleted; its key is never given to another link", body = ErrorBody),
        (status = 412, description = "The link changed since the ETag in If-Match was read", body = ErrorBody),
        (status = 422, description = "The domain is not served here (`unknown-domain`), or the query is not valid", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
pub(crate) async fn delete_link(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let domain = domain_of(&request, &shortener)?;
    let written = shortener
        .delete(&who, domain, &key, if_match(&request))
        .await?;
    note_purge_failure(&request, written.purge_warning.as_ref());
    Ok(match written.purge_warning {
        None => HttpResponse::NoContent().finish(),
        // Deleted, but Varnish may still redirect: say so.
        Some(warning) => HttpResponse::Ok().json(Deleted {
            deleted: key.into_inner(),
            warning,
        }),
    })
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    limit: Option<usize>,
    cursor: Option<String>,
    search: Option<String>,
    owner: Option<String>,
    /// Only this short domain's links (by its name or an alias); absent:
    /// every domain the token may use, one after the other.
    domain: Option<String>,
    /// Only the links holding this tag.
    tag: Option<String>,
}

/// A page of the links the token may change, domain by domain, newest
/// first: its own, or for an admin everyone's (one owner's with `owner`).
#[utoipa::path(
    get,
    path = "/api/links",
    tag = "links",
    params(ListParams),
    responses(
        (status = 200, description = "A page of links, newest first", body = LinkPage),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "Only admins may list another owner's links (`not-owner`); the token is limited to other domains (`domain-not-allowed`)", body = ErrorBody),
        (status = 422, description = "A parameter is not valid (limit 1 to 100, a cursor this API gave, a domain served here)", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
pub(crate) async fn list_links(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let params = query::<ListParams>(&request, "limit, cursor, search, owner, domain and tag")?;
    let query = ListQuery {
        limit: params.limit.unwrap_or(DEFAULT_PAGE),
        cursor: params.cursor.as_deref(),
        search: params.search.as_deref().filter(|s| !s.is_empty()),
        owner: params.owner.as_deref().filter(|s| !s.is_empty()),
        domain: params.domain.as_deref().filter(|s| !s.is_empty()),
        tag: params.tag.as_deref().filter(|s| !s.is_empty()),
    };
    let listing = shortener.list(&who, &query).await?;
    let links: Vec<LinkBody> = listing
        .links
        .iter()
        .zip(&listing.details)
        .map(|(link, details)| LinkBody::new(link, &shortener).detailed(details))
        .collect();
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(LinkPage {
            links,
            next_cursor: listing.next_cursor,
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_object_may_hold_every_link_field() {
        let mut object = Map::new();
        for field in LINK_FIELDS {
            let value = match field {
                Field::MaxClicks => Value::from(3),
                Field::ForwardQuery | Field::Crawlable => Value::from(true),
                Field::Tags => serde_json::json!(["news"]),
                Field::Title => Value::from("News"),
                Field::Rules => {
                    serde_json::json!([{"device": ["ios"], "url": "https://a.example/"}])
                }
                Field::Split => serde_json::json!([{"weight": 1, "url": "https://a.example/"}]),
                _ => Value::from("https://example.org/"),
            };
            object.insert(field.name().to_owned(), value);
        }
        assert!(row_of(object.clone()).is_ok());
        object.insert("colour".into(), "blue".into());
        let Err(ShortenError::Invalid(refused)) = row_of(object) else {
            panic!("an unknown field is refused as invalid input");
        };
        assert_eq!(refused.field, Field::Unknown);
        assert!(refused.message.contains(
            "url, key, expires_at, valid_since, expired_url, max_clicks, forward_query, domain, rules, split, \
             title, tags, crawlable"
        ));
    }
}
