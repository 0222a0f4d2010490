#!/usr/bin/env python3
"""`make bench`: every redirect path measured against Varnish's own ceiling.

Starts its own Redis (the shipped configuration), Varnish (the generated VCL)
and writer on free loopback ports, loads links in the storage format, drives
load with wrk, prints a table and writes target/bench/latest.json. Everything
it starts is stopped when it ends, whatever happens.

BENCH_QUICK=1 runs a short version (a smoke check; its figures mean little).
BENCH_RUNS=N repeats each scenario N times and reports the median (default 3).
BENCH_DURATION=S and BENCH_LINKS=N override the run length and the link count,
and BENCH_SCENARIOS=ceiling,miss runs only those (no JSON is written then):
for profiling one path at length. Varnish reaches Redis over Redis's unix
socket; BENCH_REDIS=tcp makes it use loopback TCP instead, and
BENCH_REDIS_EXTRA adds lines to the [redis] section of the writer's
configuration (and so to the VMOD's settings), e.g. "pool_size = 64".
"""

import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "target" / "release"
OUT = ROOT / "target" / "bench"
WORK = OUT / "work"
WRK_DIR = ROOT / "bench" / "wrk"

QUICK = os.environ.get("BENCH_QUICK") == "1"
RUNS = int(os.environ.get("BENCH_RUNS", "1" if QUICK else "3"))
DURATION = int(os.environ.get("BENCH_DURATION", "2" if QUICK else "10"))
CONNECTIONS = 64
THREADS = 2
LINKS = int(os.environ.get("BENCH_LINKS", "20000" if QUICK else "1000000"))
HIT_LINKS = 1_000 if QUICK else 10_000
ONLY = [name for name in os.environ.get("BENCH_SCENARIOS", "").split(",") if name]
SPLIT = 2
PREFIX = "short:"
BENCH_TOKEN = "bench-token-" + "0123456789abcdef" * 2


def say(message):
    print(f"==> {message}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, what, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"bench: {what} did not come up on port {port}")


class Processes:
    """Everything the bench starts, stopped on exit in reverse order."""

    def __init__(self):
        self.started = []

    def start(self, args, log_name, **kwargs):
        log = open(WORK / log_name, "wb")
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kwargs)
        self.started.append(process)
        return process

    def stop_all(self):
        for process in reversed(self.started):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.started):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def digest_key(url):
    """The writer's full key for `url`: SHA-1 in URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(hashlib.sha1(url.encode()).digest()).decode().rstrip("=")


def make_links(count, tag):
    """`count` links with keys chosen as the writer chooses them."""
    used = set()
    links = []
    for i in range(count):
        url = f"https://example.org/{tag}/{i}"
        digest = digest_key(url)
        length = 4
        while digest[:length] in used:
            length += 1
        key = digest[:length]
        used.add(key)
        links.append((key, url))
    return links


def resp(*parts):
    out = [f"*{len(parts)}\r\n".encode()]
    for part in parts:
        data = part.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def load(redis_port, commands):
    """Pipes RESP commands into Redis with redis-cli --pipe."""
    result = subprocess.run(
        ["redis-cli", "-p", str(redis_port), "--pipe"],
        input=b"".join(commands), capture_output=True, check=False)
    if result.returncode != 0 or b"errors: 0" not in result.stdout:
        raise SystemExit(f"bench: loading Redis failed: {result.stdout[-300:]!r} {result.stderr[-300:]!r}")


def redis_memory(port):
    info = subprocess.run(["redis-cli", "-p", str(port), "INFO", "memory"],
                          capture_output=True, text=True, check=True).stdout
    for line in info.splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
    raise SystemExit("bench: no used_memory in INFO memory")


def start_redis(processes, name, port):
    data = WORK / name
    data.mkdir(parents=True, exist_ok=True)
    processes.start(["redis-server", str(ROOT / "redis" / "redis.conf"), "--port", str(port),
                     "--dir", str(data), "--daemonize", "no",
                     "--unixsocket", str(data / "redis.sock"), "--unixsocketperm", "700"], f"{name}.log")
    wait_for_port(port, name)


def varnishadm(workdir, *args):
    result = subprocess.run(["varnishadm", "-n", str(workdir), *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"bench: varnishadm {' '.join(args)} failed: {result.stdout}{result.stderr}")
    return result.stdout


def wrk(url, script, args, connections=CONNECTIONS, duration=DURATION):
    command = ["wrk", "-t", str(THREADS), "-c", str(connections), "-d", f"{duration}s",
               "--timeout", "5s", "-s", str(WRK_DIR / script), url, "--", *args]
    result = subprocess.run(command, capture_output=True, text=True)
    for line in result.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            figures = json.loads(line[len("BENCH_JSON "):])
            seconds = figures["duration_us"] / 1e6
            return {
                "rps": round(figures["requests"] / seconds, 1),
                "p50_ms": round(figures["p50_us"] / 1000, 3),
                "p99_ms": round(figures["p99_us"] / 1000, 3),
                "errors": figures["errors"],
                "reused_keys": figures["reused_keys"],
            }
    raise SystemExit(f"bench: wrk gave no figures:\n{result.stdout}\n{result.stderr}")


def median_of(runs):
    """The run with the median rate, so its figures belong together."""
    ordered = sorted(runs, key=lambda r: r["rps"])
    chosen = dict(ordered[len(ordered) // 2])
    chosen["errors"] = max(r["errors"] for r in runs)
    chosen["runs_rps"] = [r["rps"] for r in runs]
    return chosen


def write_keys(name, keys):
    path = WORK / f"{name}.keys"
    path.write_text("".join(f"{key}\n" for key in keys))
    return path


def main():
    for needed in [RELEASE / "shortlink", RELEASE / "libvmod_shortlink.so"]:
        if not needed.exists():
            raise SystemExit(f"bench: {needed} is missing: run `make build` first")
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    processes = Processes()
    try:
        return run(processes)
    finally:
        processes.stop_all()


def run(processes):
    redis_port, plain_port, varnish_port, writer_port = (free_port() for _ in range(4))
    start_redis(processes, "redis", redis_port)
    start_redis(processes, "redis-plain", plain_port)

    say(f"generating {LINKS} links")
    links = make_links(LINKS, "p")
    url_bytes = statistics.mean(len(url) for _, url in links)

    say("memory: hash layout vs plain keys")
    empty_hash, empty_plain = redis_memory(redis_port), redis_memory(plain_port)
    load(redis_port, [resp("HSET", PREFIX + key[:SPLIT], key[SPLIT:], url) for key, url in links])
    load(plain_port, [resp("SET", PREFIX + key, url) for key, url in links])
    hash_bytes = (redis_memory(redis_port) - empty_hash) / LINKS
    plain_bytes = (redis_memory(plain_port) - empty_plain) / LINKS
    encodings = subprocess.run(
        ["redis-cli", "-p", str(redis_port), "OBJECT", "ENCODING", PREFIX + links[0][0][:SPLIT]],
        capture_output=True, text=True).stdout.strip()

    # Varnish and Redis share the machine: a unix socket spares both the
    # loopback TCP stack on every lookup.
    redis_url = (f"redis://127.0.0.1:{redis_port}/0" if os.environ.get("BENCH_REDIS") == "tcp"
                 else f"unix://{WORK / 'redis' / 'redis.sock'}?db=0")
    config = WORK / "shortlink.toml"
    config.write_text(
        f'listen = "127.0.0.1:{writer_port}"\n'
        f'public_base_url = "http://127.0.0.1:{varnish_port}/l/"\n'
        f'[redis]\nurl = "{redis_url}"\n{os.environ.get("BENCH_REDIS_EXTRA", "")}\n'
        f'[varnish]\npurge_url = "http://127.0.0.1:{varnish_port}"\n'
        f'vmod = "{RELEASE / "libvmod_shortlink.so"}"\n'
        # The 16 insert clients share one address: as token holders they are
        # not rate limited, as a real bulk importer would not be.
        f'[access]\ntokens = ["{BENCH_TOKEN}"]\n')
    vcl = WORK / "shortlink.vcl"
    vcl.write_text(subprocess.run([str(RELEASE / "shortlink"), "vcl", "--config", str(config)],
                                  capture_output=True, text=True, check=True).stdout)
    # The ceiling answers the very bytes a real redirect carries (status,
    # headers, page), so the comparison measures the path, not the size.
    ceiling_url = "https://example.org/p/1"
    ceiling_page = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Moved</title>'
                    f'</head><body><p>This link leads to <a href="{ceiling_url}">{ceiling_url}</a>.</p>'
                    '</body></html>\n')
    ceiling_vcl = WORK / "ceiling.vcl"
    ceiling_vcl.write_text(
        'vcl 4.1;\nbackend default none;\n'
        'sub vcl_recv { return (synth(301, "Moved Permanently")); }\n'
        'sub vcl_synth {\n'
        f'    set resp.http.Location = "{ceiling_url}";\n'
        '    set resp.http.Cache-Control = "public, max-age=86400";\n'
        '    set resp.http.Content-Type = "text/html; charset=utf-8";\n'
        '    set resp.http.X-Cache = "HIT";\n'
        f'    synthetic({{"{ceiling_page}"}});\n'
        '    return (deliver);\n}\n')
    workdir = WORK / "varnish"
    processes.start(["varnishd", "-F", "-j", "none", "-a", f"127.0.0.1:{varnish_port}", "-n", str(workdir),
                     "-f", str(vcl), "-T", "127.0.0.1:0", "-s", "malloc,1g"], "varnishd.log")
    wait_for_port(varnish_port, "Varnish")
    varnishadm(workdir, "vcl.load", "ceiling", str(ceiling_vcl))
    processes.start([str(RELEASE / "shortlink"), "serve", "--config", str(config)], "writer.log",
                    env={**os.environ, "RUST_LOG": "warn"})
    wait_for_port(writer_port, "the writer")
    base = f"http://127.0.0.1:{varnish_port}"

    # Disjoint key sets: hits, fresh misses, and the whole store for zipf.
    hit_keys = write_keys("hit", [key for key, _ in links[:HIT_LINKS]])
    fresh_keys = write_keys("fresh", [key for key, _ in links[HIT_LINKS:]])
    all_keys = write_keys("all", [key for key, _ in links])

    scenarios = {}

    def scenario(name, measure, prepare=None):
        if ONLY and name not in ONLY:
            return
        runs = []
        for _ in range(RUNS):
            if prepare:
                prepare()
            runs.append(measure())
        scenarios[name] = median_of(runs)
        counters = json.loads(subprocess.run(
            ["varnishstat", "-n", str(workdir), "-j", "-f", "shortlink.*"],
            capture_output=True, text=True).stdout or "{}").get("counters", {})
        lookups = counters.get("shortlink.links.lookups", {}).get("value", 0)
        trips = counters.get("shortlink.links.round_trips", {}).get("value", 0)
        if trips:
            say(f"{name}: last run: {lookups} lookups in {trips} Redis round trips ({lookups / trips:.1f} per trip)")
        s = scenarios[name]
        say(f"{name}: {s['rps']:.0f} req/s, p99 {s['p99_ms']} ms, errors {s['errors']} (runs {s['runs_rps']})")

    def empty_cache():
        # Restarting the child empties the cache outright; a ban would leave
        # dead objects filling storage until each is looked up again.
        varnishadm(workdir, "stop")
        varnishadm(workdir, "start")
        wait_for_port(varnish_port, "Varnish")

    say("ceiling: fixed 301 from vcl_recv")
    varnishadm(workdir, "vcl.use", "ceiling")
    scenario("ceiling", lambda: wrk(base + "/l/abcd", "links.lua", ["random", str(hit_keys), str(THREADS)]))
    varnishadm(workdir, "vcl.use", "boot")

    say("hit: cached links")
    # The cache holds nothing yet (the ceiling VCL stores nothing): warming
    # puts exactly the hit keys in it.
    warm = lambda: wrk(base, "links.lua", ["fresh", str(hit_keys), str(THREADS)], duration=max(2, DURATION // 3))
    scenario("hit", lambda: wrk(base, "links.lua", ["random", str(hit_keys), str(THREADS)]), prepare=warm)

    say("miss: every request a fresh key")
    scenario("miss", lambda: wrk(base, "links.lua", ["fresh", str(fresh_keys), str(THREADS)]), prepare=empty_cache)

    say("zipf: s = 1.0 over every link, from an empty cache")
    scenario("zipf", lambda: wrk(base, "links.lua", ["zipf", str(all_keys), str(THREADS)]), prepare=empty_cache)

    if ONLY and "writer" not in ONLY:
        return 0
    say("writer: inserts through the JSON API, 16 clients")
    run_ids = iter(range(1000))
    writer_runs = [wrk(f"http://127.0.0.1:{writer_port}", "insert.lua", [f"r{next(run_ids)}-{os.getpid()}", BENCH_TOKEN],
                       connections=16) for _ in range(RUNS)]
    writer = median_of(writer_runs)

    if ONLY:
        say(f"writer: {writer['rps']:.0f} inserts/s, errors {writer['errors']} (runs {writer['runs_rps']})")
        return 0
    ceiling = scenarios["ceiling"]["rps"]
    report = {
        "machine": machine(),
        "quick": QUICK,
        "runs": RUNS,
        "duration_s": DURATION,
        "connections": CONNECTIONS,
        "scenarios": {
            name: {**{k: s[k] for k in ("rps", "p50_ms", "p99_ms", "errors")},
                   "ratio_to_ceiling": round(s["rps"] / ceiling, 3), "runs_rps": s["runs_rps"],
                   "reused_keys": s["reused_keys"]}
            for name, s in scenarios.items()
        },
        "memory": {
            "links": LINKS,
            "bytes_per_link": round(hash_bytes, 1),
            "plain_keys_bytes_per_link": round(plain_bytes, 1),
            "ratio_to_plain": round(hash_bytes / plain_bytes, 3),
            "mean_url_bytes": round(url_bytes, 1),
            "hash_encoding": encodings,
        },
        "writer": {"inserts_per_s": writer["rps"], "errors": writer["errors"], "p99_ms": writer["p99_ms"],
                   "runs_inserts_per_s": writer["runs_rps"]},
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "latest.json").write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    return 0


def machine():
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}"


def print_table(report):
    s = report["scenarios"]
    targets = {"hit": 0.95, "miss": 0.40, "zipf": 0.80}
    print(f"\nshortlink bench ({'quick' if report['quick'] else 'full'}; {report['machine']}; "
          f"{report['connections']} connections, {report['duration_s']}s per run, median of {report['runs']})\n")
    print(f"{'scenario':<10}{'req/s':>12}{'x ceiling':>11}{'target':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}")
    for name in ("ceiling", "hit", "miss", "zipf"):
        row = s[name]
        target = f">= {targets[name]:.2f}" if name in targets else ""
        print(f"{name:<10}{row['rps']:>12,.0f}{row['ratio_to_ceiling']:>11.3f}{target:>9}"
              f"{row['p50_ms']:>9.3f}{row['p99_ms']:>9.3f}{row['errors']:>8}")
    m = report["memory"]
    print(f"\nmemory    {m['bytes_per_link']:.1f} bytes/link in hashes ({m['hash_encoding']}), "
          f"{m['plain_keys_bytes_per_link']:.1f} as plain keys: {m['ratio_to_plain']:.3f} x "
          f"(targets <= 70 and <= 0.55; {m['links']:,} links, URLs of {m['mean_url_bytes']:.0f} bytes)")
    w = report["writer"]
    print(f"writer    {w['inserts_per_s']:,.0f} inserts/s through the JSON API, 16 clients, "
          f"{w['errors']} errors (target >= 5,000)")
    print(f"\nwritten to {OUT / 'latest.json'}")


if __name__ == "__main__":
    sys.exit(main())
