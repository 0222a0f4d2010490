//! The `shortlink.redirector` VCL object's state, which the VCL methods
//! in `lib.rs` and the areas' `impl redirector` blocks share, and the
//! guard every entry point Varnish calls goes through.

use crate::{admission, backend, clicks, domain_redirects};

/// A `shortlink.redirector` VCL object.
#[allow(non_camel_case_types)]
pub struct redirector {
    pub(crate) backend: varnish::vcl::Backend<backend::LinkBackend, backend::Body>,
    /// The keys asked for lately, which `.admit()` lets into the cache.
    pub(crate) admission: admission::Admission,
    /// One per key space (the default domain's first), each shared with
    /// every VCL counting for the same Redis and key scheme.
    pub(crate) clicks: Vec<std::sync::Arc<clicks::ClickStore>>,
    /// The flusher generation last copied into this object's varnishstat
    /// counters.
    pub(crate) published: std::sync::atomic::AtomicU64,
    /// The country database `.choose()` reads, mapped once per VCL load.
    pub(crate) countries: Option<clicks::Countries>,
    /// The domains' redirects set while the writer runs, kept by a thread
    /// of this object.
    pub(crate) domain_redirects: domain_redirects::DomainRedirects,
}

impl redirector {
    pub(crate) fn resolver(&self) -> &backend::Resolver {
        &self.backend.get_inner().resolver
    }
}

/// Runs `work`, answering `on_panic()` instead if it panics: a panic must
/// never unwind into Varnish, where it would take the child process down.
/// Every entry point Varnish calls, and the Redis I/O thread, goes through it.
pub(crate) fn without_panic<T>(work: impl FnOnce() -> T, on_panic: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|_| on_panic())
}

/// Milliseconds since the Unix epoch, as Redis is told them (0 before it).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
