//! The native backend: turns a fetch of `/any/path/<key>` into a redirect,
//! a 404, or a failed fetch, without any HTTP server behind Varnish.

mod robots;

pub use robots::is_robots_txt;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use shortlink_core::{
    DomainName, Expiry, HeaderValue, KeyScheme, RedirectStatus, Slot, Stored, Ttl,
};
use smallvec::SmallVec;
use varnish::vcl::{Ctx, HttpHeaders, LogTag, StrOrBytes, VclBackend, VclError};
use varnish::Vsc;

use crate::changes::Changes;
use crate::clicks::ClickStore;
use crate::lookups::{LookupError, RedisPool};
pub use crate::pages::Body;
use crate::pages::{redirect_page, CHOSEN_PAGE, DELETED_PAGE, EXPIRED_PAGE, NOT_FOUND_PAGE};
use crate::stats::LinkStats;

/// What the VCL author configured, checked once in `vcl_init`.
pub struct Settings {
    pub spaces: KeySpaces,
    pub status: RedirectStatus,
    pub ttl: Duration,
    pub negative_ttl: Duration,
    pub grace: Duration,
    pub cache_control: HeaderValue,
}

/// The key spaces of the short domains: the default domain's (the
/// configured prefix), then one per other domain, in the order the VCL
/// lists them. Few, and compared by name once per fetch or click.
pub struct KeySpaces {
    default: KeyScheme,
    others: Vec<(DomainName, KeyScheme)>,
}

/// The request header naming a link's domain; the VCL sets it from `Host`.
pub const DOMAIN_HEADER: &str = "Shortlink-Domain";

impl KeySpaces {
    /// `default` and the domains named in `list` (names separated by spaces).
    pub fn new(default: KeyScheme, list: &str) -> Result<Self, shortlink_core::DomainError> {
        let others = shortlink_core::domain::parse_domain_list(list)?
            .into_iter()
            .map(|name| {
                let scheme = default.for_domain(&name);
                (name, scheme)
            })
            .collect();
        Ok(Self { default, others })
    }

    /// The default domain's scheme, whose key rules every domain shares.
    pub fn default_scheme(&self) -> &KeyScheme {
        &self.default
    }

    /// Every scheme, the default domain's first: index `n` is space `n`.
    pub fn schemes(&self) -> impl Iterator<Item = &KeyScheme> {
        std::iter::once(&self.default).chain(self.others.iter().map(|(_, scheme)| scheme))
    }

    /// Every domain's name (`""` for the default one) with its scheme.
    pub fn named(&self) -> impl Iterator<Item = (&str, &KeyScheme)> {
        std::iter::once(("", &self.default)).chain(
            self.others
                .iter()
                .map(|(name, scheme)| (name.as_str(), scheme)),
        )
    }

    /// The space of the domain a request names (`None`: the default one),
    /// with its index; `None` for a domain this object does not serve.
    pub fn of(&self, domain: Option<&str>) -> Option<(usize, &KeyScheme)> {
        match domain {
            None => Some((0, &self.default)),
            Some(name) => self
                .others
                .iter()
                .position(|(known, _)| known.as_str() == name)
                .map(|index| (index + 1, &self.others[index].1)),
        }
    }
}

/// Header of a link's redirect that says whether the request's query
/// string is forwarded (`+`) or not (`-`), when the link says so itself;
/// without it, its domain decides. `vcl_deliver` reads and removes it.
pub const FORWARD_MARK: &str = "Shortlink-Forward";

/// `Cache-Control` of every answer a browser must not reuse for a later
/// click: a link that expires, an expired link's fallback, a 404.
const ASK_AGAIN: &str = "no-cache";

/// Header of a link's redirect carrying its rules and split as stored:
/// cached with the redirect, read by `.choose()` at each delivery, and
/// removed by `vcl_deliver` before the client sees it.
pub const RULES_MARK: &str = "Shortlink-Rules";

/// `Cache-Control` of a redirect whose target depends on the request
/// (device, country, language, query, time, visitor): `private` keeps it
/// out of every shared cache, which would hand one visitor's target to
/// the next; `no-cache` makes the browser ask again at every click, when
/// the time or its address may have changed.
pub const PER_REQUEST: &str = "private, no-cache";

/// Header marking an expired link's redirect to its fallback, so that
/// `.count()` counts it as an answer for a gone link; `vcl_deliver` removes
/// it before the client sees it.
pub const EXPIRED_MARK: &str = "Shortlink-Expired";

/// Header marking an answer of a link with a click limit that must be
/// looked up again at the next click: its redirect (`.count()` then holds
/// the click as pending until Redis has it), or its expired answer while
/// the limit is reached only with clicks not stored yet. The VCL keeps
/// these out of the cache; `vcl_deliver` removes the header before the
/// client sees it.
pub const LIMITED_MARK: &str = "Shortlink-Limited";

/// Status of an expired link's redirect to its fallback: temporary, as the
/// link may be given a new expiry.
const FALLBACK_STATUS: u16 = 302;

/// Outcome of resolving one key, before it is written into a response.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The key holds a safe redirect target, until its expiry if it has one.
    Found {
        url: String,
        expires: Option<Expiry>,
        /// It has a click limit, not reached yet.
        limited: bool,
        /// Whether it forwards the request's query string, if it says.
        forward_query: Option<bool>,
        /// Its rules and split as stored, if it has any: the target is
        /// chosen from them at each delivery.
        targeting: Option<String>,
        /// Crawlers may follow it (`!c`): no `noindex`.
        crawlable: bool,
    },
    /// The link has expired, or answered its click limit: it redirects to
    /// its fallback, if it has one, or answers 410.
    Expired {
        fallback: Option<String>,
        /// The limit was reached only with clicks not stored yet, some of
        /// which may be bots' (not counted against it): not to be cached.
        unsettled: bool,
    },
    /// The key was deleted: 410.
    Deleted,
    /// Nothing stored under the key.
    Missing,
    /// A link that starts later: answered as [`Self::Missing`] is, and kept
    /// no later than its start.
    NotStarted { starts: Expiry },
    /// The key breaks the key rules; Redis was not asked.
    Rejected(String),
    /// The stored value is not a safe absolute http(s) URL; it is never sent.
    Unsafe(String),
}

impl Resolution {
    /// An answer of a link with a click limit that the next click must look
    /// up again (see [`LIMITED_MARK`]).
    fn looked_up_at_every_click(&self) -> bool {
        matches!(
            self,
            Self::Found { limited: true, .. }
                | Self::Expired {
                    unsettled: true,
                    ..
                }
        )
    }
}

/// Everything the backend and the VCL methods share.
pub struct Resolver {
    pub settings: Settings,
    /// The links' Redis; shared with the click stores, which copy limited
    /// links' people's totals there when clicks have a Redis of their own.
    pub pool: Arc<RedisPool>,
    /// The pool of the Redis that holds the clicks, when that is not the
    /// links' own: click limits read a limited link's stored clicks there
    /// only while the links' Redis has no copy of them yet.
    pub click_pool: Option<RedisPool>,
    pub stats: Vsc<LinkStats>,
    pub changes: Changes,
    /// The clicks counted here and not yet stored, for click limits: one
    /// store per key space, in the order of [`KeySpaces::schemes`].
    pub clicks: Vec<Arc<ClickStore>>,
    /// What robots.txt ends with, from `.robots_txt()` in `vcl_init`.
    pub robots_txt: std::sync::OnceLock<String>,
}

/// Reads of one key in one lookup at most: a link changed twice during
/// its own lookup is rare, and a third change is not waited for.
const MAX_READS: usize = 3;

impl Resolver {
    /// Resolves `key` of the domain named `domain` (`None`: the default
    /// one) with one `HGET`, or up to `MAX_READS` when its link changes
    /// meanwhile; `Err` means Redis gave no answer.
    pub fn resolve(&self, domain: Option<&str>, key: &str) -> Result<Resolution, String> {
        let stats = &self.stats;
        let Some((space, scheme)) = self.settings.spaces.of(domain) else {
            stats.rejected.fetch_add(1, Ordering::Relaxed);
            return Ok(Resolution::Rejected(format!(
                "the domain {domain:?} is not among this object's domains"
            )));
        };
        let slot = match scheme.locate(key) {
            Ok(slot) => slot,
            Err(error) => {
                stats.rejected.fetch_add(1, Ordering::Relaxed);
                return Ok(Resolution::Rejected(error.to_string()));
            }
        };
        let mut reads = 1;
        let outcome = loop {
            let mark = self.changes.mark();
            stats.lookups.fetch_add(1, Ordering::Relaxed);
            let outcome = self.pool.hget(&slot);
            // What was read may predate a change whose PURGE came while this
            // lookup was under way, and that purge skipped the object being
            // fetched: read again, or the old answer would be cached.
            if outcome.is_err() || reads == MAX_READS || !self.changes.changed_since(key, mark) {
                break outcome;
            }
            stats.rereads.fetch_add(1, Ordering::Relaxed);
            reads += 1;
        };
        // The I/O thread counts round trips but cannot hold the Vsc (it is
        // not Send): each lookup publishes the count.
        stats
            .round_trips
            .store(self.pool.round_trips(), Ordering::Relaxed);
        match outcome {
            Ok(Some(value)) => {
                let stored = std::str::from_utf8(&value)
                    .map_err(|_| "value is not UTF-8".to_owned())
                    .and_then(|value| Stored::parse(value).map_err(|e| e.to_string()));
                match stored {
                    Ok(stored) => self.judge(space, key, stored, SystemTime::now()),
                    Err(reason) => {
                        stats.unsafe_targets.fetch_add(1, Ordering::Relaxed);
                        Ok(Resolution::Unsafe(format!(
                            "stored value of HGET {} {} refused: {reason}",
                            slot.hash, slot.field
                        )))
                    }
                }
            }
            Ok(None) => {
                stats.not_found.fetch_add(1, Ordering::Relaxed);
                Ok(Resolution::Missing)
            }
            Err(error) => Err(self.failed(&slot, &error)),
        }
    }

    /// Counts a lookup Redis did not answer; the reason, for the log.
    pub(crate) fn failed(&self, slot: &Slot<'_>, error: &LookupError) -> String {
        if matches!(error, LookupError::Timeout(_)) {
            self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
        } else {
            self.stats.redis_errors.fetch_add(1, Ordering::Relaxed);
        }
        format!("HGET {} {}: {error}", slot.hash, slot.field)
    }

    /// What `key`'s stored value means at `now`, counted. A link with a
    /// click limit costs a second `HGET`, of its people's clicks.
    fn judge(
        &self,
        space: usize,
        key: &str,
        stored: Stored,
        now: SystemTime,
    ) -> Result<Resolution, String> {
        let stats = &self.stats;
        let record = match stored {
            Stored::Deleted => {
                stats.gone.fetch_add(1, Ordering::Relaxed);
                return Ok(Resolution::Deleted);
            }
            Stored::Link(record) => record,
        };
        if !record.has_started(now) {
            if let Some(starts) = record.starts {
                stats.not_found.fetch_add(1, Ordering::Relaxed);
                return Ok(Resolution::NotStarted { starts });
            }
        }
        let mut unsettled = false;
        let ended = record.has_expired(now)
            || match record.max_clicks {
                Some(limit) => {
                    let (stored, pending) = self.clicks_of(space, key)?;
                    unsettled = limit.left(stored) > 0;
                    limit.left(stored.saturating_add(pending)) == 0
                }
                None => false,
            };
        if ended {
            stats.gone.fetch_add(1, Ordering::Relaxed);
            return Ok(Resolution::Expired {
                fallback: record.expired_url.map(|url| url.to_string()),
                unsettled,
            });
        }
        stats.found.fetch_add(1, Ordering::Relaxed);
        Ok(Resolution::Found {
            url: record.url.to_string(),
            expires: record.expires,
            limited: record.max_clicks.is_some(),
            forward_query: record.forward_query,
            targeting: (!record.targeting.is_empty())
                .then(|| record.targeting.to_string().trim_start().to_owned()),
            crawlable: record.crawlable,
        })
    }

    /// How long Varnish keeps an answer of this backend with `status`, and
    /// then how long it may serve it stale: `ttl` and `grace` for links
    /// (also deleted and expired ones) and robots.txt (the only 200),
    /// `negative_ttl` for 404, nothing for anything else, and no grace without a TTL
    /// ([`Ttl::grace_after`]). A link that expires `left` from now is never
    /// kept past that moment, grace included.
    pub fn lifetime(&self, status: i64, left: Option<Duration>) -> (Duration, Duration) {
        let settings = &self.settings;
        let (ttl, grace) = if status == 404 {
            (settings.negative_ttl, settings.grace)
        } else if status == i64::from(settings.status.code())
            || status == i64::from(FALLBACK_STATUS)
            || status == 410
            || status == 200
        {
            (settings.ttl, settings.grace)
        } else {
            (Duration::ZERO, Duration::ZERO)
        };
        let grace = Ttl::grace_after(ttl, grace);
        match left {
            Some(left) => {
                let ttl = ttl.min(left);
                (ttl, grace.min(left.saturating_sub(ttl)))
            }
            None => (ttl, grace),
        }
    }

    fn respond(&self, ctx: &mut Ctx) -> Result<Option<Body>, VclError> {
        let (domain, key) = link_of(ctx.http_bereq.as_ref());
        if is_robots_txt(&key) {
            return self.respond_robots_txt(ctx, domain.as_deref());
        }
        let resolution = self
            .resolve(domain.as_deref(), &key)
            .map_err(VclError::new)?;
        let beresp = ctx
            .http_beresp
            .as_mut()
            .ok_or("shortlink: backend called without a backend response")?;
        let body = self.write_answer(&resolution, beresp)?;
        log_refusal(ctx, resolution);
        Ok(Some(Body::new(body.into_bytes())))
    }

    /// Writes `resolution`'s status and headers into `http` (a backend
    /// response, or a synthetic one for a request not cached) and returns
    /// its page: what a link's answer is, in one place for both. A write
    /// that fails half-way (out of workspace), or panics, takes back the
    /// headers it wrote, so that no target or mark is left on what is
    /// answered instead.
    pub fn write_answer(
        &self,
        resolution: &Resolution,
        http: &mut HttpHeaders,
    ) -> Result<String, VclError> {
        let mut answer = Answer {
            http,
            written: SmallVec::new(),
            complete: false,
        };
        let page = self.fill_answer(resolution, &mut answer)?;
        answer.complete = true;
        Ok(page)
    }

    fn fill_answer(
        &self,
        resolution: &Resolution,
        http: &mut Answer<'_, '_>,
    ) -> Result<String, VclError> {
        let body = match resolution {
            Resolution::Found {
                url,
                expires,
                limited,
                forward_query,
                targeting,
                crawlable,
            } => {
                http.set_status(self.settings.status.code());
                http.set_header("Location", url)?;
                if *crawlable {
                    http.set_header(robots::CRAWLABLE_MARK, "1")?;
                }
                if let Some(forward) = forward_query {
                    http.set_header(FORWARD_MARK, if *forward { "+" } else { "-" })?;
                }
                if let Some(expires) = expires {
                    http.set_header("Expires", &expires.http_date())?;
                }
                // Whatever browsers may keep for other links, they must ask
                // again for one that ends at a set moment or click; and no
                // cache but the browser may keep one whose target depends
                // on the request.
                let cache_control = if targeting.is_some() {
                    PER_REQUEST
                } else if expires.is_some() || *limited {
                    ASK_AGAIN
                } else {
                    self.settings.cache_control.as_str()
                };
                http.set_header("Cache-Control", cache_control)?;
                if let Some(targeting) = targeting {
                    http.set_header(RULES_MARK, targeting)?;
                    // One page for every visitor: it names no target.
                    CHOSEN_PAGE.to_owned()
                } else {
                    redirect_page(url)
                }
            }
            Resolution::Expired {
                fallback: Some(url),
                ..
            } => {
                http.set_status(FALLBACK_STATUS);
                http.set_header("Location", url)?;
                http.set_header(EXPIRED_MARK, "1")?;
                http.set_header("Cache-Control", ASK_AGAIN)?;
                redirect_page(url)
            }
            Resolution::Expired { fallback: None, .. } | Resolution::Deleted => {
                http.set_status(410);
                // Gone now, but the owner may give the link a new expiry.
                http.set_header("Cache-Control", "no-store")?;
                if matches!(resolution, Resolution::Deleted) {
                    DELETED_PAGE.to_owned()
                } else {
                    EXPIRED_PAGE.to_owned()
                }
            }
            Resolution::NotStarted { starts } => {
                http.set_status(404);
                http.set_header("Cache-Control", ASK_AGAIN)?;
                // Bounds the negative TTL: the link answers from its start.
                http.set_header("Expires", &starts.http_date())?;
                NOT_FOUND_PAGE.to_owned()
            }
            Resolution::Missing | Resolution::Rejected(_) | Resolution::Unsafe(_) => {
                http.set_status(404);
                // Clients must not hold on to a 404: the link may be created
                // a moment later. Varnish keeps it for the negative TTL.
                http.set_header("Cache-Control", ASK_AGAIN)?;
                NOT_FOUND_PAGE.to_owned()
            }
        };
        http.set_header("Content-Type", "text/html; charset=utf-8")?;
        if resolution.looked_up_at_every_click() {
            http.set_header(LIMITED_MARK, "1")?;
        }
        Ok(body)
    }
}

/// A response being written as a link's answer, and the headers written
/// into it so far: taken back when it is dropped before it is complete.
struct Answer<'a, 'h> {
    http: &'a mut HttpHeaders<'h>,
    written: SmallVec<[&'static str; 6]>,
    complete: bool,
}

impl Drop for Answer<'_, '_> {
    fn drop(&mut self) {
        if !self.complete {
            for name in &self.written {
                self.http.unset_header(name);
            }
        }
    }
}

impl Answer<'_, '_> {
    fn set_status(&mut self, status: u16) {
        self.http.set_status(status);
    }

    fn set_header(&mut self, name: &'static str, value: &str) -> Result<(), VclError> {
        self.written.push(name);
        self.http.set_header(name, value)
    }
}

/// The domain (from [`DOMAIN_HEADER`]) and key (the last segment of the
/// URL's path) a request or backend request names. Text that is not UTF-8
/// names no domain served and breaks the key rules.
pub fn link_of(http: Option<&HttpHeaders>) -> (Option<String>, String) {
    let key = http
        .and_then(HttpHeaders::url)
        .map(|url| match url {
            StrOrBytes::Utf8(url) => key_of(url).to_owned(),
            StrOrBytes::Bytes(_) => "\u{fffd}".to_owned(),
        })
        .unwrap_or_default();
    let domain = http
        .and_then(|http| http.header(DOMAIN_HEADER))
        .map(|name| match name {
            StrOrBytes::Utf8(name) => name.to_owned(),
            StrOrBytes::Bytes(_) => "\u{fffd}".to_owned(),
        });
    (domain, key)
}

/// Logs why a key was answered 404 without a lookup, or a stored value
/// was refused.
pub fn log_refusal(ctx: &mut Ctx, resolution: Resolution) {
    match resolution {
        Resolution::Rejected(reason) => {
            ctx.log(LogTag::Debug, format!("shortlink: key refused: {reason}"));
        }
        Resolution::Unsafe(reason) => ctx.log(LogTag::Error, format!("shortlink: {reason}")),
        _ => {}
    }
}

/// Time left before the `Expires` of the backend response, if it has one:
/// what [`Resolver::lifetime`] bounds a link's TTL and grace by.
pub fn time_left(ctx: &Ctx) -> Option<Duration> {
    let expires = ctx.http_beresp.as_ref()?.header("Expires")?;
    let StrOrBytes::Utf8(expires) = expires else {
        return Some(Duration::ZERO);
    };
    // An unreadable date is in the past (RFC 9111, 5.3).
    Some(
        httpdate::parse_http_date(expires).map_or(Duration::ZERO, |at| {
            at.duration_since(SystemTime::now()).unwrap_or_default()
        }),
    )
}

/// The key is the last path segment of the URL, query string ignored.
pub fn key_of(url: &str) -> &str {
    let path = shortlink_core::query::path_of(url);
    path.rsplit('/').next().unwrap_or_default()
}

/// The native backend Varnish fetches from.
pub struct LinkBackend {
    pub resolver: Resolver,
}

impl VclBackend<Body> for LinkBackend {
    fn get_response(&self, ctx: &mut Ctx) -> Result<Option<Body>, VclError> {
        // A panic must not unwind into Varnish: it would take the child down.
        crate::without_panic(
            || self.resolver.respond(ctx),
            || {
                Err(VclError::Str(
                    "shortlink: internal error while answering (see varnishd's stderr)",
                ))
            },
        )
    }

    fn healthy(&self, _ctx: &mut Ctx) -> (bool, SystemTime) {
        self.resolver.pool.health().get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_domain_named_in_the_list_has_its_key_space() {
        let spaces = KeySpaces::new(KeyScheme::default(), "go.example s.example").unwrap();
        let prefix = |domain| spaces.of(domain).map(|(n, s)| (n, s.prefix().to_owned()));
        assert_eq!(prefix(None), Some((0, "short:".to_owned())));
        assert_eq!(
            prefix(Some("go.example")),
            Some((1, "short:go.example:".to_owned()))
        );
        assert_eq!(
            prefix(Some("s.example")),
            Some((2, "short:s.example:".to_owned()))
        );
        // Not listed: never looked up, whatever a header claims.
        assert_eq!(prefix(Some("other.example")), None);
        assert_eq!(
            prefix(Some("GO.example")),
            None,
            "the VCL sends the canonical name"
        );
        assert_eq!(spaces.schemes().count(), 3);
        assert!(KeySpaces::new(KeyScheme::default(), "localhost").is_err());
    }

    #[test]
    fn key_is_the_last_segment_without_query() {
        assert_eq!(key_of("/l/Lm25"), "Lm25");
        assert_eq!(key_of("/l/Lm25?utm_source=x"), "Lm25");
        assert_eq!(key_of("/l/Lm25#frag"), "Lm25");
        assert_eq!(key_of("/go/x/Lm25"), "Lm25");
        assert_eq!(key_of("/l/"), "");
        assert_eq!(key_of(""), "");
    }
}
