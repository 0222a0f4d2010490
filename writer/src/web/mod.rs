//! HTTP interfaces: the JSON API under `/api/links` and the web form at `/`.

// `#[utoipa::path]` writes the `params(...)` types out with their module
// path, which this lint flags in the code it generates.
#![allow(unused_qualifications)]

use actix_web::cookie::{Cookie, SameSite};
use actix_web::error::{JsonPayloadError, UrlencodedError};
use actix_web::http::{header, StatusCode};
use actix_web::{guard, middleware, web, HttpRequest, HttpResponse, ResponseError};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::clicks::LinkStats;
use crate::link_body::LinkBody;
use openapi::{
    BulkAnswer, BulkResult, Deleted, ErrorBody, LinkChange, LinkInput, LinkPage, TrendingLinks,
    WhoAmI,
};

use serde_json::{Map, Value};

use crate::access::{
    is_form_cookie, new_form_cookie, Admitted, Caller, Gatekeeper, Refusal, CSRF_COOKIE,
};
use crate::bulk::{
    create_all, csv_batch, BatchError, Item, Refused, Row, RowOutcome, Summary, MAX_BULK_LINKS,
};
use crate::config::Settings;
use crate::export::ExportFormat;
use crate::metrics::{count_writes, serve_metrics, Metrics};
use crate::page::{render, BulkView, FormView, Outcome};
use crate::shortener::{Change, ListQuery, NewLink, ShortenError, Shortener, Written};
use crate::store::{Current, Inserted, Link};
use crate::validate::{Field, Invalid};
use actix_multipart::Multipart;
use futures_util::StreamExt as _;

pub mod openapi;

/// Routes of the writer, for `App::configure`; bodies over `max_body_bytes`
/// get 413. The app must also hold a `Shortener`, a `Gatekeeper` and the
/// writer's one `Metrics`.
pub fn routes(config: &mut web::ServiceConfig, max_body_bytes: usize) {
    config
        .app_data(
            web::JsonConfig::default()
                .limit(max_body_bytes)
                .error_handler(move |error, _req| json_error(&error, max_body_bytes).into()),
        )
        .app_data(
            web::FormConfig::default()
                .limit(max_body_bytes)
                .error_handler(move |error, _req| form_error(&error, max_body_bytes).into()),
        )
        .service(
            // One scope for every route: its middleware counts each write,
            // and, outermost, refuses other hosts and hardens every answer.
            web::scope("")
                .wrap(middleware::from_fn(count_writes))
                .wrap(middleware::from_fn(harden))
                .route("/", web::get().to(form_page))
                .route("/", web::post().to(form_submit))
                .route("/bulk", web::post().to(form_upload))
                .route("/manage", web::get().to(manage_page))
                .route("/metrics", web::get().to(serve_metrics))
                .route("/api/whoami", web::get().to(whoami))
                .route("/api/openapi.json", web::get().to(openapi_json))
                .route("/api/docs", web::get().to(api_docs_page))
                .route("/api/links", web::post().to(create_link))
                .route("/api/links", web::get().to(list_links))
                // Before `{key}`, guarded by method, so that a link whose key
                // is `bulk` or `export` is still read, changed and deleted.
                .service(
                    web::resource("/api/links/bulk")
                        .guard(guard::Post())
                        .to(create_links_in_bulk),
                )
                .service(
                    web::resource("/api/links/export")
                        .guard(guard::Get())
                        .to(export_links),
                )
                .route("/api/links/{key}", web::get().to(get_link))
                .route("/api/links/{key}", web::patch().to(edit_link))
                .route("/api/links/{key}", web::delete().to(delete_link))
                .route("/api/links/{key}/stats", web::get().to(link_stats))
                .route("/api/links/{key}/qr.svg", web::get().to(link_qr_svg))
                .route("/api/links/{key}/qr.png", web::get().to(link_qr_png))
                .route(
                    "/api/links/{key}/stats/report",
                    web::get().to(link_stats_report),
                )
                .route("/manage/stats/{key}", web::get().to(stats_page))
                .route("/api/trending", web::get().to(trending)),
        );
}

/// The fields a link's JSON object may hold: what [`row_of`] and
/// `edit_link` read (the latter all but the key), and the OpenAPI
/// document's `LinkInput` lists.
pub const LINK_FIELDS: [Field; 5] = [
    Field::Url,
    Field::Key,
    Field::ExpiresAt,
    Field::ExpiredUrl,
    Field::MaxClicks,
];

/// The fields of a JSON object, each taken at most once by name; whatever
/// is left is an unknown field, answered 422 with its name.
struct Fields(Map<String, Value>);

impl Fields {
    /// A string field: absent `None`; `null` is refused unless `nullable`,
    /// where it is `Some(None)`: a change tells "leave it" from "remove it".
    #[allow(clippy::option_option)]
    fn text(&mut self, field: Field, nullable: bool) -> Result<Option<Option<String>>, Invalid> {
        match self.0.remove(field.name()) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(Some(text))),
            Some(Value::Null) if nullable => Ok(Some(None)),
            Some(other) => Err(Invalid::new(
                field,
                format!(
                    "{} must be a string{}, not {other}",
                    field.name(),
                    if nullable { " or null" } else { "" }
                ),
            )),
        }
    }

    /// A whole-number field: absent `None`, `null` `Some(None)`.
    #[allow(clippy::option_option)]
    fn count(&mut self, field: Field) -> Result<Option<Option<u64>>, Invalid> {
        match self.0.remove(field.name()) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(None)),
            Some(Value::Number(n)) if n.as_u64().is_some() => Ok(Some(n.as_u64())),
            Some(other) => Err(Invalid::new(
                field,
                format!(
                    "{} must be a whole number of clicks or null, not {other}",
                    field.name()
                ),
            )),
        }
    }

    fn done(self) -> Result<(), Invalid> {
        match self.0.keys().next() {
            None => Ok(()),
            Some(unknown) => Err(Invalid {
                field: Field::Unknown,
                message: format!(
                    "unknown field {unknown:?}; a link has {}",
                    LINK_FIELDS.map(Field::name).join(", ")
                ),
            }),
        }
    }
}

/// An API failure, answered as `{"error": "..."}` with the matching status.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    field: Option<Field>,
    /// `Retry-After` seconds, for 429.
    retry_after_s: Option<u64>,
    /// `WWW-Authenticate` challenge, for 401.
    challenge: Option<&'static str>,
}

impl ApiError {
    fn new(status: StatusCode, message: String) -> Self {
        Self {
            status,
            message,
            field: None,
            retry_after_s: None,
            challenge: None,
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status);
        if let Some(seconds) = self.retry_after_s {
            response.insert_header((header::RETRY_AFTER, seconds.to_string()));
        }
        if let Some(challenge) = self.challenge {
            response.insert_header((header::WWW_AUTHENTICATE, challenge));
        }
        response.json(ErrorBody {
            error: self.message.clone(),
            field: self.field.map(|field| field.name().to_owned()),
            retry_after_s: self.retry_after_s,
        })
    }
}

impl From<ShortenError> for ApiError {
    fn from(error: ShortenError) -> Self {
        let (status, field, message) = error.answer();
        Self {
            field,
            ..Self::new(status, message)
        }
    }
}

impl From<Invalid> for ApiError {
    fn from(invalid: Invalid) -> Self {
        ShortenError::Invalid(invalid).into()
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        let mut error = Self::new(StatusCode::FORBIDDEN, refusal.to_string());
        match refusal {
            Refusal::TokenMissing => {
                error.status = StatusCode::UNAUTHORIZED;
                error.challenge = Some("Bearer realm=\"shortlink\"");
            }
            Refusal::TokenInvalid => {
                error.status = StatusCode::UNAUTHORIZED;
                error.challenge = Some("Bearer realm=\"shortlink\", error=\"invalid_token\"");
            }
            Refusal::RateLimited { retry_after_s } => {
                error.status = StatusCode::TOO_MANY_REQUESTS;
                error.retry_after_s = Some(retry_after_s);
            }
            Refusal::CrossSite(_) => {}
        }
        error
    }
}

fn json_error(error: &JsonPayloadError, max_body_bytes: usize) -> ApiError {
    let (status, message) = match error {
        JsonPayloadError::ContentType => (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the link as JSON, with Content-Type: application/json".to_owned(),
        ),
        JsonPayloadError::OverflowKnownLength { .. } | JsonPayloadError::Overflow { .. } => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is over {max_body_bytes} bytes"),
        ),
        JsonPayloadError::Deserialize(e) => (
            StatusCode::BAD_REQUEST,
            format!("the request body is not a valid link: {e}; send {{\"url\": \"https://...\", \"key\": \"optional\"}}"),
        ),
        other => (
            StatusCode::BAD_REQUEST,
            format!("the request body could not be read: {other}"),
        ),
    };
    ApiError::new(status, message)
}

fn form_error(error: &UrlencodedError, max_body_bytes: usize) -> ApiError {
    match error {
        UrlencodedError::Overflow { .. } => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the form is over {max_body_bytes} bytes"),
        ),
        UrlencodedError::ContentType => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the form as application/x-www-form-urlencoded".to_owned(),
        ),
        other => ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the form could not be read: {other}"),
        ),
    }
}

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
        (status = 409, description = "The custom key holds another link (or every generated key is taken)", body = ErrorBody),
        (status = 413, description = "The body is over max_body_bytes", body = ErrorBody),
        (status = 415, description = "The body is not sent as application/json", body = ErrorBody),
        (status = 422, description = "A field is not valid, or unknown; `field` names it", body = ErrorBody),
        (status = 429, description = "Too many links from this address without a token; `Retry-After` says when to come back", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security((), ("token" = []))
)]
async fn create_link(
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
    } = shortener.create(&row.new_link(), caller.owner()).await?;
    note_purge_failure(&request, purge_warning.as_ref());
    let status = match inserted {
        Inserted::Created(_) => StatusCode::CREATED,
        Inserted::Existing(_) => StatusCode::OK,
    };
    let link = inserted.link();
    Ok(HttpResponse::build(status)
        .insert_header((header::LOCATION, format!("/api/links/{}", link.key)))
        .json(LinkBody::new(link, &shortener).warned(purge_warning)))
}

/// The link a JSON object describes, as a single insert and each item of
/// a bulk one take it.
fn row_of(object: Map<String, Value>) -> Result<Row, Invalid> {
    let mut fields = Fields(object);
    let url = fields
        .text(Field::Url, false)?
        .flatten()
        .ok_or_else(|| Invalid::new(Field::Url, "send the long URL: {\"url\": \"https://...\"}"))?;
    let row = Row {
        url,
        key: fields.text(Field::Key, true)?.flatten(),
        expires_at: fields.text(Field::ExpiresAt, true)?.flatten(),
        expired_url: fields.text(Field::ExpiredUrl, true)?.flatten(),
        max_clicks: fields.count(Field::MaxClicks)?.flatten(),
        owner: None,
    };
    fields.done()?;
    Ok(row)
}

/// What a bulk request's body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BulkMedia {
    Json,
    Csv,
}

/// The media type of a bulk request's body, or 415.
fn bulk_media(request: &HttpRequest) -> Result<BulkMedia, ApiError> {
    let media_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .map(|value| value.trim().to_ascii_lowercase());
    match media_type.as_deref() {
        Some("application/json") => Ok(BulkMedia::Json),
        Some("text/csv") => Ok(BulkMedia::Csv),
        _ => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the links as a JSON array (Content-Type: application/json) or as CSV \
             lines url[,key] (Content-Type: text/csv)"
                .to_owned(),
        )),
    }
}

/// Why a bulk request was refused whole for its number of links.
const TOO_MANY_LINKS: &str = "a bulk request holds at most 10000 links; send the rest in another";
const _: () = assert!(MAX_BULK_LINKS == 10_000, "TOO_MANY_LINKS names the limit");

/// The rows of a bulk request's body: a JSON array of links, or CSV.
fn bulk_rows(media: BulkMedia, body: &[u8]) -> Result<Vec<(Option<u64>, Item)>, ApiError> {
    let too_many = || ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, TOO_MANY_LINKS.to_owned());
    match media {
        BulkMedia::Json => {
            let BoundedItems(items) = serde_json::from_slice(body).map_err(|e| {
                if e.to_string().starts_with(TOO_MANY_LINKS) {
                    return too_many();
                }
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "the body is not a JSON array of links: {e}; send \
                         [{{\"url\": \"https://...\", \"key\": \"optional\"}}, ...]"
                    ),
                )
            })?;
            Ok(items
                .into_iter()
                .map(|item| {
                    let row = match item {
                        Value::Object(object) => row_of(object).map_err(Refused::from),
                        other => Err(Refused::new(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            format!("each item must be a link object like {{\"url\": \"https://...\"}}, not {other}"),
                            None,
                        )),
                    };
                    (None, row)
                })
                .collect())
        }
        BulkMedia::Csv => match csv_batch(body) {
            Ok(rows) => Ok(rows
                .into_iter()
                .map(|(line, item)| (Some(line), item))
                .collect()),
            Err(BatchError::TooMany) => Err(too_many()),
            Err(BatchError::Unreadable(error)) => Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                error.to_string(),
            )),
        },
    }
}

/// A JSON array of at most [`MAX_BULK_LINKS`] items, refused at the first
/// item past them: a body of many tiny items never becomes a vector of
/// millions.
struct BoundedItems(Vec<Value>);

impl<'de> Deserialize<'de> for BoundedItems {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Items;
        impl<'de> serde::de::Visitor<'de> for Items {
            type Value = BoundedItems;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON array of links")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<BoundedItems, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Value>()? {
                    if items.len() == MAX_BULK_LINKS {
                        return Err(serde::de::Error::custom(TOO_MANY_LINKS));
                    }
                    items.push(item);
                }
                Ok(BoundedItems(items))
            }
        }
        deserializer.deserialize_seq(Items)
    }
}

/// The body's length as its `Content-Length` announces it.
fn announced_length(request: &HttpRequest) -> Option<usize> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok())
}

/// Reads a request body of at most `limit` bytes, or answers 413: at once
/// when its `Content-Length` says so.
async fn body_within(
    request: &HttpRequest,
    mut payload: web::Payload,
    limit: usize,
) -> Result<Vec<u8>, ApiError> {
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "this bulk request's body may be at most {limit} bytes; send the rest in \
                 another (without an access token, a request holds at most the rate \
                 limit's burst of links)"
            ),
        )
    };
    let announced = announced_length(request);
    if announced.is_some_and(|length| length > limit) {
        return Err(too_large());
    }
    let mut body = Vec::with_capacity(announced.unwrap_or(0));
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("the request body could not be read: {e}"),
            )
        })?;
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Creates up to [`MAX_BULK_LINKS`] links from one JSON array or CSV body,
/// each under the rules of a single insert: anonymous clients spend their
/// rate limit row by row, and rows past it are refused with 429.
#[utoipa::path(
    post,
    path = "/api/links/bulk",
    tag = "many",
    request_body(
        description = "Up to 10,000 links: a JSON array of link objects, or CSV lines \
                       `url[,key]` (or with a header naming any of url, key, expires_at, \
                       expired_url and max_clicks)",
        content(
            (Vec<LinkInput> = "application/json"),
            (String = "text/csv", example = "https://example.org/a,docs\nhttps://example.org/b\n")
        )
    ),
    responses(
        (status = 200, description = "One result per row, in input order; a bad row does not stop the others", body = BulkAnswer),
        (status = 400, description = "The body is not a JSON array", body = ErrorBody),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 413, description = "Over 10,000 links, or a body over 10,000 × (max_url_length + 512) bytes", body = ErrorBody),
        (status = 415, description = "Neither application/json nor text/csv", body = ErrorBody),
        (status = 422, description = "The CSV's header names no url column", body = ErrorBody),
    ),
    security((), ("token" = []))
)]
async fn create_links_in_bulk(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    // Everything the headers can refuse is refused before the body is read.
    let media = bulk_media(&request)?;
    let caller = guard.caller(&request, None)?;
    let token_holder = matches!(caller, Caller::TokenHolder(_));
    let limit = bulk_body_limit(&shortener.settings, token_holder);
    let body = body_within(&request, payload, limit).await?;
    let rows = bulk_rows(media, &body)?;
    drop(body);
    let admitted = guard.spend(&request, caller, rows.len()).await;
    let (summary, outcomes) = create_admitted(&shortener, admitted, rows).await;
    let results = outcomes
        .into_iter()
        .enumerate()
        .map(|(index, (line, outcome))| BulkResult {
            index,
            line,
            outcome,
        })
        .collect();
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(BulkAnswer { summary, results }))
}

/// Creates the rows `admitted` lets through, refusing the rest as the
/// rate limit did; the outcomes in row order, and how many went which way.
async fn create_admitted<T>(
    shortener: &Shortener,
    admitted: Admitted,
    rows: Vec<(T, Item)>,
) -> (Summary, Vec<(T, RowOutcome)>) {
    let refusal = admitted.refusal.as_ref().map(rate_refusal);
    let items = rows
        .into_iter()
        .enumerate()
        .map(|(n, (tag, item))| match &refusal {
            Some(refused) if n >= admitted.rows => (tag, Err(refused.clone())),
            _ => (tag, item),
        });
    let rows = futures_util::stream::iter(items);
    let outcomes: Vec<(T, RowOutcome)> =
        create_all(shortener, admitted.caller.owner(), false, rows)
            .collect()
            .await;
    let mut summary = Summary::default();
    for (_, outcome) in &outcomes {
        summary.add(outcome);
    }
    (summary, outcomes)
}

/// A row refused by the rate limit, as a single insert would be.
fn rate_refusal(refusal: &Refusal) -> Refused {
    let error = ApiError::from(refusal.clone());
    Refused {
        retry_after_s: error.retry_after_s,
        ..Refused::new(error.status, error.message, None)
    }
}

/// The largest bulk body: [`MAX_BULK_LINKS`] rows of the longest URL
/// allowed, with room for a key, an expiry and the JSON around them.
/// An anonymous client's body holds no more rows than its rate limit's
/// burst lets it create at once: the rest would be refused anyway.
pub fn bulk_body_limit(settings: &Settings, token_holder: bool) -> usize {
    let config = &settings.config;
    let rows = if token_holder || config.rate_limit.links_per_minute == 0 {
        MAX_BULK_LINKS
    } else {
        usize::try_from(config.rate_limit.burst)
            .unwrap_or(MAX_BULK_LINKS)
            .clamp(1, MAX_BULK_LINKS)
    };
    rows * (config.max_url_length + 512)
}

/// Counts a change that was stored but not purged.
fn note_purge_failure(request: &HttpRequest, warning: Option<&String>) {
    if warning.is_some() {
        if let Some(metrics) = request.app_data::<web::Data<Metrics>>() {
            metrics.purge_failed();
        }
    }
}

/// A link, with its `ETag` for a later `If-Match`.
fn link_response(
    link: &Link,
    current: &Current,
    shortener: &Shortener,
    warning: Option<String>,
) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::ETAG, current.etag()))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(LinkBody::new(link, shortener).warned(warning))
}

/// A link: where it leads for anyone; its expiry, click limit and owner
/// too for its owner or an admin.
#[utoipa::path(
    get,
    path = "/api/links/{key}",
    tag = "links",
    params(("key" = String, Path, description = "The link's key")),
    responses(
        (status = 200, description = "The link (without a token, or with another owner's: only key, url and short_url); its `ETag` makes a later change conditional", body = LinkBody,
         headers(("ETag" = String))),
        (status = 401, description = "An access token that is not valid (`WWW-Authenticate` says so)", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 410, description = "The link was deleted; its key is never given to another link", body = ErrorBody),
        (status = 422, description = "The key is not one this store's keys can be", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security((), ("token" = []))
)]
async fn get_link(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify_if_sent(&request)?;
    let (link, current) = shortener.show(&key).await?;
    let body = match who {
        Some(who) if who.may_change(link.record.owner.as_ref()) => LinkBody::new(&link, &shortener),
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

/// Changes a link's target, expiry, expired URL or click limit; Varnish
/// serves the change at once.
#[utoipa::path(
    patch,
    path = "/api/links/{key}",
    tag = "links",
    params(
        ("key" = String, Path, description = "The link's key"),
        ("If-Match" = Option<String>, Header, description = "Change only if the link still has this ETag")
    ),
    request_body = LinkChange,
    responses(
        (status = 200, description = "The changed link; Varnish serves the change at once", body = LinkBody,
         headers(("ETag" = String))),
        (status = 400, description = "The body is not a JSON object", body = ErrorBody),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "The link belongs to another token; only that token or an admin token may do this", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 410, description = "The link was deleted; its key is never given to another link", body = ErrorBody),
        (status = 412, description = "The link changed since the ETag in If-Match was read", body = ErrorBody),
        (status = 413, description = "The body is over max_body_bytes", body = ErrorBody),
        (status = 415, description = "The body is not sent as application/json", body = ErrorBody),
        (status = 422, description = "A field is not valid, unknown, or the key; or nothing to change", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
async fn edit_link(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
    body: web::Json<Map<String, Value>>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let mut fields = Fields(body.into_inner());
    let url = fields.text(Field::Url, false)?.flatten();
    let expires_at = fields.text(Field::ExpiresAt, true)?;
    let expired_url = fields.text(Field::ExpiredUrl, true)?;
    let max_clicks = fields.count(Field::MaxClicks)?;
    if fields.0.contains_key(Field::Key.name()) {
        return Err(Invalid::new(
            Field::Key,
            "a link's key cannot change: create a new link with the new key instead",
        )
        .into());
    }
    fields.done()?;
    if url.is_none() && expires_at.is_none() && expired_url.is_none() && max_clicks.is_none() {
        return Err(Invalid::new(
            Field::Url,
            "nothing to change: send url, expires_at, expired_url or max_clicks",
        )
        .into());
    }
    let change = Change {
        url: url.as_deref(),
        expires_at: expires_at.as_ref().map(Option::as_deref),
        expired_url: expired_url.as_ref().map(Option::as_deref),
        max_clicks,
    };
    let written = shortener
        .edit(&who, &key, &change, if_match(&request))
        .await?;
    note_purge_failure(&request, written.purge_warning.as_ref());
    let (link, current) = &written.outcome;
    Ok(link_response(
        link,
        current,
        &shortener,
        written.purge_warning,
    ))
}

/// Deletes a link: it answers 410 from now on, and its key is never
/// given to another link.
#[utoipa::path(
    delete,
    path = "/api/links/{key}",
    tag = "links",
    params(
        ("key" = String, Path, description = "The link's key"),
        ("If-Match" = Option<String>, Header, description = "Delete only if the link still has this ETag")
    ),
    responses(
        (status = 204, description = "Deleted: it answers 410 from now on"),
        (status = 200, description = "Deleted, but Varnish could not be told: it may redirect until its TTL", body = Deleted),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "The link belongs to another token; only that token or an admin token may do this", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 410, description = "The link was deleted; its key is never given to another link", body = ErrorBody),
        (status = 412, description = "The link changed since the ETag in If-Match was read", body = ErrorBody),
        (status = 422, description = "The key is not one this store's keys can be", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
async fn delete_link(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let written = shortener.delete(&who, &key, if_match(&request)).await?;
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
}

use crate::shortener::DEFAULT_PAGE;

/// A page of the links the token may change, newest first: its own, or
/// for an admin everyone's (one owner's with `owner`).
#[utoipa::path(
    get,
    path = "/api/links",
    tag = "links",
    params(ListParams),
    responses(
        (status = 200, description = "A page of links, newest first", body = LinkPage),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "Only admins may list another owner's links", body = ErrorBody),
        (status = 422, description = "A parameter is not valid (limit 1 to 100, a cursor this API gave)", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
async fn list_links(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let params = query::<ListParams>(&request, "limit, cursor, search and owner")?;
    let query = ListQuery {
        limit: params.limit.unwrap_or(DEFAULT_PAGE),
        cursor: params.cursor.as_deref(),
        search: params.search.as_deref().filter(|s| !s.is_empty()),
        owner: params.owner.as_deref().filter(|s| !s.is_empty()),
    };
    let listing = shortener.list(&who, &query).await?;
    let links: Vec<LinkBody> = listing
        .links
        .iter()
        .map(|link| LinkBody::new(link, &shortener))
        .collect();
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(LinkPage {
            links,
            next_cursor: listing.next_cursor,
        }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ExportParams {
    format: Option<ExportFormat>,
    owner: Option<String>,
}

/// Every link the caller may change (for an admin: every link), streamed a
/// page at a time as CSV or JSON lines. A failure before the first page
/// answers its status; one after cuts the answer short, which the client
/// sees as an incomplete chunked body.
#[utoipa::path(
    get,
    path = "/api/links/export",
    tag = "many",
    params(ExportParams),
    responses(
        (status = 200, description = "Every link the token may change (an admin's: every link), streamed; CSV reads back through the bulk API and `shortlink import`",
         content(
            (String = "text/csv", example = "url,key,expires_at,expired_url,max_clicks,short_url,expired,owner\nhttps://example.org/,Lm25,,,,http://127.0.0.1:6081/l/Lm25,false,alice\n"),
            (String = "application/jsonl")
         )),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "Only admins may export another owner's links", body = ErrorBody),
        (status = 422, description = "format is not csv or jsonl, or owner is not a token name", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
async fn export_links(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let params = query::<ExportParams>(&request, "format (csv or jsonl) and owner")?;
    let format = params.format.unwrap_or_default();
    let owner = params.owner.as_deref().filter(|owner| !owner.is_empty());
    let mut export = shortener.export(&who, owner).await?;
    let mut head = format.head();
    let first = export.next_page().await.map_err(ShortenError::from)?;
    if let Some(links) = &first {
        head.extend(format.page(links, &shortener));
    }
    let shortener = shortener.into_inner();
    // The pages after the first, unless that one said the export was over.
    let rest = futures_util::stream::try_unfold(first.map(|_| export), move |export| {
        let shortener = std::sync::Arc::clone(&shortener);
        async move {
            let Some(mut export) = export else {
                return Ok(None);
            };
            loop {
                match export.next_page().await {
                    Ok(None) => return Ok(None),
                    Ok(Some(links)) if links.is_empty() => {}
                    Ok(Some(links)) => {
                        let part = web::Bytes::from(format.page(&links, &shortener));
                        return Ok(Some((part, Some(export))));
                    }
                    Err(error) => {
                        log::error!("export cut short: {error}");
                        return Err(std::io::Error::other(error));
                    }
                }
            }
        }
    });
    let body = futures_util::stream::once(std::future::ready(Ok::<_, std::io::Error>(
        web::Bytes::from(head),
    )))
    .chain(rest);
    Ok(HttpResponse::Ok()
        .content_type(format.content_type())
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"links.{}\"", format.extension()),
        ))
        .streaming(body))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StatsParams {
    days: Option<u64>,
}

/// A link's click counts, for its owner or an admin.
#[utoipa::path(
    get,
    path = "/api/links/{key}/stats",
    tag = "clicks",
    params(("key" = String, Path, description = "The link's key"), StatsParams),
    responses(
        (status = 200, description = "The link's click counts", body = LinkStats),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "The link belongs to another token; only that token or an admin token may do this", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 422, description = "days is out of bounds, or the key is not one this store's keys can be", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
async fn link_stats(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let params = query::<StatsParams>(&request, "days")?;
    let (stats, _) = shortener.stats(&who, &key, params.days).await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(stats))
}

/// A link's click counts drawn as HTML (charts and tables), for the
/// statistics page; the same rules as [`link_stats`].
#[utoipa::path(
    get,
    path = "/api/links/{key}/stats/report",
    tag = "clicks",
    params(("key" = String, Path, description = "The link's key"), StatsParams),
    responses(
        (status = 200, description = "The counts drawn as HTML, for the statistics page", content_type = "text/html"),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "The link belongs to another token; only that token or an admin token may do this", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 422, description = "days is out of bounds, or the key is not one this store's keys can be", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
async fn link_stats_report(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let params = query::<StatsParams>(&request, "days")?;
    // A deleted link (admins may read its counts) has no target to show.
    let (stats, record) = shortener.stats(&who, &key, params.days).await?;
    let target = record.as_ref().map(|record| record.url.as_str());
    let body = crate::stats_page::report(&stats, &shortener.short_url(&key), target);
    // A fragment the statistics page shows: it runs no script of its own.
    Ok(html_page(StatusCode::OK, None).body(body))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct QrParams {
    size: Option<u64>,
}

/// How long a link's QR code may be kept: its short URL never changes,
/// but the link may be deleted.
const QR_CACHE_CONTROL: &str = "public, max-age=3600";

/// The short URL of `key`, a link that exists (404 or 410 otherwise, as
/// for the link itself): what its QR code holds.
async fn qr_target(shortener: &Shortener, key: &str) -> Result<String, ApiError> {
    let (link, _) = shortener.show(key).await?;
    Ok(shortener.short_url(&link.key))
}

fn qr_failed(error: &crate::qr::QrError) -> ApiError {
    log::error!("QR code: {error}");
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
}

/// The short link of `key` as an SVG QR code, for anyone (the link is).
#[utoipa::path(
    get,
    path = "/api/links/{key}/qr.svg",
    tag = "links",
    params(("key" = String, Path, description = "The link's key")),
    responses(
        (status = 200, description = "The short URL as a QR code", content_type = "image/svg+xml", body = String),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 410, description = "The link was deleted; its key is never given to another link", body = ErrorBody),
        (status = 422, description = "The key is not one this store's keys can be", body = ErrorBody),
        (status = 500, description = "The QR code could not be drawn", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    )
)]
async fn link_qr_svg(
    shortener: web::Data<Shortener>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let url = qr_target(&shortener, &key).await?;
    let svg = crate::qr::svg(&url).map_err(|e| qr_failed(&e))?;
    Ok(HttpResponse::Ok()
        .content_type("image/svg+xml")
        .insert_header((header::CACHE_CONTROL, QR_CACHE_CONTROL))
        .body(svg))
}

/// The short link of `key` as a PNG QR code of `?size=N` pixels (128 to
/// 2048; 512 by default). A code drawn lately is answered as kept; a new
/// one is drawn off the request threads, a few at once, and costs a
/// client without a token one image of its rate limit.
#[utoipa::path(
    get,
    path = "/api/links/{key}/qr.png",
    tag = "links",
    params(("key" = String, Path, description = "The link's key"), QrParams),
    responses(
        (status = 200, description = "The short URL as a QR code", content_type = "image/png", body = Vec<u8>),
        (status = 401, description = "An access token that is not valid (`WWW-Authenticate` says so)", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 409, description = "The key holds a value that is not a link (written by hand); fix it with redis-cli", body = ErrorBody),
        (status = 410, description = "The link was deleted; its key is never given to another link", body = ErrorBody),
        (status = 422, description = "size is out of bounds, or the key is not one this store's keys can be", body = ErrorBody),
        (status = 429, description = "Too many codes drawn for this address without a token; `Retry-After` says when to come back", body = ErrorBody),
        (status = 500, description = "The QR code could not be drawn", body = ErrorBody),
        (status = 503, description = "Too many codes are being drawn, or the link store (Redis) is unreachable; `Retry-After` says when to try again", body = ErrorBody),
    ),
    security((), ("token" = []))
)]
async fn link_qr_png(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    use crate::qr::{RenderError, BUSY_RETRY_AFTER_S, RENDERER};
    let params = query::<QrParams>(&request, "size")?;
    let size = params.size.map_or(Ok(crate::qr::QrSize::DEFAULT), |size| {
        crate::qr::QrSize::try_from(size)
            .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))
    })?;
    let url = qr_target(&shortener, &key).await?;
    let png = if let Some(png) = RENDERER.kept(&url, size) {
        png
    } else {
        guard.spend_image(&request).await.map_err(|refusal| {
            let mut error = ApiError::from(refusal);
            if let Some(seconds) = error.retry_after_s {
                error.message = format!(
                    "too many QR codes drawn for your address; try again in {seconds} s, \
                     fetch the SVG, or use an access token"
                );
            }
            error
        })?;
        RENDERER.draw(&url, size).await.map_err(|e| match e {
            RenderError::Busy => ApiError {
                retry_after_s: Some(BUSY_RETRY_AFTER_S),
                ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
            },
            RenderError::Qr(e) => qr_failed(&e),
        })?
    };
    Ok(HttpResponse::Ok()
        .content_type("image/png")
        .insert_header((header::CACHE_CONTROL, QR_CACHE_CONTROL))
        .body(png))
}

/// A link's statistics page; like the management page, it holds no data
/// and asks the API for everything.
#[utoipa::path(
    get,
    path = "/manage/stats/{key}",
    tag = "pages",
    params(("key" = String, Path, description = "The link's key")),
    responses((status = 200, description = "The statistics page; it asks the API for the counts", content_type = "text/html"))
)]
async fn stats_page() -> HttpResponse {
    html_page(StatusCode::OK, Some(crate::stats_page::SCRIPT)).body(crate::stats_page::render())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TrendingParams {
    minutes: Option<u64>,
    limit: Option<usize>,
}

/// The links with the most clicks in the last minutes.
#[utoipa::path(
    get,
    path = "/api/trending",
    tag = "clicks",
    params(TrendingParams),
    responses(
        (status = 200, description = "The links with the most people's clicks lately: the token's own, or for an admin everyone's", body = TrendingLinks),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 422, description = "minutes or limit is out of bounds", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
async fn trending(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let params = query::<TrendingParams>(&request, "minutes and limit")?;
    let links = shortener
        .trending(&who, params.minutes, params.limit)
        .await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(TrendingLinks { links }))
}

/// The request's query string as `T`, or a 422 naming what it may hold.
fn query<T: serde::de::DeserializeOwned>(
    request: &HttpRequest,
    known: &str,
) -> Result<T, ApiError> {
    web::Query::<T>::from_query(request.query_string())
        .map(web::Query::into_inner)
        .map_err(|e| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("the query is not valid: {e}; use {known}"),
            )
        })
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
async fn whoami(
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

/// This API described as OpenAPI 3.1: every endpoint, its parameters,
/// bodies, statuses and error bodies.
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "operations",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json"))
)]
async fn openapi_json() -> HttpResponse {
    static DOCUMENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let document =
        DOCUMENT.get_or_init(|| serde_json::to_string(&openapi::document()).unwrap_or_default());
    HttpResponse::Ok()
        .content_type("application/json")
        .body(document.as_str())
}

/// The OpenAPI document drawn for people, with nothing loaded from other
/// sites.
#[utoipa::path(
    get,
    path = "/api/docs",
    tag = "pages",
    responses((status = 200, description = "The API's documentation page", content_type = "text/html"))
)]
async fn api_docs_page() -> HttpResponse {
    html_page(StatusCode::OK, Some(openapi::DOCS_SCRIPT)).body(openapi::page())
}

/// The management page; it holds no data and asks the API for everything.
#[utoipa::path(
    get,
    path = "/manage",
    tag = "pages",
    responses((status = 200, description = "The management page", content_type = "text/html"))
)]
async fn manage_page() -> HttpResponse {
    html_page(StatusCode::OK, Some(crate::manage::SCRIPT)).body(crate::manage::render())
}

/// The start of an HTML page's answer: never cached, never shown in
/// another site's frame, where a hidden button could be clicked through it,
/// and running no script but `script`, the page's own inline one (see
/// [`page_policy`]); none at all without one.
fn html_page(status: StatusCode, script: Option<&str>) -> actix_web::HttpResponseBuilder {
    let mut response = HttpResponse::build(status);
    response
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            script.map_or_else(|| NON_PAGE_POLICY.to_owned(), page_policy),
        ))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"));
    response
}

/// A page's `Content-Security-Policy`: the one inline script it was built
/// with runs, allowed by its SHA-256, and no other: not one injected into
/// the page (which could read the access token the management page keeps in
/// `sessionStorage`), nor one from elsewhere, nor a plugin; no `<base>` can
/// move its links, and no other site may frame it.
fn page_policy(script: &str) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let digest = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(script));
    format!("script-src 'sha256-{digest}'; {OTHER_POLICY}")
}

/// What every answer's `Content-Security-Policy` holds besides a page's
/// `script-src`.
const OTHER_POLICY: &str = "object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/// Every answer that is not a page (JSON, images, errors, metrics) loads
/// and runs nothing, should a browser be made to open it as a document.
const NON_PAGE_POLICY: &str = "default-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/// Around every route: a request whose `Host` (or absolute URL) names a
/// host that is not this writer's gets 421, so that a page whose name was
/// rebound to the writer's address (DNS rebinding) cannot use it; every
/// answer, refusals and errors included, says `X-Content-Type-Options:
/// nosniff` and has a `Content-Security-Policy`: a page's own, or
/// [`NON_PAGE_POLICY`].
async fn harden(
    request: actix_web::dev::ServiceRequest,
    next: middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    let refusal = request
        .app_data::<web::Data<Shortener>>()
        .and_then(|shortener| foreign_host(request.request(), &shortener.settings));
    // Handlers answer their errors themselves (actix turns a handler's or
    // an extractor's error into its response), so every answer passes here.
    let mut response = match refusal {
        Some(message) => request
            .into_response(ApiError::new(StatusCode::MISDIRECTED_REQUEST, message).error_response())
            .map_into_right_body(),
        None => next.call(request).await?.map_into_left_body(),
    };
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            header::HeaderValue::from_static(NON_PAGE_POLICY),
        );
    }
    Ok(response)
}

/// Why the writer does not answer `request`: its `Host` header, or the
/// host of its absolute URL, is not one of the writer's
/// ([`Settings::host_refusal`]). A request naming no host (HTTP/1.0)
/// comes from no browser, and is answered.
fn foreign_host(request: &HttpRequest, settings: &Settings) -> Option<String> {
    let named = request.uri().authority().map(|a| a.as_str().to_owned());
    let headers = request
        .headers()
        .get_all(header::HOST)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    named
        .into_iter()
        .chain(headers)
        .find_map(|authority| settings.host_refusal(&authority))
}

/// Whether the browser reached the writer over HTTPS: the writer itself
/// speaks plain HTTP, so only a proxy in front of it can say, through
/// `X-Forwarded-Proto`, and only a proxy trusted by
/// `rate_limit.trust_forwarded_for` is believed.
fn came_over_https(request: &HttpRequest, settings: &Settings) -> bool {
    let trusted = request
        .peer_addr()
        .is_some_and(|peer| settings.config.rate_limit.trusts_forwarded_from(peer.ip()));
    trusted
        && request
            .headers()
            .get_all("x-forwarded-proto")
            .last()
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.rsplit(',').next())
            .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

#[derive(Debug, Deserialize)]
pub struct FormInput {
    #[serde(default)]
    url: String,
    #[serde(default)]
    key: String,
    /// The form token the page carried (against cross-site posts).
    #[serde(default)]
    csrf: String,
    /// An access token typed by the user, when the writer needs one.
    #[serde(default)]
    token: String,
}

/// The web form.
#[utoipa::path(
    get,
    path = "/",
    tag = "pages",
    responses(
        (status = 200, description = "The form, with a form cookie and token", content_type = "text/html"),
        (status = 500, description = "No form cookie could be made (no randomness)", body = String),
    )
)]
async fn form_page(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> HttpResponse {
    form_response(
        &request,
        &shortener,
        &guard,
        StatusCode::OK,
        FormView::default(),
    )
}

/// The web form's post: shortens one URL.
#[utoipa::path(
    post,
    path = "/",
    tag = "pages",
    request_body(content_type = "application/x-www-form-urlencoded", content = String,
                 description = "url, key, csrf (the page's form token) and token (an access token, when needed)"),
    responses(
        (status = 201, description = "The page with the new short link", content_type = "text/html"),
        (status = 200, description = "The page with the link the URL already had", content_type = "text/html"),
        (status = 401, description = "The page asking for a (valid) access token", content_type = "text/html"),
        (status = 403, description = "Posted from another site, or without the page's form token", content_type = "text/html"),
        (status = 409, description = "The page saying the key is taken", content_type = "text/html"),
        (status = 400, description = "The form could not be read", body = ErrorBody),
        (status = 413, description = "The form is over max_body_bytes", body = ErrorBody),
        (status = 415, description = "The form is not sent as application/x-www-form-urlencoded", body = ErrorBody),
        (status = 422, description = "The page saying what is wrong with the URL or key", content_type = "text/html"),
        (status = 429, description = "The page saying when to come back", content_type = "text/html"),
        (status = 500, description = "No form cookie could be made (no randomness)", body = String),
        (status = 503, description = "The page saying the store is unreachable", content_type = "text/html"),
    )
)]
async fn form_submit(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    form: web::Form<FormInput>,
) -> HttpResponse {
    let key = form.key.trim();
    let mut view = FormView {
        url: form.url.clone(),
        key: form.key.clone(),
        ..FormView::default()
    };
    let admitted = match guard.check_form_post(&request, &form.csrf) {
        Ok(()) => guard.admit(&request, Some(&form.token)).await,
        Err(refusal) => Err(refusal),
    };
    let caller = match admitted {
        Ok(caller) => caller,
        Err(refusal) => {
            return refused_form(&request, &shortener, &guard, view, &refusal);
        }
    };
    // A link made through the form belongs to the typed token, as one made
    // through the API does: its holder can change it on the management page.
    let new = NewLink {
        url: &form.url,
        key: Some(key),
        ..NewLink::default()
    };
    let status = match shortener.create(&new, caller.owner()).await {
        Ok(Written {
            outcome: inserted,
            purge_warning,
        }) => {
            note_purge_failure(&request, purge_warning.as_ref());
            let created = matches!(inserted, Inserted::Created(_));
            let link = inserted.link();
            view = FormView {
                outcome: Some(Outcome {
                    key: link.key.clone(),
                    short_url: shortener.short_url(&link.key),
                    long_url: link.record.url.to_string(),
                    created,
                }),
                ..FormView::default()
            };
            if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            }
        }
        Err(error) => {
            let (status, field, message) = error.answer();
            match field {
                Some(Field::Key) => view.key_error = Some(message),
                Some(Field::Url) => view.url_error = Some(message),
                // The form has no other inputs.
                _ => view.general_error = Some(message),
            }
            status
        }
    };
    form_response(&request, &shortener, &guard, status, view)
}

/// What the CSV upload form sent, and who sent it.
struct Upload {
    caller: Caller,
    csv: Vec<u8>,
}

/// Why an upload was not read.
enum UploadError {
    Unreadable(StatusCode, String),
    Refused(Refusal),
}

/// The most bytes of an upload form's parts other than the file.
const SMALL_PART: usize = 1024;

/// Reads the upload form's parts; the file may be as large as a bulk
/// request's body from the same caller (`limit`), the other parts a few
/// hundred bytes. The file is read only once `admit` took the form token
/// and access token sent before it (browsers send the parts in the form's
/// order) and named the caller: an anonymous caller's file is refused as
/// soon as it passes that caller's limit, never read whole.
async fn read_upload(
    mut multipart: Multipart,
    limit: impl Fn(&Caller) -> usize,
    admit: impl Fn(&str, &str) -> Result<Caller, Refusal>,
) -> Result<Upload, UploadError> {
    let unreadable = |e: &dyn std::fmt::Display| {
        UploadError::Unreadable(
            StatusCode::BAD_REQUEST,
            format!("the upload could not be read: {e}"),
        )
    };
    let (mut csrf, mut token) = (String::new(), String::new());
    let mut upload = None;
    while let Some(part) = multipart.next().await {
        let mut part = part.map_err(|e| unreadable(&e))?;
        let name = part.name().unwrap_or_default().to_owned();
        let most = match name.as_str() {
            "csv" => {
                let caller = admit(&csrf, &token).map_err(UploadError::Refused)?;
                let most = limit(&caller);
                upload = Some(Upload {
                    caller,
                    csv: Vec::new(),
                });
                most
            }
            "csrf" | "token" => SMALL_PART,
            _ => 0,
        };
        let mut value = Vec::new();
        while let Some(chunk) = part.next().await {
            let chunk = chunk.map_err(|e| unreadable(&e))?;
            if value.len() + chunk.len() > most {
                return Err(UploadError::Unreadable(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    if name == "csv" {
                        format!(
                            "the file is over {most} bytes; split it, {MAX_BULK_LINKS} links at \
                             most each (without an access token, as many as the rate limit's \
                             burst)"
                        )
                    } else {
                        format!("the form's {name:?} part is over {most} bytes")
                    },
                ));
            }
            value.extend_from_slice(&chunk);
        }
        match (name.as_str(), upload.as_mut()) {
            ("csrf", _) => csrf = String::from_utf8_lossy(&value).into_owned(),
            ("token", _) => token = String::from_utf8_lossy(&value).into_owned(),
            ("csv", Some(upload)) => upload.csv = value,
            _ => {}
        }
    }
    match upload {
        Some(upload) => Ok(upload),
        None => Ok(Upload {
            caller: admit(&csrf, &token).map_err(UploadError::Refused)?,
            csv: Vec::new(),
        }),
    }
}

/// The form's CSV upload: each line created as the form creates one link,
/// then the page again with each line's outcome.
#[utoipa::path(
    post,
    path = "/bulk",
    tag = "pages",
    request_body(content_type = "multipart/form-data", content = String,
                 description = "csrf (the page's form token), token (an access token, when needed) and csv (the file), in this order"),
    responses(
        (status = 200, description = "The page with each line's outcome", content_type = "text/html"),
        (status = 400, description = "The upload could not be read", content_type = "text/html"),
        (status = 401, description = "The page asking for a (valid) access token", content_type = "text/html"),
        (status = 403, description = "Posted from another site, or without the page's form token before the file", content_type = "text/html"),
        (status = 413, description = "Over 10,000 links, or a file too large for them", content_type = "text/html"),
        (status = 422, description = "The CSV's header names no url column", content_type = "text/html"),
        (status = 500, description = "No form cookie could be made (no randomness)", body = String),
    )
)]
async fn form_upload(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    multipart: Multipart,
) -> HttpResponse {
    let mut view = FormView::default();
    let limit = |caller: &Caller| {
        bulk_body_limit(
            &shortener.settings,
            matches!(caller, Caller::TokenHolder(_)),
        )
    };
    // No caller's file is larger than a token holder's: a body announced
    // larger is refused before a byte of it is read.
    let most = bulk_body_limit(&shortener.settings, true) + 4 * SMALL_PART;
    if announced_length(&request).is_some_and(|length| length > most) {
        view.bulk_error = Some(format!(
            "the upload is over {most} bytes; split the file, {MAX_BULK_LINKS} links at most each"
        ));
        return form_response(
            &request,
            &shortener,
            &guard,
            StatusCode::PAYLOAD_TOO_LARGE,
            view,
        );
    }
    let admit = |csrf: &str, token: &str| {
        guard.check_form_post(&request, csrf)?;
        guard.caller(&request, Some(token))
    };
    let upload = match read_upload(multipart, limit, admit).await {
        Ok(upload) => upload,
        Err(UploadError::Refused(refusal)) => {
            return refused_form(&request, &shortener, &guard, view, &refusal);
        }
        Err(UploadError::Unreadable(status, message)) => {
            view.bulk_error = Some(message);
            return form_response(&request, &shortener, &guard, status, view);
        }
    };
    let rows = match csv_batch(&upload.csv) {
        Ok(rows) => rows,
        Err(BatchError::Unreadable(error)) => {
            view.bulk_error = Some(error.to_string());
            return form_response(
                &request,
                &shortener,
                &guard,
                StatusCode::UNPROCESSABLE_ENTITY,
                view,
            );
        }
        Err(BatchError::TooMany) => {
            view.bulk_error = Some(format!(
                "the file holds over {MAX_BULK_LINKS} links; split it into files of {MAX_BULK_LINKS} at most"
            ));
            return form_response(
                &request,
                &shortener,
                &guard,
                StatusCode::PAYLOAD_TOO_LARGE,
                view,
            );
        }
    };
    let admitted = guard.spend(&request, upload.caller, rows.len()).await;
    let (summary, rows) = create_admitted(&shortener, admitted, rows).await;
    view.bulk = Some(BulkView { summary, rows });
    form_response(&request, &shortener, &guard, StatusCode::OK, view)
}

/// The form again, saying why its post was refused.
fn refused_form(
    request: &HttpRequest,
    shortener: &Shortener,
    guard: &Gatekeeper,
    mut view: FormView,
    refusal: &Refusal,
) -> HttpResponse {
    let error = ApiError::from(refusal.clone());
    match refusal {
        Refusal::TokenMissing => {
            view.token_error = Some(
                "creating links here needs an access token: enter it in the Access token field"
                    .into(),
            );
        }
        Refusal::TokenInvalid => view.token_error = Some(error.message),
        Refusal::RateLimited { .. } | Refusal::CrossSite(_) => {
            view.general_error = Some(error.message);
        }
    }
    let mut response = form_response(request, shortener, guard, error.status, view);
    if let Some(seconds) = error.retry_after_s {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, seconds.into());
    }
    response
}

/// The form page, with a form token for the browser's cookie; a browser
/// without a cookie (or with a malformed one) gets a new one.
fn form_response(
    request: &HttpRequest,
    shortener: &Shortener,
    guard: &Gatekeeper,
    status: StatusCode,
    mut view: FormView,
) -> HttpResponse {
    let existing = request
        .cookie(CSRF_COOKIE)
        .map(|c| c.value().to_owned())
        .filter(|v| is_form_cookie(v));
    let (cookie, is_new) = match existing {
        Some(cookie) => (cookie, false),
        None => match new_form_cookie() {
            Ok(cookie) => (cookie, true),
            Err(message) => {
                log::error!("{message}");
                return HttpResponse::InternalServerError().body(message);
            }
        },
    };
    view.csrf = guard.form_token(&cookie);
    view.ask_token = guard.token_required();
    let mut response = html_page(status, Some(crate::page::SCRIPT));
    if is_new {
        let secure = came_over_https(request, &shortener.settings);
        response.cookie(
            Cookie::build(CSRF_COOKIE, cookie)
                .path("/")
                .http_only(true)
                .same_site(SameSite::Lax)
                .secure(secure)
                .finish(),
        );
    }
    response.body(render(&view, &shortener.settings.scheme))
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
                _ => Value::from("https://example.org/"),
            };
            object.insert(field.name().to_owned(), value);
        }
        assert!(row_of(object.clone()).is_ok());
        object.insert("colour".into(), "blue".into());
        let refused = row_of(object).unwrap_err();
        assert_eq!(refused.field, Field::Unknown);
        assert!(refused
            .message
            .contains("url, key, expires_at, expired_url, max_clicks"));
    }
}
