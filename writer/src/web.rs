//! HTTP interfaces: the JSON API under `/api/links` and the web form at `/`.

use actix_web::error::JsonPayloadError;
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse, ResponseError};
use serde::{Deserialize, Serialize};

use crate::page::{render, FormView, Outcome};
use crate::shortener::{ShortenError, Shortener};
use crate::store::{Inserted, Link, StoreError};

/// Largest request body accepted, JSON or form.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Routes of the writer, for `App::configure`.
pub fn routes(config: &mut web::ServiceConfig) {
    config
        .app_data(
            web::JsonConfig::default()
                .limit(MAX_BODY_BYTES)
                .error_handler(|error, _req| json_error(&error).into()),
        )
        .app_data(web::FormConfig::default().limit(MAX_BODY_BYTES))
        .route("/", web::get().to(form_page))
        .route("/", web::post().to(form_submit))
        .route("/api/links", web::post().to(create_link))
        .route("/api/links/{key}", web::get().to(get_link));
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewLink {
    url: String,
    #[serde(default)]
    key: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct LinkBody {
    key: String,
    url: String,
    short_url: String,
}

impl LinkBody {
    fn new(link: &Link, shortener: &Shortener) -> Self {
        Self {
            key: link.key.clone(),
            url: link.url.clone(),
            short_url: shortener.short_url(&link.key),
        }
    }
}

/// An API failure, answered as `{"error": "..."}` with the matching status.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    field: Option<&'static str>,
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
        let mut body = serde_json::json!({ "error": self.message });
        if let Some(field) = self.field {
            body["field"] = field.into();
        }
        HttpResponse::build(self.status).json(body)
    }
}

impl From<ShortenError> for ApiError {
    fn from(error: ShortenError) -> Self {
        let (status, field) = match &error {
            ShortenError::Invalid(invalid) => {
                (StatusCode::UNPROCESSABLE_ENTITY, Some(invalid.field))
            }
            ShortenError::Store(StoreError::KeyTaken { .. }) => (StatusCode::CONFLICT, Some("key")),
            ShortenError::Store(StoreError::DigestExhausted) => (StatusCode::CONFLICT, Some("url")),
            ShortenError::Store(StoreError::Unavailable(_)) => {
                log::error!("{error}");
                (StatusCode::SERVICE_UNAVAILABLE, None)
            }
        };
        Self {
            status,
            message: error.to_string(),
            field,
        }
    }
}

fn json_error(error: &JsonPayloadError) -> ApiError {
    let (status, message) = match error {
        JsonPayloadError::ContentType => (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the link as JSON, with Content-Type: application/json".to_owned(),
        ),
        JsonPayloadError::OverflowKnownLength { .. } | JsonPayloadError::Overflow { .. } => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is over {MAX_BODY_BYTES} bytes"),
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
    ApiError {
        status,
        message,
        field: None,
    }
}

async fn create_link(
    shortener: web::Data<Shortener>,
    body: web::Json<NewLink>,
) -> Result<HttpResponse, ApiError> {
    let inserted = shortener.shorten(&body.url, body.key.as_deref()).await?;
    let status = match inserted {
        Inserted::Created(_) => StatusCode::CREATED,
        Inserted::Existing(_) => StatusCode::OK,
    };
    let link = inserted.link();
    Ok(HttpResponse::build(status)
        .insert_header((header::LOCATION, format!("/api/links/{}", link.key)))
        .json(LinkBody::new(link, &shortener)))
}

async fn get_link(
    shortener: web::Data<Shortener>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let key = key.into_inner();
    match shortener.get(&key).await {
        Ok(Some(link)) => Ok(HttpResponse::Ok().json(LinkBody::new(&link, &shortener))),
        Ok(None) => Err(ApiError {
            status: StatusCode::NOT_FOUND,
            message: format!("there is no link with the key {key:?}"),
            field: None,
        }),
        Err(error) => Err(ShortenError::Store(error).into()),
    }
}

#[derive(Debug, Deserialize)]
pub struct FormInput {
    #[serde(default)]
    url: String,
    #[serde(default)]
    key: String,
}

async fn form_page() -> HttpResponse {
    html(StatusCode::OK, &render(&FormView::default()))
}

async fn form_submit(shortener: web::Data<Shortener>, form: web::Form<FormInput>) -> HttpResponse {
    let key = form.key.trim();
    let mut view = FormView {
        url: form.url.clone(),
        key: form.key.clone(),
        ..FormView::default()
    };
    let status = match shortener.shorten(&form.url, Some(key)).await {
        Ok(inserted) => {
            let created = matches!(inserted, Inserted::Created(_));
            let link = inserted.link();
            view = FormView {
                outcome: Some(Outcome {
                    short_url: shortener.short_url(&link.key),
                    long_url: link.url.clone(),
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
            let api = ApiError::from(error);
            match api.field {
                Some("key") => view.key_error = Some(api.message),
                Some(_) => view.url_error = Some(api.message),
                None => view.general_error = Some(api.message),
            }
            api.status
        }
    };
    html(status, &render(&view))
}

fn html(status: StatusCode, body: &str) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(body.to_owned())
}
