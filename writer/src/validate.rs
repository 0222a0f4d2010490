//! Checks on what users submit, before anything is written.

use std::fmt;

use shortlink_keys::check_redirect_target;
use url::Url;

use crate::config::Settings;

/// Why a submitted URL or key was refused. The text tells the user what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Which input is wrong: `url` or `key`.
    pub field: &'static str,
    pub message: String,
}

impl Invalid {
    fn url(message: impl Into<String>) -> Self {
        Self {
            field: "url",
            message: message.into(),
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Invalid {}

/// The URL to store: `input` checked and in its canonical form (lower-case
/// host, non-ASCII percent-encoded), so equal URLs get equal keys.
pub fn normalize_url(input: &str, settings: &Settings) -> Result<String, Invalid> {
    let max = settings.config.max_url_length;
    if input.is_empty() {
        return Err(Invalid::url("enter the long URL to shorten"));
    }
    if input.len() > max {
        return Err(Invalid::url(format!(
            "the URL is {} bytes long; the limit is {max}",
            input.len()
        )));
    }
    if let Some(c) = input.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(Invalid::url(format!(
            "the URL contains {}; remove it or percent-encode it",
            describe(c)
        )));
    }
    let url = Url::parse(input).map_err(|e| match e {
        url::ParseError::RelativeUrlWithoutBase => {
            Invalid::url("the URL must be absolute, starting with http:// or https://")
        }
        other => Invalid::url(format!("the URL is not valid: {other}")),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Invalid::url(format!(
            "only http:// and https:// URLs can be shortened, not {}:",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(Invalid::url("the URL has no host name"));
    }
    let base = &settings.public_base;
    if url.host() == base.host() && url.port_or_known_default() == base.port_or_known_default() {
        return Err(Invalid::url(
            "the URL points at this shortener itself; shorten the final destination instead",
        ));
    }
    let normalized = String::from(url);
    if normalized.len() > max {
        return Err(Invalid::url(format!(
            "the URL is {} bytes long once encoded; the limit is {max}",
            normalized.len()
        )));
    }
    check_redirect_target(&normalized).map_err(|e| Invalid::url(format!("the {e}")))?;
    Ok(normalized)
}

/// A custom key, checked against the shared key rules.
pub fn check_custom_key(key: &str, settings: &Settings) -> Result<(), Invalid> {
    settings.scheme.check(key).map_err(|e| Invalid {
        field: "key",
        message: format!("the {e}"),
    })
}

fn describe(c: char) -> String {
    match c {
        ' ' => "a space".into(),
        '\t' => "a tab".into(),
        '\r' | '\n' => "a line break".into(),
        c => format!("the character U+{:04X}", u32::from(c)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn settings() -> Settings {
        Settings::new(Config::default()).unwrap()
    }

    #[test]
    fn canonical_forms() {
        let s = settings();
        assert_eq!(
            normalize_url("https://Example.ORG", &s).unwrap(),
            "https://example.org/"
        );
        assert_eq!(
            normalize_url("https://example.org/caf\u{e9}?q=\u{e9}", &s).unwrap(),
            "https://example.org/caf%C3%A9?q=%C3%A9"
        );
        assert_eq!(
            normalize_url("https://b\u{fc}cher.example/", &s).unwrap(),
            "https://xn--bcher-kva.example/"
        );
        assert_eq!(
            normalize_url("http://canyoucrackit.co.uk/soyoudidit.asp", &s).unwrap(),
            "http://canyoucrackit.co.uk/soyoudidit.asp"
        );
    }

    #[test]
    fn every_rule_has_a_message() {
        let s = settings();
        let long = format!("https://example.org/{}", "a".repeat(2048));
        for (input, expected) in [
            ("", "enter the long URL"),
            (long.as_str(), "the limit is 2048"),
            (" https://example.org/", "a space"),
            ("https://example.org/ ", "a space"),
            ("https://example.org/\tx", "a tab"),
            ("https://example.org/\r\nX: y", "a line break"),
            ("https://example.org/\u{7f}", "U+007F"),
            ("https://exa mple.org/", "a space"),
            ("example.org/page", "must be absolute"),
            ("/relative", "must be absolute"),
            ("javascript:alert(1)", "not javascript:"),
            ("ftp://example.org/", "not ftp:"),
            ("data:text/html,hi", "not data:"),
            ("http://", "not valid"),
            ("https://[::1", "not valid"),
            ("https://example.org:99999/", "not valid"),
            ("http://127.0.0.1:6081/l/abcd", "this shortener itself"),
        ] {
            let error = normalize_url(input, &s).unwrap_err();
            assert_eq!(error.field, "url");
            assert!(error.message.contains(expected), "{input:?}: {error}");
        }
    }

    #[test]
    fn other_ports_of_the_same_host_are_fine() {
        let s = settings();
        assert!(normalize_url("http://127.0.0.1:9000/page", &s).is_ok());
    }

    #[test]
    fn custom_keys_follow_the_shared_rules() {
        let s = settings();
        assert!(check_custom_key("my-talk_2026", &s).is_ok());
        for key in ["ab", "has space", "slash/y", "dot.y", &"k".repeat(65)] {
            let error = check_custom_key(key, &s).unwrap_err();
            assert_eq!(error.field, "key");
        }
    }
}
