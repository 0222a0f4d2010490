//! The settings both sides share, each with its one default and its bounds:
//! the VMOD's constructor, the writer's configuration, the VCL generator and
//! the docs all take them from here.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use serde::Deserialize;

/// Why a setting was refused; each message says what to use instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    #[error("status {0} is not a redirect: use 301, 302, 307 or 308")]
    Status(i64),
    #[error("{0:?} must be non-empty printable ASCII")]
    HeaderValue(String),
    #[error("{0} must be {min} to {max}", min = PoolSize::MIN, max = PoolSize::MAX)]
    PoolSize(i64),
    #[error("must be above 0s and at most {max:?}, not {0:?}", max = TimeoutRule::MAX)]
    Timeout(Duration),
    #[error("must be at most ten years, not {0:?}")]
    Ttl(Duration),
    #[error("must be above 0s and at most {max:?}, not {0:?}", max = FlushRule::MAX)]
    FlushInterval(Duration),
    #[error("must be at least one hour and at most ten years, not {0:?}")]
    Retention(Duration),
    #[error("{0} must be {min} to {max}", min = ClickBacklog::MIN, max = ClickBacklog::MAX)]
    ClickBacklog(i64),
    #[error("{0} must be {min} to {max}", min = ReplicasToAck::MIN, max = ReplicasToAck::MAX)]
    ReplicasToAck(i64),
    #[error("{0} must be {min} to {max} (MiB)", min = ClickQueueMb::MIN, max = ClickQueueMb::MAX)]
    ClickQueueMb(i64),
    #[error("must be whole seconds, at most {max:?} (0s caches every answer at once), not {0:?}", max = AdmissionRule::MAX)]
    AdmissionWindow(Duration),
    #[error("{0} must be {min} to {max} (0 keeps no visit log)", min = VisitsKept::MIN, max = VisitsKept::MAX)]
    VisitsKept(i64),
    #[error("{0} must be {min} to {max} (0 keeps no visit log)", min = DomainVisitsKept::MIN, max = DomainVisitsKept::MAX)]
    DomainVisitsKept(i64),
}

/// A count setting with its bounds and default: a type that holds only
/// valid values, read from TOML and VCL integers.
macro_rules! bounded_count {
    (
        $(#[$doc:meta])* $name:ident, $error:path, $min:literal..=$max:literal,
        $(#[$default_doc:meta])* default $default:literal
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
        #[serde(try_from = "i64")]
        pub struct $name(u32);

        impl $name {
            pub const MIN: u32 = $min;
            pub const MAX: u32 = $max;
            $(#[$default_doc])*
            pub const DEFAULT: Self = Self($default);

            #[must_use]
            pub const fn get(self) -> u32 {
                self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::DEFAULT
            }
        }

        impl TryFrom<i64> for $name {
            type Error = SettingError;

            fn try_from(value: i64) -> Result<Self, SettingError> {
                u32::try_from(value)
                    .ok()
                    .filter(|value| (Self::MIN..=Self::MAX).contains(value))
                    .map(Self)
                    .ok_or($error(value))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

/// Status of a found link's redirect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "i64")]
pub enum RedirectStatus {
    /// 301: permanent; browsers and proxies may cache it.
    #[default]
    MovedPermanently,
    /// 302: temporary.
    Found,
    /// 307: temporary, and the method is kept.
    TemporaryRedirect,
    /// 308: permanent, and the method is kept.
    PermanentRedirect,
}

impl RedirectStatus {
    pub const ALL: [Self; 4] = [
        Self::MovedPermanently,
        Self::Found,
        Self::TemporaryRedirect,
        Self::PermanentRedirect,
    ];

    #[must_use]
    pub const fn code(self) -> u16 {
        match self {
            Self::MovedPermanently => 301,
            Self::Found => 302,
            Self::TemporaryRedirect => 307,
            Self::PermanentRedirect => 308,
        }
    }
}

impl TryFrom<i64> for RedirectStatus {
    type Error = SettingError;

    fn try_from(code: i64) -> Result<Self, SettingError> {
        Self::ALL
            .into_iter()
            .find(|status| i64::from(status.code()) == code)
            .ok_or(SettingError::Status(code))
    }
}

impl fmt::Display for RedirectStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code())
    }
}

/// A value that can go into a response header as it is: non-empty
/// printable ASCII, so it can neither split a header nor be empty.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct HeaderValue(String);

impl HeaderValue {
    /// `Cache-Control` sent with a found link's redirect unless configured
    /// otherwise: browsers may keep it but must ask again before each
    /// reuse, so a link's edit or delete reaches them on the next click.
    pub const DEFAULT_CACHE_CONTROL: &str = "no-cache";

    #[must_use]
    pub fn default_cache_control() -> Self {
        Self(Self::DEFAULT_CACHE_CONTROL.to_owned())
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for HeaderValue {
    type Error = SettingError;

    fn try_from(value: String) -> Result<Self, SettingError> {
        if !value.is_empty() && value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            Ok(Self(value))
        } else {
            Err(SettingError::HeaderValue(value))
        }
    }
}

impl TryFrom<&str> for HeaderValue {
    type Error = SettingError;

    fn try_from(value: &str) -> Result<Self, SettingError> {
        Self::try_from(value.to_owned())
    }
}

bounded_count! {
    /// Most Redis connections the VMOD keeps open.
    PoolSize, SettingError::PoolSize, 1..=1024,
    /// Lookups are pipelined onto one connection at a time, so a few
    /// suffice; the rest are spares while a broken one is replaced.
    default 16
}

bounded_count! {
    /// Replicas that must confirm a write before it counts as done: the
    /// writer's link changes and the VMOD's click flushes (Redis `WAIT`).
    ReplicasToAck, SettingError::ReplicasToAck, 0..=16,
    /// Done once the master has it.
    default 0
}

/// A duration setting within the bounds of its rule `R`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounded<R>(Duration, PhantomData<R>);

/// The bounds of a [`Bounded`] duration, and how a value outside them is
/// refused.
pub trait DurationRule {
    /// Whether zero is a valid value.
    const ZERO_ALLOWED: bool;
    const MAX: Duration;
    /// A value must be a whole number of these; zero: any value.
    const STEP: Duration = Duration::ZERO;
    fn refusal(value: Duration) -> SettingError;
}

impl<R: DurationRule> Bounded<R> {
    pub const MAX: Duration = R::MAX;

    const fn new(value: Duration) -> Self {
        Self(value, PhantomData)
    }

    /// In whole milliseconds, as the writer's configuration spells timeouts.
    #[must_use]
    pub fn as_millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }

    /// In whole seconds, as the writer's configuration and VCL spell TTLs.
    #[must_use]
    pub const fn as_secs(self) -> u64 {
        self.0.as_secs()
    }
}

impl<R> From<Bounded<R>> for Duration {
    fn from(bounded: Bounded<R>) -> Self {
        bounded.0
    }
}

impl<R: DurationRule> TryFrom<Duration> for Bounded<R> {
    type Error = SettingError;

    fn try_from(value: Duration) -> Result<Self, SettingError> {
        let off_step = !R::STEP.is_zero() && !value.as_nanos().is_multiple_of(R::STEP.as_nanos());
        if (value.is_zero() && !R::ZERO_ALLOWED) || value > R::MAX || off_step {
            Err(R::refusal(value))
        } else {
            Ok(Self::new(value))
        }
    }
}

/// How long a Redis step may take: above zero, at most a minute.
pub type Timeout = Bounded<TimeoutRule>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutRule;

impl DurationRule for TimeoutRule {
    const ZERO_ALLOWED: bool = false;
    const MAX: Duration = Duration::from_mins(1);
    fn refusal(value: Duration) -> SettingError {
        SettingError::Timeout(value)
    }
}

impl Timeout {
    /// Opening a Redis connection (writer and VMOD).
    pub const CONNECT: Self = Self::new(Duration::from_millis(200));
    /// One lookup in Varnish, from the round trip carrying it being sent.
    pub const COMMAND: Self = Self::new(Duration::from_millis(200));
    /// One insert in the writer: longer than a lookup, as Redis syncs each
    /// write to disk before it answers.
    pub const WRITE: Self = Self::new(Duration::from_secs(2));
}

/// How long Varnish keeps an answer: at most ten years.
pub type Ttl = Bounded<TtlRule>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlRule;

impl DurationRule for TtlRule {
    const ZERO_ALLOWED: bool = true;
    const MAX: Duration = Duration::from_hours(10 * 365 * 24);
    fn refusal(value: Duration) -> SettingError {
        SettingError::Ttl(value)
    }
}

impl Ttl {
    /// A found link.
    pub const FOUND: Self = Self::new(Duration::from_hours(24));
    /// A 404 for an unknown key: not cached, so a link is served the moment
    /// it is stored (by the writer or by hand) and an insert needs no purge.
    /// Above zero, a key asked for again within it costs no lookup, and the
    /// writer purges every key it stores.
    pub const NEGATIVE: Self = Self::new(Duration::ZERO);
    /// How long an expired link may still be served while Redis is away.
    pub const GRACE: Self = Self::new(Duration::from_hours(24));

    /// How long an answer kept for `ttl` may then be served stale: `grace`,
    /// but none for an answer not kept at all, since a 404 served stale
    /// would hide a link stored since. The VMOD keeps answers by it, and the
    /// writer bounds how long a missed purge matters by it.
    #[must_use]
    pub const fn grace_after(ttl: Duration, grace: Duration) -> Duration {
        if ttl.is_zero() {
            Duration::ZERO
        } else {
            grace
        }
    }
}

/// Within how long a key must be asked for again before Varnish caches its
/// answer; zero caches every answer at its first request. At most a day.
pub type AdmissionWindow = Bounded<AdmissionRule>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionRule;

impl DurationRule for AdmissionRule {
    const ZERO_ALLOWED: bool = true;
    const MAX: Duration = Duration::from_hours(24);
    // A window of a fraction of a second would turn the filters at nearly
    // every miss.
    const STEP: Duration = Duration::from_secs(1);
    fn refusal(value: Duration) -> SettingError {
        SettingError::AdmissionWindow(value)
    }
}

impl AdmissionWindow {
    /// A link's clicks an hour apart make it worth an object; one asked
    /// for once costs its lookup alone.
    pub const DEFAULT: Self = Self::new(Duration::from_hours(1));
}

/// How often Varnish sends the clicks it counted to Redis: above zero, at
/// most a minute.
pub type FlushInterval = Bounded<FlushRule>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushRule;

impl DurationRule for FlushRule {
    const ZERO_ALLOWED: bool = false;
    const MAX: Duration = Duration::from_mins(1);
    fn refusal(value: Duration) -> SettingError {
        SettingError::FlushInterval(value)
    }
}

impl FlushInterval {
    /// A crash of Varnish loses at most this much of the totals (a hot
    /// link's history, three times as much: see the VMOD's flusher).
    pub const DEFAULT: Self = Self::new(Duration::from_secs(1));
}

/// How long dated click counts are kept: an hour to ten years, in whole
/// hours.
pub type Retention = Bounded<RetentionRule>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionRule;

impl DurationRule for RetentionRule {
    const ZERO_ALLOWED: bool = false;
    const MAX: Duration = Duration::from_hours(10 * 365 * 24);
    // Hours are the smallest buckets kept.
    const STEP: Duration = Duration::from_hours(1);
    fn refusal(value: Duration) -> SettingError {
        SettingError::Retention(value)
    }
}

impl Retention {
    /// Daily counts: a year, and a month more to compare with.
    pub const DAYS: Self = Self::new(Duration::from_hours(400 * 24));
    /// Hourly counts: a week.
    pub const HOURS: Self = Self::new(Duration::from_hours(7 * 24));
    /// The visit log: a quarter, as far back as people look at single visits.
    pub const VISITS: Self = Self::new(Duration::from_hours(90 * 24));
}

bounded_count! {
    /// Most visits the log keeps per link, the newest (each its time,
    /// referrer host, user agent, country, bot or not, and target: some
    /// 140 bytes in Redis for a browser's); the oldest go first, and so do those past
    /// [`Retention::VISITS`]. 0 keeps no visit log at all. The totals
    /// count every click whatever this keeps.
    VisitsKept, SettingError::VisitsKept, 0..=100_000,
    /// A thousand: 138 KB of Redis memory (`MEMORY USAGE`) for a link
    /// clicked that often by browsers.
    default 1000
}

bounded_count! {
    /// Most visits the log keeps per short domain across its links, and
    /// again of its orphan visits (unknown keys, the bare domain, other
    /// 404s), the newest: a flood of junk keys costs this many records
    /// at most. 0 keeps neither list.
    DomainVisitsKept, SettingError::DomainVisitsKept, 0..=1_000_000,
    /// Ten thousand each: some 1.4 MB per list.
    default 10_000
}

bounded_count! {
    /// Most counts one Varnish holds while Redis is away or behind
    /// (distinct link, bucket and detail entries, not clicks: more clicks
    /// on the same link cost nothing). Past half of it, people's clicks
    /// count without their details and visitor; past it, further clicks
    /// wait in the queue ([`ClickQueueMb`]) until Redis takes what is held.
    ClickBacklog, SettingError::ClickBacklog, 1000..=100_000_000,
    /// About 100 MB of memory at most.
    default 1_000_000
}

bounded_count! {
    /// Most MiB of clicks waiting for the flusher, each taken at twice its
    /// size and its text's (key, user agent cut to a few hundred bytes,
    /// referrer host); past it, further clicks are dropped and counted as dropped.
    /// The flusher takes them every flush interval, and leaves those its
    /// backlog has no room for counted here, so this bounds what a slow
    /// flush, a pipeline behind, or a flood of long headers holds at once.
    ClickQueueMb, SettingError::ClickQueueMb, 1..=65_536,
    /// 256 MiB: some 740,000 clicks of browsers, 2.8 times the clicks
    /// whose bound (2^18) dropped 6 to 17 % of `make bench`'s clicks on a
    /// saturated machine; 165,000 clicks of the longest headers kept
    /// (1,624 bytes each, counted twice for the queues' room).
    default 256
}

impl ClickQueueMb {
    /// The bound in bytes.
    #[must_use]
    pub const fn bytes(self) -> usize {
        self.0 as usize * 1024 * 1024
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_redirect_statuses_are_accepted() {
        for status in RedirectStatus::ALL {
            assert_eq!(
                RedirectStatus::try_from(i64::from(status.code())),
                Ok(status)
            );
        }
        for code in [200, 300, 303, 304, 404, -301] {
            let error = RedirectStatus::try_from(code).unwrap_err().to_string();
            assert!(error.contains("use 301, 302, 307 or 308"), "{error}");
        }
        assert_eq!(RedirectStatus::default().code(), 301);
    }

    #[test]
    fn an_answer_not_kept_gets_no_grace() {
        let grace = Duration::from(Ttl::GRACE);
        assert_eq!(Ttl::grace_after(Duration::ZERO, grace), Duration::ZERO);
        assert_eq!(Ttl::grace_after(Duration::from_secs(1), grace), grace);
    }

    #[test]
    fn header_values_are_printable_ascii() {
        assert!(HeaderValue::try_from("no-cache=\"Set-Cookie\"").is_ok());
        for bad in ["", "a\r\nSet-Cookie: x", "caf\u{e9}", "tab\there"] {
            assert!(HeaderValue::try_from(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            HeaderValue::default_cache_control().as_str(),
            HeaderValue::DEFAULT_CACHE_CONTROL
        );
    }

    #[test]
    fn bounds_hold_at_their_edges() {
        assert!(PoolSize::try_from(0).is_err());
        assert_eq!(PoolSize::try_from(1).map(PoolSize::get), Ok(1));
        assert_eq!(PoolSize::try_from(1024).map(PoolSize::get), Ok(1024));
        assert!(PoolSize::try_from(1025).is_err());
        assert!(PoolSize::try_from(i64::from(u32::MAX) + 2).is_err());
        assert!(Timeout::try_from(Duration::ZERO).is_err());
        assert!(Timeout::try_from(Duration::from_micros(1)).is_ok());
        assert!(Timeout::try_from(Timeout::MAX).is_ok());
        assert!(Timeout::try_from(Timeout::MAX + Duration::from_millis(1)).is_err());
        assert!(Ttl::try_from(Duration::ZERO).is_ok());
        assert!(Ttl::try_from(Ttl::MAX + Duration::from_secs(1)).is_err());
        // The admission window: off at zero, whole seconds, a day at most.
        assert!(AdmissionWindow::try_from(Duration::ZERO).is_ok());
        assert!(AdmissionWindow::try_from(Duration::from_millis(500)).is_err());
        assert!(AdmissionWindow::try_from(AdmissionWindow::MAX).is_ok());
        assert!(AdmissionWindow::try_from(AdmissionWindow::MAX + Duration::from_secs(1)).is_err());
        // Retention comes in whole hours.
        assert!(Retention::try_from(Duration::ZERO).is_err());
        assert!(Retention::try_from(Duration::from_secs(1)).is_err());
        assert!(Retention::try_from(Duration::from_mins(90)).is_err());
        assert!(Retention::try_from(Duration::from_hours(1)).is_ok());
        assert!(Retention::try_from(Retention::MAX).is_ok());
        assert!(Retention::try_from(Retention::MAX + Duration::from_hours(1)).is_err());
    }

    #[test]
    fn configuration_text_goes_through_the_same_checks() {
        #[derive(Deserialize)]
        struct Sample {
            status: RedirectStatus,
            pool_size: PoolSize,
            cache_control: HeaderValue,
        }
        let sample: Sample =
            toml::from_str("status = 307\npool_size = 4\ncache_control = \"private\"").unwrap();
        assert_eq!(sample.status, RedirectStatus::TemporaryRedirect);
        assert_eq!(sample.pool_size.get(), 4);
        assert_eq!(sample.cache_control.as_str(), "private");
        let error = toml::from_str::<Sample>("status = 200\npool_size = 4\ncache_control = \"x\"")
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("not a redirect"), "{error}");
    }

    #[test]
    fn the_docs_spell_the_defaults() {
        let doc = include_str!("../../docs/operating.md");
        let constructor = format!(
            "connect_timeout = {}ms, command_timeout = {}ms, pool_size = {},\n    \
             status = {}, ttl = {}s, negative_ttl = {}s, grace = {}s,\n    \
             admission_window = {}s, cache_control = \"{}\",\n    \
             flush_interval = {}ms, click_backlog = {}, days_kept = {}d,\n    \
             hours_kept = {}h, geoip = \"\", clicks_redis = \"\", replicas_to_ack = {});",
            Timeout::CONNECT.as_millis(),
            Timeout::COMMAND.as_millis(),
            PoolSize::DEFAULT,
            RedirectStatus::default(),
            Ttl::FOUND.as_secs(),
            Ttl::NEGATIVE.as_secs(),
            Ttl::GRACE.as_secs(),
            AdmissionWindow::DEFAULT.as_secs(),
            HeaderValue::DEFAULT_CACHE_CONTROL,
            FlushInterval::DEFAULT.as_millis(),
            ClickBacklog::DEFAULT,
            Retention::DAYS.as_secs() / 86_400,
            Retention::HOURS.as_secs() / 3600,
            ReplicasToAck::DEFAULT,
        );
        assert!(
            doc.contains(&constructor),
            "docs/operating.md's constructor example no longer spells the defaults; it should read:\n{constructor}"
        );
    }
}
