//! The API's failure: [`ApiError`], answered as [`ErrorBody`] with its status,
//! and the answers to bodies the JSON and form extractors refuse.

use actix_web::error::{JsonPayloadError, UrlencodedError};
use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use utoipa::ToSchema;

use crate::access::Refusal;
use crate::links::shortener::ShortenError;
use crate::links::validate::{Field, Invalid};

/// Every failure's body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong and what to do about it.
    pub error: String,
    /// The input to blame, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// For 429: seconds until another link is allowed (also in `Retry-After`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u64>,
}

/// An API failure, answered as `{"error": "..."}` with the matching status.
#[derive(Debug)]
pub struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    pub(crate) field: Option<Field>,
    /// `Retry-After` seconds, for 429.
    pub(crate) retry_after_s: Option<u64>,
    /// `WWW-Authenticate` challenge, for 401.
    pub(crate) challenge: Option<&'static str>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: String) -> Self {
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

pub(crate) fn json_error(error: &JsonPayloadError, max_body_bytes: usize) -> ApiError {
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

pub(crate) fn form_error(error: &UrlencodedError, max_body_bytes: usize) -> ApiError {
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
