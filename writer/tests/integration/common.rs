//! The suite's servers, and the helpers its test files share.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use shortlink_writer::config::{AccessToken, Config, Settings};
use shortlink_writer::links::shortener::Shortener;
use test_support::{
    free_port, generate_vcl, release_dir, work_dir, write_country_database, Persistence, Redis,
    Varnish, Writer,
};

pub type Test = fn(&Suite) -> Result<(), String>;

/// The access token of the suite's writer, given without a name.
pub const TEST_TOKEN: &str = "test-token-0123456789abcdef0123456789";

/// Tokens of the suite's writer named `alice` and `bob`, and `ops`, an admin.
pub const ALICE_TOKEN: &str = "alice-token-0123456789abcdef0123456789";
pub const BOB_TOKEN: &str = "bob-token-0123456789abcdef0123456789ab";
pub const ADMIN_TOKEN: &str = "ops-token-0123456789abcdef0123456789ab";

/// The suite's `varnish.purge_secret`: the writer sends it with every purge
/// and warming request, and the suite's VCL requires it.
pub const PURGE_SECRET: &str = "suite-purge-secret-0123456789";

/// A token of its own for the export test, whose links no other test lists.
pub const CAROL_TOKEN: &str = "carol-token-0123456789abcdef0123456789";

/// Tokens of their own for the Shlink SDK's tests, which list their links:
/// `dana`, and `erin`, limited to [`GO_DOMAIN`].
pub const DANA_TOKEN: &str = "dana-token-0123456789abcdef0123456789a";
pub const ERIN_TOKEN: &str = "erin-token-0123456789abcdef0123456789a";

/// The suite's second short domain, its links at the root (on Varnish's
/// port), and another name of it: the same key there is another link.
pub const GO_DOMAIN: &str = "go.test";
pub const GO_ALIAS: &str = "go-alias.test";

/// The suite's domains, the default one (`public_base_url`'s) first.
pub const DOMAINS: [&str; 2] = ["127.0.0.1", GO_DOMAIN];

/// A token named `shop`, limited to [`GO_DOMAIN`].
pub const SHOP_TOKEN: &str = "shop-token-0123456789abcdef0123456789a";
/// The token YOURLS' client signs in with; no other test uses it.
pub const YOURLS_TOKEN: &str = "yo-token-0123456789abcdef0123456789abc";

pub const WRITER: &str = env!("CARGO_BIN_EXE_shortlink");

/// Redis, Varnish, the writer and a landing page, shared by every test.
pub struct Suite {
    pub dir: PathBuf,
    pub redis: Redis,
    pub varnish: Varnish,
    pub writer_url: String,
    pub landing_url: String,
    pub config_file: PathBuf,
    _writer: Writer,
}

impl Suite {
    pub fn start() -> Result<Self, String> {
        let dir = work_dir("writer")?;
        let redis = Redis::start(&dir.join("redis"), Persistence::Scratch, "")?;
        let varnish_port = free_port()?;
        let writer_port = free_port()?;
        let config_file = dir.join("shortlink.toml");
        // Every click of the suite comes from loopback, placed in the
        // Netherlands so that the statistics have a country to show.
        let countries = dir.join("countries.mmdb");
        write_country_database(&countries, &[("127.0.0.0/8", "NL")])?;
        fs::write(
            &config_file,
            format!(
                "listen = \"127.0.0.1:{writer_port}\"\n\
                 public_base_url = \"http://127.0.0.1:{varnish_port}/l/\"\n\
                 # The browser test's landing page is on loopback.\n\
                 allow_private_targets = true\n\
                 [titles]\nprivate_addresses = true\n\
                 [redis]\nurl = \"{}\"\n\
                 # 404s cached, so that inserts have one to purge (the\n\
                 # defaults cache none, and an insert purges nothing).\n\
                 [redirect]\nnegative_ttl_s = 60\n\
                 [varnish]\npurge_url = \"http://127.0.0.1:{varnish_port}\"\n\
                 purge_secret = \"{PURGE_SECRET}\"\n\
                 vmod = \"{}\"\n\
                 [access]\ntokens = [\"{TEST_TOKEN}\",\n\
                 {{ name = \"alice\", token = \"{ALICE_TOKEN}\" }},\n\
                 {{ name = \"bob\", token = \"{BOB_TOKEN}\" }},\n\
                 {{ name = \"carol\", token = \"{CAROL_TOKEN}\" }},\n\
                 {{ name = \"dana\", token = \"{DANA_TOKEN}\" }},\n\
                 {{ name = \"erin\", token = \"{ERIN_TOKEN}\", domains = [\"{GO_DOMAIN}\"] }},\n\
                 {{ name = \"ops\", token = \"{ADMIN_TOKEN}\", admin = true }},\n\
                 {{ name = \"shop\", token = \"{SHOP_TOKEN}\", domains = [\"{GO_DOMAIN}\"] }},\n\
                 {{ name = \"yo\", token = \"{YOURLS_TOKEN}\" }}]\n\
                 # Every anonymous client of the suite is 127.0.0.1, the\n\
                 # tests of the rate limit have writers of their own.\n\
                 [rate_limit]\nburst = 10000\n\
                 [clicks]\ngeoip = \"{}\"\n\
                 [[domains]]\nbase_url = \"http://{GO_DOMAIN}:{varnish_port}/\"\n\
                 aliases = [\"{GO_ALIAS}\"]\n",
                redis.url,
                release_dir().join("libvmod_shortlink.so").display(),
                countries.display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let vcl_file = dir.join("shortlink.vcl");
        generate_vcl(Path::new(WRITER), &config_file, &vcl_file, &[])?;
        let varnish = Varnish::start_on(&dir, &vcl_file, varnish_port)?;
        let writer = Writer::start(Path::new(WRITER), &dir, &config_file, writer_port, &[])?;
        let writer_url = writer.base_url();
        Ok(Self {
            landing_url: start_landing_server(&writer_url)?,
            writer_url,
            dir,
            redis,
            varnish,
            config_file,
            _writer: writer,
        })
    }

    /// Settings for in-process tests: this suite's Redis, keys under `prefix`,
    /// no purging (these tests have no Varnish of their own).
    pub fn settings(&self, prefix: &str, split: usize) -> Settings {
        self.settings_with(prefix, split, |_| {})
    }

    /// [`Self::settings`], changed by `edit`.
    pub fn settings_with(
        &self,
        prefix: &str,
        split: usize,
        edit: impl FnOnce(&mut Config),
    ) -> Settings {
        let mut config = Config::default();
        config.redis.url.clone_from(&self.redis.url);
        prefix.clone_into(&mut config.redis.hash_prefix);
        config.redis.split = split;
        config.varnish.purge_url = String::new();
        config.access.tokens = vec![AccessToken::new(TEST_TOKEN)];
        edit(&mut config);
        Settings::new(config).expect("test settings are valid")
    }

    pub fn shortener(&self, prefix: &str) -> Shortener {
        Shortener::new(self.settings(prefix, 2)).expect("shortener")
    }

    /// Every links' hash under `prefix` in Redis. The owners' indexes
    /// (`<prefix>@...`) and the writers' other keys (`<prefix>form:key`,
    /// counts, the purge queue: `:` is no key character) are not.
    pub fn hashes(&self, prefix: &str) -> Result<Vec<String>, String> {
        let names: Vec<String> = self.redis.query(&["KEYS", &format!("{prefix}*")])?;
        Ok(names
            .into_iter()
            .filter(|name| !name[prefix.len()..].contains(['@', ':']))
            .collect())
    }

    pub fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into()
    }
}

pub fn run_writer(args: &[&str]) -> Result<String, String> {
    test_support::command_output(WRITER, args)
}

/// A page the test's short links lead to, on an origin of its own; its
/// `/attack` page posts the writer's form from there, as a hostile site
/// would; its `/shlink` page calls the writer's Shlink API from there with
/// Shlink's SDK (served at `/sdk/`), as Shlink's web app does.
fn start_landing_server(writer_url: &str) -> Result<String, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let attack = format!(
        "<!DOCTYPE html><html><head><title>Win a prize</title></head><body>\
         <form method=\"post\" action=\"{writer_url}/\">\
         <input name=\"url\" value=\"{CROSS_SITE_URL}\"></form>\
         <script>document.forms[0].submit()</script></body></html>"
    );
    let attack: &'static str = attack.leak();
    let shlink: &'static str = shlink_page(writer_url).leak();
    // A thread per connection: a browser may open a connection it does not
    // use at once, and that must not hold up the one it does.
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer_landing(&stream, attack, shlink));
        }
    });
    Ok(format!("http://127.0.0.1:{port}/welcome"))
}

fn answer_landing(stream: &std::net::TcpStream, attack: &str, shlink: &str) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let _ = reader.read_line(&mut line);
    let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let sdk_file;
    let huge;
    let (content_type, body) = match path.as_str() {
        "/attack" => ("text/html", attack),
        // Pages whose titles a new link's are read from.
        "/titled" => (
            "text/html",
            "<html><head><title>A landing &amp; its title</title>",
        ),
        "/untitled" => ("text/html", "<html><body>No title here</body></html>"),
        "/titled-elsewhere" => return redirect(stream, "/titled"),
        "/loop" => return redirect(stream, "/loop"),
        "/slow" => {
            std::thread::sleep(Duration::from_secs(5));
            ("text/html", "<title>Too late</title>")
        }
        "/huge" => {
            huge = format!(
                "<html><head>{}<title>Past the bound</title>",
                " ".repeat(1 << 20)
            );
            ("text/html", huge.as_str())
        }
        "/shlink" => ("text/html", shlink),
        "/sdk/index.js" | "/sdk/fetch.js" => {
            let name = path.trim_start_matches("/sdk/");
            sdk_file = fs::read_to_string(format!("{SHLINK_SDK_DIST}/{name}")).unwrap_or_default();
            ("text/javascript", sdk_file.as_str())
        }
        _ => (
            "text/html",
            "<!DOCTYPE html><html><head><title>Landed</title></head>\
             <body><h1 id=\"landed\">You landed</h1></body></html>",
        ),
    };
    let _ = write!(
        &*stream,
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
}

fn redirect(mut stream: &std::net::TcpStream, to: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\
         Connection: close\r\n\r\n"
    );
}

/// Where `make test` installs Shlink's SDK: its browser modules.
const SHLINK_SDK_DIST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/shlink/node_modules/@shlinkio/shlink-js-sdk/dist"
);

/// The tag the landing server's `/shlink` page gives the link it creates.
pub const SHLINK_PAGE_TAG: &str = "from-another-origin";

/// A page that creates a link through the writer's Shlink API with Shlink's
/// SDK, lists it back by its tag, and shows what it got in `#result`.
fn shlink_page(writer_url: &str) -> String {
    format!(
        "<!DOCTYPE html><html><head><title>Shlink app</title></head><body>\
         <p id=\"result\">waiting</p>\
         <script type=\"module\">\
         import {{ ShlinkApiClient }} from '/sdk/index.js';\
         import {{ FetchHttpClient }} from '/sdk/fetch.js';\
         const api = new ShlinkApiClient(new FetchHttpClient(), \
           {{ baseUrl: '{writer_url}', apiKey: '{DANA_TOKEN}' }});\
         const out = document.getElementById('result');\
         try {{\
           const made = await api.createShortUrl({{ longUrl: 'https://example.org/from-a-browser', \
             tags: ['{SHLINK_PAGE_TAG}'] }});\
           const listed = await api.listShortUrls({{ tags: ['{SHLINK_PAGE_TAG}'] }});\
           out.textContent = 'listed ' + listed.data.map((url) => url.shortCode).join(',') \
             + ' made ' + made.shortCode;\
         }} catch (error) {{ out.textContent = 'failed ' + (error.detail || error); }}\
         </script></body></html>"
    )
}

/// The URL the landing server's `/attack` page tries to shorten.
pub const CROSS_SITE_URL: &str = "https://example.org/planted-by-another-site";

pub fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(message())
    }
}

/// The writer's routes in an in-process actix service.
macro_rules! api_app {
    ($shortener:expr) => {
        ::actix_web::test::init_service({
            let shortener = $shortener;
            let shortener_settings = (*shortener.settings).clone();
            let guard = shortlink_writer::access::Gatekeeper::new(&shortener.settings)
                .expect("a guard for the test settings");
            ::actix_web::App::new()
                .app_data(::actix_web::web::Data::new(shortener))
                .app_data(::actix_web::web::Data::new(guard))
                .app_data(::actix_web::web::Data::new(
                    shortlink_writer::metrics::Metrics::new(),
                ))
                .configure(|config| shortlink_writer::web::routes(config, &shortener_settings))
        })
        .await
    };
}

macro_rules! call {
    ($app:expr, $request:expr) => {{
        let response = ::actix_web::test::call_service(&$app, $request.to_request()).await;
        let status = response.status().as_u16();
        let body: serde_json::Value = ::actix_web::test::read_body_json(response).await;
        (status, body)
    }};
}

/// Loads the form as a browser would (its cookie and form token), then
/// posts `fields` with them and with `headers`.
pub fn post_form(
    agent: &ureq::Agent,
    writer_url: &str,
    fields: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> Result<(u16, String), String> {
    let (cookie, csrf) = form_credentials(agent, writer_url)?;
    let mut fields = fields.to_vec();
    fields.push(("csrf", &csrf));
    send_form(agent, writer_url, Some(&cookie), &fields, headers)
}

/// Posts `fields` to `url` with exactly this form cookie and these headers.
pub fn send_form(
    agent: &ureq::Agent,
    url: &str,
    cookie: Option<&str>,
    fields: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> Result<(u16, String), String> {
    let mut request = agent.post(url);
    if let Some(cookie) = cookie {
        request = request.header("cookie", format!("shortlink_csrf={cookie}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request
        .send_form(fields.to_vec())
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let page = response
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok((status, page))
}

/// The form cookie and form token a fresh browser gets with the page.
pub fn form_credentials(agent: &ureq::Agent, writer_url: &str) -> Result<(String, String), String> {
    let mut response = agent.get(writer_url).call().map_err(|e| e.to_string())?;
    let cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("shortlink_csrf="))
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
        .ok_or("the form page set no shortlink_csrf cookie")?;
    let page = response
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    let csrf = page
        .split_once("name=\"csrf\" value=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(value, _)| value.to_owned())
        .ok_or("the form has no csrf field")?;
    Ok((cookie, csrf))
}

pub fn get(agent: &ureq::Agent, url: &str) -> Result<(u16, Option<String>), String> {
    let response = agent
        .get(url)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok((response.status().as_u16(), location))
}

/// Runs `varnishd -C` on the VCL of `config_toml` as Varnish would load it:
/// the standalone VCL, and the `--include` form included by a site's VCL
/// with a backend and subroutines of its own (unless `include` is false).
pub fn compiles(dir: &Path, name: &str, config_toml: &str, include: bool) -> Result<(), String> {
    let config = dir.join(format!("{name}.toml"));
    fs::write(&config, config_toml).map_err(|e| e.to_string())?;
    let standalone = dir.join(format!("{name}.vcl"));
    generate_vcl(Path::new(WRITER), &config, &standalone, &[])?;
    let mut files = vec![("standalone", standalone)];
    if include {
        let included = dir.join(format!("{name}-include.vcl"));
        generate_vcl(Path::new(WRITER), &config, &included, &["--include"])?;
        let site = dir.join(format!("{name}-site.vcl"));
        fs::write(
            &site,
            format!(
                "vcl 4.1;\nimport std;\ninclude \"{}\";\n\
                 backend site {{ .host = \"127.0.0.1\"; .port = \"8080\"; }}\n\
                 sub vcl_recv {{ if (req.url == \"/private\") {{ return (pass); }} }}\n\
                 sub vcl_backend_response {{ set beresp.ttl = 5m; }}\n\
                 sub vcl_deliver {{ set resp.http.X-Site = std.toupper(\"yes\"); }}\n",
                included.display()
            ),
        )
        .map_err(|e| e.to_string())?;
        files.push(("included", site));
    }
    for (form, file) in files {
        let mut args = test_support::varnishd_args()?;
        args.extend([
            "-C".into(),
            "-n".into(),
            dir.join(format!("{name}-varnish")).display().to_string(),
            "-f".into(),
            file.display().to_string(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        test_support::command_output("varnishd", &args)
            .map(drop)
            .map_err(|e| format!("{name} ({form}): {e}"))?;
    }
    Ok(())
}

/// One API answer: status, `ETag` and JSON body (`null` when empty).
pub struct Answer {
    pub status: u16,
    pub etag: Option<String>,
    pub body: Value,
}

/// Sends `method path` to the suite's writer with `token` and `body`.
pub fn api(
    suite: &Suite,
    method: &str,
    path: &str,
    token: Option<&str>,
    if_match: Option<&str>,
    body: Option<&Value>,
) -> Result<Answer, String> {
    api_at(&suite.writer_url, method, path, token, if_match, body)
}

/// [`api`] to the writer at `writer_url`.
pub fn api_at(
    writer_url: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    if_match: Option<&str>,
    body: Option<&Value>,
) -> Result<Answer, String> {
    let agent = Suite::agent();
    let url = format!("{writer_url}{path}");
    let mut request = ureq::http::Request::builder().method(method).uri(&url);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(tag) = if_match {
        request = request.header("if-match", tag);
    }
    let request = match body {
        Some(body) => request
            .header("content-type", "application/json")
            .body(body.to_string()),
        None => request.body(String::new()),
    }
    .map_err(|e| e.to_string())?;
    let mut response = agent
        .run(request)
        .map_err(|e| format!("{method} {url}: {e}"))?;
    let etag = response
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = response
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).map_err(|e| format!("{method} {url}: {e}: {text}"))?
    };
    Ok(Answer {
        status: response.status().as_u16(),
        etag,
        body,
    })
}

/// Creates a link to `url` with `token`, answering its key.
pub fn create(suite: &Suite, token: Option<&str>, body: &Value) -> Result<String, String> {
    let created = create_at(&suite.writer_url, token, body)?;
    created["key"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| created.to_string())
}

/// Creates a link through the writer at `writer_url` with `token`,
/// answering the writer's 201 answer.
pub fn create_at(writer_url: &str, token: Option<&str>, body: &Value) -> Result<Value, String> {
    let answer = api_at(writer_url, "POST", "/api/links", token, None, Some(body))?;
    ensure(answer.status == 201, || {
        format!("create {body}: {} {}", answer.status, answer.body)
    })?;
    Ok(answer.body)
}

/// `GET path` from the suite's Varnish with `Host: host`, as a browser
/// that reached it under that name with `user_agent`: the status and the
/// `Location`.
pub fn varnish_get(
    suite: &Suite,
    host: &str,
    path: &str,
    user_agent: &str,
) -> Result<(u16, Option<String>), String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", suite.varnish.port))
        .map_err(|e| format!("Varnish: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {user_agent}\r\n\
         Connection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut stream, &mut answer).map_err(|e| e.to_string())?;
    let head = answer.split("\r\n\r\n").next().unwrap_or_default();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or_else(|| format!("GET {path} on {host}: {head:?}"))?;
    let location = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("location")
            .then(|| value.trim().to_owned())
    });
    Ok((status, location))
}
