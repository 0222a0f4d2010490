//! The short domains as the configuration describes them, read here from
//! the configuration file's own fields rather than from `Settings`, and the
//! VCL code that routes, forwards and redirects for them.
//!
//! The code comes out with `@NAME#index@` where a value of the domain at
//! `index` goes (in its host regex, path regex, key regex, key space, link
//! path or redirect URL), so that each value is checked for the domain it
//! belongs to and a value placed in another domain's slot is caught.

use shortlink_core::{DomainName, ValidUrl};
use shortlink_writer::config::{Config, Domain};
use url::Url;

/// One short domain: where its links are and what it does with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// The names a request's `Host` may give, in lowercase; empty: every
    /// host (the default domain when `varnish.hosts` is empty).
    pub hosts: Vec<String>,
    /// The path of its links, `/` at the root.
    pub path: String,
    /// Its key space, which is its name; `None` for the default domain.
    pub space: Option<String>,
    pub forward_query: bool,
    /// Its configured redirects for visits to no link: an unknown key,
    /// the bare domain, a path that is no key.
    pub not_found: Option<String>,
    pub bare: Option<String>,
    pub regular_404: Option<String>,
}

impl Site {
    /// Whether its links take every path of every host: what a site's VCL
    /// cannot include.
    pub fn takes_every_path(&self) -> bool {
        self.path == "/" && self.hosts.is_empty()
    }

    /// The condition that names its requests once routed: the header the
    /// routes set, or its absence for the default domain.
    fn named(&self, index: usize) -> String {
        match self.space {
            None => "!req.http.Shortlink-Domain".to_owned(),
            Some(_) => format!("req.http.Shortlink-Domain == \"@DOMAIN#{index}@\""),
        }
    }
}

/// The domains of an accepted configuration, the default one first, then
/// the `[[domains]]` in their order. An entry with `public_base_url`'s host
/// sets the default domain's options and adds its aliases to its names.
pub fn sites(config: &Config) -> Vec<Site> {
    let parse = |text: &str| Url::parse(text).expect("an accepted base URL parses");
    let lower = |names: &[String]| -> Vec<String> {
        names.iter().map(|name| name.to_ascii_lowercase()).collect()
    };
    let url = |text: &str| (!text.is_empty()).then(|| text.to_owned());
    let public = parse(&config.public_base_url);
    let default_name = public.host_str().expect("a base URL has a host").to_owned();
    let mut default = Site {
        hosts: lower(&config.varnish.hosts),
        path: public.path().to_owned(),
        space: None,
        forward_query: false,
        not_found: None,
        bare: None,
        regular_404: None,
    };
    let mut others = Vec::new();
    for entry in &config.domains {
        let base = parse(&entry.base_url);
        let name = base.host_str().expect("a base URL has a host").to_owned();
        let aliases = lower(&entry.aliases);
        if name == default_name {
            // Aliases of a default domain that took every host name it:
            // it takes its own name and theirs from then on.
            if !aliases.is_empty() && default.hosts.is_empty() {
                default.hosts.push(name);
            }
            default.hosts.extend(aliases);
            default.forward_query = entry.forward_query;
            default.not_found = url(&entry.not_found_url);
            default.bare = url(&entry.bare_url);
            default.regular_404 = url(&entry.regular_404_url);
        } else {
            others.push(Site {
                hosts: std::iter::once(name.clone()).chain(aliases).collect(),
                path: base.path().to_owned(),
                space: Some(name),
                forward_query: entry.forward_query,
                not_found: url(&entry.not_found_url),
                bare: url(&entry.bare_url),
                regular_404: url(&entry.regular_404_url),
            });
        }
    }
    std::iter::once(default).chain(others).collect()
}

/// Whether `Settings` checked the configuration into the same domains:
/// the VCL is compared with these, so a disagreement is named as such
/// rather than as a VCL that differs.
pub fn same_as_settings(sites: &[Site], domains: &[Domain]) -> bool {
    sites.len() == domains.len()
        && sites.iter().zip(domains).all(|(site, domain)| {
            site.hosts == domain.hosts
                && site.path == domain.link_path
                && site.space.as_deref() == domain.key_space.as_ref().map(DomainName::as_str)
                && site.forward_query == domain.forward_query
                && site.not_found.as_deref()
                    == domain
                        .redirects
                        .invalid_short_url
                        .as_ref()
                        .map(ValidUrl::as_str)
                && site.bare.as_deref() == domain.redirects.base_url.as_ref().map(ValidUrl::as_str)
                && site.regular_404.as_deref()
                    == domain.redirects.regular_404.as_ref().map(ValidUrl::as_str)
        })
}

/// What goes at `@ROUTES@` in `vcl_recv`: a branch per domain, those with
/// names first, so that the one taking every host sees only the requests no
/// other domain claims. Each sends its link requests to `shortlink_recv`
/// with the domain named once its path passes the key rule (a query may
/// follow), after its bare domain and robots.txt are dealt with.
pub fn routes(sites: &[Site], from_writer: &str) -> String {
    let named = sites
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.hosts.is_empty());
    let every_host = sites.iter().enumerate().filter(|(_, s)| s.hosts.is_empty());
    let mut out = String::new();
    for (n, (index, site)) in named.chain(every_host).enumerate() {
        let mut condition = Vec::new();
        if !site.hosts.is_empty() {
            condition.push(format!("req.http.host ~ \"@HOST_REGEX#{index}@\""));
        }
        let at_root = site.path == "/";
        if at_root {
            // Every path but `/` alone (with a query or fragment), which
            // stays the health page or the site's own unless the domain
            // redirects it, or the writer purges it.
            condition.push(format!(
                "(req.url ~ \"^/[^?#]\" || (req.method == \"PURGE\" && {from_writer}) || \
                 shortlink_links.domain_redirect(\"@VMOD_DOMAIN#{index}@\", \"base_url\") != \"\")"
            ));
        } else {
            condition.push(format!("req.url ~ \"@PATH_REGEX#{index}@\""));
        }
        let keyword = if n == 0 { "if" } else { "} elsif" };
        code(
            &mut out,
            &format!("{keyword} ({}) {{\n", condition.join(" && ")),
        );
        code(
            &mut out,
            "set req.backend_hint = shortlink_links.backend();\n",
        );
        if site.space.is_some() {
            code(
                &mut out,
                &format!("set req.http.Shortlink-Domain = \"@DOMAIN#{index}@\";\n"),
            );
        }
        code(
            &mut out,
            &format!("if (req.url !~ \"@KEY_REGEX#{index}@\") {{\n"),
        );
        // The bare domain: its redirect (752), but for the writer's purge.
        code(
            &mut out,
            &format!("if (req.url ~ \"@BARE_REGEX#{index}@\") {{\n"),
        );
        code(
            &mut out,
            "if (req.method != \"PURGE\") {\nreturn (synth(752, \"Found\"));\n}\n",
        );
        // Its robots.txt: asked for at the root, purged anywhere.
        let robots = format!("req.url !~ \"@ROBOTS_REGEX#{index}@\"");
        let refused = if at_root {
            robots
        } else {
            format!("req.method != \"PURGE\" || {robots}")
        };
        code(&mut out, &format!("}} elsif ({refused}) {{\n"));
        code(&mut out, "return (synth(404, \"Not Found\"));\n}\n");
        code(&mut out, "}\ncall shortlink_recv;\n");
    }
    if !out.is_empty() {
        code(&mut out, "}\n");
    }
    out
}

/// What goes at `@ROBOTS_ROUTES@` in the standalone VCL: `/robots.txt`
/// sent to the robots.txt of the domain its host names, the domains with
/// names first and the one taking every host last, as `<path>robots.txt`.
pub fn robots_routes(sites: &[Site]) -> String {
    let named: Vec<(usize, &Site)> = sites
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.hosts.is_empty())
        .collect();
    let every_host = sites.iter().enumerate().find(|(_, s)| s.hosts.is_empty());
    let route = |index: usize, site: &Site| {
        let domain = match site.space {
            Some(_) => format!("set req.http.Shortlink-Domain = \"@DOMAIN#{index}@\";\n"),
            None => String::new(),
        };
        format!(
            "set req.url = \"@ROBOTS_URL#{index}@\";\n\
             set req.backend_hint = shortlink_links.backend();\n\
             {domain}call shortlink_recv;\n"
        )
    };
    let mut out = String::new();
    code(&mut out, "if (req.url == \"/robots.txt\") {\n");
    for (n, (index, site)) in named.iter().enumerate() {
        let keyword = if n == 0 { "if" } else { "} elsif" };
        code(
            &mut out,
            &format!("{keyword} (req.http.host ~ \"@HOST_REGEX#{index}@\") {{\n"),
        );
        code(&mut out, &route(*index, site));
    }
    match (named.is_empty(), every_host) {
        (true, Some((index, site))) => code(&mut out, &route(index, site)),
        (false, Some((index, site))) => {
            code(&mut out, "} else {\n");
            code(&mut out, &route(index, site));
            code(&mut out, "}\n");
        }
        (false, None) => code(&mut out, "}\n"),
        (true, None) => {}
    }
    code(&mut out, "}\n");
    out
}

/// What goes at `@FORWARDING@`: true for a request of a domain that
/// forwards the query by default.
pub fn forwarding(sites: &[Site]) -> String {
    let terms: Vec<String> = sites
        .iter()
        .enumerate()
        .filter(|(_, site)| site.forward_query)
        .map(|(index, site)| site.named(index))
        .collect();
    if terms.is_empty() {
        "false".to_owned()
    } else {
        terms.join(" || ")
    }
}

/// What goes at `@DEFAULT_REDIRECTS@` in `vcl_init`: each configured
/// redirect given to the VMOD, by domain and kind, its URL at
/// `@NOT_FOUND#index@`, `@BARE#index@` or `@NO_KEY#index@`.
pub fn default_redirects(sites: &[Site]) -> String {
    let mut out = String::new();
    for (index, site) in sites.iter().enumerate() {
        for (kind, url, slot) in [
            ("base_url", &site.bare, "BARE"),
            ("regular_404", &site.regular_404, "NO_KEY"),
            ("invalid_short_url", &site.not_found, "NOT_FOUND"),
        ] {
            if url.is_some() {
                code(
                    &mut out,
                    &format!(
                        "shortlink_links.default_redirect(\"@VMOD_DOMAIN#{index}@\", \"{kind}\", \"@{slot}#{index}@\");\n"
                    ),
                );
            }
        }
    }
    out
}

/// Appends `lines` to `out`, each indented: the comparison reads any
/// indentation as one blank, and none as none.
fn code(out: &mut String, lines: &str) {
    for line in lines.strip_suffix('\n').unwrap_or(lines).split('\n') {
        out.push_str("    ");
        out.push_str(line);
        out.push('\n');
    }
}
