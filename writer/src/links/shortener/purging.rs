//! Telling the Varnish nodes a change was stored: the purge of its key,
//! queued for the nodes that did not confirm it.

use std::time::SystemTime;

use crate::config::Domain;
use crate::links::shortener::Shortener;
use crate::links::store::StoreError;
use crate::varnish::purge::Route;
use crate::varnish::purge_queue::RETRY_INTERVAL;

impl Shortener {
    /// `written`, after purging the change's key when the master stored it
    /// but too few replicas confirmed it: Varnish must not keep serving the
    /// old answer of a change that is in Redis, acknowledged or not.
    pub(super) async fn purged_if_stored<T>(
        &self,
        domain: &Domain,
        written: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if let Err(StoreError::NotReplicated { key, .. }) = &written {
            let _ = self.purge(domain, key).await;
        }
        written
    }

    /// Purges `key` of `domain` on every Varnish node; queues the purge
    /// for the nodes that did not confirm it, and says so.
    pub(super) async fn purge(&self, domain: &Domain, key: &str) -> Option<String> {
        let missed = match self.nodes.route(&domain.name) {
            Some(route) => self.nodes.purge(route, key).await,
            None => self.nodes.purge(&Route::of(domain), key).await,
        };
        if missed.is_empty() {
            return None;
        }
        let kept = self.settings.config.redirect.longest_kept();
        let queued_domain = if domain.is_default() {
            ""
        } else {
            &domain.name
        };
        let queued = self
            .default_store()
            .purge_queue()
            .add(&missed, queued_domain, key, SystemTime::now() + kept)
            .await;
        let nodes = missed
            .iter()
            .map(|miss| format!("{} ({})", miss.node, miss.error))
            .collect::<Vec<_>>()
            .join("; ");
        let warning = match queued {
            Ok(()) => format!(
                "stored, but Varnish was not told at {nodes}: the purge is queued and sent \
                 again every {} s until that node confirms it, for up to {} s (after which \
                 the node holds no old answer anyway)",
                RETRY_INTERVAL.as_secs(),
                kept.as_secs()
            ),
            Err(error) => format!(
                "stored, but Varnish was not told at {nodes}, and the purge could not be \
                 queued ({error}); that node may answer with the old link for up to {} s",
                kept.as_secs()
            ),
        };
        log::warn!("{}{key}: {warning}", domain.link_path);
        Some(warning)
    }
}
