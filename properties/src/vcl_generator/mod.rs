//! Configurations through `Settings::new` and `vcl::generate`, in both its
//! forms (standalone and `--include`).
//!
//! Whatever configuration the writer accepts, the VCL it generates must be
//! the templates with each value in its own slot: no value may end a string
//! literal or a comment, add a line, or change another value. The check
//! lexes the output and the template independently of the generator and
//! compares them token by token. The per-domain code (routes, the
//! forwarding condition, the redirects) is re-derived here from the
//! configuration's own fields, with a slot for each domain's values, so a
//! value in the wrong domain's slot is caught as surely as one out of its
//! string.
//!
//! Every input is tried twice: as TOML text, which explores the parser and
//! its edge cases, and decoded into a `Shape`, a configuration of valid
//! values with arbitrary edits, which reaches accepted configurations far
//! more often than random text does.

mod lex;
mod regexes;
mod shape;
mod sites;

use std::sync::LazyLock;

use regex::Regex;
use shortlink_writer::config::{Config, Settings};
use shortlink_writer::varnish::vcl;

use lex::{first_difference, known, lex};
use shape::Shape;
use sites::Site;

const LINKS: &str = include_str!("../../../writer/src/varnish/links.vcl.in");
const STANDALONE: &str = include_str!("../../../writer/src/varnish/standalone.vcl.in");
const INCLUDE: &str = include_str!("../../../writer/src/varnish/include.vcl.in");

/// Checks one input, as TOML text and as a `Shape`.
///
/// # Panics
///
/// When the input breaks one of the properties above: the panic says which.
pub fn check(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(config) = toml::from_str::<Config>(text) {
            check_config(config, text);
        }
    }
    if let Some(shape) = crate::decode::<Shape>(data) {
        let text = shape.render();
        match toml::from_str::<Config>(&text) {
            Ok(config) => check_config(config, &text),
            // The shared setting types (status, pool size, replicas to
            // wait for, header values)
            // refuse a bad value as it is read, saying what to use instead.
            Err(e) if is_setting_refusal(e.message()) => {}
            Err(e) => panic!("the rendered configuration does not load: {e}\n{text}"),
        }
    }
}

/// Whether a TOML error is one of `shortlink_core::SettingError`'s
/// messages rather than a configuration the shape should never render.
fn is_setting_refusal(message: &str) -> bool {
    message.contains("is not a redirect: use")
        || message.contains(" must be non-empty printable ASCII")
        || message.contains(" must be 1 to 1024")
        || message.contains(" must be 0 to 16")
}

fn check_config(config: Config, toml: &str) {
    let Ok(settings) = Settings::new(config) else {
        return;
    };
    let sites = sites::sites(&settings.config);
    assert!(
        sites::same_as_settings(&sites, &settings.domains),
        "the configuration's domains are not what Settings made of them:\n  \
         read here: {sites:?}\n  Settings: {:?}\nconfiguration:\n{toml}",
        settings.domains
    );
    // Links at the root of every host would take a whole site: only the
    // standalone VCL may have them. Root links on named hosts take those
    // hosts alone, which a site's VCL can route to them.
    let takes_every_path = sites.iter().any(Site::takes_every_path);
    for form in [vcl::Form::Standalone, vcl::Form::Include] {
        match vcl::generate(&settings, "fuzz.toml", form) {
            Ok(vcl) => {
                assert!(
                    form == vcl::Form::Standalone || !takes_every_path,
                    "the include form took links at the root of every host\n\
                     configuration:\n{toml}"
                );
                check_form(&settings, &sites, form, &vcl, toml);
            }
            Err(e) => assert!(
                form == vcl::Form::Include && takes_every_path,
                "{form:?} refused: {e}\nconfiguration:\n{toml}"
            ),
        }
    }
}

fn check_form(settings: &Settings, sites: &[Site], form: vcl::Form, vcl: &str, toml: &str) {
    let context = || format!("configuration:\n{toml}\n{form:?} VCL:\n{vcl}");
    assert_eq!(
        vcl.starts_with("vcl 4.1;\n"),
        form == vcl::Form::Standalone,
        "{}",
        context()
    );
    let output = lex(vcl).unwrap_or_else(|e| panic!("{e}\n{}", context()));
    let expected = lex(&expected_template(settings, sites, form)).expect("the template lexes");
    if output.skeleton != expected.skeleton {
        let (line, got, want) = first_difference(&output.skeleton, &expected.skeleton);
        panic!(
            "the VCL's code differs from the template's at skeleton line {line}:\n  \
             got:  {}\n  want: {}\n{}",
            got.unwrap_or("(end)"),
            want.unwrap_or("(end)"),
            context()
        );
    }
    let config = &settings.config;
    let numbers = [
        ("@SPLIT@", settings.scheme.split().to_string()),
        ("@CONNECT_MS@", config.redis.connect_timeout_ms.to_string()),
        ("@COMMAND_MS@", config.redis.command_timeout_ms.to_string()),
        ("@POOL_SIZE@", config.redis.pool_size.to_string()),
        (
            "@REPLICAS_TO_ACK@",
            config.redis.replicas_to_ack.to_string(),
        ),
        ("@VISITS_KEPT@", config.clicks.visits_kept.to_string()),
        (
            "@DOMAIN_VISITS_KEPT@",
            config.clicks.domain_visits_kept.to_string(),
        ),
        ("@VISIT_DAYS@", config.clicks.visit_days.to_string()),
        ("@STATUS@", config.redirect.status.to_string()),
        ("@TTL@", config.redirect.ttl_s.to_string()),
        ("@NEGATIVE_TTL@", config.redirect.negative_ttl_s.to_string()),
        ("@GRACE@", config.redirect.grace_s.to_string()),
        (
            "@ADMISSION_WINDOW@",
            config.redirect.admission_window_s.to_string(),
        ),
        ("@FLUSH_MS@", config.clicks.flush_interval_ms.to_string()),
        ("@CLICK_BACKLOG@", config.clicks.backlog.to_string()),
        ("@CLICK_QUEUE_MB@", config.clicks.queue_mb.to_string()),
        ("@DAYS_KEPT@", config.clicks.days_kept.to_string()),
        ("@HOURS_KEPT@", config.clicks.hours_kept.to_string()),
    ];
    for (got, want) in output.numbers.iter().zip(&expected.numbers) {
        let want = match numbers.iter().find(|(name, _)| name == want) {
            Some((_, value)) => value.as_str(),
            None => known(want),
        };
        assert!(
            got == want,
            "a number changed: got {got}, want {want}\n{}",
            context()
        );
    }
    // Only the other domains have a key space to name, in their order.
    let domains: Vec<&str> = sites
        .iter()
        .filter_map(|site| site.space.as_deref())
        .collect();
    let domains = domains.join(" ");
    let mut acl = config.varnish.purge_acl.iter();
    for (got, want) in output.literals.iter().zip(&expected.literals) {
        if let Some((slot, index)) = site_slot(want) {
            check_site_slot(got, slot, index, settings, sites, &context);
            continue;
        }
        let value = match want.as_str() {
            "@REDIS_URL@" => config.redis.url.as_str(),
            "@PREFIX@" => config.redis.hash_prefix.as_str(),
            "@CACHE_CONTROL@" => config.redirect.cache_control.as_str(),
            "@VMOD@" => config.varnish.vmod.as_str(),
            "@GEOIP@" => config.clicks.geoip.as_str(),
            "@CLICKS_REDIS_URL@" => config.clicks.redis_url.as_str(),
            "@ACL_ENTRY@" => acl.next().expect("one literal per ACL entry").as_str(),
            "@PURGE_SECRET@" => config.varnish.purge_secret.as_str(),
            "@DOMAINS@" => domains.as_str(),
            // Exactly as configured: a long string takes line breaks and
            // quotes as they are, so nothing needs escaping, and nothing
            // may end the string early.
            "@ROBOTS_TXT@" => config.varnish.robots_txt.as_str(),
            want => known(want),
        };
        assert!(
            got == value,
            "a string changed: got {got:?}, want {value:?}\n{}",
            context()
        );
    }
}

/// The slot name and domain index of a per-domain placeholder that
/// `sites` left in a string, `@NAME#index@`.
fn site_slot(literal: &str) -> Option<(&str, usize)> {
    static SLOT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new("^@([A-Z_]+)#([0-9]+)@$").expect("a valid regex"));
    let found = SLOT.captures(literal)?;
    let slot = found.get(1).expect("a group").as_str();
    Some((slot, found[2].parse().expect("a small number")))
}

/// Checks the string `got` in the slot `slot` of the domain at `index`:
/// regexes by what they match, every other value as configured.
fn check_site_slot(
    got: &str,
    slot: &str,
    index: usize,
    settings: &Settings,
    sites: &[Site],
    context: &dyn Fn() -> String,
) {
    let site = &sites[index];
    let value = match slot {
        "HOST_REGEX" => return regexes::check_host(got, index, sites, context),
        "PATH_REGEX" => return regexes::check_path(got, &site.path, context),
        // Every domain has the store's key rules: a key space changes
        // where keys live, not what they look like.
        "KEY_REGEX" => {
            return regexes::check_key(got, &site.path, settings.scheme.min_len(), context)
        }
        "DOMAIN" => site.space.as_deref(),
        "BARE_REGEX" => return regexes::check_bare(got, &site.path, context),
        "ROBOTS_REGEX" => return regexes::check_robots(got, &site.path, context),
        "ROBOTS_URL" => {
            let want = format!("{}robots.txt", site.path);
            assert!(
                got == want,
                "robots.txt of the domain at {index} is {got:?}, not {want:?}\n{}",
                context()
            );
            return;
        }
        // The name the VMOD knows the domain by: `""` for the default.
        "VMOD_DOMAIN" => Some(site.space.as_deref().unwrap_or("")),
        "NOT_FOUND" => site.not_found.as_deref(),
        "BARE" => site.bare.as_deref(),
        "NO_KEY" => site.regular_404.as_deref(),
        slot => panic!("sites.rs made a slot this check does not know: {slot}"),
    };
    let value = value.unwrap_or_else(|| panic!("the domain at {index} has no {slot}"));
    assert!(
        got == value,
        "a string of the domain at {index} changed: got {got:?}, want {value:?}\n{}",
        context()
    );
}

/// The templates of `form` as the generator should fill them for
/// `settings`, with the link text placed, the code that depends on the
/// configuration expanded, and every other value left as a placeholder.
fn expected_template(settings: &Settings, sites: &[Site], form: vcl::Form) -> String {
    let config = &settings.config;
    let import = if config.varnish.vmod.starts_with('/') {
        "import shortlink from \"@VMOD@\";"
    } else {
        "import shortlink;"
    };
    let acl = "    \"@ACL_ENTRY@\";\n".repeat(config.varnish.purge_acl.len());
    // At the root, /health is the default domain's link.
    let health = if sites[0].path == "/" {
        "req.url == \"/\""
    } else {
        "req.url == \"/\" || req.url == \"/health\""
    };
    // Purges and warm-ups need the secret besides the address when one is set.
    let from_writer = if config.varnish.purge_secret.is_empty() {
        "client.ip ~ shortlink_purgers"
    } else {
        "client.ip ~ shortlink_purgers && req.http.Shortlink-Secret == \"@PURGE_SECRET@\""
    };
    let count = if config.clicks.enabled {
        vcl::COUNT_CLICKS
    } else {
        ""
    };
    // Answers for links tell crawlers not to index them, when configured,
    // but for those the VMOD marks crawlable.
    let noindex = if config.redirect.noindex {
        "    if (!resp.http.Shortlink-Crawlable) {\n    set resp.http.X-Robots-Tag = \"noindex\";\n    }\n"
    } else {
        ""
    };
    let mut links = LINKS.to_owned();
    for (name, value) in vcl::try_again_values() {
        links = links.replace(&format!("@{name}@"), &value);
    }
    let links = links
        .replace("@COUNT@", count)
        .replace(
            "@COUNT_ORPHANS@",
            if config.clicks.enabled {
                vcl::COUNT_ORPHANS
            } else {
                ""
            },
        )
        .replace("@IMPORT@", import)
        .replace("@ACL@", &acl)
        .replace("@FROM_WRITER@", from_writer)
        .replace("@ROUTES@", &sites::routes(sites, from_writer))
        .replace(
            "@ROBOTS_ROUTES@",
            &match form {
                vcl::Form::Standalone => sites::robots_routes(sites),
                vcl::Form::Include => String::new(),
            },
        )
        .replace("@FORWARDING@", &sites::forwarding(sites))
        .replace("@NOINDEX@", noindex)
        .replace("@DEFAULT_REDIRECTS@", &sites::default_redirects(sites));
    let frame = match form {
        vcl::Form::Standalone => STANDALONE,
        vcl::Form::Include => INCLUDE,
    };
    frame
        .replace("@HEALTH_MATCH@", health)
        .replace("@LINKS@", &links)
}
