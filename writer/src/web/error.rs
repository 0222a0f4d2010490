//! The API's failure: [`ApiError`], answered as [`ErrorBody`] with its status,
//! and the answers to bodies the JSON and form extractors refuse. The one
//! place a failure's [`ErrorCode`] becomes an HTTP status ([`status_of`]).

use actix_web::error::{JsonPayloadError, UrlencodedError};
use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use utoipa::ToSchema;

use crate::access::Refusal;
use crate::error_code::ErrorCode;
use crate::links::shortener::ShortenError;
use crate::links::validate::{Field, Invalid};

/// Every failure's body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Why, as a stable code to branch on (the message may change).
    pub code: ErrorCode,
    /// What went wrong and what to do about it.
    pub error: String,
    /// The input to blame, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// For 429: seconds until another link is allowed (also in `Retry-After`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u64>,
}

/// An API failure, answered as `{"code": "...", "error": "..."}` with the
/// status of its code.
#[derive(Debug)]
pub struct ApiError {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
    pub(crate) field: Option<Field>,
    /// `Retry-After` seconds, for 429.
    pub(crate) retry_after_s: Option<u64>,
    /// `WWW-Authenticate` challenge, for 401.
    pub(crate) challenge: Option<&'static str>,
}

impl ApiError {
    pub(crate) fn new(code: ErrorCode, message: String) -> Self {
        Self {
            code,
            message,
            field: None,
            retry_after_s: None,
            challenge: None,
        }
    }

    /// The status this failure is answered with.
    pub(crate) fn status(&self) -> StatusCode {
        status_of(self.code)
    }
}

/// The HTTP status a failure with `code` is answered with.
pub(crate) fn status_of(code: ErrorCode) -> StatusCode {
    StatusCode::from_u16(code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status()
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status());
        if let Some(seconds) = self.retry_after_s {
            response.insert_header((header::RETRY_AFTER, seconds.to_string()));
        }
        if let Some(challenge) = self.challenge {
            response.insert_header((header::WWW_AUTHENTICATE, challenge));
        }
        response.json(ErrorBody {
            code: self.code,
            error: self.message.clone(),
            field: self.field.map(|field| field.name().to_owned()),
            retry_after_s: self.retry_after_s,
        })
    }
}

impl From<ShortenError> for ApiError {
    fn from(error: ShortenError) -> Self {
        let (code, field, message) = error.answer();
        Self {
            field,
            ..Self::new(code, message)
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
        let mut error = Self::new(ErrorCode::Forbidden, refusal.to_string());
        match refusal {
            Refusal::TokenMissing => {
                error.code = ErrorCode::TokenRequired;
                error.challenge = Some("Bearer realm=\"shortlink\"");
            }
            Refusal::TokenInvalid => {
                error.code = ErrorCode::BadToken;
                error.challenge = Some("Bearer realm=\"shortlink\", error=\"invalid_token\"");
            }
            Refusal::RateLimited { retry_after_s } => {
                error.code = ErrorCode::RateLimited;
                error.retry_after_s = Some(retry_after_s);
            }
            Refusal::CrossSite(_) => {}
        }
        error
    }
}

pub(crate) fn json_error(error: &JsonPayloadError, max_body_bytes: usize) -> ApiError {
    let (code, message) = match error {
        JsonPayloadError::ContentType => (
            ErrorCode::UnsupportedMediaType,
            "send the link as JSON, with Content-Type: application/json".to_owned(),
        ),
        JsonPayloadError::OverflowKnownLength { .. } | JsonPayloadError::Overflow { .. } => (
            ErrorCode::BodyTooLarge,
            format!("the request body is over {max_body_bytes} bytes"),
        ),
        JsonPayloadError::Deserialize(e) => (
            ErrorCode::BadJson,
            format!("the request body is not a valid link: {e}; send {{\"url\": \"https://...\", \"key\": \"optional\"}}"),
        ),
        other => (
            ErrorCode::BadBody,
            format!("the request body could not be read: {other}"),
        ),
    };
    ApiError::new(code, message)
}

pub(crate) fn form_error(error: &UrlencodedError, max_body_bytes: usize) -> ApiError {
    match error {
        UrlencodedError::Overflow { .. } => ApiError::new(
            ErrorCode::BodyTooLarge,
            format!("the form is over {max_body_bytes} bytes"),
        ),
        UrlencodedError::ContentType => ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "send the form as application/x-www-form-urlencoded".to_owned(),
        ),
        other => ApiError::new(
            ErrorCode::BadBody,
            format!("the form could not be read: {other}"),
        ),
    }
}
