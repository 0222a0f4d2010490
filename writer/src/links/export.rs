//! Links written out for another tool or a backup: CSV in the columns
//! `shortlink import --format csv` and the bulk API read back, or JSON
//! lines in the API's own shape, a page at a time.

use serde::Deserialize;
use shortlink_core::{Expiry, Owner};

use crate::links::body::LinkBody;
use crate::links::details::{LinkDetails, Tag, Title};
use crate::links::shortener::Shortener;
use crate::links::store::Link;
use crate::links::validate::format_expiry;

/// A link's `domain` column: empty for the default domain, so that the
/// file imports into a writer whose default domain has another name (a
/// copy for tests, a move to a new name); another domain's name.
fn domain_column<'l>(link: &'l Link, shortener: &Shortener) -> &'l str {
    match shortener.domain(Some(&link.domain)) {
        Ok(domain) if domain.is_default() => "",
        _ => &link.domain,
    }
}

/// How exported links are written.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    /// A header, then one link a line.
    #[default]
    Csv,
    /// One JSON object a line, as `GET /api/links/{key}` shows a link.
    Jsonl,
}

/// The CSV columns, in order: an import reads back all but `short_url` and
/// `expired` (`owner` by `shortlink import` alone); new columns go last, so
/// that a reader of the older ones by position still reads them.
pub const CSV_COLUMNS: [&str; 16] = [
    "url",
    "key",
    "expires_at",
    "expired_url",
    "max_clicks",
    "short_url",
    "expired",
    "owner",
    "domain",
    "forward_query",
    "rules",
    "valid_since",
    "title",
    "tags",
    "crawlable",
    "created_at",
];

impl ExportFormat {
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Csv => "text/csv; charset=utf-8",
            Self::Jsonl => "application/jsonl; charset=utf-8",
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Jsonl => "jsonl",
        }
    }

    /// What comes before the first link.
    pub fn head(self) -> Vec<u8> {
        match self {
            Self::Csv => format!("{}\n", CSV_COLUMNS.join(",")).into_bytes(),
            Self::Jsonl => Vec::new(),
        }
    }

    /// `links`, with their `details` (one each, in order), written out as
    /// the next part of the file.
    pub fn page(self, links: &[Link], details: &[LinkDetails], shortener: &Shortener) -> Vec<u8> {
        match self {
            Self::Csv => {
                let mut writer = csv::WriterBuilder::new()
                    .has_headers(false)
                    .from_writer(Vec::with_capacity(links.len() * 128));
                for (link, details) in links.iter().zip(details) {
                    let record = &link.record;
                    let tags: Vec<&str> = details.tags.iter().map(Tag::as_str).collect();
                    let created = details.created.and_then(|unix| Expiry::try_from(unix).ok());
                    let max_clicks = record.max_clicks.map(|limit| limit.get().to_string());
                    let expired = record.has_expired(std::time::SystemTime::now());
                    // Writing into memory cannot fail.
                    let _ = writer.write_record([
                        record.url.as_str(),
                        &link.key,
                        &record.expires.map(format_expiry).unwrap_or_default(),
                        record.expired_url.as_ref().map_or("", |url| url.as_str()),
                        max_clicks.as_deref().unwrap_or_default(),
                        &shortener.link_url(link),
                        if expired { "true" } else { "false" },
                        record.owner.as_ref().map_or("", Owner::as_str),
                        domain_column(link, shortener),
                        match record.forward_query {
                            None => "",
                            Some(true) => "true",
                            Some(false) => "false",
                        },
                        // The stored words, `~...>URL *50>URL`: no space
                        // stands inside one.
                        record.targeting.to_string().trim_start(),
                        &record.starts.map(format_expiry).unwrap_or_default(),
                        details.title.as_ref().map_or("", Title::as_str),
                        &tags.join("|"),
                        if details.crawlable { "true" } else { "false" },
                        &created.map(format_expiry).unwrap_or_default(),
                    ]);
                }
                writer.into_inner().unwrap_or_default()
            }
            Self::Jsonl => {
                let mut out = Vec::with_capacity(links.len() * 160);
                for (link, details) in links.iter().zip(details) {
                    // A struct of strings and numbers always serializes.
                    let body = LinkBody::new(link, shortener).detailed(details);
                    let _ = serde_json::to_writer(&mut out, &body);
                    out.push(b'\n');
                }
                out
            }
        }
    }
}
