//! The one configuration both sides run from: the writer reads it, and the
//! VCL it generates carries the same prefix, split, paths, status and TTLs
//! into Varnish. `shortlink.example.toml` documents every field.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use shortlink_core::clicks::{CountNames, Layout};
use shortlink_core::{
    ClickBacklog, ClickQueueMb, FlushInterval, HeaderValue, KeyScheme, Owner, PoolSize,
    RecordError, RedirectStatus, ReplicasToAck, Retention, Timeout, Ttl, DIGEST_KEY_LEN,
};
use url::Url;

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
    /// How long Varnish caches a 404 (the writer purges it on insert).
    pub negative_ttl_s: u64,
    /// How long Varnish may serve an expired link while Redis is away.
    pub grace_s: u64,
    /// `Cache-Control` sent to clients with a redirect.
    pub cache_control: HeaderValue,
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
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessConfig {
    /// Bearer tokens that may create links without a rate limit. Required
    /// when the writer listens on anything but loopback.
    pub tokens: Vec<AccessToken>,
    /// Refuse link creation without a token even on loopback.
    pub require_token: bool,
}

/// A bearer token from the configuration, with the name its links record
/// as their owner. Written as the token alone, or as a table:
/// `{ name = "alice", token = "...", admin = true }`. Its `Debug` hides the
/// token, so no log line or error message can carry it.
#[derive(Clone, Deserialize)]
#[serde(from = "TokenEntry")]
pub struct AccessToken {
    secret: String,
    name: Option<String>,
    admin: bool,
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
    },
}

impl From<TokenEntry> for AccessToken {
    fn from(entry: TokenEntry) -> Self {
        match entry {
            TokenEntry::Bare(secret) => Self::new(secret),
            TokenEntry::Named { token, name, admin } => Self {
                secret: token,
                name,
                admin,
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
        }
    }

    /// A token named `name`; `admin` may change every link.
    pub fn named(name: &str, token: impl Into<String>, admin: bool) -> Self {
        Self {
            secret: token.into(),
            name: Some(name.to_owned()),
            admin,
        }
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
            "AccessToken({}, admin: {}, <hidden>)",
            self.owner_name(),
            self.admin
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
            cache_control: HeaderValue::default_cache_control(),
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
        }
    }
}

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
        Duration::from_secs(
            self.ttl_s
                .max(self.negative_ttl_s)
                .saturating_add(self.grace_s),
        )
    }
}

/// A configuration that failed to load, with what to fix.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// A checked configuration, with the values derived from it.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    pub scheme: KeyScheme,
    /// The names of click counts, in the layout of the clicks' Redis.
    pub count_names: CountNames,
    pub public_base: Url,
    /// Path of short links, from `public_base_url`: `/l/` by default.
    pub link_path: String,
    /// The hosts a request's `Host` may name ([`Self::host_refusal`]).
    pub writer_hosts: Vec<url::Host>,
}

impl Settings {
    /// Reads and checks `path`; `None` means all defaults. Tokens in the
    /// environment variable `SHORTLINK_TOKENS` are added to the file's.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let mut config: Config = match path {
            None => Config::default(),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
                toml::from_str(&text)
                    .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?
            }
        };
        if let Ok(tokens) = std::env::var(TOKENS_ENV) {
            config.access.tokens.extend(
                tokens
                    .split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|t| !t.is_empty())
                    .map(AccessToken::from_env_entry),
            );
        }
        Self::new(config)
    }

    /// Checks `config`, so that nothing invalid reaches Redis or the VCL.
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        let scheme = KeyScheme::new(&config.redis.hash_prefix, config.redis.split)
            .map_err(|e| ConfigError(format!("redis.{e}")))?;
        let public_base = Url::parse(&config.public_base_url).map_err(|e| {
            ConfigError(format!("public_base_url {:?}: {e}", config.public_base_url))
        })?;
        if !matches!(public_base.scheme(), "http" | "https")
            || public_base.host().is_none()
            || public_base.query().is_some()
            || !public_base.path().ends_with('/')
        {
            return Err(ConfigError(format!(
                "public_base_url {:?} must be an http(s) URL whose path ends with '/', \
                 such as http://127.0.0.1:6081/l/",
                config.public_base_url
            )));
        }
        let link_path = public_base.path().to_owned();
        if !link_path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-_.".contains(&b))
        {
            return Err(ConfigError(format!(
                "public_base_url path {link_path:?} must be made of letters, digits and - _ . /, such as /l/"
            )));
        }
        let min = config.min_generated_key_length;
        if min < scheme.min_len() || min > DIGEST_KEY_LEN {
            return Err(ConfigError(format!(
                "min_generated_key_length {min} must be {} to {DIGEST_KEY_LEN}",
                scheme.min_len()
            )));
        }
        if !(64..=shortlink_core::MAX_TARGET_LEN).contains(&config.max_url_length) {
            return Err(ConfigError(format!(
                "max_url_length {} must be 64 to {}",
                config.max_url_length,
                shortlink_core::MAX_TARGET_LEN
            )));
        }
        // Form encoding can triple a URL: the longest one must still fit.
        let least_body = 3 * config.max_url_length + 1024;
        if !(least_body..=1024 * 1024).contains(&config.max_body_bytes) {
            return Err(ConfigError(format!(
                "max_body_bytes {} must be {least_body} (3 × max_url_length + 1024) to 1048576",
                config.max_body_bytes
            )));
        }
        check_redis(&config.redis)?;
        check_redirect(&config.redirect)?;
        check_varnish(&config.varnish, &public_base)?;
        check_clicks(&config.clicks)?;
        let clicks_url =
            shortlink_core::clicks::own_redis(&config.clicks.redis_url, &config.redis.url)
                .unwrap_or(&config.redis.url);
        let layout = if redis_target::names_a_cluster(clicks_url) {
            Layout::Cluster
        } else {
            Layout::Plain
        };
        let count_names =
            CountNames::new(&scheme, layout).map_err(|e| ConfigError(format!("redis.{e}")))?;
        check_access(&config.access)?;
        if config.rate_limit.links_per_minute > 0 && config.rate_limit.burst == 0 {
            return Err(ConfigError(
                "rate_limit.burst must be at least 1 while links_per_minute is set".into(),
            ));
        }
        let writer_hosts = writer_hosts(&config, &public_base)?;
        Ok(Self {
            config,
            scheme,
            count_names,
            public_base,
            link_path,
            writer_hosts,
        })
    }

    /// Why the writer does not answer a request whose `Host` (or absolute
    /// URL) names `authority`: a host it was not told is its own, as when a
    /// page's name was rebound to this writer's address. `None`: it does.
    #[must_use]
    pub fn host_refusal(&self, authority: &str) -> Option<String> {
        let host = parse_authority(authority);
        if host.is_some_and(|host| self.writer_hosts.contains(&host)) {
            return None;
        }
        Some(format!(
            "this writer does not answer for the host {authority:?}: to reach it under \
             that name, add the name to allowed_hosts in its configuration (public_base_url's \
             host, the listen address and, on loopback, localhost are allowed already)"
        ))
    }

    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.config.redis.connect_timeout_ms)
    }

    pub fn write_timeout(&self) -> Duration {
        Duration::from_millis(self.config.redis.write_timeout_ms)
    }

    /// The writer's bounds on a Redis exchange: a command may take the
    /// write timeout, as Redis syncs each write to disk first.
    pub fn redis_timeouts(&self) -> redis_target::Timeouts {
        redis_target::Timeouts {
            connect: self.connect_timeout(),
            command: self.write_timeout(),
        }
    }

    /// A warning when `expected_links` spread over the split's hashes would
    /// put more fields in a hash than Redis keeps compact
    /// (`hash-max-listpack-entries`, 512 in the shipped `redis/redis.conf`).
    /// Past that, Redis converts the hash to a hashtable, which costs several
    /// times the memory per link.
    pub fn listpack_warning(&self, max_listpack_entries: u64) -> Option<String> {
        let split = self.scheme.split();
        let hashes = |split: usize| 64_u64.pow(u32::try_from(split).unwrap_or(4));
        let per_hash = |split: usize| self.config.expected_links.div_ceil(hashes(split));
        // Links in the fullest hash, with a margin: keys spread evenly but
        // not exactly.
        let fullest = |split: usize| {
            let links = per_hash(split);
            links + links / 4 + 8
        };
        if fullest(split) <= max_listpack_entries {
            return None;
        }
        let better =
            (split + 1..=shortlink_core::MAX_SPLIT).find(|&s| fullest(s) <= max_listpack_entries);
        let advice = better.map_or_else(
            || "raise hash-max-listpack-entries in Redis's configuration".to_owned(),
            |s| format!("use redis.split = {s} for a new store"),
        );
        Some(format!(
            "{} expected links over {} hashes (split {split}) is about {} per hash, \
             more than the {max_listpack_entries} Redis keeps compact \
             (hash-max-listpack-entries): links would take several times the memory; {advice}",
            self.config.expected_links,
            hashes(split),
            per_hash(split),
        ))
    }

    /// Why `serve` must not start: write endpoints reachable from other
    /// machines with no token to guard them.
    pub fn serve_refusal(&self) -> Option<String> {
        let listen = self.config.listen;
        if listen.ip().is_loopback() || !self.config.access.tokens.is_empty() {
            return None;
        }
        Some(format!(
            "listen = \"{listen}\" is reachable from other machines, so creating links \
             needs a bearer token: add [access] tokens = [\"...\"] to the configuration \
             or set {TOKENS_ENV} (make one with `openssl rand -hex 32`), or listen on 127.0.0.1"
        ))
    }

    /// Whether link creation needs a token: always when listening beyond
    /// loopback.
    pub fn token_required(&self) -> bool {
        self.config.access.require_token || !self.config.listen.ip().is_loopback()
    }

    /// The public short link of `key`.
    pub fn short_url(&self, key: &str) -> String {
        format!("{}{key}", self.public_base)
    }
}

/// Text that goes into a VCL string literal: printable ASCII, no `"`.
fn vcl_safe(value: &str) -> bool {
    value
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"')
}

/// A Redis URL both the writer and the VMOD can open, named `name` in errors.
fn check_redis_url(name: &str, url: &str) -> Result<(), ConfigError> {
    url.parse::<redis_target::Target>()
        .map_err(|e| ConfigError(format!("{name}: {e}")))?;
    if !vcl_safe(url) {
        return Err(ConfigError(format!(
            "{name} must be printable ASCII without '\"'; percent-encode the password"
        )));
    }
    Ok(())
}

fn check_redis(redis: &RedisConfig) -> Result<(), ConfigError> {
    check_redis_url("redis.url", &redis.url)?;
    for (name, value) in [
        ("connect_timeout_ms", redis.connect_timeout_ms),
        ("command_timeout_ms", redis.command_timeout_ms),
        ("write_timeout_ms", redis.write_timeout_ms),
    ] {
        Timeout::try_from(Duration::from_millis(value))
            .map_err(|e| ConfigError(format!("redis.{name} {e}")))?;
    }
    Ok(())
}

fn check_clicks(clicks: &ClicksConfig) -> Result<(), ConfigError> {
    FlushInterval::try_from(clicks.flush_interval())
        .map_err(|e| ConfigError(format!("clicks.flush_interval_ms {e}")))?;
    for (name, value) in [
        ("days_kept", clicks.days_kept.saturating_mul(86_400)),
        ("hours_kept", clicks.hours_kept.saturating_mul(3600)),
    ] {
        Retention::try_from(Duration::from_secs(value))
            .map_err(|e| ConfigError(format!("clicks.{name} {e}")))?;
    }
    if !clicks.redis_url.is_empty() {
        check_redis_url("clicks.redis_url", &clicks.redis_url)?;
    }
    if !vcl_safe(&clicks.geoip) || !(clicks.geoip.is_empty() || clicks.geoip.starts_with('/')) {
        return Err(ConfigError(format!(
            "clicks.geoip {:?} must be an absolute path of printable ASCII without '\"'",
            clicks.geoip
        )));
    }
    Ok(())
}

fn check_redirect(redirect: &RedirectConfig) -> Result<(), ConfigError> {
    for (name, value) in [
        ("ttl_s", redirect.ttl_s),
        ("negative_ttl_s", redirect.negative_ttl_s),
        ("grace_s", redirect.grace_s),
    ] {
        Ttl::try_from(Duration::from_secs(value))
            .map_err(|e| ConfigError(format!("redirect.{name} {e}")))?;
    }
    // A header value (checked as it was read), and also a VCL string.
    if !vcl_safe(redirect.cache_control.as_str()) {
        return Err(ConfigError(
            "redirect.cache_control must not contain '\"': the VCL carries it as a string".into(),
        ));
    }
    Ok(())
}

fn check_varnish(varnish: &VarnishConfig, public_base: &Url) -> Result<(), ConfigError> {
    let named = if varnish.purge_urls.is_empty() {
        "varnish.purge_url"
    } else {
        "varnish.purge_urls entry"
    };
    let nodes = varnish.purge_nodes();
    for (index, node) in nodes.iter().enumerate() {
        let url = Url::parse(node).map_err(|e| ConfigError(format!("{named} {node:?}: {e}")))?;
        if url.scheme() != "http" || url.host().is_none() {
            return Err(ConfigError(format!(
                "{named} {node:?} must be a plain http:// URL of Varnish, such as \
                 http://127.0.0.1:6081"
            )));
        }
        if nodes[..index].contains(node) {
            return Err(ConfigError(format!(
                "{named} {node:?} is listed twice: list each Varnish node once"
            )));
        }
    }
    for entry in &varnish.purge_acl {
        if parse_acl_entry(entry).is_none() {
            return Err(ConfigError(format!(
                "varnish.purge_acl entry {entry:?} must be an IP address or address/prefix"
            )));
        }
    }
    let vmod = &varnish.vmod;
    let by_path = vmod.starts_with('/') && vcl_safe(vmod);
    if vmod != "shortlink" && !by_path {
        return Err(ConfigError(format!(
            "varnish.vmod {vmod:?} must be \"shortlink\" (installed in Varnish's VMOD \
             directory) or the absolute path of libvmod_shortlink.so"
        )));
    }
    for host in &varnish.hosts {
        if !is_host_name(host) {
            return Err(ConfigError(format!(
                "varnish.hosts entry {host:?} must be a host name such as s.example \
                 (letters, digits, - and dots; no port)"
            )));
        }
    }
    let public_host = public_base.host_str().unwrap_or_default();
    if !varnish.hosts.is_empty()
        && !varnish
            .hosts
            .iter()
            .any(|host| host.eq_ignore_ascii_case(public_host))
    {
        return Err(ConfigError(format!(
            "public_base_url's host {public_host:?} must be one of varnish.hosts {:?}, \
             or Varnish would not serve the links the writer hands out",
            varnish.hosts
        )));
    }
    Ok(())
}

/// The names and addresses of [`Settings::writer_hosts`].
fn writer_hosts(config: &Config, public_base: &Url) -> Result<Vec<url::Host>, ConfigError> {
    let mut hosts: Vec<url::Host> = public_base
        .host()
        .map(|h| h.to_owned())
        .into_iter()
        .collect();
    let listen = config.listen.ip();
    if !listen.is_unspecified() {
        hosts.push(ip_host(listen));
    }
    if listen.is_loopback() || listen.is_unspecified() {
        hosts.push(url::Host::Domain("localhost".into()));
        hosts.push(ip_host(IpAddr::from([127, 0, 0, 1])));
        hosts.push(ip_host(IpAddr::from(std::net::Ipv6Addr::LOCALHOST)));
    }
    for name in &config.allowed_hosts {
        // No port: a `:` only inside an IPv6 address's brackets.
        let portless = !name.contains(':') || (name.starts_with('[') && name.ends_with(']'));
        let host = parse_authority(name).filter(|_| portless).ok_or_else(|| {
            ConfigError(format!(
                "allowed_hosts entry {name:?} must be a host name or address without a \
                     port, such as s.example, 192.0.2.1 or [2001:db8::1]"
            ))
        })?;
        hosts.push(host);
    }
    Ok(hosts)
}

fn ip_host(ip: IpAddr) -> url::Host {
    match ip {
        IpAddr::V4(v4) => url::Host::Ipv4(v4),
        IpAddr::V6(v6) => url::Host::Ipv6(v6),
    }
}

/// The host of `authority` (`name`, `name:port`, `[v6]:port`...) as a URL
/// holds it: a name in lower case without a final dot, or an address.
fn parse_authority(authority: &str) -> Option<url::Host> {
    let url = Url::parse(&format!("http://{authority}/")).ok()?;
    let plain = url.path() == "/"
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none();
    match url.host()?.to_owned() {
        _ if !plain => None,
        url::Host::Domain(name) => Some(url::Host::Domain(
            name.strip_suffix('.').unwrap_or(&name).to_owned(),
        )),
        address => Some(address),
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

/// A DNS name or IPv4 address as a Host header carries it, without a port.
fn is_host_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

fn check_access(access: &AccessConfig) -> Result<(), ConfigError> {
    let mut owners = std::collections::HashSet::new();
    let mut secrets = std::collections::HashSet::new();
    for (n, token) in access.tokens.iter().enumerate() {
        let n = n + 1;
        let secret = token.expose();
        // The token itself never goes into a message.
        if secret.len() < MIN_TOKEN_LEN || !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError(format!(
                "access.tokens: token {n} must be at least {MIN_TOKEN_LEN} printable \
                 characters without spaces (make one with `openssl rand -hex 32`)"
            )));
        }
        let owner = token
            .owner()
            .map_err(|e| ConfigError(format!("access.tokens: token {n}: {e}")))?;
        if !secrets.insert(secret) {
            return Err(ConfigError(format!(
                "access.tokens: token {n} is listed twice; remove one"
            )));
        }
        if !owners.insert(owner) {
            return Err(ConfigError(format!(
                "access.tokens: the name {:?} is given to two tokens; each token needs \
                 a name of its own, as links record it as their owner",
                token.owner_name()
            )));
        }
    }
    if access.require_token && access.tokens.is_empty() {
        return Err(ConfigError(
            "access.require_token is set but access.tokens is empty: add a token".into(),
        ));
    }
    Ok(())
}

/// An ACL entry as address and optional prefix length.
pub fn parse_acl_entry(entry: &str) -> Option<(IpAddr, Option<u8>)> {
    let (address, prefix) = match entry.split_once('/') {
        Some((address, prefix)) => (address, Some(prefix.parse::<u8>().ok()?)),
        None => (entry, None),
    };
    let address: IpAddr = address.parse().ok()?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    match prefix {
        Some(p) if p > max => None,
        _ => Some((address, prefix)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, ConfigError> {
        Settings::new(toml::from_str(text).map_err(|e| ConfigError(e.to_string()))?)
    }

    #[test]
    fn defaults_are_valid() {
        let settings = parse("").unwrap();
        assert_eq!(settings.link_path, "/l/");
        assert_eq!(settings.short_url("Lm25"), "http://127.0.0.1:6081/l/Lm25");
        assert_eq!(settings.scheme.prefix(), "short:");
    }

    #[test]
    fn the_writer_answers_for_its_own_hosts_only() {
        let loopback = parse("public_base_url = \"https://S.example/l/\"\nallowed_hosts = [\"admin.example\", \"[2001:db8::1]\", \"192.0.2.7\"]").unwrap();
        for own in [
            "s.example",
            "S.EXAMPLE:443",
            "s.example.",
            "admin.example:8080",
            "[2001:db8::1]:80",
            "192.0.2.7",
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
        ] {
            assert_eq!(loopback.host_refusal(own), None, "{own}");
        }
        for foreign in [
            "evil.example",
            "evil.example:8080",
            "s.example.evil.example",
            "user@s.example",
            "s.example/x",
            "",
            "10.0.0.1:8080",
        ] {
            let refusal = loopback.host_refusal(foreign).expect(foreign);
            assert!(refusal.contains("allowed_hosts"), "{refusal}");
        }
        // Beyond loopback: the listen address, not loopback names.
        let open = parse(
            "listen = \"192.0.2.9:8080\"\n[access]\ntokens = [\"0123456789abcdef0123456789abcdef\"]",
        )
        .unwrap();
        assert_eq!(open.host_refusal("192.0.2.9:8080"), None);
        assert!(open.host_refusal("localhost:8080").is_some());
        let every = parse("listen = \"0.0.0.0:8080\"").unwrap();
        assert_eq!(every.host_refusal("localhost:8080"), None);
        assert!(every.host_refusal("0.0.0.0:8080").is_some());
        for bad in ["s.example:80", "::1", "a b", "https://s.example", ""] {
            let error = parse(&format!("allowed_hosts = [{bad:?}]")).unwrap_err();
            assert!(error.0.contains("allowed_hosts"), "{bad}: {error}");
        }
    }

    #[test]
    fn forwarded_headers_are_believed_from_a_trusted_local_proxy_only() {
        let mut config = RateLimitConfig::default();
        let local = IpAddr::from([127, 0, 0, 1]);
        assert!(!config.trusts_forwarded_from(local));
        config.trust_forwarded_for = true;
        assert!(config.trusts_forwarded_from(local));
        assert!(!config.trusts_forwarded_from(IpAddr::from([192, 0, 2, 1])));
    }

    #[test]
    fn the_example_file_is_the_defaults() {
        let example = include_str!("../shortlink.example.toml");
        let from_file: Config = toml::from_str(example).unwrap();
        assert_eq!(format!("{from_file:?}"), format!("{:?}", Config::default()));
    }

    #[test]
    fn the_compose_configuration_is_valid() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docker/shortlink.toml");
        let settings = Settings::load(Some(Path::new(path))).unwrap();
        assert_eq!(settings.config.redis.url, "redis://redis:6379/0");
    }

    #[test]
    fn the_sentinel_compose_configuration_is_valid() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docker/shortlink.sentinel.toml"
        );
        let settings = Settings::load(Some(Path::new(path))).unwrap();
        assert!(matches!(
            settings.config.redis.url.parse(),
            Ok(redis_target::Target::Sentinel(group)) if group.sentinels.len() == 3
        ));
        assert_eq!(settings.config.varnish.purge_nodes().len(), 2);
        assert!(settings.config.rate_limit.shared);
    }

    #[test]
    fn the_cluster_compose_configuration_is_valid() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docker/shortlink.cluster.toml"
        );
        let settings = Settings::load(Some(Path::new(path))).unwrap();
        assert!(matches!(
            settings.config.redis.url.parse(),
            Ok(redis_target::Target::Cluster(cluster)) if cluster.seeds.len() == 3
        ));
        assert_eq!(settings.config.varnish.purge_nodes().len(), 2);
    }

    #[test]
    fn clicks_in_a_cluster_take_the_cluster_layout() {
        let layout = |text: &str| parse(text).unwrap().count_names.layout();
        let cluster = "[redis]\nurl = \"redis+cluster://10.0.0.1:7000\"\n";
        assert_eq!(layout(cluster), Layout::Cluster, "with the links");
        let apart = format!("{cluster}[clicks]\nredis_url = \"redis://10.0.0.9:6379/0\"\n");
        assert_eq!(layout(&apart), Layout::Plain);
        let only_clicks = "[clicks]\nredis_url = \"redis+cluster://10.0.0.2:7000\"\n";
        assert_eq!(layout(only_clicks), Layout::Cluster);
        assert_eq!(layout(""), Layout::Plain);
        let braces = parse(&format!("{cluster}hash_prefix = \"{{s}}:\"\n"))
            .unwrap_err()
            .to_string();
        assert!(braces.contains("without braces"), "{braces}");
    }

    #[test]
    fn purge_urls_list_every_node_and_replace_purge_url() {
        let one = parse("[varnish]\npurge_url = \"http://10.0.0.1:6081\"").unwrap();
        assert_eq!(one.config.varnish.purge_nodes(), ["http://10.0.0.1:6081"]);
        let none = parse("[varnish]\npurge_url = \"\"").unwrap();
        assert!(none.config.varnish.purge_nodes().is_empty());
        let many = parse("[varnish]\npurge_urls = [\"http://10.0.0.1:6081\", \"http://10.0.0.2\"]")
            .unwrap();
        assert_eq!(
            many.config.varnish.purge_nodes(),
            ["http://10.0.0.1:6081", "http://10.0.0.2"]
        );
        for (text, expected) in [
            (
                "[varnish]\npurge_urls = [\"http://a:1\", \"http://a:1\"]",
                "listed twice",
            ),
            (
                "[varnish]\npurge_urls = [\"http://a:1\", \"https://b\"]",
                "varnish.purge_urls entry \"https://b\" must be a plain http:// URL",
            ),
            (
                "[varnish]\npurge_url = \"a:1\"",
                "varnish.purge_url \"a:1\" must be a plain http:// URL",
            ),
        ] {
            let error = parse(text).unwrap_err().0;
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn a_node_keeps_an_answer_for_the_longest_ttl_plus_grace() {
        let settings = parse("[redirect]\nttl_s = 60\nnegative_ttl_s = 600\ngrace_s = 30").unwrap();
        assert_eq!(
            settings.config.redirect.longest_kept(),
            Duration::from_secs(630)
        );
    }

    #[test]
    fn unknown_fields_are_named() {
        let error = parse("listne = \"127.0.0.1:1\"").unwrap_err().0;
        assert!(error.contains("unknown field `listne`"), "{error}");
        let error = parse("[redis]\nprefix = \"x\"").unwrap_err().0;
        assert!(error.contains("unknown field `prefix`"), "{error}");
    }

    #[test]
    fn bad_values_say_what_to_fix() {
        for (text, expected) in [
            ("[redis]\nsplit = 9", "split 9 is out of range"),
            ("[redis]\nhash_prefix = \"a b\"", "hash prefix"),
            ("[redis]\nurl = \"http://x\"", "redis.url"),
            ("[clicks]\nredis_url = \"http://x\"", "clicks.redis_url"),
            ("[redis]\nurl = \"redis+sentinel://h:26379\"", "no master"),
            ("[redis]\nreplicas_to_ack = 17", "17 must be 0 to 16"),
            ("[redis]\npool_size = 0", "pool_size"),
            ("[redirect]\nstatus = 200", "not a redirect"),
            (
                "[clicks]\nflush_interval_ms = 0",
                "clicks.flush_interval_ms",
            ),
            ("[clicks]\ndays_kept = 0", "clicks.days_kept"),
            ("[clicks]\nbacklog = 5", "backlog"),
            ("[clicks]\nqueue_mb = 0", "queue_mb"),
            ("[clicks]\ngeoip = \"countries.mmdb\"", "absolute path"),
            ("[redirect]\ncache_control = \"a\\\"b\"", "cache_control"),
            ("public_base_url = \"http://x/l\"", "must be an http(s) URL"),
            ("public_base_url = \"http://x/a%20b/\"", "letters, digits"),
            (
                "[varnish]\nhosts = [\"s.example:80\"]",
                "varnish.hosts entry",
            ),
            ("[varnish]\nhosts = [\"-s.example\"]", "varnish.hosts entry"),
            (
                "[varnish]\nhosts = [\"s.example\"]",
                "must be one of varnish.hosts",
            ),
            ("min_generated_key_length = 2", "min_generated_key_length"),
            ("max_url_length = 10", "max_url_length"),
            ("[varnish]\npurge_acl = [\"localhost\"]", "purge_acl"),
            ("[varnish]\npurge_secret = \"short\"", "purge_secret"),
            (
                "[varnish]\npurge_secret = \"0123456789abcdef\\\"; }\"",
                "purge_secret",
            ),
            ("[varnish]\nvmod = \"../x.so\"", "varnish.vmod"),
            ("max_body_bytes = 10", "max_body_bytes"),
            (
                "[access]\ntokens = [\"short\"]",
                "token 1 must be at least 32",
            ),
            ("[access]\nrequire_token = true", "access.tokens is empty"),
            ("[rate_limit]\nburst = 0", "rate_limit.burst"),
        ] {
            let error = parse(text).unwrap_err().0;
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn split_advice_for_link_counts() {
        let with = |links: u64, split: usize| {
            let mut config = Config {
                expected_links: links,
                ..Config::default()
            };
            config.redis.split = split;
            config.min_generated_key_length = split + 2;
            Settings::new(config).unwrap().listpack_warning(512)
        };
        assert_eq!(with(1_000_000, 2), None);
        let warning = with(10_000_000, 2).unwrap();
        assert!(warning.contains("use redis.split = 3"), "{warning}");
        assert_eq!(with(10_000_000, 3), None);
        assert_eq!(with(100_000_000, 3), None);
        assert!(with(100_000_000, 2).unwrap().contains("split = 3"));
        assert!(with(1_000_000_000_000, 4)
            .unwrap()
            .contains("raise hash-max-listpack-entries"));
    }

    #[test]
    fn tokens_never_show() {
        let token = "0123456789abcdef0123456789abcdef-hushhush";
        let purge_secret = "purge-hushhush-0123456789";
        let settings = parse(&format!(
            "[access]\ntokens = [\"{token}\"]\n[varnish]\npurge_secret = \"{purge_secret}\""
        ))
        .unwrap();
        assert_eq!(settings.config.varnish.purge_secret.as_str(), purge_secret);
        assert!(!format!("{settings:?}").contains("hushhush"));
        let error = parse("[access]\ntokens = [\"hushhush-but-short\"]")
            .unwrap_err()
            .0;
        assert!(!error.contains("hushhush"), "{error}");
    }

    #[test]
    fn listening_beyond_loopback_needs_a_token() {
        let open = parse("listen = \"0.0.0.0:8080\"").unwrap();
        assert!(open.token_required());
        let refusal = open.serve_refusal().unwrap();
        assert!(refusal.contains("needs a bearer token"), "{refusal}");
        let guarded = parse(&format!(
            "listen = \"[::]:8080\"\n[access]\ntokens = [\"{}\"]",
            "t".repeat(32)
        ))
        .unwrap();
        assert_eq!(guarded.serve_refusal(), None);
        assert!(guarded.token_required());
        let local = parse("").unwrap();
        assert_eq!(local.serve_refusal(), None);
        assert!(!local.token_required());
    }

    #[test]
    fn acl_entries() {
        assert!(parse_acl_entry("10.0.0.0/8").is_some());
        assert!(parse_acl_entry("::1").is_some());
        assert!(parse_acl_entry("10.0.0.0/33").is_none());
        assert!(parse_acl_entry("example.org").is_none());
    }
}
