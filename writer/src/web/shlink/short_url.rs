//! Shlink's `ShortUrl` object, made from a link of the links area.

use serde::Serialize;
use time::format_description::well_known::{Iso8601, Rfc3339};
use time::OffsetDateTime;

use crate::clicks::Totals;
use crate::links::details::LinkDetails;
use crate::links::shortener::{Entry, Shortener};
use crate::links::store::Link;
use crate::web::shlink::problem::Problem;

/// A short URL as Shlink's clients read it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShortUrl {
    pub short_code: String,
    pub short_url: String,
    pub long_url: String,
    /// `null` for a link written by hand, whose creation nobody recorded.
    pub date_created: Option<String>,
    pub tags: Vec<String>,
    pub meta: Meta,
    /// `null` on the default domain.
    pub domain: Option<String>,
    pub title: Option<String>,
    pub crawlable: bool,
    /// Whether it forwards its query now: the link's own choice, or its
    /// domain's.
    pub forward_query: bool,
    pub visits_summary: VisitsSummary,
    pub has_redirect_rules: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    pub valid_since: Option<String>,
    pub valid_until: Option<String>,
    pub max_visits: Option<u64>,
}

/// Visits as the totals count them.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VisitsSummary {
    pub total: u64,
    pub non_bots: u64,
    pub bots: u64,
}

impl From<Totals> for VisitsSummary {
    fn from(totals: Totals) -> Self {
        Self {
            total: totals.people + totals.bots,
            non_bots: totals.people,
            bots: totals.bots,
        }
    }
}

impl ShortUrl {
    pub fn of(entry: &Entry, shortener: &Shortener) -> Self {
        Self::new(&entry.link, &entry.details, entry.totals, shortener)
    }

    /// `link` as Shlink shows it alone: its details and totals read for it.
    pub async fn read(link: &Link, shortener: &Shortener) -> Result<Self, Problem> {
        let one = std::slice::from_ref(link);
        let details = shortener.details(one).await?;
        let totals = shortener.totals(one).await?;
        Ok(Self::new(link, &details[0], totals[0], shortener))
    }

    pub fn new(link: &Link, details: &LinkDetails, totals: Totals, shortener: &Shortener) -> Self {
        let record = &link.record;
        let domain = shortener.domain(Some(&link.domain)).ok();
        Self {
            short_code: link.key.clone(),
            short_url: shortener.link_url(link),
            long_url: record.url.to_string(),
            date_created: details.created.map(iso_date),
            tags: details.tags.iter().map(ToString::to_string).collect(),
            meta: Meta {
                valid_since: record.starts.map(|start| iso_date(start.unix())),
                valid_until: record.expires.map(|expiry| iso_date(expiry.unix())),
                max_visits: record.max_clicks.map(shortlink_core::ClickLimit::get),
            },
            domain: domain
                .filter(|domain| !domain.is_default())
                .map(|domain| domain.name.clone()),
            title: details
                .title
                .as_ref()
                .map(|title| title.as_str().to_owned()),
            crawlable: details.crawlable,
            forward_query: record
                .forward_query
                .or(domain.map(|domain| domain.forward_query))
                .unwrap_or(false),
            visits_summary: totals.into(),
            has_redirect_rules: !record.targeting.rules().is_empty(),
        }
    }
}

/// `unix` seconds as Shlink writes a date: ISO 8601 to the second, in
/// UTC, with the offset spelled out (`2026-12-31T23:59:59+00:00`).
pub fn iso_date(unix: u64) -> String {
    i64::try_from(unix)
        .ok()
        .and_then(|unix| OffsetDateTime::from_unix_timestamp(unix).ok())
        .and_then(|at| at.format(&Rfc3339).ok())
        .map(|text| text.replacen('Z', "+00:00", 1))
        .unwrap_or_default()
}

/// A date a Shlink client sent (ISO 8601, with an offset or `Z`), in Unix
/// seconds; `None` for one that cannot be read.
pub fn parse_date(text: &str) -> Option<i64> {
    OffsetDateTime::parse(text, &Iso8601::DEFAULT)
        .or_else(|_| OffsetDateTime::parse(text, &Rfc3339))
        .ok()
        .map(OffsetDateTime::unix_timestamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_written_with_their_offset_and_read_back() {
        assert_eq!(iso_date(1_767_225_600), "2026-01-01T00:00:00+00:00");
        assert_eq!(parse_date("2026-01-01T00:00:00+00:00"), Some(1_767_225_600));
        assert_eq!(parse_date("2026-01-01T01:00:00+01:00"), Some(1_767_225_600));
        assert_eq!(parse_date("2026-01-01T00:00:00Z"), Some(1_767_225_600));
        assert_eq!(parse_date("yesterday"), None);
    }
}
