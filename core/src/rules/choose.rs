//! The choice of a target for one request, read straight from the stored
//! words: it runs on every delivery of a cached redirect with rules, so it
//! builds nothing and allocates only for a query parameter condition. The
//! words were checked when the link was read from Redis, so anything odd
//! here simply does not match.

use super::conditions::percent_decoded;
use super::visit::{fnv1a, mix, Visit, FNV_OFFSET};
use super::{MAX_RULES, MAX_SPLIT_TARGETS};

/// Which target a request was sent to: counted under [`Chosen::label`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Chosen {
    /// Rule `n`, counted from 1.
    Rule(usize),
    /// Split target `n`, counted from 1.
    Split(usize),
    /// The link's own URL: no rule matched and there is no split.
    Url,
}

impl Chosen {
    /// The name clicks on it are counted under: `r1`, `s2`, `url`.
    pub fn label(self) -> &'static str {
        const RULES: [&str; MAX_RULES] = [
            "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "r13",
            "r14", "r15", "r16",
        ];
        const SPLITS: [&str; MAX_SPLIT_TARGETS] = ["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"];
        // Past the bounds only for a table no check let through.
        match self {
            Self::Rule(n) => RULES.get(n.wrapping_sub(1)).copied().unwrap_or("r"),
            Self::Split(n) => SPLITS.get(n.wrapping_sub(1)).copied().unwrap_or("s"),
            Self::Url => "url",
        }
    }

    /// The target a label names, if it is one.
    pub fn from_label(label: &str) -> Option<Self> {
        let number = |digits: &str| {
            digits
                .parse::<usize>()
                .ok()
                .filter(|&n| n >= 1 && !digits.starts_with('0'))
        };
        match label.split_at_checked(1)? {
            ("r", digits) => number(digits).map(Self::Rule),
            ("s", digits) => number(digits).map(Self::Split),
            _ => (label == "url").then_some(Self::Url),
        }
    }
}

/// The target of the link `key` for `visit`, from `words` (its stored rule
/// and split words, separated by spaces): the first rule whose conditions
/// all hold, else the visitor's split target, else `None`, the link's own
/// URL.
///
/// It reads bytes: `perf` showed `str` splitting by characters (a
/// searcher set up for every condition and value) taking a microsecond
/// per delivery of a link with four rules.
pub fn choose<'w>(words: &'w str, key: &str, visit: &dyn Visit) -> (Chosen, Option<&'w str>) {
    let mut rules = 0;
    let mut split_total: u64 = 0;
    for word in split_words(words) {
        match word.as_bytes().first() {
            Some(b'~') => {
                rules += 1;
                let rule = &word[1..];
                // Conditions hold no '>': the first one ends them.
                let Some(end) = memchr::memchr(b'>', rule.as_bytes()) else {
                    continue;
                };
                let conditions = &rule.as_bytes()[..end];
                if conditions
                    .split(|&byte| byte == b'&')
                    .all(|condition| holds(condition, visit))
                {
                    return (Chosen::Rule(rules), Some(&rule[end + 1..]));
                }
            }
            Some(b'*') => {
                if let Some((weight, _)) = split_target(&word[1..]) {
                    split_total = split_total.saturating_add(weight);
                }
            }
            _ => {}
        }
    }
    if split_total == 0 {
        return (Chosen::Url, None);
    }
    // The same visitor lands on the same share of the total for this link,
    // on every Varnish: a point of the total, and the target whose share
    // covers it.
    let point = mix(visit.visitor() ^ fnv1a(FNV_OFFSET, key.as_bytes())) % split_total;
    let mut covered: u64 = 0;
    // Numbered as target_of numbers them: every word of a split target.
    let splits = split_words(words).filter_map(|word| word.strip_prefix('*'));
    for (n, split) in splits.enumerate() {
        let Some((weight, target)) = split_target(split) else {
            continue;
        };
        covered = covered.saturating_add(weight);
        if point < covered {
            return (Chosen::Split(n + 1), Some(target));
        }
    }
    (Chosen::Url, None)
}

/// The target `chosen` names in `words` (stored rule and split words), or
/// `None` for the link's own URL or a rule or split target it does not have.
pub fn target_of(words: &str, chosen: Chosen) -> Option<&str> {
    let (prefix, n) = match chosen {
        Chosen::Rule(n) => ('~', n),
        Chosen::Split(n) => ('*', n),
        Chosen::Url => return None,
    };
    let word = split_words(words)
        .filter_map(|word| word.strip_prefix(prefix))
        .nth(n.checked_sub(1)?)?;
    let end = memchr::memchr(b'>', word.as_bytes())?;
    Some(&word[end + 1..])
}

/// The words of `text`, between single spaces.
fn split_words(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        if let Some(space) = memchr::memchr(b' ', current.as_bytes()) {
            rest = Some(&current[space + 1..]);
            Some(&current[..space])
        } else {
            rest = None;
            Some(current)
        }
    })
}

/// The weight (digits; anything else weighs 0) and target of a split
/// target's word after its `*`.
fn split_target(split: &str) -> Option<(u64, &str)> {
    let end = memchr::memchr(b'>', split.as_bytes())?;
    Some((
        number(&split.as_bytes()[..end]).unwrap_or(0),
        &split[end + 1..],
    ))
}

/// `digits` as a number, if they are digits alone; saturating.
fn number(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0_u64, |n, &digit| {
        n.saturating_mul(10).saturating_add(u64::from(digit - b'0'))
    }))
}

/// Whether `visit` meets `condition` (`name=value[,value...]`).
fn holds(condition: &[u8], visit: &dyn Visit) -> bool {
    let Some(equals) = condition.iter().position(|&byte| byte == b'=') else {
        return false;
    };
    let (name, values) = (&condition[..equals], &condition[equals + 1..]);
    let mut values = values.split(|&byte| byte == b',');
    match name {
        b"device" => {
            let device = visit.device().name().as_bytes();
            values.any(|value| value == device)
        }
        b"country" => visit.country().is_some_and(|country| {
            let code = country.as_str().as_bytes();
            values.any(|value| value.eq_ignore_ascii_case(code))
        }),
        b"lang" => visit.language().is_some_and(|preferred| {
            let preferred = preferred.as_bytes();
            values.any(|tag| {
                preferred.get(..tag.len()).is_some_and(|head| {
                    head.eq_ignore_ascii_case(tag)
                        && matches!(preferred.get(tag.len()), None | Some(b'-'))
                })
            })
        }),
        b"from" => values
            .next()
            .and_then(number)
            .is_some_and(|from| visit.now() >= from),
        b"until" => values
            .next()
            .and_then(number)
            .is_some_and(|until| visit.now() < until),
        _ => name.strip_prefix(b"q.").is_some_and(|param| {
            // Names and values are ASCII as stored (escapes are %XX).
            fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
                percent_decoded(std::str::from_utf8(bytes).unwrap_or(""))
            }
            visit
                .param(&text(param))
                .is_some_and(|asked| values.any(|value| text(value) == asked))
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::super::{Country, RequestVisit, Targeting};
    use super::*;

    const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) Mobile/15E148";
    const PIXEL: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) Mobile Safari/537.36";
    const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:126.0) Gecko/20100101 Firefox/126.0";

    /// Clients in 192.0.2.0/24 are in Germany, in 198.51.100.0/24 in France.
    fn country_of(client: IpAddr) -> Option<Country> {
        match client {
            IpAddr::V4(v4) if v4.octets()[..3] == [192, 0, 2] => Country::parse("DE"),
            IpAddr::V4(v4) if v4.octets()[..3] == [198, 51, 100] => Country::parse("FR"),
            _ => None,
        }
    }

    struct Request {
        agent: &'static str,
        language: &'static str,
        query: &'static str,
        client: &'static str,
        now: u64,
    }

    const DESKTOP: Request = Request {
        agent: FIREFOX,
        language: "en-US,en;q=0.5",
        query: "",
        client: "203.0.113.9",
        now: 1_800_000_000,
    };

    fn chosen(words: &str, request: &Request) -> Chosen {
        let visit = RequestVisit::new(
            request.agent,
            request.language,
            request.query,
            request.client.parse().ok(),
            request.now,
            country_of,
        );
        // The words must be a stored table, as the VMOD is only given those.
        let mut targeting = Targeting::default();
        for word in words.split(' ') {
            targeting.push_word(word).unwrap();
        }
        let targeting = targeting.finish().unwrap();
        let (chosen, target) = choose(words, "Lm25", &visit);
        assert_eq!(
            target,
            targeting.target(chosen).map(crate::ValidUrl::as_str)
        );
        chosen
    }

    #[test]
    fn each_condition_reads_its_part_of_the_request() {
        let ios = "~device=ios>https://apps.apple.com/";
        assert_eq!(
            chosen(
                ios,
                &Request {
                    agent: IPHONE,
                    ..DESKTOP
                }
            ),
            Chosen::Rule(1)
        );
        assert_eq!(chosen(ios, &DESKTOP), Chosen::Url);
        let android = "~device=android,mobile>https://play.example/";
        assert_eq!(
            chosen(
                android,
                &Request {
                    agent: PIXEL,
                    ..DESKTOP
                }
            ),
            Chosen::Rule(1)
        );
        let germany = "~country=DE,AT>https://example.de/";
        assert_eq!(
            chosen(
                germany,
                &Request {
                    client: "192.0.2.7",
                    ..DESKTOP
                }
            ),
            Chosen::Rule(1)
        );
        assert_eq!(
            chosen(
                germany,
                &Request {
                    client: "198.51.100.7",
                    ..DESKTOP
                }
            ),
            Chosen::Url
        );
        assert_eq!(
            chosen(
                germany,
                &Request {
                    client: "",
                    ..DESKTOP
                }
            ),
            Chosen::Url
        );
        let german = "~lang=de>https://example.de/";
        for (language, expected) in [
            ("de-AT,de;q=0.9", Chosen::Rule(1)),
            ("de", Chosen::Rule(1)),
            ("en,de;q=0.9", Chosen::Url),
            ("deu", Chosen::Url),
            ("", Chosen::Url),
        ] {
            assert_eq!(
                chosen(
                    german,
                    &Request {
                        language,
                        ..DESKTOP
                    }
                ),
                expected,
                "{language}"
            );
        }
        let mail = "~q.utm_source=news%20letter,mail>https://example.org/mail";
        for (query, expected) in [
            ("utm_source=mail", Chosen::Rule(1)),
            ("a=1&utm_source=news+letter", Chosen::Rule(1)),
            ("utm_source=web", Chosen::Url),
            ("", Chosen::Url),
        ] {
            assert_eq!(
                chosen(mail, &Request { query, ..DESKTOP }),
                expected,
                "{query}"
            );
        }
        let window = "~from=1800000000&until=1800003600>https://example.org/sale";
        for (now, expected) in [
            (1_799_999_999, Chosen::Url),
            (1_800_000_000, Chosen::Rule(1)),
            (1_800_003_599, Chosen::Rule(1)),
            (1_800_003_600, Chosen::Url),
        ] {
            assert_eq!(
                chosen(window, &Request { now, ..DESKTOP }),
                expected,
                "{now}"
            );
        }
    }

    #[test]
    fn the_first_rule_that_matches_wins_and_conditions_combine() {
        let words = "~device=ios&country=DE>https://example.de/ios \
                     ~device=ios>https://apps.apple.com/ \
                     ~country=DE>https://example.de/";
        let german_iphone = Request {
            agent: IPHONE,
            client: "192.0.2.1",
            ..DESKTOP
        };
        assert_eq!(chosen(words, &german_iphone), Chosen::Rule(1));
        let french_iphone = Request {
            agent: IPHONE,
            client: "198.51.100.1",
            ..DESKTOP
        };
        assert_eq!(chosen(words, &french_iphone), Chosen::Rule(2));
        let german_desktop = Request {
            client: "192.0.2.1",
            ..DESKTOP
        };
        assert_eq!(chosen(words, &german_desktop), Chosen::Rule(3));
        assert_eq!(chosen(words, &DESKTOP), Chosen::Url);
    }

    /// 10,000 visitors over a 50/50 split: each half within 3 % of 5,000,
    /// and each visitor sent to the same target again.
    #[test]
    fn a_split_follows_its_weights_and_keeps_each_visitor() {
        let words = "~device=ios>https://apps.apple.com/ \
                     *50>https://example.org/a *50>https://example.org/b";
        let mut counts = [0_u32; 2];
        for n in 0..10_000_u32 {
            let [_, _, high, low] = n.to_be_bytes();
            let client = IpAddr::V4(Ipv4Addr::new(10, 1, high, low));
            let pick = |agent| {
                let visit = RequestVisit::new(agent, "", "", Some(client), 0, country_of);
                choose(words, "Lm25", &visit).0
            };
            let first = pick(FIREFOX);
            assert_eq!(pick(FIREFOX), first, "visitor {client} moved");
            match first {
                Chosen::Split(n) => counts[n - 1] += 1,
                other => panic!("{other:?}"),
            }
        }
        for count in counts {
            assert!((4850..=5150).contains(&count), "{counts:?}");
        }
        // Weights 1 and 3: a quarter and three quarters.
        let words = "*1>https://example.org/a *3>https://example.org/b";
        let a = (0..10_000_u32)
            .filter(|n| {
                let client = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n));
                let visit = RequestVisit::new(FIREFOX, "", "", Some(client), 0, country_of);
                choose(words, "Lm25", &visit).0 == Chosen::Split(1)
            })
            .count();
        assert!((2425..=2575).contains(&a), "{a}");
        // A paused target (weight 0) gets nobody.
        let words = "*0>https://example.org/a *5>https://example.org/b";
        assert_eq!(chosen(words, &DESKTOP), Chosen::Split(2));
    }

    #[test]
    fn labels_name_targets_both_ways() {
        let every = (1..=MAX_RULES)
            .map(Chosen::Rule)
            .chain((1..=MAX_SPLIT_TARGETS).map(Chosen::Split));
        for chosen in every.chain([Chosen::Url]) {
            assert_eq!(Chosen::from_label(chosen.label()), Some(chosen));
        }
        for label in ["r0", "s", "r01", "x1", "", "urls"] {
            assert_eq!(Chosen::from_label(label), None, "{label}");
        }
    }
}
