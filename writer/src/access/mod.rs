//! Who may create links, and how often: bearer tokens ([`tokens`]), a
//! per-client rate limit ([`rate_limit`]), and the web form's protection
//! against cross-site requests ([`cross_site`]).

mod cross_site;
mod rate_limit;
mod signatures;
mod tokens;

use actix_web::HttpRequest;

pub use cross_site::{is_form_cookie, new_form_cookie, CSRF_COOKIE};
pub use signatures::{yourls_signature, SignInError};
pub use tokens::Identity;

use crate::config::Settings;
use cross_site::FormProtection;
use rate_limit::{RateLimit, Spending};
use signatures::Signatures;
use tokens::{bearer, AccessTokens};

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
                "creating or changing links here needs an access token: send it as \
                 Authorization: Bearer <token>",
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// Sent a valid token: never rate limited; the link records its owner.
    TokenHolder(Identity),
    /// Anonymous, within its rate limit.
    Anonymous,
}

impl Caller {
    /// Whom a link this caller creates belongs to: its token's name, or
    /// nobody (then only admins may change it).
    #[must_use]
    pub fn owner(self) -> Option<shortlink_core::Owner> {
        match self {
            Self::TokenHolder(identity) => Some(identity.owner),
            Self::Anonymous => None,
        }
    }
}

/// What a request that creates links may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    pub caller: Caller,
    /// How many of its links, the first ones, may be created.
    pub rows: usize,
    /// Why the others may not.
    pub refusal: Option<Refusal>,
}

/// The bearer token a request carries, if any.
pub fn bearer_token(request: &HttpRequest) -> Option<String> {
    bearer(request).ok().flatten().map(str::to_owned)
}

/// What a YOURLS tool signs in with, in the order YOURLS tries them: one
/// alone is tried, never another after it fails.
#[derive(Debug, Clone, Copy)]
pub enum YourlsSignIn<'a> {
    Timed {
        timestamp: &'a str,
        signature: &'a str,
        hash: Option<&'a str>,
    },
    Signature(&'a str),
    Password {
        username: &'a str,
        password: &'a str,
    },
}

/// Checks every request that creates a link. One per writer, shared by all
/// workers.
pub struct Gatekeeper {
    tokens: AccessTokens,
    /// The tokens' YOURLS signatures.
    signatures: Signatures,
    rate_limit: Option<RateLimit>,
    /// The same limit for QR code PNGs, with buckets of their own.
    image_limit: Option<RateLimit>,
    form: FormProtection,
}

impl Gatekeeper {
    pub fn new(settings: &Settings) -> Result<Self, String> {
        let tokens = AccessTokens::new(settings)?;
        Ok(Self {
            signatures: Signatures::new(settings, |token| tokens.identify(token)),
            tokens,
            rate_limit: RateLimit::new(settings, Spending::Links)?,
            image_limit: RateLimit::new(settings, Spending::Images)?,
            form: FormProtection::new(settings)?,
        })
    }

    /// Whether the form must ask for a token.
    pub fn token_required(&self) -> bool {
        self.tokens.required()
    }

    /// Admits a request that creates a link, or says why not. `form_token`
    /// is the token typed into the web form, if any.
    pub async fn admit(
        &self,
        request: &HttpRequest,
        form_token: Option<&str>,
    ) -> Result<Caller, Refusal> {
        let caller = self.caller(request, form_token)?;
        let admitted = self.spend(request, caller, 1).await;
        match admitted.refusal {
            Some(refusal) => Err(refusal),
            None => Ok(admitted.caller),
        }
    }

    /// Who creates links with this request: the holder of its bearer token
    /// (or of `form_token`, typed into the web form), or an anonymous client
    /// where tokens are not required. A token that is not valid is refused,
    /// never taken as anonymous. Spends nothing.
    pub fn caller(
        &self,
        request: &HttpRequest,
        form_token: Option<&str>,
    ) -> Result<Caller, Refusal> {
        let presented = match bearer(request)? {
            Some(token) => Some(token),
            None => form_token.map(str::trim).filter(|t| !t.is_empty()),
        };
        if let Some(token) = presented {
            return self
                .tokens
                .identify(token)
                .map(Caller::TokenHolder)
                .ok_or(Refusal::TokenInvalid);
        }
        if self.tokens.required() {
            return Err(Refusal::TokenMissing);
        }
        Ok(Caller::Anonymous)
    }

    /// How many of `rows` links `caller` may create now, the first ones: a
    /// token holder's all, an anonymous client's as many as its rate limit
    /// holds, taken from it in one step however many.
    pub async fn spend(&self, request: &HttpRequest, caller: Caller, rows: usize) -> Admitted {
        let limit = self
            .rate_limit
            .as_ref()
            .filter(|_| caller == Caller::Anonymous && rows > 0);
        let Some(limit) = limit else {
            return Admitted {
                caller,
                rows,
                refusal: None,
            };
        };
        let (admitted, refusal) = limit.take(request, rows).await;
        Admitted {
            caller,
            rows: admitted,
            refusal,
        }
    }

    /// Takes one image from the client's own bucket of images (as many as
    /// its links, apart from them) before a QR code is drawn for it; a
    /// token holder's are never limited. A token that is not valid is
    /// refused, never taken as anonymous.
    pub async fn spend_image(&self, request: &HttpRequest) -> Result<(), Refusal> {
        if self.identify_if_sent(request)?.is_some() {
            return Ok(());
        }
        let Some(limit) = &self.image_limit else {
            return Ok(());
        };
        match limit.take(request, 1).await {
            (_, Some(refusal)) => Err(refusal),
            (_, None) => Ok(()),
        }
    }

    /// Who sent the request's bearer token, if it sent one: `None` for an
    /// anonymous request, a refusal for a token that is not valid.
    pub fn identify_if_sent(&self, request: &HttpRequest) -> Result<Option<Identity>, Refusal> {
        match bearer(request)? {
            None => Ok(None),
            Some(token) => self
                .tokens
                .identify(token)
                .map(Some)
                .ok_or(Refusal::TokenInvalid),
        }
    }

    /// Who sent the request's bearer token: changing a link always needs
    /// one, wherever the writer listens.
    pub fn identify(&self, request: &HttpRequest) -> Result<Identity, Refusal> {
        let token = bearer(request)?.ok_or(Refusal::TokenMissing)?;
        self.tokens.identify(token).ok_or(Refusal::TokenInvalid)
    }

    /// Who holds `token`, sent some other way than as a bearer token (as
    /// Shlink's `X-Api-Key`): the same tokens, owners and limits.
    pub fn identify_key(&self, token: &str) -> Result<Identity, Refusal> {
        self.tokens.identify(token).ok_or(Refusal::TokenInvalid)
    }

    /// Who a YOURLS tool signed in as: a token's signature, that signature
    /// hashed with a timestamp near `now`, or a token's name and the token.
    pub fn identify_yourls(
        &self,
        sign_in: &YourlsSignIn<'_>,
        now: u64,
    ) -> Result<Identity, SignInError> {
        match sign_in {
            YourlsSignIn::Timed {
                timestamp,
                signature,
                hash,
            } => self
                .signatures
                .identify_timed(timestamp, signature, *hash, now),
            YourlsSignIn::Signature(signature) => self
                .signatures
                .identify(signature)
                .ok_or(SignInError::Unknown),
            YourlsSignIn::Password { username, password } => self
                .tokens
                .identify(password)
                .filter(|who| who.owner.as_str() == *username)
                .ok_or(SignInError::Unknown),
        }
    }

    /// The form token for the browser holding `cookie`.
    pub fn form_token(&self, cookie: &str) -> String {
        self.form.form_token(cookie)
    }

    /// Refuses a form post that comes from another site, or whose form token
    /// does not belong to the browser's cookie.
    pub fn check_form_post(&self, request: &HttpRequest, form_token: &str) -> Result<(), Refusal> {
        self.form.check_form_post(request, form_token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{AccessToken, Config};
    use actix_web::http::header;
    use actix_web::test::TestRequest;
    use shortlink_core::Owner;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";
    const ADMIN_TOKEN: &str = "fedcba9876543210fedcba9876543210";

    /// The holder of `TOKEN`, named after its digest.
    fn holder() -> Caller {
        Caller::TokenHolder(Identity {
            owner: AccessToken::new(TOKEN).owner().unwrap(),
            admin: false,
            domains: None,
        })
    }

    impl Caller {
        fn identity(self) -> Identity {
            match self {
                Caller::TokenHolder(identity) => identity,
                Caller::Anonymous => panic!("anonymous"),
            }
        }
    }

    fn guard(edit: impl FnOnce(&mut Config)) -> Gatekeeper {
        let mut config = Config::default();
        edit(&mut config);
        Gatekeeper::new(&Settings::new(config).unwrap()).unwrap()
    }

    fn from(ip: &str) -> TestRequest {
        TestRequest::default().peer_addr(format!("{ip}:40000").parse().unwrap())
    }

    #[actix_web::test]
    async fn tokens_admit_and_bypass_the_limit() {
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
                guard.admit(&with(&format!("Bearer {TOKEN}")), None).await,
                Ok(holder())
            );
        }
        assert_eq!(
            guard.admit(&with(&format!("bearer {TOKEN}")), None).await,
            Ok(holder())
        );
        for bad in [
            &format!("Bearer {TOKEN}x"),
            "Bearer ",
            "Basic dXNlcjpwYXNz",
            TOKEN,
        ] {
            assert_eq!(
                guard.admit(&with(bad), None).await,
                Err(Refusal::TokenInvalid),
                "{bad}"
            );
        }
        let request = from("192.0.2.1").to_http_request();
        assert_eq!(guard.admit(&request, Some(TOKEN)).await, Ok(holder()));
        assert_eq!(
            guard.admit(&request, Some("nope")).await,
            Err(Refusal::TokenInvalid)
        );
    }

    #[actix_web::test]
    async fn a_required_token_must_be_sent() {
        let guard = guard(|c| {
            c.access.tokens = vec![AccessToken::new(TOKEN)];
            c.access.require_token = true;
        });
        let request = from("127.0.0.1").to_http_request();
        assert_eq!(
            guard.admit(&request, None).await,
            Err(Refusal::TokenMissing)
        );
        assert_eq!(
            guard.admit(&request, Some("")).await,
            Err(Refusal::TokenMissing)
        );
        assert_eq!(guard.admit(&request, Some(TOKEN)).await, Ok(holder()));
    }

    #[test]
    fn changing_needs_a_bearer_token_and_names_its_holder() {
        let guard = guard(|c| {
            c.access.tokens = vec![
                AccessToken::new(TOKEN),
                AccessToken::named("ops", ADMIN_TOKEN, true),
            ];
        });
        let with = |value: &str| {
            from("127.0.0.1")
                .insert_header((header::AUTHORIZATION, value.to_owned()))
                .to_http_request()
        };
        let admin = guard
            .identify(&with(&format!("Bearer {ADMIN_TOKEN}")))
            .unwrap();
        assert_eq!((admin.owner.as_str(), admin.admin), ("ops", true));
        let plain = guard.identify(&with(&format!("Bearer {TOKEN}"))).unwrap();
        assert_eq!(plain, holder().identity());
        // Loopback does not excuse a change from its token.
        assert_eq!(
            guard.identify(&from("127.0.0.1").to_http_request()),
            Err(Refusal::TokenMissing)
        );
        assert_eq!(
            guard.identify(&with("Bearer not-a-token-at-all-0123456789ab")),
            Err(Refusal::TokenInvalid)
        );
        let alice = Owner::try_from("alice").unwrap();
        assert!(admin.may_change(Some(&alice)) && admin.may_change(None));
        assert!(!plain.may_change(Some(&alice)) && !plain.may_change(None));
        assert!(plain.may_change(Some(&plain.owner)));
    }

    #[test]
    fn a_token_limited_to_domains_may_use_those_alone() {
        const SHOP_TOKEN: &str = "00112233445566778899aabbccddeeff";
        let guard = guard(|c| {
            c.domains = vec![crate::config::DomainConfig {
                base_url: "https://go.example/".into(),
                aliases: vec!["www.go.example".into()],
                ..crate::config::DomainConfig::default()
            }];
            c.access.tokens = vec![
                // Named by its alias, in another case: kept by its name.
                AccessToken::named("shop", SHOP_TOKEN, false).limited_to(&["WWW.go.example"]),
                AccessToken::named("ops", ADMIN_TOKEN, true),
                AccessToken::new(TOKEN),
            ];
        });
        let as_holder = |token: &str| {
            let request = from("127.0.0.1")
                .insert_header((header::AUTHORIZATION, format!("Bearer {token}")))
                .to_http_request();
            guard.identify(&request).unwrap()
        };
        let shop = as_holder(SHOP_TOKEN);
        assert_eq!(shop.domains, Some(vec!["go.example".to_owned()]));
        assert!(shop.may_use("go.example") && !shop.may_use("127.0.0.1"));
        for everywhere in [as_holder(ADMIN_TOKEN), as_holder(TOKEN)] {
            assert!(everywhere.may_use("go.example") && everywhere.may_use("127.0.0.1"));
        }
    }

    #[test]
    fn token_domains_must_be_served_and_not_an_admins() {
        let refused = |token: AccessToken| {
            let mut config = Config::default();
            config.access.tokens = vec![token];
            Settings::new(config).unwrap_err().0
        };
        let unknown = refused(AccessToken::named("shop", TOKEN, false).limited_to(&["go.example"]));
        assert!(unknown.contains("not served here"), "{unknown}");
        let admin = refused(AccessToken::named("ops", TOKEN, true).limited_to(&["127.0.0.1"]));
        assert!(admin.contains("remove its domains"), "{admin}");
    }

    #[actix_web::test]
    async fn each_client_gets_its_own_bucket() {
        let guard = guard(|c| {
            c.rate_limit.links_per_minute = 6;
            c.rate_limit.burst = 3;
        });
        let first = from("192.0.2.1").to_http_request();
        for _ in 0..3 {
            assert_eq!(guard.admit(&first, None).await, Ok(Caller::Anonymous));
        }
        // 6 a minute: the next one in 10 s.
        let refusal = guard.admit(&first, None).await;
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
            guard
                .admit(&from("192.0.2.2").to_http_request(), None)
                .await,
            Ok(Caller::Anonymous)
        );
        // One IPv6 /64 is one client.
        for _ in 0..3 {
            assert!(guard
                .admit(&from("[2001:db8::1]").to_http_request(), None)
                .await
                .is_ok());
        }
        assert!(guard
            .admit(&from("[2001:db8::2]").to_http_request(), None)
            .await
            .is_err());
        assert!(guard
            .admit(&from("[2001:db8:0:1::1]").to_http_request(), None)
            .await
            .is_ok());
    }

    #[actix_web::test]
    async fn a_trusted_local_proxy_names_the_client() {
        let guard = guard(|c| {
            c.rate_limit.burst = 1;
            c.rate_limit.trust_forwarded_for = true;
        });
        let via_proxy = |client: &str| {
            from("127.0.0.1")
                .insert_header(("x-forwarded-for", format!("203.0.113.9, {client}")))
                .to_http_request()
        };
        assert!(guard.admit(&via_proxy("198.51.100.1"), None).await.is_ok());
        assert!(guard.admit(&via_proxy("198.51.100.1"), None).await.is_err());
        assert!(guard.admit(&via_proxy("198.51.100.2"), None).await.is_ok());
        // Only a loopback peer is trusted to say who the client is.
        let direct = |claimed: &str| {
            from("192.0.2.1")
                .insert_header(("x-forwarded-for", claimed.to_owned()))
                .to_http_request()
        };
        assert!(guard.admit(&direct("198.51.100.3"), None).await.is_ok());
        assert!(guard.admit(&direct("198.51.100.4"), None).await.is_err());
    }

    #[actix_web::test]
    async fn no_limit_when_turned_off() {
        let guard = guard(|c| c.rate_limit.links_per_minute = 0);
        let request = from("192.0.2.1").to_http_request();
        for _ in 0..1000 {
            assert_eq!(guard.admit(&request, None).await, Ok(Caller::Anonymous));
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
