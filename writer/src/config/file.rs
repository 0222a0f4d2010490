//! The configuration file as read from TOML: every section with its
//! defaults, the access tokens, and the purge secret.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use shortlink_core::{
    AdmissionWindow, ClickBacklog, ClickQueueMb, DomainVisitsKept, FlushInterval, HeaderValue,
    Owner, PoolSize, RecordError, RedirectStatus, ReplicasToAck, Retention, Timeout, Ttl,
    VisitsKept,
};

use super::ConfigError;

/// The whole configuration, as read from TOML. Every field has a default.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address the writer's HTTP server listens on.
    pub listen: SocketAddr,
    /// Public base of short links: a link is this followed by its key.
    pub public_base_url: String,
    /// Longest long URL accepted, in bytes.
    pub max_url_length: usize,
    /// Largest request body accepted, JSON or form, in bytes.
    pub max_body_bytes: usize,
    /// Accept long URLs whose host is loopback, private or link-local.
    pub allow_private_targets: bool,
    /// Shortest key generated from a URL's digest.
    pub min_generated_key_length: usize,
    /// Host names (or addresses) the writer's pages and API answer to,
    /// besides `public_base_url`'s host, the address it listens on, and
    /// loopback names when it listens on loopback or every address. A
    /// request naming another host in `Host` is refused, so that a page
    /// whose name was rebound to this writer's address cannot use it.
    pub allowed_hosts: Vec<String>,
    /// How many links the store is expected to hold, to check that the
    /// split keeps every hash in Redis's compact encoding.
    pub expected_links: u64,
    pub redis: RedisConfig,
    pub redirect: RedirectConfig,
    pub varnish: VarnishConfig,
    pub clicks: ClicksConfig,
    pub access: AccessConfig,
    pub rate_limit: RateLimitConfig,
    pub titles: TitlesConfig,
    /// Short domains besides `public_base_url`'s, each with its own links.
    pub domains: Vec<super::domains::DomainConfig>,
}

/// Titles read from a new link's target page when it is given none.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TitlesConfig {
    /// Read them at all.
    pub fetch: bool,
    /// Longest a read may take, redirects included, in milliseconds.
    pub timeout_ms: u64,
    /// Most bytes of a page read for its title.
    pub max_bytes: usize,
    /// Most redirects followed.
    pub max_redirects: u32,
    /// Also read from loopback, private and link-local addresses (the
    /// operator's own network): off, so that nobody can make the writer
    /// reach into it.
    pub private_addresses: bool,
}

impl Default for TitlesConfig {
    fn default() -> Self {
        Self {
            fetch: true,
            timeout_ms: 3000,
            max_bytes: 64 * 1024,
            max_redirects: 3,
            private_addresses: false,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClicksConfig {
    /// Count every answer Varnish delivers for a link.
    pub enabled: bool,
    /// How often each Varnish sends the clicks it gathered to Redis.
    pub flush_interval_ms: u64,
    /// Most counts a Varnish holds while Redis is away.
    pub backlog: ClickBacklog,
    /// Most MiB of clicks waiting in a Varnish for its flusher.
    pub queue_mb: ClickQueueMb,
    /// How long daily counts and unique visitors are kept.
    pub days_kept: u64,
    /// How long hourly counts are kept.
    pub hours_kept: u64,
    /// A country database (`.mmdb`) on the Varnish machine; empty: none.
    pub geoip: String,
    /// The Redis clicks are stored in, as `redis.url`; empty: the links'.
    pub redis_url: String,
    /// Most visits the visit log keeps per link; 0: none.
    pub visits_kept: VisitsKept,
    /// Most visits kept per domain, and again of its orphan visits; 0: none.
    pub domain_visits_kept: DomainVisitsKept,
    /// How many days a visit stays in the log.
    pub visit_days: u64,
}

impl Default for ClicksConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            flush_interval_ms: FlushInterval::DEFAULT.as_millis(),
            backlog: ClickBacklog::DEFAULT,
            queue_mb: ClickQueueMb::DEFAULT,
            days_kept: Retention::DAYS.as_secs() / 86_400,
            hours_kept: Retention::HOURS.as_secs() / 3600,
            geoip: String::new(),
            redis_url: String::new(),
            visits_kept: VisitsKept::DEFAULT,
            domain_visits_kept: DomainVisitsKept::DEFAULT,
            visit_days: Retention::VISITS.as_secs() / 86_400,
        }
    }
}

impl ClicksConfig {
    pub fn flush_interval(&self) -> Duration {
        Duration::from_millis(self.flush_interval_ms)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisConfig {
    /// `redis://[user:password@]host[:port][/db]`, `unix:///path?db=N`, or
    /// `redis+sentinel://host:port[,host:port...]/master-name[/db]`.
    pub url: String,
    /// Start of every hash name: key `Lm25` lives in hash `<prefix>Lm`.
    pub hash_prefix: String,
    /// Leading key characters that name the hash.
    pub split: usize,
    /// How long opening a connection may take (writer and VMOD).
    pub connect_timeout_ms: u64,
    /// How long one lookup may take in Varnish.
    pub command_timeout_ms: u64,
    /// How long one insert may take in the writer; longer than a lookup,
    /// as Redis syncs each write to disk before it answers.
    pub write_timeout_ms: u64,
    /// Most Redis connections the VMOD keeps open.
    pub pool_size: PoolSize,
    /// Replicas that must hold a change before the writer acknowledges it,
    /// and a click flush before Varnish counts it stored.
    pub replicas_to_ack: ReplicasToAck,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedirectConfig {
    /// 301, 302, 307 or 308.
    pub status: RedirectStatus,
    /// How long Varnish caches a found link.
    pub ttl_s: u64,
    /// How long Varnish caches a 404; 0 (the default) caches none, and the
    /// writer purges a key it stores only above 0.
    pub negative_ttl_s: u64,
    /// How long Varnish may serve an expired link while Redis is away.
    pub grace_s: u64,
    /// Varnish caches a key's answer from its second request within this
    /// many seconds; the first is answered from its lookup alone. 0 caches
    /// every answer at its first request.
    pub admission_window_s: u64,
    /// `Cache-Control` sent to clients with a redirect.
    pub cache_control: HeaderValue,
    /// Send `X-Robots-Tag: noindex` with every answer for a link, so that
    /// search engines list the target, not the short link.
    pub noindex: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VarnishConfig {
    /// Where the writer sends `PURGE <path><key>` after a change; empty to
    /// never purge. Replaced by `purge_urls` when that is not empty.
    pub purge_url: String,
    /// Every Varnish node serving the links, each purged after a change.
    pub purge_urls: Vec<String>,
    /// Addresses (or `address/prefix` networks) allowed to PURGE.
    pub purge_acl: Vec<String>,
    /// A secret the writer sends with its PURGE and warming requests
    /// (`Shortlink-Secret`), which the VCL then requires besides the
    /// address. Needed wherever something on a purger's address relays
    /// clients (a TLS terminator on the Varnish host); empty: the address
    /// alone decides.
    pub purge_secret: PurgeSecret,
    /// The VMOD to import: `shortlink` when installed in Varnish's VMOD
    /// directory (or found through `vmod_path`), or the absolute path of
    /// `libvmod_shortlink.so`.
    pub vmod: String,
    /// Host names links are served on (any port); empty: every host. The
    /// VCL leaves requests for other hosts alone (`--include`) or answers
    /// them 404.
    pub hosts: Vec<String>,
    /// `/robots.txt` of a short domain Varnish serves alone (the
    /// standalone VCL, or a domain whose links are at the root); a site
    /// that includes the VCL keeps its own.
    pub robots_txt: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessConfig {
    /// Bearer tokens that may create links without a rate limit. Required
    /// when the writer listens on anything but loopback.
    pub tokens: Vec<AccessToken>,
    /// Refuse link creation without a token even on loopback.
    pub require_token: bool,
    /// Origins whose pages may call Shlink's API (`/rest`) from a browser
    /// (`https://app.shlink.io`); `*`: any. Those routes take no cookie,
    /// only the key a page sends, so any origin can do no more than that
    /// key may.
    pub cors_origins: Vec<String>,
}

impl Default for AccessConfig {
    fn default() -> Self {
        Self {
            tokens: Vec::new(),
            require_token: false,
            cors_origins: vec!["*".to_owned()],
        }
    }
}

/// A bearer token from the configuration, with the name its links record
/// as their owner. Written as the token alone, or as a table:
/// `{ name = "alice", token = "...", admin = true }`, or limited to some
/// short domains: `{ name = "shop", token = "...", domains = ["go.example"] }`.
/// Its `Debug` hides the token, so no log line or error message can carry it.
#[derive(Clone, Deserialize)]
#[serde(from = "TokenEntry")]
pub struct AccessToken {
    secret: String,
    name: Option<String>,
    admin: bool,
    /// The only domains it may act on (names or aliases); empty: every one.
    domains: Vec<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TokenEntry {
    Bare(String),
    #[serde(rename_all = "snake_case")]
    Named {
        token: String,
        name: Option<String>,
        #[serde(default)]
        admin: bool,
        #[serde(default)]
        domains: Vec<String>,
    },
}

impl From<TokenEntry> for AccessToken {
    fn from(entry: TokenEntry) -> Self {
        match entry {
            TokenEntry::Bare(secret) => Self::new(secret),
            TokenEntry::Named {
                token,
                name,
                admin,
                domains,
            } => Self {
                secret: token,
                name,
                admin,
                domains,
            },
        }
    }
}

impl AccessToken {
    /// A token with no name: it gets one from its digest
    /// ([`Self::owner_name`]).
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            secret: token.into(),
            name: None,
            admin: false,
            domains: Vec::new(),
        }
    }

    /// A token named `name`; `admin` may change every link.
    pub fn named(name: &str, token: impl Into<String>, admin: bool) -> Self {
        Self {
            secret: token.into(),
            name: Some(name.to_owned()),
            admin,
            domains: Vec::new(),
        }
    }

    /// The same token, limited to the short domains `domains` (names or
    /// aliases).
    #[must_use]
    pub fn limited_to(mut self, domains: &[&str]) -> Self {
        self.domains = domains.iter().map(|&name| name.to_owned()).collect();
        self
    }

    /// The only short domains it may act on, as written; empty: every one.
    pub fn domains(&self) -> &[String] {
        &self.domains
    }

    /// A token as `SHORTLINK_TOKENS` gives it: `token`, `name=token`, or
    /// `name:admin=token`.
    pub fn from_env_entry(entry: &str) -> Self {
        if let Some((label, token)) = entry.split_once('=') {
            let (name, admin) = match label.strip_suffix(":admin") {
                Some(name) => (name, true),
                None => (label, false),
            };
            if Owner::try_from(name).is_ok() {
                return Self::named(name, token, admin);
            }
        }
        Self::new(entry)
    }

    pub fn expose(&self) -> &str {
        &self.secret
    }

    pub fn is_admin(&self) -> bool {
        self.admin
    }

    /// The owner its links record: its name, or for a token given without
    /// one `token-` and the first 8 hex digits of its SHA-256, which stays
    /// the same from start to start and says nothing usable of the token.
    pub fn owner_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            let digest = Sha256::digest(self.secret.as_bytes());
            let [a, b, c, d, ..] = digest.as_slice() else {
                unreachable!("SHA-256 has 32 bytes");
            };
            format!("token-{a:02x}{b:02x}{c:02x}{d:02x}")
        })
    }

    /// [`Self::owner_name`] as an owner, or why the name is refused.
    pub fn owner(&self) -> Result<Owner, RecordError> {
        Owner::try_from(self.owner_name().as_str())
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "AccessToken({}, admin: {}, domains: {:?}, <hidden>)",
            self.owner_name(),
            self.admin,
            self.domains
        )
    }
}

/// Shortest token accepted: 32 hex digits are 128 bits.
pub const MIN_TOKEN_LEN: usize = 32;

/// Environment variable with more tokens, separated by commas or spaces, so
/// a token need not be written into a configuration file: each `token`,
/// `name=token` or `name:admin=token`.
pub const TOKENS_ENV: &str = "SHORTLINK_TOKENS";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitConfig {
    /// Links one client address may create per minute, on average; 0 turns
    /// the limit off. Holders of a token are never limited.
    pub links_per_minute: u32,
    /// Links a client may create at once before the average applies.
    pub burst: u32,
    /// Behind a reverse proxy on this machine, every client arrives from
    /// loopback: take the address the proxy appended to `X-Forwarded-For`
    /// instead, and `X-Forwarded-Proto` for whether the browser came over
    /// HTTPS, for requests from loopback only. The one setting that makes
    /// the writer believe forwarded headers.
    pub trust_forwarded_for: bool,
    /// Keep the buckets in the links' Redis, shared by every writer of it,
    /// so that N writers do not give a client N times the limit.
    pub shared: bool,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            links_per_minute: 60,
            burst: 20,
            trust_forwarded_for: false,
            shared: false,
        }
    }
}

impl RateLimitConfig {
    /// Whether a request from `peer` may say through forwarded headers
    /// (`X-Forwarded-For`, `X-Forwarded-Proto`) who the client is and how it
    /// connected: only with `trust_forwarded_for`, and only from loopback,
    /// where the proxy is.
    #[must_use]
    pub fn trusts_forwarded_from(&self, peer: IpAddr) -> bool {
        self.trust_forwarded_for && peer.is_loopback()
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            public_base_url: "http://127.0.0.1:6081/l/".into(),
            max_url_length: 2048,
            max_body_bytes: 16 * 1024,
            allow_private_targets: false,
            min_generated_key_length: shortlink_core::MIN_GENERATED_LEN,
            allowed_hosts: Vec::new(),
            expected_links: 1_000_000,
            redis: RedisConfig::default(),
            redirect: RedirectConfig::default(),
            varnish: VarnishConfig::default(),
            clicks: ClicksConfig::default(),
            access: AccessConfig::default(),
            rate_limit: RateLimitConfig::default(),
            titles: TitlesConfig::default(),
            domains: Vec::new(),
        }
    }
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            url: "redis://127.0.0.1:6380/0".into(),
            hash_prefix: shortlink_core::DEFAULT_PREFIX.into(),
            split: shortlink_core::DEFAULT_SPLIT,
            connect_timeout_ms: Timeout::CONNECT.as_millis(),
            command_timeout_ms: Timeout::COMMAND.as_millis(),
            write_timeout_ms: Timeout::WRITE.as_millis(),
            pool_size: PoolSize::default(),
            replicas_to_ack: ReplicasToAck::default(),
        }
    }
}

impl Default for RedirectConfig {
    fn default() -> Self {
        Self {
            status: RedirectStatus::default(),
            ttl_s: Ttl::FOUND.as_secs(),
            negative_ttl_s: Ttl::NEGATIVE.as_secs(),
            grace_s: Ttl::GRACE.as_secs(),
            admission_window_s: AdmissionWindow::DEFAULT.as_secs(),
            cache_control: HeaderValue::default_cache_control(),
            noindex: true,
        }
    }
}

impl Default for VarnishConfig {
    fn default() -> Self {
        Self {
            purge_url: "http://127.0.0.1:6081".into(),
            purge_urls: Vec::new(),
            purge_acl: vec!["127.0.0.1".into(), "::1".into()],
            purge_secret: PurgeSecret::default(),
            vmod: "shortlink".into(),
            hosts: Vec::new(),
            robots_txt: DEFAULT_ROBOTS_TXT.into(),
        }
    }
}

/// A short link is no page to index: every crawler is told to stay out.
pub const DEFAULT_ROBOTS_TXT: &str = "User-agent: *\nDisallow: /\n";

impl VarnishConfig {
    /// The Varnish nodes the writer purges: `purge_urls`, or else
    /// `purge_url` unless it is empty.
    #[must_use]
    pub fn purge_nodes(&self) -> Vec<&str> {
        if self.purge_urls.is_empty() {
            Some(self.purge_url.as_str())
                .filter(|url| !url.is_empty())
                .into_iter()
                .collect()
        } else {
            self.purge_urls.iter().map(String::as_str).collect()
        }
    }
}

impl RedirectConfig {
    /// The longest a Varnish node may keep an answer for a key (a link, or
    /// a 404), grace included: past it, a purge that could not be sent is
    /// moot.
    #[must_use]
    pub fn longest_kept(&self) -> Duration {
        let kept = |ttl_s: u64| {
            let ttl = Duration::from_secs(ttl_s);
            ttl.saturating_add(Ttl::grace_after(ttl, Duration::from_secs(self.grace_s)))
        };
        kept(self.ttl_s).max(kept(self.negative_ttl_s))
    }

    /// Whether Varnish caches a 404 for an unknown key, which a link stored
    /// under that key must then purge.
    #[must_use]
    pub fn caches_unknown_keys(&self) -> bool {
        self.negative_ttl_s > 0
    }
}

/// `varnish.purge_secret`: empty, or 16 to 128 characters of letters,
/// digits, `-` and `_` (so it is safe in a VCL string and a header). Never
/// shown in logs or `Debug` output.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct PurgeSecret(String);

impl PurgeSecret {
    /// How long a secret may be: long enough not to be guessed, short
    /// enough for one header line.
    pub const LEN: std::ops::RangeInclusive<usize> = 16..=128;

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl TryFrom<String> for PurgeSecret {
    type Error = ConfigError;

    fn try_from(secret: String) -> Result<Self, ConfigError> {
        let valid = secret.is_empty()
            || (Self::LEN.contains(&secret.len())
                && secret
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)));
        if valid {
            Ok(Self(secret))
        } else {
            Err(ConfigError(format!(
                "varnish.purge_secret must be {} to {} characters of A-Z, a-z, 0-9, - and _ \
                 (e.g. the output of `openssl rand -hex 24`), or empty",
                Self::LEN.start(),
                Self::LEN.end()
            )))
        }
    }
}

impl fmt::Debug for PurgeSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "PurgeSecret(none)"
        } else {
            "PurgeSecret(..)"
        })
    }
}
