//! What can go wrong with a link: [`ShortenError`], typed, with the
//! [`ErrorCode`] and the input to blame each failure is told with. The HTTP
//! layer (`web/error.rs`) answers a code with its status.

use crate::config::UnknownDomain;
use crate::error_code::ErrorCode;
use crate::links::rules::BadRule;
use crate::links::store::StoreError;
use crate::links::validate::{Field, Invalid};

#[derive(Debug, thiserror::Error)]
pub enum ShortenError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("there is no link with the key {0:?}")]
    NotFound(String),
    #[error("the link {0:?} was deleted; its key is never given to another link")]
    Gone(String),
    #[error(
        "this link was created with another access token; only that token or an \
         admin token may change it"
    )]
    NotYours,
    #[error(
        "the link changed since it was read (its ETag is now {current}); read it again \
         and make the change on what it holds now"
    )]
    Stale { current: String },
    #[error(transparent)]
    UnknownDomain(#[from] UnknownDomain),
    #[error(
        "this access token is limited to other short domains than {0:?}; use a token \
         allowed on it (or an admin token), or name one of the token's domains"
    )]
    DomainNotAllowed(String),
    #[error(
        "changing the redirects of {0:?} takes an admin token, or a token limited to \
         that domain: they answer for everyone's visits there"
    )]
    NotDomainAdmin(String),
    #[error(transparent)]
    BadRule(#[from] BadRule),
}

impl ShortenError {
    /// The one map from a failure to what the client is told: its code
    /// (the HTTP layer answers each code with its status) and the input to
    /// blame (none when the store failed). The JSON API, the form and bulk
    /// rows all answer through it.
    pub fn code_and_field(&self) -> (ErrorCode, Option<Field>) {
        match self {
            Self::Invalid(invalid) => (ErrorCode::InvalidInput, Some(invalid.field)),
            Self::Store(StoreError::KeyTaken { .. }) => (ErrorCode::KeyTaken, Some(Field::Key)),
            Self::Store(StoreError::DigestExhausted) => {
                (ErrorCode::DigestExhausted, Some(Field::Url))
            }
            Self::Store(StoreError::Unreadable { .. }) => (ErrorCode::UnreadableValue, None),
            Self::Store(StoreError::Unavailable(_)) => (ErrorCode::StoreUnavailable, None),
            Self::Store(StoreError::NotReplicated { .. }) => (ErrorCode::NotReplicated, None),
            Self::NotFound(_) => (ErrorCode::NotFound, None),
            Self::Gone(_) => (ErrorCode::Gone, None),
            Self::NotYours => (ErrorCode::NotOwner, None),
            Self::Stale { .. } => (ErrorCode::Stale, None),
            Self::UnknownDomain(_) => (ErrorCode::UnknownDomain, Some(Field::Domain)),
            Self::DomainNotAllowed(_) => (ErrorCode::DomainNotAllowed, Some(Field::Domain)),
            Self::NotDomainAdmin(_) => (ErrorCode::Forbidden, Some(Field::Domain)),
            Self::BadRule(bad) => (ErrorCode::BadRule, Some(bad.field())),
        }
    }

    /// What a client is told about this failure, by the JSON API, the form
    /// and each row of a bulk insert alike: its code, the input to blame,
    /// and the message. Failures on this side are logged too.
    pub fn answer(&self) -> (ErrorCode, Option<Field>, String) {
        let (code, field) = self.code_and_field();
        let message = self.to_string();
        if code.is_server_error() {
            log::error!("{message}");
        }
        (code, field, message)
    }
}
