//! The web form's handlers: the page, its post, and its CSV upload.

// `#[utoipa::path]` writes the `params(...)` types out with their module
// path, which this lint flags in the code it generates.
#![allow(unused_qualifications)]

use actix_multipart::Multipart;
use actix_web::cookie::{Cookie, SameSite};
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::StreamExt as _;
use serde::Deserialize;

use crate::access::{is_form_cookie, new_form_cookie, Caller, Gatekeeper, Refusal, CSRF_COOKIE};
use crate::links::bulk::{csv_batch, BatchError, MAX_BULK_LINKS};
use crate::links::shortener::{NewLink, Shortener, Written};
use crate::links::store::Inserted;
use crate::links::validate::Field;
use crate::web::bulk::{announced_length, bulk_body_limit, create_admitted};
use crate::web::error::{status_of, ApiError, ErrorBody};
use crate::web::links::note_purge_failure;
use crate::web::pages::campaign::{forward_choice, with_campaign};
use crate::web::pages::page::{render, BulkView, FormView, Outcome};
use crate::web::{came_over_https, html_page};

#[derive(Debug, Deserialize)]
pub struct FormInput {
    #[serde(default)]
    url: String,
    #[serde(default)]
    key: String,
    #[serde(default)]
    utm_source: String,
    #[serde(default)]
    utm_medium: String,
    #[serde(default)]
    utm_campaign: String,
    #[serde(default)]
    utm_term: String,
    #[serde(default)]
    utm_content: String,
    /// Forward each click's query string: `default`, `always`, `never`.
    #[serde(default)]
    forward_query: String,
    /// The short domain's name; empty: the default one.
    #[serde(default)]
    domain: String,
    /// What the link is called in listings; empty: its page's title.
    #[serde(default)]
    title: String,
    /// Tags separated by commas.
    #[serde(default)]
    tags: String,
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
pub(crate) async fn form_page(
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
                 description = "url, key, utm_source, utm_medium, utm_campaign, utm_term and utm_content (each one given is added to the URL's query), forward_query (default, always or never), domain (a short domain's name; the default one when empty), title and tags (separated by commas), csrf (the page's form token) and token (an access token, when needed)"),
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
pub(crate) async fn form_submit(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    form: web::Form<FormInput>,
) -> HttpResponse {
    let key = form.key.trim();
    let utm = [
        &form.utm_source,
        &form.utm_medium,
        &form.utm_campaign,
        &form.utm_term,
        &form.utm_content,
    ];
    let mut view = FormView {
        url: form.url.clone(),
        key: form.key.clone(),
        utm: utm.map(String::clone),
        forward_query: form.forward_query.clone(),
        domain: form.domain.clone(),
        title: form.title.clone(),
        tags: form.tags.clone(),
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
    // The campaign is part of the target: checked and stored with it, by
    // the rule Varnish merges a forwarded query with.
    let url = with_campaign(&form.url, &utm.map(String::as_str));
    let forward_query = forward_choice(&form.forward_query);
    let (url, forward_query) = match (url, forward_query) {
        (Ok(url), Ok(forward_query)) => (url, forward_query),
        (url, forward_query) => {
            view.utm_error = url.err();
            view.forward_error = forward_query.err();
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            return form_response(&request, &shortener, &guard, status, view);
        }
    };
    // A link made through the form belongs to the typed token, as one made
    // through the API does: its holder can change it on the management page.
    let tags: Vec<String> = form
        .tags
        .split(',')
        .map(str::trim)
        .filter(|tag| !tag.is_empty())
        .map(str::to_owned)
        .collect();
    let new = NewLink {
        url: &url,
        key: Some(key),
        forward_query,
        domain: Some(form.domain.trim()),
        title: Some(form.title.trim()).filter(|title| !title.is_empty()),
        tags: &tags,
        read_title: true,
        ..NewLink::default()
    };
    // A token limited to some domains creates links on those only.
    let status = match shortener.create_as(&new, &caller).await {
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
                    domain: shortener
                        .domain(Some(&link.domain))
                        .ok()
                        .filter(|domain| !domain.is_default())
                        .map(|domain| domain.name.clone()),
                    short_url: shortener.link_url(link),
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
            let (code, field, message) = error.answer();
            match field {
                Some(Field::Key) => view.key_error = Some(message),
                Some(Field::Url) => view.url_error = Some(message),
                Some(Field::ForwardQuery) => view.forward_error = Some(message),
                Some(Field::Domain) => view.domain_error = Some(message),
                Some(Field::Title | Field::Tags) => view.details_error = Some(message),
                // The form has no other inputs.
                _ => view.general_error = Some(message),
            }
            status_of(code)
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
pub(crate) async fn form_upload(
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
    let status = error.status();
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
    let mut response = form_response(request, shortener, guard, status, view);
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
    view.domains = shortener
        .settings
        .domains
        .iter()
        .map(|domain| (domain.name.clone(), domain.forward_query))
        .collect();
    let mut response = html_page(status, Some(crate::web::pages::page::SCRIPT));
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
