//! Short domains: the `[[domains]]` of the file, checked into [`Domain`]s.
//!
//! The default domain is the one of `public_base_url`, served under the
//! names of `varnish.hosts` (every host when empty, as before domains
//! existed); its links keep the store's own key space. Every other domain
//! has a key space of its own (`shortlink_core::domain`), so the same key
//! on two domains is two links. A `[[domains]]` entry whose `base_url` has
//! `public_base_url`'s host sets the default domain's options.

use serde::Deserialize;
use shortlink_core::clicks::{CountNames, Layout};
use shortlink_core::{DomainName, KeyScheme, NotFoundRedirects, ValidUrl};
use url::Url;

use super::ConfigError;

/// A `[[domains]]` entry as read from TOML.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DomainConfig {
    /// Where the domain's links are served: `https://go.example/` puts
    /// them at the root (`https://go.example/Lm25`), `https://go.example/l/`
    /// under a path.
    pub base_url: String,
    /// Other names serving the same links, in the same key space.
    pub aliases: Vec<String>,
    /// Forward the query string a link is requested with to its target,
    /// for links that do not say (`?+` or `?-` in their value).
    pub forward_query: bool,
    /// Where a key the domain does not hold redirects (302); empty: the
    /// 404 page. Shlink's `invalidShortUrlRedirect`.
    pub not_found_url: String,
    /// Where the bare domain (its link path alone) redirects (302); empty:
    /// what it answers without domains (404, or the standalone VCL's
    /// health page at `/`). Shlink's `baseUrlRedirect`.
    pub bare_url: String,
    /// Where any other path of the domain that is no key redirects (302);
    /// empty: the 404 page. Shlink's `regular404Redirect`.
    pub regular_404_url: String,
}

/// A short domain, checked.
#[derive(Debug, Clone)]
pub struct Domain {
    /// The canonical name: `base_url`'s host, in lowercase. The API and
    /// the pages name the domain by it.
    pub name: String,
    /// Every name Varnish serves the domain under (the canonical one
    /// first); empty for a default domain that takes every host.
    pub hosts: Vec<String>,
    /// The public base of its links: a link is this followed by its key.
    pub base: Url,
    /// The path of its links: `/l/`, or `/` at the root.
    pub link_path: String,
    /// Its own key space; `None` for the default domain, which keeps the
    /// store's.
    pub key_space: Option<DomainName>,
    pub scheme: KeyScheme,
    /// The names of its click counts.
    pub count_names: CountNames,
    pub forward_query: bool,
    /// Where its visits to no link redirect, from the configuration: the
    /// defaults of what is set while the writer runs.
    pub redirects: NotFoundRedirects,
}

impl Domain {
    /// The public short link of `key` on this domain.
    pub fn short_url(&self, key: &str) -> String {
        format!("{}{key}", self.base)
    }

    pub fn is_default(&self) -> bool {
        self.key_space.is_none()
    }
}

/// Checks a base URL: http(s), a host, no query, a path ending with `/`
/// made of safe characters. Returns it with its path.
pub fn check_base_url(what: &str, text: &str) -> Result<(Url, String), ConfigError> {
    let base = Url::parse(text).map_err(|e| ConfigError(format!("{what} {text:?}: {e}")))?;
    if !matches!(base.scheme(), "http" | "https")
        || base.host().is_none()
        || base.query().is_some()
        || base.fragment().is_some()
        || !base.path().ends_with('/')
    {
        return Err(ConfigError(format!(
            "{what} {text:?} must be an http(s) URL whose path ends with '/', \
             such as http://127.0.0.1:6081/l/ or https://go.example/"
        )));
    }
    let link_path = base.path().to_owned();
    if !link_path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/-_.".contains(&b))
    {
        return Err(ConfigError(format!(
            "{what} path {link_path:?} must be made of letters, digits and - _ . /, such as /l/"
        )));
    }
    Ok((base, link_path))
}

/// What the store's own key scheme and click layout need to name a
/// domain's keys.
pub struct Spaces<'a> {
    pub scheme: &'a KeyScheme,
    pub layout: Layout,
    /// `public_base_url`, checked.
    pub public_base: &'a Url,
    pub link_path: &'a str,
    /// `varnish.hosts`.
    pub default_hosts: &'a [String],
}

/// The domains of `entries`, the default one first.
pub fn domains(entries: &[DomainConfig], spaces: &Spaces<'_>) -> Result<Vec<Domain>, ConfigError> {
    let default_name = spaces
        .public_base
        .host_str()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let count_names = |scheme: &KeyScheme| {
        CountNames::new(scheme, spaces.layout).map_err(|e| ConfigError(format!("redis.{e}")))
    };
    let mut default = Domain {
        name: default_name.clone(),
        hosts: spaces
            .default_hosts
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
        base: spaces.public_base.clone(),
        link_path: spaces.link_path.to_owned(),
        key_space: None,
        scheme: spaces.scheme.clone(),
        count_names: count_names(spaces.scheme)?,
        forward_query: false,
        redirects: NotFoundRedirects::default(),
    };
    let mut others: Vec<Domain> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let what = format!("domains[{index}].base_url");
        let (base_url, link_path) = check_base_url(&what, &entry.base_url)?;
        let name = base_url.host_str().unwrap_or_default().to_ascii_lowercase();
        let redirects = NotFoundRedirects {
            base_url: redirect_url(index, "bare_url", &entry.bare_url)?,
            regular_404: redirect_url(index, "regular_404_url", &entry.regular_404_url)?,
            invalid_short_url: redirect_url(index, "not_found_url", &entry.not_found_url)?,
        };
        let mut aliases = Vec::with_capacity(entry.aliases.len());
        for alias in &entry.aliases {
            let alias = DomainName::try_from(alias.as_str())
                .map_err(|e| ConfigError(format!("domains[{index}].aliases: {e}")))?;
            aliases.push(alias.as_str().to_owned());
        }
        if name == default_name {
            if base_url != *spaces.public_base {
                return Err(ConfigError(format!(
                    "{what} {:?} names public_base_url's host, so it is the default domain: \
                     give it public_base_url's own value {:?}",
                    entry.base_url,
                    spaces.public_base.as_str()
                )));
            }
            if !aliases.is_empty() {
                if default.hosts.is_empty() {
                    check_matched_by_name(index, &default_name)?;
                    default.hosts.push(default_name.clone());
                }
                default.hosts.extend(aliases);
            }
            default.forward_query = entry.forward_query;
            default.redirects = redirects;
            continue;
        }
        let key_space =
            DomainName::try_from(name.as_str()).map_err(|e| ConfigError(format!("{what}: {e}")))?;
        let scheme = spaces.scheme.for_domain(&key_space);
        let mut hosts = vec![name.clone()];
        hosts.extend(aliases);
        others.push(Domain {
            name,
            hosts,
            base: base_url,
            link_path,
            count_names: count_names(&scheme)?,
            key_space: Some(key_space),
            scheme,
            forward_query: entry.forward_query,
            redirects,
        });
    }
    let mut all = vec![default];
    all.extend(others);
    check_names_apart(&all)?;
    Ok(all)
}

/// A domain's `field` (`not_found_url`, `bare_url`, `regular_404_url`):
/// empty for none, or a valid redirect target.
fn redirect_url(index: usize, field: &str, text: &str) -> Result<Option<ValidUrl>, ConfigError> {
    if text.is_empty() {
        return Ok(None);
    }
    // The URL goes into a VCL string, which a double quote would end.
    if text.contains('"') {
        return Err(ConfigError(format!(
            "domains[{index}].{field} {text:?} holds a double quote, which no URL \
             needs: write it %22"
        )));
    }
    ValidUrl::try_from(text.to_owned())
        .map(Some)
        .map_err(|e| ConfigError(format!("domains[{index}].{field} {text:?}: {e}")))
}

/// The default domain's name, once aliases make Varnish match it by name
/// (it took every host before), must be one a Host regex can hold.
fn check_matched_by_name(index: usize, name: &str) -> Result<(), ConfigError> {
    let by_name = super::checks::is_host_name(name);
    if by_name {
        return Ok(());
    }
    Err(ConfigError(format!(
        "domains[{index}].aliases: public_base_url's host {name:?} is no host name \
         Varnish can match an alias beside; use a host name (letters, digits, - and \
         dots) in public_base_url"
    )))
}

/// A name serves one domain: Varnish could not tell which one it meant.
fn check_names_apart(all: &[Domain]) -> Result<(), ConfigError> {
    for (index, domain) in all.iter().enumerate() {
        for host in domain.hosts.iter().chain(std::iter::once(&domain.name)) {
            let other = all[index + 1..]
                .iter()
                .find(|later| later.hosts.contains(host) || later.name == *host);
            if let Some(other) = other {
                return Err(ConfigError(format!(
                    "the name {host:?} is given to the domains {:?} and {:?}: \
                     a name may serve one domain only",
                    domain.name, other.name
                )));
            }
        }
    }
    Ok(())
}
