//! Who clicked, as far as counting needs: person or bot, device class,
//! browser, system and country. Runs on the flusher thread only, never on
//! the request path: parsing a user agent takes tens to hundreds of
//! microseconds, so each distinct one is parsed once and remembered.

use std::borrow::Cow;
use std::net::IpAddr;
use std::num::NonZeroUsize;
use std::rc::Rc;

use lru::LruCache;

/// uap-core's rules (see `uap-core/README`).
const UAP_RULES: &str = include_str!("../../uap-core/regexes.yaml");

/// Distinct user agents remembered, the least recently seen forgotten
/// first: a flood of made-up agents costs their parsing, never the memory
/// of real browsers' agents (each at most `AGENT_MAX` bytes: some 3 MB).
const REMEMBERED: NonZeroUsize = NonZeroUsize::new(10_000).unwrap();

/// A user agent, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// The `User-Agent` header as sent (cut to the length a click keeps).
    pub header: Box<str>,
    pub bot: bool,
    /// `desktop`, `mobile`, `tablet` or `bot`.
    pub device: &'static str,
    pub browser: String,
    pub os: String,
}

/// Classifies user agents with uap-core's rules, remembering the answers.
pub struct Agents {
    extractor: Option<ua_parser::Extractor<'static>>,
    known: LruCache<Box<str>, Rc<Agent>>,
}

impl Agents {
    /// Builds the parser (about 150 ms, 30 MB); without it (the rules fail
    /// to load, which a test rules out) every agent is `Other`.
    pub fn new() -> Self {
        let extractor = serde_yaml::from_str::<ua_parser::Regexes<'static>>(UAP_RULES)
            .ok()
            .and_then(|rules| ua_parser::Extractor::try_from(rules).ok());
        Self {
            extractor,
            known: LruCache::new(REMEMBERED),
        }
    }

    /// What `user_agent` is; an empty one is a bot (browsers always send one).
    pub fn classify(&mut self, user_agent: &str) -> Rc<Agent> {
        if let Some(agent) = self.known.get(user_agent) {
            return Rc::clone(agent);
        }
        let agent = Rc::new(self.parse(user_agent));
        self.known.put(user_agent.into(), Rc::clone(&agent));
        agent
    }

    fn parse(&self, user_agent: &str) -> Agent {
        let (browser, os, device) = match &self.extractor {
            Some(extractor) if !user_agent.is_empty() => extractor.extract(user_agent),
            _ => (None, None, None),
        };
        let browser = browser.map_or_else(|| "Other".to_owned(), |b| b.family.to_string());
        let device_family = device.as_ref().map(|d| d.device.to_string());
        let os_family = os.as_ref().map(|o| o.os.to_string());
        // Crawlers (uap's `Spider`), headless browsers, and clients that
        // name neither a system nor a device (curl, scripts, monitors).
        let bot = user_agent.is_empty()
            || device_family.as_deref() == Some("Spider")
            || browser.contains("Headless")
            || (os_family.is_none() && device_family.is_none());
        let os = os_family.unwrap_or_else(|| "Other".to_owned());
        let device = if bot {
            "bot"
        } else if device_family.as_deref() == Some("iPad")
            || user_agent.contains("Tablet")
            || (os == "Android" && !user_agent.contains("Mobile"))
        {
            "tablet"
        } else if user_agent.contains("Mobi")
            || matches!(os.as_str(), "iOS" | "Android" | "Windows Phone" | "KaiOS")
        {
            "mobile"
        } else {
            "desktop"
        };
        Agent {
            header: user_agent.into(),
            bot,
            device,
            browser,
            os,
        }
    }
}

/// Countries of addresses, from a `GeoIP2` or DB-IP country database,
/// mapped into memory: opened once (per VCL load for the request path,
/// per store for the flusher), its pages shared by every reader.
pub struct Countries {
    reader: maxminddb::Reader<maxminddb::Mmap>,
}

impl Countries {
    pub fn open(path: &str) -> Result<Self, String> {
        // SAFETY: the file must not change in place while mapped, or a read
        // may fault; a new database is put in its place by renaming, as
        // `geoipupdate` does, which leaves this mapping on the old file
        // until the next VCL load (docs/operating.md says so).
        unsafe { maxminddb::Reader::open_mmap(path) }
            .map(|reader| Self { reader })
            .map_err(|e| format!("GeoIP database {path}: {e}"))
    }

    /// The ISO 3166 code of `address`'s country, if the database knows it,
    /// borrowed from the database: the flusher asks this for each click.
    pub fn country(&self, address: IpAddr) -> Option<&str> {
        let found = self.reader.lookup(address).ok()?;
        found
            .decode_path::<&str>(&[
                maxminddb::PathElement::Key("country"),
                maxminddb::PathElement::Key("iso_code"),
            ])
            .ok()
            .flatten()
    }

    /// `address`'s country as a rule names it, read without a copy: the
    /// request path asks this for a link with a country rule.
    pub fn country_code(&self, address: IpAddr) -> Option<shortlink_core::rules::Country> {
        self.country(address)
            .and_then(shortlink_core::rules::Country::parse)
    }
}

/// The host of a `Referer`, lower case, or `None` for anything that is not
/// an http(s) URL with a host. Cheap enough for the request path: a slice
/// of `referer`, copied only when it has upper-case letters.
pub fn referrer_host(referer: &str) -> Option<Cow<'_, str>> {
    let rest = referer
        .strip_prefix("https://")
        .or_else(|| referer.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = if host_port.starts_with('[') {
        host_port.split_inclusive(']').next()?
    } else {
        host_port.split(':').next()?
    };
    let valid = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.[]:_".contains(&b));
    if !valid {
        return None;
    }
    Some(if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_are_people_or_bots() {
        let mut agents = Agents::new();
        assert!(agents.extractor.is_some(), "uap-core's rules must load");
        let firefox_agent =
            "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
        let firefox = agents.classify(firefox_agent);
        assert_eq!(
            *firefox,
            Agent {
                header: firefox_agent.into(),
                bot: false,
                device: "desktop",
                browser: "Firefox".to_owned(),
                os: "Linux".to_owned()
            }
        );
        let iphone = agents.classify(
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 \
             (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1",
        );
        assert_eq!(
            (iphone.bot, iphone.device, iphone.os.as_str()),
            (false, "mobile", "iOS")
        );
        let tablet = agents.classify(
            "Mozilla/5.0 (Linux; Android 14; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) \
             Chrome/120.0 Safari/537.36",
        );
        assert_eq!((tablet.bot, tablet.device), (false, "tablet"));
        for bot in [
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "curl/8.5.0",
            "python-requests/2.31",
            "",
        ] {
            let agent = agents.classify(bot);
            assert!(agent.bot, "{bot:?} is a bot");
            assert_eq!(agent.device, "bot");
        }
    }

    /// A flood of one-off agents pushes out the least recently seen ones,
    /// never one seen meanwhile: a hot agent stays parsed, the memory full.
    #[test]
    fn a_flood_of_agents_forgets_the_least_recent() {
        let mut agents = Agents::new();
        let hot = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
        let first = agents.classify(hot);
        let junk = |n: usize| format!("junk/{n}");
        for n in 1..REMEMBERED.get() {
            agents.classify(&junk(n));
        }
        assert_eq!(agents.known.len(), REMEMBERED.get());
        assert!(Rc::ptr_eq(&agents.classify(hot), &first), "seen again");
        agents.classify(&junk(0));
        assert_eq!(agents.known.len(), REMEMBERED.get());
        assert!(agents.known.contains(hot), "the hot agent is kept");
        assert!(!agents.known.contains(junk(1).as_str()), "the oldest goes");
        assert!(Rc::ptr_eq(&agents.classify(hot), &first));
    }

    #[test]
    fn referrers_become_hosts() {
        assert_eq!(
            referrer_host("https://News.Example.org/item?id=1").as_deref(),
            Some("news.example.org")
        );
        assert_eq!(
            referrer_host("http://user@example.org:8080/").as_deref(),
            Some("example.org")
        );
        assert_eq!(referrer_host("http://[::1]:80/x").as_deref(), Some("[::1]"));
        assert_eq!(referrer_host("android-app://com.example"), None);
        assert_eq!(referrer_host("https:///nohost"), None);
        assert_eq!(referrer_host("https://exa mple.org/"), None);
    }
}
