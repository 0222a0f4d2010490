//! The native backend: turns a fetch of `/any/path/<key>` into a redirect,
//! a 404, or a failed fetch, without any HTTP server behind Varnish.

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use shortlink_core::{check_redirect_target, escape_html, HeaderValue, KeyScheme, RedirectStatus};
use varnish::vcl::{Ctx, LogTag, StrOrBytes, VclBackend, VclError, VclResponse};
use varnish::Vsc;

use crate::pool::RedisPool;
use crate::stats::LinkStats;

/// What the VCL author configured, checked once in `vcl_init`.
pub struct Settings {
    pub scheme: KeyScheme,
    pub status: RedirectStatus,
    pub ttl: Duration,
    pub negative_ttl: Duration,
    pub cache_control: HeaderValue,
}

/// Outcome of resolving one key, before it is written into a response.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The key holds a safe redirect target.
    Found(String),
    /// Nothing stored under the key.
    Missing,
    /// The key breaks the key rules; Redis was not asked.
    Rejected(String),
    /// The stored value is not a safe absolute http(s) URL; it is never sent.
    Unsafe(String),
}

/// Everything the backend and the VCL methods share.
pub struct Resolver {
    pub settings: Settings,
    pub pool: RedisPool,
    pub stats: Vsc<LinkStats>,
}

impl Resolver {
    /// Resolves `key` with at most one `HGET`; `Err` means Redis gave no answer.
    pub fn resolve(&self, key: &str) -> Result<Resolution, String> {
        let stats = &self.stats;
        let slot = match self.settings.scheme.locate(key) {
            Ok(slot) => slot,
            Err(error) => {
                stats.rejected.fetch_add(1, Ordering::Relaxed);
                return Ok(Resolution::Rejected(error.to_string()));
            }
        };
        stats.lookups.fetch_add(1, Ordering::Relaxed);
        let outcome = self.pool.hget(&slot);
        // The I/O thread counts round trips but cannot hold the Vsc (it is
        // not Send): each lookup publishes the count.
        stats
            .round_trips
            .store(self.pool.round_trips(), Ordering::Relaxed);
        match outcome {
            Ok(Some(value)) => {
                let verdict = std::str::from_utf8(&value)
                    .map_err(|_| "value is not UTF-8".to_owned())
                    .and_then(|url| {
                        check_redirect_target(url)
                            .map(|()| url.to_owned())
                            .map_err(|e| e.to_string())
                    });
                match verdict {
                    Ok(url) => {
                        stats.found.fetch_add(1, Ordering::Relaxed);
                        Ok(Resolution::Found(url))
                    }
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
            Err(error) => {
                if matches!(error, crate::pool::LookupError::Timeout(_)) {
                    stats.timeouts.fetch_add(1, Ordering::Relaxed);
                } else {
                    stats.redis_errors.fetch_add(1, Ordering::Relaxed);
                }
                Err(format!("HGET {} {}: {error}", slot.hash, slot.field))
            }
        }
    }

    /// The cache TTL for a response this backend produced with `status`.
    pub fn ttl_for(&self, status: i64) -> Duration {
        if status == i64::from(self.settings.status.code()) {
            self.settings.ttl
        } else if status == 404 {
            self.settings.negative_ttl
        } else {
            Duration::ZERO
        }
    }

    fn respond(&self, ctx: &mut Ctx) -> Result<Option<Body>, VclError> {
        let key = ctx
            .http_bereq
            .as_ref()
            .and_then(varnish::vcl::HttpHeaders::url)
            .map(|url| match url {
                StrOrBytes::Utf8(url) => key_of(url).to_owned(),
                // Not UTF-8, so not a key: refused by the key rules below.
                StrOrBytes::Bytes(_) => "\u{fffd}".to_owned(),
            })
            .unwrap_or_default();
        let resolution = self.resolve(&key).map_err(VclError::new)?;
        let beresp = ctx
            .http_beresp
            .as_mut()
            .ok_or("shortlink: backend called without a backend response")?;
        let body = match &resolution {
            Resolution::Found(url) => {
                beresp.set_status(self.settings.status.code());
                beresp.set_header("Location", url)?;
                beresp.set_header("Cache-Control", self.settings.cache_control.as_str())?;
                redirect_page(url)
            }
            Resolution::Missing | Resolution::Rejected(_) | Resolution::Unsafe(_) => {
                beresp.set_status(404);
                // Clients must not hold on to a 404: the link may be created
                // a moment later. Varnish keeps it for the negative TTL.
                beresp.set_header("Cache-Control", "no-cache")?;
                NOT_FOUND_PAGE.to_owned()
            }
        };
        beresp.set_header("Content-Type", "text/html; charset=utf-8")?;
        match resolution {
            Resolution::Rejected(reason) => {
                ctx.log(LogTag::Debug, format!("shortlink: key refused: {reason}"));
            }
            Resolution::Unsafe(reason) => ctx.log(LogTag::Error, format!("shortlink: {reason}")),
            _ => {}
        }
        Ok(Some(Body::new(body.into_bytes())))
    }
}

/// The key is the last path segment of the URL, query string ignored.
pub fn key_of(url: &str) -> &str {
    let path = url.split(['?', '#']).next().unwrap_or_default();
    path.rsplit('/').next().unwrap_or_default()
}

const NOT_FOUND_PAGE: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>Link not found</title></head><body><h1>Link not found</h1>\
<p>This short link does not exist. Check it for typing mistakes.</p></body></html>\n";

fn redirect_page(url: &str) -> String {
    let href = escape_html(url);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Moved</title>\
</head><body><p>This link leads to <a href=\"{href}\">{href}</a>.</p></body></html>\n"
    )
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

/// A response body already rendered in memory.
pub struct Body {
    bytes: Vec<u8>,
    sent: usize,
}

impl Body {
    fn new(bytes: Vec<u8>) -> Self {
        Self { bytes, sent: 0 }
    }
}

impl VclResponse for Body {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, VclError> {
        let rest = &self.bytes[self.sent..];
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.sent += n;
        Ok(n)
    }

    fn len(&self) -> Option<usize> {
        Some(self.bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_the_last_segment_without_query() {
        assert_eq!(key_of("/l/Lm25"), "Lm25");
        assert_eq!(key_of("/l/Lm25?utm_source=x"), "Lm25");
        assert_eq!(key_of("/l/Lm25#frag"), "Lm25");
        assert_eq!(key_of("/go/x/Lm25"), "Lm25");
        assert_eq!(key_of("/l/"), "");
        assert_eq!(key_of(""), "");
    }

    #[test]
    fn redirect_page_escapes_the_target() {
        let page = redirect_page("https://example.org/?a=1&b=\"<x>'");
        assert!(page.contains("https://example.org/?a=1&amp;b=&quot;&lt;x&gt;&#39;"));
        assert!(!page.contains("<x>"));
    }

    #[test]
    fn body_is_read_in_pieces() {
        let mut body = Body::new(b"hello world".to_vec());
        assert_eq!(body.len(), Some(11));
        let mut buf = [0u8; 4];
        let mut out = Vec::new();
        loop {
            let n = body.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(out, b"hello world");
    }
}
