//! The API described as OpenAPI 3.1, generated from the handlers'
//! `#[utoipa::path]` attributes and the types they answer, and a page that
//! renders it with nothing loaded from other sites.

use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::clicks::{DayCount, HourCount, LinkStats, Share, TargetClicks, Trending};
use crate::error_code::ErrorCode;
use crate::links::body::LinkBody;
use crate::links::bulk::{Made, Refused, RowOutcome, Summary};
use crate::links::export::ExportFormat;
use crate::links::rules::{RuleBody, SplitBody};
use crate::web::bulk::{BulkAnswer, BulkResult};
use crate::web::domains::{DomainBody, DomainsBody, RedirectsBody, RedirectsInput};
use crate::web::error::ErrorBody;
use crate::web::html_page;
use crate::web::links::{Deleted, LinkChange, LinkInput, LinkPage};
use crate::web::stats::{DomainStats, TrendingLinks};
use crate::web::visits::{VisitBody, VisitsBody};
use crate::web::whoami::WhoAmI;

/// Adds the bearer token scheme the paths name.
struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An access token from the writer's [access] tokens: \
                         Authorization: Bearer <token>",
                    ))
                    .build(),
            ),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "shortlink",
        description = "Short links served by Varnish from Redis: create, change, \
                       delete, list, import and export them, and read their clicks."
    ),
    paths(
        crate::web::links::create_link,
        crate::web::links::list_links,
        crate::web::bulk::create_links_in_bulk,
        crate::web::export::export_links,
        crate::web::links::get_link,
        crate::web::links::edit_link,
        crate::web::links::delete_link,
        crate::web::stats::link_stats,
        crate::web::stats::link_stats_report,
        crate::web::visits::link_visits,
        crate::web::domains::list_domains,
        crate::web::domains::set_domain_redirects,
        crate::web::qr::link_qr_svg,
        crate::web::qr::link_qr_png,
        crate::web::stats::trending,
        crate::web::whoami::whoami,
        crate::web::openapi::openapi_json,
        crate::web::openapi::api_docs_page,
        crate::web::pages::form::form_page,
        crate::web::pages::form::form_submit,
        crate::web::pages::form::form_upload,
        crate::web::pages::manage::manage_page,
        crate::web::pages::stats_page::stats_page,
        crate::metrics::serve_metrics,
    ),
    components(schemas(
        ErrorBody, ErrorCode, LinkInput, LinkChange, LinkBody, LinkPage, BulkAnswer, BulkResult,
        RowOutcome, Made, Refused, Summary, Deleted, WhoAmI, TrendingLinks, Trending,
        DomainStats, LinkStats, DayCount, HourCount, Share, ExportFormat, RuleBody, SplitBody,
        TargetClicks, VisitsBody, VisitBody, DomainsBody, DomainBody, RedirectsBody, RedirectsInput
    )),
    modifiers(&BearerToken),
    tags(
        (name = "links", description = "Create, read, change and delete links"),
        (name = "many", description = "Many links at once: bulk insert and export"),
        (name = "clicks", description = "Click counts"),
        (name = "pages", description = "HTML pages for people"),
        (name = "operations", description = "For monitoring and tools"),
    )
)]
pub struct ApiDoc;

/// The document, as `GET /api/openapi.json` answers it.
pub fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The page at `/api/docs`: it fetches the document from this writer and
/// draws every operation, its parameters, bodies and answers.
pub fn page() -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>shortlink API</title>\n<style>{}{DOCS_STYLE}</style>\n</head>\n<body>\n\
         <main class=\"wide\">\n<h1>shortlink API</h1>\n<p class=\"lead\" id=\"about\"></p>\n\
         <p class=\"nav\"><a href=\"/api/openapi.json\">OpenAPI document (JSON)</a> · \
         <a href=\"/\">Shorten a link</a> · <a href=\"/manage\">Manage your links</a></p>\n\
         <div id=\"operations\"><p>Loading…</p></div>\n<h2>Schemas</h2>\n<div id=\"schemas\"></div>\n\
         </main>\n<script>{DOCS_SCRIPT}</script>\n</body>\n</html>\n",
        crate::web::pages::page::STYLE
    )
}

const DOCS_STYLE: &str = r"
main.wide { max-width: 60rem; }
details { border: 1px solid var(--line); border-radius: .5rem; margin: .5rem 0; padding: .25rem .75rem; }
summary { cursor: pointer; padding: .35rem 0; }
.method { display: inline-block; min-width: 4.5rem; font-weight: 700; font-family: ui-monospace, monospace; }
.path { font-family: ui-monospace, monospace; }
code, pre { font-family: ui-monospace, monospace; font-size: .85rem; }
pre { white-space: pre-wrap; background: #8881; padding: .5rem; border-radius: .35rem; }
h3 { font-size: 1rem; margin: .75rem 0 .25rem; }
";

/// Draws the document with DOM calls only (no `innerHTML`): its texts
/// come from this writer, but are shown as text, never as markup.
/// The page's one script, whose digest its `Content-Security-Policy` allows.
pub const DOCS_SCRIPT: &str = r"
function el(tag, text, cls) {
  var e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function refName(ref) { return ref.split('/').pop(); }
function typeOf(s) {
  if (!s) return 'any';
  if (s.$ref) return refName(s.$ref);
  if (s.oneOf) return s.oneOf.map(typeOf).join(' | ');
  if (s.allOf) return s.allOf.map(typeOf).join(' & ');
  var t = Array.isArray(s.type) ? s.type.join(' | ') : (s.type || 'object');
  if (t.indexOf('array') >= 0 && s.items) t = t.replace('array', typeOf(s.items) + '[]');
  if (s.format) t += ' (' + s.format + ')';
  return t;
}
function schemaTable(s) {
  var box = el('div');
  if (s.description) box.appendChild(el('p', s.description));
  var parts = s.oneOf || s.allOf || [s];
  parts.forEach(function (part) {
    if (part.$ref) { box.appendChild(el('p', 'See ' + refName(part.$ref))); return; }
    var props = part.properties || {};
    var names = Object.keys(props);
    if (!names.length) { box.appendChild(el('p', typeOf(part))); return; }
    var table = el('table'), head = el('tr');
    ['Field', 'Type', 'Required', 'Description'].forEach(function (h) { head.appendChild(el('th', h)); });
    table.appendChild(head);
    names.forEach(function (n) {
      var p = props[n], row = el('tr');
      row.appendChild(el('td', n, 'path'));
      row.appendChild(el('td', p.enum ? p.enum.join(' | ') : typeOf(p)));
      row.appendChild(el('td', (part.required || []).indexOf(n) >= 0 ? 'yes' : ''));
      row.appendChild(el('td', p.description || ''));
      table.appendChild(row);
    });
    box.appendChild(table);
  });
  return box;
}
function content(c) {
  var box = el('div');
  Object.keys(c || {}).forEach(function (type) {
    var line = el('p');
    line.appendChild(el('code', type));
    if (c[type].schema) line.appendChild(document.createTextNode(': ' + typeOf(c[type].schema)));
    box.appendChild(line);
  });
  return box;
}
fetch('/api/openapi.json').then(function (r) { return r.json(); }).then(function (doc) {
  document.getElementById('about').textContent = doc.info.description + ' (version ' + doc.info.version + ')';
  var ops = document.getElementById('operations');
  ops.textContent = '';
  Object.keys(doc.paths).forEach(function (path) {
    var item = doc.paths[path];
    Object.keys(item).forEach(function (method) {
      var op = item[method];
      var d = el('details');
      d.id = (op.operationId || method + path);
      var s = el('summary');
      s.appendChild(el('span', method.toUpperCase(), 'method'));
      s.appendChild(el('span', path, 'path'));
      s.appendChild(document.createTextNode(' ' + (op.summary || '')));
      d.appendChild(s);
      if (op.description) d.appendChild(el('p', op.description));
      if (op.security) {
        var who = op.security.some(function (x) { return !Object.keys(x).length; })
          ? 'An access token is optional.' : 'Needs an access token (Authorization: Bearer).';
        d.appendChild(el('p', who, 'hint'));
      }
      if (op.parameters && op.parameters.length) {
        d.appendChild(el('h3', 'Parameters'));
        var t = el('table');
        op.parameters.forEach(function (p) {
          var row = el('tr');
          row.appendChild(el('td', p.name, 'path'));
          row.appendChild(el('td', p.in));
          row.appendChild(el('td', typeOf(p.schema)));
          row.appendChild(el('td', p.description || ''));
          t.appendChild(row);
        });
        d.appendChild(t);
      }
      if (op.requestBody) {
        d.appendChild(el('h3', 'Body'));
        if (op.requestBody.description) d.appendChild(el('p', op.requestBody.description));
        d.appendChild(content(op.requestBody.content));
      }
      d.appendChild(el('h3', 'Answers'));
      var answers = el('table');
      Object.keys(op.responses).forEach(function (status) {
        var r = op.responses[status], row = el('tr');
        row.appendChild(el('td', status, 'path'));
        row.appendChild(el('td', r.description));
        var cell = el('td');
        cell.appendChild(content(r.content));
        row.appendChild(cell);
        answers.appendChild(row);
      });
      d.appendChild(answers);
      ops.appendChild(d);
    });
  });
  var schemas = document.getElementById('schemas');
  var all = (doc.components && doc.components.schemas) || {};
  Object.keys(all).forEach(function (name) {
    var d = el('details');
    d.id = 'schema-' + name;
    d.appendChild(el('summary', name));
    d.appendChild(schemaTable(all[name]));
    schemas.appendChild(d);
  });
}, function (e) {
  document.getElementById('operations').textContent = 'The document could not be loaded: ' + e;
});
";

/// This API described as OpenAPI 3.1: every endpoint, its parameters,
/// bodies, statuses and error bodies.
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "operations",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json"))
)]
pub(crate) async fn openapi_json() -> HttpResponse {
    static DOCUMENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let document = DOCUMENT.get_or_init(|| serde_json::to_string(&document()).unwrap_or_default());
    HttpResponse::Ok()
        .content_type("application/json")
        .body(document.as_str())
}

/// The OpenAPI document drawn for people, with nothing loaded from other
/// sites.
#[utoipa::path(
    get,
    path = "/api/docs",
    tag = "pages",
    responses((status = 200, description = "The API's documentation page", content_type = "text/html"))
)]
pub(crate) async fn api_docs_page() -> HttpResponse {
    html_page(StatusCode::OK, Some(DOCS_SCRIPT)).body(page())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every `(method, path)` the writer routes, read from `routes()` in
    /// `web/mod.rs`: `.route("PATH", web::METHOD()...)` and
    /// `web::resource("PATH").guard(guard::METHOD())`.
    fn routed() -> BTreeSet<(String, String)> {
        let source = include_str!("mod.rs");
        let start = source
            .find("pub fn routes(")
            .expect("routes() in web/mod.rs");
        let end = start + source[start..].find("\n}\n").expect("the end of routes()");
        let body: String = source[start..end].split_whitespace().collect();
        let mut routes = BTreeSet::new();
        for (marker, method_at) in [(".route(\"", "web::"), ("web::resource(\"", "guard::")] {
            for piece in body.split(marker).skip(1) {
                let (path, rest) = piece.split_once('"').expect("a quoted path");
                let method = rest
                    .split_once(method_at)
                    .and_then(|(_, m)| m.split_once('('))
                    .map(|(m, _)| m.to_lowercase())
                    .expect("a method");
                routes.insert((method, path.to_owned()));
            }
        }
        routes
    }

    #[test]
    fn every_route_is_documented_and_every_documented_route_routed() {
        let routed = routed();
        assert!(routed.len() >= 20, "{routed:?}");
        let document = serde_json::to_value(document()).unwrap();
        let documented: BTreeSet<(String, String)> = document["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .keys()
                    .map(|method| (method.clone(), path.clone()))
            })
            .collect();
        assert_eq!(routed, documented);
    }

    #[test]
    fn every_documented_link_field_is_one_the_api_takes() {
        let document = serde_json::to_value(document()).unwrap();
        let schemas = &document["components"]["schemas"];
        let fields = |name: &str| -> BTreeSet<String> {
            schemas[name]["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        };
        let taken: BTreeSet<String> = crate::web::links::LINK_FIELDS
            .iter()
            .map(|field| field.name().to_owned())
            .collect();
        assert_eq!(fields("LinkInput"), taken);
        // Neither a key nor a domain changes: `?domain=` names the link.
        let changed: BTreeSet<String> = taken
            .into_iter()
            .filter(|f| f != "key" && f != "domain")
            .collect();
        assert_eq!(fields("LinkChange"), changed);
    }

    /// A link's answer always holds what following it shows; the rest
    /// only for its owner or an admin, so the document must not promise it.
    #[test]
    fn a_link_body_promises_only_what_anyone_sees() {
        let document = serde_json::to_value(document()).unwrap();
        let link = &document["components"]["schemas"]["LinkBody"];
        assert_eq!(
            link["required"],
            serde_json::json!(["domain", "key", "url", "short_url"]),
            "{link}"
        );
        for field in [
            "expires_at",
            "expired_url",
            "expired",
            "max_clicks",
            "owner",
            "forward_query",
            "rules",
            "split",
        ] {
            assert!(link["properties"][field].is_object(), "{field}: {link}");
        }
    }

    /// Every error code a client may get is in the document: the
    /// `ErrorBody` schema's `code` is the `ErrorCode` enum, which lists each.
    #[test]
    fn every_error_code_is_documented() {
        let document = serde_json::to_value(document()).unwrap();
        let schemas = &document["components"]["schemas"];
        assert_eq!(
            schemas["ErrorBody"]["properties"]["code"]["$ref"], "#/components/schemas/ErrorCode",
            "{}",
            schemas["ErrorBody"]
        );
        assert!(schemas["ErrorBody"]["required"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("code")));
        let documented: BTreeSet<String> = schemas["ErrorCode"]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{}", schemas["ErrorCode"]))
            .iter()
            .map(|code| code.as_str().unwrap().to_owned())
            .collect();
        for code in ErrorCode::ALL {
            assert!(
                documented.contains(&code.as_str()),
                "{code:?} is not in the document's ErrorCode"
            );
        }
        assert_eq!(documented.len(), ErrorCode::ALL.len());
    }
}
