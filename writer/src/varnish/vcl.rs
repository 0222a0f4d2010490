//! Generates the VCL Varnish runs, from the writer's own configuration, so
//! the two sides can never disagree about prefixes, key rules or TTLs.
//!
//! Both forms share one text for links (`links.vcl.in`): the standalone VCL
//! is that text with a Varnish of its own around it, the included form is
//! that text alone. Varnish runs the code of a subroutine defined more than
//! once in the order it appears, so the link code runs first and returns
//! only for link requests.

use std::fmt::Write as _;

use super::routes;
use crate::config::{ConfigError, Settings};

/// What every link request goes through, with `@NAME@` where a configured
/// value goes.
const LINKS: &str = include_str!("links.vcl.in");
/// A Varnish that serves links only: [`LINKS`] goes at `@LINKS@`.
const STANDALONE: &str = include_str!("standalone.vcl.in");
/// A file for a site's VCL to include: [`LINKS`] goes at `@LINKS@`.
const INCLUDE: &str = include_str!("include.vcl.in");

/// What goes at `@COUNT@` in `vcl_deliver` while clicks are counted.
pub const COUNT_CLICKS: &str =
    "        # Every answer for a link, hit or miss, is counted (in memory; a
        # background thread sends the counts to Redis), except warming.
        if (!req.http.Shortlink-Warm) {
            shortlink_links.count(client.ip);
        }
";

/// Counts the visits to no link that `vcl_synth` answers: the bare
/// domain, and any other 404 of a link route (unknown keys are counted
/// by `.count()` with the lookup's 404).
pub const COUNT_ORPHANS: &str = "        # Visits to no link: counted and logged for the domain.
        if (resp.status == 752) {
            shortlink_links.count_orphan(client.ip, \"base_url\");
        } elsif (resp.status == 404) {
            shortlink_links.count_orphan(client.ip, \"regular_404\");
        }
";

/// The page of a 503: Redis did not answer a link's lookup.
const TRY_AGAIN_PAGE: &str = "<!DOCTYPE html>
<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Try again</title></head>\
<body><h1>Try again in a moment</h1><p>The link store is not answering right now.</p>\
</body></html>
";

/// The 503 answer when Redis did not answer, written into `response`
/// (`beresp` for a fetch, `resp` for a key's first request): the same
/// status, headers and page either way, each line indented by `indent`.
fn try_again(response: &str, indent: &str) -> String {
    let mut lines = String::new();
    for (name, value) in [
        ("status", "503"),
        ("http.Content-Type", "\"text/html; charset=utf-8\""),
        ("http.Cache-Control", "\"no-store\""),
        ("http.Retry-After", "\"1\""),
    ] {
        let _ = writeln!(lines, "{indent}set {response}.{name} = {value};");
    }
    let _ = writeln!(lines, "{indent}synthetic({{\"{TRY_AGAIN_PAGE}\"}});");
    lines
}

/// What goes at `@TRY_AGAIN_BERESP@` (`vcl_backend_error`) and
/// `@TRY_AGAIN_RESP@` (a key's first request, in `vcl_synth`).
#[must_use]
pub fn try_again_values() -> [(&'static str, String); 2] {
    [
        ("TRY_AGAIN_BERESP", try_again("beresp", "        ")),
        ("TRY_AGAIN_RESP", try_again("resp", "                ")),
    ]
}

/// Which VCL to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A whole VCL for a Varnish that serves short links and nothing else
    /// (`make run`): a health page at `/`, 404 for everything else.
    Standalone,
    /// A file to `include` from a site's own VCL: it acts on requests for
    /// links only and leaves every other one to the site.
    Include,
}

/// The VCL of `form` for `settings`. `source` names where the configuration
/// came from, for the header comment.
pub fn generate(settings: &Settings, source: &str, form: Form) -> Result<String, ConfigError> {
    let config = &settings.config;
    if form == Form::Include {
        if let Some(everywhere) = settings
            .domains
            .iter()
            .find(|domain| domain.link_path == "/" && domain.hosts.is_empty())
        {
            return Err(ConfigError(format!(
                "{:?} puts links at the root of every host, which would take every path of \
                 the site: give them a path of their own (such as /l/) to include them, name \
                 their hosts (varnish.hosts), or run the standalone VCL on a host of its own",
                everywhere.base.as_str()
            )));
        }
    }
    let redis = &config.redis;
    let redirect = &config.redirect;

    let import = if config.varnish.vmod.starts_with('/') {
        format!("import shortlink from \"{}\";", config.varnish.vmod)
    } else {
        "import shortlink;".to_owned()
    };
    let mut acl = String::new();
    for entry in &config.varnish.purge_acl {
        let _ = writeln!(acl, "    \"{entry}\";");
    }
    // The secret is checked to be letters, digits, - and _: safe in a VCL
    // string.
    let secret = config.varnish.purge_secret.as_str();
    let from_writer = if secret.is_empty() {
        "client.ip ~ shortlink_purgers".to_owned()
    } else {
        format!("client.ip ~ shortlink_purgers && req.http.Shortlink-Secret == \"{secret}\"")
    };
    // At the root, /health is a link's path: only / stays the health page.
    let health_match = if settings.link_path == "/" {
        "req.url == \"/\""
    } else {
        "req.url == \"/\" || req.url == \"/health\""
    };

    // The header comment is one line: a path with a line break or a control
    // character must not start VCL of its own.
    let source: String = source
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    let clicks = &config.clicks;
    let count = if clicks.enabled { COUNT_CLICKS } else { "" };
    let mut values = vec![
        ("SOURCE", source),
        ("IMPORT", import),
        ("PATH", settings.link_path.clone()),
        ("HEALTH_MATCH", health_match.to_owned()),
        ("ACL", acl),
        ("FROM_WRITER", from_writer.clone()),
        ("REDIS_URL", redis.url.clone()),
        ("PREFIX", settings.scheme.prefix().to_owned()),
        ("SPLIT", settings.scheme.split().to_string()),
        ("CONNECT_MS", redis.connect_timeout_ms.to_string()),
        ("COMMAND_MS", redis.command_timeout_ms.to_string()),
        ("POOL_SIZE", redis.pool_size.to_string()),
        ("REPLICAS_TO_ACK", redis.replicas_to_ack.to_string()),
        ("STATUS", redirect.status.to_string()),
        ("TTL", redirect.ttl_s.to_string()),
        ("NEGATIVE_TTL", redirect.negative_ttl_s.to_string()),
        ("GRACE", redirect.grace_s.to_string()),
        ("ADMISSION_WINDOW", redirect.admission_window_s.to_string()),
        ("CACHE_CONTROL", redirect.cache_control.as_str().to_owned()),
        ("COUNT", count.to_owned()),
        (
            "COUNT_ORPHANS",
            if clicks.enabled { COUNT_ORPHANS } else { "" }.to_owned(),
        ),
        ("FLUSH_MS", clicks.flush_interval_ms.to_string()),
        ("CLICK_BACKLOG", clicks.backlog.to_string()),
        ("CLICK_QUEUE_MB", clicks.queue_mb.to_string()),
        ("DAYS_KEPT", clicks.days_kept.to_string()),
        ("HOURS_KEPT", clicks.hours_kept.to_string()),
        ("GEOIP", clicks.geoip.clone()),
        ("CLICKS_REDIS_URL", clicks.redis_url.clone()),
        ("VISITS_KEPT", clicks.visits_kept.to_string()),
        ("DOMAIN_VISITS_KEPT", clicks.domain_visits_kept.to_string()),
        ("VISIT_DAYS", clicks.visit_days.to_string()),
    ];
    values.extend(try_again_values());
    values.extend(routes::values(settings, &from_writer));
    let robots_routes = match form {
        Form::Standalone => routes::robots_routes(&settings.domains),
        Form::Include => String::new(),
    };
    values.push(("ROBOTS_ROUTES", robots_routes));
    // The link text, filled, is one more value: one pass over the frame
    // places it whole, so nothing in it is filled again.
    let links = fill(LINKS, &values);
    values.push(("LINKS", links));
    let frame = match form {
        Form::Standalone => STANDALONE,
        Form::Include => INCLUDE,
    };
    Ok(fill(frame, &values))
}

/// `template` with each `@NAME@` replaced by its value, in one pass over the
/// template: a value that itself holds `@TTL@` (a password may) stays as it
/// is. An `@` that starts no known placeholder is kept.
fn fill(template: &str, values: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len() + 512);
    let mut rest = template;
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let known = after.find('@').and_then(|end| {
            let name = &after[..end];
            values
                .iter()
                .find(|(placeholder, _)| *placeholder == name)
                .map(|(_, value)| (value, end))
        });
        if let Some((value, end)) = known {
            out.push_str(value);
            rest = &after[end + 1..];
        } else {
            out.push('@');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_shipped_vcl_is_the_default_configuration() {
        let generated = generate(
            &Settings::new(Config::default()).unwrap(),
            "the defaults",
            Form::Standalone,
        )
        .unwrap();
        let shipped = include_str!("../../../vcl/shortlink.vcl");
        assert!(
            generated == shipped,
            "vcl/shortlink.vcl is stale: regenerate it with `make vcl > vcl/shortlink.vcl`"
        );
    }

    #[test]
    fn every_placeholder_is_filled() {
        let mut config = Config::default();
        config.redis.url = "redis://user:p%40ss@db.example:6390/2".into();
        let settings = Settings::new(config).unwrap();
        for form in [Form::Standalone, Form::Include] {
            let vcl = generate(&settings, "x", form).unwrap();
            let leftover = vcl.split('@').skip(1).step_by(2).find(|name| {
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
            });
            assert_eq!(leftover, None, "unfilled placeholder in:\n{vcl}");
            assert!(vcl.contains("redis = \"redis://user:p%40ss@db.example:6390/2\","));
        }
    }

    #[test]
    fn values_are_never_filled_again() {
        let mut config = Config::default();
        config.redis.url = "redis://:p@TTL@ss@127.0.0.1:6380/0".into();
        config.redirect.cache_control = "public, @GRACE@".try_into().unwrap();
        let settings = Settings::new(config).unwrap();
        for (form, command) in [
            (Form::Standalone, "shortlink vcl"),
            (Form::Include, "shortlink vcl --include"),
        ] {
            let vcl = generate(&settings, "a\nsub vcl_recv { }\r@SOURCE@ @LINKS@", form).unwrap();
            assert!(
                vcl.contains("redis = \"redis://:p@TTL@ss@127.0.0.1:6380/0\","),
                "{vcl}"
            );
            assert!(
                vcl.contains("cache_control = \"public, @GRACE@\","),
                "{vcl}"
            );
            let header =
                format!("# Generated by `{command}` from a?sub vcl_recv {{ }}?@SOURCE@ @LINKS@.\n");
            assert!(vcl.contains(&header), "{vcl}");
        }
    }

    #[test]
    fn settings_reach_the_vcl() {
        let mut config = Config {
            public_base_url: "https://s.example/go.to/".into(),
            ..Config::default()
        };
        config.redis.hash_prefix = "{links}:".into();
        config.redis.split = 3;
        config.redirect.status = shortlink_core::RedirectStatus::PermanentRedirect;
        config.clicks.flush_interval_ms = 250;
        config.clicks.days_kept = 30;
        config.clicks.geoip = "/var/lib/geoip/countries.mmdb".into();
        config.clicks.redis_url = "redis://clicks.example:6381/0".into();
        config.redis.replicas_to_ack = shortlink_core::ReplicasToAck::try_from(1).unwrap();
        config.varnish.purge_acl = vec!["10.0.0.0/8".into()];
        config.varnish.vmod = "/opt/vmods/libvmod_shortlink.so".into();
        config.varnish.hosts = vec!["s.example".into(), "www.s.example".into()];
        let settings = Settings::new(config).unwrap();
        for form in [Form::Standalone, Form::Include] {
            let vcl = generate(&settings, "test.toml", form).unwrap();
            for expected in [
                "import shortlink from \"/opt/vmods/libvmod_shortlink.so\";",
                "prefix = \"{links}:\",",
                "split = 3,",
                "status = 308,",
                "\"10.0.0.0/8\";",
                "if (req.http.host ~ \"^(?i)(s\\.example|www\\.s\\.example)(:[0-9]+)?$\" && \
                 req.url ~ \"^/go\\.to/\")",
                "if (req.url !~ \"^/go\\.to/[A-Za-z0-9_-]{4,64}(?:[?#]|$)\")",
                "from test.toml.",
                "(under /go.to/ on s.example, www.s.example)",
                "flush_interval = 250ms,",
                "days_kept = 30d,",
                "hours_kept = 168h,",
                "geoip = \"/var/lib/geoip/countries.mmdb\",",
                "clicks_redis = \"redis://clicks.example:6381/0\",",
                "replicas_to_ack = 1,",
                "shortlink_links.count(client.ip);",
            ] {
                assert!(vcl.contains(expected), "missing {expected:?} in:\n{vcl}");
            }
        }
    }

    #[test]
    fn counting_can_be_turned_off() {
        let mut config = Config::default();
        config.clicks.enabled = false;
        let vcl = generate(&Settings::new(config).unwrap(), "x", Form::Standalone).unwrap();
        assert!(!vcl.contains(".count("), "{vcl}");
        assert!(vcl.contains("unset resp.http.Shortlink-Expired;"), "{vcl}");
    }

    #[test]
    fn links_at_the_root_are_for_the_standalone_vcl_only() {
        let settings = Settings::new(Config {
            public_base_url: "https://s.example/".into(),
            ..Config::default()
        })
        .unwrap();
        let standalone = generate(&settings, "x", Form::Standalone).unwrap();
        assert!(
            standalone.contains("if (req.url == \"/\") {"),
            "{standalone}"
        );
        // Every path but the bare one is a link's; the bare one stays the
        // health page unless the domain redirects it (or the writer purges
        // it, to have its redirects read again).
        assert!(
            standalone.contains(
                "if ((req.url ~ \"^/[^?#]\" || (req.method == \"PURGE\" && client.ip ~ shortlink_purgers) || \
                 shortlink_links.domain_redirect(\"\", \"base_url\") != \"\")) {"
            ),
            "{standalone}"
        );
        let refusal = generate(&settings, "x", Form::Include).unwrap_err().0;
        assert!(refusal.contains("(such as /l/)"), "{refusal}");
    }

    #[test]
    fn domains_are_routed_by_host_before_the_default_one() {
        let mut config: Config = toml::from_str(
            "public_base_url = \"https://s.example/l/\"\n\
             [redirect]\nnoindex = false\n\
             [[domains]]\nbase_url = \"https://go.example/\"\naliases = [\"go.example.net\"]\n\
             forward_query = true\nnot_found_url = \"https://example.org/missing\"\n",
        )
        .unwrap();
        config.varnish.robots_txt = "User-agent: *\nDisallow: /private\n".into();
        let settings = Settings::new(config).unwrap();
        let vcl = generate(&settings, "x", Form::Standalone).unwrap();
        let go = vcl
            .find("if (req.http.host ~ \"^(?i)(go\\.example|go\\.example\\.net)(:[0-9]+)?$\" && (req.url ~ \"^/[^?#]\" || ")
            .expect(&vcl);
        let default = vcl.find("} elsif (req.url ~ \"^/l/\") {").expect(&vcl);
        assert!(go < default, "{vcl}");
        for expected in [
            "domains = \"go.example\");",
            "set req.http.Shortlink-Domain = \"go.example\";",
            "(!resp.http.Shortlink-Forward && (req.http.Shortlink-Domain == \"go.example\"))",
            "shortlink_links.default_redirect(\"go.example\", \"invalid_short_url\", \"https://example.org/missing\");",
            "shortlink_links.domain_redirect(\"go.example\", \"base_url\") != \"\")) {",
            "synthetic({\"User-agent: *\nDisallow: /private\n\"});",
        ] {
            assert!(vcl.contains(expected), "missing {expected:?} in:\n{vcl}");
        }
        assert!(!vcl.contains("X-Robots-Tag"), "noindex is off:\n{vcl}");
        // The included form takes root links on named hosts.
        assert!(generate(&settings, "x", Form::Include).is_ok());
    }

    #[test]
    fn the_included_form_owns_no_backend_and_no_version() {
        let settings = Settings::new(Config::default()).unwrap();
        let included = generate(&settings, "x", Form::Include).unwrap();
        // The site's VCL has the version line and the backends.
        assert!(
            !included
                .lines()
                .any(|line| line.starts_with("vcl ") || line.starts_with("backend ")),
            "{included}"
        );
        assert!(
            !included.contains("synth(404, \"Not Found\"));\n}"),
            "{included}"
        );
        // The same link text, but for the standalone's routes of robots.txt.
        let standalone = generate(&settings, "x", Form::Standalone)
            .unwrap()
            .replace(&routes::robots_routes(&settings.domains), "");
        assert!(standalone.contains(&included[included.find("import").unwrap()..]));
    }
}
