//! A configuration made of known-good values that a fuzzer may edit, so that
//! most shapes load and reach the generator.

use arbitrary::{Arbitrary, Unstructured};

/// The robots.txt texts a shape starts from: good ones, and ones that try
/// to end the long string they go in (`"}`), or hold what the
/// configuration refuses (a carriage return, a tab), or what is harmless
/// there but would end other strings (`"`, `"""`, `#`).
const ROBOTS_TXT: [&str; 9] = [
    "User-agent: *\nDisallow: /\n",
    "",
    "User-agent: *\nAllow: /\n\nSitemap: https://s.example/sitemap.xml\n",
    "ends with a quote\"",
    "\"",
    "a \"} b",
    "}{\"\n\"\"\" # not a comment /* nor this */\n",
    "line\r\nbreak",
    "tab\there",
];

#[derive(Arbitrary, Debug)]
pub struct Shape {
    /// Up to three `[[domains]]`; each slot is filled about half the time,
    /// so most shapes have some. The newest settings come first: a short
    /// input fills the first fields and leaves the rest to their defaults.
    domains: [Option<DomainShape>; 3],
    robots_txt: Option<Pick>,
    noindex: Option<bool>,
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
    admission_window_s: Option<u32>,
    cache_control: Pick,
    purge_url: Pick,
    vmod: Pick,
    purge_acl: Option<Vec<Pick>>,
    hosts: Option<Vec<Pick>>,
}

/// A `[[domains]]` entry.
#[derive(Arbitrary, Debug)]
struct DomainShape {
    /// Its base URL: mostly a name of its own (numbered by its place, so
    /// that domains rarely share one by chance), sometimes one that
    /// another entry may take too, or `public_base_url`'s, which makes it
    /// the default domain's options.
    base_url: Pick,
    aliases: Option<Vec<Pick>>,
    forward_query: Option<bool>,
    not_found_url: Option<Pick>,
    bare_url: Option<Pick>,
    regular_404_url: Option<Pick>,
}

/// One of a field's good values, maybe with text inserted into it.
#[derive(Debug)]
struct Pick {
    choice: u8,
    insert: Option<(u8, Snippet)>,
}

impl<'a> Arbitrary<'a> for Pick {
    /// One pick in four is edited: most edits make a value refused, and a
    /// shape has a dozen picks, so editing half of them would leave few
    /// configurations that load.
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let choice = u8::arbitrary(u)?;
        let insert = if u.ratio(1, 4)? {
            Some((u8::arbitrary(u)?, Snippet::arbitrary(u)?))
        } else {
            None
        };
        Ok(Self { choice, insert })
    }
}

/// A few characters of text: enough for a quote, a `"}` or a line break,
/// and short, so that one value does not take all the input and leave
/// every later field (the domains' options, robots.txt) to its default.
/// Mostly printable ASCII, which most values may hold: random bytes would
/// make nearly every configuration refused for a control character.
#[derive(Debug)]
struct Snippet(String);

impl<'a> Arbitrary<'a> for Snippet {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        const RARE: [char; 8] = [
            '\n', '\r', '\t', '\0', '\u{7f}', 'é', '\u{2028}', '\u{ff02}',
        ];
        let len = u8::arbitrary(u)? % 9;
        let mut text = String::new();
        for _ in 0..len {
            let byte = u8::arbitrary(u)?;
            text.push(match byte.checked_sub(0xf8) {
                Some(rare) => RARE[usize::from(rare)],
                None => char::from(0x20 + byte % 95),
            });
        }
        Ok(Self(text))
    }
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
        toml::Value::String(self.text(choices))
    }

    fn text(&self, choices: &[&str]) -> String {
        let mut value = choices[usize::from(self.choice) % choices.len()].to_owned();
        if let Some((at, text)) = &self.insert {
            let mut at = usize::from(*at) % (value.len() + 1);
            while !value.is_char_boundary(at) {
                at -= 1;
            }
            value.insert_str(at, &text.0);
        }
        value
    }
}

fn as_strs(texts: &[String]) -> Vec<&str> {
    texts.iter().map(String::as_str).collect()
}

impl DomainShape {
    /// The entry at place `n`, with `public` the rendered `public_base_url`.
    fn render(&self, n: usize, public: &str) -> toml::Value {
        let numbered = |choices: &[&str]| -> Vec<String> {
            choices
                .iter()
                .map(|c| c.replace("{n}", &n.to_string()))
                .collect()
        };
        let bases = numbered(&[
            "https://go{n}.example/",
            "https://go{n}.example/l/",
            "http://10.0.0.{n}:6081/x.y/",
            "https://Short{n}.Example:8443/go-to_/",
            "https://go.example/",
            public,
        ]);
        let aliases = numbered(&[
            "www.go{n}.example",
            "go{n}.example.net",
            "Alias{n}.Example",
            "10.1.0.{n}",
            "go.example",
            "s.example",
        ]);
        let mut entry = toml::Table::new();
        entry.insert("base_url".into(), self.base_url.render(&as_strs(&bases)));
        if let Some(names) = &self.aliases {
            let names = names.iter().take(3);
            let names = names
                .map(|alias| alias.render(&as_strs(&aliases)))
                .collect();
            entry.insert("aliases".into(), toml::Value::Array(names));
        }
        if let Some(forward) = self.forward_query {
            entry.insert("forward_query".into(), toml::Value::Boolean(forward));
        }
        // Redirect targets take any printable ASCII but `\` and space: the
        // VCL must carry each as it is.
        if let Some(url) = &self.not_found_url {
            let choices = [
                "https://example.org/missing",
                "http://example.org/a?b=c&d=%22#frag",
                "HTTPS://Example.org/{x}|^`'*$;",
                "",
            ];
            entry.insert("not_found_url".into(), url.render(&choices));
        }
        if let Some(url) = &self.bare_url {
            let choices = [
                "https://example.org/",
                "https://www.example.org/home?from=short",
                "http://127.0.0.1:8080/#top",
                "",
            ];
            entry.insert("bare_url".into(), url.render(&choices));
        }
        if let Some(url) = &self.regular_404_url {
            let choices = [
                "https://example.org/404",
                "https://example.org/x?y=\"z\"",
                "",
            ];
            entry.insert("regular_404_url".into(), url.render(&choices));
        }
        toml::Value::Table(entry)
    }
}

impl Shape {
    /// Only fields every version of the configuration has: the others keep
    /// their defaults. One long list of fields, as the file has them.
    #[allow(clippy::too_many_lines)]
    pub fn render(&self) -> String {
        fn put<T: Into<i64>>(table: &mut toml::Table, key: &str, value: Option<T>) {
            if let Some(value) = value {
                table.insert(key.into(), toml::Value::Integer(value.into()));
            }
        }
        let mut root = toml::Table::new();
        let public_base_url = self.public_base_url.text(&[
            "http://127.0.0.1:6081/l/",
            "https://s.example/go.to/",
            "http://[::1]:8080/a-b_c/d/",
            "https://xn--bcher-kva.example:8443/l/",
            "https://s.example/",
        ]);
        let domains: Vec<toml::Value> = (self.domains.iter().flatten().enumerate())
            .map(|(n, domain)| domain.render(n, &public_base_url))
            .collect();
        if !domains.is_empty() {
            root.insert("domains".into(), toml::Value::Array(domains));
        }
        root.insert(
            "public_base_url".into(),
            toml::Value::String(public_base_url),
        );
        // Numbers are brought to a little past what the checks allow, so
        // that most shapes load and the edges are still tried (the TOML
        // text tries any number).
        put(
            &mut root,
            "max_url_length",
            self.max_url_length.map(|n| n % 5200),
        );
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
        put(&mut redis, "pool_size", self.pool_size.map(|n| n % 1100));
        put(
            &mut redis,
            "replicas_to_ack",
            self.replicas_to_ack.map(|n| n % 20),
        );
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
        let ten_years = |n: u32| n % (10 * 365 * 24 * 3600 + 2);
        put(&mut redirect, "ttl_s", self.ttl_s.map(ten_years));
        put(
            &mut redirect,
            "negative_ttl_s",
            self.negative_ttl_s.map(ten_years),
        );
        put(&mut redirect, "grace_s", self.grace_s.map(ten_years));
        // Up to a day, and one second past it.
        put(
            &mut redirect,
            "admission_window_s",
            self.admission_window_s.map(|n| n % (24 * 3600 + 2)),
        );
        redirect.insert(
            "cache_control".into(),
            self.cache_control.render(&[
                "public, max-age=86400",
                "no-cache",
                "max-age=60, stale-while-revalidate=30",
            ]),
        );
        if let Some(noindex) = self.noindex {
            redirect.insert("noindex".into(), toml::Value::Boolean(noindex));
        }
        root.insert("redirect".into(), toml::Value::Table(redirect));

        root.insert("varnish".into(), toml::Value::Table(self.varnish()));

        toml::to_string(&root).expect("a table renders")
    }

    fn varnish(&self) -> toml::Table {
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
        if let Some(robots) = &self.robots_txt {
            varnish.insert("robots_txt".into(), robots.render(&ROBOTS_TXT));
        }
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
                    host.render(&[
                        "s.example",
                        "127.0.0.1",
                        "xn--bcher-kva.example",
                        "www.s.example",
                    ])
                })
                .collect();
            varnish.insert("hosts".into(), toml::Value::Array(entries));
        }
        varnish
    }
}
