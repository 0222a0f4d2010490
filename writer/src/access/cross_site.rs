//! The web form's protection against cross-site requests: Fetch Metadata
//! or `Origin`, and a form token bound to a cookie by an HMAC.

use actix_web::http::header;
use actix_web::HttpRequest;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use url::Url;

use super::Refusal;
use crate::config::Settings;

/// Name of the cookie that pairs a browser with the form tokens it gets.
pub const CSRF_COOKIE: &str = "shortlink_csrf";

/// Signs and checks form tokens.
pub struct FormProtection {
    /// Signs form tokens: the one every writer of the same Redis shares.
    form_key: [u8; FORM_KEY_BYTES],
}

const FORM_KEY_BYTES: usize = 32;

impl FormProtection {
    /// Takes the form key every writer of the store shares, stored in
    /// Redis by the first one to start; a key of its own if Redis cannot
    /// be asked, so that the writer still starts.
    pub fn new(settings: &Settings) -> Result<Self, String> {
        let fresh = random_bytes()?;
        let form_key = shared_form_key(settings, &fresh).unwrap_or_else(|error| {
            log::warn!(
                "the web form's key could not be shared through Redis ({error}): this \
                 writer signs forms with a key of its own, so behind a load balancer a form \
                 it serves must be posted back to it, until it restarts with Redis reachable"
            );
            fresh
        });
        Ok(Self { form_key })
    }

    /// The form token for the browser holding `cookie`.
    pub fn form_token(&self, cookie: &str) -> String {
        let mut mac = self.form_mac();
        mac.update(cookie.as_bytes());
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    }

    /// Refuses a form post that comes from another site, or whose form token
    /// does not belong to the browser's cookie.
    pub fn check_form_post(&self, request: &HttpRequest, form_token: &str) -> Result<(), Refusal> {
        check_same_origin(request)?;
        let cookie = request.cookie(CSRF_COOKIE).ok_or(Refusal::CrossSite(
            "this form needs a cookie to prove it came from this site: allow cookies \
             for this site and submit it again",
        ))?;
        let stale = Refusal::CrossSite(
            "this form has expired or was sent from another page; submit it again",
        );
        let signature = URL_SAFE_NO_PAD
            .decode(form_token)
            .map_err(|_| stale.clone())?;
        let mut mac = self.form_mac();
        mac.update(cookie.value().as_bytes());
        mac.verify_slice(&signature).map_err(|_| stale)
    }

    fn form_mac(&self) -> Hmac<Sha256> {
        <Hmac<Sha256> as Mac>::new_from_slice(&self.form_key)
            .expect("HMAC takes keys of any length")
    }
}

/// The key under [`KeyScheme::form_key`](shortlink_core::KeyScheme::form_key),
/// set to `fresh` if none is there yet.
fn shared_form_key(
    settings: &Settings,
    fresh: &[u8; FORM_KEY_BYTES],
) -> Result<[u8; FORM_KEY_BYTES], String> {
    let mut connection = crate::redis::master::connect_to_links_redis(settings)?;
    let name = settings.scheme.form_key();
    let fresh_text = URL_SAFE_NO_PAD.encode(fresh);
    // One command, which a cluster connection takes as well: the key there
    // before, or none if `fresh` was set.
    let before: Option<String> = redis::cmd("SET")
        .arg(&name)
        .arg(&fresh_text)
        .arg("NX")
        .arg("GET")
        .query(connection.as_mut())
        .map_err(|e| e.to_string())?;
    let stored = before.unwrap_or(fresh_text);
    URL_SAFE_NO_PAD
        .decode(&stored)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| format!("{name} holds no form key; delete it with redis-cli DEL {name}"))
}

/// Random bytes in a form cookie.
const FORM_COOKIE_BYTES: usize = 32;

/// A new value for the form cookie.
pub fn new_form_cookie() -> Result<String, String> {
    Ok(URL_SAFE_NO_PAD.encode(random_bytes::<FORM_COOKIE_BYTES>()?))
}

/// Whether `value` has the form of a cookie [`new_form_cookie`] makes.
pub fn is_form_cookie(value: &str) -> bool {
    URL_SAFE_NO_PAD
        .decode(value)
        .is_ok_and(|bytes| bytes.len() == FORM_COOKIE_BYTES)
}

fn random_bytes<const N: usize>() -> Result<[u8; N], String> {
    let mut bytes = [0; N];
    getrandom::fill(&mut bytes).map_err(|e| format!("the system has no random numbers: {e}"))?;
    Ok(bytes)
}

/// Fetch Metadata first (current browsers send it to HTTPS and loopback
/// origins), then `Origin` (sent with every cross-origin POST).
fn check_same_origin(request: &HttpRequest) -> Result<(), Refusal> {
    let cross_site = Refusal::CrossSite(
        "links cannot be created from another site's page; use this site's form",
    );
    let headers = request.headers();
    if let Some(site) = headers.get("sec-fetch-site") {
        return match site.as_bytes() {
            b"same-origin" | b"none" => Ok(()),
            _ => Err(cross_site),
        };
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        // Neither header: not a browser, or a very old one; the form token
        // still has to match.
        return Ok(());
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let same = origin
        .to_str()
        .ok()
        .and_then(|o| Url::parse(o).ok())
        .zip(host)
        .is_some_and(|(origin, host)| {
            Url::parse(&format!("{}://{host}", origin.scheme())).is_ok_and(|own| {
                own.host() == origin.host()
                    && own.port_or_known_default() == origin.port_or_known_default()
            })
        });
    if same {
        Ok(())
    } else {
        Err(cross_site)
    }
}
