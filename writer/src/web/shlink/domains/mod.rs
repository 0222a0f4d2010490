//! The short domains, one endpoint a file, and their redirects for visits
//! to no link in Shlink's names.
//!
//! | file | what |
//! | --- | --- |
//! | `list.rs` | `GET /domains`: the domains the key may use, with their redirects |
//! | `set_redirects.rs` | `PATCH /domains/redirects`: a domain's redirects set |

use serde_json::json;
use shortlink_core::{NotFoundKind, NotFoundRedirects};

use crate::web::shlink::problem::shlink_redirect_name;

pub mod list;
pub mod set_redirects;

/// Shlink's `NotFoundRedirects` object.
fn redirects_json(redirects: &NotFoundRedirects) -> serde_json::Value {
    let mut object = serde_json::Map::new();
    for kind in NotFoundKind::ALL {
        object.insert(
            shlink_redirect_name(kind).to_owned(),
            json!(redirects.get(kind).map(ToString::to_string)),
        );
    }
    serde_json::Value::Object(object)
}
