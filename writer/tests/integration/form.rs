//! The web form's answers, submitted as a browser would.

use shortlink_core::Stored;

use crate::common::{api, ensure, post_form, Suite, ALICE_TOKEN, DOMAINS, GO_DOMAIN, SHOP_TOKEN};

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

/// The value Redis holds for the default domain's `key`.
fn stored_value(suite: &Suite, key: &str) -> Result<Option<String>, String> {
    suite
        .redis
        .query(&["HGET", &format!("short:{}", &key[..2]), &key[2..]])
}

/// Campaign parameters typed into the form are added to the long URL by
/// the rule Varnish forwards a query with (a parameter the URL names takes
/// the new value, the fragment stays last), and the forwarding choice is
/// stored as the link's `?+` or `?-` word, or none for the domain's default.
pub fn campaign_parameters_and_forwarding(suite: &Suite) -> Result<(), String> {
    let agent = Suite::agent();
    let url = "https://example.org/form/campaign?page=2&utm_source=old#reviews";
    let merged = "https://example.org/form/campaign?page=2&utm_source=newsletter\
                  &utm_campaign=spring%20sale&utm_content=a%26b#reviews";
    for (key, choice, forward) in [
        ("form-utm-always", "always", Some(true)),
        ("form-utm-never", "never", Some(false)),
        ("form-utm-default", "default", None),
    ] {
        let (status, page) = post_form(
            &agent,
            &suite.writer_url,
            &[
                ("url", url),
                ("key", key),
                ("utm_source", "newsletter"),
                ("utm_medium", ""),
                ("utm_campaign", " spring sale "),
                ("utm_term", ""),
                ("utm_content", "a&b"),
                ("forward_query", choice),
                ("token", ALICE_TOKEN),
            ],
            &[],
        )?;
        ensure(status == 201, || {
            format!("{choice}: the form answered {status}: {page}")
        })?;
        ensure(page.contains(&merged.replace('&', "&amp;")), || {
            format!("{choice}: the result page does not lead to {merged}: {page}")
        })?;
        let value = stored_value(suite, key)?.ok_or("the form stored nothing")?;
        let word = match forward {
            Some(true) => " ?+",
            Some(false) => " ?-",
            None => "",
        };
        let stored = match Stored::parse(&value) {
            Ok(Stored::Link(record)) => record,
            other => return Err(format!("{choice}: stored {value:?}: {other:?}")),
        };
        ensure(
            stored.url.to_string() == merged
                && stored.forward_query == forward
                && value.ends_with(&format!("@alice{word}")),
            || format!("{choice}: stored {value:?}, not {merged} @alice{word}"),
        )?;
    }
    Ok(())
}

/// A forwarding choice the form does not offer, and campaign parameters
/// too long to forward, are refused next to their inputs, with what was
/// typed kept, and store nothing.
pub fn campaign_and_forwarding_errors(suite: &Suite) -> Result<(), String> {
    let agent = Suite::agent();
    let (status, page) = post_form(
        &agent,
        &suite.writer_url,
        &[
            ("url", "https://example.org/form/forward-bad"),
            ("key", "form-fwd-bad"),
            ("utm_source", "kept"),
            ("forward_query", "sometimes"),
            ("token", ALICE_TOKEN),
        ],
        &[],
    )?;
    ensure(status == 422, || format!("a bad choice answered {status}"))?;
    ensure(
        page.contains("id=\"forward-help\" role=\"alert\">forward_query")
            && page.contains("value=\"kept\"")
            && page.contains("<details class=\"campaign\" id=\"campaign\""),
        || format!("no error next to the choice, or the typed values lost: {page}"),
    )?;
    let long = "x".repeat(shortlink_core::query::MAX_FORWARDED_QUERY);
    let (status, page) = post_form(
        &agent,
        &suite.writer_url,
        &[
            ("url", "https://example.org/form/utm-long"),
            ("key", "form-utm-long"),
            ("utm_term", &long),
            ("token", ALICE_TOKEN),
        ],
        &[],
    )?;
    ensure(status == 422, || {
        format!("a long campaign answered {status}")
    })?;
    ensure(
        page.contains("id=\"campaign-help\" role=\"alert\">the campaign parameters"),
        || format!("no error next to the campaign parameters: {page}"),
    )?;
    for key in ["form-fwd-bad", "form-utm-long"] {
        let stored = stored_value(suite, key)?;
        ensure(stored.is_none(), || {
            format!("a refused form stored {stored:?}")
        })?;
    }
    Ok(())
}

/// With two domains the form offers both, the default one chosen; a link
/// made on the other domain is stored in that domain's key space and
/// shown with its short URL there. A token limited to that domain is
/// refused on the default one, and an unknown domain is named, each next
/// to the choice.
pub fn form_links_on_another_domain(suite: &Suite) -> Result<(), String> {
    let agent = Suite::agent();
    let page = agent
        .get(&suite.writer_url)
        .call()
        .map_err(|e| e.to_string())?
        .into_body()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    ensure(
        page.contains(&format!(
            "<option value=\"{0}\" selected>{0}</option>",
            DOMAINS[0]
        )) && page.contains(&format!("<option value=\"{GO_DOMAIN}\">")),
        || format!("the form offers no choice of domain: {page}"),
    )?;
    let url = "https://example.org/form/on-go";
    let post = |domain: &str, token: &str| {
        post_form(
            &agent,
            &suite.writer_url,
            &[
                ("url", url),
                ("key", "form-on-go"),
                ("domain", domain),
                ("token", token),
            ],
            &[],
        )
    };
    let (status, page) = post(GO_DOMAIN, ALICE_TOKEN)?;
    ensure(status == 201, || {
        format!("the form answered {status}: {page}")
    })?;
    let short = format!("http://{GO_DOMAIN}:{}/form-on-go", suite.varnish.port);
    ensure(
        page.contains(&format!("id=\"short-link\" href=\"{short}\""))
            && page.contains("qr.svg?domain=go.test"),
        || format!("the result does not show {short}: {page}"),
    )?;
    let on_go = api(
        suite,
        "GET",
        &format!("/api/links/form-on-go?domain={GO_DOMAIN}"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    ensure(
        on_go.body["url"] == url && on_go.body["domain"] == GO_DOMAIN,
        || format!("the link on {GO_DOMAIN}: {}", on_go.body),
    )?;
    ensure(stored_value(suite, "form-on-go")?.is_none(), || {
        "the link landed on the default domain too".into()
    })?;
    let (status, page) = post(DOMAINS[0], SHOP_TOKEN)?;
    ensure(
        status == 403 && page.contains("id=\"domain-help\" role=\"alert\">this access token"),
        || format!("a token limited to {GO_DOMAIN} on the default domain: {status} {page}"),
    )?;
    let (status, page) = post("elsewhere.test", ALICE_TOKEN)?;
    ensure(
        status == 422
            && page.contains("id=\"domain-help\" role=\"alert\">")
            && page.contains("elsewhere.test"),
        || format!("an unknown domain: {status} {page}"),
    )
}

/// The form's title and tags are the link's; a bad tag is refused on the
/// page, next to the tags, and stores nothing.
pub fn form_links_carry_a_title_and_tags(suite: &Suite) -> Result<(), String> {
    let (status, page) = post_form(
        &Suite::agent(),
        &suite.writer_url,
        &[
            ("url", "https://example.org/form/titled"),
            ("key", ""),
            ("title", "Spring sale"),
            ("tags", "spring, sale ,,"),
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
    ensure(
        link.body["title"] == "Spring sale"
            && link.body["tags"] == serde_json::json!(["spring", "sale"]),
        || format!("the form's link: {}", link.body),
    )?;
    let long_tag = "x".repeat(65);
    let (status, page) = post_form(
        &Suite::agent(),
        &suite.writer_url,
        &[
            ("url", "https://example.org/form/badly-tagged"),
            ("key", ""),
            ("tags", long_tag.as_str()),
            ("token", ALICE_TOKEN),
        ],
        &[],
    )?;
    ensure(status == 422 && page.contains("is not allowed"), || {
        format!("a bad tag: {status}")
    })?;
    let listed = api(
        suite,
        "GET",
        "/api/links?search=badly-tagged",
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    ensure(listed.body["links"] == serde_json::json!([]), || {
        format!("a refused form stored {}", listed.body)
    })
}
