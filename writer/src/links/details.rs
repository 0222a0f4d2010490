//! What the writer keeps of a link beside the value Varnish reads: when it
//! was created, its title, its tags and whether crawlers may follow it.
//! Varnish never reads them, so they cost no lookup; a link written by hand
//! has none until the writer changes it.
//!
//! They live in the links' Redis, in the hash and field
//! [`shortlink_core::KeyScheme::meta_slot`] names, as one JSON object a
//! link (`{"created":1767225600,"title":"...","tags":["a"],"crawlable":true}`,
//! empty parts left out).

use serde::{Deserialize, Serialize};

use crate::links::validate::{Field, Invalid};

/// Most tags one link holds.
pub const MAX_TAGS: usize = 32;

/// Longest tag, in characters.
pub const MAX_TAG_LEN: usize = 64;

/// Longest title, in characters.
pub const MAX_TITLE_LEN: usize = 512;

/// A link's details, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LinkDetails {
    /// When the writer created it, in Unix seconds; `None` for a link
    /// written by hand or before the writer kept this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<Title>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Tag>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub crawlable: bool,
}

impl LinkDetails {
    /// Whether there is nothing to keep: then the link has no details field.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The stored form.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }

    /// The details a stored field holds; a field that cannot be read (by
    /// hand, or by a later writer) counts as none rather than failing the
    /// link it belongs to.
    pub fn from_json(stored: &str) -> Self {
        serde_json::from_str(stored).unwrap_or_default()
    }
}

/// A tag: 1 to [`MAX_TAG_LEN`] characters without control characters,
/// trimmed of white space at both ends.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Tag(String);

impl Tag {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Tag {
    type Error = Invalid;

    fn try_from(text: String) -> Result<Self, Invalid> {
        let trimmed = text.trim();
        let len = trimmed.chars().count();
        if len == 0 || len > MAX_TAG_LEN || trimmed.chars().any(char::is_control) {
            return Err(Invalid::new(
                Field::Tags,
                format!(
                    "tag {text:?} is not allowed: use 1 to {MAX_TAG_LEN} characters without \
                     control characters"
                ),
            ));
        }
        Ok(Self(trimmed.to_owned()))
    }
}

impl From<Tag> for String {
    fn from(tag: Tag) -> Self {
        tag.0
    }
}

impl std::fmt::Display for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A link's tags as given: each checked, the same tag kept once, in the
/// order first given; at most [`MAX_TAGS`].
pub fn tags_of<S: AsRef<str>>(given: &[S]) -> Result<Vec<Tag>, Invalid> {
    let mut tags: Vec<Tag> = Vec::with_capacity(given.len());
    for text in given {
        let tag = Tag::try_from(text.as_ref().to_owned())?;
        if !tags.contains(&tag) {
            tags.push(tag);
        }
    }
    if tags.len() > MAX_TAGS {
        return Err(Invalid::new(
            Field::Tags,
            format!("a link holds at most {MAX_TAGS} tags, not {}", tags.len()),
        ));
    }
    Ok(tags)
}

/// A title: at most [`MAX_TITLE_LEN`] characters without control
/// characters, trimmed; an empty one is no title.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Title(String);

impl Title {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `text` as a title; `None` for an empty one.
    pub fn of(text: &str) -> Result<Option<Self>, Invalid> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(None);
        }
        if trimmed.chars().count() > MAX_TITLE_LEN || trimmed.chars().any(char::is_control) {
            return Err(Invalid::new(
                Field::Title,
                format!(
                    "the title is not allowed: use at most {MAX_TITLE_LEN} characters \
                     without control characters"
                ),
            ));
        }
        Ok(Some(Self(trimmed.to_owned())))
    }
}

impl TryFrom<String> for Title {
    type Error = Invalid;

    fn try_from(text: String) -> Result<Self, Invalid> {
        Self::of(&text)?.ok_or_else(|| Invalid::new(Field::Title, "a title is not empty"))
    }
}

impl From<Title> for String {
    fn from(title: Title) -> Self {
        title.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_are_stored_without_their_empty_parts() {
        assert_eq!(LinkDetails::default().to_json(), "{}");
        let details = LinkDetails {
            created: Some(1_767_225_600),
            title: Title::of(" Sale ").unwrap(),
            tags: tags_of(&["a", " b", "a"]).unwrap(),
            crawlable: true,
        };
        let stored = details.to_json();
        assert_eq!(
            stored,
            r#"{"created":1767225600,"title":"Sale","tags":["a","b"],"crawlable":true}"#
        );
        assert_eq!(LinkDetails::from_json(&stored), details);
        assert_eq!(LinkDetails::from_json("not json"), LinkDetails::default());
    }

    #[test]
    fn bad_tags_and_titles_are_refused_naming_their_field() {
        for bad in ["", "  ", "a\nb", &"x".repeat(MAX_TAG_LEN + 1)] {
            assert_eq!(tags_of(&[bad]).unwrap_err().field, Field::Tags, "{bad:?}");
        }
        let many: Vec<String> = (0..=MAX_TAGS).map(|n| format!("t{n}")).collect();
        assert!(tags_of(&many).is_err());
        assert!(tags_of(&many[..MAX_TAGS]).is_ok());
        assert_eq!(Title::of("  ").unwrap(), None);
        assert_eq!(Title::of("a\u{7}").unwrap_err().field, Field::Title);
        assert!(Title::of(&"é".repeat(MAX_TITLE_LEN)).unwrap().is_some());
        assert!(Title::of(&"é".repeat(MAX_TITLE_LEN + 1)).is_err());
    }
}
