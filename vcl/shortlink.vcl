vcl 4.1;

# Short links served from Redis by vmod_shortlink, for the default
# configuration: Redis at redis://127.0.0.1:6380/0, hash prefix "short:",
# split 2, links under /l/. The writer generates this file from its own
# configuration; keep hand edits in step with it.

import shortlink;
import std;

# Every fetch goes to the VMOD's native backend; there is no HTTP origin.
backend default none;

# Who may send PURGE /l/<key>: the writer, after it stores a link.
acl shortlink_purgers {
    "127.0.0.1";
    "::1";
}

sub vcl_init {
    new links = shortlink.redirector(
        redis = "redis://127.0.0.1:6380/0",
        prefix = "short:",
        split = 2,
        connect_timeout = 200ms,
        command_timeout = 200ms,
        pool_size = 16,
        status = 301,
        ttl = 86400s,
        negative_ttl = 60s,
        cache_control = "public, max-age=86400");
}

sub vcl_recv {
    if (req.url == "/" || req.url == "/health") {
        return (synth(200, "OK"));
    }
    if (req.url !~ "^/l/") {
        return (synth(404, "Not Found"));
    }
    # Tracking parameters must not split the cache: /l/Lm25?utm=x is /l/Lm25.
    set req.url = regsub(req.url, "[?#].*$", "");
    # The key rule, checked before any lookup: keys that break it never
    # reach the VMOD, let alone Redis.
    if (req.url !~ "^/l/[A-Za-z0-9_-]{3,64}$") {
        return (synth(404, "Not Found"));
    }
    if (req.method == "PURGE") {
        if (client.ip !~ shortlink_purgers) {
            return (synth(403, "Forbidden"));
        }
        return (purge);
    }
    if (req.method != "GET" && req.method != "HEAD") {
        return (synth(405, "Method Not Allowed"));
    }
    set req.backend_hint = links.backend();
    # Short links look the same to everyone: cookies and credentials must
    # not turn them into uncacheable passes.
    unset req.http.Cookie;
    unset req.http.Authorization;
    # While Redis answers, serve a just-expired link at most 10s stale while
    # it is refreshed; while Redis is away, serve it for the object's grace.
    if (std.healthy(req.backend_hint)) {
        set req.grace = 10s;
    }
    return (hash);
}

sub vcl_hash {
    # One cache entry per key, whatever Host the link was requested through.
    hash_data(req.url);
    return (lookup);
}

sub vcl_backend_response {
    set beresp.ttl = links.ttl(beresp.status);
    set beresp.grace = 1d;
    set beresp.keep = 0s;
    # Skip the built-in rules: a 0s TTL there would make a hit-for-miss.
    return (deliver);
}

sub vcl_backend_error {
    # Redis did not answer. A background refresh keeps the stale link it
    # was refreshing; a foreground fetch answers 503, cached by nobody, and
    # leaves no hit-for-miss behind, so the next request coalesces again.
    if (bereq.is_bgfetch) {
        return (abandon);
    }
    set beresp.status = 503;
    set beresp.ttl = 0s;
    set beresp.grace = 0s;
    set beresp.http.Content-Type = "text/html; charset=utf-8";
    set beresp.http.Cache-Control = "no-store";
    set beresp.http.Retry-After = "1";
    synthetic({"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Try again</title></head><body><h1>Try again in a moment</h1><p>The link store is not answering right now.</p></body></html>
"});
    return (deliver);
}

sub vcl_deliver {
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
    unset resp.http.Via;
}

sub vcl_synth {
    set resp.http.Content-Type = "text/html; charset=utf-8";
    if (resp.status == 200) {
        set resp.http.Content-Type = "application/json";
        set resp.http.Cache-Control = "no-store";
        if (std.healthy(links.backend())) {
            synthetic("""{"status":"ok","redis":"up"}
""");
        } else {
            synthetic("""{"status":"ok","redis":"down"}
""");
        }
        return (deliver);
    }
    set resp.http.Cache-Control = "no-cache";
    synthetic({"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>"} + resp.reason + {"</title></head><body><h1>"} + resp.reason + {"</h1></body></html>
"});
    return (deliver);
}
