//! Which columns of each tool's CSV files hold what: the names in a
//! header row, for this writer's own files and the other tools' exports.

use crate::links::validate::Field;

/// Where a CSV file comes from: which columns hold what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// This writer's columns (`url,key,expires_at,expired_url,max_clicks`,
    /// any subset, by header), or without a header `url[,key]`; its own
    /// export reads back.
    Csv,
    /// Shlink's short URL export (`shortCode`, `longUrl`, `domain`, ...)
    /// or import file (`Long URL`, `Short code`, `Domain`, ...); a link
    /// keeps its domain, which must be served here.
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
pub(super) enum Column {
    Url,
    Key,
    /// A short URL whose last path segment is the key.
    ShortUrl,
    ExpiresAt,
    ExpiredUrl,
    MaxClicks,
    /// The name of the token a link belongs to: taken by `shortlink import`
    /// only, which runs as an admin.
    Owner,
    /// The short domain: empty (or Shlink's `DEFAULT`) for the default one.
    Domain,
    /// `true` or `false`: whether the link forwards its request's query.
    ForwardQuery,
    /// The rules and split as stored words: `~device=ios>URL *50>URL`.
    Rules,
    ValidSince,
    Title,
    /// Tags separated by `|`, as Shlink's exports write them.
    Tags,
    /// `true` or `false`: whether crawlers may follow the link.
    Crawlable,
    /// When the link was made, RFC 3339.
    CreatedAt,
}

impl Column {
    /// The input a bad value in this column is blamed on.
    pub(super) fn field(self) -> Field {
        match self {
            Self::Url => Field::Url,
            Self::Key | Self::ShortUrl => Field::Key,
            Self::ExpiresAt => Field::ExpiresAt,
            Self::ExpiredUrl => Field::ExpiredUrl,
            Self::MaxClicks => Field::MaxClicks,
            Self::Owner => Field::Owner,
            Self::Domain => Field::Domain,
            Self::ForwardQuery => Field::ForwardQuery,
            Self::Rules => Field::Rules,
            Self::ValidSince => Field::ValidSince,
            Self::Title => Field::Title,
            Self::Tags => Field::Tags,
            Self::Crawlable => Field::Crawlable,
            Self::CreatedAt => Field::CreatedAt,
        }
    }
}

impl Format {
    /// The column a header names, by its letters and digits only, case
    /// aside: `Long URL`, `long_url` and `longUrl` are one name.
    pub(super) fn column(self, name: &str) -> Option<Column> {
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
            (Self::Csv, "owner") => Some(Column::Owner),
            (Self::Csv | Self::Shlink, "domain") => Some(Column::Domain),
            (Self::Csv, "forwardquery") => Some(Column::ForwardQuery),
            (Self::Csv, "rules") => Some(Column::Rules),
            (Self::Csv | Self::Shlink, "validsince") => Some(Column::ValidSince),
            (Self::Csv | Self::Shlink | Self::Yourls, "title") => Some(Column::Title),
            (Self::Csv | Self::Shlink, "tags") => Some(Column::Tags),
            (Self::Csv | Self::Shlink, "crawlable") => Some(Column::Crawlable),
            (Self::Csv, "createdat") | (Self::Shlink, "datecreated" | "createdat") => {
                Some(Column::CreatedAt)
            }
            _ => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Shlink => "shlink",
            Self::Yourls => "yourls",
            Self::Bitly => "bitly",
        }
    }
}
