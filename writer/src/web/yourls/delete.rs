//! `delete` (`shorturl`), as YOURLS' "API Action - Delete" plugin takes
//! it: the link deleted (its key answers 410 from then on, and is never
//! given to another link); for its owner or an admin.

use crate::access::Identity;
use crate::links::shortener::{ShortenError, Shortener};
use crate::web::yourls::answer::Answer;
use crate::web::yourls::request::Params;
use crate::web::yourls::update::changed_nothing;

pub async fn delete(params: &Params, who: &Identity, shortener: &Shortener) -> Answer {
    let Some(sent) = params.get("shorturl") else {
        return Answer::new("Need a 'shorturl' parameter")
            .with("statusCode", 400)
            .with("message", "error: missing param");
    };
    let not_found = || {
        Answer::new("Error: short URL not found")
            .with("statusCode", 404)
            .with("message", "error: not found")
    };
    let (domain, key) = match params.short_url(shortener) {
        Ok(Some(found)) => found,
        Ok(None) => return not_found(),
        Err(refused) => return refused,
    };
    match shortener.delete(who, domain, &key, None).await {
        Ok(_) => Answer::new(format!("Shorturl {sent} deleted"))
            .with("statusCode", 200)
            .with("message", "success: deleted"),
        Err(ShortenError::NotFound(_) | ShortenError::Gone(_)) => not_found(),
        Err(error) => changed_nothing(&error),
    }
}
