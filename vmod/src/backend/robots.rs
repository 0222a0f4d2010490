//! A short domain's `/robots.txt`, answered by the backend and cached as
//! a link's answer is: an `Allow` line for each of the domain's crawlable
//! links (the first [`MAX_ROBOTS_ALLOWS`] of its crawlable set, one
//! `ZRANGE`), then the text the VCL gave `.robots_txt()`. The writer
//! purges it when the set changes.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use shortlink_core::{MAX_ROBOTS_ALLOWS, ROBOTS_TXT};
use varnish::vcl::{Ctx, HttpHeaders, VclError};

use super::{Body, Resolution, Resolver};

/// Header marking an answer that goes without `X-Robots-Tag: noindex`: a
/// crawlable link's redirect, and robots.txt itself. `vcl_deliver` reads
/// and removes it.
pub const CRAWLABLE_MARK: &str = "Shortlink-Crawlable";

/// `Cache-Control` of robots.txt for crawlers: as before links could be
/// crawlable; Varnish keeps it for the links' TTL, purged on change.
const ROBOTS_CACHE_CONTROL: &str = "max-age=3600";

/// Whether `key`, the last segment of a request's path, asks for the
/// domain's robots.txt: the VCL routes only `<link path>robots.txt` here,
/// and no key holds a dot.
pub fn is_robots_txt(key: &str) -> bool {
    key == ROBOTS_TXT
}

impl Resolver {
    /// The backend's answer to a fetch of the robots.txt of the domain
    /// named `domain`.
    pub fn respond_robots_txt(
        &self,
        ctx: &mut Ctx,
        domain: Option<&str>,
    ) -> Result<Option<Body>, VclError> {
        let url = crate::headers::request_url(ctx.http_bereq.as_ref()).to_owned();
        let beresp = ctx
            .http_beresp
            .as_mut()
            .ok_or("shortlink: backend called without a backend response")?;
        let text = self.write_robots_txt(domain, &url, beresp)?;
        Ok(Some(Body::new(text.into_bytes())))
    }

    /// Writes the robots.txt of the domain named `domain` (`None`: the
    /// default one), asked for as `url` (`<link path>robots.txt`), into
    /// `http`, and returns its text; `Err` when Redis gave no answer.
    pub fn write_robots_txt(
        &self,
        domain: Option<&str>,
        url: &str,
        http: &mut HttpHeaders,
    ) -> Result<String, VclError> {
        let Some((_, scheme)) = self.settings.spaces.of(domain) else {
            // A domain this object does not serve: answered as a bad key.
            let page = self.write_answer(&Resolution::Rejected(String::new()), http)?;
            return Ok(page);
        };
        let members = self
            .pool
            .members(&scheme.crawlable(), MAX_ROBOTS_ALLOWS)
            .map_err(|error| {
                self.stats.redis_errors.fetch_add(1, Ordering::Relaxed);
                VclError::new(format!("ZRANGE {}: {error}", scheme.crawlable()))
            })?;
        let path = shortlink_core::query::path_of(url);
        let link_path = path.strip_suffix(ROBOTS_TXT).unwrap_or(path);
        let keys = members.as_deref().unwrap_or_default();
        let text = robots_text(
            link_path,
            keys,
            |key| scheme.check(key).is_ok(),
            self.footer(),
        );
        http.set_status(200);
        http.set_header("Content-Type", "text/plain; charset=utf-8")?;
        http.set_header("Cache-Control", ROBOTS_CACHE_CONTROL)?;
        http.set_header(CRAWLABLE_MARK, "1")?;
        Ok(text)
    }

    /// The text robots.txt ends with: what `.robots_txt()` was given.
    fn footer(&self) -> &str {
        self.robots_txt.get().map_or("", String::as_str)
    }
}

/// robots.txt: a group allowing `<link path><key>` for each of `keys` (one
/// a line) that `valid` takes, then `footer`; `footer` alone without any.
/// Only a valid key is written, so a member stored by hand cannot add a
/// line of its own.
pub fn robots_text(
    link_path: &str,
    keys: &[u8],
    valid: impl Fn(&str) -> bool,
    footer: &str,
) -> String {
    let mut text = String::new();
    let keys = keys
        .split(|&byte| byte == b'\n')
        .filter_map(|key| std::str::from_utf8(key).ok())
        .filter(|key| valid(key));
    for key in keys {
        if text.is_empty() {
            text.push_str("User-agent: *\n");
        }
        let _ = writeln!(text, "Allow: {link_path}{key}");
    }
    if !text.is_empty() && !footer.is_empty() {
        text.push('\n');
    }
    text.push_str(footer);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crawlable_keys_are_allowed_before_the_configured_text() {
        let footer = "User-agent: *\nDisallow: /\n";
        let valid = |key: &str| key.len() >= 3 && key.bytes().all(|b| b.is_ascii_alphanumeric());
        assert_eq!(
            robots_text("/l/", b"abc\nLm25\n", valid, footer),
            "User-agent: *\nAllow: /l/abc\nAllow: /l/Lm25\n\nUser-agent: *\nDisallow: /\n"
        );
        assert_eq!(
            robots_text("/", b"", valid, footer),
            footer,
            "none: as before"
        );
        // Members that are no key never make a line.
        assert_eq!(
            robots_text("/", b"x\nDisallow: /\n\xff\xfe\n", valid, footer),
            footer
        );
        assert_eq!(
            robots_text("/", b"abc\n", valid, ""),
            "User-agent: *\nAllow: /abc\n"
        );
        assert!(is_robots_txt("robots.txt"));
        assert!(!is_robots_txt("Lm25"));
    }
}
