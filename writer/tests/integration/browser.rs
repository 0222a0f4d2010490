//! The web form in a real headless Chromium: fill it, submit it, read the
//! short link, follow it through Varnish, and land on the test's own page.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use test_support::{free_port, wait_for_port};

use crate::common::{Suite, CROSS_SITE_URL};

struct ChromeDriver(Child);

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn form_to_landing_page(suite: &Suite) -> Result<(), String> {
    let port = free_port()?;
    let driver = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .arg(format!(
            "--log-path={}",
            suite.dir.join("chromedriver.log").display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(ChromeDriver)
        .map_err(|e| format!("cannot start chromedriver (make test installs it): {e}"))?;
    wait_for_port(port, Duration::from_secs(20))?;
    let profile = suite.dir.join("chromium-profile");
    let screenshot = suite.dir.join("form.png");
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(drive(suite, port, &profile, &screenshot));
    drop(driver);
    result
}

async fn drive(
    suite: &Suite,
    port: u16,
    profile: &std::path::Path,
    screenshot: &std::path::Path,
) -> Result<(), String> {
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
    let client = ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .map_err(|e| format!("cannot open a Chromium session: {e}"))?;
    let outcome = steps(suite, &client, screenshot).await;
    let _ = client.close().await;
    outcome
}

async fn steps(
    suite: &Suite,
    client: &fantoccini::Client,
    screenshot: &std::path::Path,
) -> Result<(), String> {
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

    // Then the real one.
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

    // Follow it: Varnish redirects, Chromium lands on the test's page.
    link.click().await.map_err(fail("follow the short link"))?;
    let heading = wait_for(client, Locator::Id("landed"))
        .await?
        .text()
        .await
        .map_err(fail("read the target page"))?;
    let url = client.current_url().await.map_err(fail("read the URL"))?;
    if heading != "You landed" || url.as_str() != suite.landing_url {
        return Err(format!("landed on {url} with {heading:?}"));
    }

    // A page on another origin submits the form by script: refused.
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
    client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(locator)
        .await
        .map_err(|e| format!("wait for {locator:?}: {e}"))
}
