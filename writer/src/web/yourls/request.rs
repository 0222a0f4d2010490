//! What a YOURLS tool sent: its parameters, from the query string and a
//! form body alike (a body's value wins, as PHP's `$_REQUEST` has it), who
//! it signed in as, and the short domain it acts on.

use actix_web::HttpRequest;

use crate::access::{Gatekeeper, Identity, SignInError, YourlsSignIn};
use crate::config::Domain;
use crate::links::shortener::Shortener;
use crate::web::yourls::answer::Answer;

pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn of(request: &HttpRequest, body: &[u8]) -> Self {
        let mut pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(request.query_string().as_bytes())
                .into_owned()
                .collect();
        let is_form = request
            .headers()
            .get(actix_web::http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/x-www-form-urlencoded"));
        if is_form {
            pairs.extend(url::form_urlencoded::parse(body).into_owned());
        }
        Self(pairs)
    }

    /// The last value of `name`, when it is not empty (PHP's `empty()`
    /// reads an empty parameter as none).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .filter(|value| !value.is_empty())
    }

    /// Who the tool signed in as, one way alone, as YOURLS tries them; or
    /// YOURLS' refusal, 403, its message saying what to fix.
    pub fn sign_in(&self, guard: &Gatekeeper) -> Result<Identity, Answer> {
        let sign_in = match (self.get("timestamp"), self.get("signature")) {
            (Some(timestamp), Some(signature)) => Some(YourlsSignIn::Timed {
                timestamp,
                signature,
                hash: self.get("hash"),
            }),
            (None, Some(signature)) => Some(YourlsSignIn::Signature(signature)),
            _ => match (self.get("username"), self.get("password")) {
                (Some(username), Some(password)) => {
                    Some(YourlsSignIn::Password { username, password })
                }
                _ => None,
            },
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        sign_in
            .ok_or(SignInError::Unknown)
            .and_then(|sign_in| guard.identify_yourls(&sign_in, now))
            .map_err(|refused| {
                // YOURLS' clients read the 403; the message says what to fix.
                let message = match refused {
                    _ if self.get("username").is_some() || self.get("password").is_some() => {
                        "Invalid username or password"
                    }
                    SignInError::Unknown => "Please log in",
                    SignInError::Stale => {
                        "Please log in: the timestamp is 12 hours or more from the server's clock; \
                         sign a current one (check the client's clock)"
                    }
                    SignInError::UnknownHash => {
                        "Please log in: hash must be md5, sha256, sha384 or sha512"
                    }
                };
                Answer::error("403", message)
            })
    }

    /// The link `shorturl` names: a keyword of the default domain (or of
    /// `domain`), or a whole short URL of any domain, by any of its names
    /// and either scheme. `None` when it names none; an error answer for a
    /// `domain` not served here.
    pub fn short_url<'s>(
        &self,
        shortener: &'s Shortener,
    ) -> Result<Option<(&'s Domain, String)>, Answer> {
        let Some(sent) = self.get("shorturl") else {
            return Ok(None);
        };
        if !sent.contains("://") {
            let domain = shortener
                .domain(self.domain())
                .map_err(|error| Answer::error("404", &error.to_string()))?;
            return Ok(Some((domain, sent.to_owned())));
        }
        let Ok(url) = url::Url::parse(sent) else {
            return Ok(None);
        };
        let Ok(domain) = shortener.domain(url.host_str()) else {
            return Ok(None);
        };
        Ok(url
            .path()
            .strip_prefix(domain.link_path.as_str())
            .filter(|key| !key.is_empty() && !key.contains('/'))
            .map(|key| (domain, key.to_owned())))
    }

    /// The short domain named by `domain` (this project's addition; a name
    /// or an alias), the default one without.
    pub fn domain(&self) -> Option<&str> {
        self.get("domain")
    }
}
