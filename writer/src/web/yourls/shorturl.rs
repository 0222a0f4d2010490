//! `shorturl` (`url`, `keyword`, `title`): a link made for the signed-in
//! token, on the default domain (or `domain`). A URL the token already
//! has a link for answers YOURLS' `error:url` with that link; a keyword
//! taken, or one that breaks the key rules, `error:keyword`; a bad URL
//! `error:nourl`. The keyword is checked, never rewritten: YOURLS deletes
//! the characters it does not take, which would make another link than
//! the one asked for.

use actix_web::HttpRequest;
use serde_json::json;

use crate::access::{Caller, Identity};
use crate::links::shortener::{NewLink, ShortenError, Shortener};
use crate::links::store::{Inserted, StoreError};
use crate::links::validate::Field;
use crate::web::links::note_purge_failure;
use crate::web::yourls::answer::Answer;
use crate::web::yourls::link::{date, title};
use crate::web::yourls::request::Params;

pub async fn shorturl(
    params: &Params,
    who: &Identity,
    shortener: &Shortener,
    request: &HttpRequest,
) -> Answer {
    let Some(url) = params.get("url") else {
        return Answer::failed("error:nourl", "Missing or malformed URL", "400");
    };
    let new = NewLink {
        url,
        key: params.get("keyword"),
        title: params.get("title"),
        domain: params.domain(),
        read_title: true,
        ..NewLink::default()
    };
    let written = match shortener
        .create_as(&new, &Caller::TokenHolder(who.clone()))
        .await
    {
        Ok(written) => written,
        Err(error) => return refused(&error, params),
    };
    note_purge_failure(request, written.purge_warning.as_ref());
    let (link, existing) = match &written.outcome {
        Inserted::Created(link) => (link, false),
        Inserted::Existing(link) => (link, true),
    };
    let one = std::slice::from_ref(link);
    let (details, totals) = match (shortener.details(one).await, shortener.totals(one).await) {
        (Ok(details), Ok(totals)) => (details, totals),
        (Err(error), _) | (_, Err(error)) => return refused(&error, params),
    };
    let short_url = shortener.link_url(link);
    let title = title(link, &details[0]);
    let mut object = json!({
        "keyword": link.key,
        "url": link.record.url.to_string(),
        "title": title,
        "date": date(&details[0]),
        "ip": "",
    });
    let answer = if existing {
        object["clicks"] = json!(totals[0].people + totals[0].bots);
        let shown = short_url
            .split_once("://")
            .map_or(short_url.as_str(), |(_, rest)| rest);
        Answer::failed(
            "error:url",
            &format!(
                "{} already exists in database (short URL: {shown})",
                link.record.url
            ),
            "400",
        )
    } else {
        Answer::new("")
            .with("status", "success")
            .with("code", "")
            .with("message", format!("{} added to database", link.record.url))
            .with("errorCode", "")
            .with("statusCode", "200")
    };
    let mut answer = answer
        .with("url", object)
        .with("title", title)
        .with("shorturl", short_url.clone());
    answer.set_simple(short_url);
    answer
}

/// A refused link in YOURLS' words.
fn refused(error: &ShortenError, params: &Params) -> Answer {
    let (code, field, message) = error.answer();
    match (error, field) {
        (ShortenError::Store(StoreError::KeyTaken { .. }), _) => Answer::failed(
            "error:keyword",
            &format!(
                "Short URL {} already exists in database or is reserved",
                params.get("keyword").unwrap_or_default()
            ),
            "400",
        ),
        (_, Some(Field::Key)) => Answer::failed("error:keyword", &message, "400"),
        (_, Some(Field::Url)) => Answer::failed("error:nourl", &message, "400"),
        (_, Some(Field::Domain)) => Answer::error(&code.status().to_string(), &message),
        _ => Answer::failed(
            &format!("error:{}", code.as_str()),
            &message,
            &code.status().to_string(),
        ),
    }
}
