//! The web form's answers, submitted as a browser would.

use crate::common::{api, ensure, post_form, Suite, ALICE_TOKEN};

pub fn submit_and_errors(suite: &Suite) -> Result<(), String> {
    let agent = Suite::agent();
    let page = agent
        .get(&suite.writer_url)
        .call()
        .map_err(|e| e.to_string())?
        .into_body()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    ensure(page.contains("<form method=\"post\" action=\"/\""), || {
        page.clone()
    })?;
    let (status, page) = post_form(
        &agent,
        &suite.writer_url,
        &[("url", "notaurl"), ("key", "")],
        &[],
    )?;
    ensure(status == 422, || format!("invalid URL answered {status}"))?;
    ensure(page.contains("value=\"notaurl\""), || {
        "the typed URL was lost".into()
    })?;
    ensure(
        page.contains("id=\"url-help\" role=\"alert\">the URL must be absolute"),
        || "no error next to the URL field".into(),
    )
}

/// A link made through the form with an access token belongs to that
/// token, as one made through the API does: its holder can change it.
pub fn form_links_belong_to_their_token(suite: &Suite) -> Result<(), String> {
    let (status, page) = post_form(
        &Suite::agent(),
        &suite.writer_url,
        &[
            ("url", "https://example.org/form/owned"),
            ("key", ""),
            ("token", ALICE_TOKEN),
        ],
        &[],
    )?;
    ensure(status == 201, || format!("the form answered {status}"))?;
    let key = page
        .split_once("id=\"short-link\" href=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .and_then(|(url, _)| url.rsplit('/').next())
        .ok_or("no short link on the result page")?;
    let link = api(
        suite,
        "GET",
        &format!("/api/links/{key}"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    ensure(link.body["owner"] == "alice", || {
        format!("the form's link belongs to {}", link.body["owner"])
    })?;
    let change = serde_json::json!({ "url": "https://example.org/form/owned-changed" });
    let path = format!("/api/links/{key}");
    let edit = api(
        suite,
        "PATCH",
        &path,
        Some(ALICE_TOKEN),
        None,
        Some(&change),
    )?;
    ensure(edit.status == 200, || {
        format!("alice's edit of her form link: {}", edit.status)
    })
}
