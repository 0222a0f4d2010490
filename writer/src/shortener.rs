//! Shortening one URL: validate, store, purge. Shared by the JSON API, the
//! web form and the command line, so all three behave the same.

use std::sync::Arc;

use actix_web::http::StatusCode;

use crate::config::Settings;
use crate::purge::Purger;
use crate::store::{Inserted, Link, LinkStore, StoreError};
use crate::validate::{check_custom_key, normalize_url, Field, Invalid};

#[derive(Debug, thiserror::Error)]
pub enum ShortenError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ShortenError {
    /// The one map from a failure to what the client is told: the HTTP
    /// status and the input to blame (none when the store failed). The
    /// JSON API and the form both answer through it.
    pub fn status_and_field(&self) -> (StatusCode, Option<Field>) {
        match self {
            Self::Invalid(invalid) => (StatusCode::UNPROCESSABLE_ENTITY, Some(invalid.field)),
            Self::Store(StoreError::KeyTaken { .. }) => (StatusCode::CONFLICT, Some(Field::Key)),
            Self::Store(StoreError::DigestExhausted) => (StatusCode::CONFLICT, Some(Field::Url)),
            Self::Store(StoreError::Unavailable(_)) => (StatusCode::SERVICE_UNAVAILABLE, None),
        }
    }
}

#[derive(Clone)]
pub struct Shortener {
    pub settings: Arc<Settings>,
    store: LinkStore,
    purger: Arc<Purger>,
}

impl Shortener {
    pub fn new(settings: Settings) -> Result<Self, StoreError> {
        let store = LinkStore::new(&settings)?;
        let purger = Arc::new(Purger::new(
            &settings.config.varnish.purge_url,
            &settings.link_path,
            settings.write_timeout(),
        ));
        Ok(Self {
            settings: Arc::new(settings),
            store,
            purger,
        })
    }

    /// Stores `url` under `key`, or under a generated key when `key` is
    /// empty or absent, then purges that key from Varnish.
    pub async fn shorten(&self, url: &str, key: Option<&str>) -> Result<Inserted, ShortenError> {
        let url = normalize_url(url, &self.settings)?;
        let key = key
            .filter(|key| !key.is_empty())
            .map(|key| check_custom_key(key, &self.settings))
            .transpose()?;
        let inserted = match &key {
            Some(key) => self.store.insert_custom(&url, key).await,
            None => self.store.insert_generated(&url).await,
        }?;
        // Even an existing link may have a 404 cached from before it was
        // stored (by hand, say): purging costs little and settles it.
        if let Err(problem) = self.purger.purge(&inserted.link().key).await {
            log::warn!(
                "stored {} but could not purge it from Varnish: {problem}",
                inserted.link().key
            );
        }
        Ok(inserted)
    }

    pub async fn get(&self, key: &str) -> Result<Option<Link>, StoreError> {
        Ok(self.store.get(key).await?.map(|url| Link {
            key: key.to_owned(),
            url,
        }))
    }

    pub fn short_url(&self, key: &str) -> String {
        self.settings.short_url(key)
    }
}
