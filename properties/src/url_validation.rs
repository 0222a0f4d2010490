//! Long URLs as users submit them, through the writer's `normalize_url`
//! and the shared checks on what may become a redirect.
//!
//! The normalized URL is what gets stored and hashed into a key, so it must
//! be a safe redirect target, and normalizing it again must change nothing:
//! the same URL must always land on the same key.

use std::sync::LazyLock;

use shortlink_core::{check_redirect_target, digest_key, escape_html, MAX_TARGET_LEN};
use shortlink_writer::config::Settings;
use shortlink_writer::links::validate::normalize_url;
use url::Url;

/// The defaults, and variants with other bases and length limits. Written as
/// TOML, as an operator would, so that fields added later keep defaults.
static SETTINGS: LazyLock<Vec<Settings>> = LazyLock::new(|| {
    [
        "",
        "public_base_url = \"https://s.example/go.to/\"\nmax_url_length = 8192\nmax_body_bytes = 32768",
        "public_base_url = \"http://[::1]:8080/l/\"\nmax_url_length = 64",
    ]
    .iter()
    .map(|text| {
        let config = toml::from_str(text).expect("a valid configuration");
        Settings::new(config).expect("valid settings")
    })
    .collect()
});

/// Checks one input: its longest valid UTF-8 prefix, as a submitted URL.
///
/// # Panics
///
/// When the input breaks one of the properties above: the panic says which.
pub fn check(data: &[u8]) {
    let Some(input) = crate::decode::<&str>(data) else {
        return;
    };
    for settings in SETTINGS.iter() {
        check_normalized(input, settings);
    }
    check_target(input);
    check_escaping(input);
}

fn check_normalized(input: &str, settings: &Settings) {
    let normalized = match normalize_url(input, settings) {
        Ok(normalized) => normalized.as_str().to_owned(),
        Err(error) => {
            assert_eq!(error.field.name(), "url");
            assert!(!error.message.is_empty());
            return;
        }
    };
    assert_eq!(
        check_redirect_target(&normalized),
        Ok(()),
        "{input:?} became {normalized:?}"
    );
    assert!(
        !normalized
            .chars()
            .any(|c| c.is_whitespace() || c.is_control()),
        "{input:?} became {normalized:?}"
    );
    assert!(
        normalized.starts_with("http://") || normalized.starts_with("https://"),
        "{input:?} became {normalized:?}"
    );
    assert!(normalized.len() <= settings.config.max_url_length);
    let url = Url::parse(&normalized).expect("the normalized URL parses");
    let base = &settings.public_base;
    assert!(
        url.host() != base.host() || url.port_or_known_default() != base.port_or_known_default(),
        "{input:?} became {normalized:?}, a link to the shortener itself"
    );
    let again = normalize_url(&normalized, settings).map(|url| url.as_str().to_owned());
    assert_eq!(
        again.as_ref(),
        Ok(&normalized),
        "{input:?} became {normalized:?}, which normalizes differently: \
         the same URL would get two keys"
    );
    assert_eq!(digest_key(&normalized), digest_key(&again.unwrap()));
}

/// What `check_redirect_target` accepts is sent as a `Location` header, so
/// it must be visible ASCII with an http(s) scheme, and a browser must not
/// read it as a URL without a host.
fn check_target(input: &str) {
    if check_redirect_target(input).is_err() {
        return;
    }
    assert!(input.len() <= MAX_TARGET_LEN);
    assert!(input.bytes().all(|b| b.is_ascii_graphic() && b != b'\\'));
    let lower = input.to_ascii_lowercase();
    assert!(lower.starts_with("http://") || lower.starts_with("https://"));
    if let Ok(url) = Url::parse(input) {
        assert!(matches!(url.scheme(), "http" | "https"));
        assert!(
            url.host_str().is_some_and(|h| !h.is_empty()),
            "{input:?} passes as a redirect target, but a browser reads it without a host"
        );
    }
}

/// Pages show submitted URLs: escaped text must hold no markup and decode
/// back to exactly what was submitted.
fn check_escaping(input: &str) {
    let escaped = escape_html(input);
    assert!(!escaped.contains(['<', '>', '"', '\'']), "{escaped:?}");
    let mut decoded = String::with_capacity(input.len());
    let mut rest = escaped.as_str();
    while let Some(at) = rest.find('&') {
        decoded.push_str(&rest[..at]);
        rest = &rest[at..];
        let (entity, c) = [
            ("&amp;", '&'),
            ("&lt;", '<'),
            ("&gt;", '>'),
            ("&quot;", '"'),
            ("&#39;", '\''),
        ]
        .into_iter()
        .find(|(entity, _)| rest.starts_with(entity))
        .unwrap_or_else(|| panic!("a bare '&' in {escaped:?}"));
        decoded.push(c);
        rest = &rest[entity.len()..];
    }
    decoded.push_str(rest);
    assert_eq!(decoded, input);
}
