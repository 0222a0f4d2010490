//! A domain's redirects for visits to no link (its bare path, a path that
//! is no key, a key no link holds): the configuration's, and what is set
//! while the writer runs, which wins kind by kind. Varnish reads what is
//! set again when the writer purges the domain's bare path.

use shortlink_core::{NotFoundKind, NotFoundRedirects, ValidUrl};

use crate::access::Identity;
use crate::config::Domain;
use crate::links::error::ShortenError;
use crate::links::shortener::{allowed, Shortener};
use crate::links::validate::{normalize_url, Field, Invalid};

/// A change to a domain's redirects: each kind named is set to its URL,
/// or cleared (`None` or an empty text), so that the configuration's
/// answers again; the kinds not named are kept.
#[derive(Debug, Clone, Default)]
pub struct RedirectsChange {
    /// The domain's name; `None` or empty: the default domain.
    pub domain: Option<String>,
    pub kinds: Vec<(NotFoundKind, Option<String>)>,
}

/// What a change made: the domain, what it does now, and a warning when
/// a Varnish node was not told.
#[derive(Debug)]
pub struct RedirectsSet<'s> {
    pub domain: &'s Domain,
    pub redirects: NotFoundRedirects,
    pub warning: Option<String>,
}

impl Shortener {
    /// What `domain` does with visits to no link now.
    pub async fn redirects_of(&self, domain: &Domain) -> Result<NotFoundRedirects, ShortenError> {
        let set = self.store(domain).domain_redirects().await?;
        Ok(set.or(&domain.redirects))
    }

    /// Applies `change`, for an admin or a token limited to domains that
    /// include this one: the redirects speak for everyone on the domain.
    /// Every URL is checked before anything is written.
    pub async fn set_redirects(
        &self,
        who: &Identity,
        change: RedirectsChange,
    ) -> Result<RedirectsSet<'_>, ShortenError> {
        let domain = self.domain(change.domain.as_deref().filter(|name| !name.is_empty()))?;
        allowed(who, domain)?;
        if !who.admin && who.domains.is_none() {
            return Err(ShortenError::NotDomainAdmin(domain.name.clone()));
        }
        let mut checked = Vec::with_capacity(change.kinds.len());
        for (kind, url) in change.kinds {
            let url = match url.as_deref() {
                None | Some("") => None,
                Some(text) => Some(self.redirect_url(kind, text)?),
            };
            checked.push((kind, url));
        }
        let written = self.store(domain).set_domain_redirects(&checked).await;
        self.purged_if_stored(domain, written).await?;
        let warning = self.purge(domain, "").await;
        let redirects = self.redirects_of(domain).await?;
        Ok(RedirectsSet {
            domain,
            redirects,
            warning,
        })
    }

    /// `text` as a redirect for `kind`: under the same rules as a link's URL.
    fn redirect_url(&self, kind: NotFoundKind, text: &str) -> Result<ValidUrl, Invalid> {
        normalize_url(text, &self.settings).map_err(|e| Invalid {
            field: Field::Redirect(kind),
            message: e
                .message
                .replacen("the URL", &format!("the {} redirect", kind.name()), 1),
        })
    }
}
