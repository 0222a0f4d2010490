//! A link's rules and split as people give them (the API's JSON objects,
//! the command line's and the CSV column's text), turned into the core's
//! [`Targeting`], every target checked as a link's own URL is; and back,
//! to show them in the same shape.
//!
//! The JSON shape of a rule names each condition by what it asks of a
//! request: `{"device": ["ios"], "country": ["DE"], "language": ["de"],
//! "query": {"ref": ["mail"]}, "from": "<RFC 3339>", "until": "<RFC 3339>",
//! "url": "https://..."}`; a split target is `{"weight": 50, "url": ...}`.
//! Query names and values are given as plain text and stored
//! percent-encoded.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use shortlink_core::rules::{
    percent_decoded, percent_encoded, Condition, Place, Rule, RuleError, SplitTarget, Targeting,
    MAX_RULES, MAX_SPLIT_TARGETS,
};
use shortlink_core::{Expiry, ValidUrl};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use utoipa::ToSchema;

use crate::config::Settings;
use crate::links::validate::{format_expiry, normalize_url, Field, Invalid};

/// A rule: the conditions a request must all meet (give at least one),
/// and the target it is sent to. The first rule that matches wins.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleBody {
    /// Any of `ios`, `android`, `mobile`, `desktop`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device: Vec<String>,
    /// ISO 3166-1 alpha-2 codes (`DE`, `AT`): the visitor's country.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub country: Vec<String>,
    /// Language tags (`de`, `pt-BR`): the preferred language of the
    /// request's `Accept-Language`, or a variant of one (`de` takes `de-AT`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub language: Vec<String>,
    /// Query parameters, each with the values any of which it may have,
    /// as plain text (`{"ref": ["mail", "news letter"]}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, Vec<String>>,
    /// From this moment on, RFC 3339 (stored to the second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Before this moment, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Where the rule sends: checked as a link's URL is.
    pub url: String,
}

/// A split target: visitors no rule took are spread over the targets by
/// weight, each visitor kept on one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SplitBody {
    /// 0 to 1000; the weights of a split must add up to more than 0.
    pub weight: u32,
    pub url: String,
}

/// Why a link's rules or split were refused; the message names the rule
/// or split target at fault (`rule 2: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRule {
    #[error(transparent)]
    Rule(#[from] RuleError),
    /// A target the checks of a link's URL refuse.
    #[error("{place}: target {url:?}: {source}")]
    Target {
        place: Place,
        url: String,
        #[source]
        source: Invalid,
    },
    /// An input that is not what its field holds.
    #[error("{place}: {message}")]
    Input { place: Place, message: String },
}

impl BadRule {
    /// The input to blame: `split` for a split target or the split as a
    /// whole, `rules` otherwise.
    pub fn field(&self) -> Field {
        let place = match self {
            Self::Rule(RuleError::TooManySplitTargets | RuleError::NoWeight) => {
                return Field::Split
            }
            Self::Rule(error) => error.place(),
            Self::Target { place, .. } | Self::Input { place, .. } => Some(*place),
        };
        match place {
            Some(Place::Split(_)) => Field::Split,
            _ => Field::Rules,
        }
    }
}

fn at(place: Place, error: RuleError) -> BadRule {
    BadRule::Rule(RuleError::At {
        place,
        source: Box::new(error),
    })
}

/// A target checked and normalised as a link's URL, including the checks
/// against the short domains (a short link as a target is a loop).
fn target(place: Place, url: &str, settings: &Settings) -> Result<ValidUrl, BadRule> {
    normalize_url(url, settings).map_err(|source| BadRule::Target {
        place,
        url: url.to_owned(),
        source,
    })
}

/// Unix seconds of an RFC 3339 time, for `from` and `until`.
fn moment(place: Place, name: &str, text: &str) -> Result<u64, BadRule> {
    let bad = |why: String| BadRule::Input {
        place,
        message: format!("{name} {text:?} {why}; write it like 2026-12-31T23:59:59Z"),
    };
    let at = OffsetDateTime::parse(text, &Rfc3339)
        .map_err(|e| bad(format!("is not an RFC 3339 time ({e})")))?;
    u64::try_from(at.unix_timestamp())
        .ok()
        .filter(|&unix| unix <= Expiry::MAX)
        .ok_or_else(|| bad("is before 1970 or after 9999".into()))
}

impl RuleBody {
    /// The core's rule, at `place` (counted from 1).
    fn rule(&self, place: Place, settings: &Settings) -> Result<Rule, BadRule> {
        let condition = |name: &str, values: &[String]| {
            if let Some(value) = values.iter().find(|value| value.contains(',')) {
                return Err(BadRule::Input {
                    place,
                    message: format!("{name} value {value:?}: give each value on its own"),
                });
            }
            Condition::parse(&format!("{name}={}", values.join(","))).map_err(|e| at(place, e))
        };
        let mut conditions = Vec::new();
        for (name, values) in [
            ("device", &self.device),
            ("country", &self.country),
            ("lang", &self.language),
        ] {
            if !values.is_empty() {
                conditions.push(condition(name, values)?);
            }
        }
        for (param, values) in &self.query {
            let values: Vec<String> = values.iter().map(|v| percent_encoded(v)).collect();
            conditions.push(condition(
                &format!("q.{}", percent_encoded(param)),
                &values,
            )?);
        }
        let mut window = [None, None];
        for (n, (name, text)) in [("from", &self.from), ("until", &self.until)]
            .into_iter()
            .enumerate()
        {
            if let Some(text) = text {
                let unix = moment(place, name, text)?;
                window[n] = Some(unix);
                conditions.push(condition(name, &[unix.to_string()])?);
            }
        }
        if let [Some(from), Some(until)] = window {
            if from >= until {
                return Err(BadRule::Input {
                    place,
                    message: format!(
                        "from {} is not before until {}: the rule would never match",
                        rfc3339(from),
                        rfc3339(until)
                    ),
                });
            }
        }
        let url = target(place, &self.url, settings)?;
        Rule::new(conditions, url).map_err(|e| at(place, e))
    }

    /// A rule as the API shows it.
    pub fn of(rule: &Rule) -> Self {
        let mut body = Self {
            url: rule.target.to_string(),
            ..Self::default()
        };
        for condition in &rule.conditions {
            body.set(condition);
        }
        body
    }

    /// Puts `condition` in its field; whether the field held one already.
    fn set(&mut self, condition: &Condition) -> bool {
        fn replace<T>(field: &mut T, value: T, empty: impl Fn(&T) -> bool) -> bool {
            !empty(&std::mem::replace(field, value))
        }
        match condition {
            Condition::Device(devices) => replace(
                &mut self.device,
                devices.iter().map(|d| d.name().to_owned()).collect(),
                Vec::is_empty,
            ),
            Condition::Country(countries) => replace(
                &mut self.country,
                countries.iter().map(|c| c.as_str().to_owned()).collect(),
                Vec::is_empty,
            ),
            Condition::Language(tags) => replace(&mut self.language, tags.clone(), Vec::is_empty),
            Condition::Param { name, values } => self
                .query
                .insert(
                    percent_decoded(name).into_owned(),
                    values
                        .iter()
                        .map(|v| percent_decoded(v).into_owned())
                        .collect(),
                )
                .is_some(),
            Condition::From(unix) => self.from.replace(rfc3339(*unix)).is_some(),
            Condition::Until(unix) => self.until.replace(rfc3339(*unix)).is_some(),
        }
    }

    /// A rule as the command line and the CSV column write it:
    /// `device=ios&country=DE>https://...` (the stored word without `~`).
    pub fn parse_text(text: &str, place: Place) -> Result<Self, BadRule> {
        let (conditions, url) = text
            .split_once('>')
            .ok_or_else(|| at(place, RuleError::Shape(format!("~{text}"))))?;
        if conditions.is_empty() {
            return Err(at(place, RuleError::NoCondition));
        }
        let mut body = Self {
            url: url.to_owned(),
            ..Self::default()
        };
        for text in conditions.split('&') {
            let condition = Condition::parse(text).map_err(|e| at(place, e))?;
            if body.set(&condition) {
                let kind = text.split('=').next().unwrap_or(text).to_owned();
                return Err(at(place, RuleError::Repeated(kind)));
            }
        }
        Ok(body)
    }
}

impl SplitBody {
    fn target(&self, place: Place, settings: &Settings) -> Result<SplitTarget, BadRule> {
        let url = target(place, &self.url, settings)?;
        SplitTarget::new(self.weight, url).map_err(|e| at(place, e))
    }

    pub fn of(split: &SplitTarget) -> Self {
        Self {
            weight: split.weight,
            url: split.target.to_string(),
        }
    }

    /// A split target as the command line and the CSV column write it:
    /// `50>https://...`.
    pub fn parse_text(text: &str, place: Place) -> Result<Self, BadRule> {
        let (weight, url) = text
            .split_once('>')
            .ok_or_else(|| at(place, RuleError::Shape(format!("*{text}"))))?;
        let weight = weight
            .parse()
            .map_err(|_| at(place, RuleError::Weight(weight.to_owned())))?;
        Ok(Self {
            weight,
            url: url.to_owned(),
        })
    }
}

fn rfc3339(unix: u64) -> String {
    Expiry::try_from(unix).map_or_else(|_| unix.to_string(), format_expiry)
}

/// `rules` checked, each target as a link's URL.
pub fn rules_of(rules: &[RuleBody], settings: &Settings) -> Result<Vec<Rule>, BadRule> {
    if rules.len() > MAX_RULES {
        return Err(RuleError::TooManyRules.into());
    }
    rules
        .iter()
        .enumerate()
        .map(|(n, rule)| rule.rule(Place::Rule(n + 1), settings))
        .collect()
}

/// `split` checked, each target as a link's URL.
pub fn split_of(split: &[SplitBody], settings: &Settings) -> Result<Vec<SplitTarget>, BadRule> {
    if split.len() > MAX_SPLIT_TARGETS {
        return Err(RuleError::TooManySplitTargets.into());
    }
    split
        .iter()
        .enumerate()
        .map(|(n, target)| target.target(Place::Split(n + 1), settings))
        .collect()
}

/// The rules and split of a link as the API shows them.
pub fn bodies_of(targeting: &Targeting) -> (Vec<RuleBody>, Vec<SplitBody>) {
    (
        targeting.rules().iter().map(RuleBody::of).collect(),
        targeting.split().iter().map(SplitBody::of).collect(),
    )
}

/// A JSON list of rules or split targets, each read on its own so that an
/// error names its place: `null` is an empty list (no rules, no split).
pub fn list_of<T: serde::de::DeserializeOwned>(
    value: Value,
    place: fn(usize) -> Place,
    what: &str,
) -> Result<Vec<T>, BadRule> {
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => {
            return Err(BadRule::Input {
                place: place(1),
                message: format!("{what} must be a list (or null for none), not {other}"),
            })
        }
    };
    items
        .into_iter()
        .enumerate()
        .map(|(n, item)| {
            serde_json::from_value(item).map_err(|e| BadRule::Input {
                place: place(n + 1),
                message: e.to_string(),
            })
        })
        .collect()
}

/// The stored words of a CSV `rules` column (`~device=ios>URL *50>URL`,
/// as the export writes them) as rules and a split.
pub fn parse_words(words: &str) -> Result<(Vec<RuleBody>, Vec<SplitBody>), BadRule> {
    let (mut rules, mut split) = (Vec::new(), Vec::new());
    for word in words.split_whitespace() {
        if let Some(rule) = word.strip_prefix('~') {
            rules.push(RuleBody::parse_text(rule, Place::Rule(rules.len() + 1))?);
        } else if let Some(target) = word.strip_prefix('*') {
            split.push(SplitBody::parse_text(
                target,
                Place::Split(split.len() + 1),
            )?);
        } else {
            return Err(RuleError::Shape(word.to_owned()).into());
        }
    }
    Ok((rules, split))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_rules_read_into_the_api_shape() {
        let rule = RuleBody::parse_text(
            "device=ios,android&country=de&lang=pt-BR&q.ref=news%20letter&from=1767225600>https://a.example/",
            Place::Rule(1),
        )
        .unwrap();
        assert_eq!(rule.device, ["ios", "android"]);
        assert_eq!(rule.country, ["DE"]);
        assert_eq!(rule.language, ["pt-br"]);
        assert_eq!(rule.query["ref"], ["news letter"]);
        assert_eq!(rule.from.as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(rule.url, "https://a.example/");
        let split = SplitBody::parse_text("50>https://b.example/", Place::Split(2)).unwrap();
        assert_eq!(split.weight, 50);
    }

    #[test]
    fn bad_text_rules_name_their_place() {
        for (text, said) in [
            (
                "country=XX>https://a.example/",
                "rule 3: condition \"country=XX\"",
            ),
            ("device=ios", "rule 3: \"~device=ios\" is not a rule"),
            (
                ">https://a.example/",
                "rule 3: a rule needs at least one condition",
            ),
            (
                "device=ios&device=android>https://a.example/",
                "rule 3: the condition device",
            ),
        ] {
            let error = RuleBody::parse_text(text, Place::Rule(3)).unwrap_err();
            assert!(error.to_string().contains(said), "{text}: {error}");
            assert_eq!(error.field(), Field::Rules);
        }
        let error = SplitBody::parse_text("x>https://a.example/", Place::Split(1)).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("split target 1: weight \"x\""),
            "{error}"
        );
        assert_eq!(error.field(), Field::Split);
        assert_eq!(BadRule::from(RuleError::NoWeight).field(), Field::Split);
    }

    #[test]
    fn query_text_is_stored_percent_encoded() {
        assert_eq!(
            percent_encoded("news letter&x=é"),
            "news%20letter%26x%3D%C3%A9"
        );
        assert_eq!(percent_decoded(&percent_encoded("a b+c")), "a b+c");
    }

    #[test]
    fn stored_words_read_back() {
        let (rules, split) = parse_words(
            "~device=ios>https://a.example/ *5>https://b.example/ *0>https://c.example/",
        )
        .unwrap();
        assert_eq!(rules.len(), 1);
        assert_eq!(split.len(), 2);
        let error =
            parse_words("~device=ios>https://a.example/ ~x>https://a.example/").unwrap_err();
        assert!(error.to_string().starts_with("rule 2:"), "{error}");
        assert!(parse_words("https://a.example/").is_err());
    }

    #[test]
    fn lists_name_the_item_that_is_not_one() {
        let rules: Vec<RuleBody> = list_of(Value::Null, Place::Rule, "rules").unwrap();
        assert!(rules.is_empty());
        let error = list_of::<RuleBody>(
            serde_json::json!([{"url": "https://a.example/"}, {"colour": "blue"}]),
            Place::Rule,
            "rules",
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("rule 2: unknown field `colour`"),
            "{error}"
        );
        assert!(list_of::<SplitBody>(serde_json::json!({}), Place::Split, "split").is_err());
    }
}
