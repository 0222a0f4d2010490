//! The domain's redirects for visits to no link, set while the writer
//! runs: the hash [`shortlink_core::KeyScheme::domain_redirects`], one
//! field per [`NotFoundKind`] that has one. Varnish reads it again when
//! the domain's bare path is purged.

use shortlink_core::{NotFoundKind, NotFoundRedirects, ValidUrl};

use super::{LinkStore, StoreError};

impl LinkStore {
    /// What is set; a value that is no valid redirect (written by hand)
    /// reads as none, as Varnish reads it.
    pub async fn domain_redirects(&self) -> Result<NotFoundRedirects, StoreError> {
        let mut connection = self.connection.get()?;
        let fields: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(self.scheme.domain_redirects())
            .query_async(&mut connection)
            .await?;
        Ok(NotFoundRedirects::of_fields(
            fields
                .iter()
                .map(|(field, value)| (field.as_str(), value.as_str())),
        ))
    }

    /// Sets each kind `changes` gives a URL and clears each it gives none,
    /// in one transaction; acknowledged as a link's changes are.
    pub async fn set_domain_redirects(
        &self,
        changes: &[(NotFoundKind, Option<ValidUrl>)],
    ) -> Result<(), StoreError> {
        let name = self.scheme.domain_redirects();
        let mut transaction = redis::pipe();
        transaction.atomic();
        for (kind, url) in changes {
            match url {
                Some(url) => transaction.hset(&name, kind.name(), url.as_str()).ignore(),
                None => transaction.hdel(&name, kind.name()).ignore(),
            };
        }
        let mut connection = self.write_connection()?;
        let (): () = transaction.query_async(&mut connection).await?;
        // Not replicated: what is purged then is the bare path, which has
        // Varnish read them again.
        self.replicated(&mut connection, "", &name).await
    }
}
