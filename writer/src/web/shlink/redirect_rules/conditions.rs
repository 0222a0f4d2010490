//! Shlink's redirect conditions as this project's rules, and back.
//!
//! | Shlink's condition | this project's rule |
//! | --- | --- |
//! | `device` (`android`, `ios`, `desktop`) | `device` |
//! | `language` | `language` |
//! | `query-param` (`matchKey`, `matchValue`) | `query` |
//! | `geolocation-country-code` | `country` |
//! | `after-date`, `before-date` | `from`, `until` |
//!
//! The others (`any-value-query-param`, `valueless-query-param`,
//! `ip-address`, `geolocation-city-name`, `browser`) have no rule here and
//! are refused by name. A rule here may take several values of one
//! condition (any of them); Shlink's rule takes one of each, so such a rule
//! reads back as one Shlink rule per value, each to the same URL.

use serde::{Deserialize, Serialize};

use crate::links::rules::RuleBody;
use crate::web::shlink::problem::Problem;
use crate::web::shlink::short_url::{iso_date, parse_date};

/// One condition of a Shlink rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub match_key: Option<String>,
    #[serde(default)]
    pub match_value: Option<String>,
}

/// A Shlink rule as read back: its URL, place and conditions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShlinkRule {
    pub long_url: String,
    pub priority: usize,
    pub conditions: Vec<Condition>,
}

/// A Shlink rule as sent.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SentRule {
    pub long_url: String,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// `sent`, the `n`-th rule (from 1), as a rule of this project.
pub fn rule_of(n: usize, sent: SentRule) -> Result<RuleBody, Problem> {
    let mut rule = RuleBody {
        url: sent.long_url,
        ..RuleBody::default()
    };
    let refuse = |why: String| Problem::invalid("redirectRules", format!("rule {n}: {why}"));
    for condition in sent.conditions {
        let value = || {
            condition
                .match_value
                .clone()
                .filter(|value| !value.is_empty())
                .ok_or_else(|| refuse(format!("a {} condition needs a matchValue", condition.kind)))
        };
        let once = |taken: bool| {
            if taken {
                Err(refuse(format!(
                    "a rule here holds one {} condition: send another rule for another value",
                    condition.kind
                )))
            } else {
                Ok(())
            }
        };
        match condition.kind.as_str() {
            "device" => {
                once(!rule.device.is_empty())?;
                rule.device.push(value()?);
            }
            "language" => {
                once(!rule.language.is_empty())?;
                rule.language.push(value()?);
            }
            "geolocation-country-code" => {
                once(!rule.country.is_empty())?;
                rule.country.push(value()?.to_ascii_uppercase());
            }
            "query-param" => {
                let key = condition
                    .match_key
                    .clone()
                    .filter(|key| !key.is_empty())
                    .ok_or_else(|| refuse("a query-param condition needs a matchKey".into()))?;
                once(rule.query.contains_key(&key))?;
                rule.query.insert(key, vec![value()?]);
            }
            "after-date" | "before-date" => {
                let text = value()?;
                let unix = parse_date(&text).ok_or_else(|| {
                    refuse(format!(
                        "{} {text:?} is not an ISO 8601 date",
                        condition.kind
                    ))
                })?;
                let moment = u64::try_from(unix)
                    .map(iso_date)
                    .map_err(|_| refuse(format!("{text:?} is before 1970")))?;
                if condition.kind == "after-date" {
                    once(rule.from.is_some())?;
                    rule.from = Some(moment);
                } else {
                    once(rule.until.is_some())?;
                    rule.until = Some(moment);
                }
            }
            other => {
                return Err(refuse(format!(
                    "condition {other:?} has no rule here; use device, language, query-param, \
                     geolocation-country-code, after-date or before-date"
                )))
            }
        }
    }
    Ok(rule)
}

/// `rules` as Shlink's rules, in order, one for each combination of
/// their values.
pub fn shlink_rules_of(rules: &[RuleBody]) -> Vec<ShlinkRule> {
    let mut shlink = Vec::new();
    for rule in rules {
        let mut combinations: Vec<Vec<Condition>> = vec![Vec::new()];
        let mut each = |kind: &str, key: Option<&str>, values: &[String]| {
            if values.is_empty() {
                return;
            }
            combinations = combinations
                .iter()
                .flat_map(|conditions| {
                    values.iter().map(move |value| {
                        let mut more = conditions.clone();
                        more.push(Condition {
                            kind: kind.to_owned(),
                            match_key: key.map(str::to_owned),
                            match_value: Some(value.clone()),
                        });
                        more
                    })
                })
                .collect();
        };
        each("device", None, &rule.device);
        each("language", None, &rule.language);
        each("geolocation-country-code", None, &rule.country);
        for (key, values) in &rule.query {
            each("query-param", Some(key), values);
        }
        let shlink_date = |text: &Option<String>| -> Vec<String> {
            text.iter()
                .map(|text| {
                    parse_date(text)
                        .and_then(|unix| u64::try_from(unix).ok())
                        .map_or_else(|| text.clone(), iso_date)
                })
                .collect()
        };
        each("after-date", None, &shlink_date(&rule.from));
        each("before-date", None, &shlink_date(&rule.until));
        for conditions in combinations {
            shlink.push(ShlinkRule {
                long_url: rule.url.clone(),
                priority: shlink.len() + 1,
                conditions,
            });
        }
    }
    shlink
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(kind: &str, key: Option<&str>, value: &str) -> Condition {
        Condition {
            kind: kind.into(),
            match_key: key.map(Into::into),
            match_value: Some(value.into()),
        }
    }

    #[test]
    fn shlink_conditions_become_one_rule_and_read_back_the_same() {
        let conditions = vec![
            condition("device", None, "ios"),
            condition("language", None, "de"),
            condition("geolocation-country-code", None, "at"),
            condition("query-param", Some("ref"), "mail"),
            condition("after-date", None, "2026-01-01T00:00:00+00:00"),
        ];
        let sent = SentRule {
            long_url: "https://example.at/".into(),
            conditions: conditions.clone(),
        };
        let rule = rule_of(1, sent).unwrap();
        assert_eq!(rule.country, ["AT"]);
        assert_eq!(rule.from.as_deref(), Some("2026-01-01T00:00:00+00:00"));
        let back = shlink_rules_of(&[rule]);
        assert_eq!(back.len(), 1);
        assert_eq!(
            back[0].conditions[2],
            condition("geolocation-country-code", None, "AT")
        );
        assert_eq!(back[0].conditions.len(), conditions.len());
    }

    #[test]
    fn several_values_read_back_as_one_shlink_rule_each() {
        let rule = RuleBody {
            device: vec!["ios".into(), "android".into()],
            country: vec!["DE".into(), "AT".into()],
            url: "https://example.de/".into(),
            ..RuleBody::default()
        };
        let back = shlink_rules_of(&[rule]);
        assert_eq!(back.len(), 4);
        assert_eq!(
            back.iter().map(|rule| rule.priority).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
    }

    #[test]
    fn conditions_without_a_rule_here_are_refused_by_name() {
        for kind in [
            "ip-address",
            "browser",
            "geolocation-city-name",
            "valueless-query-param",
        ] {
            let sent = SentRule {
                long_url: "https://example.org/".into(),
                conditions: vec![condition(kind, Some("k"), "v")],
            };
            let problem = rule_of(2, sent).unwrap_err();
            assert!(problem.detail.contains(kind), "{}", problem.detail);
            assert!(problem.detail.starts_with("rule 2: "));
        }
        let twice = SentRule {
            long_url: "https://example.org/".into(),
            conditions: vec![
                condition("device", None, "ios"),
                condition("device", None, "android"),
            ],
        };
        assert!(rule_of(1, twice).is_err());
    }
}
