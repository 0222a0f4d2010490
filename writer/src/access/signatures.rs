//! YOURLS' ways of proving who one is, mapped onto the writer's tokens so
//! that YOURLS' tools sign in as a token's holder:
//!
//! - a token's **signature**: the first 32 hex digits of HMAC-SHA256 of
//!   `yourls-signature`, keyed with the token. It stands for the token in a
//!   URL without being the token, and the token cannot be told from it;
//!   `shortlink yourls-signature` prints it.
//! - the signature **hashed with a timestamp** (`md5`, `sha256`, `sha384`
//!   or `sha512` of `timestamp` followed by the signature, or the other
//!   way round), the timestamp within 12 hours of now: what a URL carries
//!   then is worthless a day later.
//! - the token's **name and the token itself** as `username` and
//!   `password`.

use hmac::{Hmac, Mac};
use md5::Md5;
use sha2::{Digest, Sha256, Sha384, Sha512};
use subtle::ConstantTimeEq;

use crate::access::tokens::Identity;
use crate::config::Settings;

/// How far a signed timestamp may be from now, either way (YOURLS'
/// `YOURLS_NONCE_LIFE`).
pub const TIMESTAMP_WINDOW_S: u64 = 12 * 3600;

/// A token's YOURLS signature.
pub fn yourls_signature(token: &str) -> String {
    // HMAC takes a key of any length: the error cannot happen.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(token.as_bytes()) else {
        return String::new();
    };
    mac.update(b"yourls-signature");
    // 16 bytes: 32 hex digits.
    let digest = mac.finalize().into_bytes();
    hex(digest.get(..16).unwrap_or_default())
}

/// Every token's signature, with who holds it.
pub struct Signatures {
    known: Vec<(String, Identity)>,
}

/// Why a YOURLS sign-in was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInError {
    /// No signature, or one no token has.
    Unknown,
    /// A `hash` other than md5, sha256, sha384 and sha512.
    UnknownHash,
    /// A timestamp further than 12 hours from now, or none.
    Stale,
}

impl Signatures {
    pub fn new(settings: &Settings, identify: impl Fn(&str) -> Option<Identity>) -> Self {
        let known = settings
            .config
            .access
            .tokens
            .iter()
            .filter_map(|token| {
                let holder = identify(token.expose())?;
                Some((yourls_signature(token.expose()), holder))
            })
            .collect();
        Self { known }
    }

    /// Who a plain signature is of.
    pub fn identify(&self, signature: &str) -> Option<Identity> {
        let mut found = None;
        for (known, identity) in &self.known {
            if bool::from(known.as_bytes().ct_eq(signature.as_bytes())) {
                found = Some(identity.clone());
            }
        }
        found
    }

    /// Who signed `timestamp` (Unix seconds, as sent) into `signature` with
    /// `hash` (`md5` when none is named), at `now`.
    pub fn identify_timed(
        &self,
        timestamp: &str,
        signature: &str,
        hash: Option<&str>,
        now: u64,
    ) -> Result<Identity, SignInError> {
        let at: u64 = timestamp.parse().map_err(|_| SignInError::Stale)?;
        if at.abs_diff(now) >= TIMESTAMP_WINDOW_S {
            return Err(SignInError::Stale);
        }
        let digest = |text: &str| -> Result<String, SignInError> {
            let bytes = text.as_bytes();
            Ok(match hash.unwrap_or("md5") {
                "md5" => hex(&Md5::digest(bytes)),
                "sha256" => hex(&Sha256::digest(bytes)),
                "sha384" => hex(&Sha384::digest(bytes)),
                "sha512" => hex(&Sha512::digest(bytes)),
                _ => return Err(SignInError::UnknownHash),
            })
        };
        let mut found = None;
        for (known, identity) in &self.known {
            for signed in [
                digest(&format!("{timestamp}{known}"))?,
                digest(&format!("{known}{timestamp}"))?,
            ] {
                if bool::from(signed.as_bytes().ct_eq(signature.as_bytes())) {
                    found = Some(identity.clone());
                }
            }
        }
        found.ok_or(SignInError::Unknown)
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_core::Owner;

    fn signatures() -> Signatures {
        let identity = Identity {
            owner: Owner::try_from("alice").unwrap(),
            admin: false,
            domains: None,
        };
        Signatures {
            known: vec![(yourls_signature("a-token-of-alice"), identity)],
        }
    }

    #[test]
    fn a_signature_stands_for_its_token_alone() {
        let signature = yourls_signature("a-token-of-alice");
        assert_eq!(signature.len(), 32);
        assert_ne!(signature, yourls_signature("a-token-of-bob"));
        assert!(signatures().identify(&signature).is_some());
        assert!(signatures().identify(&signature[..31]).is_none());
        assert!(signatures().identify("a-token-of-alice").is_none());
    }

    #[test]
    fn a_timestamp_is_signed_either_way_round_within_twelve_hours() {
        let signature = yourls_signature("a-token-of-alice");
        let now = 1_767_225_600;
        let at = (now - 3600).to_string();
        let md5 = hex(&Md5::digest(format!("{at}{signature}").as_bytes()));
        let sha = hex(&Sha512::digest(format!("{signature}{at}").as_bytes()));
        let known = signatures();
        assert!(known.identify_timed(&at, &md5, None, now).is_ok());
        assert!(known.identify_timed(&at, &sha, Some("sha512"), now).is_ok());
        assert_eq!(
            known
                .identify_timed(&at, &md5, Some("sha256"), now)
                .unwrap_err(),
            SignInError::Unknown
        );
        assert_eq!(
            known
                .identify_timed(&at, &md5, Some("crc32b"), now)
                .unwrap_err(),
            SignInError::UnknownHash
        );
        let old = (now - TIMESTAMP_WINDOW_S).to_string();
        let stale = hex(&Md5::digest(format!("{old}{signature}").as_bytes()));
        assert_eq!(
            known.identify_timed(&old, &stale, None, now).unwrap_err(),
            SignInError::Stale
        );
    }
}
