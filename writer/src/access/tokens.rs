//! Bearer tokens: who may create links without a rate limit, who may
//! create them at all where a token is required, and whose links a caller
//! may change.

use actix_web::http::header;
use actix_web::HttpRequest;
use sha2::{Digest, Sha256};
use shortlink_core::Owner;
use subtle::ConstantTimeEq;

use super::Refusal;
use crate::config::Settings;

/// Who holds a valid token: the owner its links record, and whether it may
/// change every link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub owner: Owner,
    pub admin: bool,
}

impl Identity {
    /// Whether this holder may change a link created by `owner` (`None`: by
    /// nobody with a token, or by hand).
    pub fn may_change(&self, owner: Option<&Owner>) -> bool {
        self.admin || owner == Some(&self.owner)
    }
}

/// The configured tokens, kept only as digests.
pub struct AccessTokens {
    /// SHA-256 of each token, with who holds it: comparing digests takes
    /// the same time whatever the length or content of what was sent.
    known: Vec<([u8; 32], Identity)>,
    required: bool,
}

impl AccessTokens {
    /// The configuration has checked every name.
    pub fn new(settings: &Settings) -> Result<Self, String> {
        let known = settings
            .config
            .access
            .tokens
            .iter()
            .map(|token| {
                let identity = Identity {
                    owner: token.owner().map_err(|e| e.to_string())?,
                    admin: token.is_admin(),
                };
                Ok((digest(token.expose()), identity))
            })
            .collect::<Result<_, String>>()?;
        Ok(Self {
            known,
            required: settings.token_required(),
        })
    }

    /// Whether creating a link needs a token.
    pub fn required(&self) -> bool {
        self.required
    }

    /// Who holds `token`, if anyone. Every known digest is compared, so the
    /// time taken says nothing of which one matched.
    pub fn identify(&self, token: &str) -> Option<Identity> {
        let presented = digest(token);
        let mut found = None;
        for (known, identity) in &self.known {
            if bool::from(known.ct_eq(&presented)) {
                found = Some(identity.clone());
            }
        }
        found
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
