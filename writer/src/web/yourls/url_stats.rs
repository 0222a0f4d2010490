//! `url-stats` (`shorturl`): one link with its clicks, for its owner or
//! an admin; 404 for a short URL that holds none the token may see.

use crate::access::Identity;
use crate::links::shortener::{ShortenError, Shortener};
use crate::web::yourls::answer::Answer;
use crate::web::yourls::link::stats_object;
use crate::web::yourls::request::Params;

/// What YOURLS' stats answer in `simple`.
pub const STATS_SIMPLE: &str = "Need either XML or JSON format for stats";

pub async fn url_stats(params: &Params, who: &Identity, shortener: &Shortener) -> Answer {
    let not_found = || {
        Answer::new(STATS_SIMPLE)
            .with("statusCode", "404")
            .with("message", "Error: short URL not found")
    };
    let (domain, key) = match params.short_url(shortener) {
        Ok(Some(found)) => found,
        Ok(None) => return not_found(),
        Err(refused) => return refused,
    };
    let link = match shortener.show_to(who, domain, &key).await {
        Ok((link, _)) => link,
        Err(error @ ShortenError::Store(_)) => return Answer::failure(&error),
        Err(_) => return not_found(),
    };
    let one = std::slice::from_ref(&link);
    match (shortener.details(one).await, shortener.totals(one).await) {
        (Ok(details), Ok(totals)) => Answer::new(STATS_SIMPLE)
            .with("statusCode", "200")
            .with("message", "success")
            .with(
                "link",
                stats_object(&link, &details[0], totals[0], shortener),
            ),
        (Err(error), _) | (_, Err(error)) => Answer::failure(&error),
    }
}
