//! The web form: one plain HTML page that works without JavaScript, and
//! offers a copy button where JavaScript runs.

use std::fmt::Write as _;

use shortlink_core::{escape_html as escape, KeyScheme, MAX_KEY_LEN};

use crate::links::bulk::{RowOutcome, Summary, MAX_BULK_LINKS};
use crate::web::pages::campaign::{campaign_fieldset, forward_select};

/// What the page shows: the inputs as typed, and the result or the errors.
#[derive(Debug, Default)]
pub struct FormView {
    pub url: String,
    pub key: String,
    /// The campaign parameters as typed, in `UTM_NAMES`' order.
    pub utm: [String; 5],
    /// The forwarding choice as sent: `default`, `always` or `never`.
    pub forward_query: String,
    /// The domain chosen (its name); empty: the default one.
    pub domain: String,
    /// The title and tags as typed.
    pub title: String,
    pub tags: String,
    /// The domains to choose from, the default first, each with whether it
    /// forwards query strings; the choice is shown for more than one.
    pub domains: Vec<(String, bool)>,
    pub url_error: Option<String>,
    pub key_error: Option<String>,
    pub utm_error: Option<String>,
    pub forward_error: Option<String>,
    pub domain_error: Option<String>,
    /// Why the title or the tags were refused.
    pub details_error: Option<String>,
    pub general_error: Option<String>,
    pub token_error: Option<String>,
    pub outcome: Option<Outcome>,
    /// Form token, sent back with the post (against cross-site posts).
    pub csrf: String,
    /// Ask for an access token: the writer needs one to create links.
    pub ask_token: bool,
    /// What an uploaded CSV file's rows became.
    pub bulk: Option<BulkView>,
    /// Why an uploaded file was refused as a whole.
    pub bulk_error: Option<String>,
}

/// The rows of an uploaded CSV file, each with its line and outcome.
#[derive(Debug, Default)]
pub struct BulkView {
    pub summary: Summary,
    pub rows: Vec<(u64, RowOutcome)>,
}

#[derive(Debug)]
pub struct Outcome {
    pub key: String,
    /// The link's domain when it is not the default one: its QR code's
    /// address names it.
    pub domain: Option<String>,
    pub short_url: String,
    pub long_url: String,
    pub created: bool,
}

/// The look both pages share.
pub(crate) const STYLE: &str = r"
:root { color-scheme: light dark; --accent: #1d4ed8; --error: #b91c1c; --line: #8885; }
@media (prefers-color-scheme: dark) { :root { --accent: #60a5fa; --error: #f87171; } }
* { box-sizing: border-box; }
body { margin: 0; font: 1rem/1.5 system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; }
main { max-width: 38rem; margin: 0 auto; padding: 2.5rem 1.25rem; }
h1 { font-size: 1.75rem; margin: 0 0 .25rem; }
.lead { margin: 0 0 2rem; opacity: .8; }
.field { margin-bottom: 1.25rem; }
label { display: block; font-weight: 600; margin-bottom: .35rem; }
.optional { font-weight: 400; opacity: .7; }
input { width: 100%; font: inherit; padding: .7rem .8rem; border: 1px solid var(--line);
        border-radius: .5rem; background: Field; color: FieldText; }
select { font: inherit; padding: .6rem .7rem; border: 1px solid var(--line); border-radius: .5rem;
         background: Field; color: FieldText; max-width: 100%; }
details.campaign { margin-bottom: 1.25rem; }
details.campaign summary { cursor: pointer; font-weight: 600; margin-bottom: .5rem; }
fieldset { border: 1px solid var(--line); border-radius: .5rem; margin: 0; padding: .75rem 1rem 0; }
legend { padding: 0 .35rem; font-size: .9rem; opacity: .8; }
input:focus, select:focus { outline: 2px solid var(--accent); outline-offset: 1px; }
input[aria-invalid=true], select[aria-invalid=true] { border-color: var(--error); }
.hint { font-size: .875rem; opacity: .75; margin-top: .3rem; }
.error { color: var(--error); font-size: .9rem; margin-top: .35rem; }
button { font: inherit; font-weight: 600; padding: .7rem 1.4rem; border: 0; border-radius: .5rem;
         background: var(--accent); color: Canvas; cursor: pointer; }
.result { margin-top: 2rem; padding: 1.1rem 1.25rem; border: 1px solid var(--line); border-radius: .75rem; }
.result p { margin: 0 0 .5rem; }
.link-row { display: flex; flex-wrap: wrap; gap: .75rem; align-items: center; }
.qr { display: flex; flex-wrap: wrap; gap: .75rem; align-items: center; margin-top: .75rem; }
.qr img { background: #fff; border-radius: .5rem; }
.link-row a { font-size: 1.2rem; font-weight: 600; color: var(--accent); word-break: break-all; }
.copy { padding: .4rem .9rem; font-size: .9rem; background: transparent; color: var(--accent);
        border: 1px solid var(--accent); }
.target { word-break: break-all; }
.js-only { display: none; }
.js .js-only { display: inline-block; }
.nav { margin: -1.25rem 0 2rem; font-size: .95rem; }
.nav a { color: var(--accent); }
.bulk { margin-top: 3rem; padding-top: 1.5rem; border-top: 1px solid var(--line); }
h2 { font-size: 1.25rem; margin: 0 0 .5rem; }
input[type=file] { padding: .5rem; }
table { width: 100%; border-collapse: collapse; margin-top: .75rem; font-size: .9rem; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line);
         vertical-align: top; word-break: break-all; }
td.refused { color: var(--error); }
";

/// The page's one script, whose digest its `Content-Security-Policy` allows.
pub const SCRIPT: &str = r"
document.documentElement.classList.add('js');
document.addEventListener('click', function (event) {
  var button = event.target.closest('[data-copy]');
  if (!button) return;
  navigator.clipboard.writeText(button.dataset.copy).then(function () {
    button.textContent = 'Copied';
    setTimeout(function () { button.textContent = 'Copy'; }, 1500);
  }, function () { button.textContent = 'Select and copy'; });
});
";

/// The new link's title and tags, as typed.
fn details_fields(page: &mut String, view: &FormView) {
    field(
        page,
        &Field {
            name: "title",
            label: "Title <span class=\"optional\">(optional)</span>",
            kind: "text",
            value: &view.title,
            error: None,
            hint: "What the link is called in your list; left empty, its page's title is read",
            extra: "",
        },
    );
    field(
        page,
        &Field {
            name: "tags",
            label: "Tags <span class=\"optional\">(optional)</span>",
            kind: "text",
            value: &view.tags,
            error: view.details_error.as_deref(),
            hint: "Words to find the link by, separated by commas",
            extra: "",
        },
    );
}

/// The whole page for `view`.
/// The page for `view`; the custom key's hint and browser-side check
/// follow `keys`, the rules the writer checks the key against.
pub fn render(view: &FormView, keys: &KeyScheme) -> String {
    let key_hint = format!(
        "{} to {MAX_KEY_LEN} letters, digits, - or _. Leave empty for a generated key.",
        keys.min_len()
    );
    let key_extra = format!(
        " autocomplete=\"off\" spellcheck=\"false\" pattern=\"{}\"",
        keys.html_key_pattern()
    );
    let mut page = String::with_capacity(6 * 1024);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Shorten a link</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n\
         <h1>Shorten a link</h1>\n<p class=\"lead\">Paste a long URL; get a short one that \
         redirects to it.</p>\n<p class=\"nav\"><a href=\"/manage\">Manage your links</a></p>\n"
    );
    if let Some(message) = &view.general_error {
        let _ = writeln!(
            page,
            "<p class=\"error\" role=\"alert\">{}</p>",
            escape(message)
        );
    }
    let _ = writeln!(
        page,
        "<form method=\"post\" action=\"/\" novalidate>\n\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        escape(&view.csrf)
    );
    field(
        &mut page,
        &Field {
            name: "url",
            label: "Long URL",
            kind: "url",
            value: &view.url,
            error: view.url_error.as_deref(),
            hint: "Starts with http:// or https://",
            extra: " required autofocus placeholder=\"https://example.org/a/very/long/page\"",
        },
    );
    let utm = view.utm.each_ref().map(String::as_str);
    campaign_fieldset(&mut page, "", &utm, view.utm_error.as_deref());
    field(
        &mut page,
        &Field {
            name: "key",
            label: "Custom key <span class=\"optional\">(optional)</span>",
            kind: "text",
            value: &view.key,
            error: view.key_error.as_deref(),
            hint: &key_hint,
            extra: &key_extra,
        },
    );
    domain_select(&mut page, view);
    details_fields(&mut page, view);
    let domain_default = match view.domains.as_slice() {
        [(_, forwards)] => Some(*forwards),
        _ => None,
    };
    forward_select(
        &mut page,
        "forward",
        &view.forward_query,
        domain_default,
        view.forward_error.as_deref(),
    );
    if view.ask_token || view.token_error.is_some() {
        field(
            &mut page,
            &Field {
                name: "token",
                label: "Access token",
                kind: "password",
                value: "",
                error: view.token_error.as_deref(),
                hint: "This shortener creates links for holders of an access token.",
                extra: " autocomplete=\"current-password\" required",
            },
        );
    }
    page.push_str("<button type=\"submit\">Shorten</button>\n</form>\n");
    if let Some(outcome) = &view.outcome {
        result_section(&mut page, outcome);
    }
    // The token comes before the file, so that the writer checks it (and
    // the form token) before it reads the file.
    bulk_section(&mut page, view);
    let _ = write!(
        page,
        "</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n"
    );
    page
}

/// The new short link: to copy, to follow, its QR code.
fn result_section(page: &mut String, outcome: &Outcome) {
    let short = escape(&outcome.short_url);
    let status = if outcome.created {
        "Your short link is ready:"
    } else {
        "This URL already had a short link:"
    };
    let _ = write!(
        page,
        "<section class=\"result\" aria-live=\"polite\">\n<p>{status}</p>\n\
         <div class=\"link-row\"><a id=\"short-link\" href=\"{short}\">{short}</a>\
         <button type=\"button\" class=\"copy js-only\" data-copy=\"{short}\">Copy</button></div>\n\
         <p class=\"hint\">Leads to <span class=\"target\">{}</span></p>\n\
         <div class=\"qr\"><img src=\"{svg}\" width=\"160\" height=\"160\" \
         alt=\"QR code of {short}\"><a href=\"{png}\" download=\"{key}.png\">\
         Download the QR code (PNG)</a> <a href=\"{svg}\" download=\"{key}.svg\">SVG</a></div>\n\
         </section>\n",
        escape(&outcome.long_url),
        key = escape(&outcome.key),
        svg = escape(&qr_url(&outcome.key, outcome.domain.as_deref(), "svg")),
        png = escape(&qr_url(
            &outcome.key,
            outcome.domain.as_deref(),
            "png?size=512"
        )),
    );
}

/// The choice of short domain, when there is more than one: the one
/// chosen (or the default, first) selected.
fn domain_select(page: &mut String, view: &FormView) {
    if view.domains.len() < 2 {
        return;
    }
    let invalid = view.domain_error.is_some();
    let _ = write!(
        page,
        "<div class=\"field\">\n<label for=\"domain\">Short domain</label>\n\
         <select id=\"domain\" name=\"domain\" aria-describedby=\"domain-help\" \
         aria-invalid=\"{invalid}\">\n"
    );
    let chosen = view
        .domains
        .iter()
        .position(|(name, _)| name.eq_ignore_ascii_case(view.domain.trim()))
        .unwrap_or(0);
    for (index, (name, _)) in view.domains.iter().enumerate() {
        let name = escape(name);
        let selected = if index == chosen { " selected" } else { "" };
        let _ = writeln!(page, "<option value=\"{name}\"{selected}>{name}</option>");
    }
    page.push_str("</select>\n");
    match &view.domain_error {
        Some(error) => {
            let _ = writeln!(
                page,
                "<p class=\"error\" id=\"domain-help\" role=\"alert\">{}</p>",
                escape(error)
            );
        }
        None => page.push_str(
            "<p class=\"hint\" id=\"domain-help\">The short link's host; each domain \
             has keys of its own.</p>\n",
        ),
    }
    page.push_str("</div>\n");
}

/// The CSV upload, and what the last one's rows became.
fn bulk_section(page: &mut String, view: &FormView) {
    let _ = write!(
        page,
        "<section class=\"bulk\">\n<h2>Many links at once</h2>\n\
         <p class=\"hint\">A CSV file of up to {MAX_BULK_LINKS} lines <code>url,key</code> \
         (the key may be left out), or with a header naming any of url, key, expires_at, \
         expired_url and max_clicks. Each line is checked like a single link; a bad line \
         does not stop the others.</p>\n\
         <form method=\"post\" action=\"/bulk\" enctype=\"multipart/form-data\">\n\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\n",
        escape(&view.csrf)
    );
    if view.ask_token {
        let _ = write!(
            page,
            "<div class=\"field\">\n<label for=\"bulk-token\">Access token</label>\n\
             <input id=\"bulk-token\" name=\"token\" type=\"password\" value=\"\" \
             autocomplete=\"current-password\" required>\n</div>\n"
        );
    }
    field(
        page,
        &Field {
            name: "csv",
            label: "CSV file",
            kind: "file",
            value: "",
            error: view.bulk_error.as_deref(),
            hint: "One link a line.",
            extra: " accept=\".csv,text/csv,text/plain\" required",
        },
    );
    page.push_str("<button type=\"submit\">Upload and shorten</button>\n</form>\n");
    if let Some(bulk) = &view.bulk {
        let summary = &bulk.summary;
        let _ = write!(
            page,
            "<div class=\"result\" id=\"bulk-result\" aria-live=\"polite\">\n\
             <p id=\"bulk-summary\">{} created, {} already there, {} refused.</p>\n\
             <table>\n<thead><tr><th>Line</th><th>Result</th><th>Short link or reason</th></tr></thead>\n<tbody>\n",
            summary.created, summary.existing, summary.refused
        );
        for (line, outcome) in &bulk.rows {
            let (status, class, detail) = match outcome {
                RowOutcome::Created(made) => ("created", "", link_cell(&made.short_url)),
                RowOutcome::Existing(made) => ("already there", "", link_cell(&made.short_url)),
                RowOutcome::Refused(refused) => {
                    ("refused", " class=\"refused\"", escape(&refused.error))
                }
            };
            let _ = writeln!(
                page,
                "<tr><td>{line}</td><td{class}>{status}</td><td{class}>{detail}</td></tr>"
            );
        }
        page.push_str("</tbody>\n</table>\n</div>\n");
    }
    page.push_str("</section>\n");
}

fn link_cell(short_url: &str) -> String {
    let short = escape(short_url);
    format!("<a href=\"{short}\">{short}</a>")
}

/// The address of `key`'s QR code on `domain` (`None`: the default one)
/// as `kind`: `svg`, or `png` with its query.
#[must_use]
pub fn qr_url(key: &str, domain: Option<&str>, kind: &str) -> String {
    let url = format!("/api/links/{key}/qr.{kind}");
    match domain {
        Some(domain) => {
            let separator = if url.contains('?') { '&' } else { '?' };
            format!("{url}{separator}domain={domain}")
        }
        None => url,
    }
}

struct Field<'a> {
    name: &'a str,
    label: &'a str,
    kind: &'a str,
    value: &'a str,
    error: Option<&'a str>,
    hint: &'a str,
    extra: &'a str,
}

fn field(page: &mut String, f: &Field<'_>) {
    let invalid = f.error.is_some();
    let _ = write!(
        page,
        "<div class=\"field\">\n<label for=\"{name}\">{label}</label>\n\
         <input id=\"{name}\" name=\"{name}\" type=\"{kind}\" value=\"{value}\" \
         aria-invalid=\"{invalid}\" aria-describedby=\"{name}-help\"{extra}>\n",
        name = f.name,
        label = f.label,
        kind = f.kind,
        value = escape(f.value),
        extra = f.extra,
    );
    match f.error {
        Some(error) => {
            let _ = writeln!(
                page,
                "<p class=\"error\" id=\"{}-help\" role=\"alert\">{}</p>",
                f.name,
                escape(error)
            );
        }
        None => {
            let _ = writeln!(
                page,
                "<p class=\"hint\" id=\"{}-help\">{}</p>",
                f.name, f.hint
            );
        }
    }
    page.push_str("</div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_values_are_kept_and_escaped() {
        let page = render(
            &FormView {
                url: "https://x/\"><script>".into(),
                key: "k'ey".into(),
                url_error: Some("bad <url>".into()),
                ..FormView::default()
            },
            &KeyScheme::default(),
        );
        assert!(page.contains("value=\"https://x/&quot;&gt;&lt;script&gt;\""));
        assert!(page.contains("value=\"k&#39;ey\""));
        assert!(
            page.contains("<p class=\"error\" id=\"url-help\" role=\"alert\">bad &lt;url&gt;</p>")
        );
        assert!(page.contains("aria-invalid=\"true\""));
        assert!(!page.contains("name=\"token\""));
        assert!(!page.contains("<script>\"") && !page.contains("\"><script>"));
    }

    #[test]
    fn the_key_hint_follows_the_key_rules() {
        let page = render(&FormView::default(), &KeyScheme::default());
        assert!(page.contains("3 to 64 letters"), "{page}");
        assert!(page.contains("pattern=\"[A-Za-z0-9_\\-]{3,64}\""), "{page}");
        // Split 4 leaves every key a field of at least one character.
        let page = render(&FormView::default(), &KeyScheme::new("short:", 4).unwrap());
        assert!(page.contains("5 to 64 letters"), "{page}");
        assert!(page.contains("pattern=\"[A-Za-z0-9_\\-]{5,64}\""), "{page}");
    }

    #[test]
    fn the_form_carries_its_token_and_asks_for_an_access_token() {
        let page = render(
            &FormView {
                csrf: "abc-_1".into(),
                ask_token: true,
                ..FormView::default()
            },
            &KeyScheme::default(),
        );
        assert!(page.contains("<input type=\"hidden\" name=\"csrf\" value=\"abc-_1\">"));
        assert!(page.contains("name=\"token\" type=\"password\" value=\"\""));
    }

    #[test]
    fn the_result_links_to_the_short_url() {
        let page = render(
            &FormView {
                outcome: Some(Outcome {
                    key: "abcd".into(),
                    domain: None,
                    short_url: "http://s/l/abcd".into(),
                    long_url: "https://example.org/?a=1&b=2".into(),
                    created: true,
                }),
                ..FormView::default()
            },
            &KeyScheme::default(),
        );
        assert!(page.contains("<a id=\"short-link\" href=\"http://s/l/abcd\">http://s/l/abcd</a>"));
        assert!(page.contains("data-copy=\"http://s/l/abcd\""));
        assert!(page.contains("https://example.org/?a=1&amp;b=2"));
        assert!(page.contains("<img src=\"/api/links/abcd/qr.svg\""));
        assert!(page.contains("href=\"/api/links/abcd/qr.png?size=512\" download=\"abcd.png\""));
    }

    #[test]
    fn the_domain_choice_shows_with_two_domains_and_keeps_the_chosen_one() {
        let one = FormView {
            domains: vec![("s.example".into(), true)],
            ..FormView::default()
        };
        let page = render(&one, &KeyScheme::default());
        assert!(!page.contains("name=\"domain\""), "{page}");
        assert!(page.contains("As the domain does (forward)"), "{page}");
        let two = FormView {
            domains: vec![("s.example".into(), false), ("go.example".into(), true)],
            ..FormView::default()
        };
        let page = render(&two, &KeyScheme::default());
        assert!(page.contains("<option value=\"s.example\" selected>s.example</option>"));
        assert!(page.contains("<option value=\"go.example\">go.example</option>"));
        assert!(page.contains("<option value=\"default\" selected>As the domain does</option>"));
        let chosen = FormView {
            domain: "GO.example".into(),
            ..two
        };
        let page = render(&chosen, &KeyScheme::default());
        assert!(page.contains("<option value=\"go.example\" selected>go.example</option>"));
    }

    #[test]
    fn the_qr_code_of_another_domain_names_it() {
        let page = render(
            &FormView {
                outcome: Some(Outcome {
                    key: "abcd".into(),
                    domain: Some("go.example".into()),
                    short_url: "https://go.example/abcd".into(),
                    long_url: "https://example.org/".into(),
                    created: true,
                }),
                ..FormView::default()
            },
            &KeyScheme::default(),
        );
        assert!(page.contains("<img src=\"/api/links/abcd/qr.svg?domain=go.example\""));
        assert!(page.contains("href=\"/api/links/abcd/qr.png?size=512&amp;domain=go.example\""));
    }
}
