//! Many links at once. The bulk API, the form's CSV upload and
//! `shortlink import` read rows of links (JSON items, or CSV in this
//! writer's columns or another shortener's export) and create each one as
//! a single insert would, answering one result per row in input order.

use std::io::Read;

use futures_util::{Stream, StreamExt as _};
use serde::Serialize;
use shortlink_core::Owner;

mod columns;
mod lines;

use columns::Column;
pub use columns::Format;
use lines::LineCounter;

use crate::access::Caller;
use crate::error_code::ErrorCode;
use crate::links::rules::{parse_words, RuleBody, SplitBody};
use crate::links::shortener::{NewLink, ShortenError, Shortener, Written};
use crate::links::store::{Inserted, StoreError};
use crate::links::validate::{Field, Invalid};

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
    /// When it starts answering.
    pub valid_since: Option<String>,
    pub expired_url: Option<String>,
    pub max_clicks: Option<u64>,
    /// Whose the link is, as an export names it: honoured by `shortlink
    /// import` (an admin), never by the API, where links are the token's.
    pub owner: Option<String>,
    /// The short domain, by its name or an alias; `None`: the default one.
    pub domain: Option<String>,
    /// Whether the link forwards its request's query; `None`: as its
    /// domain does.
    pub forward_query: Option<bool>,
    /// Rules choosing a target per request, and the weighted split.
    pub rules: Vec<RuleBody>,
    pub split: Vec<SplitBody>,
    /// What the link is called in listings.
    pub title: Option<String>,
    /// Words it is found by.
    pub tags: Vec<String>,
    /// Whether crawlers may follow it.
    pub crawlable: bool,
    /// When it was made, as an export says (empty: nobody recorded it);
    /// `None`: now.
    pub created_at: Option<String>,
}

impl Row {
    pub fn new_link(&self) -> NewLink<'_> {
        NewLink {
            url: &self.url,
            key: self.key.as_deref(),
            expires_at: self.expires_at.as_deref(),
            valid_since: self.valid_since.as_deref(),
            expired_url: self.expired_url.as_deref(),
            max_clicks: self.max_clicks,
            forward_query: self.forward_query,
            domain: self.domain.as_deref(),
            rules: &self.rules,
            split: &self.split,
            title: self.title.as_deref(),
            tags: &self.tags,
            crawlable: self.crawlable,
            created_at: self.created_at.as_deref(),
            key_length: None,
            read_title: false,
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
    /// A row refused with `reason`: its `code` is the status that answers
    /// it.
    pub fn new(reason: ErrorCode, error: String, field: Option<Field>) -> Self {
        Self {
            code: reason.status(),
            error,
            field: field.map(Field::name),
            retry_after_s: None,
        }
    }

    /// Whether the row's key holds another link already.
    pub fn is_conflict(&self) -> bool {
        self.code == ErrorCode::KeyTaken.status() && self.field == Some(Field::Key.name())
    }
}

impl From<Invalid> for Refused {
    fn from(invalid: Invalid) -> Self {
        Self::new(
            ErrorCode::InvalidInput,
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
    /// The short domain it is on (its canonical name).
    pub domain: String,
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

/// Creates every row of `items` as [`Shortener::create_as`] does one, for
/// `caller`, or with `rows_name_owners` for the owner a row names (an
/// admin's import): the outcomes come in the order of the rows, each with
/// the tag its row came with (a line number, say). A row whose custom key
/// holds exactly that link already is `Existing`.
pub fn create_all<'a, T: 'a>(
    shortener: &'a Shortener,
    caller: Caller,
    rows_name_owners: bool,
    items: impl Stream<Item = (T, Item)> + 'a,
) -> impl Stream<Item = (T, RowOutcome)> + 'a {
    items
        .map(move |(tag, item)| {
            let caller = caller.clone();
            async move {
                let outcome = match item {
                    Ok(row) => create_row(shortener, &row, caller, rows_name_owners).await,
                    Err(refused) => RowOutcome::Refused(refused),
                };
                (tag, outcome)
            }
        })
        .buffered(BULK_CONCURRENCY)
}

async fn create_row(
    shortener: &Shortener,
    row: &Row,
    caller: Caller,
    rows_name_owners: bool,
) -> RowOutcome {
    if let Caller::TokenHolder(who) = &caller {
        let domain = shortener.domain(row.domain.as_deref());
        if let Err(error) = domain.and_then(|domain| crate::links::shortener::allowed(who, domain))
        {
            return RowOutcome::Refused(refused_for(&error));
        }
    }
    let owner = caller.owner();
    let owner = match row.owner.as_deref().filter(|_| rows_name_owners) {
        Some(name) => match Owner::try_from(name) {
            Ok(named) => Some(named),
            Err(error) => {
                return RowOutcome::Refused(Invalid::new(Field::Owner, error.to_string()).into())
            }
        },
        None => owner,
    };
    let made = |link: &crate::links::store::Link| Made {
        domain: link.domain.clone(),
        key: link.key.clone(),
        short_url: shortener.link_url(link),
        url: link.record.url.to_string(),
    };
    let new = row.new_link();
    match shortener.create(&new, owner.clone()).await {
        Ok(Written {
            outcome: Inserted::Created(link),
            ..
        }) => RowOutcome::Created(made(&link)),
        Ok(Written {
            outcome: Inserted::Existing(link),
            ..
        }) => RowOutcome::Existing(made(&link)),
        Err(error @ ShortenError::Store(StoreError::KeyTaken { .. })) => {
            match shortener.holding_already(&new, owner).await {
                Ok(Some(link)) => RowOutcome::Existing(made(&link)),
                _ => RowOutcome::Refused(refused_for(&error)),
            }
        }
        Err(error) => RowOutcome::Refused(refused_for(&error)),
    }
}

impl From<ShortenError> for Refused {
    fn from(error: ShortenError) -> Self {
        refused_for(&error)
    }
}

fn refused_for(error: &ShortenError) -> Refused {
    let (code, field, message) = error.answer();
    Refused::new(code, message, field)
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

/// Why a bulk request's CSV is refused whole.
#[derive(Debug)]
pub enum BatchError {
    Unreadable(CsvError),
    /// It holds more than [`MAX_BULK_LINKS`] rows.
    TooMany,
}

/// The rows of a bulk request's CSV (the API's or the form's upload): at
/// most [`MAX_BULK_LINKS`], counted as they are read.
pub fn csv_batch(body: &[u8]) -> Result<Vec<(u64, Item)>, BatchError> {
    let rows: Vec<(u64, Item)> = CsvRows::new(body, Format::Csv)
        .map_err(BatchError::Unreadable)?
        .take(MAX_BULK_LINKS + 1)
        .collect();
    if rows.len() > MAX_BULK_LINKS {
        return Err(BatchError::TooMany);
    }
    Ok(rows)
}

/// The rows of a CSV file, read one at a time: a file of any size is never
/// held whole.
pub struct CsvRows<R> {
    reader: csv::Reader<LineCounter<R>>,
    /// Which column holds what; `None` for columns not taken.
    columns: Vec<Option<Column>>,
    /// Whether the file has a header; without one a row is `url[,key]`.
    headed: bool,
    /// A first row that was a link, not a header: given out first.
    first: Option<csv::ByteRecord>,
    record: csv::ByteRecord,
    format: Format,
}

impl<R: Read> CsvRows<R> {
    /// Reads the header (or, for `Format::Csv`, finds there is none).
    pub fn new(input: R, format: Format) -> Result<Self, CsvError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(LineCounter::new(input));
        let mut first = csv::ByteRecord::new();
        if !reader.read_byte_record(&mut first)? {
            return Err(CsvError::Empty {
                format: format.name(),
            });
        }
        let names: Vec<String> = first
            .iter()
            .map(|name| String::from_utf8_lossy(name).into_owned())
            .collect();
        let columns: Vec<Option<Column>> = names.iter().map(|name| format.column(name)).collect();
        if columns.contains(&Some(Column::Url)) {
            return Ok(Self {
                reader,
                columns,
                headed: true,
                first: None,
                record: csv::ByteRecord::new(),
                format,
            });
        }
        if format == Format::Csv && columns.iter().all(Option::is_none) {
            // No header: `url[,key]`, and this first row is a link.
            return Ok(Self {
                reader,
                columns: vec![Some(Column::Url), Some(Column::Key)],
                headed: false,
                first: Some(first),
                record: csv::ByteRecord::new(),
                format,
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

    /// The row from one record. Only the columns taken must be UTF-8: a
    /// title in another encoding does not cost its row.
    fn row(&self, record: &csv::ByteRecord) -> Item {
        if !self.headed && record.len() > self.columns.len() {
            return Err(Invalid::new(
                Field::Url,
                format!(
                    "a line without a header row holds url[,key], but this one has {} fields: \
                     quote a URL that holds a comma, or add a header row",
                    record.len()
                ),
            )
            .into());
        }
        let mut row = Row::default();
        if self.columns.contains(&Some(Column::CreatedAt)) {
            // A file that says when its links were made: an empty cell is
            // a link whose making nobody recorded.
            row.created_at = Some(String::new());
        }
        for (value, column) in record.iter().zip(&self.columns) {
            let Some(column) = column else { continue };
            let lossy;
            let value = match (column, std::str::from_utf8(value)) {
                (Column::Title, Err(_)) => {
                    lossy = String::from_utf8_lossy(value);
                    Ok(&*lossy)
                }
                (_, decoded) => decoded,
            };
            let value = value
                .map_err(|_| {
                    Refused::from(Invalid::new(
                        column.field(),
                        format!("the {} column is not UTF-8 text", column.field().name()),
                    ))
                })?
                .trim();
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
                Column::Owner => row.owner = Some(value.to_owned()),
                // Shlink names its default domain so in some exports.
                Column::Domain if value.eq_ignore_ascii_case("default") => {}
                Column::Domain => row.domain = Some(value.to_owned()),
                Column::ForwardQuery => {
                    row.forward_query = Some(value.parse().map_err(|_| {
                        Refused::from(Invalid::new(
                            Field::ForwardQuery,
                            format!("forward_query must be true or false, not {value:?}"),
                        ))
                    })?);
                }
                Column::Rules => {
                    (row.rules, row.split) = parse_words(value).map_err(|bad| {
                        Refused::new(ErrorCode::BadRule, bad.to_string(), Some(bad.field()))
                    })?;
                }
                Column::ValidSince => row.valid_since = Some(value.to_owned()),
                Column::CreatedAt => row.created_at = Some(value.to_owned()),
                Column::Title => row.title = Some(value.to_owned()),
                Column::Tags => {
                    // Shlink's exports join tags with `,`, this writer's
                    // with `|` (a tag may hold a comma here).
                    let separators: &[char] = match self.format {
                        Format::Shlink => &['|', ','],
                        _ => &['|'],
                    };
                    row.tags = value
                        .split(separators)
                        .map(str::trim)
                        .filter(|tag| !tag.is_empty())
                        .map(str::to_owned)
                        .collect();
                }
                Column::Crawlable => {
                    row.crawlable = value.parse().map_err(|_| {
                        Refused::from(Invalid::new(
                            Field::Crawlable,
                            format!("crawlable must be true or false, not {value:?}"),
                        ))
                    })?;
                }
            }
        }
        if row.url.is_empty() {
            return Err(Invalid::new(Field::Url, "the row has no long URL").into());
        }
        Ok(row)
    }

    /// The line (from 1) of the record that starts at `byte`.
    fn line_of(&mut self, record: &csv::ByteRecord) -> u64 {
        let byte = record
            .position()
            .map_or_else(|| self.reader.position().byte(), csv::Position::byte);
        self.reader.get_mut().line_at(byte)
    }
}

impl<R: Read> Iterator for CsvRows<R> {
    /// The row's line in the file (from 1), and the row.
    type Item = (u64, Item);

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(first) = self.first.take() {
            let line = self.line_of(&first);
            return Some((line, self.row(&first)));
        }
        let mut record = std::mem::take(&mut self.record);
        let read = self.reader.read_byte_record(&mut record);
        let line = self.line_of(&record);
        let item = match read {
            Ok(false) => return None,
            Ok(true) => self.row(&record),
            Err(error) => Err(Refused::new(
                ErrorCode::BadCsv,
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
            "\u{feff}key,short_url,url,expires_at,expired_url,max_clicks,owner,domain,forward_query,rules\n\
             docs,http://s/l/docs,https://example.org/docs,2030-01-01T00:00:00Z,https://example.org/,5,alice,go.example,true,~device=ios>https://a.example/ *5>https://b.example/\n\
             ,,https://example.org/x,,,many,,,,\n",
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
                    owner: Some("alice".into()),
                    domain: Some("go.example".into()),
                    forward_query: Some(true),
                    rules: vec![RuleBody {
                        device: vec!["ios".into()],
                        url: "https://a.example/".into(),
                        ..RuleBody::default()
                    }],
                    split: vec![SplitBody {
                        weight: 5,
                        url: "https://b.example/".into(),
                    }],
                    ..Row::default()
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
    fn shlinks_domain_column_is_kept() {
        let shlink = "createdAt,domain,shortCode,shortUrl,longUrl,title,tags,visits\n\
                      2024-01-02T03:04:05+00:00,go.example,abc,https://go.example/abc,https://example.org/a,,,1\n\
                      2024-01-02T03:04:05+00:00,DEFAULT,abd,https://s.test/abd,https://example.org/b,,,1\n";
        let read = rows(shlink, Format::Shlink);
        let domains: Vec<Option<&str>> = read
            .iter()
            .map(|(_, row)| row.as_ref().unwrap().domain.as_deref())
            .collect();
        assert_eq!(domains, [Some("go.example"), None]);
    }

    #[test]
    fn each_tools_export_columns_are_read() {
        let shlink = "createdAt,domain,shortCode,shortUrl,longUrl,title,tags,visits\n\
                      2024-01-02T03:04:05+00:00,,abc123,https://s.test/abc123,https://example.org/s,Title,\"a,b\",7\n";
        assert_eq!(
            rows(shlink, Format::Shlink),
            vec![(
                2,
                Ok(Row {
                    title: Some("Title".into()),
                    tags: vec!["a".into(), "b".into()],
                    created_at: Some("2024-01-02T03:04:05+00:00".into()),
                    ..row("https://example.org/s", Some("abc123"))
                })
            )]
        );
        let shlink_import =
            "Long URL,Short code,Title,Domain,Tags\nhttps://example.org/i,imp1,,,\n";
        // Its empty title and tags are none.
        assert_eq!(
            rows(shlink_import, Format::Shlink),
            vec![(2, Ok(row("https://example.org/i", Some("imp1"))))]
        );
        let yourls = "keyword,url,title,timestamp,ip,clicks\n\
                      ozh,https://example.org/y,Y,2024-01-02 03:04:05,127.0.0.1,12\n";
        assert_eq!(
            rows(yourls, Format::Yourls),
            vec![(
                2,
                Ok(Row {
                    title: Some("Y".into()),
                    ..row("https://example.org/y", Some("ozh"))
                })
            )]
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
    fn lines_are_the_files_own_after_crlf_blank_lines_and_quoted_newlines() {
        let lines = |text: &str| -> Vec<u64> {
            CsvRows::new(text.as_bytes(), Format::Csv)
                .unwrap()
                .map(|(line, _)| line)
                .collect()
        };
        assert_eq!(
            lines("url,key\r\nhttps://a/,k1\r\n\r\nhttps://b/,k2\r\n"),
            [2, 4]
        );
        assert_eq!(lines("https://a/\n\n\nhttps://b/\nhttps://c/"), [1, 4, 5]);
        assert_eq!(
            lines("url,key\n\"https://a/\nx\",k\nhttps://b/,k2\n"),
            [2, 4]
        );
        assert_eq!(lines("\n\nurl\r\n\r\n\r\nhttps://a/\r\n"), [6]);
    }

    #[test]
    fn a_line_without_header_with_more_fields_is_refused_not_cut() {
        let read = rows(
            "https://example.org/?ids=1,abc,def\nhttps://example.org/ok,key1\n",
            Format::Csv,
        );
        let (1, Err(refused)) = &read[0] else {
            panic!("{read:?}")
        };
        assert!(refused.error.contains("quote a URL"), "{refused:?}");
        assert_eq!(
            read[1],
            (2, Ok(row("https://example.org/ok", Some("key1"))))
        );
    }

    #[test]
    fn only_the_columns_taken_must_be_utf8() {
        let latin1_title = b"keyword,url,title\nk1,https://example.org/y,caf\xe9\nk\xe92,https://example.org/z,t\n";
        let read: Vec<(u64, Item)> = CsvRows::new(&latin1_title[..], Format::Yourls)
            .unwrap()
            .collect();
        // A title in another encoding keeps its row, its bytes replaced.
        assert_eq!(
            read[0],
            (
                2,
                Ok(Row {
                    title: Some("caf\u{fffd}".into()),
                    ..row("https://example.org/y", Some("k1"))
                })
            )
        );
        assert!(
            matches!(&read[1], (3, Err(r)) if r.field == Some("key")),
            "{read:?}"
        );
    }

    #[test]
    fn an_export_names_its_owner_for_an_import() {
        let read = rows(
            "url,key,owner\nhttps://example.org/o,own1,alice\n",
            Format::Csv,
        );
        let (2, Ok(got)) = &read[0] else {
            panic!("{read:?}")
        };
        assert_eq!(got.owner.as_deref(), Some("alice"));
        // Other tools' owners are no token names here.
        let read = rows(
            "keyword,url,owner\nk,https://example.org/,bob\n",
            Format::Yourls,
        );
        assert!(matches!(&read[0], (2, Ok(row)) if row.owner.is_none()));
    }

    #[test]
    fn a_short_urls_key_is_its_last_segment() {
        assert_eq!(key_of_short_url("https://bit.ly/3xYz"), "3xYz");
        assert_eq!(key_of_short_url("bit.ly/3xYz/"), "3xYz");
        assert_eq!(key_of_short_url("https://s.test/a/b?utm=1"), "b");
        assert_eq!(key_of_short_url("code"), "code");
    }
}
