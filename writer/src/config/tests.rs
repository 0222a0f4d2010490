//! The configuration's unit tests.

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use shortlink_core::clicks::Layout;

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
    let example = include_str!("../../shortlink.example.toml");
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
    let many =
        parse("[varnish]\npurge_urls = [\"http://10.0.0.1:6081\", \"http://10.0.0.2\"]").unwrap();
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
    // An answer with no TTL is not kept, grace or not: with the defaults a
    // 404 is not cached, and an insert has nothing to purge.
    let settings = parse("[redirect]\nttl_s = 0\ngrace_s = 30").unwrap();
    assert_eq!(settings.config.redirect.longest_kept(), Duration::ZERO);
    assert!(!settings.config.redirect.caches_unknown_keys());
    let settings = parse("[redirect]\nnegative_ttl_s = 1").unwrap();
    assert!(settings.config.redirect.caches_unknown_keys());
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

#[test]
fn without_domains_there_is_the_default_one_as_before() {
    let settings = parse("").unwrap();
    assert_eq!(settings.domains.len(), 1);
    let default = settings.domain(None).unwrap();
    assert!(default.is_default());
    assert_eq!(default.name, "127.0.0.1");
    assert!(default.hosts.is_empty(), "every host, as before");
    assert_eq!(default.scheme, settings.scheme);
    assert_eq!(default.short_url("Lm25"), settings.short_url("Lm25"));
    assert!(!default.forward_query);
}

#[test]
fn each_domain_has_its_names_and_its_key_space() {
    let settings = parse(
        r#"public_base_url = "https://s.example/l/"
[varnish]
hosts = ["s.example"]
[[domains]]
base_url = "https://Go.Example/"
aliases = ["WWW.go.example"]
forward_query = true
not_found_url = "https://example.org/missing"
[[domains]]
base_url = "https://s.example/l/"
bare_url = "https://example.org/"
"#,
    )
    .unwrap();
    assert_eq!(settings.domains.len(), 2);
    let go = settings.domain(Some("www.GO.example")).unwrap();
    assert_eq!(go.name, "go.example");
    assert_eq!(go.hosts, ["go.example", "www.go.example"]);
    assert_eq!(go.link_path, "/");
    assert_eq!(go.scheme.prefix(), "short:go.example:");
    assert_eq!(go.short_url("Lm25"), "https://go.example/Lm25");
    assert!(go.forward_query);
    assert_eq!(
        go.redirects
            .invalid_short_url
            .as_ref()
            .map(shortlink_core::ValidUrl::as_str),
        Some("https://example.org/missing")
    );
    let default = settings.domain(Some("s.example")).unwrap();
    assert!(default.is_default());
    assert_eq!(
        default
            .redirects
            .base_url
            .as_ref()
            .map(shortlink_core::ValidUrl::as_str),
        Some("https://example.org/")
    );
    let unknown = settings.domain(Some("other.example")).unwrap_err();
    assert!(unknown.to_string().contains("\"go.example\""), "{unknown}");
}

#[test]
fn bad_domains_are_refused_with_what_to_fix() {
    for (text, says) in [
        (
            "[[domains]]\nbase_url = \"ftp://go.example/\"",
            "must be an http(s) URL",
        ),
        (
            "[[domains]]\nbase_url = \"https://go.example/l\"",
            "ends with '/'",
        ),
        (
            "[[domains]]\nbase_url = \"https://localhost/\"",
            "at least one dot",
        ),
        (
            "[[domains]]\nbase_url = \"https://go.example/\"\naliases = [\"bad name\"]",
            "aliases",
        ),
        (
            "[[domains]]\nbase_url = \"https://go.example/\"\nnot_found_url = \"javascript:x\"",
            "not_found_url",
        ),
        (
            "[[domains]]\nbase_url = \"https://a.example/\"\naliases = [\"b.example\"]\n\
             [[domains]]\nbase_url = \"https://b.example/\"",
            "a name may serve one domain only",
        ),
        (
            "[[domains]]\nbase_url = \"http://127.0.0.1:6081/x/\"",
            "public_base_url's own value",
        ),
        ("[varnish]\nrobots_txt = \"a\\\"}b\"", "robots_txt"),
        (
            "[[domains]]\nbase_url = \"https://go.example/\"\nnot_found_url = \"https://e.org/a\\\"b\"",
            "double quote",
        ),
        (
            "public_base_url = \"http://[::1]:8080/l/\"\n[[domains]]\n\
             base_url = \"http://[::1]:8080/l/\"\naliases = [\"x.example\"]",
            "no host name Varnish can match",
        ),
    ] {
        let error = parse(text).unwrap_err();
        assert!(error.0.contains(says), "{text}: {error}");
    }
}
