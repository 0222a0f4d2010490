//! The domain's crawlable keys, which its robots.txt allows: the sorted
//! set [`shortlink_core::KeyScheme::crawlable`] names, every member at
//! score 0.

use shortlink_core::{Key, ROBOTS_TXT};

use super::{LinkStore, StoreError};

impl LinkStore {
    /// Lists `key` among the crawlable keys, or takes it out; whether that
    /// changed the set. Acknowledged as the link's own changes are.
    pub async fn list_crawlable(&self, key: &Key, crawlable: bool) -> Result<bool, StoreError> {
        let name = self.scheme.crawlable();
        let mut connection = self.write_connection()?;
        let changed: u64 = if crawlable {
            redis::cmd("ZADD")
                .arg(&name)
                .arg(0)
                .arg(key.as_str())
                .query_async(&mut connection)
                .await?
        } else {
            redis::cmd("ZREM")
                .arg(&name)
                .arg(key.as_str())
                .query_async(&mut connection)
                .await?
        };
        // Not replicated: what is purged then is the robots.txt it changes.
        self.replicated(&mut connection, ROBOTS_TXT, &name).await?;
        Ok(changed > 0)
    }
}
