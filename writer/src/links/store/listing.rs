//! An owner's links, a page at a time, from its index (newest first),
//! and the owners that have an index.

use crate::links::details::LinkDetails;
use crate::redis::scan::scan;
use shortlink_core::{Key, Owner, Stored};

use super::{Link, LinkStore, StoreError};

/// Most index entries one listing reads before it answers with what it
/// found: a filter that matches little must not keep Redis busy.
const LIST_BUDGET: usize = 2000;

/// Index entries read from Redis at once while listing.
const LIST_CHUNK: usize = 200;

/// One page of an owner's links, newest first.
#[derive(Debug, Default)]
pub struct Page {
    pub links: Vec<Link>,
    /// The details of each of `links`, in order.
    pub details: Vec<LinkDetails>,
    /// Where the next page starts: the index position below which entries
    /// remain unread; `None` when none do.
    pub next: Option<usize>,
}

impl LinkStore {
    /// The owners with an index, in name order; `None` stands for links
    /// created without a token.
    pub async fn owners(&self) -> Result<Vec<Option<Owner>>, StoreError> {
        let mut connection = self.connection.get()?;
        let pattern = format!("{}*", self.scheme.index(None));
        let names = scan(&mut connection, &pattern, "list").await?;
        let mut owners: Vec<Option<Owner>> = names
            .iter()
            .filter_map(|name| self.scheme.index_owner(name).ok())
            .collect();
        owners.sort();
        owners.dedup();
        Ok(owners)
    }

    /// Up to `limit` of `owner`'s links that pass `keep` (given each link
    /// and its details, read with it), newest first,
    /// from index position `before` down (from the newest when `None`).
    /// Deleted links are skipped. Reads at most [`LIST_BUDGET`] entries: a
    /// page may hold fewer links than asked and still have a next one.
    pub async fn list(
        &self,
        owner: Option<&Owner>,
        before: Option<usize>,
        limit: usize,
        keep: impl Fn(&Link, &LinkDetails) -> bool,
    ) -> Result<Page, StoreError> {
        let index = self.scheme.index(owner);
        let mut connection = self.connection.get()?;
        let mut end = match before {
            Some(before) => before,
            None => {
                redis::cmd("LLEN")
                    .arg(&index)
                    .query_async(&mut connection)
                    .await?
            }
        };
        let mut page = Page::default();
        let mut budget = LIST_BUDGET;
        while end > 0 && budget > 0 && page.links.len() < limit {
            let start = end.saturating_sub(LIST_CHUNK.min(budget));
            let keys: Vec<String> = redis::cmd("LRANGE")
                .arg(&index)
                .arg(start)
                .arg(end - 1)
                .query_async(&mut connection)
                .await?;
            let keys: Vec<Key> = keys
                .iter()
                .map(|key| self.scheme.key(key))
                .collect::<Result<_, _>>()
                .map_err(|e| StoreError::Unreadable {
                    key: index.clone(),
                    reason: e.to_string(),
                })?;
            let values = self.values_of(&mut connection, &keys).await?;
            let details = self.details_of(&keys).await?;
            let read = keys.into_iter().zip(values).zip(details);
            for (position, ((key, value), details)) in (start..end).zip(read).rev() {
                end = position;
                budget -= 1;
                let Some(Stored::Link(record)) = value.and_then(|raw| Stored::parse(&raw).ok())
                else {
                    continue;
                };
                let link = self.link(key.to_string(), record);
                if keep(&link, &details) {
                    page.links.push(link);
                    page.details.push(details);
                    if page.links.len() == limit {
                        break;
                    }
                }
            }
        }
        page.next = (end > 0).then_some(end);
        Ok(page)
    }
}
