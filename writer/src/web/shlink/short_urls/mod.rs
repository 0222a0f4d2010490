//! Short URLs, one endpoint a file, and what they share: reading Shlink's
//! JSON fields, and the pagination object.
//!
//! | file | what |
//! | --- | --- |
//! | `list.rs` | `GET /short-urls`: filters, orders and pages |
//! | `create.rs` | `POST /short-urls` |
//! | `get.rs` | `GET /short-urls/{shortCode}` |
//! | `edit.rs` | `PATCH /short-urls/{shortCode}` |
//! | `delete.rs` | `DELETE /short-urls/{shortCode}` |

use serde::Serialize;
use serde_json::{Map, Value};

use crate::web::shlink::problem::Problem;

pub mod create;
pub mod delete;
pub mod edit;
pub mod get;
pub mod list;

/// The fields of a JSON object a Shlink client sent, each taken at most
/// once by name; what is left is refused, naming it.
pub(crate) struct Fields(Map<String, Value>);

impl Fields {
    pub fn new(object: Map<String, Value>) -> Self {
        Self(object)
    }

    /// A string: absent `None`, `null` `Some(None)`.
    #[allow(clippy::option_option)]
    pub fn text(&mut self, name: &'static str) -> Result<Option<Option<String>>, Problem> {
        match self.0.remove(name) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(None)),
            Some(Value::String(text)) => Ok(Some(Some(text))),
            Some(other) => Err(Problem::invalid(
                name,
                format!("{name} must be a string or null, not {other}"),
            )),
        }
    }

    /// A yes-or-no value: absent or `null` `None`.
    pub fn flag(&mut self, name: &'static str) -> Result<Option<bool>, Problem> {
        match self.0.remove(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(flag)),
            Some(other) => Err(Problem::invalid(
                name,
                format!("{name} must be true or false, not {other}"),
            )),
        }
    }

    /// A whole number: absent `None`, `null` `Some(None)`.
    #[allow(clippy::option_option)]
    pub fn count(&mut self, name: &'static str) -> Result<Option<Option<u64>>, Problem> {
        match self.0.remove(name) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(None)),
            Some(Value::Number(number)) if number.as_u64().is_some() => Ok(Some(number.as_u64())),
            Some(other) => Err(Problem::invalid(
                name,
                format!("{name} must be a whole number or null, not {other}"),
            )),
        }
    }

    /// A list of strings: absent `None`, `null` `Some(empty)`.
    pub fn texts(&mut self, name: &'static str) -> Result<Option<Vec<String>>, Problem> {
        let refused = |other: &Value| {
            Problem::invalid(
                name,
                format!("{name} must be a list of strings, not {other}"),
            )
        };
        match self.0.remove(name) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(Vec::new())),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| refused(item))
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(other) => Err(refused(&other)),
        }
    }

    /// A field as sent, whatever it holds.
    pub fn take(&mut self, name: &str) -> Option<Value> {
        self.0.remove(name)
    }

    /// Refuses what was not taken, naming the first such field and those
    /// the route takes.
    pub fn done(self, known: &str) -> Result<(), Problem> {
        match self.0.keys().next() {
            None => Ok(()),
            Some(unknown) => Err(Problem::invalid(
                "unknown",
                format!("unknown field {unknown:?}; this route takes {known}"),
            )),
        }
    }
}

/// Shlink's pagination object.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pagination {
    pub current_page: usize,
    pub pages_count: usize,
    pub items_per_page: usize,
    pub items_in_current_page: usize,
    pub total_items: usize,
}

/// A page of `items`: page `page` (from 1) of `per_page` items, or every
/// item for `per_page` `None` (Shlink's `itemsPerPage=-1`).
pub(crate) fn page_of<T>(
    items: Vec<T>,
    page: usize,
    per_page: Option<usize>,
) -> (Vec<T>, Pagination) {
    let total = items.len();
    let (page, size) = (page.max(1), page_size(per_page, total));
    let kept: Vec<T> = items
        .into_iter()
        .skip((page - 1).saturating_mul(size))
        .take(size)
        .collect();
    let pagination = Pagination::of(total, page, per_page, kept.len());
    (kept, pagination)
}

/// Items a page holds: `per_page`, or all `total` of them for `None`.
fn page_size(per_page: Option<usize>, total: usize) -> usize {
    per_page.unwrap_or(total.max(1)).max(1)
}

impl Pagination {
    /// Page `page` (from 1) of `per_page` items (`None`: all), holding
    /// `in_page` of `total` items.
    pub fn of(total: usize, page: usize, per_page: Option<usize>, in_page: usize) -> Self {
        let size = page_size(per_page, total);
        Self {
            current_page: page.max(1),
            pages_count: total.div_ceil(size),
            items_per_page: size,
            items_in_current_page: in_page,
            total_items: total,
        }
    }
}

/// `page` and `itemsPerPage` of a query, Shlink's way: pages from 1, ten
/// items a page unless asked otherwise, `-1` for all.
pub(crate) fn paging(
    query: &crate::web::shlink::request::Query,
    default_per_page: Option<usize>,
) -> Result<(usize, Option<usize>), Problem> {
    let page = query.number("page")?.unwrap_or(1);
    let per_page = query.number("itemsPerPage")?;
    let page = usize::try_from(page)
        .ok()
        .filter(|page| *page >= 1)
        .ok_or_else(|| Problem::invalid("page", "page counts from 1"))?;
    let per_page = match per_page {
        None => default_per_page,
        Some(-1) => None,
        Some(n) => Some(usize::try_from(n).ok().filter(|n| *n >= 1).ok_or_else(|| {
            Problem::invalid("itemsPerPage", "itemsPerPage is 1 or more, or -1 for all")
        })?),
    };
    Ok((page, per_page))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_count_from_one_and_the_last_may_be_short() {
        let (items, pagination) = page_of((1..=25).collect(), 3, Some(10));
        assert_eq!(items, vec![21, 22, 23, 24, 25]);
        assert_eq!(
            (
                pagination.pages_count,
                pagination.items_in_current_page,
                pagination.total_items
            ),
            (3, 5, 25)
        );
        let (all, pagination) = page_of((1..=25).collect::<Vec<_>>(), 1, None);
        assert_eq!((all.len(), pagination.pages_count), (25, 1));
        let (none, pagination) = page_of(Vec::<u8>::new(), 1, Some(10));
        assert_eq!((none.len(), pagination.pages_count), (0, 0));
    }
}
