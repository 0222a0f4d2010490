//! Configurations through `Settings::new` and `vcl::generate`, in both its
//! forms (standalone and `--include`).
//!
//! Whatever configuration the writer accepts, the VCL it generates must be
//! the templates with each value in its own slot: no value may end a string
//! literal or a comment, add a line, or change another value. The check
//! lexes the output and the template independently of the generator and
//! compares them token by token.
//!
//! Every input is tried twice: as TOML text, which explores the parser and
//! its edge cases, and decoded into a `Shape`, a configuration of valid
//! values with arbitrary edits, which reaches accepted configurations far
//! more often than random text does.

#![no_main]

use std::sync::LazyLock;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use regex::Regex;
use shortlink_core::{digest_key, MAX_KEY_LEN};
use shortlink_writer::config::{Config, Settings};
use shortlink_writer::varnish::vcl;

const LINKS: &str = include_str!("../../writer/src/varnish/links.vcl.in");
const STANDALONE: &str = include_str!("../../writer/src/varnish/standalone.vcl.in");
const INCLUDE: &str = include_str!("../../writer/src/varnish/include.vcl.in");

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(config) = toml::from_str::<Config>(text) {
            check(config, text);
        }
    }
    if let Ok(shape) = Shape::arbitrary_take_rest(Unstructured::new(data)) {
        let text = shape.render();
        match toml::from_str::<Config>(&text) {
            Ok(config) => check(config, &text),
            // The shared setting types (status, pool size, replicas to
            // wait for, header values)
            // refuse a bad value as it is read, saying what to use instead.
            Err(e) if is_setting_refusal(e.message()) => {}
            Err(e) => panic!("the rendered configuration does not load: {e}\n{text}"),
        }
    }
});

/// Whether a TOML error is one of `shortlink_core::SettingError`'s
/// messages rather than a configuration the shape should never render.
fn is_setting_refusal(message: &str) -> bool {
    message.contains("is not a redirect: use")
        || message.contains(" must be non-empty printable ASCII")
        || message.contains(" must be 1 to 1024")
        || message.contains(" must be 0 to 16")
}

fn check(config: Config, toml: &str) {
    let Ok(settings) = Settings::new(config) else {
        return;
    };
    for form in [vcl::Form::Standalone, vcl::Form::Include] {
        match vcl::generate(&settings, "fuzz.toml", form) {
            Ok(vcl) => check_form(&settings, form, &vcl, toml),
            // Links at the root would take a whole site: only the
            // standalone VCL may have them.
            Err(e) => assert!(
                form == vcl::Form::Include && settings.link_path == "/",
                "{form:?} refused: {e}\nconfiguration:\n{toml}"
            ),
        }
    }
}

fn check_form(settings: &Settings, form: vcl::Form, vcl: &str, toml: &str) {
    let context = || format!("configuration:\n{toml}\n{form:?} VCL:\n{vcl}");
    assert_eq!(
        vcl.starts_with("vcl 4.1;\n"),
        form == vcl::Form::Standalone,
        "{}",
        context()
    );
    let output = lex(vcl).unwrap_or_else(|e| panic!("{e}\n{}", context()));
    let expected = lex(&expected_template(settings, form)).expect("the template lexes");
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
        ("@REPLICAS_TO_ACK@", config.redis.replicas_to_ack.to_string()),
        ("@STATUS@", config.redirect.status.to_string()),
        ("@TTL@", config.redirect.ttl_s.to_string()),
        ("@NEGATIVE_TTL@", config.redirect.negative_ttl_s.to_string()),
        ("@GRACE@", config.redirect.grace_s.to_string()),
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
    let mut acl = config.varnish.purge_acl.iter();
    for (got, want) in output.literals.iter().zip(&expected.literals) {
        let value = match want.as_str() {
            "@REDIS_URL@" => config.redis.url.as_str(),
            "@PREFIX@" => config.redis.hash_prefix.as_str(),
            "@CACHE_CONTROL@" => config.redirect.cache_control.as_str(),
            "@VMOD@" => config.varnish.vmod.as_str(),
            "@GEOIP@" => config.clicks.geoip.as_str(),
            "@CLICKS_REDIS_URL@" => config.clicks.redis_url.as_str(),
            "@ACL_ENTRY@" => acl.next().expect("one literal per ACL entry").as_str(),
            "@PURGE_SECRET@" => config.varnish.purge_secret.as_str(),
            want if want.contains("@KEY_PATTERN@") => {
                check_key_regex(got, settings, &context);
                continue;
            }
            "^@LINK_PATH@" => {
                check_path_regex(got, settings, &context);
                continue;
            }
            "@HOST_REGEX@" => {
                check_host_regex(got, settings, &context);
                continue;
            }
            want => known(want),
        };
        assert!(
            got == value,
            "a string changed: got {got:?}, want {value:?}\n{}",
            context()
        );
    }
}

/// The first line, numbered from 1, where two different texts differ, and
/// each one's line there (`None` past its end).
fn first_difference<'a>(got: &'a str, want: &'a str) -> (usize, Option<&'a str>, Option<&'a str>) {
    let lines = |text: &'a str| text.split('\n').map(Some).chain(std::iter::repeat(None));
    lines(got)
        .zip(lines(want))
        .enumerate()
        .find(|(_, (got, want))| got != want)
        .map(|(n, (got, want))| (n + 1, got, want))
        .expect("different texts differ in some line")
}

/// The templates of `form` as the generator should fill them for
/// `settings`, with the link text placed, the code that depends on the
/// configuration expanded, and every other value left as a placeholder.
fn expected_template(settings: &Settings, form: vcl::Form) -> String {
    let config = &settings.config;
    let import = if config.varnish.vmod.starts_with('/') {
        "import shortlink from \"@VMOD@\";"
    } else {
        "import shortlink;"
    };
    let acl = "    \"@ACL_ENTRY@\";\n".repeat(config.varnish.purge_acl.len());
    let host_match = if config.varnish.hosts.is_empty() {
        ""
    } else {
        " && req.http.host ~ \"@HOST_REGEX@\""
    };
    let health = if settings.link_path == "/" {
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
    let count = if config.clicks.enabled { vcl::COUNT_CLICKS } else { "" };
    let links = LINKS
        .replace("@COUNT@", count)
        .replace("@IMPORT@", import)
        .replace("@ACL@", &acl)
        .replace("@FROM_WRITER@", from_writer)
        .replace("@HOST_MATCH@", host_match);
    let frame = match form {
        vcl::Form::Standalone => STANDALONE,
        vcl::Form::Include => INCLUDE,
    };
    frame
        .replace("@HEALTH_MATCH@", health)
        .replace("@LINKS@", &links)
}

/// A VCL file split into its code, with every number or placeholder as `0`
/// and every string or comment as a marker, its numbers, and its strings.
#[derive(Debug, Default)]
struct Lexed {
    skeleton: String,
    numbers: Vec<String>,
    literals: Vec<String>,
}

/// Placeholders, or numbers, in code.
static ATOM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new("@[A-Z_]+@|[0-9]+").expect("a valid regex"));

/// `text` from the template, which must come out as it is: a placeholder
/// this target has no value for would make every input fail obscurely.
fn known(text: &str) -> &str {
    static PLACEHOLDER: LazyLock<Regex> =
        LazyLock::new(|| Regex::new("@[A-Z_]+@").expect("a valid regex"));
    if let Some(name) = PLACEHOLDER.find(text) {
        panic!(
            "the template has a placeholder this fuzz target does not know, {}: \
             tell check() what value it stands for",
            name.as_str()
        );
    }
    text
}

/// Lexes VCL's strings (`"…"` on one line, `{"…"}` and `"""…"""` on any) and
/// comments (`#` and `//` to the end of the line, `/* … */`).
fn lex(vcl: &str) -> Result<Lexed, String> {
    const TOKENS: [(&str, &str, bool); 6] = [
        ("\"\"\"", "\"\"\"", true),
        ("{\"", "\"}", true),
        ("\"", "\"", true),
        ("#", "\n", false),
        ("//", "\n", false),
        ("/*", "*/", false),
    ];
    let mut lexed = Lexed::default();
    let mut code_start = 0;
    let mut at = 0;
    while at < vcl.len() {
        let rest = &vcl[at..];
        let Some(&(open, close, is_string)) =
            TOKENS.iter().find(|(open, ..)| rest.starts_with(open))
        else {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        lexed.code(&vcl[code_start..at]);
        let line = vcl[..at].matches('\n').count() + 1;
        let body = &rest[open.len()..];
        let (content, closed) = match body.find(close) {
            Some(end) => (&body[..end], true),
            None => (body, false),
        };
        if is_string {
            if !closed {
                return Err(format!("the string opened at line {line} is never closed"));
            }
            if open == "\"" && content.contains('\n') {
                return Err(format!(
                    "the string opened at line {line} runs past its line"
                ));
            }
            lexed.skeleton.push_str(open);
            lexed.skeleton.push('…');
            lexed.skeleton.push_str(close);
            lexed.literals.push(content.to_owned());
            at += open.len() + content.len() + close.len();
        } else {
            if !closed && close != "\n" {
                return Err(format!("the comment opened at line {line} is never closed"));
            }
            lexed.skeleton.push_str("/*…*/");
            // The newline that ends a line comment is code.
            at += open.len() + content.len() + if close == "\n" { 0 } else { close.len() };
        }
        code_start = at;
    }
    lexed.code(&vcl[code_start..]);
    Ok(lexed)
}

impl Lexed {
    fn code(&mut self, code: &str) {
        for atom in ATOM.find_iter(code) {
            self.numbers.push(atom.as_str().to_owned());
        }
        let code = ATOM.replace_all(code, "0");
        // Indentation is not structure.
        let mut blank = false;
        for c in code.chars() {
            if c == ' ' || c == '\t' {
                if !blank {
                    self.skeleton.push(' ');
                }
                blank = true;
            } else {
                self.skeleton.push(c);
                blank = false;
            }
        }
    }
}

/// The VCL's short-link regex must accept the link path followed by a valid
/// key, and nothing else. The regex crate reads this much of PCRE, Varnish's
/// dialect, the same way.
fn check_key_regex(pattern: &str, settings: &Settings, context: &dyn Fn() -> String) {
    let regex = Regex::new(pattern)
        .unwrap_or_else(|e| panic!("the VCL regex {pattern:?} is invalid: {e}\n{}", context()));
    let path = &settings.link_path;
    let min = settings.scheme.min_len();
    let digest = digest_key(path);
    let good = [
        "a".repeat(min),
        "Z9-_".repeat(MAX_KEY_LEN / 4),
        digest[..min].to_owned(),
    ];
    let bad = [
        "a".repeat(min - 1),
        "a".repeat(MAX_KEY_LEN + 1),
        format!("{}.", "a".repeat(min)),
        format!("{}/x", "a".repeat(min)),
        format!("{}?x=1", "a".repeat(min)),
        format!("%2F{}", "a".repeat(min)),
    ];
    for key in &good {
        let url = format!("{path}{key}");
        assert!(
            regex.is_match(&url),
            "{pattern:?} refuses {url:?}\n{}",
            context()
        );
        for wrong in [format!("/x{url}"), format!("{url}\t")] {
            assert!(
                !regex.is_match(&wrong),
                "{pattern:?} accepts {wrong:?}\n{}",
                context()
            );
        }
        // A '.' in the path must match only itself.
        let dotless = url.replacen('.', "X", 1);
        assert!(
            dotless == url || !regex.is_match(&dotless),
            "{pattern:?} accepts {dotless:?}\n{}",
            context()
        );
    }
    for key in &bad {
        let url = format!("{path}{key}");
        assert!(
            !regex.is_match(&url),
            "{pattern:?} accepts {url:?}\n{}",
            context()
        );
    }
}

/// The regex that claims requests for links must accept every path under
/// the link path, and nothing else.
fn check_path_regex(pattern: &str, settings: &Settings, context: &dyn Fn() -> String) {
    let regex = Regex::new(pattern)
        .unwrap_or_else(|e| panic!("the VCL regex {pattern:?} is invalid: {e}\n{}", context()));
    let path = &settings.link_path;
    for url in [path.clone(), format!("{path}Lm25"), format!("{path}?x")] {
        assert!(regex.is_match(&url), "{pattern:?} refuses {url:?}\n{}", context());
    }
    let outside = [
        format!("/x{path}"),
        path.trim_end_matches('/').to_owned(),
        path.replacen('.', "X", 1),
    ];
    for url in outside.iter().filter(|url| !url.starts_with(path.as_str())) {
        assert!(!regex.is_match(url), "{pattern:?} accepts {url:?}\n{}", context());
    }
}

/// The Host regex must accept each configured host, in any case and with
/// any port, and nothing else.
fn check_host_regex(pattern: &str, settings: &Settings, context: &dyn Fn() -> String) {
    let regex = Regex::new(pattern)
        .unwrap_or_else(|e| panic!("the VCL regex {pattern:?} is invalid: {e}\n{}", context()));
    let hosts = &settings.config.varnish.hosts;
    for host in hosts {
        for seen in [host.clone(), host.to_ascii_uppercase(), format!("{host}:8443")] {
            assert!(regex.is_match(&seen), "{pattern:?} refuses {seen:?}\n{}", context());
        }
        let others = [
            format!("x{host}"),
            format!("{host}.evil.example"),
            format!("{host}:"),
            host.replacen('.', "X", 1),
        ];
        for other in others.iter().filter(|other| !hosts.contains(other)) {
            assert!(!regex.is_match(other), "{pattern:?} accepts {other:?}\n{}", context());
        }
    }
}

/// A configuration made of known-good values that a fuzzer may edit, so that
/// most shapes load and reach the generator.
#[derive(Arbitrary, Debug)]
struct Shape {
    public_base_url: Pick,
    max_url_length: Option<u16>,
    min_generated_key_length: Option<u8>,
    redis_url: Pick,
    clicks_redis_url: Pick,
    hash_prefix: Pick,
    split: Option<u8>,
    connect_timeout_ms: Option<u16>,
    command_timeout_ms: Option<u16>,
    pool_size: Option<u16>,
    replicas_to_ack: Option<u8>,
    status: Option<Status>,
    ttl_s: Option<u32>,
    negative_ttl_s: Option<u32>,
    grace_s: Option<u32>,
    cache_control: Pick,
    purge_url: Pick,
    vmod: Pick,
    purge_acl: Option<Vec<Pick>>,
    hosts: Option<Vec<Pick>>,
}

/// One of a field's good values, maybe with text inserted into it.
#[derive(Arbitrary, Debug)]
struct Pick {
    choice: u8,
    insert: Option<(u8, String)>,
}

#[derive(Arbitrary, Debug)]
enum Status {
    Moved,
    Found,
    Temporary,
    Permanent,
    Other(u16),
}

impl Pick {
    fn render(&self, choices: &[&str]) -> toml::Value {
        let mut value = choices[usize::from(self.choice) % choices.len()].to_owned();
        if let Some((at, text)) = &self.insert {
            let mut at = usize::from(*at) % (value.len() + 1);
            while !value.is_char_boundary(at) {
                at -= 1;
            }
            value.insert_str(at, text);
        }
        toml::Value::String(value)
    }
}

impl Shape {
    /// Only fields every version of the configuration has: the others keep
    /// their defaults.
    fn render(&self) -> String {
        fn put<T: Into<i64>>(table: &mut toml::Table, key: &str, value: Option<T>) {
            if let Some(value) = value {
                table.insert(key.into(), toml::Value::Integer(value.into()));
            }
        }
        let mut root = toml::Table::new();
        root.insert(
            "public_base_url".into(),
            self.public_base_url.render(&[
                "http://127.0.0.1:6081/l/",
                "https://s.example/go.to/",
                "http://[::1]:8080/a-b_c/d/",
                "https://xn--bcher-kva.example:8443/l/",
                "https://s.example/",
            ]),
        );
        put(&mut root, "max_url_length", self.max_url_length);
        put(
            &mut root,
            "min_generated_key_length",
            self.min_generated_key_length.map(|n| n % 32),
        );

        let mut redis = toml::Table::new();
        redis.insert(
            "url".into(),
            self.redis_url.render(&[
                "redis://127.0.0.1:6380/0",
                "redis://user:p%40ss@db.example:6390/2",
                "redis://:secret@[::1]/1",
                "unix:///run/redis/redis.sock?db=1",
            ]),
        );
        redis.insert(
            "hash_prefix".into(),
            self.hash_prefix
                .render(&["short:", "", "{links}:", "a/b.c-d_e:"]),
        );
        put(&mut redis, "split", self.split.map(|n| n % 6));
        put(&mut redis, "connect_timeout_ms", self.connect_timeout_ms);
        put(&mut redis, "command_timeout_ms", self.command_timeout_ms);
        put(&mut redis, "pool_size", self.pool_size);
        put(&mut redis, "replicas_to_ack", self.replicas_to_ack.map(|n| n % 20));
        root.insert("redis".into(), toml::Value::Table(redis));

        let mut clicks = toml::Table::new();
        clicks.insert(
            "redis_url".into(),
            self.clicks_redis_url.render(&[
                "",
                "redis://127.0.0.1:6381/0",
                "redis://:secret@clicks.example:6379/3",
                "unix:///run/redis/clicks.sock?db=0",
            ]),
        );
        root.insert("clicks".into(), toml::Value::Table(clicks));

        let mut redirect = toml::Table::new();
        let status = self.status.as_ref().map(|status| match status {
            Status::Moved => 301,
            Status::Found => 302,
            Status::Temporary => 307,
            Status::Permanent => 308,
            Status::Other(status) => *status,
        });
        put(&mut redirect, "status", status);
        put(&mut redirect, "ttl_s", self.ttl_s);
        put(&mut redirect, "negative_ttl_s", self.negative_ttl_s);
        put(&mut redirect, "grace_s", self.grace_s);
        redirect.insert(
            "cache_control".into(),
            self.cache_control.render(&[
                "public, max-age=86400",
                "no-cache",
                "max-age=60, stale-while-revalidate=30",
            ]),
        );
        root.insert("redirect".into(), toml::Value::Table(redirect));

        let mut varnish = toml::Table::new();
        varnish.insert(
            "purge_url".into(),
            self.purge_url
                .render(&["http://127.0.0.1:6081", "", "http://varnish:6081/"]),
        );
        varnish.insert(
            "vmod".into(),
            self.vmod.render(&[
                "shortlink",
                "/usr/local/lib/varnish/libvmod_shortlink.so",
                "/opt/vmods/lib.so",
            ]),
        );
        if let Some(acl) = &self.purge_acl {
            let entries = acl
                .iter()
                .map(|entry| {
                    entry.render(&["127.0.0.1", "::1", "10.0.0.0/8", "fd00::/8", "192.0.2.1/32"])
                })
                .collect();
            varnish.insert("purge_acl".into(), toml::Value::Array(entries));
        }
        if let Some(hosts) = &self.hosts {
            let entries = hosts
                .iter()
                .map(|host| {
                    host.render(&["s.example", "127.0.0.1", "xn--bcher-kva.example", "www.s.example"])
                })
                .collect();
            varnish.insert("hosts".into(), toml::Value::Array(entries));
        }
        root.insert("varnish".into(), toml::Value::Table(varnish));

        toml::to_string(&root).expect("a table renders")
    }
}
