//! `expand` (`shorturl`: a keyword or a whole short URL): the long URL a
//! link leads to; 404 for a short URL that holds none.

use crate::links::shortener::Shortener;
use crate::web::yourls::answer::Answer;
use crate::web::yourls::link::title;
use crate::web::yourls::request::Params;

pub async fn expand(params: &Params, shortener: &Shortener) -> Answer {
    let keyword = params.get("shorturl").unwrap_or_default();
    let not_found = || {
        let mut answer = Answer::new("not found")
            .with("keyword", keyword)
            .with("message", "Error: short URL not found")
            .with("errorCode", "404");
        answer.set_simple("not found");
        answer
    };
    let (domain, key) = match params.short_url(shortener) {
        Ok(Some(found)) => found,
        Ok(None) => return not_found(),
        Err(refused) => return refused,
    };
    let link = match shortener.show(domain, &key).await {
        Ok((link, _)) => link,
        Err(error @ crate::links::shortener::ShortenError::Store(_)) => {
            return Answer::failure(&error)
        }
        Err(_) => return not_found(),
    };
    let details = match shortener.details(std::slice::from_ref(&link)).await {
        Ok(details) => details,
        Err(error) => return Answer::failure(&error),
    };
    let long_url = link.record.url.to_string();
    Answer::new(long_url.clone())
        .with("keyword", link.key.clone())
        .with("shorturl", shortener.link_url(&link))
        .with("longurl", long_url)
        .with("title", title(&link, &details[0]))
        .with("message", "success")
        .with("statusCode", "200")
}
