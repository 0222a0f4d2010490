//! The fields of a link's JSON object in the native API, each read once
//! by name and typed, with a message naming the field when it is not.

use serde_json::{Map, Value};
use shortlink_core::rules::Place;

use crate::links::rules::{list_of, BadRule, RuleBody, SplitBody};
use crate::links::validate::{Field, Invalid};

/// The fields a link's JSON object may hold: what [`row_of`] and
/// `edit_link` read (the latter all but the key), and the OpenAPI
/// document's `LinkInput` lists.
pub const LINK_FIELDS: [Field; 13] = [
    Field::Url,
    Field::Key,
    Field::ExpiresAt,
    Field::ValidSince,
    Field::ExpiredUrl,
    Field::MaxClicks,
    Field::ForwardQuery,
    Field::Domain,
    Field::Rules,
    Field::Split,
    Field::Title,
    Field::Tags,
    Field::Crawlable,
];

/// The fields of a JSON object, each taken at most once by name; whatever
/// is left is an unknown field, answered 422 with its name.
pub(crate) struct Fields(pub(crate) Map<String, Value>);

impl Fields {
    /// A string field: absent `None`; `null` is refused unless `nullable`,
    /// where it is `Some(None)`: a change tells "leave it" from "remove it".
    #[allow(clippy::option_option)]
    pub(crate) fn text(
        &mut self,
        field: Field,
        nullable: bool,
    ) -> Result<Option<Option<String>>, Invalid> {
        match self.0.remove(field.name()) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(Some(text))),
            Some(Value::Null) if nullable => Ok(Some(None)),
            Some(other) => Err(Invalid::new(
                field,
                format!(
                    "{} must be a string{}, not {other}",
                    field.name(),
                    if nullable { " or null" } else { "" }
                ),
            )),
        }
    }

    /// A whole-number field: absent `None`, `null` `Some(None)`.
    #[allow(clippy::option_option)]
    pub(crate) fn count(&mut self, field: Field) -> Result<Option<Option<u64>>, Invalid> {
        match self.0.remove(field.name()) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(None)),
            Some(Value::Number(n)) if n.as_u64().is_some() => Ok(Some(n.as_u64())),
            Some(other) => Err(Invalid::new(
                field,
                format!(
                    "{} must be a whole number of clicks or null, not {other}",
                    field.name()
                ),
            )),
        }
    }

    /// A yes-or-no field: absent `None`, `null` `Some(None)`.
    #[allow(clippy::option_option)]
    pub(crate) fn flag(&mut self, field: Field) -> Result<Option<Option<bool>>, Invalid> {
        match self.0.remove(field.name()) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(None)),
            Some(Value::Bool(flag)) => Ok(Some(Some(flag))),
            Some(other) => Err(Invalid::new(
                field,
                format!("{} must be true, false or null, not {other}", field.name()),
            )),
        }
    }

    /// The rules: absent `None`; `null` or `[]` `Some(empty)`, none.
    pub(crate) fn rules(&mut self) -> Result<Option<Vec<RuleBody>>, BadRule> {
        self.0
            .remove(Field::Rules.name())
            .map(|value| list_of(value, Place::Rule, "rules"))
            .transpose()
    }

    /// The split, as [`Self::rules`].
    pub(crate) fn split(&mut self) -> Result<Option<Vec<SplitBody>>, BadRule> {
        self.0
            .remove(Field::Split.name())
            .map(|value| list_of(value, Place::Split, "split"))
            .transpose()
    }

    /// A list of strings: absent `None`; `null` `Some(empty)`.
    pub(crate) fn texts(&mut self, field: Field) -> Result<Option<Vec<String>>, Invalid> {
        match self.0.remove(field.name()) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(Vec::new())),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|item| match item {
                    Value::String(text) => Ok(text),
                    other => Err(Invalid::new(
                        field,
                        format!(
                            "{} must be a list of strings, not holding {other}",
                            field.name()
                        ),
                    )),
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(other) => Err(Invalid::new(
                field,
                format!(
                    "{} must be a list of strings or null, not {other}",
                    field.name()
                ),
            )),
        }
    }

    pub(crate) fn done(self) -> Result<(), Invalid> {
        self.done_of("a link", &LINK_FIELDS)
    }

    /// Refuses what was not taken, naming the first such field and the
    /// fields `what` has.
    pub(crate) fn done_of(self, what: &str, known: &[Field]) -> Result<(), Invalid> {
        match self.0.keys().next() {
            None => Ok(()),
            Some(unknown) => Err(Invalid {
                field: Field::Unknown,
                message: format!(
                    "unknown field {unknown:?}; {what} has {}",
                    known
                        .iter()
                        .map(|field| field.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }
}
