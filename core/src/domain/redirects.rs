//! Where a short domain sends a visit to no link: Shlink's "not found
//! redirects", one URL for each [`NotFoundKind`].
//!
//! The writer's configuration gives each domain's defaults (compiled into
//! the VCL); what is set while it runs (Shlink's `PATCH
//! /rest/v3/domains/redirects`) is kept in Redis and wins over them, kind
//! by kind:
//!
//! ```text
//! redis-cli HSET short:domain:redirects invalid_short_url https://example.org/
//! redis-cli HSET short:go.example:domain:redirects base_url https://example.org/
//! ```
//!
//! The hash is [`crate::KeyScheme::domain_redirects`], its fields the
//! kinds' names. Varnish reads it when its VCL loads, whenever the writer
//! purges the domain's bare path, and every few seconds for changes made
//! by hand.

use crate::ValidUrl;

/// What a visit to no link asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotFoundKind {
    /// The bare domain: its link path alone.
    BaseUrl,
    /// Any other path of the short domain that is no key.
    Regular404,
    /// A key no link holds (or one not started yet).
    InvalidShortUrl,
}

impl NotFoundKind {
    pub const ALL: [Self; 3] = [Self::BaseUrl, Self::Regular404, Self::InvalidShortUrl];

    /// The name Shlink gives it (an orphan visit's `type`), which is also
    /// its field in the domain's redirects hash.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::BaseUrl => "base_url",
            Self::Regular404 => "regular_404",
            Self::InvalidShortUrl => "invalid_short_url",
        }
    }

    /// The kind `name` names.
    #[must_use]
    pub fn of_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

/// A domain's redirects for visits to no link; `None` where it has none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotFoundRedirects {
    pub base_url: Option<ValidUrl>,
    pub regular_404: Option<ValidUrl>,
    pub invalid_short_url: Option<ValidUrl>,
}

impl NotFoundRedirects {
    #[must_use]
    pub fn get(&self, kind: NotFoundKind) -> Option<&ValidUrl> {
        match kind {
            NotFoundKind::BaseUrl => self.base_url.as_ref(),
            NotFoundKind::Regular404 => self.regular_404.as_ref(),
            NotFoundKind::InvalidShortUrl => self.invalid_short_url.as_ref(),
        }
    }

    pub fn set(&mut self, kind: NotFoundKind, url: Option<ValidUrl>) {
        let place = match kind {
            NotFoundKind::BaseUrl => &mut self.base_url,
            NotFoundKind::Regular404 => &mut self.regular_404,
            NotFoundKind::InvalidShortUrl => &mut self.invalid_short_url,
        };
        *place = url;
    }

    /// These, each kind without one taken from `defaults`: what a domain
    /// whose runtime redirects are these does.
    #[must_use]
    pub fn or(&self, defaults: &Self) -> Self {
        let mut merged = Self::default();
        for kind in NotFoundKind::ALL {
            merged.set(kind, self.get(kind).or(defaults.get(kind)).cloned());
        }
        merged
    }

    /// The redirects of a hash's `(field, value)` pairs: fields that name
    /// no kind are left out, and so are values that are no valid redirect
    /// target (what was written by hand may be anything).
    pub fn of_fields<'a>(fields: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut redirects = Self::default();
        for (field, value) in fields {
            if let (Some(kind), Ok(url)) = (
                NotFoundKind::of_name(field),
                ValidUrl::try_from(value.to_owned()),
            ) {
                redirects.set(kind, Some(url));
            }
        }
        redirects
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> ValidUrl {
        ValidUrl::try_from(text.to_owned()).unwrap()
    }

    #[test]
    fn each_kind_is_named_as_shlink_names_it() {
        for kind in NotFoundKind::ALL {
            assert_eq!(NotFoundKind::of_name(kind.name()), Some(kind));
        }
        assert_eq!(NotFoundKind::of_name("link"), None);
    }

    #[test]
    fn runtime_redirects_win_kind_by_kind() {
        let set = NotFoundRedirects {
            base_url: Some(url("https://example.org/set")),
            ..NotFoundRedirects::default()
        };
        let configured = NotFoundRedirects {
            base_url: Some(url("https://example.org/configured")),
            invalid_short_url: Some(url("https://example.org/unknown")),
            regular_404: None,
        };
        let merged = set.or(&configured);
        assert_eq!(merged.base_url, set.base_url);
        assert_eq!(merged.invalid_short_url, configured.invalid_short_url);
        assert_eq!(merged.regular_404, None);
    }

    #[test]
    fn a_hash_written_by_hand_keeps_only_valid_redirects() {
        let redirects = NotFoundRedirects::of_fields([
            ("base_url", "https://example.org/"),
            ("regular_404", "javascript:alert(1)"),
            (
                "invalid_short_url",
                "https://example.org/a\r\nSet-Cookie: x",
            ),
            ("other", "https://example.org/other"),
        ]);
        assert_eq!(
            redirects,
            NotFoundRedirects {
                base_url: Some(url("https://example.org/")),
                ..NotFoundRedirects::default()
            }
        );
    }
}
