//! Crawlable links at the edge: the record's `!c` word lets the link's
//! redirect go without `noindex`; the domain's crawlable set, kept here
//! beside it, is what its robots.txt allows.

use shortlink_core::ROBOTS_TXT;

use crate::config::Domain;
use crate::links::error::ShortenError;
use crate::links::shortener::Shortener;

impl Shortener {
    /// Lists `key` of `domain` among its crawlable links or takes it out,
    /// then purges the domain's robots.txt if that changed the list; a
    /// purge warning, if Varnish was not told.
    pub(super) async fn keep_crawlable(
        &self,
        domain: &Domain,
        key: &str,
        crawlable: bool,
    ) -> Result<Option<String>, ShortenError> {
        let key = Self::existing_key(domain, key)?;
        let listed = self.store(domain).list_crawlable(&key, crawlable).await;
        if self.purged_if_stored(domain, listed).await? {
            Ok(self.purge(domain, ROBOTS_TXT).await)
        } else {
            Ok(None)
        }
    }
}
