//! Counting every answer Varnish delivers for a link, cache hits included,
//! without a Redis call on the request path.
//!
//! A worker records a click into one of a few queues of its store
//! (`store`) and goes on; a flusher thread (`flusher`) takes the queues at
//! every flush interval, classifies the clicks (`visitor`), tallies them,
//! and sends the tallies to Redis in one pipelined round trip per node
//! (`destination`: the master, or a cluster's nodes). The queues, the
//! tallies and the flusher belong to a process-wide store, one per Redis
//! and key scheme, which outlives the VCL that made it: a reload finds the
//! same store, pending counts and all. Here: the stores of the process.

mod destination;
mod flusher;
mod store;
mod visitor;

use std::sync::{Arc, Mutex, PoisonError};

use shortlink_core::clicks::{CountNames, Layout};
use shortlink_core::KeyScheme;

use store::Reach;

use crate::lookups::RedisPool;

pub use store::{Click, ClickStore, CountSettings, Outcome};
pub use visitor::{referrer_host, Countries};

/// Every store of the process; never emptied, so a store outlives every
/// VCL and its counts survive reloads.
static STORES: Mutex<Vec<Arc<ClickStore>>> = Mutex::new(Vec::new());

/// The store counting for `redis_url` and `scheme`, made (with its flusher
/// thread) on first use; `settings` and `mirror` (the links' Redis, when
/// clicks have a Redis of their own) replace those of an existing one.
pub fn store_for(
    redis_url: &str,
    scheme: &KeyScheme,
    settings: CountSettings,
    mirror: Option<Arc<RedisPool>>,
) -> Result<Arc<ClickStore>, String> {
    let mut stores = STORES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(store) = stores
        .iter()
        .find(|s| s.redis_url == redis_url && s.names.scheme() == scheme)
    {
        store.set(settings, mirror);
        return Ok(Arc::clone(store));
    }
    let (reach, layout) = match redis_url.parse() {
        Ok(redis_target::Target::Cluster(cluster)) => (Reach::Cluster(cluster), Layout::Cluster),
        _ => (
            Reach::Master(redis_target::Locator::open(
                redis_url,
                settings.redis_timeouts(),
            )?),
            Layout::Plain,
        ),
    };
    let names = CountNames::new(scheme, layout).map_err(|e| e.to_string())?;
    let store = Arc::new(ClickStore::new(redis_url, reach, names, settings, mirror));
    let flusher_store = Arc::clone(&store);
    std::thread::Builder::new()
        .name("shortlink-clicks".to_owned())
        .spawn(move || flusher::run(&flusher_store))
        .map_err(|e| format!("cannot start the click flusher thread: {e}"))?;
    stores.push(Arc::clone(&store));
    Ok(store)
}
