//! Shlink's errors: `application/problem+json` (RFC 7807) bodies whose
//! `type` a Shlink client branches on, one [`ProblemType`] per case. The
//! links area's failures are told in Shlink's words where Shlink has them,
//! and in this project's own stable codes where it has none.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde_json::json;

use crate::access::Refusal;
use crate::error_code::ErrorCode;
use crate::links::shortener::{ShortenError, TagError};
use crate::links::store::StoreError;
use crate::links::validate::Field;
use shortlink_core::NotFoundKind;

/// Where Shlink's own problem types live.
const SHLINK_TYPES: &str = "https://shlink.io/api/error/";

/// Each case a Shlink client may be told, with its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemType {
    /// 400: a field is not valid (`invalidElements` names it).
    InvalidData,
    /// 400: the custom slug holds another link.
    NonUniqueSlug,
    /// 400: the body is not a JSON object.
    MalformedRequestBody,
    /// 404: no short URL the key may see has this code.
    ShortUrlNotFound,
    /// 404: no link holds the tag.
    TagNotFound,
    /// 409: links already hold the tag a rename names.
    TagConflict,
    /// 403: the key may not rename or delete tags.
    ForbiddenTagOperation,
    /// 404: the domain is not served here.
    DomainNotFound,
    /// 401: no `X-Api-Key`.
    MissingAuthentication,
    /// 401: an `X-Api-Key` that is not valid.
    InvalidApiKey,
    /// 404: no such route.
    NotFound,
    /// 501: real-time updates are not offered.
    MercureNotConfigured,
    /// This project's own cases, in its native API's codes.
    Own(ErrorCode),
}

impl ProblemType {
    fn code(self) -> String {
        let code = match self {
            Self::InvalidData => "invalid-data",
            Self::NonUniqueSlug => "non-unique-slug",
            Self::MalformedRequestBody => "malformed-request-body",
            Self::ShortUrlNotFound => "short-url-not-found",
            Self::TagNotFound => "tag-not-found",
            Self::TagConflict => "tag-conflict",
            Self::ForbiddenTagOperation => "forbidden-tag-operation",
            Self::DomainNotFound => "domain-not-found",
            Self::MissingAuthentication => "missing-authentication",
            Self::InvalidApiKey => "invalid-api-key",
            Self::NotFound => "not-found",
            Self::MercureNotConfigured => "mercure-not-configured",
            Self::Own(code) => return code.as_str(),
        };
        code.to_owned()
    }

    /// The problem's `type`: Shlink's URL for its own cases, a URN of
    /// this project's for the others.
    pub fn uri(self) -> String {
        match self {
            Self::Own(_) => format!("urn:shortlink:error:{}", self.code()),
            shlink => format!("{SHLINK_TYPES}{}", shlink.code()),
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Self::InvalidData | Self::NonUniqueSlug | Self::MalformedRequestBody => {
                StatusCode::BAD_REQUEST
            }
            Self::ShortUrlNotFound | Self::TagNotFound | Self::DomainNotFound | Self::NotFound => {
                StatusCode::NOT_FOUND
            }
            Self::TagConflict => StatusCode::CONFLICT,
            Self::ForbiddenTagOperation => StatusCode::FORBIDDEN,
            Self::MissingAuthentication | Self::InvalidApiKey => StatusCode::UNAUTHORIZED,
            Self::MercureNotConfigured => StatusCode::NOT_IMPLEMENTED,
            Self::Own(code) => {
                StatusCode::from_u16(code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
        }
    }

    fn title(self) -> &'static str {
        match self {
            Self::InvalidData => "Invalid data",
            Self::NonUniqueSlug => "Invalid custom slug",
            Self::MalformedRequestBody => "Malformed request body",
            Self::ShortUrlNotFound => "Short URL not found",
            Self::TagNotFound => "Tag not found",
            Self::TagConflict => "Tag conflict",
            Self::ForbiddenTagOperation => "Forbidden tag operation",
            Self::DomainNotFound => "Domain not found",
            Self::MissingAuthentication => "Invalid authorization",
            Self::InvalidApiKey => "Invalid API key",
            Self::NotFound => "Not found",
            Self::MercureNotConfigured => "Mercure integration not configured",
            Self::Own(_) => "Request failed",
        }
    }
}

/// A failure told to a Shlink client.
#[derive(Debug, thiserror::Error)]
#[error("{detail}")]
pub struct Problem {
    pub kind: ProblemType,
    pub detail: String,
    /// For [`ProblemType::InvalidData`]: the fields to blame, in Shlink's
    /// names.
    pub invalid_elements: Vec<&'static str>,
}

impl Problem {
    pub fn new(kind: ProblemType, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            invalid_elements: Vec::new(),
        }
    }

    /// A field that is not valid, named as Shlink names it.
    pub fn invalid(element: &'static str, detail: impl Into<String>) -> Self {
        Self {
            invalid_elements: vec![element],
            ..Self::new(ProblemType::InvalidData, detail)
        }
    }
}

impl ResponseError for Problem {
    fn status_code(&self) -> StatusCode {
        self.kind.status()
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.kind.status();
        let mut body = json!({
            "type": self.kind.uri(),
            "title": self.kind.title(),
            "detail": self.detail,
            "status": status.as_u16(),
        });
        if !self.invalid_elements.is_empty() {
            body["invalidElements"] = json!(self.invalid_elements);
        }
        HttpResponse::build(status)
            .content_type("application/problem+json")
            .body(body.to_string())
    }
}

/// A field of the links area as a Shlink client names it.
pub fn shlink_name(field: Field) -> &'static str {
    match field {
        Field::Url => "longUrl",
        Field::Key => "customSlug",
        Field::ExpiresAt => "validUntil",
        Field::MaxClicks => "maxVisits",
        Field::ForwardQuery => "forwardQuery",
        Field::ValidSince => "validSince",
        Field::KeyLength => "shortCodeLength",
        Field::Limit => "itemsPerPage",
        Field::Redirect(kind) => shlink_redirect_name(kind),
        other => other.name(),
    }
}

/// A domain's redirect of `kind` as Shlink names its field.
pub const fn shlink_redirect_name(kind: NotFoundKind) -> &'static str {
    match kind {
        NotFoundKind::BaseUrl => "baseUrlRedirect",
        NotFoundKind::Regular404 => "regular404Redirect",
        NotFoundKind::InvalidShortUrl => "invalidShortUrlRedirect",
    }
}

impl From<ShortenError> for Problem {
    fn from(error: ShortenError) -> Self {
        let (code, field, message) = error.answer();
        match error {
            ShortenError::Invalid(_) | ShortenError::BadRule(_) => {
                Self::invalid(field.map_or("unknown", shlink_name), message)
            }
            ShortenError::Store(StoreError::KeyTaken { key }) => Self::new(
                ProblemType::NonUniqueSlug,
                format!("Provided slug \"{key}\" is already in use."),
            ),
            // A key may not see another's links: Shlink tells it none exists.
            ShortenError::NotFound(_) | ShortenError::Gone(_) | ShortenError::NotYours => {
                Self::new(ProblemType::ShortUrlNotFound, message)
            }
            ShortenError::UnknownDomain(_) => Self::new(ProblemType::DomainNotFound, message),
            _ => Self::new(ProblemType::Own(code), message),
        }
    }
}

impl From<TagError> for Problem {
    fn from(error: TagError) -> Self {
        let message = error.to_string();
        match error {
            TagError::NotFound(_) => Self::new(ProblemType::TagNotFound, message),
            TagError::Conflict(_) => Self::new(ProblemType::TagConflict, message),
            TagError::NotAdmin => Self::new(ProblemType::ForbiddenTagOperation, message),
            TagError::Shorten(error) => error.into(),
        }
    }
}

impl From<Refusal> for Problem {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::TokenMissing => Self::new(
                ProblemType::MissingAuthentication,
                "Expected one of the following authentication headers, [\"X-Api-Key\"], \
                 but none were provided",
            ),
            Refusal::TokenInvalid => Self::new(
                ProblemType::InvalidApiKey,
                "Provided API key does not exist or is invalid: use an access token of \
                 this shortener",
            ),
            other => Self::new(ProblemType::Own(ErrorCode::Forbidden), other.to_string()),
        }
    }
}
