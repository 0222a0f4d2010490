//! Many links at once. The bulk API, the form's CSV upload and
//! `shortlink import` read rows of links (JSON items, or CSV in this
//! writer's columns or another shortener's export) and create each one as
//! a single insert would, answering one result per row in input order.

use std::io::Read;

use actix_web::http::StatusCode;
use futures_util::{Stream, StreamExt as _};
use serde::Serialize;
use shortlink_core::Owner;

use crate::shortener::{NewLink, ShortenError, Shortener, Written};
use crate::store::Inserted;
use crate::validate::{Field, Invalid};

/// Most links one bulk request may hold: enough for a campaign's worth,
/// few enough that its answer stays a few megabytes.
pub const MAX_BULK_LINKS: usize = 10_000;

/// Inserts of one bulk request in flight at once: enough to hide the round
/// trips to Redis and Varnish, few enough to leave room for everyone else.
const BULK_CONCURRENCY: usize = 32;

/// A link to create, as one row or item gave it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    pub url: String,
    /// A custom key (for an import: the short code the other tool gave).
    pub key: Option<String>,
    pub expires_at: Option<String>,
    pub expired_url: Option<String>,
    pub max_clicks: Option<u64>,
}

impl Row {
    pub fn new_link(&self) -> NewLink<'_> {
        NewLink {
            url: &self.url,
            key: self.key.as_deref(),
            expires_at: self.expires_at.as_deref(),
            expired_url: self.expired_url.as_deref(),
            max_clicks: self.max_clicks,
        }
    }
}

/// Why one row was not stored; the rows around it are not affected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Refused {
    /// The status a single insert would have answered.
    pub code: u16,
    pub error: String,
    /// The input to blame, if one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub field: Option<&'static str>,
    /// For 429: when the client may send the row again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u64>,
}

impl Refused {
    pub fn new(status: StatusCode, error: String, field: Option<Field>) -> Self {
        Self {
            code: status.as_u16(),
            error,
            field: field.map(Field::name),
            retry_after_s: None,
        }
    }

    /// Whether the row's key holds another link already.
    pub fn is_conflict(&self) -> bool {
        self.code == StatusCode::CONFLICT.as_u16()
    }
}

impl From<Invalid> for Refused {
    fn from(invalid: Invalid) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            invalid.message,
            Some(invalid.field),
        )
    }
}

/// One row as read: a link to create, or why it cannot be.
pub type Item = Result<Row, Refused>;

/// What became of one row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RowOutcome {
    /// Stored now.
    Created(Made),
    /// The same link was stored already, under this key.
    Existing(Made),
    /// Not stored; nothing was changed for this row.
    Refused(Refused),
}

/// A link a row names, stored now or before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Made {
    pub key: String,
    pub short_url: String,
    pub url: String,
}

/// How many rows went which way.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Summary {
    pub created: usize,
    pub existing: usize,
    /// Refused because the key holds another link (counted in `refused`).
    pub conflicts: usize,
    pub refused: usize,
}

impl Summary {
    pub fn add(&mut self, outcome: &RowOutcome) {
        match outcome {
            RowOutcome::Created(_) => self.created += 1,
            RowOutcome::Existing(_) => self.existing += 1,
            RowOutcome::Refused(refused) => {
                self.refused += 1;
                if refused.is_conflict() {
                    self.conflicts += 1;
                }
            }
        }
    }
}

/// Creates every row of `items` for `owner`, as [`Shortener::create`]
/// does one: the outcomes come in the order of the rows, each with the
/// tag its row came with (a line number, say).
pub fn create_all<'a, T: 'a>(
    shortener: &'a Shortener,
    owner: Option<Owner>,
    items: impl Iterator<Item = (T, Item)> + 'a,
) -> impl Stream<Item = (T, RowOutcome)> + 'a {
    futures_util::stream::iter(items)
        .map(move |(tag, item)| {
            let owner = owner.clone();
            async move {
                let row = match item {
                    Ok(row) => row,
                    Err(refused) => return (tag, RowOutcome::Refused(refused)),
                };
                let made = |link: &crate::store::Link| Made {
                    key: link.key.clone(),
                    short_url: shortener.short_url(&link.key),
                    url: link.record.url.to_string(),
                };
                let outcome = match shortener.create(&row.new_link(), owner).await {
                    Ok(Written {
                        outcome: Inserted::Created(link),
                        ..
                    }) => RowOutcome::Created(made(&link)),
                    Ok(Written {
                        outcome: Inserted::Existing(link),
                        ..
                    }) => RowOutcome::Existing(made(&link)),
                    Err(error) => RowOutcome::Refused(refused_for(&error)),
                };
                (tag, outcome)
            }
        })
        .buffered(BULK_CONCURRENCY)
}

fn refused_for(error: &ShortenError) -> Refused {
    let (status, field) = error.status_and_field();
    if status.is_server_error() {
        log::error!("{error}");
    }
    Refused::new(status, error.to_string(), field)
}

/// Where a CSV file comes from: which columns hold what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// This writer's columns (`url,key,expires_at,expired_url,max_clicks`,
    /// any subset, by header), or without a header `url[,key]`; its own
    /// export reads back.
    Csv,
    /// Shlink's short URL export (`shortCode`, `longUrl`, ...) or import
    /// file (`Long URL`, `Short code`, ...).
    Shlink,
    /// YOURLS's table of links (`keyword`, `url`, `title`, `timestamp`,
    /// `ip`, `clicks`), as its export plugins and `mysqldump` write it.
    Yourls,
    /// Bitly's link export (`long_url` and `link`, the bitlink, whose path
    /// is the short code).
    Bitly,
}

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Url,
    Key,
    /// A short URL whose last path segment is the key.
    ShortUrl,
    ExpiresAt,
    ExpiredUrl,
    MaxClicks,
}

impl Format {
    /// The column a header names, by its letters and digits only, case
    /// aside: `Long URL`, `long_url` and `longUrl` are one name.
    fn column(self, name: &str) -> Option<Column> {
        let name: String = name
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        match (self, name.as_str()) {
            (Self::Csv | Self::Yourls, "url") | (Self::Shlink | Self::Bitly, "longurl") => {
                Some(Column::Url)
            }
            (Self::Csv, "key") | (Self::Yourls, "keyword") | (Self::Shlink, "shortcode") => {
                Some(Column::Key)
            }
            (Self::Bitly, "link" | "bitlink") => Some(Column::ShortUrl),
            (Self::Csv, "expiresat") => Some(Column::ExpiresAt),
            (Self::Csv, "expiredurl") => Some(Column::ExpiredUrl),
            (Self::Csv, "maxclicks") => Some(Column::MaxClicks),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Shlink => "shlink",
            Self::Yourls => "yourls",
            Self::Bitly => "bitly",
        }
    }
}

/// Why a CSV file cannot be read at all.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error("the file is empty: a {format} export starts with a header row")]
    Empty { format: &'static str },
    #[error(
        "the header row ({header}) has no column of the long URL; {hint}, or pick \
         another --format"
    )]
    NoUrlColumn { header: String, hint: &'static str },
    #[error("the file could not be read: {0}")]
    Read(#[from] csv::Error),
}

/// The rows of a CSV file, read one at a time: a file of any size is never
/// held whole.
pub struct CsvRows<R> {
    reader: csv::Reader<R>,
    /// Which column holds what; `None` for columns not taken.
    columns: Vec<Option<Column>>,
    /// A first row that was a link, not a header: given out first.
    first: Option<csv::StringRecord>,
    record: csv::StringRecord,
}

impl<R: Read> CsvRows<R> {
    /// Reads the header (or, for `Format::Csv`, finds there is none).
    pub fn new(input: R, format: Format) -> Result<Self, CsvError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(input);
        let mut first = csv::StringRecord::new();
        if !reader.read_record(&mut first)? {
            return Err(CsvError::Empty {
                format: format.name(),
            });
        }
        // Spreadsheets start UTF-8 files with a byte order mark.
        let names: Vec<&str> = first
            .iter()
            .enumerate()
            .map(|(n, name)| {
                if n == 0 {
                    name.trim_start_matches('\u{feff}')
                } else {
                    name
                }
            })
            .collect();
        let columns: Vec<Option<Column>> = names.iter().map(|name| format.column(name)).collect();
        let has_url = columns.iter().any(|c| matches!(c, Some(Column::Url)));
        if has_url {
            return Ok(Self {
                reader,
                columns,
                first: None,
                record: csv::StringRecord::new(),
            });
        }
        if format == Format::Csv && columns.iter().all(Option::is_none) {
            // No header: `url[,key]`, and this first row is a link.
            return Ok(Self {
                reader,
                columns: vec![Some(Column::Url), Some(Column::Key)],
                first: Some(first),
                record: csv::StringRecord::new(),
            });
        }
        Err(CsvError::NoUrlColumn {
            header: names.join(","),
            hint: match format {
                Format::Csv => "name it url (and the key's column key)",
                Format::Shlink => "Shlink's exports name it longUrl or Long URL",
                Format::Yourls => "YOURLS names it url (and the short code keyword)",
                Format::Bitly => "Bitly's exports name it long_url (and the bitlink link)",
            },
        })
    }

    /// How far into the input reading has come, in bytes: for a progress bar.
    pub fn bytes_read(&self) -> u64 {
        self.reader.position().byte()
    }

    /// The row from one record.
    fn row(&self, record: &csv::StringRecord) -> Item {
        let mut row = Row::default();
        for (value, column) in record.iter().zip(&self.columns) {
            let Some(column) = column else { continue };
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            match column {
                Column::Url => value.clone_into(&mut row.url),
                Column::Key => row.key = Some(value.to_owned()),
                Column::ShortUrl => row.key = Some(key_of_short_url(value).to_owned()),
                Column::ExpiresAt => row.expires_at = Some(value.to_owned()),
                Column::ExpiredUrl => row.expired_url = Some(value.to_owned()),
                Column::MaxClicks => {
                    row.max_clicks = Some(value.parse().map_err(|_| {
                        Refused::from(Invalid::new(
                            Field::MaxClicks,
                            format!("max_clicks must be a whole number of clicks, not {value:?}"),
                        ))
                    })?);
                }
            }
        }
        if row.url.is_empty() {
            return Err(Invalid::new(Field::Url, "the row has no long URL").into());
        }
        Ok(row)
    }
}

impl<R: Read> Iterator for CsvRows<R> {
    /// The row's line in the file (from 1), and the row.
    type Item = (u64, Item);

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(first) = self.first.take() {
            let line = first.position().map_or(1, csv::Position::line);
            return Some((line, self.row(&first)));
        }
        let mut record = std::mem::take(&mut self.record);
        let read = self.reader.read_record(&mut record);
        let line = record
            .position()
            .map_or_else(|| self.reader.position().line(), csv::Position::line);
        let item = match read {
            Ok(false) => return None,
            Ok(true) => self.row(&record),
            Err(error) => Err(Refused::new(
                StatusCode::BAD_REQUEST,
                format!("the line could not be read as CSV: {error}"),
                None,
            )),
        };
        self.record = record;
        Some((line, item))
    }
}

/// The key in a short URL: its last path segment (`https://bit.ly/3xYz`
/// and `bit.ly/3xYz` give `3xYz`); a bare code is its own key.
fn key_of_short_url(short: &str) -> &str {
    let path = short.split(['?', '#']).next().unwrap_or(short);
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(text: &str, format: Format) -> Vec<(u64, Item)> {
        CsvRows::new(text.as_bytes(), format).unwrap().collect()
    }

    fn row(url: &str, key: Option<&str>) -> Row {
        Row {
            url: url.into(),
            key: key.map(Into::into),
            ..Row::default()
        }
    }

    #[test]
    fn a_csv_without_header_is_url_then_key() {
        let read = rows(
            "https://example.org/a,alpha\nhttps://example.org/b\n\"https://example.org/c?x=1,2\",\n",
            Format::Csv,
        );
        assert_eq!(
            read,
            vec![
                (1, Ok(row("https://example.org/a", Some("alpha")))),
                (2, Ok(row("https://example.org/b", None))),
                (3, Ok(row("https://example.org/c?x=1,2", None))),
            ]
        );
    }

    #[test]
    fn a_csv_header_names_any_of_the_link_fields() {
        let read = rows(
            "\u{feff}key,short_url,url,expires_at,expired_url,max_clicks,owner\n\
             docs,http://s/l/docs,https://example.org/docs,2030-01-01T00:00:00Z,https://example.org/,5,alice\n\
             ,,https://example.org/x,,,many,\n",
            Format::Csv,
        );
        assert_eq!(read.len(), 2);
        assert_eq!(
            read[0],
            (
                2,
                Ok(Row {
                    url: "https://example.org/docs".into(),
                    key: Some("docs".into()),
                    expires_at: Some("2030-01-01T00:00:00Z".into()),
                    expired_url: Some("https://example.org/".into()),
                    max_clicks: Some(5),
                })
            )
        );
        let (line, Err(refused)) = &read[1] else {
            panic!("{read:?}")
        };
        assert_eq!(*line, 3);
        assert_eq!(refused.code, 422);
        assert_eq!(refused.field, Some("max_clicks"));
    }

    #[test]
    fn a_row_without_url_is_refused_alone() {
        let read = rows("url,key\n,lonely\nhttps://example.org/,fine\n", Format::Csv);
        assert!(matches!(&read[0], (2, Err(r)) if r.field == Some("url")));
        assert_eq!(read[1], (3, Ok(row("https://example.org/", Some("fine")))));
    }

    #[test]
    fn each_tools_export_columns_are_read() {
        let shlink = "createdAt,domain,shortCode,shortUrl,longUrl,title,tags,visits\n\
                      2024-01-02T03:04:05+00:00,,abc123,https://s.test/abc123,https://example.org/s,Title,\"a,b\",7\n";
        assert_eq!(
            rows(shlink, Format::Shlink),
            vec![(2, Ok(row("https://example.org/s", Some("abc123"))))]
        );
        let shlink_import =
            "Long URL,Short code,Title,Domain,Tags\nhttps://example.org/i,imp1,,,\n";
        assert_eq!(
            rows(shlink_import, Format::Shlink),
            vec![(2, Ok(row("https://example.org/i", Some("imp1"))))]
        );
        let yourls = "keyword,url,title,timestamp,ip,clicks\n\
                      ozh,https://example.org/y,Y,2024-01-02 03:04:05,127.0.0.1,12\n";
        assert_eq!(
            rows(yourls, Format::Yourls),
            vec![(2, Ok(row("https://example.org/y", Some("ozh"))))]
        );
        let bitly = "id,link,long_url,title,created_at\n\
                     bit.ly/3AbCdEf,https://bit.ly/3AbCdEf,https://example.org/b,B,2024-01-02T03:04:05+0000\n";
        assert_eq!(
            rows(bitly, Format::Bitly),
            vec![(2, Ok(row("https://example.org/b", Some("3AbCdEf"))))]
        );
    }

    #[test]
    fn a_header_without_the_url_column_names_the_one_expected() {
        let error = CsvRows::new(
            "link,title\nhttps://bit.ly/x,T\n".as_bytes(),
            Format::Shlink,
        )
        .err()
        .unwrap();
        assert!(error.to_string().contains("longUrl"), "{error}");
        assert!(matches!(
            CsvRows::new("".as_bytes(), Format::Yourls).err().unwrap(),
            CsvError::Empty { format: "yourls" }
        ));
    }

    #[test]
    fn a_short_urls_key_is_its_last_segment() {
        assert_eq!(key_of_short_url("https://bit.ly/3xYz"), "3xYz");
        assert_eq!(key_of_short_url("bit.ly/3xYz/"), "3xYz");
        assert_eq!(key_of_short_url("https://s.test/a/b?utm=1"), "b");
        assert_eq!(key_of_short_url("code"), "code");
    }
}
