//! Who may create links, and how often: bearer tokens, a per-client rate
//! limit, and the web form's protection against cross-site requests.

use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};

use actix_web::http::header;
use actix_web::HttpRequest;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use url::Url;

use crate::config::Settings;

/// Name of the cookie that pairs a browser with the form tokens it gets.
pub const CSRF_COOKIE: &str = "shortlink_csrf";

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A token is required and none was sent.
    TokenMissing,
    /// A token was sent and matches none configured.
    TokenInvalid,
    /// The client used up its links for now.
    RateLimited { retry_after_s: u64 },
    /// The form was posted from another site, or with a missing or stale
    /// form token.
    CrossSite(&'static str),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TokenMissing => f.write_str(
                "creating links here needs an access token: send it as Authorization: Bearer <token>",
            ),
            Self::TokenInvalid => {
                f.write_str("the access token is not valid; check it with whoever runs this shortener")
            }
            Self::RateLimited { retry_after_s } => write!(
                f,
                "too many links from your address; try again in {retry_after_s} s, or use an access token"
            ),
            Self::CrossSite(why) => f.write_str(why),
        }
    }
}

/// Who is creating a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// Sent a valid token: never rate limited.
    TokenHolder,
    /// Anonymous, within its rate limit.
    Anonymous,
}

/// Checks every request that creates a link. One per writer, shared by all
/// workers.
pub struct Guard {
    /// SHA-256 of each token: comparing digests takes the same time whatever
    /// the length or content of what was sent.
    token_digests: Vec<[u8; 32]>,
    token_required: bool,
    limiter: Option<DefaultKeyedRateLimiter<IpAddr>>,
    trust_forwarded_for: bool,
    checks: AtomicU32,
    /// Signs form tokens; new at every start, so a restart expires open forms.
    form_key: [u8; 32],
}

impl Guard {
    pub fn new(settings: &Settings) -> Result<Self, String> {
        let config = &settings.config;
        let limiter = NonZeroU32::new(config.rate_limit.links_per_minute).map(|per_minute| {
            let burst = NonZeroU32::new(config.rate_limit.burst).unwrap_or(NonZeroU32::MIN);
            RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst))
        });
        Ok(Self {
            token_digests: config
                .access
                .tokens
                .iter()
                .map(|t| digest(t.expose()))
                .collect(),
            token_required: settings.token_required(),
            limiter,
            trust_forwarded_for: config.rate_limit.trust_forwarded_for,
            checks: AtomicU32::new(0),
            form_key: random_bytes()?,
        })
    }

    /// Whether the form must ask for a token.
    pub fn token_required(&self) -> bool {
        self.token_required
    }

    /// Admits a request that creates a link, or says why not. `form_token`
    /// is the token typed into the web form, if any.
    pub fn admit(
        &self,
        request: &HttpRequest,
        form_token: Option<&str>,
    ) -> Result<Caller, Refusal> {
        let presented = match bearer(request)? {
            Some(token) => Some(token),
            None => form_token.map(str::trim).filter(|t| !t.is_empty()),
        };
        if let Some(token) = presented {
            return if self.is_valid(token) {
                Ok(Caller::TokenHolder)
            } else {
                Err(Refusal::TokenInvalid)
            };
        }
        if self.token_required {
            return Err(Refusal::TokenMissing);
        }
        let Some(limiter) = &self.limiter else {
            return Ok(Caller::Anonymous);
        };
        let Some(client) = self.client_address(request).map(client_key) else {
            return Ok(Caller::Anonymous);
        };
        // Forget clients whose buckets are full again, now and then, so the
        // table stays as small as the set of recent clients.
        if self.checks.fetch_add(1, Ordering::Relaxed) % 4096 == 4095 {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        limiter
            .check_key(&client)
            .map(|()| Caller::Anonymous)
            .map_err(|not_until| {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                Refusal::RateLimited {
                    retry_after_s: wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
                }
            })
    }

    /// The connection's address, or behind a trusted local proxy the last
    /// address in `X-Forwarded-For`: the one that proxy appended.
    fn client_address(&self, request: &HttpRequest) -> Option<IpAddr> {
        let peer = request.peer_addr()?.ip();
        if !(self.trust_forwarded_for && peer.is_loopback()) {
            return Some(peer);
        }
        let forwarded = request
            .headers()
            .get_all("x-forwarded-for")
            .last()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .and_then(|v| v.trim().parse().ok());
        Some(forwarded.unwrap_or(peer))
    }

    fn is_valid(&self, token: &str) -> bool {
        let presented = digest(token);
        self.token_digests
            .iter()
            .fold(subtle::Choice::from(0), |found, known| {
                found | known.ct_eq(&presented)
            })
            .into()
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

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The token of an `Authorization: Bearer` header; an Authorization header of
/// another kind is refused rather than ignored.
fn bearer(request: &HttpRequest) -> Result<Option<&str>, Refusal> {
    let Some(value) = request.headers().get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().map_err(|_| Refusal::TokenInvalid)?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => Ok(Some(token.trim())),
        _ => Err(Refusal::TokenInvalid),
    }
}

/// The rate limit's key for a client: its IPv4 address, or the /64 of its
/// IPv6 address, since one IPv6 host usually holds a whole /64.
fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or_else(
            || {
                let [a, b, c, d, ..] = v6.segments();
                IpAddr::V6(Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0))
            },
            IpAddr::V4,
        ),
        v4 @ IpAddr::V4(_) => v4,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{AccessToken, Config};
    use actix_web::test::TestRequest;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    fn guard(edit: impl FnOnce(&mut Config)) -> Guard {
        let mut config = Config::default();
        edit(&mut config);
        Guard::new(&Settings::new(config).unwrap()).unwrap()
    }

    fn from(ip: &str) -> TestRequest {
        TestRequest::default().peer_addr(format!("{ip}:40000").parse().unwrap())
    }

    #[test]
    fn tokens_admit_and_bypass_the_limit() {
        let guard = guard(|c| {
            c.access.tokens = vec![AccessToken::new(TOKEN)];
            c.rate_limit.burst = 1;
        });
        let with = |value: &str| {
            from("192.0.2.1")
                .insert_header((header::AUTHORIZATION, value.to_owned()))
                .to_http_request()
        };
        for _ in 0..5 {
            assert_eq!(
                guard.admit(&with(&format!("Bearer {TOKEN}")), None),
                Ok(Caller::TokenHolder)
            );
        }
        assert_eq!(
            guard.admit(&with(&format!("bearer {TOKEN}")), None),
            Ok(Caller::TokenHolder)
        );
        for bad in [
            &format!("Bearer {TOKEN}x"),
            "Bearer ",
            "Basic dXNlcjpwYXNz",
            TOKEN,
        ] {
            assert_eq!(
                guard.admit(&with(bad), None),
                Err(Refusal::TokenInvalid),
                "{bad}"
            );
        }
        let request = from("192.0.2.1").to_http_request();
        assert_eq!(guard.admit(&request, Some(TOKEN)), Ok(Caller::TokenHolder));
        assert_eq!(
            guard.admit(&request, Some("nope")),
            Err(Refusal::TokenInvalid)
        );
    }

    #[test]
    fn a_required_token_must_be_sent() {
        let guard = guard(|c| {
            c.access.tokens = vec![AccessToken::new(TOKEN)];
            c.access.require_token = true;
        });
        let request = from("127.0.0.1").to_http_request();
        assert_eq!(guard.admit(&request, None), Err(Refusal::TokenMissing));
        assert_eq!(guard.admit(&request, Some("")), Err(Refusal::TokenMissing));
        assert_eq!(guard.admit(&request, Some(TOKEN)), Ok(Caller::TokenHolder));
    }

    #[test]
    fn each_client_gets_its_own_bucket() {
        let guard = guard(|c| {
            c.rate_limit.links_per_minute = 6;
            c.rate_limit.burst = 3;
        });
        let first = from("192.0.2.1").to_http_request();
        for _ in 0..3 {
            assert_eq!(guard.admit(&first, None), Ok(Caller::Anonymous));
        }
        // 6 a minute: the next one in 10 s.
        let refusal = guard.admit(&first, None);
        assert!(
            matches!(
                refusal,
                Err(Refusal::RateLimited {
                    retry_after_s: 1..=10
                })
            ),
            "{refusal:?}"
        );
        assert_eq!(
            guard.admit(&from("192.0.2.2").to_http_request(), None),
            Ok(Caller::Anonymous)
        );
        // One IPv6 /64 is one client.
        for _ in 0..3 {
            assert!(guard
                .admit(&from("[2001:db8::1]").to_http_request(), None)
                .is_ok());
        }
        assert!(guard
            .admit(&from("[2001:db8::2]").to_http_request(), None)
            .is_err());
        assert!(guard
            .admit(&from("[2001:db8:0:1::1]").to_http_request(), None)
            .is_ok());
    }

    #[test]
    fn a_trusted_local_proxy_names_the_client() {
        let guard = guard(|c| {
            c.rate_limit.burst = 1;
            c.rate_limit.trust_forwarded_for = true;
        });
        let via_proxy = |client: &str| {
            from("127.0.0.1")
                .insert_header(("x-forwarded-for", format!("203.0.113.9, {client}")))
                .to_http_request()
        };
        assert!(guard.admit(&via_proxy("198.51.100.1"), None).is_ok());
        assert!(guard.admit(&via_proxy("198.51.100.1"), None).is_err());
        assert!(guard.admit(&via_proxy("198.51.100.2"), None).is_ok());
        // Only a loopback peer is trusted to say who the client is.
        let direct = |claimed: &str| {
            from("192.0.2.1")
                .insert_header(("x-forwarded-for", claimed.to_owned()))
                .to_http_request()
        };
        assert!(guard.admit(&direct("198.51.100.3"), None).is_ok());
        assert!(guard.admit(&direct("198.51.100.4"), None).is_err());
    }

    #[test]
    fn no_limit_when_turned_off() {
        let guard = guard(|c| c.rate_limit.links_per_minute = 0);
        let request = from("192.0.2.1").to_http_request();
        for _ in 0..1000 {
            assert_eq!(guard.admit(&request, None), Ok(Caller::Anonymous));
        }
    }

    #[test]
    fn form_posts_must_come_from_this_site_with_a_matching_token() {
        let guard = guard(|_| {});
        let cookie = new_form_cookie().unwrap();
        let token = guard.form_token(&cookie);
        let post = |headers: &[(&str, &str)], cookie: &str| {
            let mut request = TestRequest::post()
                .insert_header((header::HOST, "short.example:8080"))
                .cookie(actix_web::cookie::Cookie::new(
                    CSRF_COOKIE,
                    cookie.to_owned(),
                ));
            for (name, value) in headers {
                request = request.insert_header((*name, *value));
            }
            request.to_http_request()
        };
        let fine: [&[(&str, &str)]; 4] = [
            &[("sec-fetch-site", "same-origin")],
            &[("sec-fetch-site", "none")],
            &[("origin", "http://short.example:8080")],
            &[],
        ];
        for headers in fine {
            assert_eq!(
                guard.check_form_post(&post(headers, &cookie), &token),
                Ok(()),
                "{headers:?}"
            );
        }
        let cross: [&[(&str, &str)]; 5] = [
            &[("sec-fetch-site", "cross-site")],
            &[("sec-fetch-site", "same-site")],
            &[("origin", "http://evil.example")],
            &[("origin", "http://short.example:9999")],
            &[("origin", "null")],
        ];
        for headers in cross {
            assert!(
                guard
                    .check_form_post(&post(headers, &cookie), &token)
                    .is_err(),
                "{headers:?}"
            );
        }
        assert!(is_form_cookie(&cookie));
        assert!(!is_form_cookie(&cookie[1..]) && !is_form_cookie(&format!("{cookie}=")));
        let other = new_form_cookie().unwrap();
        assert!(guard.check_form_post(&post(&[], &other), &token).is_err());
        assert!(guard.check_form_post(&post(&[], &cookie), "").is_err());
        assert!(guard
            .check_form_post(&post(&[], &cookie), &guard.form_token(&other))
            .is_err());
        let no_cookie = TestRequest::post()
            .insert_header((header::HOST, "h"))
            .to_http_request();
        assert!(guard.check_form_post(&no_cookie, &token).is_err());
    }
}
