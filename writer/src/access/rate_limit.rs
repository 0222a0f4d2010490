//! The per-client rate limit for anonymous link creation: in the writer's
//! memory, or in Redis, shared by every writer of the same links.

use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use actix_web::HttpRequest;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use redis::Script;
use shortlink_core::KeyScheme;

use super::Refusal;
use crate::config::{RateLimitConfig, Settings};
use crate::redis::master::MasterConnection;

const GCRA_SCRIPT: &str = include_str!("gcra.lua");

/// What a bucket is spent on: each has buckets of its own, of the same
/// size, so drawing QR codes never costs a client its links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spending {
    /// Links created without a token.
    Links,
    /// QR code PNGs drawn for a client without a token.
    Images,
}

/// A bucket per client address (per /64 for IPv6).
pub struct RateLimit {
    buckets: Buckets,
    /// Whom forwarded headers are believed from.
    forwarded: RateLimitConfig,
    spending: Spending,
}

enum Buckets {
    /// This writer's own: N writers would give a client N times the limit.
    InProcess {
        limiter: DefaultKeyedRateLimiter<IpAddr>,
        checks: AtomicU32,
    },
    /// In the links' Redis, one key per client, taken by an atomic script.
    Shared {
        connection: MasterConnection,
        script: Script,
        scheme: KeyScheme,
        interval_ms: u64,
        burst: u32,
    },
}

impl RateLimit {
    /// The configured limit for `spending`, or `None` when it is turned off.
    pub fn new(settings: &Settings, spending: Spending) -> Result<Option<Self>, String> {
        let config = &settings.config.rate_limit;
        let Some(per_minute) = NonZeroU32::new(config.links_per_minute) else {
            return Ok(None);
        };
        let burst = NonZeroU32::new(config.burst).unwrap_or(NonZeroU32::MIN);
        let buckets = if config.shared {
            Buckets::Shared {
                connection: MasterConnection::open(&settings.config.redis.url, settings)
                    .map_err(|e| format!("the shared rate limit's Redis: {e}"))?,
                script: Script::new(GCRA_SCRIPT),
                scheme: settings.scheme.clone(),
                interval_ms: 60_000_u64.div_ceil(u64::from(per_minute.get())),
                burst: burst.get(),
            }
        } else {
            Buckets::InProcess {
                limiter: RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst)),
                checks: AtomicU32::new(0),
            }
        };
        Ok(Some(Self {
            buckets,
            forwarded: config.clone(),
            spending,
        }))
    }

    /// Takes up to `wanted` links from the client's bucket, in one step:
    /// how many it held, and when the next one will be there if it held
    /// fewer.
    pub async fn take(&self, request: &HttpRequest, wanted: usize) -> (usize, Option<Refusal>) {
        let Some(client) = self.client_address(request).map(client_key) else {
            return (wanted, None);
        };
        let (taken, wait) = match &self.buckets {
            Buckets::InProcess { limiter, checks } => {
                // Forget clients whose buckets are full again, now and then,
                // so the table stays as small as the set of recent clients.
                if checks.fetch_add(1, Ordering::Relaxed) % 4096 == 4095 {
                    limiter.retain_recent();
                    limiter.shrink_to_fit();
                }
                let mut taken = 0;
                let mut wait = None;
                while taken < wanted {
                    match limiter.check_key(&client) {
                        Ok(()) => taken += 1,
                        Err(not_until) => {
                            wait = Some(not_until.wait_time_from(DefaultClock::default().now()));
                            break;
                        }
                    }
                }
                (taken, wait)
            }
            Buckets::Shared {
                connection,
                script,
                scheme,
                interval_ms,
                burst,
            } => {
                let client = match self.spending {
                    Spending::Links => client.to_string(),
                    Spending::Images => format!("images/{client}"),
                };
                let mut invocation = script.key(scheme.rate_limit(&client));
                invocation.arg(*interval_ms).arg(*burst).arg(wanted);
                let answer: Result<(usize, u64), redis::RedisError> = match connection.get() {
                    Ok(mut connection) => invocation.invoke_async(&mut connection).await,
                    Err(error) => Err(error),
                };
                match answer {
                    Ok((taken, 0)) => (taken.min(wanted), None),
                    Ok((taken, wait_ms)) => {
                        (taken.min(wanted), Some(Duration::from_millis(wait_ms)))
                    }
                    // A limit against abuse, not a rule of the store: when
                    // Redis cannot be asked, the inserts that follow fail
                    // with the reason anyway.
                    Err(error) => {
                        log::warn!(
                            "the shared rate limit could not ask Redis, so it admits: {error}"
                        );
                        (wanted, None)
                    }
                }
            }
        };
        let refusal = wait.map(|wait| Refusal::RateLimited {
            retry_after_s: wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
        });
        (taken, refusal)
    }

    /// The connection's address, or behind a trusted local proxy the last
    /// address in `X-Forwarded-For`: the one that proxy appended.
    fn client_address(&self, request: &HttpRequest) -> Option<IpAddr> {
        let peer = request.peer_addr()?.ip();
        if !self.forwarded.trusts_forwarded_from(peer) {
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
