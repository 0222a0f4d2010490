//! Shlink's REST API driven by Shlink's own published SDK
//! (`writer/tests/shlink/`, `@shlinkio/shlink-js-sdk` pinned there and
//! installed by `make test`'s install step), against the suite's writer,
//! with every link it creates followed through the suite's Varnish.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::browser::{in_chromium, open, wait_js};
use crate::common::{ensure, Suite, ADMIN_TOKEN, BOB_TOKEN, DANA_TOKEN, ERIN_TOKEN, GO_DOMAIN};

/// The SDK's test file, and the folder its `node_modules` is in.
const SDK_TESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/shlink");

/// Longest the SDK's tests may take: each waits at most 15 s for a count.
const SDK_DEADLINE: Duration = Duration::from_mins(3);

pub fn the_sdk_drives_every_route(suite: &Suite) -> Result<(), String> {
    let run = format!(
        "r{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| e.to_string())?
            .as_millis()
    );
    let mut node = Command::new("node")
        .current_dir(SDK_TESTS)
        .args(["--test", "--test-reporter=spec", "sdk.test.mjs"])
        .env("SHLINK_SERVER", &suite.writer_url)
        .env("ADMIN_KEY", ADMIN_TOKEN)
        .env("AUTHOR_KEY", DANA_TOKEN)
        .env("OTHER_KEY", BOB_TOKEN)
        .env("SHOP_KEY", ERIN_TOKEN)
        .env("GO_DOMAIN", GO_DOMAIN)
        .env("RUN", &run)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!("node: {e} (make test installs Node.js's tests' SDK; is node on PATH?)")
        })?;
    let started = Instant::now();
    while node.try_wait().map_err(|e| e.to_string())?.is_none() {
        if started.elapsed() > SDK_DEADLINE {
            let _ = node.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = node.wait_with_output().map_err(|e| e.to_string())?;
    let report = String::from_utf8_lossy(&output.stdout);
    // Node's runner closes with `ℹ pass N` and `ℹ fail N`: a file that ran
    // no test is a failure too.
    let passed = report
        .lines()
        .find_map(|line| line.strip_prefix("ℹ pass "))
        .and_then(|n| n.trim().parse::<u32>().ok());
    if output.status.success() && passed.is_some_and(|n| n > 0) {
        return Ok(());
    }
    Err(format!(
        "the Shlink SDK's tests failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// A page on another origin (the landing server's `/shlink`) creates and
/// lists a link through the Shlink API with Shlink's SDK in Chromium, as
/// Shlink's web app does: the browser lets it only with the writer's CORS.
pub fn a_page_on_another_origin_uses_the_api_through_the_sdk(suite: &Suite) -> Result<(), String> {
    let page = suite.landing_url.replace("/welcome", "/shlink");
    in_chromium(suite, "shlink-cors", |client| async move {
        let client = &client;
        open(client, &page).await?;
        let done = "!document.getElementById('result').textContent.startsWith('waiting')";
        wait_js(client, done, "the page's calls to the writer").await?;
        let said = client
            .execute(
                "return document.getElementById('result').textContent",
                vec![],
            )
            .await
            .map_err(|e| e.to_string())?;
        let said = said.as_str().unwrap_or_default().to_owned();
        let made = said.rsplit(" made ").next().unwrap_or_default();
        let listed = said
            .strip_prefix("listed ")
            .and_then(|rest| rest.split(" made ").next())
            .unwrap_or_default();
        ensure(
            !made.is_empty() && listed.split(',').any(|code| code == made),
            || format!("the page on {page} said: {said}"),
        )?;
        Ok(())
    })
}
