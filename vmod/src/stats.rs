//! varnishstat counters, one set per `shortlink.redirector` object.

use std::sync::atomic::AtomicU64;

use varnish::VscMetric;

#[derive(VscMetric)]
#[repr(C)]
pub struct LinkStats {
    /// Keys looked up in Redis
    ///
    /// One per HGET sent; cache hits never count here.
    #[counter]
    pub lookups: AtomicU64,

    /// Round trips to Redis
    ///
    /// Concurrent lookups share one pipelined round trip: lookups divided by
    /// this is the average batch.
    #[counter]
    pub round_trips: AtomicU64,

    /// First requests of a key answered without caching it
    ///
    /// Not asked for within the admission window: answered from the
    /// lookup alone, the key remembered for the next request.
    #[counter]
    pub uncached_answers: AtomicU64,

    /// Lookups that found a link
    #[counter]
    pub found: AtomicU64,

    /// Lookups that found a deleted or expired link (410, or its fallback)
    #[counter]
    pub gone: AtomicU64,

    /// Lookups that found nothing (404)
    #[counter]
    pub not_found: AtomicU64,

    /// Lookups read again because their link changed meanwhile
    ///
    /// A PURGE of the key came while its lookup was under way; the old value
    /// must not be cached after the purge.
    #[counter]
    pub rereads: AtomicU64,

    /// Keys refused by the key rules before any lookup
    #[counter]
    pub rejected: AtomicU64,

    /// Stored values refused as redirect targets
    ///
    /// Not an absolute http(s) URL, or holding control characters: answered
    /// 404 and never written into a header.
    #[counter]
    pub unsafe_targets: AtomicU64,

    /// Lookups that failed because Redis refused, dropped or errored
    #[counter]
    pub redis_errors: AtomicU64,

    /// Lookups that got no answer within the command timeout
    #[counter]
    pub timeouts: AtomicU64,

    /// Answers counted by `.count()`
    ///
    /// Clicks taken from the request path by the flusher, across every VCL
    /// counting for this Redis since Varnish started.
    #[counter]
    pub clicks_counted: AtomicU64,

    /// Counted answers stored in Redis
    #[counter]
    pub clicks_flushed: AtomicU64,

    /// Counted answers dropped
    ///
    /// Redis was away, or slower than the clicks came, long enough for the
    /// backlog and then the click queues' memory to fill.
    #[counter]
    pub clicks_dropped: AtomicU64,

    /// Clicks by people counted without their details and visitor
    ///
    /// Tallied while the backlog was over half full (Redis away, or
    /// slower than the clicks came): in the link's totals, day, hour and
    /// minute, not in its referrers, devices, countries or unique visitors.
    #[counter]
    pub clicks_without_details: AtomicU64,

    /// Flushes of counts that failed and will be retried
    #[counter]
    pub click_flush_failures: AtomicU64,

    /// Counted answers not yet stored in the totals in Redis
    #[gauge]
    pub clicks_pending: AtomicU64,

    /// Redirects given the query string they were requested with
    #[counter]
    pub queries_forwarded: AtomicU64,

    /// Query strings not forwarded because they were too long
    ///
    /// Over 1024 bytes, or making the target longer than 8192 bytes: the
    /// redirect went to the target alone.
    #[counter]
    pub queries_dropped: AtomicU64,

    /// Deliveries of a link with rules or a split, its target chosen
    ///
    /// One per `.choose()` that found a rule table, from the cache or not;
    /// each counted click also names its target in the link's details.
    #[counter]
    pub targets_chosen: AtomicU64,
}
