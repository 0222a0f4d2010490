//! The per-domain parts of the generated VCL: which requests are whose
//! links (by `Host` and path), which domains forward the query string by
//! default, and where an unknown key or a bare domain redirects.
//!
//! Every value placed here was checked by the configuration: host names
//! are letters, digits, `-` and dots (so escaping the dots makes them a
//! regex), paths letters, digits and `-_./`, URLs valid redirect targets
//! without a double quote (no space, no control character), so each is
//! safe inside a VCL string.

use std::fmt::Write as _;

use shortlink_core::{DomainName, NotFoundKind};

use crate::config::{Domain, Settings};

/// The values of the placeholders that depend on the domains and on what
/// crawlers are told.
/// `from_writer` is the VCL condition that a request comes from the writer.
pub fn values(settings: &Settings, from_writer: &str) -> Vec<(&'static str, String)> {
    let domains = &settings.domains;
    let config = &settings.config;
    let hosts_note: Vec<String> = domains
        .iter()
        .map(|domain| {
            if domain.hosts.is_empty() {
                format!("under {}", domain.link_path)
            } else {
                format!("under {} on {}", domain.link_path, domain.hosts.join(", "))
            }
        })
        .collect();
    let names: Vec<&str> = domains
        .iter()
        .filter_map(|domain| domain.key_space.as_ref().map(DomainName::as_str))
        .collect();
    // Not on what the VMOD marks crawlable: such a link, and robots.txt.
    let noindex = if config.redirect.noindex {
        "        if (!resp.http.Shortlink-Crawlable) {\n            \
         set resp.http.X-Robots-Tag = \"noindex\";\n        }\n"
    } else {
        ""
    };
    vec![
        ("HOSTS_NOTE", format!(" ({})", hosts_note.join("; "))),
        (
            "ROUTES",
            routes(domains, &settings.scheme.key_pattern(), from_writer),
        ),
        ("DOMAINS", names.join(" ")),
        ("FORWARDING", forwarding(domains)),
        ("NOINDEX", noindex.to_owned()),
        ("DEFAULT_REDIRECTS", default_redirects(domains)),
        ("ROBOTS_TXT", config.varnish.robots_txt.clone()),
    ]
}

/// The routes of `vcl_recv`: one branch per domain, the named ones first
/// and a default domain that takes every host last, each sending its
/// link requests to `shortlink_recv` with the domain named.
fn routes(domains: &[Domain], key_pattern: &str, from_writer: &str) -> String {
    let mut ordered: Vec<&Domain> = domains.iter().filter(|d| !d.hosts.is_empty()).collect();
    ordered.extend(domains.iter().filter(|d| d.hosts.is_empty()));
    let mut out = String::new();
    for (index, domain) in ordered.iter().enumerate() {
        let path = regex_escape(&domain.link_path);
        let name = domain_literal(domain);
        let mut condition = Vec::new();
        if !domain.hosts.is_empty() {
            condition.push(host_condition(&domain.hosts));
        }
        let at_root = domain.link_path == "/";
        if at_root {
            // The bare domain (`/`, `/?...`, `/#...`) stays what it is
            // without domains (the standalone VCL's health page, or the
            // site's) unless the domain redirects it, or the writer purges
            // it to have its redirects read again. One regex for a key's
            // route, as it pays one.
            condition.push(format!(
                "(req.url ~ \"^/[^?#]\" || (req.method == \"PURGE\" && {from_writer}) || \
                 shortlink_links.domain_redirect(\"{name}\", \"base_url\") != \"\")"
            ));
        } else {
            condition.push(format!("req.url ~ \"^{path}\""));
        }
        let keyword = if index == 0 { "if" } else { "} elsif" };
        let _ = writeln!(out, "    {keyword} ({}) {{", condition.join(" && "));
        out.push_str("        set req.backend_hint = shortlink_links.backend();\n");
        if let Some(space) = &domain.key_space {
            let _ = writeln!(out, "        set req.http.Shortlink-Domain = \"{space}\";");
        }
        // The key rule, checked on the path before any lookup: keys that
        // break it never reach the VMOD, let alone Redis. A query or
        // fragment may follow; it stays in the URL for forwarding. The
        // bare domain answers its redirect (752), or the 404 page; the
        // writer's PURGE of it goes on to `shortlink_recv`.
        let _ = writeln!(
            out,
            "        if (req.url !~ \"^{path}{key_pattern}(?:[?#]|$)\") {{"
        );
        // `<path>robots.txt` is the domain's robots.txt, which the VMOD
        // answers: asked for at the root, purged by the writer anywhere.
        let robots = format!("req.url !~ \"^{path}robots\\.txt(?:[?#]|$)\"");
        let refused = if at_root {
            robots
        } else {
            format!("req.method != \"PURGE\" || {robots}")
        };
        let _ = writeln!(out, "            if (req.url ~ \"^{path}(?:[?#]|$)\") {{");
        out.push_str(
            "                if (req.method != \"PURGE\") {\n                    \
             return (synth(752, \"Found\"));\n                }\n",
        );
        let _ = writeln!(out, "            }} elsif ({refused}) {{");
        out.push_str("                return (synth(404, \"Not Found\"));\n            }\n");
        out.push_str("        }\n        call shortlink_recv;\n");
    }
    if !out.is_empty() {
        out.push_str("    }\n");
    }
    out
}

/// What goes at `@ROBOTS_ROUTES@` in the standalone VCL, which answers
/// `/robots.txt` on every host: it is the robots.txt of the domain the
/// host names (the default domain's on any other), fetched and purged as
/// `<link path>robots.txt`. Empty in a site's VCL, where `/robots.txt` is
/// the site's unless links are at the root (their route takes it).
pub fn robots_routes(domains: &[Domain]) -> String {
    let named: Vec<&Domain> = domains.iter().filter(|d| !d.hosts.is_empty()).collect();
    let every_host = domains.iter().find(|d| d.hosts.is_empty());
    let mut out = String::from("    if (req.url == \"/robots.txt\") {\n");
    for (index, domain) in named.iter().enumerate() {
        let keyword = if index == 0 { "if" } else { "} elsif" };
        let _ = writeln!(
            out,
            "        {keyword} ({}) {{",
            host_condition(&domain.hosts)
        );
        robots_route(domain, "            ", &mut out);
    }
    match (named.is_empty(), every_host) {
        (true, Some(domain)) => robots_route(domain, "        ", &mut out),
        (false, Some(domain)) => {
            out.push_str("        } else {\n");
            robots_route(domain, "            ", &mut out);
            out.push_str("        }\n");
        }
        (false, None) => out.push_str("        }\n"),
        (true, None) => {}
    }
    out.push_str("    }\n");
    out
}

/// Sends a request for `/robots.txt` to `domain`'s, each line indented.
fn robots_route(domain: &Domain, indent: &str, out: &mut String) {
    let _ = writeln!(
        out,
        "{indent}set req.url = \"{}robots.txt\";",
        domain.link_path
    );
    let _ = writeln!(
        out,
        "{indent}set req.backend_hint = shortlink_links.backend();"
    );
    if let Some(space) = &domain.key_space {
        let _ = writeln!(out, "{indent}set req.http.Shortlink-Domain = \"{space}\";");
    }
    let _ = writeln!(out, "{indent}call shortlink_recv;");
}

/// A VCL condition true for a request to one of `hosts`, on any port.
fn host_condition(hosts: &[String]) -> String {
    let names: Vec<String> = hosts.iter().map(|h| regex_escape(h)).collect();
    format!("req.http.host ~ \"^(?i)({})(:[0-9]+)?$\"", names.join("|"))
}

fn regex_escape(text: &str) -> String {
    text.replace('.', "\\.")
}

/// The VCL condition under which a link that does not say forwards the
/// query string: its domain forwards by default.
fn forwarding(domains: &[Domain]) -> String {
    let terms: Vec<String> = domains
        .iter()
        .filter(|domain| domain.forward_query)
        .map(is_the_domain)
        .collect();
    if terms.is_empty() {
        "false".to_owned()
    } else {
        terms.join(" || ")
    }
}

/// The `vcl_init` lines giving the VMOD each domain's configured
/// redirects: what a kind not set while the writer runs answers.
fn default_redirects(domains: &[Domain]) -> String {
    let mut out = String::new();
    for domain in domains {
        for kind in NotFoundKind::ALL {
            if let Some(url) = domain.redirects.get(kind) {
                let _ = writeln!(
                    out,
                    "    shortlink_links.default_redirect(\"{}\", \"{}\", \"{url}\");",
                    domain_literal(domain),
                    kind.name()
                );
            }
        }
    }
    out
}

/// The name the VMOD knows `domain` by: its key space's, `""` for the
/// default domain.
fn domain_literal(domain: &Domain) -> &str {
    domain.key_space.as_ref().map_or("", DomainName::as_str)
}

/// A VCL condition true for a link request of `domain`: the routes name
/// every domain but the default one in `Shortlink-Domain`.
fn is_the_domain(domain: &Domain) -> String {
    match &domain.key_space {
        None => "!req.http.Shortlink-Domain".to_owned(),
        Some(space) => format!("req.http.Shortlink-Domain == \"{space}\""),
    }
}
