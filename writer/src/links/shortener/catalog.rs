//! Every link a caller may see, whole: with its details and click totals,
//! for listings that filter and order on any of them (Shlink's API), and
//! the changes that reach every link holding a tag.
//!
//! A catalog reads every link the caller may see (an admin's: every link
//! of the domains asked for), a page of an export at a time: fine for the
//! hundreds of thousands of links a team keeps, and the reason the native
//! listing, which pages through an owner's index, stays the way to walk a
//! store of millions.

use std::collections::BTreeMap;

use crate::access::Identity;
use crate::clicks::Totals;
use crate::links::details::{LinkDetails, Tag};
use crate::links::error::ShortenError;
use crate::links::shortener::{Change, Shortener};
use crate::links::store::Link;

/// A link with everything known of it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub link: Link,
    pub details: LinkDetails,
    pub totals: Totals,
}

/// A tag, the links holding it and their clicks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagStats {
    pub links: u64,
    pub totals: Totals,
}

/// Why a tag could not be renamed or deleted.
#[derive(Debug, thiserror::Error)]
pub enum TagError {
    #[error("no link holds the tag {0:?}")]
    NotFound(String),
    #[error(
        "links already hold the tag {0:?}: rename to a tag no link holds, or delete one of them"
    )]
    Conflict(String),
    #[error("only an admin token may rename or delete tags, which reach every link holding them")]
    NotAdmin,
    #[error(transparent)]
    Shorten(#[from] ShortenError),
}

impl Shortener {
    /// Every link `who` may change (on `domain` alone when named), with its
    /// details and totals, in export order.
    pub async fn catalog(
        &self,
        who: &Identity,
        domain: Option<&str>,
    ) -> Result<Vec<Entry>, ShortenError> {
        let mut export = self.export(who, None, domain).await?;
        let mut entries = Vec::new();
        while let Some(links) = export.next_page().await? {
            let details = self.details(&links).await?;
            let totals = self.totals(&links).await?;
            entries.extend(links.into_iter().zip(details).zip(totals).map(
                |((link, details), totals)| Entry {
                    link,
                    details,
                    totals,
                },
            ));
        }
        Ok(entries)
    }

    /// Each tag of the links `who` may change, with how many hold it and
    /// their clicks, by name.
    pub async fn tag_stats(&self, who: &Identity) -> Result<BTreeMap<Tag, TagStats>, ShortenError> {
        let mut stats: BTreeMap<Tag, TagStats> = BTreeMap::new();
        for entry in self.catalog(who, None).await? {
            for tag in entry.details.tags {
                let counted = stats.entry(tag).or_default();
                counted.links += 1;
                counted.totals.people += entry.totals.people;
                counted.totals.bots += entry.totals.bots;
            }
        }
        Ok(stats)
    }

    /// Renames `old` to `new` on every link holding it (admins only).
    pub async fn rename_tag(&self, who: &Identity, old: &str, new: &str) -> Result<(), TagError> {
        let old = tag_named(old)?;
        let new = tag_named(new)?;
        // One read for both questions: who holds the old tag, and the new.
        let either = self
            .holding(who, |tags| tags.contains(&old) || tags.contains(&new))
            .await?;
        if !either.iter().any(|entry| entry.details.tags.contains(&old)) {
            return Err(TagError::NotFound(old.to_string()));
        }
        if old != new && either.iter().any(|entry| entry.details.tags.contains(&new)) {
            return Err(TagError::Conflict(new.to_string()));
        }
        // No link holds the new tag (or it is the old one): all hold the old.
        let holding = either;
        self.retag(who, holding, |tags| {
            for tag in tags.iter_mut().filter(|tag| **tag == old) {
                tag.clone_from(&new);
            }
        })
        .await
    }

    /// Removes each of `tags` from every link holding it (admins only);
    /// tags no link holds are no error, as they are gone already.
    pub async fn delete_tags(&self, who: &Identity, tags: &[String]) -> Result<(), TagError> {
        let tags = tags
            .iter()
            .map(|tag| tag_named(tag))
            .collect::<Result<Vec<_>, _>>()?;
        let holding = self
            .holding(who, |held| held.iter().any(|tag| tags.contains(tag)))
            .await?;
        self.retag(who, holding, |held| held.retain(|tag| !tags.contains(tag)))
            .await
    }

    /// The links `who` may change whose tags pass `wanted`, in one read;
    /// only admins change tags.
    async fn holding(
        &self,
        who: &Identity,
        wanted: impl Fn(&[Tag]) -> bool,
    ) -> Result<Vec<Entry>, TagError> {
        if !who.admin {
            return Err(TagError::NotAdmin);
        }
        Ok(self
            .catalog(who, None)
            .await?
            .into_iter()
            .filter(|entry| wanted(&entry.details.tags))
            .collect())
    }

    /// Gives each of `entries` the tags `change` makes of its own.
    async fn retag(
        &self,
        who: &Identity,
        entries: Vec<Entry>,
        change: impl Fn(&mut Vec<Tag>),
    ) -> Result<(), TagError> {
        for entry in entries {
            let mut tags = entry.details.tags;
            change(&mut tags);
            let texts: Vec<String> = tags.into_iter().map(String::from).collect();
            let domain = self.domain(Some(&entry.link.domain))?;
            let edit = Change {
                tags: Some(&texts),
                ..Change::default()
            };
            self.edit(who, domain, &entry.link.key, &edit, None).await?;
        }
        Ok(())
    }
}

/// `name` as a tag; refused as a tag a link may hold is.
fn tag_named(name: &str) -> Result<Tag, ShortenError> {
    Ok(Tag::try_from(name.to_owned())?)
}
