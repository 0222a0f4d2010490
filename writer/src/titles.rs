//! A link's title read from its target page, for a link created without
//! one: an HTTP `GET` bounded in time, bytes and redirects, to public
//! addresses only unless the configuration allows others (no request from
//! the writer into the operator's own network), run in the background
//! after the link is stored.

use std::io::Read as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use crate::config::TitlesConfig;

/// Why no title was read.
#[derive(Debug, thiserror::Error)]
pub enum TitleError {
    #[error("the page could not be read: {0}")]
    Fetch(#[from] ureq::Error),
    #[error("the page answered {0}")]
    Status(u16),
    #[error("the page is not HTML ({0})")]
    NotHtml(String),
}

/// Titles read at once; more wait their turn.
const READS_AT_ONCE: usize = 4;

/// Titles waiting to be read, at most: past them a new link gets none,
/// so that a burst of links never queues unbounded work.
const READS_WAITING: usize = 256;

/// Reads pages' titles within the configured bounds. One per writer.
#[derive(Debug, Clone)]
pub struct TitleReader {
    agent: ureq::Agent,
    max_bytes: u64,
    /// Reads waiting or under way, each holding one: [`READS_WAITING`].
    queue: Arc<tokio::sync::Semaphore>,
    /// Reads under way: [`READS_AT_ONCE`].
    at_once: Arc<tokio::sync::Semaphore>,
}

impl TitleReader {
    pub fn new(config: &TitlesConfig) -> Self {
        let agent_config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_millis(config.timeout_ms)))
            .max_redirects(config.max_redirects)
            .max_redirects_will_error(true)
            .http_status_as_error(false)
            .user_agent("shortlink-title-reader")
            .build();
        let resolver = PublicOnly {
            inner: DefaultResolver::default(),
            private_allowed: config.private_addresses,
        };
        Self {
            agent: ureq::Agent::with_parts(agent_config, DefaultConnector::default(), resolver),
            max_bytes: u64::try_from(config.max_bytes).unwrap_or(u64::MAX),
            queue: Arc::new(tokio::sync::Semaphore::new(READS_WAITING)),
            at_once: Arc::new(tokio::sync::Semaphore::new(READS_AT_ONCE)),
        }
    }

    /// The `<title>` of the page at `url`, if it has one within the bytes
    /// read. Blocks: run it off the async workers.
    pub fn read(&self, url: &str) -> Result<Option<String>, TitleError> {
        let mut response = self.agent.get(url).header("Accept", "text/html").call()?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(TitleError::Status(status));
        }
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !content_type.starts_with("text/html") && !content_type.is_empty() {
            return Err(TitleError::NotHtml(content_type));
        }
        let mut bytes = Vec::new();
        let reader = response.body_mut().as_reader();
        // A page past the bound is read no further: its title is at its top.
        reader
            .take(self.max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| TitleError::Fetch(ureq::Error::Io(e)))?;
        Ok(title_of(&String::from_utf8_lossy(&bytes)))
    }

    /// Reads `url`'s title on a blocking thread and hands it to `keep`;
    /// without a runtime to run it on, nothing is read.
    pub fn read_in_background<F, Fut>(self: &Arc<Self>, url: String, keep: F)
    where
        F: FnOnce(String) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let Ok(place) = Arc::clone(&self.queue).try_acquire_owned() else {
            log::debug!("{READS_WAITING} titles wait to be read already: none for {url}");
            return;
        };
        let reader = Arc::clone(self);
        runtime.spawn(async move {
            let _place = place;
            let Ok(_turn) = reader.at_once.acquire().await else {
                return;
            };
            let read = {
                let reader = Arc::clone(&reader);
                tokio::task::spawn_blocking(move || reader.read(&url)).await
            };
            match read {
                Ok(Ok(Some(title))) => keep(title).await,
                Ok(Ok(None)) => {}
                Ok(Err(error)) => log::debug!("no title read: {error}"),
                Err(error) => log::warn!("the title reader stopped: {error}"),
            }
        });
    }
}

/// The text of a page's first `<title>`, its entities decoded and its
/// white space folded; `None` without one, or an empty one.
pub fn title_of(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let text = decode_entities(&html[start..end]);
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!folded.is_empty()).then_some(folded)
}

/// The few entities titles hold: the named ones HTML escapes text with,
/// and numeric ones.
fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let decoded = rest.find(';').filter(|end| *end <= 10).and_then(|end| {
            let name = &rest[1..end];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" | "#39" => Some('\''),
                "nbsp" => Some(' '),
                _ => name
                    .strip_prefix("#x")
                    .or_else(|| name.strip_prefix("#X"))
                    .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                    .or_else(|| name.strip_prefix('#').and_then(|dec| dec.parse().ok()))
                    .and_then(char::from_u32),
            };
            c.map(|c| (c, end))
        });
        if let Some((c, end)) = decoded {
            out.push(c);
            rest = &rest[end + 1..];
        } else {
            out.push('&');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    out
}

/// Resolves as the default resolver does, then keeps public addresses
/// only (unless private ones are allowed): every hop of a redirect is
/// resolved here, so none reaches into the operator's network.
#[derive(Debug)]
struct PublicOnly {
    inner: DefaultResolver,
    private_allowed: bool,
}

impl Resolver for PublicOnly {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let resolved = self.inner.resolve(uri, config, timeout)?;
        if self.private_allowed {
            return Ok(resolved);
        }
        let mut public = self.empty();
        for address in resolved.iter().filter(|address| is_public(address.ip())) {
            public.push(*address);
        }
        if public.is_empty() {
            return Err(ureq::Error::Io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{} resolves to no public address, and [titles] private_addresses is off",
                    uri.host().unwrap_or_default()
                ),
            )));
        }
        Ok(public)
    }
}

/// Whether `ip` is on the public internet: not loopback, private,
/// link-local, shared, documentation, multicast or unspecified.
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 198 && (18..20).contains(&b))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || first == 0x2001 && ip.segments()[1] == 0x0db8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_read_decoded_and_folded() {
        assert_eq!(
            title_of("<html><HEAD><Title lang=en>\n  Tom &amp; Jerry &#8211; &#x41;\n</TITLE>"),
            Some("Tom & Jerry \u{2013} A".into())
        );
        assert_eq!(title_of("<title>  </title>"), None);
        assert_eq!(title_of("<p>no title</p>"), None);
        assert_eq!(title_of("<title>cut off"), None);
        assert_eq!(
            title_of("<title>a & b &bogus; c</title>"),
            Some("a & b &bogus; c".into())
        );
    }

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fc00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "198.18.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "93.184.216.34",
            "2606:2800:220:1:248:1893:25c8:1946",
            "8.8.8.8",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
