//! The VCL's arguments to a redirector and its methods, checked against the
//! bounds `shortlink_core` holds for each setting, and the redirector they
//! make.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use shortlink_core::settings::ClickQueueMb;
use shortlink_core::{
    ClickBacklog, DomainVisitsKept, FlushInterval, HeaderValue, KeyScheme, PoolSize,
    RedirectStatus, ReplicasToAck, Retention, SettingError, Timeout, Ttl, VisitsKept,
};
use varnish::vcl::{Backend, Ctx, VclError};
use varnish::Vsc;

use crate::admission;
use crate::backend::{KeySpaces, LinkBackend, Resolver, Settings};
use crate::clicks::{CountSettings, VisitBounds};
use crate::lookups::{PoolSettings, RedisPool};
use crate::redirector;

/// The admission filter for a window VCL gave (or left out).
pub fn admission_of(window: Option<Duration>, name: &str) -> Result<admission::Admission, String> {
    let window = duration_or(
        window,
        shortlink_core::AdmissionWindow::DEFAULT,
        "admission_window",
        name,
    )?;
    Ok(admission::Admission::new(window))
}

/// `value`, or `default` when VCL left it out, within the bounds of `T`
/// ([`Timeout`], [`Ttl`], [`Retention`]...).
pub fn duration_or<T>(
    value: Option<Duration>,
    default: T,
    what: &str,
    name: &str,
) -> Result<Duration, String>
where
    T: TryFrom<Duration, Error = SettingError> + Into<Duration>,
{
    value
        .map_or(Ok(default), T::try_from)
        .map(Into::into)
        .map_err(|e| format!("shortlink: {name}: {what} {e}"))
}

/// The visit log's bounds from the constructor's arguments.
pub fn visit_bounds(
    per_link: i64,
    per_domain: i64,
    days: Option<Duration>,
    name: &str,
) -> Result<VisitBounds, String> {
    let refused = |what: &str, e: SettingError| format!("shortlink: {name}: {what} {e}");
    Ok(VisitBounds {
        per_link: VisitsKept::try_from(per_link)
            .map_err(|e| refused("visits_kept", e))?
            .get() as usize,
        per_domain: DomainVisitsKept::try_from(per_domain)
            .map_err(|e| refused("domain_visits_kept", e))?
            .get() as usize,
        days: duration_or(days, Retention::VISITS, "visit_days", name)?,
    })
}

/// The arguments VCL gave `shortlink.redirector()`, as the constructor
/// took them (see its documentation in `lib.rs`).
pub struct RedirectorArgs<'a> {
    pub redis: &'a str,
    pub prefix: &'a str,
    pub split: i64,
    pub connect_timeout: Option<Duration>,
    pub command_timeout: Option<Duration>,
    pub pool_size: i64,
    pub status: i64,
    pub ttl: Option<Duration>,
    pub negative_ttl: Option<Duration>,
    pub grace: Option<Duration>,
    pub admission_window: Option<Duration>,
    pub cache_control: &'a str,
    pub flush_interval: Option<Duration>,
    pub click_backlog: i64,
    pub click_queue_mb: i64,
    pub days_kept: Option<Duration>,
    pub hours_kept: Option<Duration>,
    pub geoip: &'a str,
    pub clicks_redis: &'a str,
    pub replicas_to_ack: i64,
    pub visits_kept: i64,
    pub domain_visits_kept: i64,
    pub visit_days: Option<Duration>,
    pub domains: &'a str,
}

impl RedirectorArgs<'_> {
    /// How the redirector's click stores count.
    fn counting(
        &self,
        name: &str,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Result<CountSettings, String> {
        Ok(CountSettings {
            flush_interval: duration_or(
                self.flush_interval,
                FlushInterval::DEFAULT,
                "flush_interval",
                name,
            )?,
            backlog: ClickBacklog::try_from(self.click_backlog)
                .map_err(|e| format!("shortlink: {name}: click_backlog {e}"))?
                .get() as usize,
            queue_bytes: ClickQueueMb::try_from(self.click_queue_mb)
                .map_err(|e| format!("shortlink: {name}: click_queue_mb {e}"))?
                .bytes(),
            days_kept: duration_or(self.days_kept, Retention::DAYS, "days_kept", name)?,
            hours_kept: duration_or(self.hours_kept, Retention::HOURS, "hours_kept", name)?,
            geoip: (!self.geoip.is_empty()).then(|| self.geoip.to_owned()),
            connect_timeout,
            command_timeout,
            replicas_to_ack: ReplicasToAck::try_from(self.replicas_to_ack)
                .map_err(|e| format!("shortlink: {name}: replicas_to_ack {e}"))?
                .get(),
            visits: visit_bounds(
                self.visits_kept,
                self.domain_visits_kept,
                self.visit_days,
                name,
            )?,
        })
    }
}

impl redirector {
    /// A redirector for `args`, each checked against its bounds; `name`
    /// is the VCL object's.
    pub(crate) fn build(
        ctx: &mut Ctx,
        name: &str,
        args: &RedirectorArgs<'_>,
    ) -> Result<Self, VclError> {
        let scheme = KeyScheme::new(args.prefix, usize::try_from(args.split).unwrap_or(0))
            .map_err(|e| format!("shortlink: {name}: {e}"))?;
        let spaces = KeySpaces::new(scheme, args.domains)
            .map_err(|e| format!("shortlink: {name}: domains: {e}"))?;
        let settings = Settings {
            spaces,
            status: RedirectStatus::try_from(args.status)
                .map_err(|e| format!("shortlink: {name}: {e}"))?,
            ttl: duration_or(args.ttl, Ttl::FOUND, "ttl", name)?,
            negative_ttl: duration_or(args.negative_ttl, Ttl::NEGATIVE, "negative_ttl", name)?,
            grace: duration_or(args.grace, Ttl::GRACE, "grace", name)?,
            cache_control: HeaderValue::try_from(args.cache_control)
                .map_err(|e| format!("shortlink: {name}: cache_control {e}"))?,
        };
        let admission = admission_of(args.admission_window, name)?;
        let connect_timeout = duration_or(
            args.connect_timeout,
            Timeout::CONNECT,
            "connect_timeout",
            name,
        )?;
        let command_timeout = duration_or(
            args.command_timeout,
            Timeout::COMMAND,
            "command_timeout",
            name,
        )?;
        let counting = args.counting(name, connect_timeout, command_timeout)?;
        let pool_size = PoolSize::try_from(args.pool_size)
            .map_err(|e| format!("shortlink: {name}: pool_size {e}"))?
            .get();
        let pool_of = |url| {
            RedisPool::new(&PoolSettings {
                url,
                connect_timeout,
                command_timeout,
                size: pool_size,
            })
            .map_err(|e| format!("shortlink: {name}: {e}"))
        };
        let pool = std::sync::Arc::new(pool_of(args.redis)?);
        let apart = shortlink_core::clicks::own_redis(args.clicks_redis, args.redis);
        let click_pool = apart.map(pool_of).transpose()?;
        let mirror = apart.map(|_| std::sync::Arc::clone(&pool));
        // One store, with its flusher, per key space.
        let clicks = settings
            .spaces
            .schemes()
            .map(|scheme| {
                let (url, mirror) = (apart.unwrap_or(args.redis), mirror.clone());
                crate::clicks::store_for(url, scheme, counting.clone(), mirror)
                    .map_err(|e| format!("shortlink: {name}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let domain_redirects = crate::domain_redirects::DomainRedirects::start(
            std::sync::Arc::clone(&pool),
            &settings.spaces,
        )
        .map_err(|e| format!("shortlink: {name}: {e}"))?;
        let resolver = Resolver {
            settings,
            pool,
            click_pool,
            stats: Vsc::new("shortlink", name),
            changes: crate::changes::Changes::default(),
            clicks: clicks.clone(),
            robots_txt: std::sync::OnceLock::new(),
        };
        let backend = Backend::new(ctx, "shortlink", name, LinkBackend { resolver }, true)?;
        let countries = (!args.geoip.is_empty())
            .then(|| crate::clicks::Countries::open(args.geoip))
            .transpose()
            .map_err(|e| format!("shortlink: {name}: geoip: {e}"))?;
        Ok(Self {
            backend,
            admission,
            clicks,
            published: AtomicU64::new(u64::MAX),
            countries,
            domain_redirects,
        })
    }
}
