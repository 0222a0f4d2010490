//! [`Settings`]: the configuration checked, with the values derived from it
//! (key scheme, click count names, the writer's hosts).

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use shortlink_core::clicks::{CountNames, Layout};
use shortlink_core::{KeyScheme, DIGEST_KEY_LEN};
use url::Url;

use super::checks::{check_access, check_clicks, check_redirect, check_redis, check_varnish};
use super::domains::{check_base_url, domains, Domain, Spaces};
use super::file::{AccessToken, Config, TOKENS_ENV};
use super::ConfigError;

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
    /// The short domains, the default one (`public_base_url`'s) first.
    pub domains: Vec<Domain>,
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
        let (public_base, link_path) = check_base_url("public_base_url", &config.public_base_url)?;
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
        let domains = domains(
            &config.domains,
            &Spaces {
                scheme: &scheme,
                layout,
                public_base: &public_base,
                link_path: &link_path,
                default_hosts: &config.varnish.hosts,
            },
        )?;
        check_token_domains(&config.access.tokens, &domains)?;
        Ok(Self {
            config,
            scheme,
            count_names,
            public_base,
            link_path,
            writer_hosts,
            domains,
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

    /// The domain named `name` (its canonical name or an alias, in any
    /// case), or the default one for `None`.
    pub fn domain(&self, name: Option<&str>) -> Result<&Domain, UnknownDomain> {
        let Some(name) = name.filter(|name| !name.is_empty()) else {
            return Ok(&self.domains[0]);
        };
        find_domain(&self.domains, name).ok_or_else(|| UnknownDomain {
            name: name.to_owned(),
            known: self.domains.iter().map(|d| d.name.clone()).collect(),
        })
    }

    /// The public short link of `key` on the default domain.
    pub fn short_url(&self, key: &str) -> String {
        format!("{}{key}", self.public_base)
    }
}

/// The domain of `domains` named `name` (its canonical name or an alias,
/// in any case).
fn find_domain<'d>(domains: &'d [Domain], name: &str) -> Option<&'d Domain> {
    let lower = name.to_ascii_lowercase();
    domains
        .iter()
        .find(|domain| domain.name == lower || domain.hosts.contains(&lower))
}

/// Every domain a token is limited to is served here; an admin token acts
/// on every domain, so a limit on one would mean nothing.
fn check_token_domains(tokens: &[AccessToken], domains: &[Domain]) -> Result<(), ConfigError> {
    for token in tokens {
        let name = token.owner_name();
        if token.is_admin() && !token.domains().is_empty() {
            return Err(ConfigError(format!(
                "access.tokens: the token {name:?} is an admin's, which acts on every \
                 domain: remove its domains, or admin = true to limit it"
            )));
        }
        if let Some(unknown) = token
            .domains()
            .iter()
            .find(|domain| find_domain(domains, domain).is_none())
        {
            return Err(ConfigError(format!(
                "access.tokens: the token {name:?} is limited to the domain {unknown:?}, \
                 which is not served here: use one of {:?} (public_base_url's host, or a \
                 [[domains]] base_url's)",
                domains.iter().map(|d| d.name.as_str()).collect::<Vec<_>>()
            )));
        }
    }
    Ok(())
}

/// A domain the configuration does not list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the domain {name:?} is not served here: use one of {known:?}, or leave it out for the default"
)]
pub struct UnknownDomain {
    pub name: String,
    pub known: Vec<String>,
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
