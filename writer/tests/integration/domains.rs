//! The short domains through the native API, and a domain's redirects for
//! visits to no link set while the writer runs, followed through Varnish.
//! Only the default domain's bare path is changed here: the Shlink SDK's
//! tests change the other domain's, and visit unknown keys on this one.

use serde_json::json;

use crate::common::{api, ensure, varnish_get, Suite, ADMIN_TOKEN, ALICE_TOKEN, GO_DOMAIN};

const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

pub fn a_domains_bare_path_redirect_is_set_and_cleared_through_the_native_api(
    suite: &Suite,
) -> Result<(), String> {
    let listed = api(suite, "GET", "/api/domains", Some(ALICE_TOKEN), None, None)?;
    let names: Vec<&str> = (listed.body["domains"].as_array().into_iter().flatten())
        .filter_map(|domain| domain["domain"].as_str())
        .collect();
    ensure(
        listed.status == 200
            && names == ["127.0.0.1", GO_DOMAIN]
            && listed.body["domains"][0]["is_default"] == true,
        || format!("domains: {} {}", listed.status, listed.body),
    )?;
    let path = "/api/domains/127.0.0.1/redirects";
    let home = "https://example.org/native/home";
    // They answer for everyone's visits: a plain token may not set them.
    let plain = api(
        suite,
        "PATCH",
        path,
        Some(ALICE_TOKEN),
        None,
        Some(&json!({ "base_url_redirect": home })),
    )?;
    ensure(
        plain.status == 403 && plain.body["code"] == "forbidden",
        || format!("a plain token: {} {}", plain.status, plain.body),
    )?;
    let set = api(
        suite,
        "PATCH",
        path,
        Some(ADMIN_TOKEN),
        None,
        Some(&json!({ "base_url_redirect": home })),
    )?;
    ensure(
        set.status == 200
            && set.body["redirects"]["base_url_redirect"] == home
            && set.body["domain"] == "127.0.0.1",
        || format!("set: {} {}", set.status, set.body),
    )?;
    // Live in Varnish when the writer answered.
    let bare = varnish_get(suite, "127.0.0.1", "/l/?from=card", FIREFOX)?;
    ensure(bare == (302, Some(home.to_owned())), || {
        format!("the bare path: {bare:?}")
    })?;
    // A bad redirect or an unknown field changes nothing.
    for (body, field) in [
        (
            json!({ "regular_404_redirect": "javascript:alert(1)" }),
            "regular_404_redirect",
        ),
        (
            json!({ "base_url_redirect": null, "colour": "red" }),
            "unknown",
        ),
    ] {
        let refused = api(suite, "PATCH", path, Some(ADMIN_TOKEN), None, Some(&body))?;
        ensure(
            refused.status == 422 && refused.body["field"] == field,
            || format!("{body}: {} {}", refused.status, refused.body),
        )?;
    }
    let still = varnish_get(suite, "127.0.0.1", "/l/", FIREFOX)?;
    ensure(still == (302, Some(home.to_owned())), || {
        format!("after refusals: {still:?}")
    })?;
    let unknown = api(
        suite,
        "PATCH",
        "/api/domains/nowhere.test/redirects",
        Some(ADMIN_TOKEN),
        None,
        Some(&json!({ "base_url_redirect": home })),
    )?;
    ensure(
        unknown.status == 422 && unknown.body["code"] == "unknown-domain",
        || format!("an unknown domain: {} {}", unknown.status, unknown.body),
    )?;
    // Cleared: the configuration's (none) answers again.
    let cleared = api(
        suite,
        "PATCH",
        path,
        Some(ADMIN_TOKEN),
        None,
        Some(&json!({ "base_url_redirect": null })),
    )?;
    ensure(
        cleared.status == 200 && cleared.body["redirects"].get("base_url_redirect").is_none(),
        || format!("cleared: {} {}", cleared.status, cleared.body),
    )?;
    let gone = varnish_get(suite, "127.0.0.1", "/l/", FIREFOX)?;
    ensure(gone.0 == 404, || format!("after clearing: {gone:?}"))
}
