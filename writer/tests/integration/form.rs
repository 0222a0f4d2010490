//! The web form's answers, submitted as a browser would.

use crate::common::{ensure, post_form, Suite};

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
