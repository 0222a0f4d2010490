//! A link as YOURLS shows it: its keyword, long URL, title, when it was
//! made (`Y-m-d H:i:s`, UTC), the address it was made from (never kept
//! here: empty) and its clicks, people's and bots' alike.

use serde_json::{json, Value};

use crate::clicks::Totals;
use crate::links::details::LinkDetails;
use crate::links::shortener::Shortener;
use crate::links::store::Link;

/// When nobody recorded a link's creation (written by hand with
/// `redis-cli`): the Unix epoch, which YOURLS' clients can still read.
const UNKNOWN_DATE: &str = "1970-01-01 00:00:00";

/// The link's title, or its URL for none, as YOURLS falls back to it.
pub fn title(link: &Link, details: &LinkDetails) -> String {
    details.title.as_ref().map_or_else(
        || link.record.url.to_string(),
        |title| title.as_str().to_owned(),
    )
}

pub fn date(details: &LinkDetails) -> String {
    details.created.map_or_else(
        || UNKNOWN_DATE.to_owned(),
        |unix| {
            time::OffsetDateTime::from_unix_timestamp(i64::try_from(unix).unwrap_or(0)).map_or_else(
                |_| UNKNOWN_DATE.to_owned(),
                |at| {
                    format!(
                        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
                        at.year(),
                        u8::from(at.month()),
                        at.day(),
                        at.hour(),
                        at.minute(),
                        at.second()
                    )
                },
            )
        },
    )
}

/// The object `url-stats` and `stats` show a link as.
pub fn stats_object(
    link: &Link,
    details: &LinkDetails,
    totals: Totals,
    shortener: &Shortener,
) -> Value {
    json!({
        "shorturl": shortener.link_url(link),
        "url": link.record.url.to_string(),
        "title": title(link, details),
        "timestamp": date(details),
        "ip": "",
        "clicks": totals.people + totals.bots,
    })
}
