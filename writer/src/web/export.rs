//! Every link the caller may change, streamed as CSV or JSON lines.

// `#[utoipa::path]` writes the `params(...)` types out with their module
// path, which this lint flags in the code it generates.
#![allow(unused_qualifications)]

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::StreamExt as _;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::access::Gatekeeper;
use crate::links::export::ExportFormat;
use crate::links::shortener::{ShortenError, Shortener};
use crate::web::error::{ApiError, ErrorBody};
use crate::web::query;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ExportParams {
    format: Option<ExportFormat>,
    owner: Option<String>,
    /// Only this short domain's links (by its name or an alias); absent:
    /// every domain the token may use, one after the other.
    domain: Option<String>,
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
            (String = "text/csv", example = "url,key,expires_at,expired_url,max_clicks,short_url,expired,owner,domain,forward_query,rules\nhttps://example.org/,Lm25,,,,http://127.0.0.1:6081/l/Lm25,false,alice,127.0.0.1,,~device=ios>https://apps.apple.com/app/id1 *50>https://example.org/a *50>https://example.org/b\n"),
            (String = "application/jsonl")
         )),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "Only admins may export another owner's links (`not-owner`); the token is limited to other domains (`domain-not-allowed`)", body = ErrorBody),
        (status = 422, description = "format is not csv or jsonl, owner is not a token name, or the domain is not served here (`unknown-domain`)", body = ErrorBody),
        (status = 503, description = "The link store (Redis) is unreachable, or too few replicas confirmed the change; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
pub(crate) async fn export_links(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let params = query::<ExportParams>(&request, "format (csv or jsonl), owner and domain")?;
    let format = params.format.unwrap_or_default();
    let owner = params.owner.as_deref().filter(|owner| !owner.is_empty());
    let mut export = shortener
        .export(&who, owner, params.domain.as_deref())
        .await?;
    let mut head = format.head();
    let first = export.next_page().await.map_err(ShortenError::from)?;
    if let Some(links) = &first {
        let details = shortener.details(links).await?;
        head.extend(format.page(links, &details, &shortener));
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
                        let details = shortener.details(&links).await.map_err(|error| {
                            log::error!("export cut short: {error}");
                            std::io::Error::other(error)
                        })?;
                        let part = web::Bytes::from(format.page(&links, &details, &shortener));
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
