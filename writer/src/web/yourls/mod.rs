//! YOURLS' API, `yourls-api.php`, so that YOURLS' tools (CMS plugins,
//! uploaders, browser extensions, chat bots, shell scripts) shorten,
//! expand and count here. Every action translates YOURLS' parameters into
//! the links area's one typed request and back; nothing here decides what
//! a link may be.
//!
//! | file | what |
//! | --- | --- |
//! | `request.rs` | the parameters (query and form body), the sign-in, the domain |
//! | `answer.rs` | an answer in each format: xml (the default, as YOURLS'), json, jsonp, simple |
//! | `link.rs` | a link as YOURLS shows it |
//! | `shorturl.rs` | `shorturl`: a link made |
//! | `expand.rs` | `expand`: a short URL's long URL |
//! | `url_stats.rs` | `url-stats`: one link and its clicks |
//! | `stats.rs` | `stats` and `db-stats`: links ordered by clicks or age, and the totals |
//! | `update.rs` | `update`: a link's URL (and title) changed, as YOURLS' plugin does |
//! | `delete.rs` | `delete`: a link deleted, as YOURLS' plugin does |

use actix_web::{web, HttpRequest, HttpResponse};

use crate::access::Gatekeeper;
use crate::links::shortener::Shortener;

mod answer;
mod delete;
mod expand;
mod link;
mod request;
mod shorturl;
mod stats;
mod update;
mod url_stats;

use answer::Answer;
use request::Params;

/// The YOURLS version whose API this speaks, which `version` answers.
pub const YOURLS_VERSION: &str = "1.10.4";
/// The database version YOURLS 1.10.4 reports with `db=1`.
const YOURLS_DB_VERSION: &str = "507";

/// The route, for `App::configure`: GET and POST, as YOURLS takes both.
pub fn routes(config: &mut web::ServiceConfig) {
    config.route("/yourls-api.php", web::get().to(api));
    config.route("/yourls-api.php", web::post().to(api));
}

async fn api(
    request: HttpRequest,
    body: web::Bytes,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
) -> HttpResponse {
    let params = Params::of(&request, &body);
    // As YOURLS on a private install: who it is comes before what it asks.
    let answer = match params.sign_in(&guard) {
        Err(refused) => refused,
        Ok(who) => match params.get("action") {
            Some("shorturl") => shorturl::shorturl(&params, &who, &shortener, &request).await,
            Some("expand") => expand::expand(&params, &shortener).await,
            Some("url-stats") => url_stats::url_stats(&params, &who, &shortener).await,
            Some("stats") => stats::stats(&params, &who, &shortener).await,
            Some("db-stats") => stats::db_stats(&params, &who, &shortener).await,
            Some("update") => update::update(&params, &who, &shortener).await,
            Some("delete") => delete::delete(&params, &who, &shortener).await,
            Some("version") => version(&params),
            _ => Answer::error("400", "Unknown or missing \"action\" parameter"),
        },
    };
    let callback = params.get("callback").or_else(|| params.get("jsonp"));
    answer.respond(params.get("format"), callback)
}

/// `version`: the YOURLS version whose API this speaks.
fn version(params: &Params) -> Answer {
    let mut answer = Answer::new(YOURLS_VERSION).with("version", YOURLS_VERSION);
    if params.get("db") == Some("1") {
        answer = answer.with("db_version", YOURLS_DB_VERSION);
    }
    answer
}
