//! The visit log as the links area tells it: one typed query for every
//! API (a link's visits, a tag's, a domain's, every link's, the orphans),
//! the caller's rights checked once here, pages cut here.
//!
//! Each list is bounded where Varnish writes it (see
//! `shortlink_core::clicks::visits`), so a list is read whole and filtered
//! in memory: a domain's list is at most `domain_visits_kept` records.

use shortlink_core::clicks::visits::VisitKind;
use shortlink_core::rules::Chosen;
use shortlink_core::Key;

use crate::access::Identity;
use crate::clicks::{Totals, VisitList, VisitRecord};
use crate::config::Domain;
use crate::links::error::ShortenError;
use crate::links::shortener::Shortener;
use crate::links::store::StoreError;

/// Which visits to read.
#[derive(Debug, Clone, Copy)]
pub enum VisitScope<'a> {
    /// One link's.
    Link { domain: &'a Domain, key: &'a str },
    /// Those of every link holding the tag that the caller may see.
    Tag(&'a str),
    /// A domain's, to any of its links (the caller's own unless an admin).
    Domain(&'a Domain),
    /// Every domain's, to any link.
    Links,
    /// Visits to no link, of every domain, perhaps of one kind only.
    Orphans(Option<VisitKind>),
}

/// Which of the scope's visits, and which page of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VisitQuery {
    /// Only visits to this domain (its canonical name).
    pub domain: Option<String>,
    /// Unix seconds, both ends included.
    pub since: Option<u64>,
    pub until: Option<u64>,
    pub exclude_bots: bool,
    /// From 1 (0 reads as 1).
    pub page: usize,
    /// `None`: every visit on one page.
    pub per_page: Option<usize>,
}

/// A page of visits, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisitPage {
    pub visits: Vec<VisitRecord>,
    /// Visits the query matched over every page.
    pub total: usize,
}

impl VisitQuery {
    fn keeps(&self, visit: &VisitRecord) -> bool {
        self.domain
            .as_ref()
            .is_none_or(|domain| *domain == visit.domain)
            && self.since.is_none_or(|since| visit.seconds() >= since)
            && self.until.is_none_or(|until| visit.seconds() <= until)
            && !(self.exclude_bots && visit.bot)
    }

    /// The page asked for of `visits`, which are newest first.
    fn page_of(&self, visits: Vec<VisitRecord>) -> VisitPage {
        let total = visits.len();
        let size = self.per_page.unwrap_or(total.max(1)).max(1);
        let skip = self.page.max(1).saturating_sub(1).saturating_mul(size);
        let visits = visits.into_iter().skip(skip).take(size).collect();
        VisitPage { visits, total }
    }
}

impl Shortener {
    /// The visits of `scope` that `query` matches, newest first, for `who`.
    pub async fn visits(
        &self,
        who: &Identity,
        scope: VisitScope<'_>,
        query: &VisitQuery,
    ) -> Result<VisitPage, ShortenError> {
        let mut visits = match scope {
            VisitScope::Link { domain, key } => {
                let (link, _) = self.show_to(who, domain, key).await?;
                self.read_lists(domain, &[VisitList::Link(&link.key)])
                    .await?
            }
            VisitScope::Tag(tag) => self.tag_visits(who, tag).await?,
            VisitScope::Domain(domain) => {
                if !who.may_use(&domain.name) {
                    return Err(ShortenError::NotYours);
                }
                let visits = self.read_lists(domain, &[VisitList::Domain]).await?;
                self.own_visits(who, visits).await?
            }
            VisitScope::Links => {
                let mut visits = Vec::new();
                for domain in self.domains_of(who, None)? {
                    visits.extend(self.read_lists(domain, &[VisitList::Domain]).await?);
                }
                self.own_visits(who, visits).await?
            }
            VisitScope::Orphans(kind) => {
                if !who.admin {
                    return Err(ShortenError::NotYours);
                }
                let mut visits = Vec::new();
                for domain in &self.settings.domains {
                    visits.extend(self.read_lists(domain, &[VisitList::Orphans]).await?);
                }
                visits.retain(|visit| kind.is_none_or(|kind| visit.kind == kind));
                visits
            }
        };
        visits.retain(|visit| query.keeps(visit));
        // Lists of several links or domains, each newest first: merged.
        visits.sort_by_key(|visit| std::cmp::Reverse(visit.at_us));
        let mut page = query.page_of(visits);
        self.join_redirects(&mut page.visits).await?;
        Ok(page)
    }

    /// Names where each link visit of `visits` was sent, as its link reads
    /// now: the record of each link visited, read once per domain.
    async fn join_redirects(&self, visits: &mut [VisitRecord]) -> Result<(), ShortenError> {
        for domain in &self.settings.domains {
            let mut keys: Vec<Key> = visits
                .iter()
                .filter(|visit| visit.kind == VisitKind::Link && visit.domain == domain.name)
                .filter_map(|visit| domain.scheme.key(&visit.asked).ok())
                .collect();
            keys.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
            keys.dedup_by(|a, b| a.as_str() == b.as_str());
            if keys.is_empty() {
                continue;
            }
            let records = self.store(domain).records_of(&keys).await?;
            for visit in visits
                .iter_mut()
                .filter(|visit| visit.domain == domain.name)
            {
                let Ok(at) = keys.binary_search_by(|key| key.as_str().cmp(&visit.asked)) else {
                    continue;
                };
                visit.redirect =
                    records[at].as_ref().and_then(|record| {
                        match Chosen::from_label(&visit.target).unwrap_or(Chosen::Url) {
                            Chosen::Url => Some(record.url.to_string()),
                            chosen => record.targeting.target(chosen).map(ToString::to_string),
                        }
                    });
            }
        }
        Ok(())
    }

    /// Forgets one link's visit log, or (for an admin) every domain's
    /// orphan visits and their counts; answers how many visits went.
    pub async fn delete_visits(
        &self,
        who: &Identity,
        scope: VisitScope<'_>,
    ) -> Result<u64, ShortenError> {
        match scope {
            VisitScope::Link { domain, key } => {
                let (link, _) = self.show_to(who, domain, key).await?;
                let reader = self.store(domain).clicks();
                Ok(reader
                    .delete_visits(VisitList::Link(&link.key))
                    .await
                    .map_err(StoreError::from)?)
            }
            VisitScope::Orphans(_) if who.admin => {
                let mut deleted = 0;
                for domain in &self.settings.domains {
                    let reader = self.store(domain).clicks();
                    deleted += reader.delete_orphans().await.map_err(StoreError::from)?;
                }
                Ok(deleted)
            }
            _ => Err(ShortenError::NotYours),
        }
    }

    /// Visits to no link over every domain, counted whole: admins only
    /// (others see none).
    pub async fn orphan_totals(&self, who: &Identity) -> Result<Totals, ShortenError> {
        let mut totals = Totals::default();
        if !who.admin {
            return Ok(totals);
        }
        for domain in &self.settings.domains {
            let read = self.store(domain).clicks().orphan_totals().await;
            let read = read.map_err(StoreError::from)?;
            totals.people += read.people;
            totals.bots += read.bots;
        }
        Ok(totals)
    }

    async fn read_lists(
        &self,
        domain: &Domain,
        lists: &[VisitList<'_>],
    ) -> Result<Vec<VisitRecord>, ShortenError> {
        let reader = self.store(domain).clicks();
        let read = reader.visits(lists).await.map_err(StoreError::from)?;
        Ok(read.into_iter().flatten().collect())
    }

    /// The visits of every link holding `tag` that `who` may see.
    async fn tag_visits(
        &self,
        who: &Identity,
        tag: &str,
    ) -> Result<Vec<VisitRecord>, ShortenError> {
        let tagged: Vec<_> = (self.catalog(who, None).await?)
            .into_iter()
            .filter(|entry| entry.details.tags.iter().any(|held| held.as_str() == tag))
            .map(|entry| entry.link)
            .collect();
        let mut visits = Vec::new();
        for (domain, _, keys) in self.by_domain(&tagged) {
            let lists: Vec<VisitList> = keys
                .iter()
                .map(|key| VisitList::Link(key.as_str()))
                .collect();
            visits.extend(self.read_lists(domain, &lists).await?);
        }
        Ok(visits)
    }

    /// `visits` to links `who` may see: all of them for an admin.
    async fn own_visits(
        &self,
        who: &Identity,
        mut visits: Vec<VisitRecord>,
    ) -> Result<Vec<VisitRecord>, ShortenError> {
        if who.admin || visits.is_empty() {
            return Ok(visits);
        }
        let own: std::collections::HashSet<(String, String)> = (self.catalog(who, None).await?)
            .into_iter()
            .map(|entry| (entry.link.domain, entry.link.key))
            .collect();
        visits.retain(|visit| own.contains(&(visit.domain.clone(), visit.asked.clone())));
        Ok(visits)
    }
}
