//! Campaign (`utm_*`) parameters the form and the management page add to a
//! target, and the choice of forwarding a click's query string.
//!
//! The parameters are merged into the target by the rule Varnish applies
//! to a forwarded query ([`shortlink_core::query::forward_query`]): a
//! parameter the target already names takes the new value, and the
//! target's fragment stays last. The management page's script does the
//! same in the browser (`mergeQuery` in `manage.js`); both encode each
//! value as `encodeURIComponent` does, so both write the same URL.

use std::fmt::Write as _;

use shortlink_core::escape_html as escape;
use shortlink_core::query::{forward_query, NotForwarded, MAX_FORWARDED_QUERY};

/// The campaign parameters, in the order they are added.
pub const UTM_NAMES: [&str; 5] = [
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "utm_term",
    "utm_content",
];

/// What each parameter says, as its input's hint.
const UTM_HINTS: [&str; 5] = [
    "Where the traffic comes from: newsletter, twitter",
    "The channel: email, social, cpc",
    "The campaign's name: spring_sale",
    "Paid search keywords",
    "Tells apart links in the same message: header, footer",
];

/// `url` with the non-empty `values` (named by [`UTM_NAMES`], in that
/// order) added, each value trimmed and percent-encoded; `url` itself when
/// every value is empty. The error says what to do.
pub fn with_campaign(url: &str, values: &[&str; 5]) -> Result<String, String> {
    let mut query = String::new();
    for (name, value) in UTM_NAMES.iter().zip(values) {
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        if !query.is_empty() {
            query.push('&');
        }
        query.push_str(name);
        query.push('=');
        encode_component(&mut query, value);
    }
    if query.is_empty() {
        return Ok(url.to_owned());
    }
    forward_query(url.trim(), &query).map_err(|error| match error {
        NotForwarded::QueryTooLong => format!(
            "the campaign parameters take over {MAX_FORWARDED_QUERY} bytes once encoded; \
             shorten them"
        ),
        NotForwarded::TargetTooLong => {
            format!("{error}; shorten the URL or the campaign parameters")
        }
    })
}

/// Appends `text` encoded as JavaScript's `encodeURIComponent` does: every
/// byte but ASCII letters, digits and `-_.!~*'()` as `%XX`.
fn encode_component(out: &mut String, text: &str) {
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
}

/// The forwarding choices: the value a form sends, what the stored link
/// says (`None`: its domain's default), and the label.
pub const FORWARD_CHOICES: [(&str, Option<bool>, &str); 3] = [
    ("default", None, "As the domain does"),
    ("always", Some(true), "Always"),
    ("never", Some(false), "Never"),
];

/// The stored choice a form's `forward_query` value names; empty is the
/// domain's default. The error says what to do.
pub fn forward_choice(value: &str) -> Result<Option<bool>, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    FORWARD_CHOICES
        .iter()
        .find(|(name, _, _)| *name == value)
        .map(|(_, stored, _)| *stored)
        .ok_or_else(|| {
            format!("forward_query {value:?} is not a choice: send default, always or never")
        })
}

/// The fieldset of campaign parameters, folded in a `<details>` that opens
/// when one of them is set or wrong. Its inputs are named like the
/// parameters and identified `{prefix}utm_…`.
pub fn campaign_fieldset(page: &mut String, prefix: &str, values: &[&str; 5], error: Option<&str>) {
    let open = if error.is_some() || values.iter().any(|v| !v.trim().is_empty()) {
        " open"
    } else {
        ""
    };
    let _ = write!(
        page,
        "<details class=\"campaign\" id=\"{prefix}campaign\" data-max-query=\"{MAX_FORWARDED_QUERY}\"{open}>\n\
         <summary>Campaign parameters <span class=\"optional\">(optional)</span></summary>\n\
         <fieldset aria-describedby=\"{prefix}campaign-help\">\n\
         <legend>Added to the long URL</legend>\n"
    );
    for ((name, value), hint) in UTM_NAMES.iter().zip(values).zip(UTM_HINTS) {
        let _ = write!(
            page,
            "<div class=\"field\">\n<label for=\"{prefix}{name}\">{name}</label>\n\
             <input id=\"{prefix}{name}\" name=\"{name}\" type=\"text\" value=\"{}\" \
             autocomplete=\"off\" spellcheck=\"false\" placeholder=\"{hint}\">\n</div>\n",
            escape(value)
        );
    }
    let (class, role, text) = match error {
        Some(error) => ("error", " role=\"alert\"", escape(error)),
        None => (
            "hint",
            "",
            "Each one filled in is added to the URL's query; one the URL already has takes \
             the new value."
                .to_owned(),
        ),
    };
    let _ = write!(
        page,
        "<p class=\"{class}\" id=\"{prefix}campaign-help\"{role}>{text}</p>\n\
         </fieldset>\n</details>\n"
    );
}

/// The forwarding choice as a labelled `<select>` named `forward_query`
/// with `selected` chosen; `domain_default` says what the default does,
/// when one domain's default applies.
pub fn forward_select(
    page: &mut String,
    id: &str,
    selected: &str,
    domain_default: Option<bool>,
    error: Option<&str>,
) {
    let _ = write!(
        page,
        "<div class=\"field\">\n<label for=\"{id}\">Forward the query string of each click \
         <span class=\"optional\">(optional)</span></label>\n\
         <select id=\"{id}\" name=\"forward_query\" aria-describedby=\"{id}-help\" \
         aria-invalid=\"{}\">\n",
        error.is_some()
    );
    for (value, _, label) in FORWARD_CHOICES {
        let chosen = if value == selected || (selected.is_empty() && value == "default") {
            " selected"
        } else {
            ""
        };
        let label = match (value, domain_default) {
            ("default", Some(true)) => "As the domain does (forward)",
            ("default", Some(false)) => "As the domain does (do not forward)",
            _ => label,
        };
        let _ = writeln!(page, "<option value=\"{value}\"{chosen}>{label}</option>");
    }
    let hint = "A click on the short link with ?utm_source=… or any other query \
                string passes it on to the long URL.";
    match error {
        Some(error) => {
            let _ = writeln!(
                page,
                "</select>\n<p class=\"error\" id=\"{id}-help\" role=\"alert\">{}</p>\n</div>",
                escape(error)
            );
        }
        None => {
            let _ = writeln!(
                page,
                "</select>\n<p class=\"hint\" id=\"{id}-help\" data-hint=\"{hint}\">{hint}</p>\n</div>"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_in_parameters_are_added_in_order_and_encoded() {
        let merged = with_campaign(
            " https://example.org/p?a=1&utm_source=old#top ",
            &["mail", "", " spring sale ", "", "a&b=c/é"],
        )
        .unwrap();
        assert_eq!(
            merged,
            "https://example.org/p?a=1&utm_source=mail&utm_campaign=spring%20sale\
             &utm_content=a%26b%3Dc%2F%C3%A9#top"
        );
    }

    #[test]
    fn without_parameters_the_url_is_as_typed() {
        assert_eq!(with_campaign("not a url", &[""; 5]).unwrap(), "not a url");
    }

    #[test]
    fn too_long_parameters_say_what_to_do() {
        let long = "x".repeat(MAX_FORWARDED_QUERY);
        let error = with_campaign("https://e.org/", &[&long, "", "", "", ""]).unwrap_err();
        assert!(error.contains("shorten them"), "{error}");
    }

    #[test]
    fn forward_choices_are_read() {
        assert_eq!(forward_choice(""), Ok(None));
        assert_eq!(forward_choice("default"), Ok(None));
        assert_eq!(forward_choice("always"), Ok(Some(true)));
        assert_eq!(forward_choice("never"), Ok(Some(false)));
        assert!(forward_choice("yes").unwrap_err().contains("always"));
    }

    #[test]
    fn the_fieldset_opens_when_a_value_is_set() {
        let mut page = String::new();
        campaign_fieldset(&mut page, "", &[""; 5], None);
        assert!(!page.contains(" open>"), "{page}");
        assert!(page.contains("<label for=\"utm_term\">utm_term</label>"));
        let mut page = String::new();
        campaign_fieldset(&mut page, "edit-", &["", "\"x", "", "", ""], None);
        assert!(page.contains(" open>"), "{page}");
        assert!(page.contains("id=\"edit-utm_medium\" name=\"utm_medium\""));
        assert!(page.contains("value=\"&quot;x\""));
    }

    #[test]
    fn the_select_keeps_the_choice() {
        let mut page = String::new();
        forward_select(&mut page, "forward", "never", Some(true), None);
        assert!(page.contains("<option value=\"never\" selected>Never</option>"));
        assert!(page.contains("As the domain does (forward)"));
        let mut page = String::new();
        forward_select(&mut page, "forward", "", None, Some("bad"));
        assert!(page.contains("<option value=\"default\" selected>"));
        assert!(page.contains("role=\"alert\">bad</p>"));
    }
}
