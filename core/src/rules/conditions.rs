//! What a rule asks of a request: its device, country, preferred
//! language, a query parameter's value, or the time; each parsed from its
//! stored form (`device=ios,android`) and written back the same way.

use std::fmt;
use std::fmt::Write as _;

use super::RuleError;

/// Most values one condition lists (`country=DE,AT,CH`).
pub const MAX_VALUES: usize = 32;

/// Longest language tag (`de`, `pt-BR`, `zh-Hant-TW`).
const MAX_LANGUAGE_LEN: usize = 16;

/// Longest query parameter name or value in a condition, as stored.
const MAX_PARAM_LEN: usize = 128;

/// A device class, from the `User-Agent` alone (see [`Device::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    Ios,
    Android,
    /// Any other phone or small device: Windows Phone, `KaiOS`, Opera Mini...
    Mobile,
    /// Everything else, crawlers and scripts included.
    Desktop,
}

/// Bytes of a `User-Agent` read to tell its device: the markers sit in the
/// first hundred bytes of every real browser's, and a made-up 8 KB agent
/// must cost no more than a real one.
const AGENT_BYTES_READ: usize = 512;

/// Markers of a user agent, each with the device it says, in the order
/// they decide.
const MARKERS: [(&str, Device); 8] = [
    ("iPhone", Device::Ios),
    ("iPad", Device::Ios),
    ("iPod", Device::Ios),
    ("Android", Device::Android),
    ("Mobi", Device::Mobile),
    ("Opera Mini", Device::Mobile),
    ("KaiOS", Device::Mobile),
    ("BlackBerry", Device::Mobile),
];

/// [`MARKERS`]' searchers, built once: SIMD substring search, where a naive
/// one took 1 % of a busy Varnish's time.
static DEVICE_MARKERS: std::sync::OnceLock<[(memchr::memmem::Finder<'static>, Device); 8]> =
    std::sync::OnceLock::new();

impl Device {
    pub const ALL: [Self; 4] = [Self::Ios, Self::Android, Self::Mobile, Self::Desktop];

    /// The device class of `user_agent`: a few substring searches of its
    /// first [`AGENT_BYTES_READ`] bytes, no parsing. iPadOS Safari, which
    /// says it is a Mac, counts as a desktop, as its own sites treat it.
    pub fn of(user_agent: &str) -> Self {
        let head = &user_agent.as_bytes()[..user_agent.len().min(AGENT_BYTES_READ)];
        let finders = DEVICE_MARKERS.get_or_init(|| {
            MARKERS.map(|(marker, device)| (memchr::memmem::Finder::new(marker), device))
        });
        // The first marker found in the order of MARKERS decides: an
        // Android phone may also say "Mobi", a Windows Phone "Android".
        finders
            .iter()
            .find(|(finder, _)| finder.find(head).is_some())
            .map_or(Self::Desktop, |&(_, device)| device)
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::Ios => "ios",
            Self::Android => "android",
            Self::Mobile => "mobile",
            Self::Desktop => "desktop",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|device| device.name() == name)
    }
}

/// ISO 3166-1 alpha-2 codes, in order: every country a `GeoIP` database may
/// answer, and so every code a rule may name.
const COUNTRY_CODES: &str = "AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG \
BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX \
CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN \
GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI \
KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ \
MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR \
PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC \
TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT \
ZA ZM ZW";

/// A country, by its ISO 3166-1 alpha-2 code in capitals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Country([u8; 2]);

impl Country {
    /// The country of `code` (either case), if ISO 3166-1 has it.
    pub fn parse(code: &str) -> Option<Self> {
        let bytes: [u8; 2] = code.as_bytes().try_into().ok()?;
        let bytes = bytes.map(|b| b.to_ascii_uppercase());
        // The codes are in order, three bytes apart: a binary search, as
        // a GeoIP answer is parsed at delivery.
        let codes = COUNTRY_CODES.as_bytes();
        let count = codes.len().div_ceil(3);
        let (mut low, mut high) = (0, count);
        while low < high {
            let middle = usize::midpoint(low, high);
            match codes[3 * middle..3 * middle + 2].cmp(&bytes[..]) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Some(Self(bytes)),
            }
        }
        None
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("??")
    }
}

/// A condition of a rule; all of a rule's must hold for it to match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// `device=ios,android`: the request's device is one of these.
    Device(Vec<Device>),
    /// `country=DE,AT`: the client's address is in one of these countries.
    Country(Vec<Country>),
    /// `lang=de,fr-CA`: the preferred language of `Accept-Language` is one
    /// of these, or a variant of one (`de` matches `de-AT`).
    Language(Vec<String>),
    /// `q.ref=mail,news`: the request's query parameter `ref` has one of
    /// these values. Name and values are stored percent-encoded and
    /// compared decoded.
    Param { name: String, values: Vec<String> },
    /// `from=1767225600`: from this moment (Unix seconds) on.
    From(u64),
    /// `until=1767312000`: before this moment (Unix seconds).
    Until(u64),
}

impl Condition {
    /// The condition stored as `text` (`name=value[,value...]`).
    pub fn parse(text: &str) -> Result<Self, RuleError> {
        let bad = |why: String| RuleError::Condition {
            condition: text.to_owned(),
            why,
        };
        let (name, list) = text
            .split_once('=')
            .ok_or_else(|| bad("write it as name=value".into()))?;
        let values: Vec<&str> = list.split(',').collect();
        if values.iter().any(|value| value.is_empty()) {
            return Err(bad("a value is empty".into()));
        }
        if values.len() > MAX_VALUES {
            return Err(bad(format!("it lists more than {MAX_VALUES} values")));
        }
        let each = |parse: &dyn Fn(&str) -> Option<String>, what: &str| {
            values
                .iter()
                .map(|value| parse(value).ok_or_else(|| bad(format!("{value:?} is not {what}"))))
                .collect::<Result<Vec<_>, _>>()
        };
        match name {
            "device" => Ok(Self::Device(
                values
                    .iter()
                    .map(|value| {
                        Device::parse(value).ok_or_else(|| {
                            bad(format!(
                                "{value:?} is not a device: use ios, android, mobile or desktop"
                            ))
                        })
                    })
                    .collect::<Result<_, _>>()?,
            )),
            "country" => Ok(Self::Country(
                values
                    .iter()
                    .map(|value| {
                        Country::parse(value).ok_or_else(|| {
                            bad(format!(
                                "{value:?} is not an ISO 3166-1 country code such as DE or US"
                            ))
                        })
                    })
                    .collect::<Result<_, _>>()?,
            )),
            "lang" => Ok(Self::Language(each(
                &language_tag,
                "a language tag such as de or pt-BR",
            )?)),
            "from" | "until" => {
                let [moment] = values[..] else {
                    return Err(bad("give one moment, in Unix seconds".into()));
                };
                let unix = crate::whole_number(moment)
                    .filter(|&unix| unix <= crate::Expiry::MAX)
                    .ok_or_else(|| bad(format!("{moment:?} is not a moment in Unix seconds")))?;
                Ok(if name == "from" {
                    Self::From(unix)
                } else {
                    Self::Until(unix)
                })
            }
            _ => match name.strip_prefix("q.") {
                Some(param) if param_text(param).is_some() => Ok(Self::Param {
                    name: param.to_owned(),
                    values: each(&param_text, "a query value (percent-encode other bytes)")?,
                }),
                Some(_) => Err(bad(
                    "the parameter name must be 1 to 128 of A-Z a-z 0-9 . _ ~ - or %XX".into(),
                )),
                None => Err(bad(
                    "use device, country, lang, q.<parameter>, from or until".into(),
                )),
            },
        }
    }

    /// The name a rule may give once: `q.ref` for a parameter.
    pub(super) fn kind(&self) -> String {
        match self {
            Self::Device(_) => "device".into(),
            Self::Country(_) => "country".into(),
            Self::Language(_) => "lang".into(),
            Self::Param { name, .. } => format!("q.{name}"),
            Self::From(_) => "from".into(),
            Self::Until(_) => "until".into(),
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |f: &mut fmt::Formatter<'_>, values: &mut dyn Iterator<Item = &str>| {
            for (n, value) in values.enumerate() {
                if n > 0 {
                    f.write_str(",")?;
                }
                f.write_str(value)?;
            }
            Ok(())
        };
        write!(f, "{}=", self.kind())?;
        match self {
            Self::Device(devices) => join(f, &mut devices.iter().map(|d| d.name())),
            Self::Country(countries) => join(f, &mut countries.iter().map(Country::as_str)),
            Self::Language(tags) => join(f, &mut tags.iter().map(String::as_str)),
            Self::Param { values, .. } => join(f, &mut values.iter().map(String::as_str)),
            Self::From(unix) | Self::Until(unix) => write!(f, "{unix}"),
        }
    }
}

/// `tag` as stored, lower case, if it is a language tag: letters in parts
/// of up to 8 joined by `-`, the first of 2 or 3.
fn language_tag(tag: &str) -> Option<String> {
    let tag = tag.to_ascii_lowercase();
    let mut parts = tag.split('-');
    let primary = parts.next()?;
    let valid = tag.len() <= MAX_LANGUAGE_LEN
        && (2..=3).contains(&primary.len())
        && primary.bytes().all(|b| b.is_ascii_lowercase())
        && parts.all(|part| {
            (1..=8).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_alphanumeric())
        });
    valid.then_some(tag)
}

/// `text` if it may stand in a parameter condition as stored: unreserved
/// URL characters and `%XX` escapes.
fn param_text(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let escapes_whole = bytes.iter().enumerate().all(|(n, &b)| {
        b != b'%'
            || (bytes.get(n + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(n + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    let valid = (1..=MAX_PARAM_LEN).contains(&text.len())
        && escapes_whole
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"._~-%".contains(&b));
    valid.then(|| text.to_owned())
}

/// `text` with every byte but unreserved URL characters percent-encoded,
/// as a query condition stores it: the inverse of [`percent_decoded`]
/// for every text, and what `param_text` takes.
pub fn percent_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"._~-".contains(&byte) {
            out.push(char::from(byte));
        } else {
            // Writing into a String cannot fail.
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// `text` with `%XX` escapes and `+` (a space, in a form's query) decoded;
/// bytes that do not make UTF-8 become U+FFFD. Borrowed when there is
/// nothing to decode, as at most deliveries.
pub fn percent_decoded(text: &str) -> std::borrow::Cow<'_, str> {
    let bytes = text.as_bytes();
    if memchr::memchr2(b'%', b'+', bytes).is_none() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut n = 0;
    while n < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        match (bytes[n], hex(n + 1), hex(n + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push(u8::try_from(high * 16 + low).unwrap_or(b'?'));
                n += 3;
            }
            (b'+', ..) => {
                out.push(b' ');
                n += 1;
            }
            (byte, ..) => {
                out.push(byte);
                n += 1;
            }
        }
    }
    std::borrow::Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) \
        AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1";
    const PIXEL: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 \
        (KHTML, like Gecko) Chrome/124.0 Mobile Safari/537.36";
    const WINDOWS_PHONE: &str = "Mozilla/5.0 (Windows Phone 10.0; Android 6.0.1; Microsoft; \
        Lumia 950) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/52.0 Mobile Safari/537.36 Edge/15";
    const KAIOS: &str = "Mozilla/5.0 (Mobile; Nokia 8110 4G; rv:48.0) Gecko/48.0 \
        Firefox/48.0 KAIOS/2.5";
    const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:126.0) Gecko/20100101 Firefox/126.0";

    #[test]
    fn devices_come_from_a_few_markers() {
        assert_eq!(Device::of(IPHONE), Device::Ios);
        assert_eq!(Device::of(PIXEL), Device::Android);
        // It says Android too, and is a phone all the same.
        assert_eq!(Device::of(WINDOWS_PHONE), Device::Android);
        assert_eq!(Device::of(KAIOS), Device::Mobile);
        assert_eq!(Device::of(FIREFOX), Device::Desktop);
        assert_eq!(Device::of(""), Device::Desktop);
        assert_eq!(Device::of("curl/8.5.0"), Device::Desktop);
        // A marker past the bytes read is not looked for.
        let padded = format!("{} iPhone", "x".repeat(AGENT_BYTES_READ));
        assert_eq!(Device::of(&padded), Device::Desktop);
    }

    #[test]
    fn countries_are_iso_codes() {
        assert_eq!(
            Country::parse("de").map(|c| c.as_str().to_owned()),
            Some("DE".into())
        );
        assert_eq!(COUNTRY_CODES.split(' ').count(), 249);
        // In order, so that the search finds every one of them.
        let codes: Vec<&str> = COUNTRY_CODES.split(' ').collect();
        assert!(codes.windows(2).all(|pair| pair[0] < pair[1]));
        for code in codes {
            assert_eq!(
                Country::parse(code).map(|c| c.as_str().to_owned()),
                Some(code.into())
            );
        }
        for unknown in ["XX", "UK", "EU", "D", "DEU", ""] {
            assert_eq!(Country::parse(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn conditions_read_and_write_their_stored_form() {
        for text in [
            "device=ios,android",
            "country=DE,AT,CH",
            "lang=de,pt-br",
            "q.utm_source=mail,news%20letter",
            "from=1767225600",
            "until=1767312000",
        ] {
            let condition = Condition::parse(text).unwrap();
            assert_eq!(condition.to_string(), text);
        }
        assert_eq!(
            Condition::parse("country=de").unwrap().to_string(),
            "country=DE"
        );
        assert_eq!(
            Condition::parse("lang=pt-BR").unwrap().to_string(),
            "lang=pt-br"
        );
    }

    #[test]
    fn bad_conditions_say_what_to_write() {
        for (text, said) in [
            ("device=fridge", "ios, android, mobile or desktop"),
            ("country=XX", "ISO 3166-1"),
            ("lang=deutsch", "language tag"),
            ("lang=d3", "language tag"),
            ("from=tomorrow", "Unix seconds"),
            ("from=1,2", "one moment"),
            ("until=253402300800", "Unix seconds"),
            ("q.=x", "parameter name"),
            ("q.a b=x", "parameter name"),
            ("q.ref=a&b", "query value"),
            ("q.ref=%zz", "query value"),
            ("city=Paris", "use device, country"),
            ("device", "name=value"),
            ("device=ios,", "empty"),
        ] {
            let error = Condition::parse(text).unwrap_err().to_string();
            assert!(error.contains(said), "{text}: {error}");
        }
        let many = format!("country={}", vec!["DE"; MAX_VALUES + 1].join(","));
        assert!(Condition::parse(&many).is_err());
    }

    #[test]
    fn escapes_and_plus_signs_decode() {
        assert_eq!(percent_decoded("news%20letter+x"), "news letter x");
        assert_eq!(percent_decoded("100%"), "100%");
        assert_eq!(percent_decoded("%C3%A9t%C3%A9"), "été");
        assert_eq!(percent_decoded("%FF"), "\u{fffd}");
    }
}
