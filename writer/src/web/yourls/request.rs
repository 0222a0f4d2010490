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
    /// YOURLS' refusal, 403, for every failure alike.
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
            .map_err(|_| {
                let message = if self.get("username").is_some() || self.get("password").is_some() {
                    "Invalid username or password"
                } else {
                    "Please log in"
                };
                Answer::error("403", message)
            })
    }

    /// The link `shorturl` names: a keyword of the default domain (or of
    /// `domain`), or a whole short URL of any domain, by any of its names
    /// and either scheme. `None` when it names none.
    pub fn short_url<'s>(&self, shortener: &'s Shortener) -> Option<(&'s Domain, String)> {
        let sent = self.get("shorturl")?;
        if !sent.contains("://") {
            return Some((shortener.domain(self.domain()).ok()?, sent.to_owned()));
        }
        let url = url::Url::parse(sent).ok()?;
        let domain = shortener.domain(url.host_str()).ok()?;
        let key = url.path().strip_prefix(domain.link_path.as_str())?;
        (!key.is_empty() && !key.contains('/')).then(|| (domain, key.to_owned()))
    }

    /// The short domain named by `domain` (this project's addition; a name
    /// or an alias), the default one without.
    pub fn domain(&self) -> Option<&str> {
        self.get("domain")
    }
}
