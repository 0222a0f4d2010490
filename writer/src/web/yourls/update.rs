//! `update` (`shorturl`, `url`, `title`), as YOURLS' widely used "API Edit
//! URL" plugin takes it: the link's long URL changed (and its title, when
//! one is sent: left out, it is kept, where the plugin would clear it),
//! live in Varnish when this answers; for its owner or an admin.

use crate::access::Identity;
use crate::links::shortener::{Change, ShortenError, Shortener};
use crate::web::yourls::answer::Answer;
use crate::web::yourls::request::Params;

pub async fn update(params: &Params, who: &Identity, shortener: &Shortener) -> Answer {
    let (Some(_), Some(url)) = (params.get("shorturl"), params.get("url")) else {
        let mut answer = Answer::new("")
            .with("statusCode", 400)
            .with("status", "fail")
            .with("message", "error: missing param");
        answer.set_simple("Need a 'shorturl' and a 'url' parameter");
        return answer;
    };
    let (domain, key) = match params.short_url(shortener) {
        Ok(Some(found)) => found,
        Ok(None) => return not_found(params),
        Err(refused) => return refused,
    };
    let title = params.get("title");
    let change = Change {
        url: Some(url),
        title: title.map(Some),
        ..Change::default()
    };
    match shortener.edit(who, domain, &key, &change, None).await {
        Ok(_) => {
            let mut answer = Answer::new("")
                .with("statusCode", 200)
                .with("message", "success: updated");
            answer.set_simple(format!("Keyword {key} updated to {url}"));
            answer
        }
        Err(ShortenError::NotFound(_) | ShortenError::Gone(_)) => not_found(params),
        Err(error) => changed_nothing(&error),
    }
}

fn not_found(params: &Params) -> Answer {
    let mut answer = Answer::new("")
        .with("statusCode", 404)
        .with("status", "fail")
        .with("message", "error: not found");
    answer.set_simple(format!(
        "Error: keyword {} not found",
        params.get("shorturl").unwrap_or_default()
    ));
    answer
}

/// A refused change: its status, and the links area's message.
pub fn changed_nothing(error: &ShortenError) -> Answer {
    let (code, field, message) = error.answer();
    let mut answer = Answer::new("")
        .with("statusCode", code.status())
        .with("status", "fail")
        .with("message", format!("error: {message}"));
    if let Some(field) = field {
        answer = answer.with("field", field.name());
    }
    answer.set_simple(message);
    answer
}
