//! The OpenAPI document at `/api/openapi.json`: valid for an independent
//! validator, and every route it documents answers as it says.

use serde_json::{json, Value};

use crate::common::{api, create, ensure, Suite, ADMIN_TOKEN, ALICE_TOKEN};

/// `openapi-spec-validator` (from PyPI, in the project's tool venv) finds
/// the document valid OpenAPI 3.1.
pub fn openapi_document_is_valid(suite: &Suite) -> Result<(), String> {
    let answer = api(suite, "GET", "/api/openapi.json", None, None, None)?;
    ensure(
        answer.status == 200 && answer.body["openapi"] == "3.1.0",
        || format!("{} {:.200}", answer.status, answer.body),
    )?;
    let file = suite.dir.join("openapi.json");
    std::fs::write(&file, answer.body.to_string()).map_err(|e| e.to_string())?;
    let validator = test_support::release_dir()
        .parent()
        .ok_or("no target directory")?
        .join("tools/venv/bin/openapi-spec-validator");
    let output = std::process::Command::new(&validator)
        .arg(&file)
        .output()
        .map_err(|e| {
            format!(
                "{}: {e}; scripts/install-deps.sh test installs it",
                validator.display()
            )
        })?;
    ensure(output.status.success(), || {
        format!(
            "the validator refused the document: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// A request each documented operation takes: the path filled in, a body.
fn probe(method: &str, path: &str, key: &str, doomed: &str) -> (String, Option<Value>) {
    let key = if method == "delete" { doomed } else { key };
    let path = path.replace("{key}", key);
    let body = match (method, path.as_str()) {
        ("post", "/api/links") => Some(json!({ "url": "https://example.org/openapi/probe" })),
        ("post", "/api/links/bulk") => Some(json!([{ "url": "https://example.org/openapi/bulk" }])),
        ("patch", _) => Some(json!({ "max_clicks": 50 })),
        _ => None,
    };
    (path, body)
}

/// Every operation the document names is routed (no 404 from the router,
/// no 405), and answers one of the statuses it documents.
pub fn every_documented_route_answers_as_documented(suite: &Suite) -> Result<(), String> {
    let document = api(suite, "GET", "/api/openapi.json", None, None, None)?.body;
    let key = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/openapi/probed" }),
    )?;
    let doomed = create(
        suite,
        Some(ALICE_TOKEN),
        &json!({ "url": "https://example.org/openapi/deleted" }),
    )?;
    let paths = document["paths"].as_object().ok_or("no paths")?;
    let mut checked = 0;
    for (template, item) in paths {
        for (method, operation) in item.as_object().ok_or("a path item is no object")? {
            let documented = operation["responses"].as_object().ok_or("no responses")?;
            // As documented: the admin's request, one without a token, and
            // one naming a key no link can have.
            let (path, body) = probe(method, template, &key, &doomed);
            let mut probes = vec![
                (path.clone(), Some(ADMIN_TOKEN), body.clone(), "the admin's"),
                (path, None, body.clone(), "no token's"),
            ];
            if template.contains("{key}") {
                probes.push((
                    template.replace("{key}", "no!key"),
                    Some(ADMIN_TOKEN),
                    body,
                    "a bad key's",
                ));
            }
            for (path, token, body, whose) in probes {
                let (status, text) = send(suite, method, &path, token, body.as_ref())?;
                ensure(
                    documented.contains_key(&status.to_string()) && status != 405,
                    || {
                        format!(
                        "{} {path}, {whose} request, answered {status}, which the document does \
                         not list: {text:.300}",
                        method.to_uppercase(),
                    )
                    },
                )?;
                checked += 1;
            }
        }
    }
    ensure(checked >= 40, || format!("only {checked} requests"))
}

/// `method path` with `token` and `body` as JSON: the status and the body
/// as text (pages and images answer no JSON).
fn send(
    suite: &Suite,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Result<(u16, String), String> {
    let url = format!("{}{path}", suite.writer_url);
    let mut request = ureq::http::Request::builder()
        .method(method.to_uppercase().as_str())
        .uri(&url);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = match body {
        Some(body) => request
            .header("content-type", "application/json")
            .body(body.to_string()),
        None => request.body(String::new()),
    }
    .map_err(|e| e.to_string())?;
    let mut response = Suite::agent()
        .run(request)
        .map_err(|e| format!("{method} {url}: {e}"))?;
    let bytes = response
        .body_mut()
        .with_config()
        .limit(64 * 1024 * 1024)
        .read_to_vec()
        .map_err(|e| e.to_string())?;
    Ok((
        response.status().as_u16(),
        String::from_utf8_lossy(&bytes).into_owned(),
    ))
}
