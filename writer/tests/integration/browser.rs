//! The web form in a real headless Chromium: fill it, submit it, read the
//! short link, follow it through Varnish, and land on the test's own page.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use test_support::{free_port, wait_for_port};

use serde_json::json;

use crate::clicks::{click as click_through_varnish, stats_once, FIREFOX, IPHONE};
use crate::common::{
    api, create, ensure, get, Suite, ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, CROSS_SITE_URL, DOMAINS,
    GO_DOMAIN,
};
use shortlink_core::query::forward_query;

struct ChromeDriver(Child);

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn form_to_landing_page(suite: &Suite) -> Result<(), String> {
    let screenshot = suite.dir.join("form.png");
    in_chromium(suite, "form", |client| {
        form_steps(suite, client, &screenshot)
    })
}

/// Runs `steps` in a headless Chromium of its own (driver, profile), and
/// closes it whatever they answer.
pub(crate) fn in_chromium<F, Fut>(suite: &Suite, name: &str, steps: F) -> Result<(), String>
where
    F: FnOnce(fantoccini::Client) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let port = free_port()?;
    let driver = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .arg(format!(
            "--log-path={}",
            suite.dir.join(format!("chromedriver-{name}.log")).display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(ChromeDriver)
        .map_err(|e| format!("cannot start chromedriver (make test installs it): {e}"))?;
    wait_for_port(port, Duration::from_secs(20))?;
    let profile = suite.dir.join(format!("chromium-profile-{name}"));
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(async {
            let client = open_session(port, &profile).await?;
            let mut outcome = steps(client.clone()).await;
            // Whatever the steps did, no page of the writer broke its own
            // script policy (the console says what it refused).
            if outcome.is_ok() {
                outcome = policy_violations(&client).await.and_then(|refused| {
                    ensure(refused.is_empty(), || {
                        format!("the browser refused something by policy: {refused:?}")
                    })
                });
            }
            let _ = client.close().await;
            outcome
        });
    drop(driver);
    result
}

async fn open_session(port: u16, profile: &Path) -> Result<fantoccini::Client, String> {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                "--window-size=420,900",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    // The console, which says what a Content-Security-Policy refused.
    capabilities.insert(
        "goog:loggingPrefs".into(),
        serde_json::json!({ "browser": "ALL" }),
    );
    ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .map_err(|e| format!("cannot open a Chromium session: {e}"))
}

async fn form_steps(
    suite: &Suite,
    client: fantoccini::Client,
    screenshot: &Path,
) -> Result<(), String> {
    let client = &client;
    let fail = |what: &str| {
        let what = what.to_owned();
        move |e: fantoccini::error::CmdError| format!("{what}: {e}")
    };
    client
        .goto(&suite.writer_url)
        .await
        .map_err(fail("open the form"))?;

    // A wrong URL first: the error shows next to the field, the text stays.
    submit_url(client, "not a url").await?;
    let error = wait_for(client, Locator::Css("#url-help.error"))
        .await?
        .text()
        .await
        .map_err(fail("read the error"))?;
    if !error.contains("space") {
        return Err(format!("unexpected error text {error:?}"));
    }
    let kept = client
        .find(Locator::Id("url"))
        .await
        .map_err(fail("find the URL field"))?
        .prop("value")
        .await
        .map_err(fail("read the field"))?;
    if kept.as_deref() != Some("not a url") {
        return Err(format!("the typed URL was not kept: {kept:?}"));
    }

    // Then the real one, with campaign parameters (folded away until
    // opened) and the choice never to forward a click's query string.
    click(client, "#campaign summary").await?;
    type_into(client, "#utm_source", "newsletter").await?;
    type_into(client, "#utm_campaign", "spring sale").await?;
    click(client, "#forward option[value=never]").await?;
    submit_url(client, &suite.landing_url).await?;
    let link = wait_for(client, Locator::Id("short-link")).await?;
    let short = link.text().await.map_err(fail("read the short link"))?;
    let copy_visible = client
        .find(Locator::Css("button.copy"))
        .await
        .map_err(fail("find the copy button"))?
        .is_displayed()
        .await
        .map_err(fail("check the copy button"))?;
    if !copy_visible {
        return Err("the copy button is hidden although JavaScript runs".into());
    }
    if let Ok(png) = client.screenshot().await {
        let _ = std::fs::write(screenshot, png);
    }
    if !short.starts_with(&format!("{}/l/", suite.varnish.base_url())) {
        return Err(format!("the short link {short:?} is not served by Varnish"));
    }
    // Its QR code is drawn, with a link to download it.
    wait_js(
        client,
        "(() => { const img = document.querySelector('.qr img'); \
           return img && img.complete && img.naturalWidth > 0; })() && \
         document.querySelector('.qr a[download]').getAttribute('href').endsWith('qr.png?size=512')",
        "the QR code on the result page",
    )
    .await?;

    // Follow it: Varnish redirects, Chromium lands on the test's page.
    link.click().await.map_err(fail("follow the short link"))?;
    let heading = wait_for(client, Locator::Id("landed"))
        .await?
        .text()
        .await
        .map_err(fail("read the target page"))?;
    let url = client.current_url().await.map_err(fail("read the URL"))?;
    let campaign = format!(
        "{}?utm_source=newsletter&utm_campaign=spring%20sale",
        suite.landing_url
    );
    if heading != "You landed" || url.as_str() != campaign {
        return Err(format!(
            "landed on {url} with {heading:?}, not on {campaign}"
        ));
    }
    let key = short.rsplit('/').next().unwrap_or_default();
    let stored: Option<String> =
        suite
            .redis
            .query(&["HGET", &format!("short:{}", &key[..2]), &key[2..]])?;
    if stored.as_deref() != Some(&format!("{campaign} ?-")) {
        return Err(format!("the form stored {stored:?}, not {campaign} ?-"));
    }

    cross_site_post_is_refused(suite, client).await
}

/// A page on another origin submits the form by script: refused, nothing
/// stored.
async fn cross_site_post_is_refused(
    suite: &Suite,
    client: &fantoccini::Client,
) -> Result<(), String> {
    let fail = |what: &str| {
        let what = what.to_owned();
        move |e: fantoccini::error::CmdError| format!("{what}: {e}")
    };
    let attack = suite.landing_url.replace("/welcome", "/attack");
    client
        .goto(&attack)
        .await
        .map_err(fail("open the hostile page"))?;
    let alert = wait_for(client, Locator::Css("p.error[role=alert]"))
        .await?
        .text()
        .await
        .map_err(fail("read the refusal"))?;
    if !alert.contains("another site") {
        return Err(format!("the cross-site post was answered with {alert:?}"));
    }
    let key = shortlink_core::digest_key(CROSS_SITE_URL);
    let stored: Option<String> =
        suite
            .redis
            .query(&["HGET", &format!("short:{}", &key[..2]), &key[2..4]])?;
    if stored.is_some() {
        return Err(format!("the cross-site post stored {stored:?}"));
    }
    Ok(())
}

/// Replaces the URL field's text with `url` and submits the form.
async fn submit_url(client: &fantoccini::Client, url: &str) -> Result<(), String> {
    let field = client
        .find(Locator::Id("url"))
        .await
        .map_err(|e| format!("find the URL field: {e}"))?;
    field
        .clear()
        .await
        .map_err(|e| format!("clear the URL field: {e}"))?;
    field
        .send_keys(url)
        .await
        .map_err(|e| format!("type the URL: {e}"))?;
    client
        .find(Locator::Css("button[type=submit]"))
        .await
        .map_err(|e| format!("find the submit button: {e}"))?
        .click()
        .await
        .map_err(|e| format!("submit: {e}"))
}

async fn wait_for(
    client: &fantoccini::Client,
    locator: Locator<'_>,
) -> Result<fantoccini::elements::Element, String> {
    match client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(locator)
        .await
    {
        Ok(element) => Ok(element),
        Err(error) => Err(format!(
            "wait for {locator:?}: {error}; {}",
            page_state(client).await
        )),
    }
}

/// Where the browser is and what its page says, for a failure's message.
async fn page_state(client: &fantoccini::Client) -> String {
    let url = client
        .current_url()
        .await
        .map_or_else(|e| e.to_string(), |url| url.to_string());
    let said = client
        .execute(
            "return (document.getElementById('status') || document.body).textContent",
            vec![],
        )
        .await
        .map_or_else(|e| e.to_string(), |said| said.to_string());
    format!("at {url} the page says {said}")
}

/// The management page in Chromium, as its user meets it. A visitor first
/// clicks a short link, so the browser has seen the old redirect; the page
/// then edits that link, and the same browser's next click must reach the
/// new target (neither Varnish nor the browser's cache may keep the old
/// one). Delete asks first, and the deleted link answers 410.
pub fn management_page_changes_reach_a_browser_that_clicked_before(
    suite: &Suite,
) -> Result<(), String> {
    let page = |path: &str| suite.landing_url.replace("/welcome", path);
    let case = ManageCase {
        suite,
        edited: create(
            suite,
            Some(ALICE_TOKEN),
            &json!({
                "url": page("/manage-before"),
                "title": "Before the change",
                "tags": ["manage-spring", "manage-sale"],
            }),
        )?,
        deleted: create(
            suite,
            Some(ALICE_TOKEN),
            &json!({ "url": page("/manage-doomed") }),
        )?,
        bobs: create(
            suite,
            Some(BOB_TOKEN),
            &json!({ "url": page("/manage-bob") }),
        )?,
        on_go: create(
            suite,
            Some(ALICE_TOKEN),
            &json!({ "url": page("/manage-go?ref=home#top"), "domain": GO_DOMAIN }),
        )?,
        before: page("/manage-before"),
        after: page("/manage-after"),
        theirs: page("/manage-theirs"),
    };
    let case = &case;
    in_chromium(suite, "manage", |client| async move {
        let client = &client;
        // The visitor's first click, before any change.
        click_link(client, &suite.landing_url, &case.short(&case.edited)).await?;
        landed_on(client, &case.before).await?;
        case.sign_in(client).await?;
        case.list_and_search(client).await?;
        case.domains_forwarding_and_campaign(client).await?;
        case.merge_rule_is_the_cores(client).await?;
        case.edit_target(client).await?;
        // The visitor's next click, from the same page, reaches the new
        // target: the browser did not keep the old redirect.
        click_link(client, &suite.landing_url, &case.short(&case.edited)).await?;
        landed_on(client, &case.after).await?;
        case.edit_expiry_and_click_limit(client).await?;
        if let Ok(png) = client.screenshot().await {
            let _ = std::fs::write(suite.dir.join("manage.png"), png);
        }
        case.delete(client).await?;
        case.sign_out(client).await
    })?;
    let (status, _) = get(&Suite::agent(), &case.short(&case.deleted))?;
    ensure(status == 410, || {
        format!("the deleted link answers {status}")
    })
}

/// A link's statistics page, reached from the management page: charts
/// of its clicks by day and hour, and its referrers, countries and devices.
pub fn statistics_page_draws_the_clicks(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/browser/stats" }),
    )?;
    for _ in 0..2 {
        click_through_varnish(suite, &key, FIREFOX, Some("https://news.example.com/a"))?;
    }
    click_through_varnish(suite, &key, IPHONE, None)?;
    stats_once(suite, &key, ALICE_TOKEN, |s| s["clicks"] == 3)?;
    let key = &key;
    in_chromium(suite, "stats", |client| async move {
        let client = &client;
        client
            .set_window_size(1024, 1400)
            .await
            .map_err(|e| e.to_string())?;
        open(client, &format!("{}/manage", suite.writer_url)).await?;
        step(
            client,
            Some(("#token", ALICE_TOKEN)),
            "#sign-in-form button[type=submit]",
            "document.querySelectorAll('li.link').length >= 1",
        )
        .await?;
        // Each link offers its QR code for download.
        wait_js(
            client,
            &format!(
                "document.querySelector('li.link[data-key=\"{key}\"] a.qr-link[download]')\
                 .getAttribute('href') === '/api/links/{key}/qr.png?size=512'"
            ),
            "the QR code link of the management page",
        )
        .await?;
        click(client, &format!("li.link[data-key=\"{key}\"] a.stats-link")).await?;
        wait_js(
            client,
            "document.body.dataset.shownDays === '30'",
            "the report",
        )
        .await?;
        let drawn = client
            .execute(
                "const charts = document.querySelectorAll('svg.chart'); \
                 const bars = [...charts[0].querySelectorAll('rect.bar')]; \
                 const cells = s => [...document.querySelectorAll('.shares td.name')] \
                     .map(td => td.textContent); \
                 return { charts: charts.length, days: bars.length, \
                          today: bars[bars.length - 1].dataset.value, \
                          hours: charts[1].querySelectorAll('rect.bar').length, \
                          tiles: [...document.querySelectorAll('.tile strong')].map(t => t.textContent), \
                          names: cells(), title: document.getElementById('stats-key').textContent };",
                vec![],
            )
            .await
            .map_err(|e| format!("read the report: {e}"))?;
        if let Ok(png) = client.screenshot().await {
            let _ = std::fs::write(suite.dir.join("stats.png"), png);
        }
        let names: Vec<String> =
            serde_json::from_value(drawn["names"].clone()).map_err(|e| e.to_string())?;
        ensure(
            drawn["charts"] == 2
                && drawn["days"] == 30
                && drawn["today"] == "3"
                && drawn["hours"] == 48
                && drawn["tiles"][0] == "3"
                && drawn["title"] == json!(key)
                && [
                    "news.example.com",
                    "(none)",
                    "NL",
                    "desktop",
                    "mobile",
                    "Firefox",
                    "iOS",
                ]
                .iter()
                .all(|name| names.iter().any(|n| n == name)),
            || format!("the page shows {drawn}"),
        )?;
        // Another range: the chart is drawn again for it.
        click(client, "button[data-days=\"7\"]").await?;
        wait_js(
            client,
            "document.body.dataset.shownDays === '7' && \
             document.querySelectorAll('svg.chart')[0].querySelectorAll('rect.bar').length === 7",
            "the 7-day report",
        )
        .await
    })
}

/// Alice's two links (one to edit, one to delete), Bob's one, and the
/// landing pages they lead to.
struct ManageCase<'a> {
    suite: &'a Suite,
    edited: String,
    deleted: String,
    bobs: String,
    /// Alice's link on the suite's second domain.
    on_go: String,
    before: String,
    after: String,
    /// Where an admin sends the edited link while Alice edits it.
    theirs: String,
}

impl ManageCase<'_> {
    fn short(&self, key: &str) -> String {
        format!("{}/l/{key}", self.suite.varnish.base_url())
    }

    fn stored(&self, key: &str) -> Result<serde_json::Value, String> {
        let path = format!("/api/links/{key}");
        Ok(api(self.suite, "GET", &path, Some(ALICE_TOKEN), None, None)?.body)
    }

    async fn open_page(&self, client: &fantoccini::Client) -> Result<(), String> {
        open(client, &format!("{}/manage", self.suite.writer_url)).await
    }

    /// A wrong token is refused where it was typed; Alice's signs in.
    async fn sign_in(&self, client: &fantoccini::Client) -> Result<(), String> {
        self.open_page(client).await?;
        step(
            client,
            Some(("#token", "not-a-token")),
            "#sign-in-form button[type=submit]",
            "document.querySelector('#token-help.error')",
        )
        .await?;
        let refusal = text(client, "#token-help").await?;
        ensure(refusal.contains("not valid"), || {
            format!("refusal {refusal:?}")
        })?;
        step(
            client,
            Some(("#token", ALICE_TOKEN)),
            "#sign-in-form button[type=submit]",
            "document.querySelectorAll('li.link').length >= 2",
        )
        .await?;
        let who = text(client, "#who").await?;
        ensure(who == "alice", || format!("signed in as {who:?}"))
    }

    /// Alice sees her links, newest first, and not Bob's; search narrows
    /// them to what matches the key or the URL.
    async fn list_and_search(&self, client: &fantoccini::Client) -> Result<(), String> {
        let (edited, deleted, bobs) = (&self.edited, &self.deleted, &self.bobs);
        let keys = listed_keys(client).await?;
        ensure(
            keys.contains(edited) && keys.contains(deleted) && !keys.contains(bobs),
            || format!("alice sees {keys:?}; hers are {edited} and {deleted}, bob's {bobs}"),
        )?;
        ensure(
            keys.iter().position(|k| k == deleted) < keys.iter().position(|k| k == edited),
            || format!("not newest first: {keys:?}"),
        )?;
        step(
            client,
            Some(("#search", "manage-doomed")),
            "#search-form button",
            "document.querySelectorAll('li.link').length === 1",
        )
        .await?;
        let found = listed_keys(client).await?;
        ensure(found == [deleted.clone()], || {
            format!("search found {found:?}")
        })?;
        type_into(client, "#search", "").await?;
        click(client, "#search-form button").await?;
        wait_js(
            client,
            "document.querySelectorAll('li.link').length >= 2",
            "the whole list",
        )
        .await?;
        self.filter_by_tag(client).await
    }

    /// A row shows its link's title and tags; a tag, clicked, narrows the
    /// list to the links holding it, until the filter is cleared.
    async fn filter_by_tag(&self, client: &fantoccini::Client) -> Result<(), String> {
        let row = format!("li.link[data-key=\"{}\"]", self.edited);
        let title = text(client, &format!("{row} .title")).await?;
        ensure(title == "Before the change", || format!("title {title:?}"))?;
        let tags = text(client, &format!("{row} .tags")).await?;
        ensure(
            tags.contains("manage-spring") && tags.contains("manage-sale"),
            || format!("tags {tags:?}"),
        )?;
        step(
            client,
            None,
            &format!("{row} .tag"),
            "!document.getElementById('tag-filter').hidden \
             && document.querySelectorAll('li.link').length === 1",
        )
        .await?;
        let found = listed_keys(client).await?;
        ensure(found == [self.edited.clone()], || {
            format!("the tag's links: {found:?}")
        })?;
        step(
            client,
            None,
            "#tag-filter-clear",
            "document.getElementById('tag-filter').hidden \
             && document.querySelectorAll('li.link').length >= 2",
        )
        .await?;
        self.edit_title_and_tags(client).await
    }

    /// The edit dialog shows the title and tags, and changes them.
    async fn edit_title_and_tags(&self, client: &fantoccini::Client) -> Result<(), String> {
        let edited = &self.edited;
        step(
            client,
            None,
            &format!("button[aria-label='Edit {edited}']"),
            "document.getElementById('edit-dialog').open",
        )
        .await?;
        let (title, tags) = (
            value(client, "#edit-link-title").await?,
            value(client, "#edit-tags").await?,
        );
        ensure(
            title == "Before the change" && tags == "manage-spring, manage-sale",
            || format!("the dialog shows {title:?} and {tags:?}"),
        )?;
        type_into(client, "#edit-link-title", "").await?;
        step(
            client,
            Some(("#edit-tags", "manage-spring, manage-autumn")),
            "#edit-save",
            "!document.getElementById('edit-dialog').open",
        )
        .await?;
        let stored = self.stored(edited)?;
        ensure(
            stored["title"].is_null()
                && stored["tags"] == json!(["manage-spring", "manage-autumn"]),
            || format!("stored {stored}"),
        )
    }

    /// With two domains each row names its domain, and the list narrows to
    /// one; the edit dialog sets a link's forwarding and adds campaign
    /// parameters to its URL, and the link on the other domain is changed.
    async fn domains_forwarding_and_campaign(
        &self,
        client: &fantoccini::Client,
    ) -> Result<(), String> {
        let go_row = format!(
            "li.link[data-key='{}'][data-domain='{GO_DOMAIN}']",
            self.on_go
        );
        // The default domain's links come first, and other tests of the
        // suite add to them: the list narrowed to the second domain is
        // where its link is sure to be on the first page.
        let default_badge = text(
            client,
            &format!("li.link[data-key='{}'] .domain", self.edited),
        )
        .await?;
        ensure(default_badge == DOMAINS[0], || {
            format!("the default domain's row names {default_badge:?}")
        })?;
        step(
            client,
            None,
            &format!("#domain-filter option[value='{GO_DOMAIN}']"),
            &format!(
                "document.querySelector({}) && \
                 [...document.querySelectorAll('li.link')].every(li => li.dataset.domain === '{GO_DOMAIN}')",
                json!(go_row)
            ),
        )
        .await?;
        let go_badge = text(client, &format!("{go_row} .domain")).await?;
        ensure(go_badge == GO_DOMAIN, || {
            format!("the second domain's row names {go_badge:?}")
        })?;
        let said = text(client, "#status").await?;
        ensure(said.contains(&format!("on {GO_DOMAIN}")), || {
            format!("the narrowed list says {said:?}")
        })?;
        step(
            client,
            None,
            &format!("{go_row} button.edit"),
            "document.getElementById('edit-dialog').open",
        )
        .await?;
        let default_label = client
            .execute(
                "return document.querySelector('#edit-forward option[value=default]').textContent",
                vec![],
            )
            .await
            .map_err(|e| e.to_string())?;
        ensure(
            default_label == "As the domain does (do not forward)",
            || format!("the domain's default reads {default_label}"),
        )?;
        click(client, "#edit-forward option[value=always]").await?;
        click(client, "#edit-campaign summary").await?;
        type_into(client, "#edit-utm_source", "manage").await?;
        type_into(client, "#edit-utm_campaign", "autumn sale").await?;
        step(
            client,
            None,
            "#edit-save",
            "!document.getElementById('edit-dialog').open",
        )
        .await?;
        let path = format!("/api/links/{}?domain={GO_DOMAIN}", self.on_go);
        let stored = api(self.suite, "GET", &path, Some(ALICE_TOKEN), None, None)?.body;
        let target = self
            .before
            .replace("/manage-before", "/manage-go?ref=home#top");
        let expected = forward_query(&target, "utm_source=manage&utm_campaign=autumn%20sale")
            .map_err(|e| e.to_string())?;
        ensure(
            stored["url"] == json!(expected) && stored["forward_query"] == true,
            || format!("stored {stored}, not {expected} forwarding"),
        )?;
        let meta = text(client, &format!("{go_row} .meta")).await?;
        ensure(meta.contains("forwards query strings"), || {
            format!("the row says {meta:?}")
        })?;
        step(
            client,
            None,
            "#domain-filter option[value='']",
            &format!(
                "[...document.querySelectorAll('li.link')].some(li => li.dataset.domain === '{}')",
                DOMAINS[0]
            ),
        )
        .await
    }

    /// The page's script merges campaign parameters by the rule the core
    /// gives Varnish and the form: the same URL for every case.
    async fn merge_rule_is_the_cores(&self, client: &fantoccini::Client) -> Result<(), String> {
        let cases = [
            ("https://e.org/", "utm_source=x"),
            ("https://e.org/p?a=1", "b=2"),
            ("https://e.org/p?a=1#top", "b=2&c"),
            ("https://e.org/p#f?x", "b=2"),
            ("https://e.org/p?", "b=2"),
            ("https://e.org/p?a=1", "&&"),
            ("https://e.org/?utm_source=site&a=1", "utm_source=mail"),
            ("https://e.org/p?a=1&a=2&=z&b", "a=9&&b="),
            (
                "https://e.org/p?x=%20y#frag#more",
                "utm_campaign=spring%20sale&utm_content=a%26b",
            ),
        ];
        let merged = client
            .execute(
                "return arguments[0].map(c => mergeQuery(c[0], c[1]));",
                vec![json!(cases)],
            )
            .await
            .map_err(|e| format!("run mergeQuery: {e}"))?;
        let expected: Vec<String> = cases
            .iter()
            .map(|(target, query)| forward_query(target, query).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        ensure(merged == json!(expected), || {
            format!("the page merges {merged}, the core {expected:?}")
        })
    }

    /// A bad URL is refused next to its field and stores nothing; an edit
    /// made elsewhere meanwhile refuses the save and shows the other
    /// version; then the real change is saved and listed.
    async fn edit_target(&self, client: &fantoccini::Client) -> Result<(), String> {
        let edited = &self.edited;
        step(
            client,
            None,
            &format!("button[aria-label='Edit {edited}']"),
            "document.getElementById('edit-dialog').open",
        )
        .await?;
        let shown = value(client, "#edit-url").await?;
        ensure(shown == self.before, || format!("the form shows {shown:?}"))?;
        step(
            client,
            Some(("#edit-url", "not a url")),
            "#edit-save",
            "document.querySelector('#edit-url-help.error')",
        )
        .await?;
        let stored = self.stored(edited)?;
        ensure(stored["url"] == json!(self.before), || {
            format!("a refused edit stored {stored}")
        })?;

        let path = format!("/api/links/{edited}");
        let change = json!({ "url": self.theirs });
        let other = api(
            self.suite,
            "PATCH",
            &path,
            Some(ADMIN_TOKEN),
            None,
            Some(&change),
        )?;
        ensure(other.status == 200, || {
            format!("the concurrent edit: {}", other.status)
        })?;
        step(
            client,
            Some(("#edit-url", &self.after)),
            "#edit-save",
            "!document.getElementById('edit-error').hidden",
        )
        .await?;
        let conflict = text(client, "#edit-error").await?;
        ensure(conflict.contains("changed elsewhere"), || {
            format!("conflict {conflict:?}")
        })?;
        let theirs_shown = format!(
            "document.getElementById('edit-url').value === {}",
            json!(self.theirs)
        );
        wait_js(client, &theirs_shown, "their URL in the form").await?;

        step(
            client,
            Some(("#edit-url", &self.after)),
            "#edit-save",
            "!document.getElementById('edit-dialog').open",
        )
        .await?;
        let target = text(client, &format!("li.link[data-key='{edited}'] .target")).await?;
        ensure(target == self.after, || {
            format!("the list shows {target:?}")
        })
    }

    /// Back on the page (still signed in), an expiry typed in local time
    /// is stored as that moment, and a click limit as typed.
    async fn edit_expiry_and_click_limit(&self, client: &fantoccini::Client) -> Result<(), String> {
        let edited = &self.edited;
        self.open_page(client).await?;
        click(client, &format!("button[aria-label='Edit {edited}']")).await?;
        let ready = format!(
            "document.getElementById('edit-dialog').open && \
             document.getElementById('edit-url').value === {}",
            json!(self.after)
        );
        wait_js(client, &ready, "the edit dialog").await?;
        type_into(client, "#edit-expires", "06152030\t1030AM").await?;
        let typed = value(client, "#edit-expires").await?;
        ensure(typed == "2030-06-15T10:30", || {
            format!("the expiry field holds {typed:?}")
        })?;
        type_into(client, "#edit-max-clicks", "250").await?;
        step(
            client,
            None,
            "#edit-save",
            "!document.getElementById('edit-dialog').open",
        )
        .await?;
        let meta = text(client, &format!("li.link[data-key='{edited}'] .meta")).await?;
        ensure(
            meta.contains("Expires") && meta.contains("limited to 250 clicks"),
            || format!("the row says {meta:?}"),
        )?;
        let expected = client
            .execute(
                "return new Date('2030-06-15T10:30').toISOString().replace('.000Z', 'Z')",
                vec![],
            )
            .await
            .map_err(|e| e.to_string())?;
        let stored = self.stored(edited)?;
        ensure(
            stored["url"] == json!(self.after)
                && stored["expires_at"] == expected
                && stored["max_clicks"] == 250,
            || {
                format!(
                    "stored {stored} after typing 2030-06-15 10:30 local ({expected}) \
                     and a limit of 250 clicks"
                )
            },
        )
    }

    /// Delete asks first, and keeping the link changes nothing; confirmed,
    /// the row goes and the link shows the "removed" page.
    async fn delete(&self, client: &fantoccini::Client) -> Result<(), String> {
        let deleted = &self.deleted;
        let delete = format!("button[aria-label='Delete {deleted}']");
        step(
            client,
            None,
            &delete,
            "document.getElementById('delete-dialog').open",
        )
        .await?;
        step(
            client,
            None,
            "#delete-cancel",
            "!document.getElementById('delete-dialog').open",
        )
        .await?;
        let kept = api(
            self.suite,
            "GET",
            &format!("/api/links/{deleted}"),
            None,
            None,
            None,
        )?;
        ensure(kept.status == 200, || {
            format!("a cancelled delete answered {}", kept.status)
        })?;
        step(
            client,
            None,
            &delete,
            "document.getElementById('delete-dialog').open",
        )
        .await?;
        click(client, "#delete-confirm").await?;
        let row_gone = format!("!document.querySelector(\"li.link[data-key='{deleted}']\")");
        wait_js(client, &row_gone, "the deleted row to go").await?;
        let said = text(client, "#status").await?;
        ensure(said.contains("410"), || {
            format!("after delete the page says {said:?}")
        })?;
        click_link(client, &self.suite.landing_url, &self.short(deleted)).await?;
        let gone = text(client, "body").await?;
        ensure(gone.to_lowercase().contains("removed"), || {
            format!("the deleted link shows {gone:?}")
        })
    }

    /// The tab remembers the sign-in until Sign out, which forgets it.
    async fn sign_out(&self, client: &fantoccini::Client) -> Result<(), String> {
        self.open_page(client).await?;
        wait_js(
            client,
            "!document.getElementById('manager').hidden",
            "the remembered sign-in",
        )
        .await?;
        click(client, "#sign-out").await?;
        self.open_page(client).await?;
        wait_js(
            client,
            "!document.getElementById('sign-in').hidden",
            "the sign-in form",
        )
        .await
    }
}

pub(crate) async fn open(client: &fantoccini::Client, url: &str) -> Result<(), String> {
    client
        .goto(url)
        .await
        .map_err(|e| format!("open {url}: {e}"))
}

/// Clicks a link to `url` on the page at `on`, as a visitor does; the
/// browser may answer the click from its own cache. (Chromium keys its
/// cache by the site a navigation starts from, so every click in a test
/// starts from the same page.)
async fn click_link(client: &fantoccini::Client, on: &str, url: &str) -> Result<(), String> {
    open(client, on).await?;
    // The mark stays with the old document: its absence means a new one.
    let script = format!(
        "window.leftBehind = true; const a = document.createElement('a'); \
         a.href = {}; a.textContent = 'the short link'; document.body.append(a); a.click();",
        json!(url)
    );
    client
        .execute(&script, vec![])
        .await
        .map_err(|e| format!("click {url}: {e}"))?;
    wait_js(
        client,
        "!window.leftBehind && document.readyState === 'complete'",
        url,
    )
    .await
}

async fn landed_on(client: &fantoccini::Client, target: &str) -> Result<(), String> {
    wait_for(client, Locator::Id("landed")).await?;
    let url = client.current_url().await.map_err(|e| e.to_string())?;
    ensure(url.as_str() == target, || {
        format!("landed on {url}, not {target}")
    })
}

/// One user step: type `keys` into the input `field` (if given), press
/// `button`, and wait until the script expression `until` holds.
async fn step(
    client: &fantoccini::Client,
    typed: Option<(&str, &str)>,
    button: &str,
    until: &str,
) -> Result<(), String> {
    if let Some((field, keys)) = typed {
        type_into(client, field, keys).await?;
    }
    click(client, button).await?;
    wait_js(client, until, until).await
}

async fn click(client: &fantoccini::Client, css: &str) -> Result<(), String> {
    wait_for(client, Locator::Css(css))
        .await?
        .click()
        .await
        .map_err(|e| format!("click {css}: {e}"))
}

/// Replaces the text of the input at `css` with `keys`, typed.
async fn type_into(client: &fantoccini::Client, css: &str, keys: &str) -> Result<(), String> {
    let field = wait_for(client, Locator::Css(css)).await?;
    field
        .clear()
        .await
        .map_err(|e| format!("clear {css}: {e}"))?;
    if keys.is_empty() {
        return Ok(());
    }
    field
        .send_keys(keys)
        .await
        .map_err(|e| format!("type into {css}: {e}"))
}

async fn text(client: &fantoccini::Client, css: &str) -> Result<String, String> {
    wait_for(client, Locator::Css(css))
        .await?
        .text()
        .await
        .map_err(|e| format!("read {css}: {e}"))
}

async fn value(client: &fantoccini::Client, css: &str) -> Result<String, String> {
    wait_for(client, Locator::Css(css))
        .await?
        .prop("value")
        .await
        .map_err(|e| format!("read {css}: {e}"))
        .map(Option::unwrap_or_default)
}

async fn listed_keys(client: &fantoccini::Client) -> Result<Vec<String>, String> {
    let keys = client
        .execute(
            "return [...document.querySelectorAll('li.link')].map(li => li.dataset.key)",
            vec![],
        )
        .await
        .map_err(|e| format!("list the keys: {e}"))?;
    serde_json::from_value(keys).map_err(|e| e.to_string())
}

/// Waits up to 10 s for the script expression `condition` to be truthy.
pub(crate) async fn wait_js(
    client: &fantoccini::Client,
    condition: &str,
    what: &str,
) -> Result<(), String> {
    let script = format!("return !!({condition});");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let met = client
            .execute(&script, vec![])
            .await
            .map_err(|e| format!("wait for {what}: {e}"))?;
        if met == serde_json::Value::Bool(true) {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "waited 10 s for {what} ({condition}); {}",
                page_state(client).await
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The API's documentation page draws every operation of the OpenAPI
/// document in Chromium, having loaded nothing from another origin.
pub fn api_docs_page_draws_every_operation(suite: &Suite) -> Result<(), String> {
    let document = api(suite, "GET", "/api/openapi.json", None, None, None)?.body;
    let operations: usize = document["paths"]
        .as_object()
        .ok_or("the document has no paths")?
        .values()
        .filter_map(serde_json::Value::as_object)
        .map(serde_json::Map::len)
        .sum();
    let page = format!("{}/api/docs", suite.writer_url);
    in_chromium(suite, "docs", |client| async move {
        open(&client, &page).await?;
        wait_js(
            &client,
            &format!("document.querySelectorAll('#operations details').length === {operations}"),
            &format!("{operations} operations drawn"),
        )
        .await?;
        let create = text(&client, "#create_link summary").await?;
        ensure(
            create.contains("POST") && create.contains("/api/links"),
            || format!("the create operation reads {create:?}"),
        )?;
        wait_js(
            &client,
            "document.querySelectorAll('#schemas details').length > 10",
            "the schemas drawn",
        )
        .await?;
        let foreign = client
            .execute(
                "return performance.getEntriesByType('resource')\
                 .map(e => e.name).filter(n => !n.startsWith(location.origin + '/'))",
                vec![],
            )
            .await
            .map_err(|e| e.to_string())?;
        ensure(foreign == json!([]), || {
            format!("the page loaded from other origins: {foreign}")
        })
    })
}

/// `chromedriver`'s command for the browser's console messages since the
/// last time they were read.
#[derive(Debug)]
struct ConsoleLog;

impl fantoccini::wd::WebDriverCompatibleCommand for ConsoleLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (ureq::http::Method, Option<String>) {
        (
            ureq::http::Method::POST,
            Some(json!({ "type": "browser" }).to_string()),
        )
    }
}

/// The console messages since the last call that say a
/// `Content-Security-Policy` refused something.
async fn policy_violations(client: &fantoccini::Client) -> Result<Vec<String>, String> {
    let log = client
        .issue_cmd(ConsoleLog)
        .await
        .map_err(|e| format!("read the browser's console: {e}"))?;
    let entries = log
        .as_array()
        .ok_or_else(|| format!("the console is not a list: {log}"))?;
    Ok(entries
        .iter()
        .filter_map(|entry| entry["message"].as_str())
        .filter(|message| message.contains("Content Security Policy"))
        .map(str::to_owned)
        .collect())
}

/// Each page of the writer runs its own script under its policy, with
/// nothing refused, while a script injected into it does not run, and the
/// console says the policy refused it: the access token the management
/// page keeps in `sessionStorage` is out of an injected script's reach.
pub fn pages_run_their_own_script_only(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/browser/policy" }),
    )?;
    let pages = [
        ("/", "document.documentElement.classList.contains('js')"),
        (
            "/manage",
            "document.documentElement.classList.contains('js')",
        ),
        (
            &format!("/manage/stats/{key}") as &str,
            "document.documentElement.classList.contains('js')",
        ),
        (
            "/api/docs",
            "document.getElementById('about').textContent.includes('version')",
        ),
    ];
    in_chromium(suite, "policy", |client| async move {
        let client = &client;
        for (path, ran) in pages {
            open(client, &format!("{}{path}", suite.writer_url)).await?;
            wait_js(client, ran, &format!("the script of {path}")).await?;
            let refused = policy_violations(client).await?;
            ensure(refused.is_empty(), || {
                format!("{path} refused its own: {refused:?}")
            })?;
            let injected = client
                .execute(
                    "window.injected = false; const s = document.createElement('script'); \
                     s.textContent = 'window.injected = true'; document.body.append(s); \
                     return window.injected;",
                    vec![],
                )
                .await
                .map_err(|e| format!("inject a script into {path}: {e}"))?;
            ensure(injected == json!(false), || {
                format!("a script injected into {path} ran")
            })?;
            let refused = policy_violations(client).await?;
            ensure(refused.iter().any(|m| m.contains("script-src")), || {
                format!("the console of {path} says nothing of the injected script: {refused:?}")
            })?;
        }
        Ok(())
    })
}

/// The management page's rules editor: a rule and a split set on a link,
/// a bad rule refused next to the rules naming it, the stored value read
/// in Redis; then both removed.
pub fn management_page_edits_rules_and_split(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/browser/rules" }),
    )?;
    let stored = |key: &str| -> Result<String, String> {
        let value: Option<String> =
            suite
                .redis
                .query(&["HGET", &format!("short:{}", &key[..2]), &key[2..]])?;
        value.ok_or_else(|| format!("{key} is not stored"))
    };
    let row = format!("li.link[data-key=\"{key}\"]");
    in_chromium(suite, "rules", |client| async move {
        let client = &client;
        open(client, &format!("{}/manage", suite.writer_url)).await?;
        step(
            client,
            Some(("#token", ALICE_TOKEN)),
            "#sign-in-form button[type=submit]",
            "!document.getElementById('manager').hidden",
        )
        .await?;
        step(
            client,
            Some(("#search", &key)),
            "#search-form button[type=submit]",
            &format!("document.querySelector('{row}')"),
        )
        .await?;
        step(
            client,
            None,
            &format!("{row} button.edit"),
            "document.getElementById('edit-dialog').open",
        )
        .await?;
        fill_rule_and_split(client).await?;
        let rule = "#rules-list fieldset.rule:nth-of-type(1)";
        // A country ISO 3166-1 does not know: refused, named, nothing stored.
        step(
            client,
            None,
            "#edit-save",
            "document.querySelector('#edit-rules-help.error')",
        )
        .await?;
        let refusal = text(client, "#edit-rules-help").await?;
        ensure(
            refusal.starts_with("rule 1: condition \"country=XX\""),
            || format!("the refusal: {refusal:?}"),
        )?;
        ensure(!stored(&key)?.contains('~'), || {
            "a refused rule was stored".into()
        })?;
        type_into(client, &format!("{rule} .rule-country"), "de, AT").await?;
        step(
            client,
            None,
            "#edit-save",
            &format!("!document.getElementById('edit-dialog').open && document.querySelector('{row} .rules-badge')"),
        )
        .await?;
        let value = stored(&key)?;
        ensure(
            value.ends_with(
                " ~device=ios&country=DE,AT>https://apps.example.com/rule \
                 *30>https://a.example.org/ *70>https://b.example.org/",
            ),
            || format!("stored after saving: {value}"),
        )?;
        if let Ok(png) = client.screenshot().await {
            let _ = std::fs::write(suite.dir.join("rules.png"), png);
        }
        // Opened again, the editor shows them; removed, they are gone.
        step(
            client,
            None,
            &format!("{row} button.edit"),
            "document.getElementById('edit-dialog').open && \
             document.querySelectorAll('#split-list fieldset').length === 2 && \
             document.querySelector('#rules-list .rule-country').value === 'DE, AT'",
        )
        .await?;
        for list in ["#rules-list", "#split-list", "#split-list"] {
            click(client, &format!("{list} .remove-row")).await?;
        }
        step(
            client,
            None,
            "#edit-save",
            &format!("!document.getElementById('edit-dialog').open && !document.querySelector('{row} .rules-badge')"),
        )
        .await?;
        let value = stored(&key)?;
        ensure(
            value.starts_with("https://example.org/browser/rules") && !value.contains(['~', '*']),
            || format!("stored after removing: {value}"),
        )
    })
}

/// In the open edit dialog: a rule for iPhones in a country no one has
/// (`XX`), and a split of 30 to 70.
async fn fill_rule_and_split(client: &fantoccini::Client) -> Result<(), String> {
    click(client, "#edit-targeting summary").await?;
    step(
        client,
        None,
        "#add-rule",
        "document.querySelector('#rules-list fieldset.rule')",
    )
    .await?;
    let rule = "#rules-list fieldset.rule:nth-of-type(1)";
    click(client, &format!("{rule} .rule-device[value=ios]")).await?;
    type_into(client, &format!("{rule} .rule-country"), "XX").await?;
    type_into(
        client,
        &format!("{rule} .rule-url"),
        "https://apps.example.com/rule",
    )
    .await?;
    for (n, (weight, url)) in [
        ("30", "https://a.example.org/"),
        ("70", "https://b.example.org/"),
    ]
    .into_iter()
    .enumerate()
    {
        click(client, "#add-split").await?;
        let target = format!("#split-list fieldset.split-target:nth-of-type({})", n + 1);
        type_into(client, &format!("{target} .rule-weight"), weight).await?;
        type_into(client, &format!("{target} .rule-url"), url).await?;
    }
    Ok(())
}
