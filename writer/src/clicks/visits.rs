//! Reading the visit log Varnish writes (names and records in
//! `shortlink_core::clicks::visits`): a link's list, the domain's, its
//! orphans', and the orphans' counts. Every list is bounded where it is
//! written, so a read takes a list whole and filters it here.

use redis::RedisResult;
use shortlink_core::clicks::visits::{Visit, VisitKind};
use shortlink_core::clicks::CountNames;

use super::{ClickReader, Totals};

/// One visit as read, its texts owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisitRecord {
    /// Unix microseconds: visits sort by it.
    pub at_us: u64,
    pub kind: VisitKind,
    pub bot: bool,
    /// ISO 3166 code; empty when not known.
    pub country: String,
    /// The label of the target chosen (`url`, `r1`, `s2`), or empty.
    pub target: String,
    /// The key, or an orphan's path.
    pub asked: String,
    /// The referrer's host; empty for none.
    pub referrer: String,
    pub agent: String,
    /// The canonical name of the domain visited.
    pub domain: String,
    /// Where a link's visit was sent, as the link reads now (its URL, or
    /// the target its rules or split chose); `None` until the links area
    /// looks it up, and for orphans and links gone since.
    pub redirect: Option<String>,
}

/// Which list to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VisitList<'k> {
    Link(&'k str),
    Domain,
    Orphans,
}

impl VisitRecord {
    /// The visit's time in whole Unix seconds.
    pub fn seconds(&self) -> u64 {
        self.at_us / 1_000_000
    }
}

impl ClickReader {
    fn list_name(&self, list: VisitList<'_>) -> String {
        match list {
            VisitList::Link(key) => self.names.visits(key),
            VisitList::Domain => self.names.domain_visits(),
            VisitList::Orphans => self.names.orphan_visits(),
        }
    }

    /// The visits of each of `lists`, newest first, in one round trip.
    pub async fn visits(&self, lists: &[VisitList<'_>]) -> RedisResult<Vec<Vec<VisitRecord>>> {
        if lists.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for list in lists {
            pipe.lrange(self.list_name(*list), 0, -1);
        }
        let mut connection = self.connection.get()?;
        let read: Vec<Vec<String>> = pipe.query_async(&mut connection).await?;
        Ok(read
            .iter()
            .map(|records| {
                records
                    .iter()
                    .filter_map(|record| Visit::parse(record))
                    .map(|visit| self.owned(&visit))
                    .collect()
            })
            .collect())
    }

    fn owned(&self, visit: &Visit<'_>) -> VisitRecord {
        VisitRecord {
            at_us: visit.at_us,
            kind: visit.kind,
            bot: visit.bot,
            country: visit.country.to_owned(),
            target: visit.target.to_owned(),
            asked: visit.asked.to_owned(),
            referrer: visit.referrer.to_owned(),
            agent: visit.agent.to_owned(),
            domain: self.domain.clone(),
            redirect: None,
        }
    }

    /// Deletes `list`, answering how many visits it held.
    pub async fn delete_visits(&self, list: VisitList<'_>) -> RedisResult<u64> {
        let name = self.list_name(list);
        let mut connection = self.connection.get()?;
        let (held, _): (u64, u64) = redis::pipe()
            .atomic()
            .llen(&name)
            .del(&name)
            .query_async(&mut connection)
            .await?;
        Ok(held)
    }

    /// The domain's orphan visits, counted whole (not only those kept).
    pub async fn orphan_totals(&self) -> RedisResult<Totals> {
        let mut connection = self.connection.get()?;
        let counts: std::collections::HashMap<String, u64> = redis::cmd("HGETALL")
            .arg(self.names.orphan_counts())
            .query_async(&mut connection)
            .await?;
        let mut totals = Totals::default();
        for kind in VisitKind::ORPHANS {
            let count = |bot| {
                CountNames::orphan_field(kind, bot)
                    .and_then(|field| counts.get(&field).copied())
                    .unwrap_or(0)
            };
            totals.people += count(false);
            totals.bots += count(true);
        }
        Ok(totals)
    }

    /// Forgets the domain's orphan visits and their counts, in one
    /// transaction; answers how many visits the log held.
    pub async fn delete_orphans(&self) -> RedisResult<u64> {
        let list = self.list_name(VisitList::Orphans);
        let mut connection = self.connection.get()?;
        let (held, _): (u64, u64) = redis::pipe()
            .atomic()
            .llen(&list)
            .del(&[list.as_str(), self.names.orphan_counts().as_str()])
            .query_async(&mut connection)
            .await?;
        Ok(held)
    }
}
