//! What every Shlink route reads of its request: who sent its key, a JSON
//! body, and a query string written Shlink's way.

use actix_web::HttpRequest;
use serde_json::{Map, Value};

use crate::access::{Gatekeeper, Identity, Refusal};
use crate::web::shlink::problem::{Problem, ProblemType};

/// Who sent the request's `X-Api-Key`.
pub fn api_key(request: &HttpRequest, guard: &Gatekeeper) -> Result<Identity, Problem> {
    let key = request
        .headers()
        .get("x-api-key")
        .map(|value| value.to_str().map_err(|_| Refusal::TokenInvalid))
        .transpose()?
        .filter(|key| !key.is_empty())
        .ok_or(Refusal::TokenMissing)?;
    Ok(guard.identify_key(key.trim())?)
}

/// A request body as the JSON object Shlink's clients send.
pub fn json_object(body: &[u8]) -> Result<Map<String, Value>, Problem> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(Problem::new(
            ProblemType::MalformedRequestBody,
            "the body must be a JSON object",
        )),
        Err(error) => Err(Problem::new(
            ProblemType::MalformedRequestBody,
            format!("the body is not valid JSON: {error}"),
        )),
    }
}

/// A query string as Shlink's clients write it: PHP's arrays
/// (`tags[]=a&tags[]=b`) and plain values.
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn of(request: &HttpRequest) -> Self {
        Self(
            url::form_urlencoded::parse(request.query_string().as_bytes())
                .map(|(name, value)| (name.into_owned(), value.into_owned()))
                .collect(),
        )
    }

    /// The last value of `name`, if given and not empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(given, value)| given == name && !value.is_empty())
            .map(|(_, value)| value.as_str())
    }

    /// Every value of the array `name` (`name[]=...`, or `name[0]=...`).
    pub fn list(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(given, _)| {
                given
                    .strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix('['))
                    .is_some_and(|rest| rest.ends_with(']'))
            })
            .map(|(_, value)| value.clone())
            .collect()
    }

    /// A yes-or-no value: `true` or `1` is yes.
    pub fn flag(&self, name: &str) -> bool {
        self.get(name)
            .is_some_and(|value| value == "true" || value == "1")
    }

    /// A whole number, or a problem naming `name`.
    pub fn number(&self, name: &'static str) -> Result<Option<i64>, Problem> {
        self.get(name)
            .map(|value| {
                value.parse::<i64>().map_err(|_| {
                    Problem::invalid(
                        name,
                        format!("{name} must be a whole number, not {value:?}"),
                    )
                })
            })
            .transpose()
    }
}

/// The short domain a per-code route's `?domain=` names: `None` for the
/// default one (absent, empty, or `DEFAULT`).
pub fn domain_param(query: &Query) -> Option<&str> {
    query.get("domain").filter(|name| *name != "DEFAULT")
}
