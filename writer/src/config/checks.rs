//! The checks a configuration passes before the writer runs from it: each
//! section's values, and what goes into the VCL.

use std::net::IpAddr;
use std::time::Duration;

use shortlink_core::{AdmissionWindow, FlushInterval, Retention, Timeout, Ttl};
use url::Url;

use super::file::{
    AccessConfig, ClicksConfig, RedirectConfig, RedisConfig, VarnishConfig, MIN_TOKEN_LEN,
};
use super::ConfigError;

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

pub(super) fn check_redis(redis: &RedisConfig) -> Result<(), ConfigError> {
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

pub(super) fn check_clicks(clicks: &ClicksConfig) -> Result<(), ConfigError> {
    FlushInterval::try_from(clicks.flush_interval())
        .map_err(|e| ConfigError(format!("clicks.flush_interval_ms {e}")))?;
    for (name, value) in [
        ("days_kept", clicks.days_kept.saturating_mul(86_400)),
        ("hours_kept", clicks.hours_kept.saturating_mul(3600)),
        ("visit_days", clicks.visit_days.saturating_mul(86_400)),
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

pub(super) fn check_redirect(redirect: &RedirectConfig) -> Result<(), ConfigError> {
    for (name, value) in [
        ("ttl_s", redirect.ttl_s),
        ("negative_ttl_s", redirect.negative_ttl_s),
        ("grace_s", redirect.grace_s),
    ] {
        Ttl::try_from(Duration::from_secs(value))
            .map_err(|e| ConfigError(format!("redirect.{name} {e}")))?;
    }
    AdmissionWindow::try_from(Duration::from_secs(redirect.admission_window_s))
        .map_err(|e| ConfigError(format!("redirect.admission_window_s {e}")))?;
    // A header value (checked as it was read), and also a VCL string.
    if !vcl_safe(redirect.cache_control.as_str()) {
        return Err(ConfigError(
            "redirect.cache_control must not contain '\"': the VCL carries it as a string".into(),
        ));
    }
    Ok(())
}

pub(super) fn check_varnish(varnish: &VarnishConfig, public_base: &Url) -> Result<(), ConfigError> {
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
    // Carried in a VCL long string, {"..."}, which ends at the first "}.
    let robots = &varnish.robots_txt;
    let robots_ok = robots.len() <= 4096
        && !robots.contains("\"}")
        && robots
            .bytes()
            .all(|b| b == b'\n' || (0x20..0x7f).contains(&b));
    if !robots_ok {
        return Err(ConfigError(
            "varnish.robots_txt must be at most 4096 bytes of printable ASCII and line \
             breaks, without \"}"
                .into(),
        ));
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

/// A DNS name or IPv4 address as a Host header carries it, without a port.
pub(super) fn is_host_name(host: &str) -> bool {
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

pub(super) fn check_access(access: &AccessConfig) -> Result<(), ConfigError> {
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
