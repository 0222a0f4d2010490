//! The visit log through the native API: a link's newest visits, a page at
//! a time, each as Varnish saw it.

use serde_json::json;

use crate::clicks::{click, read_once, FIREFOX, IPHONE};
use crate::common::{api, create, ensure, Suite, ALICE_TOKEN, BOB_TOKEN};

pub fn a_links_visits_are_read_newest_first_a_page_at_a_time(suite: &Suite) -> Result<(), String> {
    let url = "https://example.org/visits/native";
    let key = create(suite, Some(ALICE_TOKEN), &json!({ "url": url }))?;
    click(
        suite,
        &key,
        FIREFOX,
        Some("https://News.Example.com/item?id=1"),
    )?;
    click(suite, &key, IPHONE, None)?;
    click(suite, &key, "curl/8.5.0", None)?;
    let path = format!("/api/links/{key}/visits");
    let all = read_once(suite, &path, ALICE_TOKEN, |body| body["total"] == 3)?;
    let agents: Vec<&str> = (all["visits"].as_array().into_iter().flatten())
        .filter_map(|visit| visit["user_agent"].as_str())
        .collect();
    ensure(agents == ["curl/8.5.0", IPHONE, FIREFOX], || {
        format!("newest first: {all}")
    })?;
    let oldest = &all["visits"][2];
    ensure(
        oldest["bot"] == false
            && oldest["referrer"] == "news.example.com"
            && oldest["country"] == "NL"
            && oldest["redirect_url"] == url
            && all["visits"][0]["bot"] == true
            && all["domain"].is_string(),
        || format!("visits: {all}"),
    )?;
    let page = api(
        suite,
        "GET",
        &format!("{path}?page=2&per_page=1&exclude_bots=true"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    ensure(
        page.status == 200
            && page.body["total"] == 2
            && page.body["visits"].as_array().map(Vec::len) == Some(1)
            && page.body["visits"][0]["user_agent"] == FIREFOX,
        || {
            format!(
                "second page of people's visits: {} {}",
                page.status, page.body
            )
        },
    )?;
    let later = api(
        suite,
        "GET",
        &format!("{path}?since=4102444800"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    ensure(later.body["total"] == 0, || {
        format!("since 2100: {}", later.body)
    })?;
    // Only the owner and admins read them, and bad paging is refused.
    let bob = api(suite, "GET", &path, Some(BOB_TOKEN), None, None)?;
    ensure(bob.status == 403, || {
        format!("another's token: {}", bob.status)
    })?;
    for query in ["page=0", "per_page=0", "per_page=1001", "colour=red"] {
        let refused = api(
            suite,
            "GET",
            &format!("{path}?{query}"),
            Some(ALICE_TOKEN),
            None,
            None,
        )?;
        ensure(refused.status == 422 || refused.status == 400, || {
            format!("?{query}: {} {}", refused.status, refused.body)
        })?;
    }
    Ok(())
}
