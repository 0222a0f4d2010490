//! The links' details ([`LinkDetails`]) beside their values, in the hash
//! and field [`shortlink_core::KeyScheme::meta_slot`] names.

use shortlink_core::Key;

use crate::links::details::LinkDetails;

use super::{LinkStore, StoreError};

impl LinkStore {
    /// The details of each of `keys`, in one round trip (empty for a link
    /// without any).
    pub async fn details_of(&self, keys: &[Key]) -> Result<Vec<LinkDetails>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut lookups = redis::pipe();
        for key in keys {
            let slot = self.scheme.meta_slot(key);
            lookups.cmd("HGET").arg(&slot.hash).arg(slot.field);
        }
        let mut connection = self.connection.get()?;
        let stored: Vec<Option<String>> = lookups.query_async(&mut connection).await?;
        Ok(stored
            .iter()
            .map(|json| {
                json.as_deref()
                    .map(LinkDetails::from_json)
                    .unwrap_or_default()
            })
            .collect())
    }

    /// Keeps `details` as `key`'s, replacing what it had; empty details
    /// remove the field. Acknowledged as the link's own changes are.
    pub async fn keep_details(&self, key: &Key, details: &LinkDetails) -> Result<(), StoreError> {
        let slot = self.scheme.meta_slot(key);
        let mut connection = self.write_connection()?;
        if details.is_empty() {
            redis::cmd("HDEL")
                .arg(&slot.hash)
                .arg(slot.field)
                .query_async::<()>(&mut connection)
                .await?;
        } else {
            redis::cmd("HSET")
                .arg(&slot.hash)
                .arg(slot.field)
                .arg(details.to_json())
                .query_async::<()>(&mut connection)
                .await?;
        }
        self.replicated(&mut connection, key.as_str(), &slot.hash)
            .await
    }
}
