//! QR codes of short links, read back by a real decoder (`zbarimg`).

use serde_json::json;

use crate::common::{api, create, ensure, Suite, ALICE_TOKEN};

/// `path` of the writer: status, `Content-Type` and body bytes.
fn fetch(suite: &Suite, path: &str) -> Result<(u16, String, Vec<u8>), String> {
    let url = format!("{}{path}", suite.writer_url);
    let mut response = Suite::agent()
        .get(&url)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response
        .body_mut()
        .with_config()
        .limit(16 * 1024 * 1024)
        .read_to_vec()
        .map_err(|e| e.to_string())?;
    Ok((response.status().as_u16(), kind, body))
}

/// A link's PNG QR code, decoded by `zbarimg`, gives its short URL back;
/// its SVG is served as SVG.
pub fn qr_code_decodes_to_the_short_url(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/qr/printed" }),
    )?;
    let short_url = format!("{}/l/{key}", suite.varnish.base_url());
    for size in ["", "?size=128", "?size=300", "?size=2048"] {
        let (status, kind, png) = fetch(suite, &format!("/api/links/{key}/qr.png{size}"))?;
        ensure(status == 200 && kind == "image/png", || {
            format!("qr.png{size}: {status} {kind}")
        })?;
        let file = suite.dir.join(format!("qr-{key}-{}.png", size.len()));
        std::fs::write(&file, &png).map_err(|e| e.to_string())?;
        let decoded = std::process::Command::new("zbarimg")
            .args(["--raw", "-q"])
            .arg(&file)
            .output()
            .map_err(|e| format!("zbarimg (scripts/install-deps.sh test): {e}"))?;
        let text = String::from_utf8_lossy(&decoded.stdout);
        ensure(text.trim() == short_url, || {
            format!(
                "zbarimg read {text:?} in qr.png{size}, not {short_url}: {}",
                String::from_utf8_lossy(&decoded.stderr)
            )
        })?;
    }
    let (status, kind, svg) = fetch(suite, &format!("/api/links/{key}/qr.svg"))?;
    let svg = String::from_utf8_lossy(&svg);
    ensure(
        status == 200 && kind == "image/svg+xml" && svg.contains("<svg"),
        || format!("qr.svg: {status} {kind} {svg:.80}"),
    )
}

/// A size out of bounds or not a number is refused with 422 and the
/// bounds; an unknown key answers 404 and a deleted link 410.
pub fn qr_code_refuses_bad_sizes_and_missing_links(suite: &Suite) -> Result<(), String> {
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/qr/refused" }),
    )?;
    for size in ["10", "4096", "abc", "-1"] {
        let answer = api(
            suite,
            "GET",
            &format!("/api/links/{key}/qr.png?size={size}"),
            None,
            None,
            None,
        )?;
        let error = answer.body["error"].as_str().unwrap_or_default();
        ensure(answer.status == 422 && error.contains("size"), || {
            format!("size={size}: {} {}", answer.status, answer.body)
        })?;
    }
    let unknown = api(suite, "GET", "/api/links/NoSuchQr/qr.svg", None, None, None)?;
    ensure(unknown.status == 404, || {
        format!(
            "an unknown key's QR code: {} {}",
            unknown.status, unknown.body
        )
    })?;
    let deleted = api(
        suite,
        "DELETE",
        &format!("/api/links/{key}"),
        Some(ALICE_TOKEN),
        None,
        None,
    )?;
    ensure(deleted.status == 204, || {
        format!("delete: {}", deleted.status)
    })?;
    let gone = api(
        suite,
        "GET",
        &format!("/api/links/{key}/qr.png"),
        None,
        None,
        None,
    )?;
    ensure(gone.status == 410, || {
        format!("a deleted link's QR code: {} {}", gone.status, gone.body)
    })
}
