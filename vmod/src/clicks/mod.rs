//! Counting every answer Varnish delivers for a link, cache hits included,
//! without a Redis call on the request path.
//!
//! A worker records a click (`click`) into one of a few queues of its
//! store (`store`) and goes on; a flusher thread (`flusher`) takes the queues at
//! every flush interval, classifies the clicks (`visitor`), tallies them,
//! and sends the tallies to Redis in one pipelined round trip per node
//! (`destination`: the master, or a cluster's nodes). The queues, the
//! tallies and the flusher belong to a process-wide store, one per Redis
//! and key scheme, which outlives the VCL that made it: a reload finds the
//! same store, pending counts and all. Here: the stores of the process.

mod click;
mod destination;
mod flusher;
mod store;
mod visitor;

use std::sync::{Arc, Mutex, PoisonError};

use shortlink_core::clicks::{CountNames, Layout};
use shortlink_core::KeyScheme;

use store::Reach;

use crate::lookups::RedisPool;

pub use click::{Click, Outcome};
pub use store::{ClickStore, CountSettings, VisitBounds};
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
        .spawn(move || {
            lower_priority();
            flusher::run(&flusher_store);
        })
        .map_err(|e| format!("cannot start the click flusher thread: {e}"))?;
    stores.push(Arc::clone(&store));
    Ok(store)
}

/// How much less CPU share the flusher asks for than Varnish's workers:
/// nice 10 weighs about a tenth of nice 0. Answers go first on a saturated
/// machine, and the flusher catches up when a core is free; clicks wait in
/// the backlog meanwhile (see `docs/clicks.md`, loss bounds).
const FLUSHER_NICENESS: i32 = 10;

/// Lowers the calling thread's CPU priority by [`FLUSHER_NICENESS`]; Linux
/// keeps a niceness per thread. Left as it is if the kernel refuses.
fn lower_priority() {
    // SAFETY: plain system calls on the calling thread, no memory passed.
    unsafe {
        let thread = libc::id_t::try_from(libc::gettid()).unwrap_or_default();
        *libc::__errno_location() = 0;
        let current = libc::getpriority(libc::PRIO_PROCESS, thread);
        if *libc::__errno_location() == 0 {
            libc::setpriority(
                libc::PRIO_PROCESS,
                thread,
                (current + FLUSHER_NICENESS).min(19),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    fn own_niceness() -> i32 {
        // SAFETY: plain system calls on the calling thread.
        unsafe {
            let thread = libc::id_t::try_from(libc::gettid()).unwrap_or_default();
            libc::getpriority(libc::PRIO_PROCESS, thread)
        }
    }

    /// The flusher's thread lowers its own priority, and only its own.
    #[test]
    fn the_flusher_asks_for_less_cpu_than_the_workers() {
        let before = own_niceness();
        let lowered = std::thread::spawn(|| {
            super::lower_priority();
            own_niceness()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + super::FLUSHER_NICENESS).min(19));
        assert_eq!(own_niceness(), before, "the caller's thread is left alone");
    }
}
