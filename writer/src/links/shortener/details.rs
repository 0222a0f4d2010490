//! A link's details (created, title, tags, crawlable) kept beside it, for
//! the shortener's operations.

use crate::config::Domain;
use crate::links::details::{LinkDetails, Tag, Title};
use crate::links::error::ShortenError;
use crate::links::shortener::Shortener;
use crate::links::store::{Inserted, Link};
use shortlink_core::Key;

impl Shortener {
    /// Applies a change of details to `key`'s (`None`: kept as it is).
    #[allow(clippy::option_option)]
    pub(super) async fn change_details(
        &self,
        domain: &Domain,
        key: &Key,
        title: Option<Option<Title>>,
        tags: Option<Vec<Tag>>,
        crawlable: Option<bool>,
    ) -> Result<(), ShortenError> {
        if title.is_none() && tags.is_none() && crawlable.is_none() {
            return Ok(());
        }
        let store = self.store(domain);
        let mut details = store
            .details_of(std::slice::from_ref(key))
            .await?
            .pop()
            .unwrap_or_default();
        if let Some(title) = title {
            details.title = title;
        }
        if let Some(tags) = tags {
            details.tags = tags;
        }
        if let Some(crawlable) = crawlable {
            details.crawlable = crawlable;
        }
        Ok(store.keep_details(key, &details).await?)
    }

    /// Keeps a created link's details. An existing link keeps its own,
    /// unless it has none: then a retried create whose details were not
    /// stored the first time stores them now.
    pub(super) async fn keep_new_details(
        &self,
        domain: &Domain,
        inserted: &Inserted,
        details: &LinkDetails,
    ) -> Result<(), ShortenError> {
        let store = self.store(domain);
        let key = Self::existing_key(domain, &inserted.link().key)?;
        let keep = match inserted {
            Inserted::Created(_) => true,
            Inserted::Existing(_) => store
                .details_of(std::slice::from_ref(&key))
                .await?
                .first()
                .is_none_or(LinkDetails::is_empty),
        };
        if keep {
            store.keep_details(&key, details).await?;
        }
        Ok(())
    }

    /// The details of each of `links` (each on its own domain), in one
    /// round trip per domain.
    pub async fn details(&self, links: &[Link]) -> Result<Vec<LinkDetails>, ShortenError> {
        let mut details = vec![LinkDetails::default(); links.len()];
        for domain in &self.settings.domains {
            let (at, keys): (Vec<usize>, Vec<Key>) = links
                .iter()
                .enumerate()
                .filter(|(_, link)| link.domain == domain.name)
                .filter_map(|(n, link)| Some((n, domain.scheme.key(&link.key).ok()?)))
                .unzip();
            let read = self.store(domain).details_of(&keys).await?;
            for (n, found) in at.into_iter().zip(read) {
                details[n] = found;
            }
        }
        Ok(details)
    }
}
