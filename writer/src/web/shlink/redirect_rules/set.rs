//! `POST` (or `PATCH`) `/rest/v3/short-urls/{shortCode}/redirect-rules`:
//! `{"redirectRules": [...]}` replaces the link's rules, in order (its
//! split stays); Varnish serves them at once.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::access::Gatekeeper;
use crate::links::shortener::{Change, Shortener};
use crate::web::links::note_purge_failure;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::redirect_rules::conditions::{rule_of, SentRule};
use crate::web::shlink::redirect_rules::get::rules_answer;
use crate::web::shlink::request::{api_key, domain_param, json_object, Query};
use crate::web::shlink::short_urls::Fields;

pub(crate) async fn set(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    short_code: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, Problem> {
    let who = api_key(&request, &guard)?;
    let query = Query::of(&request);
    let domain = shortener.domain(domain_param(&query))?;
    let mut fields = Fields::new(json_object(&body)?);
    let sent = fields.take("redirectRules");
    fields.done("redirectRules")?;
    let sent: Vec<SentRule> = match sent {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(value) => serde_json::from_value(value).map_err(|e| {
            Problem::invalid(
                "redirectRules",
                format!("redirectRules must be a list of {{longUrl, conditions}}: {e}"),
            )
        })?,
    };
    let rules = sent
        .into_iter()
        .enumerate()
        .map(|(n, rule)| rule_of(n + 1, rule))
        .collect::<Result<Vec<_>, _>>()?;
    let change = Change {
        rules: Some(&rules),
        ..Change::default()
    };
    let written = shortener
        .edit(&who, domain, &short_code, &change, None)
        .await?;
    note_purge_failure(&request, written.purge_warning.as_ref());
    Ok(HttpResponse::Ok().json(rules_answer(&written.outcome.0)))
}
