//! Many links in one request: a JSON array or a CSV body, each row under
//! the rules of a single insert, with the body's bounds.

// `#[utoipa::path]` writes the `params(...)` types out with their module
// path, which this lint flags in the code it generates.
#![allow(unused_qualifications)]

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::access::{Admitted, Caller, Gatekeeper, Refusal};
use crate::config::Settings;
use crate::error_code::ErrorCode;
use crate::links::bulk::{
    create_all, csv_batch, BatchError, Item, Refused, RowOutcome, Summary, MAX_BULK_LINKS,
};
use crate::links::shortener::Shortener;
use crate::web::error::{ApiError, ErrorBody};
use crate::web::links::{row_of, LinkInput};

/// What a bulk insert did.
#[derive(Debug, Serialize, ToSchema)]
pub struct BulkAnswer {
    pub summary: Summary,
    /// One per row, in input order.
    pub results: Vec<BulkResult>,
}

/// One row's outcome; `status` says which fields follow.
#[derive(Debug, Serialize, ToSchema)]
pub struct BulkResult {
    /// The row's place in the input, from 0.
    pub index: usize,
    /// The row's line, for CSV.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    #[serde(flatten)]
    pub outcome: RowOutcome,
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
            ErrorCode::UnsupportedMediaType,
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
    let too_many = || ApiError::new(ErrorCode::TooManyLinks, TOO_MANY_LINKS.to_owned());
    match media {
        BulkMedia::Json => {
            let BoundedItems(items) = serde_json::from_slice(body).map_err(|e| {
                if e.to_string().starts_with(TOO_MANY_LINKS) {
                    return too_many();
                }
                ApiError::new(
                    ErrorCode::BadJson,
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
                            ErrorCode::InvalidInput,
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
            Err(BatchError::Unreadable(error)) => {
                Err(ApiError::new(ErrorCode::InvalidInput, error.to_string()))
            }
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
pub(crate) fn announced_length(request: &HttpRequest) -> Option<usize> {
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
            ErrorCode::BodyTooLarge,
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
                ErrorCode::BadBody,
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
pub(crate) async fn create_links_in_bulk(
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
pub(crate) async fn create_admitted<T>(
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
    let outcomes: Vec<(T, RowOutcome)> = create_all(shortener, admitted.caller, false, rows)
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
        ..Refused::new(error.code, error.message, None)
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
