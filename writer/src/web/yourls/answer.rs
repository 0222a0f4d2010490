//! An answer to a YOURLS tool, in the format it asked for (`format`): XML
//! by default, as YOURLS answers, so that a tool written for YOURLS and
//! sending no format reads what it expects; `json`, `jsonp` (with a
//! checked `callback`) and `simple` (one line of text). The HTTP status is
//! YOURLS': the answer's `statusCode`, else its `errorCode`, else 200.

use std::fmt::Write as _;

use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use serde_json::{Map, Value};

use crate::links::shortener::ShortenError;

/// The fields of an answer, in order, and its `simple` text.
#[derive(Debug, Default)]
pub struct Answer {
    fields: Vec<(String, Value)>,
    simple: String,
}

impl Answer {
    pub fn new(simple: impl Into<String>) -> Self {
        Self {
            fields: Vec::new(),
            simple: simple.into(),
        }
    }

    /// YOURLS' error answer: `errorCode` and `message`; its text the
    /// message.
    pub fn error(code: &str, message: &str) -> Self {
        Self::new(message)
            .with("errorCode", code)
            .with("message", message)
    }

    /// A failure of the links area: its status, and its message (logged
    /// when it is this side's).
    pub fn failure(error: &ShortenError) -> Self {
        let (code, _, message) = error.answer();
        Self::error(&code.status().to_string(), &message)
    }

    /// YOURLS' failed `shorturl`: `status` fail, its `code`, `message`,
    /// `errorCode` and `statusCode`.
    pub fn failed(code: &str, message: &str, status: &str) -> Self {
        Self::new("")
            .with("status", "fail")
            .with("code", code)
            .with("message", message)
            .with("errorCode", status)
            .with("statusCode", status)
    }

    pub fn set_simple(&mut self, simple: impl Into<String>) {
        self.simple = simple.into();
    }

    #[must_use]
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.fields.push((name.to_owned(), value.into()));
        self
    }

    fn status(&self) -> StatusCode {
        let code = |name: &str| {
            self.fields
                .iter()
                .find(|(field, _)| field == name)
                .map(|(_, value)| match value {
                    Value::String(text) => text.parse::<u16>().ok(),
                    Value::Number(number) => number.as_u64().and_then(|n| u16::try_from(n).ok()),
                    _ => None,
                })
        };
        code("statusCode")
            .flatten()
            .or_else(|| code("errorCode").flatten())
            .and_then(|code| StatusCode::from_u16(code).ok())
            .unwrap_or(StatusCode::OK)
    }

    /// The answer in `format` (`xml` when none), naming `callback`, the
    /// JSONP function the tool asked for.
    pub fn respond(mut self, format: Option<&str>, callback: Option<&str>) -> HttpResponse {
        if let Some(callback) = callback {
            self = self.with("callback", callback);
        }
        let status = self.status();
        let object: Map<String, Value> = self.fields.iter().cloned().collect();
        match format.unwrap_or("xml") {
            "json" => HttpResponse::build(status)
                .content_type("application/json; charset=utf-8")
                .body(Value::Object(object).to_string()),
            "jsonp" => {
                let callback = callback.unwrap_or("");
                if callback_is_safe(callback) {
                    HttpResponse::build(status)
                        .content_type("application/javascript; charset=utf-8")
                        .body(format!("{callback}({})", Value::Object(object)))
                } else {
                    HttpResponse::BadRequest()
                        .content_type("application/javascript; charset=utf-8")
                        .body(r#"{"errorCode":"400","error":"Invalid callback parameter"}"#)
                }
            }
            "xml" => {
                let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<root>");
                for (name, value) in &self.fields {
                    write_xml(&mut xml, name, value);
                }
                xml.push_str("</root>\n");
                HttpResponse::build(status)
                    .content_type("application/xml; charset=utf-8")
                    .body(xml)
            }
            // YOURLS answers any other format as simple text.
            _ => HttpResponse::build(status)
                .content_type("text/plain; charset=utf-8")
                .body(self.simple),
        }
    }
}

/// A JSONP callback YOURLS takes: letters, digits, `_`, `$` and `.`, and
/// no `\uXXXX`-like escape anywhere.
fn callback_is_safe(callback: &str) -> bool {
    let bytes = callback.as_bytes();
    let escape = bytes
        .windows(5)
        .any(|w| w[0] == b'u' && w[1..].iter().all(u8::is_ascii_hexdigit));
    !callback.is_empty()
        && !escape
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"_$.".contains(b))
}

/// `value` as YOURLS writes it in XML: an element named `name` (spaces as
/// `_`), objects nested, text escaped, control characters left out.
/// Written here rather than with an XML crate: it is this one shape, and
/// YOURLS' quirks (no attributes, `<e/>` for an empty object) are its.
fn write_xml(out: &mut String, name: &str, value: &Value) {
    let name = name.replace(' ', "_");
    match value {
        Value::Object(fields) if fields.is_empty() => {
            out.push('<');
            out.push_str(&name);
            out.push_str("/>");
        }
        Value::Object(fields) => {
            let _ = write!(out, "<{name}>");
            for (inner, value) in fields {
                write_xml(out, inner, value);
            }
            let _ = write!(out, "</{name}>");
        }
        Value::Array(items) => {
            for item in items {
                write_xml(out, &name, item);
            }
        }
        scalar => {
            let text = match scalar {
                Value::String(text) => text.clone(),
                Value::Bool(true) => "1".to_owned(),
                Value::Bool(false) | Value::Null => String::new(),
                other => other.to_string(),
            };
            let _ = write!(out, "<{name}>");
            for c in text.chars() {
                match c {
                    '&' => out.push_str("&amp;"),
                    '<' => out.push_str("&lt;"),
                    '>' => out.push_str("&gt;"),
                    c if c.is_control() && !matches!(c, '\n' | '\r') => {}
                    c => out.push(c),
                }
            }
            let _ = write!(out, "</{name}>");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn xml_nests_objects_and_escapes_text() {
        let mut xml = String::new();
        write_xml(&mut xml, "db-stats", &json!({"total clicks": "a<b&c\u{1}"}));
        assert_eq!(
            xml,
            "<db-stats><total_clicks>a&lt;b&amp;c</total_clicks></db-stats>"
        );
        let mut empty = String::new();
        write_xml(&mut empty, "links", &json!({}));
        assert_eq!(empty, "<links/>");
    }

    #[test]
    fn callbacks_are_names_without_escapes() {
        for good in ["cb", "jQuery_123", "a.b$c"] {
            assert!(callback_is_safe(good), "{good}");
        }
        for bad in ["", "alert(1)", "a b", "menu1234", "x\\u0041"] {
            assert!(!callback_is_safe(bad), "{bad}");
        }
    }
}
