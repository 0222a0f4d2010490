//! Targets chosen per request: a link's rules (a condition and a target
//! each, the first that matches wins) and its split (weighted targets,
//! each visitor kept on one).
//!
//! Both are words of the stored value (see the storage format), so a link
//! with rules is still one hash field:
//!
//! - `~device=ios>https://apps.apple.com/app/id1`: a rule. Its conditions,
//!   joined by `&`, must all hold: `device=ios,android,mobile,desktop`,
//!   `country=DE,AT` (ISO 3166-1), `lang=de,pt-br` (the preferred language
//!   of `Accept-Language`, or a variant of it), `q.ref=mail` (a query
//!   parameter's value, percent-encoded), `from=<unix>` and `until=<unix>`.
//!   A condition lists one value or several, any of which may match.
//! - `*50>https://example.org/a`: a split target with its weight, 0 to
//!   [`MAX_WEIGHT`]. When no rule matches, a visitor (address and user
//!   agent) goes to the same split target every time, and the visitors
//!   spread by weight. With no split, the link's own URL.
//!
//! The choice itself is made in [`choose`] from the stored words, without
//! building these types: it runs on every delivery of a cached redirect.

mod choose;
mod conditions;
mod visit;

use std::fmt;

pub use choose::{choose, target_of, Chosen};
pub use conditions::{percent_decoded, percent_encoded, Condition, Country, Device, MAX_VALUES};
pub use visit::{preferred_language, RequestVisit, Visit};

use crate::{check_redirect_target, TargetError, ValidUrl};

/// Most rules a link has.
pub const MAX_RULES: usize = 16;

/// Most targets a split has.
pub const MAX_SPLIT_TARGETS: usize = 8;

/// Highest weight of a split target.
pub const MAX_WEIGHT: u32 = 1000;

/// Most bytes of a link's rules and split as stored (their words and the
/// spaces before them): the table travels with every cached redirect.
pub const MAX_RULES_BYTES: usize = 8192;

/// A condition (or several, all to hold) and the target it sends to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub conditions: Vec<Condition>,
    pub target: ValidUrl,
}

/// One target of a split, with its share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitTarget {
    pub weight: u32,
    pub target: ValidUrl,
}

/// A link's rules and split, checked against every bound.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targeting {
    rules: Vec<Rule>,
    split: Vec<SplitTarget>,
}

/// Where a bad rule or split target is, for its error: `rule 3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Rule(usize),
    Split(usize),
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rule(n) => write!(f, "rule {n}"),
            Self::Split(n) => write!(f, "split target {n}"),
        }
    }
}

/// Why a rule, a split target, or the whole of them was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("condition {condition:?}: {why}")]
    Condition { condition: String, why: String },
    #[error("a rule needs at least one condition")]
    NoCondition,
    #[error("the condition {0} is given twice: list its values in one (country=DE,AT)")]
    Repeated(String),
    #[error(
        "{0:?} is not a rule or split target: write ~name=value&name=value>URL or *weight>URL"
    )]
    Shape(String),
    #[error("the target is not safe to redirect to: {0}")]
    Target(#[source] TargetError),
    #[error("weight {0:?} is not a whole number from 0 to {MAX_WEIGHT}")]
    Weight(String),
    #[error("{place}: {source}")]
    At {
        place: Place,
        #[source]
        source: Box<RuleError>,
    },
    #[error("a link has at most {MAX_RULES} rules")]
    TooManyRules,
    #[error("a split has at most {MAX_SPLIT_TARGETS} targets")]
    TooManySplitTargets,
    #[error("the split's weights add up to 0: give one target a positive weight")]
    NoWeight,
    #[error("the rules and split take {0} bytes; at most {MAX_RULES_BYTES} are kept with a link")]
    TooLong(usize),
}

impl RuleError {
    /// The rule or split target the error is about, if one.
    pub fn place(&self) -> Option<Place> {
        match self {
            Self::At { place, .. } => Some(*place),
            _ => None,
        }
    }
}

impl Rule {
    /// The rule stored as `~<text>`.
    fn parse(text: &str) -> Result<Self, RuleError> {
        let (conditions, target) = text
            .split_once('>')
            .ok_or_else(|| RuleError::Shape(format!("~{text}")))?;
        if conditions.is_empty() {
            return Err(RuleError::NoCondition);
        }
        let conditions = conditions
            .split('&')
            .map(Condition::parse)
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(conditions, target_url(target)?)
    }

    /// A rule of `conditions`, each kind at most once, sending to `target`.
    pub fn new(conditions: Vec<Condition>, target: ValidUrl) -> Result<Self, RuleError> {
        if conditions.is_empty() {
            return Err(RuleError::NoCondition);
        }
        for (n, condition) in conditions.iter().enumerate() {
            let kind = condition.kind();
            if conditions[..n].iter().any(|before| before.kind() == kind) {
                return Err(RuleError::Repeated(kind));
            }
        }
        Ok(Self { conditions, target })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("~")?;
        for (n, condition) in self.conditions.iter().enumerate() {
            if n > 0 {
                f.write_str("&")?;
            }
            write!(f, "{condition}")?;
        }
        write!(f, ">{}", self.target)
    }
}

impl SplitTarget {
    /// The split target stored as `*<text>`.
    fn parse(text: &str) -> Result<Self, RuleError> {
        let (weight, target) = text
            .split_once('>')
            .ok_or_else(|| RuleError::Shape(format!("*{text}")))?;
        let weight = crate::whole_number(weight)
            .and_then(|weight| u32::try_from(weight).ok())
            .ok_or_else(|| RuleError::Weight(weight.to_owned()))?;
        Self::new(weight, target_url(target)?)
    }

    pub fn new(weight: u32, target: ValidUrl) -> Result<Self, RuleError> {
        if weight > MAX_WEIGHT {
            return Err(RuleError::Weight(weight.to_string()));
        }
        Ok(Self { weight, target })
    }
}

impl fmt::Display for SplitTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "*{}>{}", self.weight, self.target)
    }
}

fn target_url(text: &str) -> Result<ValidUrl, RuleError> {
    check_redirect_target(text).map_err(RuleError::Target)?;
    ValidUrl::try_from(text.to_owned()).map_err(RuleError::Target)
}

impl Targeting {
    /// `rules` and `split`, if within every bound; an error names the
    /// rule or split target at fault (counted from 1).
    pub fn new(rules: Vec<Rule>, split: Vec<SplitTarget>) -> Result<Self, RuleError> {
        if rules.len() > MAX_RULES {
            return Err(RuleError::TooManyRules);
        }
        if split.len() > MAX_SPLIT_TARGETS {
            return Err(RuleError::TooManySplitTargets);
        }
        if !split.is_empty() && split.iter().all(|target| target.weight == 0) {
            return Err(RuleError::NoWeight);
        }
        let targeting = Self { rules, split };
        let stored = targeting.to_string().len();
        if stored > MAX_RULES_BYTES {
            return Err(RuleError::TooLong(stored));
        }
        Ok(targeting)
    }

    /// Adds the word of a stored value that starts with `~` or `*`.
    pub(crate) fn push_word(&mut self, word: &str) -> Result<(), RuleError> {
        if let Some(rule) = word.strip_prefix('~') {
            let place = Place::Rule(self.rules.len() + 1);
            let rule = Rule::parse(rule).map_err(|e| e.at(place))?;
            self.rules.push(rule);
        } else if let Some(split) = word.strip_prefix('*') {
            let place = Place::Split(self.split.len() + 1);
            let target = SplitTarget::parse(split).map_err(|e| e.at(place))?;
            self.split.push(target);
        } else {
            return Err(RuleError::Shape(word.to_owned()));
        }
        Ok(())
    }

    /// Checks the bounds once every word was pushed.
    pub(crate) fn finish(self) -> Result<Self, RuleError> {
        Self::new(self.rules, self.split)
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn split(&self) -> &[SplitTarget] {
        &self.split
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.split.is_empty()
    }

    /// The target of `chosen` (`None`: the link's own URL).
    pub fn target(&self, chosen: Chosen) -> Option<&ValidUrl> {
        match chosen {
            Chosen::Rule(n) => self.rules.get(n - 1).map(|rule| &rule.target),
            Chosen::Split(n) => self.split.get(n - 1).map(|split| &split.target),
            Chosen::Url => None,
        }
    }
}

impl RuleError {
    fn at(self, place: Place) -> Self {
        Self::At {
            place,
            source: Box::new(self),
        }
    }
}

impl fmt::Display for Targeting {
    /// The stored words, each after a space, rules first, as a stored
    /// value ends with them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for rule in &self.rules {
            write!(f, " {rule}")?;
        }
        for split in &self.split {
            write!(f, " {split}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &str) -> Result<Targeting, RuleError> {
        let mut targeting = Targeting::default();
        for word in words.split(' ') {
            targeting.push_word(word)?;
        }
        targeting.finish()
    }

    #[test]
    fn rules_and_splits_read_and_write_their_stored_form() {
        let words = " ~device=ios>https://apps.apple.com/app/id1 \
                     ~country=DE,AT&lang=de>https://example.de/?a=1&b=2 \
                     *50>https://example.org/a *50>https://example.org/b";
        let targeting = parse(words.trim_start()).unwrap();
        assert_eq!(targeting.to_string(), words);
        assert_eq!(targeting.rules().len(), 2);
        assert_eq!(targeting.rules()[1].conditions.len(), 2);
        assert_eq!(
            targeting.target(Chosen::Split(2)).map(ValidUrl::as_str),
            Some("https://example.org/b")
        );
        assert_eq!(targeting.target(Chosen::Url), None);
    }

    #[test]
    fn bad_rules_name_their_place() {
        for (words, said) in [
            (
                "~country=XX>https://example.org/",
                "rule 1: condition \"country=XX\"",
            ),
            (
                "~device=ios>https://a.example/ ~device=ios>javascript:alert(1)",
                "rule 2: the target is not safe",
            ),
            (
                "*50>https://a.example/ *x>https://b.example/",
                "split target 2: weight \"x\"",
            ),
            ("*1001>https://a.example/", "split target 1: weight"),
            (
                "~>https://a.example/",
                "rule 1: a rule needs at least one condition",
            ),
            (
                "~device=ios&device=android>https://a.example/",
                "rule 1: the condition device is given twice",
            ),
            ("~device=ios", "rule 1: \"~device=ios\" is not a rule"),
            (
                "*0>https://a.example/ *0>https://b.example/",
                "weights add up to 0",
            ),
        ] {
            let error = parse(words).unwrap_err().to_string();
            assert!(error.contains(said), "{words}: {error}");
        }
    }

    #[test]
    fn a_link_has_bounded_rules() {
        let rule = "~device=ios>https://a.example/";
        let words = vec![rule; MAX_RULES].join(" ");
        assert!(parse(&words).is_ok());
        let words = vec![rule; MAX_RULES + 1].join(" ");
        assert_eq!(parse(&words), Err(RuleError::TooManyRules));
        let split = "*1>https://a.example/";
        let words = [split; MAX_SPLIT_TARGETS + 1].join(" ");
        assert_eq!(parse(&words), Err(RuleError::TooManySplitTargets));
        let long = format!("~device=ios>https://a.example/{}", "x".repeat(1000));
        let words = [long.as_str(); 9].join(" ");
        assert!(matches!(parse(&words), Err(RuleError::TooLong(_))));
    }
}
