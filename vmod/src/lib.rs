//! `vmod_shortlink`: short links served by Varnish, looked up in Redis.
//!
//! See `API.md` (generated from the doc comments below) for the VCL API and
//! `docs/storage.md` for the storage format.

mod admission;
mod arguments;
mod backend;
mod changes;
mod clicks;
mod counting;
mod domain_redirects;
mod first_request;
mod forwarding;
mod headers;
mod limits;
mod lookups;
mod object;
mod pages;
mod stats;
mod targeting;

pub use backend::{key_of, Resolution};
pub use object::redirector;
pub(crate) use object::{now_ms, without_panic};

/// Cacheable redirects for short links stored in Redis hashes.
///
/// A key `Lm25` is looked up with `HGET short:Lm 25` (hash prefix `short:`,
/// split 2); the value is the long URL, perhaps followed by an expiry, an
/// owner and a fallback (see `docs/storage.md`). Found links
/// become a cacheable redirect, deleted and expired ones a cacheable 410
/// (or the fallback's redirect), unknown keys a cacheable 404, and a Redis
/// that does not answer a failed fetch (503) that is never cached.
///
/// ```vcl
/// import shortlink;
///
/// backend default none;
///
/// sub vcl_init {
///     new links = shortlink.redirector("redis://127.0.0.1:6380/0");
/// }
///
/// sub vcl_recv {
///     if (req.url ~ "^/l/[A-Za-z0-9_-]{3,64}$") {
///         set req.backend_hint = links.backend();
///         return (hash);
///     }
/// }
///
/// sub vcl_backend_response {
///     set beresp.ttl = links.ttl(beresp.status);
///     set beresp.grace = links.grace(beresp.status);
///     return (deliver);
/// }
/// ```
#[varnish::vmod(docs = "API.md")]
mod shortlink {
    use std::net::SocketAddr;
    use std::time::Duration;

    use shortlink_core::clicks::visits::VisitKind;
    use shortlink_core::rules::Chosen;
    use varnish::ffi::VCL_BACKEND;
    use varnish::vcl::{Ctx, LogTag, VclError};

    use crate::arguments::RedirectorArgs;
    use crate::backend::time_left;
    use crate::backend::Resolution;
    use crate::{redirector, without_panic};

    /// `url` without its query string and fragment: what a link's cache
    /// entry is hashed on, so that `/l/Lm25?utm_source=mail` is a hit on
    /// `/l/Lm25`'s redirect, while `req.url` keeps the query for
    /// `.forward_query()` and `.choose()`. No copy when there is nothing
    /// to cut.
    ///
    /// ```vcl
    /// sub vcl_hash {
    ///     hash_data(shortlink.path(req.url));
    ///     return (lookup);
    /// }
    /// ```
    pub fn path(url: &str) -> &str {
        shortlink_core::query::path_of(url)
    }

    impl redirector {
        /// Create a short-link store backed by Redis.
        ///
        /// The VCL loads even when Redis is down: connections are opened in
        /// the background and reopened by themselves whenever Redis comes
        /// back, with no reload. Counters appear in `varnishstat` as
        /// `shortlink.<object name>.*`.
        #[allow(clippy::too_many_arguments)]
        pub fn new(
            ctx: &mut Ctx,
            #[vcl_name] name: &str,
            /// Where Redis is, as a URL: `redis://[:password@]host[:port][/db]`,
            /// `redis://user:password@host:port/db`,
            /// `unix:///path/to/redis.sock?db=N&pass=secret`, or a master
            /// that Sentinels watch:
            /// `redis+sentinel://[:password@]host[:port][,host[:port]...]/master-name[/db]`
            /// (the Sentinels' addresses; port 26379 unless given). A
            /// Sentinel-named master is followed through failovers: a
            /// thread of this object listens for `+switch-master` and asks
            /// every Sentinel four times a second (the newest configuration
            /// epoch wins), and connections to a demoted master are
            /// dropped. Or a Redis Cluster:
            /// `redis+cluster://[:password@]host:port[,host:port...]` (any
            /// of its nodes; the rest are learnt from `CLUSTER SLOTS`).
            /// Each batch of lookups is then split by node and sent to all
            /// of them at once, one connection per node; `MOVED` and `ASK`
            /// are followed, and a node that is down fails only the keys of
            /// its own slots. Clicks are counted there too unless
            /// `clicks_redis` names another Redis.
            redis: &str,
            /// Start of every hash name: key `Lm25` lives in hash
            /// `<prefix>Lm`. Letters, digits and `: . _ - / { }` only;
            /// no braces when clicks are counted in a Redis Cluster, whose
            /// names carry hash tags of their own.
            #[default("short:")]
            prefix: &str,
            /// How many leading characters of a key name its hash (1 to 4);
            /// the rest of the key is the field inside that hash.
            #[default(2)]
            split: i64,
            /// How long opening a Redis connection may take. Default `200ms`.
            connect_timeout: Option<Duration>,
            /// How long Redis may take to answer a lookup, from the moment
            /// the round trip carrying it is sent (or to give a connection);
            /// past it the fetch fails with a 503, and so do the lookups
            /// queued behind it. Time spent waiting for CPU in a busy
            /// Varnish does not count: that waits, it does not fail.
            /// Default `200ms`.
            command_timeout: Option<Duration>,
            /// Most Redis connections kept open. Concurrent lookups are
            /// pipelined by one I/O thread onto one connection at a time, so
            /// a few suffice; the rest are spares while a broken one is
            /// replaced. A Redis Cluster gets one connection per node
            /// instead.
            #[default(16)]
            pool_size: i64,
            /// Status of a found link's redirect: 301 (the default), 302, 307
            /// or 308.
            #[default(301)]
            status: i64,
            /// How long Varnish caches a link's answer (see `.ttl()`): its
            /// redirect, or its 410 once deleted or expired. Default `1d`.
            /// The writer purges a link when it changes, so this can be long;
            /// a link that expires is never kept past its expiry.
            ttl: Option<Duration>,
            /// How long Varnish caches an unknown key's 404 (`.ttl()`).
            /// Default `0s`: a link stored is served at once, unpurged.
            negative_ttl: Option<Duration>,
            /// How long Varnish may serve an answer past its TTL (see
            /// `.grace()`), never past a link's expiry. Default `1d`.
            grace: Option<Duration>,
            /// A key is cached from its second request within this window
            /// (see `.admit()`); its first is answered from its lookup
            /// alone. Keys are remembered for one to two windows, in 2 MiB
            /// per object; `0s` caches every answer at its first request.
            /// At most `1d`. Default `3600s`.
            admission_window: Option<Duration>,
            /// `Cache-Control` sent to clients with the redirect of a link
            /// that does not expire. The default makes a browser ask again
            /// on every click, so an edit or a delete reaches it at once;
            /// `max-age=N` spares those clicks but leaves the browser on the
            /// old target for up to N seconds. Links that expire are always
            /// sent with `no-cache`.
            #[default("no-cache")]
            cache_control: &str,
            /// How often the clicks `.count()` gathered are sent to Redis,
            /// in one round trip. Default `1s`: a crash of Varnish loses at
            /// most that much counting.
            flush_interval: Option<Duration>,
            /// Most counts kept while Redis is away or behind (entries, not
            /// clicks); past half of it clicks count without details or
            /// visitor (`clicks_without_details`), past it they wait queued.
            #[default(1000000)]
            click_backlog: i64,
            /// Most MiB of clicks waiting for the flusher, queued or past the
            /// backlog, each at twice its size and its text's (key, user
            /// agent cut to 256 bytes, referrer host: at most 1,624 bytes); past it
            /// clicks are dropped and counted in `clicks_dropped`, but a
            /// click on a link with a click limit still counts against it.
            /// 1 to 65536.
            #[default(256)]
            click_queue_mb: i64,
            /// How long daily click counts and unique visitors are kept.
            /// Default `400d`.
            days_kept: Option<Duration>,
            /// How long hourly click counts are kept. Default `7d`.
            hours_kept: Option<Duration>,
            /// A GeoIP2 or DB-IP country database (`.mmdb`) to count
            /// clicks by country and for rules' country conditions; empty
            /// for none. It is mapped into memory when the VCL loads: put
            /// a new database in its place by renaming (as `geoipupdate`
            /// does), never by writing into it, and reload the VCL.
            #[default("")]
            geoip: &str,
            /// Where clicks are stored, as a URL like `redis`'s; empty: in
            /// the links' own Redis. Clicks are many small writes, a link is
            /// a rare one that must survive a crash: a Redis of their own
            /// may sync its file once a second (`appendfsync everysec`)
            /// while the links' Redis syncs every write, and lookups never
            /// wait behind a flush of clicks or its sync. In a Redis Cluster
            /// (`redis+cluster://`), counts take the cluster layout: a key's
            /// first character is their hash tag, `short:clicks:{L}m`.
            #[default("")]
            clicks_redis: &str,
            /// Replicas that must confirm a flush of clicks (Redis `WAIT`,
            /// within `command_timeout`) before it counts as stored; until
            /// then its clicks stay queued and are sent again, and Redis
            /// applies a batch once. With Sentinel, 1 keeps every counted
            /// click through a failover. 0 to 16; default 0.
            #[default(0)]
            replicas_to_ack: i64,
            /// Most visits kept per link in the visit log (time, referrer
            /// host, user agent, country, bot, target: some 140 bytes each
            /// in Redis), the newest; 0 keeps none. 0 to 100000; default 1000.
            #[default(1000)]
            visits_kept: i64,
            /// Most visits kept per domain across its links, and again of
            /// its orphan visits (`.count_orphan()`); 0 keeps neither. 0 to
            /// 1000000; default 10000.
            #[default(10000)]
            domain_visits_kept: i64,
            /// How long a visit stays in the log. Default `90d`.
            visit_days: Option<Duration>,
            /// Short domains besides the default one, each with its own
            /// links: their names separated by spaces, such as
            /// `"go.example s.example"`. A domain's key `Lm25` lives in
            /// hash `<prefix>go.example:Lm`; its clicks are counted under
            /// that prefix too. A fetch or a `.count()` names its domain in
            /// the request header `Shortlink-Domain`, which the VCL sets
            /// from the `Host` (and removes from what clients send);
            /// without it, the default domain's. A domain not listed here
            /// answers 404 without a lookup.
            #[default("")]
            domains: &str,
        ) -> Result<Self, VclError> {
            without_panic(
                || {
                    let args = RedirectorArgs {
                        redis,
                        prefix,
                        split,
                        connect_timeout,
                        command_timeout,
                        pool_size,
                        status,
                        ttl,
                        negative_ttl,
                        grace,
                        admission_window,
                        cache_control,
                        flush_interval,
                        click_backlog,
                        click_queue_mb,
                        days_kept,
                        hours_kept,
                        geoip,
                        clicks_redis,
                        replicas_to_ack,
                        visits_kept,
                        domain_visits_kept,
                        visit_days,
                        domains,
                    };
                    Self::build(ctx, name, &args)
                },
                || Err(VclError::Str("shortlink: internal error in vcl_init")),
            )
        }

        /// The Varnish backend that answers short-link fetches.
        ///
        /// The key is the last segment of the request path, query string
        /// ignored (`/l/Lm25?utm=x` looks up `Lm25`). It answers:
        ///
        /// - a found link: the configured status, `Location`, `Cache-Control`
        ///   and a small HTML page linking to the target; a link that
        ///   expires also sends `Expires`, and `Cache-Control: no-cache`;
        /// - a link with a click limit (`#N`): its redirect with
        ///   `Cache-Control: no-cache` and `Shortlink-Limited: 1`, which the
        ///   generated VCL makes uncacheable (each click is looked up, with a
        ///   second `HGET` of its stored clicks, to which it adds those
        ///   counted here and not stored yet) and `vcl_deliver` removes;
        /// - a deleted link, an expired one, or one that answered its click
        ///   limit, without a fallback: 410 with a small page,
        ///   `Cache-Control: no-store`; with a fallback: a 302 to it,
        ///   `Cache-Control: no-cache`;
        /// - an unknown key, a key that breaks the key rules (never sent to
        ///   Redis), or a stored value that is not a safe absolute http(s)
        ///   URL (never sent to the client): 404, `Cache-Control: no-cache`;
        /// - Redis refusing, failing or not answering within
        ///   `command_timeout`: a failed fetch, which `vcl_backend_error`
        ///   turns into a 503. It should not be cached.
        ///
        /// The backend is sick while Redis is unreachable, which VCL can
        /// read with `std.healthy()` to serve stale links longer.
        pub unsafe fn backend(&self) -> VCL_BACKEND {
            self.backend.vcl_ptr()
        }

        /// Tell the redirector that the link at `url` (a short link's path,
        /// as PURGE names it) changed. Call it where PURGE is handled, just
        /// before `return (purge)`: Varnish's purge skips an object still
        /// being fetched, so a lookup of that key already under way reads
        /// the link again instead of caching what it read before the change.
        ///
        /// ```vcl
        /// if (req.method == "PURGE") {
        ///     links.changed(req.url);
        ///     return (purge);
        /// }
        /// ```
        pub fn changed(&self, url: &str) {
            without_panic(|| self.resolver().changes.note(crate::key_of(url)), || ());
        }

        /// Count the answer being delivered, in `vcl_deliver`, for hits and
        /// misses alike: a link's redirect as a click (a bot's, for crawlers,
        /// scripts and `HEAD` requests), a 410 or an expired link's fallback
        /// as an answer for a gone link; anything else (404, 503) is not
        /// counted. Nothing is sent to Redis here: counts are gathered in
        /// memory and sent every `flush_interval` (a hot link's history at
        /// two flushes in ten) by a thread that reads the agent, referrer and
        /// country. Pass `client.ip`; it is only hashed, with a salt that
        /// changes daily, to count unique visitors, never stored. A click
        /// on a link with rules or a split counts under the target chosen.
        ///
        /// ```vcl
        /// sub vcl_deliver {
        ///     links.count(client.ip);
        /// }
        /// ```
        pub fn count(
            &self,
            ctx: &mut Ctx,
            #[shared_per_task] chosen: &mut Option<Box<Chosen>>,
            #[required] client: Option<SocketAddr>,
        ) {
            // Taken whatever happens: a target chosen is this answer's alone.
            let target = chosen.take().map(|chosen| *chosen);
            without_panic(|| self.count_answer(ctx, client, target), || ());
        }

        /// Count a visit to no link, for its domain, in `vcl_synth`: `kind`
        /// is `base_url` (the bare domain), `regular_404` (a path that is
        /// no key) or `invalid_short_url` (a key no link holds; `.count()`
        /// counts those of the links backend by itself). Counted in the
        /// domain's orphan totals and kept in its orphan visit log, within
        /// `domain_visits_kept`; nothing at all while the visit log is off.
        /// Like `.count()`, nothing reaches Redis on the request path.
        ///
        /// ```vcl
        /// sub vcl_synth {
        ///     if (resp.status == 404) {
        ///         links.count_orphan(client.ip, "regular_404");
        ///     }
        /// }
        /// ```
        pub fn count_orphan(
            &self,
            ctx: &mut Ctx,
            #[required] client: Option<SocketAddr>,
            kind: &str,
        ) -> Result<(), VclError> {
            let kind = VisitKind::from(crate::domain_redirects::kind_named("count_orphan", kind)?);
            without_panic(|| self.count_orphan_visit(ctx, client, kind), || ());
            Ok(())
        }

        /// Choose the target of a link with rules or a split, in
        /// `vcl_deliver`, before `.count()`: the URL of the first rule whose
        /// conditions the request meets, or else of the visitor's split
        /// target, or else `location` (the link's own URL). Give it the
        /// rules the redirect carries (`resp.http.Shortlink-Rules`, cached
        /// with it), `client.ip`, the request's `User-Agent` and
        /// `Accept-Language`, and `resp.http.Location`; the parameters
        /// `q.` conditions read are those of `req.url`'s query. No Redis
        /// command: the device comes from a few markers of the user agent,
        /// the country from the `geoip` database (mapped into memory when
        /// the VCL loads), and the visitor, for a split, from the address
        /// and user agent, hashed and never kept. The target chosen (`r1`,
        /// `s2`, `url`) is kept for this request alone, for `.count()` to
        /// count the click under.
        ///
        /// ```vcl
        /// if (resp.http.Shortlink-Rules) {
        ///     set resp.http.Location = links.choose(
        ///         resp.http.Shortlink-Rules, client.ip, req.http.User-Agent,
        ///         req.http.Accept-Language, resp.http.Location);
        ///     unset resp.http.Shortlink-Rules;
        ///     set resp.http.Vary = "*";
        /// }
        /// ```
        #[allow(clippy::too_many_arguments)]
        pub fn choose<'a>(
            &self,
            ctx: &Ctx,
            #[shared_per_task] chosen: &mut Option<Box<Chosen>>,
            rules: &'a str,
            #[required] client: Option<SocketAddr>,
            user_agent: &str,
            accept_language: &str,
            location: &'a str,
        ) -> &'a str {
            without_panic(
                || {
                    let (label, target) =
                        self.choose_target(ctx, rules, client, [user_agent, accept_language]);
                    *chosen = Some(Box::new(label));
                    target.unwrap_or(location)
                },
                || location,
            )
        }

        /// Look `key` up directly: the stored URL, or an empty string when
        /// the key is unknown, deleted or expired, breaks the key rules,
        /// holds a value that cannot be served, or Redis does not answer
        /// (logged as an `Error` record).
        pub fn lookup(&self, ctx: &mut Ctx, key: &str) -> String {
            let outcome = without_panic(
                || self.resolver().resolve(None, key),
                || Err("internal error".to_owned()),
            );
            match outcome {
                Ok(Resolution::Found { url, .. }) => url,
                Ok(
                    Resolution::Missing
                    | Resolution::NotStarted { .. }
                    | Resolution::Rejected(_)
                    | Resolution::Deleted
                    | Resolution::Expired { .. },
                ) => String::new(),
                Ok(Resolution::Unsafe(reason)) | Err(reason) => {
                    ctx.log(LogTag::Error, format!("shortlink: {reason}"));
                    String::new()
                }
            }
        }

        /// Give the text every `/robots.txt` this object answers ends with,
        /// once, in `vcl_init`. The backend answers a fetch whose path ends
        /// in `/robots.txt` (route only `<link path>robots.txt` there) with
        /// an `Allow: <link path><key>` line for each of the domain's
        /// crawlable links (`!c`), at most 5000, the first in byte order,
        /// then `text`; `text` alone when it has none. Without this call,
        /// the `Allow` lines alone.
        ///
        /// ```vcl
        /// sub vcl_init {
        ///     links.robots_txt({"User-agent: *
        /// Disallow: /
        /// "});
        /// }
        /// ```
        pub fn robots_txt(&self, text: &str) -> Result<(), VclError> {
            self.resolver()
                .robots_txt
                .set(text.to_owned())
                .map_err(|_| VclError::Str("shortlink: .robots_txt() was called twice"))
        }

        /// Where a visit to no link on a domain redirects: for `kind`
        /// (`base_url`: the bare domain; `regular_404`: a path that is no
        /// key; `invalid_short_url`: a key no link holds) on the domain
        /// named `domain` (`""`: the default one), the URL set while the
        /// writer runs (field `kind` of the domain's
        /// `<prefix>domain:redirects` hash), or else the one
        /// `.default_redirect()` gave; `""` for none. From memory: read as
        /// the VCL loads, in the background when a call finds the last read
        /// 10 seconds old, and at `.reload_redirects()`.
        ///
        /// ```vcl
        /// set resp.http.Location = links.domain_redirect(
        ///     req.http.Shortlink-Domain, "regular_404");
        /// ```
        pub fn domain_redirect(&self, domain: &str, kind: &str) -> Result<String, VclError> {
            self.redirect_for(domain, kind)
        }

        /// Give, in `vcl_init`, where a visit of `kind` to no link on the
        /// domain named `domain` (`""`: the default one) redirects unless a
        /// URL is set for it while the writer runs: the writer's
        /// configuration. An `http(s)` URL.
        ///
        /// ```vcl
        /// links.default_redirect("", "base_url", "https://example.org/");
        /// ```
        pub fn default_redirect(
            &self,
            domain: &str,
            kind: &str,
            url: &str,
        ) -> Result<(), VclError> {
            self.set_default_redirect(domain, kind, url)
        }

        /// Read every domain's redirects from Redis now: when the writer
        /// purges a domain's bare path, which it does after changing them.
        /// False when Redis gave no answer within the command timeout (the
        /// redirects read last stay): answer the purge with an error, and
        /// the writer sends it again.
        ///
        /// ```vcl
        /// if (!links.reload_redirects()) { return (synth(503)); }
        /// ```
        pub fn reload_redirects(&self, ctx: &mut Ctx) -> bool {
            self.reload_domain_redirects(ctx)
        }

        /// Whether the answer for this request's link may be cached, in
        /// `vcl_miss`: yes for a key asked for within the last
        /// `admission_window` (one to two windows); a key's first request
        /// is remembered, and answered by `.answer()` in `vcl_synth`, which
        /// costs the same lookup as a fetch and leaves no object for a key
        /// that may never be asked for again. Keys are told apart by
        /// `req.url`'s path and `Shortlink-Domain`, as the generated
        /// `vcl_hash` does. Always true with an `admission_window` of `0s`.
        ///
        /// ```vcl
        /// sub vcl_miss {
        ///     if (!links.admit()) { return (synth(753)); }
        ///     return (fetch);
        /// }
        /// ```
        pub fn admit(&self, ctx: &Ctx) -> bool {
            without_panic(|| self.admit_request(ctx), || true)
        }

        /// Answer a request `.admit()` did not admit, in `vcl_synth`: the
        /// key is looked up as the backend fetches it (the same `HGET`, its
        /// domain named by `Shortlink-Domain`), the status and headers the
        /// backend gives it are written into `resp`, and its page returned
        /// for `synthetic()`; deliver it as a fetched answer (rules,
        /// counting, forwarding). When Redis does not answer: status 503,
        /// no page, to be answered as `vcl_backend_error` would.
        ///
        /// ```vcl
        /// sub vcl_synth {
        ///     if (resp.status == 753) {
        ///         synthetic(links.answer());
        ///         if (resp.status == 503) { synthetic("Try again"); }
        ///         return (deliver);
        ///     }
        /// }
        /// ```
        pub fn answer(&self, ctx: &mut Ctx) -> String {
            self.answer_request(ctx)
        }

        /// Merge the query string of the request's URL (`req.url`) into
        /// the redirect's `Location`, for a link that forwards its query:
        /// call it in `vcl_deliver`. The request's parameters replace the
        /// target's of the same name and come after the target's own; the
        /// target's fragment stays last; bytes a query may not hold are
        /// percent-encoded. A request without a query, an answer without
        /// `Location` and an expired link's fallback are left as they are,
        /// so the common case costs no header write. A query over 1024
        /// bytes, or a result over the longest target (8192 bytes), is not
        /// forwarded: the redirect keeps its target, counted in
        /// `queries_dropped`.
        ///
        /// ```vcl
        /// if (resp.http.Shortlink-Forward == "+") {
        ///     links.forward_query();
        /// }
        /// ```
        pub fn forward_query(&self, ctx: &mut Ctx) {
            without_panic(|| self.forward_into_location(ctx), || ());
        }

        /// The cache TTL for a response of this object's backend with
        /// `status`: `ttl` for a link's answer (its redirect, its 410, an
        /// expired link's fallback), `negative_ttl` for 404, `0s` otherwise;
        /// never past the `Expires` of a link that expires. Use it in
        /// `vcl_backend_response`: `set beresp.ttl = links.ttl(beresp.status);`
        pub fn ttl(&self, ctx: &Ctx, status: i64) -> Duration {
            self.resolver().lifetime(status, time_left(ctx)).0
        }

        /// How long past its TTL Varnish may serve a response of this
        /// object's backend with `status`: `grace`, or `0s` where the TTL is
        /// `0s`, and never past the `Expires` of a link that expires. Use it
        /// in `vcl_backend_response`:
        /// `set beresp.grace = links.grace(beresp.status);`
        pub fn grace(&self, ctx: &Ctx, status: i64) -> Duration {
            self.resolver().lifetime(status, time_left(ctx)).1
        }
    }
}

#[cfg(test)]
mod tests;
