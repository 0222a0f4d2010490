//! Many links at once: a page of a listing, walked domain by domain, owner
//! by owner, and the export of every link a caller may change.

use shortlink_core::Owner;

use crate::access::Identity;
use crate::config::Domain;
use crate::links::details::{LinkDetails, Tag};
use crate::links::error::ShortenError;
use crate::links::shortener::{check_limit, Shortener};
use crate::links::store::{Export, Link};
use crate::links::validate::{Field, Invalid};

/// What to list: a page of at most `limit` links, from `cursor` on,
/// whose key, URL, title or a tag contains `search`, holding the tag
/// `tag`; admins may name one `owner`; one `domain` (a name or an alias),
/// or every domain the caller may use.
#[derive(Debug, Default, Clone, Copy)]
pub struct ListQuery<'a> {
    pub limit: usize,
    pub cursor: Option<&'a str>,
    pub search: Option<&'a str>,
    pub owner: Option<&'a str>,
    pub domain: Option<&'a str>,
    pub tag: Option<&'a str>,
}

/// A page of links, and the cursor of the next page if there is one.
#[derive(Debug)]
pub struct Listing {
    pub links: Vec<Link>,
    /// The details of each of `links`, in order.
    pub details: Vec<LinkDetails>,
    pub next_cursor: Option<String>,
}

impl Shortener {
    /// A page of the links `who` may change: its own, or for an admin
    /// everyone's (one owner's with `query.owner`), domain by domain in the
    /// configuration's order, owner by owner in name order, each newest
    /// first.
    pub async fn list(
        &self,
        who: &Identity,
        query: &ListQuery<'_>,
    ) -> Result<Listing, ShortenError> {
        check_limit(query.limit)?;
        let domains = self.domains_of(who, query.domain)?;
        let resume = query.cursor.map(parse_cursor).transpose()?;
        let start = match &resume {
            Some(resume) => {
                let named = match resume.domain.as_str() {
                    "" => self.domain(None)?.name.as_str(),
                    name => name,
                };
                domains
                    .iter()
                    .position(|domain| domain.name == named)
                    .ok_or_else(bad_cursor)?
            }
            None => 0,
        };
        let search = query.search.map(str::to_lowercase);
        let tag = query
            .tag
            .map(|tag| Tag::try_from(tag.to_owned()))
            .transpose()?;
        let keep = |link: &Link, details: &LinkDetails| {
            search
                .as_deref()
                .is_none_or(|search| found_by(link, details, search))
                && tag.as_ref().is_none_or(|tag| details.tags.contains(tag))
        };
        let mut links = Vec::new();
        let mut details = Vec::new();
        for (d, domain) in domains.iter().enumerate().skip(start) {
            let store = self.store(domain);
            let owners: Vec<Option<Owner>> = match (who.admin, query.owner) {
                (true, Some(owner)) => vec![Some(owner_named(owner)?)],
                (true, None) => store.owners().await?,
                (false, Some(owner)) if owner != who.owner.as_str() => {
                    return Err(ShortenError::NotYours)
                }
                (false, _) => vec![Some(who.owner.clone())],
            };
            // A cursor's owner and position belong to its own domain only.
            let (start_owner, before) = match &resume {
                Some(resume) if d == start => (Some(&resume.owner), resume.before),
                _ => (None, None),
            };
            let from = start_owner.map_or(0, |start| {
                owners.partition_point(|owner| owner.as_ref() < start.as_ref())
            });
            for (n, owner) in owners.iter().enumerate().skip(from) {
                // A cursor's position belongs to its own owner's index only.
                let resumes = n == from && start_owner == Some(owner);
                let before = if resumes { before } else { None };
                let page = store
                    .list(owner.as_ref(), before, query.limit - links.len(), keep)
                    .await?;
                links.extend(page.links);
                details.extend(page.details);
                if let Some(next) = page.next {
                    return Ok(Listing {
                        links,
                        details,
                        next_cursor: Some(cursor(domain, owner.as_ref(), Some(next))),
                    });
                }
                if links.len() == query.limit {
                    let next_cursor = match owners.get(n + 1) {
                        Some(next) => Some(cursor(domain, next.as_ref(), None)),
                        None => domains.get(d + 1).map(|next| cursor(next, None, None)),
                    };
                    return Ok(Listing {
                        links,
                        details,
                        next_cursor,
                    });
                }
            }
        }
        Ok(Listing {
            links,
            details,
            next_cursor: None,
        })
    }

    /// Every link `who` may change, a page at a time, domain by domain (or
    /// on `domain` alone): an admin's export holds every link in the store
    /// (written by hand too), or `owner`'s alone; anyone else's the links
    /// of its token.
    pub async fn export(
        &self,
        who: &Identity,
        owner: Option<&str>,
        domain: Option<&str>,
    ) -> Result<Export, ShortenError> {
        let owner = match (who.admin, owner) {
            (true, owner) => owner.map(owner_named).transpose()?,
            (false, Some(owner)) if owner != who.owner.as_str() => {
                return Err(ShortenError::NotYours)
            }
            (false, _) => Some(who.owner.clone()),
        };
        let mut exports = Vec::new();
        for domain in self.domains_of(who, domain)? {
            let store = self.store(domain);
            exports.push(match (who.admin, &owner) {
                (true, None) => store.export_all().await?,
                (_, owner) => store.export_owned(owner.as_ref()),
            });
        }
        Ok(Export::chain(exports))
    }
}

/// Whether `search` (in lower case) is part of `link`'s key, URL, title or
/// one of its tags, case aside: what every listing's search looks in.
pub fn found_by(link: &Link, details: &LinkDetails, search: &str) -> bool {
    link.key.to_lowercase().contains(search)
        || link.record.url.as_str().to_lowercase().contains(search)
        || details
            .title
            .as_ref()
            .is_some_and(|title| title.as_str().to_lowercase().contains(search))
        || details
            .tags
            .iter()
            .any(|held| held.as_str().to_lowercase().contains(search))
}

fn owner_named(name: &str) -> Result<Owner, Invalid> {
    Owner::try_from(name).map_err(|e| Invalid::new(Field::Owner, e.to_string()))
}

/// A listing's cursor: the domain's canonical name, the owner, then the
/// index position to go on below (nothing: from that owner's newest).
fn cursor(domain: &Domain, owner: Option<&Owner>, before: Option<usize>) -> String {
    format!(
        "{}/{}/{}",
        domain.name,
        owner.map_or("", Owner::as_str),
        before.map(|b| b.to_string()).unwrap_or_default()
    )
}

/// Where a listing goes on: a domain, an owner's index there (`None`:
/// links created without a token), below a position or from its newest.
#[derive(Debug, PartialEq, Eq)]
struct Resume {
    /// The domain's canonical name; empty for the default domain, as
    /// cursors given out before domains existed (`owner/position`) mean.
    domain: String,
    owner: Option<Owner>,
    before: Option<usize>,
}

fn bad_cursor() -> Invalid {
    Invalid::new(
        Field::Cursor,
        "the cursor is not one this API gave out (for this domain); start again without one",
    )
}

fn parse_cursor(text: &str) -> Result<Resume, Invalid> {
    let mut parts: Vec<&str> = text.split('/').collect();
    let (domain, owner, before) = match parts.as_mut_slice() {
        [domain, owner, before] if !domain.is_empty() => (*domain, *owner, *before),
        [owner, before] => ("", *owner, *before),
        _ => return Err(bad_cursor()),
    };
    let owner = if owner.is_empty() {
        None
    } else {
        Some(Owner::try_from(owner).map_err(|_| bad_cursor())?)
    };
    let before = if before.is_empty() {
        None
    } else {
        Some(before.parse().map_err(|_| bad_cursor())?)
    };
    Ok(Resume {
        domain: domain.to_owned(),
        owner,
        before,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    fn domains() -> Settings {
        let config = toml::from_str("[[domains]]\nbase_url = \"https://go.example/\"").unwrap();
        Settings::new(config).unwrap()
    }

    #[test]
    fn cursors_read_back_with_their_domain() {
        let settings = domains();
        let alice = Owner::try_from("alice").unwrap();
        for domain in &settings.domains {
            for (owner, before) in [(Some(&alice), Some(7)), (None, None), (Some(&alice), None)] {
                let text = cursor(domain, owner, before);
                assert_eq!(
                    parse_cursor(&text).unwrap(),
                    Resume {
                        domain: domain.name.clone(),
                        owner: owner.cloned(),
                        before
                    },
                    "{text}"
                );
            }
        }
        for bad in [
            "", "alice", "a b/1", "alice/x", "alice/-1", "/alice/1", "a/b/c/d",
        ] {
            assert!(parse_cursor(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_cursor_from_before_domains_goes_on_in_the_default_domain() {
        assert_eq!(
            parse_cursor("alice/7").unwrap(),
            Resume {
                domain: String::new(),
                owner: Some(Owner::try_from("alice").unwrap()),
                before: Some(7)
            }
        );
    }
}
