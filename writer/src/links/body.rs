//! A link as the JSON API and the JSON-lines export show it.

use serde::Serialize;
use shortlink_core::ClickLimit;
use utoipa::ToSchema;

use crate::links::details::LinkDetails;
use crate::links::rules::{bodies_of, RuleBody, SplitBody};
use crate::links::shortener::Shortener;
use crate::links::store::Link;
use crate::links::validate::format_expiry;

/// A link as the API shows it. Anyone may read what following the short
/// link shows (its key, URL and short URL); the rest only its owner or an
/// admin, for whom every field is there (`null` where not set): the outer
/// `Option` says whether a field is shown, the inner one whether it is set.
#[allow(clippy::option_option)]
#[derive(Debug, Serialize, ToSchema)]
pub struct LinkBody {
    /// The short domain it is on (its canonical name): the same key on two
    /// domains is two links.
    domain: String,
    key: String,
    url: String,
    /// The short link, on its domain.
    short_url: String,
    /// RFC 3339, UTC; `null` for a link that never expires. Absent for a
    /// caller who is neither the owner nor an admin, as are the fields
    /// below.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, required = false)]
    expires_at: Option<Option<String>>,
    /// When it starts answering (RFC 3339, UTC); `null`: it answers from
    /// its creation. Before, it answers as an unknown key does.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, required = false)]
    valid_since: Option<Option<String>>,
    /// Where the link goes once expired; `null`: it answers 410.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, required = false)]
    expired_url: Option<Option<String>>,
    /// Whether the expiry has passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    expired: Option<bool>,
    /// The most people's clicks it answers before answering as expired;
    /// `null`: no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<u64>, required = false)]
    max_clicks: Option<Option<u64>>,
    /// The name of the token that created it; `null`: created without one,
    /// or by hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, required = false)]
    owner: Option<Option<String>>,
    /// Whether the query string the short link is requested with goes on
    /// to the target; `null`: as its domain does.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<bool>, required = false)]
    forward_query: Option<Option<bool>>,
    /// The rules choosing a target per request, in order (`[]`: none);
    /// the same shape a create or change takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    rules: Option<Vec<RuleBody>>,
    /// The weighted targets of the visitors no rule took (`[]`: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    split: Option<Vec<SplitBody>>,
    /// When the writer created it (RFC 3339, UTC); `null` for a link
    /// written by hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, required = false)]
    created_at: Option<Option<String>>,
    /// What it is called in listings; `null`: no title.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, required = false)]
    title: Option<Option<String>>,
    /// The words it is found by (`[]`: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    tags: Option<Vec<String>>,
    /// Whether crawlers may follow it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    crawlable: Option<bool>,
    /// Set when the change was stored but Varnish could not be told.
    #[serde(skip_serializing_if = "Option::is_none")]
    warning: Option<String>,
}

impl LinkBody {
    /// Every field: for the link's owner, an admin, or its creator.
    pub fn new(link: &Link, shortener: &Shortener) -> Self {
        let record = &link.record;
        let (rules, split) = bodies_of(&record.targeting);
        Self {
            expires_at: Some(record.expires.map(format_expiry)),
            valid_since: Some(record.starts.map(format_expiry)),
            expired_url: Some(record.expired_url.as_ref().map(ToString::to_string)),
            expired: Some(record.has_expired(std::time::SystemTime::now())),
            max_clicks: Some(record.max_clicks.map(ClickLimit::get)),
            owner: Some(record.owner.as_ref().map(ToString::to_string)),
            forward_query: Some(record.forward_query),
            rules: Some(rules),
            split: Some(split),
            ..Self::public(link, shortener)
        }
    }

    /// What following the short link shows anyone: its key and where it
    /// leads.
    pub fn public(link: &Link, shortener: &Shortener) -> Self {
        Self {
            domain: link.domain.clone(),
            key: link.key.clone(),
            url: link.record.url.to_string(),
            short_url: shortener.link_url(link),
            expires_at: None,
            valid_since: None,
            expired_url: None,
            expired: None,
            max_clicks: None,
            owner: None,
            forward_query: None,
            rules: None,
            split: None,
            created_at: None,
            title: None,
            tags: None,
            crawlable: None,
            warning: None,
        }
    }

    /// With the link's details: for whoever sees every field.
    #[must_use]
    pub fn detailed(mut self, details: &LinkDetails) -> Self {
        self.created_at = Some(
            details
                .created
                .and_then(|unix| shortlink_core::Expiry::try_from(unix).ok())
                .map(format_expiry),
        );
        self.title = Some(details.title.as_ref().map(|t| t.as_str().to_owned()));
        self.tags = Some(details.tags.iter().map(ToString::to_string).collect());
        self.crawlable = Some(details.crawlable);
        self
    }

    /// With the warning a stored change left, if any.
    #[must_use]
    pub fn warned(mut self, warning: Option<String>) -> Self {
        self.warning = warning;
        self
    }
}
