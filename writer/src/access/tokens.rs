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

/// Who holds a valid token: the owner its links record, whether it may
/// change every link, and the short domains it may act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub owner: Owner,
    pub admin: bool,
    /// The canonical names of the only domains it may act on; `None`: every
    /// domain (always for an admin).
    pub domains: Option<Vec<String>>,
}

impl Identity {
    /// A holder of every right on every domain: the command line's
    /// operator, say.
    pub fn admin(owner: Owner) -> Self {
        Self {
            owner,
            admin: true,
            domains: None,
        }
    }

    /// Whether this holder may change a link created by `owner` (`None`: by
    /// nobody with a token, or by hand).
    pub fn may_change(&self, owner: Option<&Owner>) -> bool {
        self.admin || owner == Some(&self.owner)
    }

    /// Whether this holder may act on the domain named `domain` (its
    /// canonical name).
    pub fn may_use(&self, domain: &str) -> bool {
        self.admin
            || self
                .domains
                .as_ref()
                .is_none_or(|domains| domains.iter().any(|allowed| allowed == domain))
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
                // Kept by canonical name: a request names a domain by any.
                let domains = token
                    .domains()
                    .iter()
                    .map(|name| {
                        settings
                            .domain(Some(name))
                            .map(|domain| domain.name.clone())
                            .map_err(|e| e.to_string())
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                let identity = Identity {
                    owner: token.owner().map_err(|e| e.to_string())?,
                    admin: token.is_admin(),
                    domains: (!domains.is_empty()).then_some(domains),
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
