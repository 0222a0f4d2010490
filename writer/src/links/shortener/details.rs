//! A link's details (created, title, tags, crawlable) kept beside it, for
//! the shortener's operations.

use crate::config::Domain;
use crate::links::details::{LinkDetails, Tag, Title, MAX_TITLE_LEN};
use crate::links::error::ShortenError;
use crate::links::shortener::Shortener;
use crate::links::store::{Inserted, Link};
use shortlink_core::Key;

impl Shortener {
    /// Reads `link`'s title from its target page in the background, and
    /// keeps it unless the link was given one meanwhile.
    pub(super) fn read_title_later(&self, domain: &Domain, link: &Link) {
        let (Some(reader), Ok(key)) = (&self.titles, domain.scheme.key(&link.key)) else {
            return;
        };
        let store = self.store(domain).clone();
        reader.read_in_background(link.record.url.to_string(), move |text| async move {
            let text: String = text.chars().take(MAX_TITLE_LEN).collect();
            let Ok(Some(title)) = Title::of(&text) else {
                return;
            };
            let kept: Result<(), crate::links::store::StoreError> = async {
                let mut details = store
                    .details_of(std::slice::from_ref(&key))
                    .await?
                    .pop()
                    .unwrap_or_default();
                if details.title.is_none() {
                    details.title = Some(title);
                    store.keep_details(&key, &details).await?;
                }
                Ok(())
            }
            .await;
            if let Err(error) = kept {
                log::warn!("the title read for {key} could not be kept: {error}");
            }
        });
    }

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
        for (domain, at, keys) in self.by_domain(links) {
            let read = self.store(domain).details_of(&keys).await?;
            for (n, found) in at.into_iter().zip(read) {
                details[n] = found;
            }
        }
        Ok(details)
    }
}

/// Now, in Unix seconds: when a link is created.
pub(super) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}
