//! Bearer tokens: who may create links without a rate limit, and who may
//! create them at all where a token is required.

use actix_web::http::header;
use actix_web::HttpRequest;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Refusal;
use crate::config::Settings;

/// The configured tokens, kept only as digests.
pub struct AccessTokens {
    /// SHA-256 of each token: comparing digests takes the same time whatever
    /// the length or content of what was sent.
    digests: Vec<[u8; 32]>,
    required: bool,
}

impl AccessTokens {
    pub fn new(settings: &Settings) -> Self {
        Self {
            digests: settings
                .config
                .access
                .tokens
                .iter()
                .map(|t| digest(t.expose()))
                .collect(),
            required: settings.token_required(),
        }
    }

    /// Whether creating a link needs a token.
    pub fn required(&self) -> bool {
        self.required
    }

    pub fn is_valid(&self, token: &str) -> bool {
        let presented = digest(token);
        self.digests
            .iter()
            .fold(subtle::Choice::from(0), |found, known| {
                found | known.ct_eq(&presented)
            })
            .into()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The token of an `Authorization: Bearer` header; an Authorization header of
/// another kind is refused rather than ignored.
pub fn bearer(request: &HttpRequest) -> Result<Option<&str>, Refusal> {
    let Some(value) = request.headers().get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().map_err(|_| Refusal::TokenInvalid)?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => Ok(Some(token.trim())),
        _ => Err(Refusal::TokenInvalid),
    }
}
