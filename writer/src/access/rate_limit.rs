//! The per-client rate limit for anonymous link creation.

use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};

use actix_web::HttpRequest;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::Refusal;
use crate::config::RateLimitConfig;

/// A token bucket per client address (per /64 for IPv6).
pub struct RateLimit {
    limiter: DefaultKeyedRateLimiter<IpAddr>,
    trust_forwarded_for: bool,
    checks: AtomicU32,
}

impl RateLimit {
    /// The configured limit, or `None` when it is turned off.
    pub fn new(config: &RateLimitConfig) -> Option<Self> {
        let per_minute = NonZeroU32::new(config.links_per_minute)?;
        let burst = NonZeroU32::new(config.burst).unwrap_or(NonZeroU32::MIN);
        Some(Self {
            limiter: RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst)),
            trust_forwarded_for: config.trust_forwarded_for,
            checks: AtomicU32::new(0),
        })
    }

    /// Takes one link from the client's bucket, or says when to come back.
    pub fn check(&self, request: &HttpRequest) -> Result<(), Refusal> {
        let Some(client) = self.client_address(request).map(client_key) else {
            return Ok(());
        };
        // Forget clients whose buckets are full again, now and then, so the
        // table stays as small as the set of recent clients.
        if self.checks.fetch_add(1, Ordering::Relaxed) % 4096 == 4095 {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
        }
        self.limiter.check_key(&client).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            Refusal::RateLimited {
                retry_after_s: wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
            }
        })
    }

    /// The connection's address, or behind a trusted local proxy the last
    /// address in `X-Forwarded-For`: the one that proxy appended.
    fn client_address(&self, request: &HttpRequest) -> Option<IpAddr> {
        let peer = request.peer_addr()?.ip();
        if !(self.trust_forwarded_for && peer.is_loopback()) {
            return Some(peer);
        }
        let forwarded = request
            .headers()
            .get_all("x-forwarded-for")
            .last()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .and_then(|v| v.trim().parse().ok());
        Some(forwarded.unwrap_or(peer))
    }
}

/// The rate limit's key for a client: its IPv4 address, or the /64 of its
/// IPv6 address, since one IPv6 host usually holds a whole /64.
fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or_else(
            || {
                let [a, b, c, d, ..] = v6.segments();
                IpAddr::V6(Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0))
            },
            IpAddr::V4,
        ),
        v4 @ IpAddr::V4(_) => v4,
    }
}
