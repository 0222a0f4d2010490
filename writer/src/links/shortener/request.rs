//! The one typed request of the links area: every interface (the native
//! API, Shlink's API, the form, the command line, bulk rows) turns what it
//! was sent into a [`NewLink`] or a [`Change`], and the shortener checks
//! and applies it the same way for all.

use crate::links::rules::{RuleBody, SplitBody};

/// A link to create, as submitted.
#[derive(Debug, Default, Clone, Copy)]
pub struct NewLink<'a> {
    pub url: &'a str,
    /// A custom key; empty or `None` for a generated one.
    pub key: Option<&'a str>,
    pub expires_at: Option<&'a str>,
    /// When it starts answering (before, it answers as an unknown key).
    pub valid_since: Option<&'a str>,
    pub expired_url: Option<&'a str>,
    /// The most people's clicks it answers.
    pub max_clicks: Option<u64>,
    /// Forward the request's query string to the target (`Some(true)`),
    /// never (`Some(false)`), or as its domain does (`None`).
    pub forward_query: Option<bool>,
    /// The short domain, by its name or an alias; `None` or empty: the
    /// default domain.
    pub domain: Option<&'a str>,
    /// Rules choosing a target per request; the first that matches wins.
    pub rules: &'a [RuleBody],
    /// Weighted targets for the visitors no rule took.
    pub split: &'a [SplitBody],
    /// What the link is called in listings; empty or `None` for none.
    pub title: Option<&'a str>,
    /// Words it is found by.
    pub tags: &'a [String],
    /// Whether crawlers may follow it.
    pub crawlable: bool,
    /// When it was made, for an import (RFC 3339; empty: nobody recorded
    /// it); `None`: now.
    pub created_at: Option<&'a str>,
    /// Read its title from its target page, in the background, when it is
    /// given none: for a link created alone, not for bulk rows and imports.
    pub read_title: bool,
    /// The shortest a generated key may be, past the configured shortest
    /// (the key is still the shortest free prefix of the URL's digest from
    /// there); `None`: the configured shortest.
    pub key_length: Option<usize>,
}

/// A change to a link, as submitted: `None` leaves a part as it is;
/// `Some(None)` removes an expiry, an expired URL or a click limit.
#[derive(Debug, Default, Clone, Copy)]
pub struct Change<'a> {
    pub url: Option<&'a str>,
    pub expires_at: Option<Option<&'a str>>,
    /// `Some(None)` removes the start.
    pub valid_since: Option<Option<&'a str>>,
    pub expired_url: Option<Option<&'a str>>,
    pub max_clicks: Option<Option<u64>>,
    /// `Some(None)`: as the link's domain does.
    pub forward_query: Option<Option<bool>>,
    /// New rules, all of them; `Some(&[])` removes them.
    pub rules: Option<&'a [RuleBody]>,
    /// A new split, all of it; `Some(&[])` removes it.
    pub split: Option<&'a [SplitBody]>,
    /// A new title; `Some(None)` removes it.
    pub title: Option<Option<&'a str>>,
    /// New tags, all of them; `Some(&[])` removes them.
    pub tags: Option<&'a [String]>,
    pub crawlable: Option<bool>,
}

impl Change<'_> {
    /// Whether it changes the link's value, which Varnish reads, and not
    /// only its details.
    fn changes_value(&self) -> bool {
        self.url.is_some()
            || self.expires_at.is_some()
            || self.valid_since.is_some()
            || self.expired_url.is_some()
            || self.max_clicks.is_some()
            || self.forward_query.is_some()
            || self.rules.is_some()
            || self.split.is_some()
            || self.crawlable.is_some()
    }

    /// Whether it changes nothing at all.
    pub fn is_empty(&self) -> bool {
        !self.changes_value() && self.title.is_none() && self.tags.is_none()
    }
}
