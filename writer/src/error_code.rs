//! The API's stable error codes: what every error body's `code` says, for
//! a client to branch on (the `error` message is for people and may
//! change). The domain (`links/`) classifies its failures with them; the
//! HTTP layer (`web/error.rs`) answers each with its status. Nothing here
//! knows of actix: a bulk row's `code`, the status a single insert would
//! answer, is [`ErrorCode::status`] as a number.

use serde::Serialize;
use utoipa::ToSchema;

/// Why a request failed, one code per case, in kebab-case.
///
/// A value a client sent that is not valid is one code, `invalid-input`,
/// with the body's `field` naming the input (`url`, `key`, `expires_at`,
/// `limit`, ...), rather than one code per input: the inputs grow with the
/// API, and a client that shows the message next to its field reads the
/// field anyway; a code per input would say the same thing twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCode {
    /// 422: an input is not valid (`field` names it when one is to blame),
    /// or the query string or an uploaded CSV cannot be read as one.
    InvalidInput,
    /// 409: the custom key holds another link.
    KeyTaken,
    /// 409: every key generated for the URL is taken.
    DigestExhausted,
    /// 409: the key holds a value that is not a link (written by hand).
    UnreadableValue,
    /// 404: no link has this key.
    NotFound,
    /// 410: the link was deleted; its key is never given to another link.
    Gone,
    /// 403: the link belongs to another token.
    NotOwner,
    /// 412: the link changed since the `ETag` in `If-Match` was read.
    Stale,
    /// 429: too many requests from this address without a token
    /// (`Retry-After` and `retry_after_s` say when to come back).
    RateLimited,
    /// 401: this needs an access token and the request has none.
    TokenRequired,
    /// 401: the access token is not valid.
    BadToken,
    /// 403: refused as a request from another site.
    Forbidden,
    /// 413: the body is over the size allowed.
    BodyTooLarge,
    /// 413: a bulk request holds more links than allowed.
    TooManyLinks,
    /// 400: the JSON body cannot be read as what it should hold.
    BadJson,
    /// 400: the body (a form, or a bulk request's) cannot be read.
    BadBody,
    /// 400: a CSV line cannot be read (a bulk row's code).
    BadCsv,
    /// 415: the body is not sent with a media type this route reads.
    UnsupportedMediaType,
    /// 503: the link store (Redis) is unreachable.
    StoreUnavailable,
    /// 503: too few replicas confirmed the change.
    NotReplicated,
    /// 421: the request names a host that is not this writer's.
    WrongHost,
    /// 503: too many QR codes are being drawn (`Retry-After` says when to
    /// try again).
    QrBusy,
    /// 500: the QR code could not be drawn.
    QrFailed,
    /// 422: the request names a short domain this writer does not serve.
    UnknownDomain,
    /// 403: the access token is limited to other short domains.
    DomainNotAllowed,
    /// 422: a rule or split target is not valid, or they break a bound
    /// (how many, how long, weights adding up to 0); the message names
    /// the rule (`rule 2: ...`) and `field` says `rules` or `split`.
    BadRule,
}

impl ErrorCode {
    /// Every code, for the tests that check each is documented.
    pub const ALL: [Self; 26] = [
        Self::InvalidInput,
        Self::KeyTaken,
        Self::DigestExhausted,
        Self::UnreadableValue,
        Self::NotFound,
        Self::Gone,
        Self::NotOwner,
        Self::Stale,
        Self::RateLimited,
        Self::TokenRequired,
        Self::BadToken,
        Self::Forbidden,
        Self::BodyTooLarge,
        Self::TooManyLinks,
        Self::BadJson,
        Self::BadBody,
        Self::BadCsv,
        Self::UnsupportedMediaType,
        Self::StoreUnavailable,
        Self::NotReplicated,
        Self::WrongHost,
        Self::QrBusy,
        Self::QrFailed,
        Self::UnknownDomain,
        Self::DomainNotAllowed,
        Self::BadRule,
    ];

    /// The HTTP status a failure with this code is answered with.
    #[must_use]
    pub const fn status(self) -> u16 {
        match self {
            Self::BadJson | Self::BadBody | Self::BadCsv => 400,
            Self::TokenRequired | Self::BadToken => 401,
            Self::NotOwner | Self::Forbidden | Self::DomainNotAllowed => 403,
            Self::NotFound => 404,
            Self::KeyTaken | Self::DigestExhausted | Self::UnreadableValue => 409,
            Self::Gone => 410,
            Self::Stale => 412,
            Self::BodyTooLarge | Self::TooManyLinks => 413,
            Self::UnsupportedMediaType => 415,
            Self::WrongHost => 421,
            Self::InvalidInput | Self::UnknownDomain | Self::BadRule => 422,
            Self::RateLimited => 429,
            Self::QrFailed => 500,
            Self::StoreUnavailable | Self::NotReplicated | Self::QrBusy => 503,
        }
    }

    /// Whether the failure is on this side (5xx), and worth a log line.
    #[must_use]
    pub const fn is_server_error(self) -> bool {
        self.status() >= 500
    }

    /// The code as the body spells it.
    #[must_use]
    pub fn as_str(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|value| value.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    /// Fails to compile when a code is added without being put in
    /// [`ErrorCode::ALL`] (the match is exhaustive), and fails when one is
    /// in it twice.
    #[test]
    fn all_holds_every_code_once() {
        for code in ErrorCode::ALL {
            let index = match code {
                ErrorCode::InvalidInput => 0,
                ErrorCode::KeyTaken => 1,
                ErrorCode::DigestExhausted => 2,
                ErrorCode::UnreadableValue => 3,
                ErrorCode::NotFound => 4,
                ErrorCode::Gone => 5,
                ErrorCode::NotOwner => 6,
                ErrorCode::Stale => 7,
                ErrorCode::RateLimited => 8,
                ErrorCode::TokenRequired => 9,
                ErrorCode::BadToken => 10,
                ErrorCode::Forbidden => 11,
                ErrorCode::BodyTooLarge => 12,
                ErrorCode::TooManyLinks => 13,
                ErrorCode::BadJson => 14,
                ErrorCode::BadBody => 15,
                ErrorCode::BadCsv => 16,
                ErrorCode::UnsupportedMediaType => 17,
                ErrorCode::StoreUnavailable => 18,
                ErrorCode::NotReplicated => 19,
                ErrorCode::WrongHost => 20,
                ErrorCode::QrBusy => 21,
                ErrorCode::QrFailed => 22,
                ErrorCode::UnknownDomain => 23,
                ErrorCode::DomainNotAllowed => 24,
                ErrorCode::BadRule => 25,
            };
            assert_eq!(
                ErrorCode::ALL[index],
                code,
                "ALL lists each code once, in order"
            );
        }
    }

    #[test]
    fn codes_are_kebab_case() {
        assert_eq!(ErrorCode::KeyTaken.as_str(), "key-taken");
        assert_eq!(
            ErrorCode::UnsupportedMediaType.as_str(),
            "unsupported-media-type"
        );
        for code in ErrorCode::ALL {
            let name = code.as_str();
            assert!(!name.is_empty());
            assert!(
                name.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{name}"
            );
        }
    }
}
