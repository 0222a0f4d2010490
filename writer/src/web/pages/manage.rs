//! The management page: sign in with an access token, list and search the
//! links it may change, edit their target and expiry, delete them after a
//! confirmation. The page is static; its script does everything through
//! the JSON API with the token as a bearer, so it can never do more than
//! the API lets that token do. The page holds the short domains' names
//! (with more than one, each link shows its domain and the list can be
//! narrowed to one); the links themselves come from the API.

use std::fmt::Write as _;

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use shortlink_core::escape_html as escape;

use super::campaign::{campaign_fieldset, forward_select};
use super::page::STYLE;
use crate::links::shortener::Shortener;
use crate::links::validate::Field;
use crate::web::html_page;

const MANAGE_STYLE: &str = r"
main { max-width: 48rem; }
.toolbar { display: flex; flex-wrap: wrap; gap: .75rem; align-items: center; justify-content: space-between;
           margin-bottom: 1rem; }
#search-form { display: flex; gap: .5rem; flex: 1 1 20rem; }
#search-form input { flex: 1; }
.who { font-size: .95rem; opacity: .8; }
button.secondary { background: transparent; color: var(--accent); border: 1px solid var(--accent); }
button.danger { background: var(--error); color: Canvas; }
button:disabled { opacity: .5; cursor: wait; }
#link-list { list-style: none; margin: 0; padding: 0; }
.link { padding: .9rem 0; border-bottom: 1px solid var(--line); }
.link-head { display: flex; gap: .6rem; align-items: baseline; }
.short { font-weight: 600; color: var(--accent); word-break: break-all; }
.badge { font-size: .75rem; padding: .05rem .45rem; border-radius: .4rem; border: 1px solid var(--error);
         color: var(--error); }
.meta { font-size: .85rem; opacity: .75; }
.row-actions { display: flex; gap: .5rem; margin-top: .5rem; }
.row-actions button { padding: .3rem .8rem; font-size: .9rem; }
.row-actions .stats-link, .row-actions .qr-link { align-self: center; margin-left: .25rem; color: var(--accent); font-size: .9rem; }
#status { min-height: 1.5rem; }
.notice { opacity: .85; }
dialog { border: 1px solid var(--line); border-radius: .75rem; padding: 1.5rem; width: min(34rem, 92vw);
         background: Canvas; color: CanvasText; }
dialog::backdrop { background: #0006; }
dialog h2 { margin-top: 0; font-size: 1.25rem; word-break: break-all; }
.actions { display: flex; gap: .75rem; justify-content: flex-end; margin-top: 1rem; }
.inline { display: flex; gap: .5rem; }
.inline button { white-space: nowrap; }
.toolbar select { flex: 0 1 auto; }
.tag { font-size: .8rem; padding: .05rem .45rem; border-radius: .8rem; border: 1px solid var(--line);
  background: none; color: inherit; cursor: pointer; margin-right: .25rem; }
.title { font-weight: 600; }
.domain { font-size: .8rem; padding: .05rem .45rem; border-radius: .4rem; border: 1px solid var(--line); }
.rules-badge { font-size: .75rem; padding: .05rem .45rem; border-radius: .4rem; border: 1px solid var(--accent);
               color: var(--accent); }
details.targets { font-size: .85rem; margin-top: .3rem; }
.target-list { margin: .3rem 0 0; padding-left: 1.2rem; word-break: break-all; }
#edit-targeting { margin: 1rem 0; }
#edit-targeting summary { font-weight: 600; cursor: pointer; }
fieldset.rule, fieldset.split-target { border: 1px solid var(--line); border-radius: .5rem; margin: .6rem 0;
                                       padding: .5rem .75rem; display: grid; gap: .4rem; }
.rule-part { display: grid; grid-template-columns: 9rem 1fr; gap: .5rem; align-items: center; font-size: .9rem; }
.rule-devices { display: flex; flex-wrap: wrap; gap: .75rem; font-size: .9rem; }
.rule-devices > span { width: 8.5rem; }
.remove-row { justify-self: end; padding: .2rem .7rem; font-size: .85rem; }
";

/// A short domain as the page knows it: its name, and whether its links
/// forward query strings unless they say otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageDomain {
    pub name: String,
    pub forwards: bool,
}

/// The page's one script, whose digest its `Content-Security-Policy`
/// allows: the list and dialogs, then the rules editor they call.
pub const SCRIPT: &str = concat!(include_str!("manage.js"), include_str!("manage_rules.js"));

/// The page, the same for everyone, for the short `domains` (the default
/// one first).
pub fn render(domains: &[PageDomain]) -> String {
    let mut page = String::with_capacity(16 * 1024);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Manage your links</title>\n<style>{STYLE}{MANAGE_STYLE}</style>\n</head>\n<body>\n<main>\n\
         <h1>Manage your links</h1>\n\
         <p class=\"lead\">Change where your short links lead and when they expire, or take them \
         down. Changes reach every visitor on their next click.</p>\n\
         <p class=\"nav\"><a href=\"/\">Shorten a link</a></p>\n\
         <noscript><p class=\"error\">This page needs JavaScript. Without it, use the JSON API \
         under /api/links or the shortlink command.</p></noscript>\n"
    );
    page.push_str(
        "<section id=\"sign-in\" hidden>\n<form id=\"sign-in-form\" novalidate>\n\
         <div class=\"field\">\n<label for=\"token\">Access token</label>\n\
         <input id=\"token\" type=\"password\" autocomplete=\"current-password\" required \
         aria-describedby=\"token-help\">\n<p class=\"hint\" id=\"token-help\"></p>\n</div>\n\
         <button type=\"submit\">Sign in</button>\n</form>\n</section>\n",
    );
    manager_section(&mut page, domains);
    page.push_str(
        "<dialog id=\"edit-dialog\" aria-labelledby=\"edit-title\">\n\
         <form id=\"edit-form\" novalidate>\n\
         <h2 id=\"edit-title\">Edit <span id=\"edit-key\"></span></h2>\n",
    );
    edit_field(
        &mut page,
        Field::Url,
        "edit-url",
        "Long URL",
        "url",
        "Where the short link leads; starts with http:// or https://",
    );
    details_fields(&mut page);
    campaign_fieldset(&mut page, "edit-", &[""; 5], None);
    // The default's label is the edited link's domain's: the script sets it.
    forward_select(&mut page, "edit-forward", "default", None, None);
    let _ = write!(
        page,
        "<div class=\"field\">\n<label for=\"edit-expires\">Expires <span class=\"optional\">\
         (optional, your local time)</span></label>\n<div class=\"inline\">\
         <input id=\"edit-expires\" name=\"{}\" type=\"datetime-local\" \
         aria-describedby=\"edit-expires-help\">\
         <button type=\"button\" id=\"edit-clear-expiry\" class=\"secondary\">Never</button></div>\n\
         <p class=\"hint\" id=\"edit-expires-help\" data-hint=\"After this moment the link answers \
         410 Gone, or leads to the URL below.\"></p>\n</div>\n",
        Field::ExpiresAt.name()
    );
    edit_field(
        &mut page,
        Field::ExpiredUrl,
        "edit-expired-url",
        "Once expired, lead to <span class=\"optional\">(optional)</span>",
        "url",
        "Leave empty to answer 410 Gone after the expiry.",
    );
    edit_field(
        &mut page,
        Field::MaxClicks,
        "edit-max-clicks",
        "Click limit <span class=\"optional\">(optional)</span>",
        "number",
        "After this many clicks by people (bots are not counted) the link answers as if \
         expired. Leave empty for no limit.",
    );
    targeting_editor(&mut page);
    page.push_str(
        "<p class=\"error\" id=\"edit-error\" role=\"alert\" hidden></p>\n\
         <div class=\"actions\"><button type=\"button\" id=\"edit-cancel\" class=\"secondary\">\
         Cancel</button><button type=\"submit\" id=\"edit-save\">Save</button></div>\n\
         </form>\n</dialog>\n",
    );
    page.push_str(
        "<dialog id=\"delete-dialog\" aria-labelledby=\"delete-title\">\n\
         <form id=\"delete-form\">\n<h2 id=\"delete-title\">Delete <span id=\"delete-key\"></span>?</h2>\n\
         <p>From the next click it answers <strong>410 Gone</strong>. The key is never handed \
         out again, so a printed link never leads somewhere else. This cannot be undone.</p>\n\
         <div class=\"actions\"><button type=\"button\" id=\"delete-cancel\" class=\"secondary\">\
         Keep it</button><button type=\"submit\" id=\"delete-confirm\" class=\"danger\">Delete\
         </button></div>\n</form>\n</dialog>\n",
    );
    let _ = write!(
        page,
        "</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
    );
    page
}

/// The list of links with its toolbar: search, the domain filter (with
/// more than one domain), who is signed in. The section names the domains
/// for the script: all of them, and those whose links forward queries.
fn manager_section(page: &mut String, domains: &[PageDomain]) {
    let names = |all: bool| {
        domains
            .iter()
            .filter(|domain| all || domain.forwards)
            .map(|domain| escape(&domain.name))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = write!(
        page,
        "<section id=\"manager\" data-domains=\"{}\" data-forwarding=\"{}\" hidden>\n\
         <div class=\"toolbar\">\n\
         <form id=\"search-form\" role=\"search\">\n\
         <input id=\"search\" type=\"search\" placeholder=\"Key, URL, title or tag\" \
         aria-label=\"Search your links by key, URL, title or tag\">\n",
        names(true),
        names(false)
    );
    if domains.len() > 1 {
        page.push_str(
            "<select id=\"domain-filter\" aria-label=\"Show the links of one short domain\">\n\
             <option value=\"\" selected>All domains</option>\n",
        );
        for domain in domains {
            let name = escape(&domain.name);
            let _ = writeln!(page, "<option value=\"{name}\">{name}</option>");
        }
        page.push_str("</select>\n");
    }
    page.push_str(
        "<button type=\"submit\" class=\"secondary\">Search</button>\n</form>\n\
         <div><span class=\"who\">Signed in as <span id=\"who\"></span></span> \
         <button type=\"button\" id=\"sign-out\" class=\"secondary\">Sign out</button></div>\n</div>\n\
         <p class=\"who\">YOURLS signature, for YOURLS' tools: <code id=\"yourls-signature\"></code></p>\n\
         <p id=\"tag-filter\" hidden>Tagged <span id=\"tag-filter-name\" class=\"tag\"></span> \
         <button type=\"button\" id=\"tag-filter-clear\" class=\"secondary\">Show every tag</button></p>\n\
         <p id=\"status\" role=\"status\" aria-live=\"polite\"></p>\n\
         <ul id=\"link-list\"></ul>\n\
         <p><button type=\"button\" id=\"more\" class=\"secondary\" hidden>Show more</button></p>\n\
         </section>\n",
    );
}

/// The rules and split of the edited link: the script fills the lists
/// with a fieldset per rule and per split target.
fn targeting_editor(page: &mut String) {
    page.push_str(
        "<details id=\"edit-targeting\">\n<summary>Rules and split \
         <span class=\"optional\">(optional)</span></summary>\n\
         <p class=\"hint\">A rule sends the visitors it matches (all its conditions hold) to its \
         own target; the first rule that matches wins. Visitors no rule took are spread over the \
         split targets by weight, each visitor kept on one; without a split, they go to the long \
         URL.</p>\n\
         <div id=\"rules-list\"></div>\n\
         <p class=\"hint\" id=\"edit-rules-help\" data-hint=\"Device, country (DE, AT), \
         language (de, pt-BR), a query parameter (ref=mail) and a time window: give at least \
         one.\"></p>\n\
         <button type=\"button\" id=\"add-rule\" class=\"secondary\">Add a rule</button>\n\
         <div id=\"split-list\"></div>\n\
         <p class=\"hint\" id=\"edit-split-help\" data-hint=\"Weights 0 to 1000; they must add \
         up to more than 0.\"></p>\n\
         <button type=\"button\" id=\"add-split\" class=\"secondary\">Add a split target</button>\n\
         </details>\n",
    );
}

/// A labelled input of the edit form, named like the API field it sends so
/// the API's 422 lands next to it.
fn edit_field(page: &mut String, field: Field, id: &str, label: &str, kind: &str, hint: &str) {
    let _ = write!(
        page,
        "<div class=\"field\">\n<label for=\"{id}\">{label}</label>\n\
         <input id=\"{id}\" name=\"{name}\" type=\"{kind}\" autocomplete=\"off\" \
         spellcheck=\"false\" aria-describedby=\"{id}-help\">\n\
         <p class=\"hint\" id=\"{id}-help\" data-hint=\"{hint}\"></p>\n</div>\n",
        name = field.name(),
    );
}

/// The edited link's title and tags.
fn details_fields(page: &mut String) {
    edit_field(
        page,
        Field::Title,
        "edit-link-title",
        "Title <span class=\"optional\">(optional)</span>",
        "text",
        "What the link is called in listings.",
    );
    edit_field(
        page,
        Field::Tags,
        "edit-tags",
        "Tags <span class=\"optional\">(optional, separated by commas)</span>",
        "text",
        "Words the link is found by: click one in the list to see its links.",
    );
}

/// The management page; it holds no data and asks the API for everything.
#[utoipa::path(
    get,
    path = "/manage",
    tag = "pages",
    responses((status = 200, description = "The management page", content_type = "text/html"))
)]
pub(crate) async fn manage_page(shortener: web::Data<Shortener>) -> HttpResponse {
    let domains: Vec<PageDomain> = shortener
        .settings
        .domains
        .iter()
        .map(|domain| PageDomain {
            name: domain.name.clone(),
            forwards: domain.forward_query,
        })
        .collect();
    html_page(StatusCode::OK, Some(SCRIPT)).body(render(&domains))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_domains() -> Vec<PageDomain> {
        vec![
            PageDomain {
                name: "s.example".into(),
                forwards: false,
            },
            PageDomain {
                name: "go.example".into(),
                forwards: true,
            },
        ]
    }

    #[test]
    fn every_edit_input_is_named_like_its_api_field() {
        let page = render(&two_domains());
        for field in [
            Field::Url,
            Field::ExpiresAt,
            Field::ExpiredUrl,
            Field::MaxClicks,
            Field::ForwardQuery,
        ] {
            assert!(
                page.contains(&format!("name=\"{}\"", field.name())),
                "{}",
                field.name()
            );
        }
    }

    #[test]
    fn the_script_finds_every_element_it_names() {
        let page = render(&two_domains());
        let script = SCRIPT;
        let mut rest = script;
        let mut checked = 0;
        while let Some(at) = rest.find("$('") {
            rest = &rest[at + 3..];
            let id = &rest[..rest.find('\'').unwrap()];
            assert!(page.contains(&format!("id=\"{id}\"")), "no element #{id}");
            checked += 1;
        }
        assert!(checked > 20, "{checked}");
    }

    #[test]
    fn the_domain_filter_shows_with_two_domains_only() {
        let page = render(&two_domains());
        assert!(page.contains("<option value=\"go.example\">go.example</option>"));
        assert!(
            page.contains("data-domains=\"s.example go.example\" data-forwarding=\"go.example\"")
        );
        let one = &two_domains()[..1];
        let page = render(one);
        assert!(!page.contains("id=\"domain-filter\""), "{page}");
        assert!(page.contains("data-domains=\"s.example\" data-forwarding=\"\""));
    }
}
