#!/usr/bin/env python3
"""`make bench`: every figure against a limit measured in the same run.

Starts its own Redis (the shipped configuration), Varnish (the generated VCL
and the shipped varnishd parameters) and writer on free loopback ports, loads
links in the storage format, drives load with wrk, prints a table and writes
target/bench/latest.json. Everything it starts is stopped when it ends,
whatever happens.

Figures do not travel between machines, so each is compared with a limit
taken on the same machine in the same run (see TARGETS): `hit` latency with
Varnish's own ceiling (each run paired with one of the ceiling, the median
of their ratios), `miss` with `lookup-synth` (the same VCL and VMOD
answering each request in vcl_recv with one lookup and a synthetic redirect,
counted, nothing cached; in turns of one run, each with keys never asked
for), `storm` (500 connections from a cold cache)
with the ceiling at 500 connections (each run paired with one, as for
`hit`), the writer with the claim script driven
straight at Redis, and memory with plain string keys. A full run exits 1 when
a target is missed; a quick run only when a stored link answered anything but
a redirect, or a click was lost or counted twice.

Counting clicks is part of every link answer: `hit` counts them, and
`hit-uncounted` is the same on a VCL generated with counting off, each run
paired with one of hit's (the median of their ratios): in turns of one run
(below) the click pipeline's work, a flush a second, would land on both
sides alike and hide its cost. After the hit, miss and zipf scenarios, the
clicks stored in Redis must equal the link requests Varnish took in them
(MAIN.client_req over those runs, warming included): 0 lost, 0 counted
twice. A paired run on a VCL that counts nothing must store nothing. The
turns' clicks are checked apart: no more than the counted side
sent, and no fewer than that less its requests in flight. After every
counted run, the storm's included, the bench waits until the click
pipeline has stored its clicks: work a run leaves behind would otherwise
slow the run after it, paired or not. `zipf-restart`
runs Zipf traffic,
measures it (`zipf-before-restart`), restarts Varnish, warms its empty cache
with `shortlink warm`, and then measures the same traffic against it.

The visit log (each click's visit kept, the newest per link and per
domain) is measured the same way: `hit`, `miss` and `storm` each have runs
paired on a VCL with the log off (`hit-unlogged`, `miss-unlogged`,
`storm-unlogged`), counting into the same clicks' Redis through a store of
its own; the target is hit's ratio, within 3 points, and `visit_log_cost`
reports all three.

Short domains and forwarded queries: the bench's configuration has a second
domain (SECOND_DOMAIN, reached through DOMAIN_ALIAS, its links at the root)
beside the default one, which `hit` measures as before (its requests now
first tested against the second domain's names: one regex on Host in
vcl_recv). `hit-domain` is
`hit`'s links stored on that domain and asked for through the alias;
`hit-query` is as many links of the default domain that forward their query
(`?+`), each asked for with a 60-byte campaign query. Each is measured in
one run with `hit` (reported as `hit-paired`), the two taking turns of
50 ms by the wall clock (wrk/sides.lua) for BENCH_BESIDE_DURATION (60 s),
and judged by its rate over hit-paired's in that run: both sides live
through the same seconds of a machine whose speed moves within a second,
and share the click flushes of both. The p50, p99 and errors of such a run
are its two sides'.
`hit-rules` is as many links again, each with four rules and a two-way
split (RULES_WORDS), asked for by clients spread over devices and languages
(visitors.lua); every client comes from 127.0.0.1, which the bench's
country database places in NL, so the country rule is read on most
requests and never holds. It is measured the same way, against the same
ratio, but with hit-paired's requests spread over the same devices and
languages: what the rules cost, not what more visitors cost the counting
(BENCH_SCENARIOS=hit-spread measures that). Then the links' Redis must
receive no more commands in a run of hit-rules alone than in one of hit
alone (INFO commandstats): the target is chosen from the cache.

BENCH_QUICK=1 runs a short version (a smoke check; its figures mean little).
BENCH_RUNS=N repeats each scenario N times and reports the median of each
figure (default 3).
BENCH_DURATION=S and BENCH_LINKS=N override the run length and the link count,
and BENCH_SCENARIOS=ceiling,miss runs only those (no JSON is written then):
for profiling one path at length. Varnish reaches Redis over Redis's unix
socket; BENCH_REDIS=tcp makes it use loopback TCP instead, and
BENCH_REDIS_EXTRA adds lines to the [redis] section of the writer's
configuration (and so to the VMOD's settings), e.g. "pool_size = 64";
BENCH_CLICKS_EXTRA to its [clicks] section, e.g. "flush_interval_ms = 5000".
The clicks' Redis runs at nice CLICKS_NICENESS (10), as docs/deploying.md
advises; BENCH_CLICKS_NICE=0 runs it beside Varnish instead, to measure
what that priority changes.
`miss` runs paired with `miss-uncounted` (counting off) and
`miss-cached-first` (every answer cached at its first request, as before
the admission rule: what the rule gains) as well; for
finding what a feature costs, BENCH_SCENARIOS=storm,storm-uncounted runs
the storm with counting off too (storm-cached-first: with every answer
cached at its first request), BENCH_SCENARIOS=zipf,zipf-uncounted does
the same for `zipf`, and BENCH_WRITER_PURGE=0 runs the writer without
purging Varnish.
BENCH_REDIS=cluster also loads the links into a Redis Cluster of three
primaries (the shipped configuration, cluster-enabled) and runs `miss` on a
VCL that looks them up there (`miss-cluster`), against `miss` on one Redis
of the same run: both over loopback TCP, as a cluster's nodes are reached,
both counting clicks in the Redis for clicks. `miss-cluster-clicks` does
the same counting the clicks in the cluster too; the clicks stored there
must equal its requests.
BENCH_CLICK_COUNTERS=1 says after each counted run where its clicks went:
requests and clicks stored so far, and the click store's dropped, failed
and pending counters.
`export` streams links out of the writer as CSV (GET /api/links/export)
while sampling the writer's resident memory, twice: first the links of one
owner (a tenth as many as the store holds, EXPORT_SHARE), then every link.
An export that streams holds the same memory at both sizes: the peak of the
second against the peak of the first must stay under EXPORT_PEAK_RATIO.
BENCH_REPLICA=1 gives the links' Redis a replica (on the shipped
configuration), so that BENCH_REDIS_EXTRA="replicas_to_ack = 1" measures what
waiting for it (WAIT) costs an insert.
"""

import base64
import hashlib
import http.client
import itertools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from edits import EDITORS, KEYS_PER_EDITOR, run_editors

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "target" / "release"
OUT = ROOT / "target" / "bench"
WORK = OUT / "work"
WRK_DIR = ROOT / "bench" / "wrk"

QUICK = os.environ.get("BENCH_QUICK") == "1"
RUNS = int(os.environ.get("BENCH_RUNS", "1" if QUICK else "3"))
# Paired runs (a scenario and its limit, one after the other, as the
# writer and the store ceiling): their ratio drifts more than a single
# figure does (fsync times and the machine's speed drift), so there are
# more of them.
PAIRS = RUNS if QUICK else max(RUNS, 5)
# The scenarios measured beside `hit` (hit-domain, hit-query, hit-rules):
# one run each with hit, the two taking turns of TURN_MS (sides.lua). The
# machine's speed moves by 10 to 25 % within a second, so that runs of each
# a few seconds apart differ by more than the costs compared (the median of
# 24 pairs of 2-second runs still moved by 3 %); turns this short share
# that drift, and a 60-second run moved its ratio by about 1 %.
BESIDE_DURATION = int(os.environ.get("BENCH_BESIDE_DURATION", "4" if QUICK else "60"))
# `miss` beside `lookup-synth`, each key asked for once: as long as the
# keys last (1,000,000 links last 16 s at 30,000 requests a second a side).
MISS_TURNS_DURATION = 1 if QUICK else 12
TURN_MS = 50
# What is sent in a turn's first milliseconds may answer the turn before
# (a request is sent as the answer to the last one arrives): a few times
# hit's p50, and left out of both sides' rates.
SETTLE_MS = 5
# The hit-rules Redis check: a run of hit, then one of hit-rules, alone.
DURATION_ALONE = 2
DURATION = int(os.environ.get("BENCH_DURATION", "2" if QUICK else "10"))
CONNECTIONS = 64
THREADS = 2
LINKS = int(os.environ.get("BENCH_LINKS", "20000" if QUICK else "1000000"))
HIT_LINKS = 1_000 if QUICK else 10_000
ONLY = [name for name in os.environ.get("BENCH_SCENARIOS", "").split(",") if name]
# The storm: a crowd of clients on a cold cache, uniform over many links.
STORM_CONNECTIONS = 500
STORM_DURATION = int(os.environ.get("BENCH_STORM_DURATION", "3" if QUICK else "20"))
STORM_LINKS = min(100_000, LINKS)
# Zipf traffic before Varnish is restarted and warmed, in zipf-restart.
ZIPF_WARMUP = int(os.environ.get("BENCH_ZIPF_WARMUP", "3" if QUICK else "20"))
# Connections reading the edited links while they are edited.
EDIT_READERS = 16
# Inserts the claim script is driven with straight at Redis, per run.
STORE_CEILING_INSERTS = 4_000 if QUICK else 60_000
# Numbers each store-ceiling run, in the URLs and keys it stores (store_ceiling).
STORE_CEILING_RUNS = itertools.count(1)
SPLIT = 2
PREFIX = "short:"
CLUSTER = os.environ.get("BENCH_REDIS") == "cluster"
CLUSTER_PRIMARIES = 3
CLUSTER_SLOTS = 16384
# Issue target: lookups in a cluster keep this share of one Redis's miss rate.
CLUSTER_MISS_RATIO = 0.9
# How long after a run its clicks are surely in Redis: the VMOD's default
# flush interval (1s), and a margin.
FLUSH_WAIT = 2.5
# An expiry and a five-letter owner, as the writer stores them.
OWNED_EXPIRY = 1767225600
OWNED_BY = "alice"
# Issue target: a link with an expiry and an owner costs at most this.
OWNED_BYTES_LIMIT = 64
# Issue target: a link's click total costs at most this.
CLICK_TOTALS_BYTES_LIMIT = 24
# Issue target: the writer's peak memory while it exports every link, against
# its peak while it exports a tenth as many: the same, within allocator noise.
# One that held what it exports would need about the difference in bytes
# (ten times the smaller export's) more.
EXPORT_PEAK_RATIO = 1.25
# The clicks' Redis's niceness, as shipped (scripts/run.sh, docs/deploying.md).
CLICKS_NICENESS = 10
CLICKS_NICE = int(os.environ.get("BENCH_CLICKS_NICE", CLICKS_NICENESS))
# The smaller export: the links of one owner, a tenth as many as the store's.
EXPORT_SHARE = 10
EXPORT_OWNER = "exporter"
VARNISHD_PARAMS = ROOT / "vcl" / "varnishd.params"
# The writer's claim script: its deadline prologue, then the claim.
CLAIM_SCRIPT = [ROOT / "writer" / "src" / "links" / "deadline.lua", ROOT / "writer" / "src" / "links" / "claim.lua"]
# Where the store ceiling's claims go: a hash and a list as the writer's,
# outside the links' names. Under them, its 300,000 fields in one hash (no
# store the writer keys has such a hash) were exported as links, and the
# export's check that each link goes out once held a hash's fields.
CEILING_HASH, CEILING_LIST = "bench-ceiling:sc", "bench-ceiling:@bench"
BENCH_TOKEN = "bench-token-" + "0123456789abcdef" * 2
# The second short domain of the bench's configuration: links at the root,
# asked for through its alias, forwarding queries by default (which a
# request without a query never reaches).
SECOND_DOMAIN = "go.bench.test"
DOMAIN_ALIAS = "alias.bench.test"
# A campaign query as newsletters send them: 60 bytes after the "?".
CAMPAIGN_QUERY = "utm_source=newsletter&utm_medium=email&utm_campaign=nov-2026"
assert len(CAMPAIGN_QUERY) == 60
# Issue target: a hit on the second domain, or with a forwarded query, keeps
# this share of `hit`'s req/s.
DOMAIN_AND_QUERY_RATIO = 0.95
# The rules and split of every hit-rules link, after its URL: the country
# rule comes first in its rule so that every request reaching it reads the
# country database.
RULES_WORDS = ("~device=ios>{url}/ios ~country=DE&device=android>{url}/android-de "
               "~lang=fr>{url}/fr ~q.utm_source=mail>{url}/mail *50>{url}/a *50>{url}/b")
# Issue target: a hit on a link with rules keeps this share of `hit`'s req/s.
RULES_RATIO = 0.95
# The bench's country database: the clients' address, and a rule's country.
COUNTRIES = ["127.0.0.0/8=NL", "192.0.2.0/24=DE"]


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


def make_links(count, tag, taken=()):
    """`count` links with keys chosen as the writer chooses them, none of
    them one of `taken`."""
    used = set(taken)
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


def crc16(data):
    """CRC16-XMODEM, as Redis Cluster hashes keys to slots."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(name):
    """The slot of a Redis key name: of its {hash tag} if it has one."""
    data = name.encode()
    start = data.find(b"{")
    if start >= 0:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1:end]
    return crc16(data) % CLUSTER_SLOTS


def start_cluster(processes, count):
    """`count` primaries on the shipped configuration, a share of the slots
    each, introduced to each other; answers their ports once every node
    serves every slot."""
    ports = [free_port() for _ in range(count)]
    for n, port in enumerate(ports):
        start_redis(processes, f"cluster-{n}", port,
                    extra=("--cluster-enabled", "yes", "--cluster-port", str(free_port()),
                           "--cluster-config-file", "nodes.conf",
                           "--cluster-require-full-coverage", "no"))
    bus_ports = [redis_cli(port, "CONFIG", "GET", "cluster-port").split()[1] for port in ports]
    for n, port in enumerate(ports):
        first, last = CLUSTER_SLOTS * n // count, CLUSTER_SLOTS * (n + 1) // count - 1
        redis_cli(port, "CLUSTER", "ADDSLOTSRANGE", str(first), str(last))
    for port, bus in zip(ports[1:], bus_ports[1:]):
        redis_cli(ports[0], "CLUSTER", "MEET", "127.0.0.1", str(port), bus)
    deadline = time.time() + 30
    while not all("cluster_state:ok" in info and f"cluster_slots_ok:{CLUSTER_SLOTS}" in info
                  for info in (redis_cli(port, "CLUSTER", "INFO") for port in ports)):
        if time.time() > deadline:
            raise SystemExit("bench: the cluster did not serve every slot within 30 s")
        time.sleep(0.1)
    return ports


def cluster_port_of(ports):
    """The function naming the primary of a key, as `start_cluster` laid
    the slots out."""
    count = len(ports)
    # Node n serves CLUSTER_SLOTS * n // count and on: the last whose first
    # slot is not past the key's.
    firsts = [CLUSTER_SLOTS * n // count for n in range(count)]
    return lambda name: ports[max(n for n in range(count) if firsts[n] <= key_slot(name))]


def redis_cli(port, *args):
    """What redis-cli prints for one command; a failure stops the bench."""
    return subprocess.run(["redis-cli", "-p", str(port), *args],
                          capture_output=True, text=True, check=True).stdout


def redis_memory(port):
    for line in redis_cli(port, "INFO", "memory").splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
    raise SystemExit("bench: no used_memory in INFO memory")


def redis_stalls(port):
    """What stalled Redis since the last call: each latency event's worst
    (ms) as Redis's own latency monitor saw it, and the append-only file
    rewrites started; then the monitor starts afresh."""
    # LATENCY LATEST gives event, time, latest ms and worst ms, a line each.
    fields = redis_cli(port, "LATENCY", "LATEST").split()
    events = {fields[n]: int(fields[n + 3]) for n in range(0, len(fields) - 3, 4)}
    rewrites = next(int(line.split(":")[1]) for line in redis_cli(port, "INFO", "persistence").splitlines()
                    if line.startswith("aof_rewrites:"))
    redis_cli(port, "LATENCY", "RESET")
    return {"worst_ms": events, "aof_rewrites_so_far": rewrites}


def start_redis(processes, name, port, persistent=True, conf="redis.conf", extra=(), niceness=0):
    """The shipped configuration (`conf`: the links' or the clicks');
    `persistent=False` for a server that only measures memory: its loads
    would otherwise fill the disk's queue with synced writes that the
    scenarios' own syncs then wait behind."""
    data = WORK / name
    data.mkdir(parents=True, exist_ok=True)
    processes.start(["nice", "-n", str(niceness), "redis-server", str(ROOT / "redis" / conf), "--port", str(port),
                     "--dir", str(data), "--daemonize", "no",
                     "--unixsocket", str(data / "redis.sock"), "--unixsocketperm", "700",
                     *([] if persistent else ["--appendonly", "no"]), *extra], f"{name}.log")
    wait_for_port(port, name)
    # Redis notes every event (fsync, fork, slow command) longer than this.
    redis_cli(port, "CONFIG", "SET", "latency-monitor-threshold", "50")


def varnishadm(workdir, *args):
    result = subprocess.run(["varnishadm", "-n", str(workdir), *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"bench: varnishadm {' '.join(args)} failed: {result.stdout}{result.stderr}")
    return result.stdout


def varnishstat(workdir, pattern):
    """The values of the counters matching `pattern`, by name: for names
    only one counter has (Varnish's own); a VMOD's, see varnishstat_every."""
    return dict(varnishstat_every(workdir, pattern))


def varnishstat_every(workdir, pattern):
    """(name, value) of every counter matching `pattern`, duplicates kept:
    a VMOD object's counters are named for the object, so an object of the
    same name in each loaded VCL has counters of its own under one name,
    which `varnishstat` lists once each and a dict would keep the last of."""
    # A varnishstat that answers nothing (Varnish busy restarting, or the
    # machine stalled) must not read as zeros: a request count of 0 taken
    # after a run would make its clicks look counted twice.
    for _ in range(10):
        result = subprocess.run(["varnishstat", "-n", str(workdir), "-j", "-f", pattern],
                                capture_output=True, text=True)
        if result.returncode == 0 and result.stdout.strip():
            break
        time.sleep(0.5)
    else:
        raise SystemExit(f"bench: varnishstat -f {pattern} answered nothing: {result.stderr.strip()}")
    document = json.loads(result.stdout, object_pairs_hook=list)
    counters = dict(document).get("counters", [])
    return [(name, dict(fields).get("value", 0)) for name, fields in counters]


def varnishd_params():
    """`-p name=value` for every line of the shipped vcl/varnishd.params."""
    args = []
    for line in VARNISHD_PARAMS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            args += ["-p", line]
    return args


def start_varnishd(processes, name, port, vcl):
    """A varnishd as `make run` starts it (its parameters), in WORK/name."""
    workdir = WORK / name
    processes.start(["varnishd", "-F", "-j", "none", "-a", f"127.0.0.1:{port}", "-n", str(workdir),
                     "-f", str(vcl), "-T", "127.0.0.1:0", "-s", "malloc,1g", *varnishd_params()],
                    f"{name}.log")
    wait_for_port(port, name)
    return workdir


def wrk(url, script, args, connections=CONNECTIONS, duration=DURATION):
    """One wrk run with `script` and its `args`; its figures as a dict."""
    command = ["wrk", "-t", str(THREADS), "-c", str(connections), "-d", f"{duration}s",
               "--timeout", "5s", "-s", str(WRK_DIR / script), url, "--", *args]
    # The scripts share figures.lua; `;;` keeps Lua's own search path.
    env = dict(os.environ, LUA_PATH=f"{WRK_DIR}/?.lua;;")
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    for line in result.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            figures = json.loads(line[len("BENCH_JSON "):])
            seconds = figures["duration_us"] / 1e6
            return {
                "requests": figures["requests"],
                "rps": round(figures["requests"] / seconds, 1),
                "p50_ms": round(figures["p50_us"] / 1000, 3),
                "p99_ms": round(figures["p99_us"] / 1000, 3),
                "errors": figures["errors"],
                "socket_errors": figures["socket_errors"],
                "non_3xx": figures.get("non_3xx"),
                "socket_error_kinds": figures.get("socket_error_kinds"),
                "reused_keys": figures["reused_keys"],
                # sides.lua's: each side's requests and settled rate.
                **({"sides": figures["sides"]} if "sides" in figures else {}),
            }
    raise SystemExit(f"bench: wrk gave no figures:\n{result.stdout}\n{result.stderr}")


def medians_and_sums(runs, medians, sums):
    """Each of `medians` the median over the runs (a single run's p99 is too
    noisy to compare), each of `sums` (counts of errors) the sum."""
    chosen = {key: statistics.median(r[key] for r in runs) for key in medians}
    chosen.update({count: sum(r[count] for r in runs) for count in sums})
    return chosen


def median_of(runs):
    """A wrk scenario's figures over its runs."""
    chosen = medians_and_sums(runs, ("rps", "p50_ms", "p99_ms"), ("errors", "socket_errors"))
    chosen["reused_keys"] = max(r["reused_keys"] for r in runs)
    if all(r.get("non_3xx") is not None for r in runs):
        chosen["non_3xx"] = sum(r["non_3xx"] for r in runs)
    kinds = [r.get("socket_error_kinds") or {} for r in runs]
    chosen["socket_error_kinds"] = {k: sum(kind.get(k, 0) for kind in kinds) for k in set().union(*kinds)}
    chosen["runs_rps"] = [r["rps"] for r in runs]
    chosen["runs_p99_ms"] = [r["p99_ms"] for r in runs]
    return chosen


def flushes_settle(redis_port, quiet=2.0, most=120):
    """Seconds until no click flush has reached Redis for `quiet` seconds
    (each flush is one or more EVALSHA calls; nothing else calls scripts
    meanwhile), less that quiet time."""
    def scripts_run():
        stats = redis_cli(redis_port, "INFO", "commandstats")
        line = next((l for l in stats.splitlines() if l.startswith("cmdstat_evalsha:")), "")
        return line.split(",")[0].partition("calls=")[2]
    started = time.monotonic()
    last, since = scripts_run(), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() - started > most:
            raise SystemExit(f"bench: click flushes still running after {most} s")
        time.sleep(0.2)
        now = scripts_run()
        if now != last:
            last, since = now, time.monotonic()
    return max(0.0, since - started)


def store_ceiling(redis_port):
    """Inserts/s of the writer's own claim script driven straight at Redis by
    16 clients (redis-benchmark, EVALSHA), with the writer's arguments: a
    hash and an owner's list of keys, a URL, a deadline, the part of the key
    naming the hash, the reuse flag and 24 candidate fields. Every call stores a new
    field, which Redis syncs to disk before answering (`appendfsync always`:
    one fsync per event-loop pass, for every write in it, as for the writer)."""
    sha = redis_cli(redis_port, "SCRIPT", "LOAD", "".join(part.read_text() for part in CLAIM_SCRIPT)).strip()
    if len(sha) != 40:
        raise SystemExit(f"bench: SCRIPT LOAD answered {sha!r}")
    # redis-benchmark puts a new random number at every __rand_int__, so the
    # URL and the first candidate are new in each call (-r: 10^8 values; a
    # larger -r overflows its parsing, and then nothing is substituted). It
    # seeds its numbers with time(NULL) ^ getpid(), which two runs seconds
    # apart can share: the later then asks for every URL the earlier stored,
    # each call finds its URL under its first candidate and writes nothing
    # (the full run of 2026-11-27 stopped on it). The run's number in both
    # keeps every run's calls new.
    run = next(STORE_CEILING_RUNS)
    candidates = [f"r{run}-__rand_int__", *(f"c{n}" for n in range(23))]
    command = ["redis-benchmark", "-p", str(redis_port), "-c", "16", "-n", str(STORE_CEILING_INSERTS),
               "-r", "100000000", "--csv", "EVALSHA", sha, "2", CEILING_HASH, CEILING_LIST,
               f"https://example.org/store-ceiling/{run}/__rand_int__", "99999999999999", "sc", "1",
               *candidates]
    fields = lambda: int(redis_cli(redis_port, "HLEN", CEILING_HASH))
    before = fields()
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    rows = [line.split('","') for line in result.stdout.splitlines() if line.startswith('"EVALSHA')]
    if not rows:
        raise SystemExit(f"bench: redis-benchmark gave no figures:\n{result.stdout}\n{result.stderr}")
    # A call that finds its URL stored writes nothing, and costs no fsync.
    stored = fields() - before
    if stored < 0.99 * STORE_CEILING_INSERTS:
        # What one such call answers now says why (an error, or a key found).
        probe = subprocess.run(["redis-cli", "-p", str(redis_port), "EVALSHA", sha, "2", CEILING_HASH,
                                CEILING_LIST, f"https://example.org/store-ceiling/probe-{time.time()}",
                                "99999999999999", "sc", "1", f"p{time.time_ns()}", *candidates[1:]],
                               capture_output=True, text=True)
        raise SystemExit(f"bench: the store ceiling stored {stored} of {STORE_CEILING_INSERTS} links; "
                         f"redis-benchmark printed {result.stdout[-300:]!r} {result.stderr[-300:]!r}; "
                         f"one call by hand answered {(probe.stdout + probe.stderr).strip()!r}")
    return float(rows[0][1].strip('"'))


def edit_scenario(base, writer_port, varnish_port, keys_file):
    """RUNS runs of the editors, each with wrk readers on the same keys;
    edits/s the median, the failures and stale answers summed."""
    runs = []
    for _ in range(RUNS):
        readers = {}
        thread = threading.Thread(target=lambda: readers.update(wrk(
            base, "links.lua", ["random", str(keys_file), str(THREADS), "statuses"],
            connections=EDIT_READERS, duration=DURATION)))
        thread.start()
        figures = run_editors(keys_file.read_text().split(), writer_port, varnish_port, BENCH_TOKEN,
                              "/l/", DURATION)
        thread.join()
        runs.append({**figures, "readers": readers})
    chosen = medians_and_sums(runs, ("edits_per_s", "p50_ms", "p99_ms"),
                              ("edits", "failed", "purge_warnings", "stale_after_answer"))
    chosen["max_window_ms"] = max(r["max_window_ms"] for r in runs)
    chosen["runs_edits_per_s"] = [r["edits_per_s"] for r in runs]
    chosen["examples"] = [e for r in runs for e in r["examples"]][:5]
    chosen["readers"] = {"rps": statistics.median(r["readers"]["rps"] for r in runs),
                         "non_3xx": sum(r["readers"]["non_3xx"] or 0 for r in runs),
                         "socket_errors": sum(r["readers"]["socket_errors"] for r in runs)}
    return chosen


def cluster_script_usec(ports):
    """Microseconds the nodes at `ports` have spent running scripts so far."""
    total = 0
    for port in ports:
        for line in redis_cli(port, "INFO", "commandstats").splitlines():
            if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")):
                total += int(line.split("usec=")[1].split(",")[0])
    return total


def stored_clicks(redis_port):
    """Every click stored so far: people's, bots' and gone answers, all links
    of both domains (those of a cluster's node: the keys of many slots, all
    its own). SCAN may name a key more than once (a table that shrinks
    between two of its calls does), so each hash is summed once."""
    script = """#!lua flags=allow-cross-slot-keys
local total, cursor, seen = 0, '0', {}
repeat
  local page = redis.call('SCAN', cursor, 'MATCH', ARGV[1], 'COUNT', 1000)
  cursor = page[1]
  for _, hash in ipairs(page[2]) do
    if not seen[hash] then
      seen[hash] = true
      for _, n in ipairs(redis.call('HVALS', hash)) do total = total + tonumber(n) end
    end
  end
until cursor == '0'
return total
"""
    total = 0
    for space in ("", f"{SECOND_DOMAIN}:"):
        for word in ("clicks", "bots", "gone"):
            total += int(redis_cli(redis_port, "EVAL", script, "0", f"{PREFIX}{space}{word}:*").strip())
    return total


def click_pipeline_cpu(clicks_port):
    """CPU seconds used so far by the click flushers of the running Varnish
    (threads named shortlink-clicks, cut to 15 characters by the kernel), by
    the clicks' Redis, and by its forks (AOF rewrites): [flusher, Redis,
    forks]. The bench runs one Varnish at a time."""
    flusher = 0.0
    for task in Path("/proc").glob("[0-9]*/task/[0-9]*"):
        try:
            if (task / "comm").read_text().strip() == "shortlink-click":
                flusher += int((task / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    fields = dict(line.split(":", 1) for line in redis_cli(clicks_port, "INFO", "cpu").splitlines()
                  if ":" in line)
    redis, forks = (sum(float(fields.get(f"used_cpu_{kind}", 0)) for kind in kinds)
                    for kinds in (("sys", "user"), ("sys_children", "user_children")))
    return [flusher, redis, forks]


def resident_kib(pid):
    """The process's resident memory now, in KiB (VmRSS)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def export_scenario(writer_pid, writer_port, owner=None):
    """Streams every link (or `owner`'s) out of the writer as CSV (the
    admin's export), sampling the writer's resident memory meanwhile: the
    export must not hold the links it writes."""
    before = resident_kib(writer_pid)
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], resident_kib(writer_pid))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.time()
    size = lines = 0
    only = f"&owner={owner}" if owner else ""
    request = urllib.request.Request(f"http://127.0.0.1:{writer_port}/api/links/export?format=csv{only}",
                                     headers={"Authorization": f"Bearer {BENCH_TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=600) as answer:
            while chunk := answer.read(1 << 16):
                size += len(chunk)
                lines += chunk.count(b"\n")
    finally:
        done.set()
        sampler.join()
    seconds = time.time() - started
    growth = peak[0] - before
    return {"links": lines - 1, "bytes": size, "seconds": round(seconds, 2),
            "links_per_s": round((lines - 1) / seconds), "rss_before_kib": before,
            "rss_peak_kib": peak[0], "growth_kib": growth}


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
    # A bench stopped with SIGTERM stops what it started too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        return run(processes)
    finally:
        processes.stop_all()


def run(processes):
    redis_port, clicks_port, plain_port, varnish_port, origin_port, writer_port = (free_port() for _ in range(6))
    replicated = os.environ.get("BENCH_REPLICA") == "1"
    # A replica's first sync starts at once, not after the default 5 s.
    start_redis(processes, "redis", redis_port,
                extra=("--repl-diskless-sync-delay", "0") if replicated else ())
    # As `make run`: clicks in a Redis of their own, synced once a second.
    start_redis(processes, "clicks", clicks_port, conf="clicks.conf", niceness=CLICKS_NICE)
    start_redis(processes, "redis-plain", plain_port, persistent=False)
    if replicated:
        replica_port = free_port()
        start_redis(processes, "redis-replica", replica_port, extra=("--replicaof", "127.0.0.1", str(redis_port)))
        deadline = time.time() + 30
        while "master_link_status:up" not in redis_cli(replica_port, "INFO", "replication"):
            if time.time() > deadline:
                raise SystemExit("bench: the replica did not sync with the links' Redis within 30 s")
            time.sleep(0.1)

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
    # The same links as the writer stores them with an expiry and an owner:
    # the words after the URL, and the owner's list of keys.
    redis_cli(plain_port, "FLUSHALL")
    empty_owned = redis_memory(plain_port)
    load(plain_port, [resp("HSET", PREFIX + key[:SPLIT], key[SPLIT:], f"{url} {OWNED_EXPIRY} @{OWNED_BY}")
                      for key, url in links]
                     + [resp("RPUSH", f"{PREFIX}@{OWNED_BY}", key) for key, _ in links])
    owned_bytes = (redis_memory(plain_port) - empty_owned) / LINKS
    # Click totals as the VMOD stores them, next to the links: every link
    # clicked, up to a few thousand times; then one day of daily counts.
    redis_cli(plain_port, "FLUSHALL")
    empty_clicks = redis_memory(plain_port)
    load(plain_port, [resp("HSET", f"{PREFIX}clicks:{key[:SPLIT]}", key[SPLIT:], str(1 + n % 5000))
                      for n, (key, _) in enumerate(links)])
    totals_bytes = (redis_memory(plain_port) - empty_clicks) / LINKS
    before_day = redis_memory(plain_port)
    load(plain_port, [resp("HSET", f"{PREFIX}day:20261123:{key[:SPLIT]}", key[SPLIT:], str(1 + n % 50))
                      for n, (key, _) in enumerate(links)])
    day_bytes = (redis_memory(plain_port) - before_day) / LINKS
    redis_cli(plain_port, "FLUSHALL")
    say(f"memory: {hash_bytes:.1f} bytes/link in hashes, {plain_bytes:.1f} as plain keys, "
        f"{owned_bytes:.1f} with an expiry and an owner; click totals {totals_bytes:.1f} bytes/link, "
        f"daily counts {day_bytes:.1f} bytes per link and day")

    # Varnish and Redis share the machine: a unix socket spares both the
    # loopback TCP stack on every lookup.
    tcp = os.environ.get("BENCH_REDIS") in ("tcp", "cluster")
    redis_url, clicks_url = ((f"redis://127.0.0.1:{port}/0" if tcp else f"unix://{WORK / name / 'redis.sock'}?db=0")
                             for name, port in (("redis", redis_port), ("clicks", clicks_port)))

    # Without purging, for measuring what the purge costs an insert.
    purge_url = "" if os.environ.get("BENCH_WRITER_PURGE") == "0" else f"http://127.0.0.1:{varnish_port}"

    def configuration(counted, links_url=redis_url, clicks=clicks_url, domains=True, admission=True,
                      logged=True):
        # `admission`: a key cached from its second request (the shipped
        # default); without it, every answer cached at its first. `logged`:
        # the visit log kept (the shipped default); without it, totals alone.
        return (
            f'listen = "127.0.0.1:{writer_port}"\n'
            f'public_base_url = "http://127.0.0.1:{varnish_port}/l/"\n'
            f'[redis]\nurl = "{links_url}"\n{os.environ.get("BENCH_REDIS_EXTRA", "")}\n'
            + ('' if admission else '[redirect]\nadmission_window_s = 0\n') +
            f'[clicks]\nenabled = {"true" if counted else "false"}\nredis_url = "{clicks}"\n{os.environ.get("BENCH_CLICKS_EXTRA", "")}\n'
            f'geoip = "{WORK / "countries.mmdb"}"\n'
            + ('' if logged else 'visits_kept = 0\ndomain_visits_kept = 0\n') +
            f'[varnish]\npurge_url = "{purge_url}"\n'
            f'vmod = "{RELEASE / "libvmod_shortlink.so"}"\n'
            # The 16 insert clients share one address: as token holders they are
            # not rate limited, as a real bulk importer would not be. An admin
            # token, so the editors may change the links loaded by hand.
            f'[access]\ntokens = [{{ name = "bench", token = "{BENCH_TOKEN}", admin = true }}]\n'
            # The default domain stays as above (`public_base_url`, /l/, every
            # other host); the second has its own key space.
            + (f'[[domains]]\nbase_url = "http://{SECOND_DOMAIN}/"\naliases = ["{DOMAIN_ALIAS}"]\n'
               'forward_query = true\n' if domains else ''))

    def generated_vcl(name, counted, links_url=redis_url, clicks=clicks_url, admission=True, logged=True):
        """Writes `name`.toml and the VCL `shortlink vcl` makes of it."""
        toml, vcl = WORK / f"{name}.toml", WORK / f"{name}.vcl"
        toml.write_text(configuration(counted, links_url, clicks, admission=admission, logged=logged))
        vcl.write_text(subprocess.run([str(RELEASE / "shortlink"), "vcl", "--config", str(toml)],
                                      capture_output=True, text=True, check=True).stdout)
        return toml, vcl

    subprocess.run([str(RELEASE / "country-database"), str(WORK / "countries.mmdb"), *COUNTRIES], check=True)
    _, vcl = generated_vcl("shortlink", counted=True)
    # The writer is told of the default domain alone: it warms (zipf-restart)
    # and edits that domain's links as before the second domain existed (a
    # writer told of both would warm the hottest of each in turn, and the
    # links of hit-domain would take half of zipf-restart's warming).
    config = WORK / "writer.toml"
    config.write_text(configuration(counted=True, domains=False))
    # The same configuration with counting off: the limit of `hit`'s cost.
    _, uncounted_vcl = generated_vcl("uncounted", counted=False)
    workdir = start_varnishd(processes, "varnish", varnish_port, vcl)
    varnishadm(workdir, "vcl.load", "uncounted", str(uncounted_vcl))
    # The same with every answer cached at its first request, as before
    # admission: what the admission rule gains `miss`.
    _, cached_first_vcl = generated_vcl("cachedfirst", counted=True, admission=False)
    varnishadm(workdir, "vcl.load", "cachedfirst", str(cached_first_vcl))
    # The same with the visit log off: the limit of what the log costs. A
    # VMOD's click store is one per clicks' Redis URL and prefix, whose
    # settings the newest VCL gives: this VCL names the same Redis and
    # database by another URL (the database left to its default, 0), so
    # that it counts in a store of its own, the log off, while the shipped
    # VCL's store keeps it on; both store into the one database the
    # exactness check reads.
    unlogged_clicks = clicks_url.removesuffix("?db=0").removesuffix("/0")
    assert unlogged_clicks != clicks_url, clicks_url
    _, unlogged_vcl = generated_vcl("unlogged", counted=True, clicks=unlogged_clicks, logged=False)
    varnishadm(workdir, "vcl.load", "unlogged", str(unlogged_vcl))
    # The limits are VCLs of the same varnishd, so they run on the same
    # process with the same parameters as the VCL they are compared with.
    varnishadm(workdir, "vcl.load", "ceiling", str(write_vcl("ceiling.vcl", CEILING_VCL)))
    # The limit of a cold request: the shipped VCL with its VMOD, each link
    # request answered by one lookup and a synthetic redirect, counted.
    generated = vcl.read_text()
    first_recv = generated.index("sub vcl_recv {")
    varnishadm(workdir, "vcl.load", "lookupsynth", str(write_vcl(
        "lookup-synth.vcl", generated[:first_recv] + LOOKUP_SYNTH_VCL + generated[first_recv:])))
    # Sides measured in one run (misses and lookup-synth): a VCL that hands
    # each request to one of them by a header, through labels.
    varnishadm(workdir, "vcl.label", "counted_side", "boot")
    varnishadm(workdir, "vcl.label", "lookup_side", "lookupsynth")
    varnishadm(workdir, "vcl.load", "router", str(write_vcl("router.vcl", ROUTER_VCL)))
    # The architecture people build otherwise: Varnish caching an HTTP
    # origin (here a second varnishd answering at once, with the same bytes).
    start_varnishd(processes, "origin", origin_port, write_vcl("origin.vcl", ORIGIN_VCL))
    varnishadm(workdir, "vcl.load", "originmiss",
               str(write_vcl("origin-miss.vcl", CACHING_PROXY_VCL.replace("@PORT@", str(origin_port)))))
    if CLUSTER:
        say(f"cluster: {CLUSTER_PRIMARIES} primaries, the same links")
        cluster_ports = start_cluster(processes, CLUSTER_PRIMARIES)
        primary_of = cluster_port_of(cluster_ports)
        by_node = {port: [] for port in cluster_ports}
        for key, url in links:
            hash_name = PREFIX + key[:SPLIT]
            by_node[primary_of(hash_name)].append(resp("HSET", hash_name, key[SPLIT:], url))
        for port, commands in by_node.items():
            load(port, commands)
        cluster_url = "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in cluster_ports)
        # Clicks apart, as for `miss`: the lookups alone are compared.
        _, cluster_vcl = generated_vcl("cluster", counted=True, links_url=cluster_url)
        varnishadm(workdir, "vcl.load", "cluster", str(cluster_vcl))
        # Links and clicks in the cluster, as a deployment of one cluster keeps them.
        _, cluster_clicks_vcl = generated_vcl("clusterclicks", counted=True, links_url=cluster_url,
                                              clicks=cluster_url)
        varnishadm(workdir, "vcl.load", "clusterclicks", str(cluster_clicks_vcl))
    writer_process = processes.start([str(RELEASE / "shortlink"), "serve", "--config", str(config)],
                                      "writer.log", env={**os.environ, "RUST_LOG": "warn"})
    wait_for_port(writer_port, "the writer")
    base = f"http://127.0.0.1:{varnish_port}"

    # Disjoint key sets: hits, fresh misses, and the whole store for zipf.
    hit_keys = write_keys("hit", [key for key, _ in links[:HIT_LINKS]])
    fresh_keys = write_keys("fresh", [key for key, _ in links[HIT_LINKS:]])
    # miss and lookup-synth in turns: fresh keys of their own each.
    fresh_miss_keys = write_keys("fresh-miss", [key for key, _ in links[HIT_LINKS::2]])
    fresh_lookup_keys = write_keys("fresh-lookup", [key for key, _ in links[HIT_LINKS + 1::2]])
    all_keys = write_keys("all", [key for key, _ in links])
    storm_keys = write_keys("storm", [key for key, _ in links[:STORM_LINKS]])
    # hit-domain: hit's very links (keys and URLs) on the second domain, in its
    # key space. hit-query: as many links of the default domain, with keys
    # of their own (hit's links do not forward, and must stay as `hit`
    # measures them), whose value says `?+`: they forward whatever their
    # domain's default. So hit-query differs from `hit` by the forwarding
    # alone (the query kept aside in vcl_recv, the merge at delivery), not
    # by routing to another domain, which hit-domain measures.
    query_links = make_links(HIT_LINKS, "q", taken=(key for key, _ in links))
    if not ONLY or {"hit-domain", "hit-query"} & set(ONLY):
        load(redis_port, [resp("HSET", f"{PREFIX}{SECOND_DOMAIN}:{key[:SPLIT]}", key[SPLIT:], url)
                          for key, url in links[:HIT_LINKS]]
                         + [resp("HSET", PREFIX + key[:SPLIT], key[SPLIT:], f"{url} ?+")
                            for key, url in query_links])
    query_keys = write_keys("query", [key for key, _ in query_links])
    # hit-rules: as many links again, with keys of their own, each with rules
    # and a split.
    rules_links = make_links(HIT_LINKS, "r", taken=(key for key, _ in links + query_links))
    if not ONLY or "hit-rules" in ONLY:
        load(redis_port, [resp("HSET", PREFIX + key[:SPLIT], key[SPLIT:], f"{url} {RULES_WORDS.format(url=url)}")
                          for key, url in rules_links])
    rules_keys = write_keys("rules", [key for key, _ in rules_links])

    scenarios = {}
    # Clicks stored by paired limits that count (lookup-synth), which the
    # exactness check leaves out.
    counted_apart = {"stored": 0}
    # Clicks stored during paired runs that count none (none expected).
    stray_clicks = {}
    # Link requests Varnish took while counting, for the exactness check.
    # Requests counted into the clicks' Redis, and into the cluster's.
    counted_requests = {"requests": 0, "cluster": 0}
    # Seconds after each counted run until its clicks were all sent.
    catch_up = {}
    # People's clicks of the checked runs the click store counted without
    # their details and visitor (its backlog past half full).
    # What the click store shed in the checked runs, by its own counters:
    # clicks counted without details past half its backlog, and clicks
    # dropped past all of it (lost, and told apart from clicks lost otherwise).
    shed = {"clicks_without_details": 0, "clicks_dropped": 0}

    def shed_so_far():
        counters = store_counters()
        return {name: counters.get(name, 0) for name in shed}

    def add_shed(since):
        for name, value in shed_so_far().items():
            shed[name] += value - since[name]

    def lookup_failures():
        """Lookups that got no answer in time, or an error, so far, summed
        over every VCL's object (each counts its own lookups)."""
        failures = {"timeouts": 0, "redis_errors": 0}
        for name, value in varnishstat_every(workdir, "shortlink.*"):
            short = name.rpartition(".")[2]
            if short in failures:
                failures[short] += value
        return failures

    def store_counters():
        """The click store's counters in this child (a restart starts them
        again), brought up to date: an answer publishes them (a 404, not a
        click), which is in MAIN.client_req before this returns, so that no
        run's count of requests takes it. Every VCL object of the store
        publishes the same totals, as of its last answer: the largest of
        each is the newest."""
        requests = client_requests()
        with socket.create_connection(("127.0.0.1", varnish_port)) as sock:
            sock.sendall(b"GET /l/NoSuchKeyHere HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            sock.recv(4096)
        deadline = time.monotonic() + 2
        while client_requests() == requests and time.monotonic() < deadline:
            time.sleep(0.05)
        counters = {}
        for name, value in varnishstat_every(workdir, "shortlink.*"):
            short = name.rpartition(".")[2]
            counters[short] = max(counters.get(short, 0), value)
        return counters

    def clicks_settle(port=None):
        """Seconds until Redis is quiet (`flushes_settle`) and every click
        the flusher took from the request path is stored or dropped. Redis
        going quiet is not enough alone: after a saturated run the flusher
        may still be tallying a backlog it took before Redis went quiet, and
        a restart then would lose it."""
        started = time.monotonic()
        while True:
            looked = time.monotonic() - started
            settled = looked + flushes_settle(port or clicks_port)
            counters = store_counters()
            if counters.get("clicks_counted", 0) <= (counters.get("clicks_flushed", 0)
                                                     + counters.get("clicks_dropped", 0)):
                return settled
            if time.monotonic() - started > 120:
                raise SystemExit(f"bench: clicks still held by the flusher after 120 s: {counters}")

    def client_requests():
        return varnishstat(workdir, "MAIN.client_req").get("MAIN.client_req", 0)

    def last_run_answers():
        """What the run just ended answered, from its empty cache on: a
        key's first request answered from its lookup, its second fetched
        and cached, then hits."""
        main = varnishstat(workdir, "MAIN.*")
        requests, hits, fetched = (main.get(f"MAIN.{c}", 0) for c in ("client_req", "cache_hit", "s_fetch"))
        return {"hits": hits, "fetched": fetched, "from_lookup": max(0, requests - hits - fetched)}

    def scenario(name, measure, prepare=None, vcl_name="boot", counted=False, pairs=(),
                 clicks_in="requests"):
        """`pairs`: (name, vcl[, counted]) each: each run is followed at once
        by a run of the same on each of those VCLs, reported under its name;
        the ratio of each pair is kept, as figures drift between runs
        minutes apart. A paired VCL that counts its clicks says so, for the
        exactness check. `clicks_in`: "cluster" when the VCL counts into the
        cluster."""
        if ONLY and name not in ONLY:
            return
        varnishadm(workdir, "vcl.use", vcl_name)
        runs, paired_runs = [], {pair[0]: [] for pair in pairs}

        def prepared():
            """Prepares a run; Varnish's request count before it (a restart,
            empty_cache, starts the counter again from 0)."""
            before = client_requests()
            if prepare:
                prepare()
            return 0 if prepare is empty_cache else before

        def paired_run(pair):
            varnishadm(workdir, "vcl.use", pair[1])
            counts = pair[2:] == (True,)
            # A run on a VCL that counts nothing stores nothing: were it
            # counted after all (a VCL not switched), the exactness check
            # would read its clicks as counted twice.
            must_store_none = not counts and counted and clicks_in == "requests"
            if counts:
                # A paired VCL that counts (lookup-synth) is a limit, not
                # one of the answers the exactness check holds to 0 lost:
                # what it stored is set apart, and what it did not store
                # reported with it.
                time.sleep(FLUSH_WAIT)
                clicks_settle()
                stored_before = stored_clicks(clicks_port)
            before = prepared()
            if counts:
                # After prepared(): a restart makes a new flusher thread.
                cpu_before = click_pipeline_cpu(clicks_port)
            elif must_store_none:
                stored_before = stored_clicks(clicks_port)
            figures = measure()
            if must_store_none:
                time.sleep(FLUSH_WAIT)
                stray = stored_clicks(clicks_port) - stored_before
                if stray:
                    stray_clicks[pair[0]] = stray_clicks.get(pair[0], 0) + stray
                    say(f"{pair[0]}: {stray} clicks stored during a run that counts none")
            if counts:
                time.sleep(FLUSH_WAIT)
                clicks_settle()
                # Before stored_clicks, whose scan is Redis's work too.
                figures["click_cpu_s"] = [after - before for after, before
                                          in zip(click_pipeline_cpu(clicks_port), cpu_before)]
                # Varnish's count: wrk leaves out the answers in flight when it stops.
                figures["clicks_requested"] = client_requests() - before
                figures["clicks_stored"] = stored_clicks(clicks_port) - stored_before
                counted_apart["stored"] += figures["clicks_stored"]
                say(f"{pair[0]}: {figures['clicks_requested']} requests, {figures['clicks_stored']} clicks stored")
            paired_runs[pair[0]].append(figures)
            varnishadm(workdir, "vcl.use", vcl_name)

        for run_id in range(PAIRS if pairs else RUNS):
            # Every other pair starts with the paired runs, so that a drift
            # of the machine's speed within a pair favours neither side.
            if run_id % 2:
                for pair in pairs:
                    paired_run(pair)
            # A restart (empty_cache) starts the store's counters again.
            shed_before = (shed_so_far() if counted and prepare is not empty_cache
                           else dict.fromkeys(shed, 0))
            before = prepared()
            # After prepared(): a restart makes a new flusher thread.
            cpu_before = click_pipeline_cpu(clicks_port) if counted and clicks_in == "requests" else None
            runs.append(measure())
            if counted:
                # Workers add their request counts to MAIN.client_req in
                # batches, and all of them once idle: read it once they are.
                time.sleep(FLUSH_WAIT)
                requested = client_requests() - before
                counted_requests[clicks_in] += requested
                # Under saturation the flusher falls behind; the next
                # scenario restarts the child, which would lose what it
                # still holds.
                ports = cluster_ports if clicks_in == "cluster" else [clicks_port]
                settled = sum(clicks_settle(port) for port in ports)
                if cpu_before is not None:
                    # What the click pipeline spent on this run's clicks, until
                    # they were stored: CPU does not drift with the machine's
                    # speed as a rate does.
                    runs[-1]["click_cpu_s"] = [after - before for after, before
                                               in zip(click_pipeline_cpu(clicks_port), cpu_before)]
                    runs[-1]["clicks_requested"] = requested
                catch_up.setdefault(name, []).append(round(FLUSH_WAIT + settled, 1))
                # Read before the next run, whose restart starts them again.
                if clicks_in == "requests":
                    add_shed(shed_before)
                if os.environ.get("BENCH_CLICK_COUNTERS"):
                    # Where clicks went, run by run: stored so far against
                    # requests so far, and the store's own counters.
                    stored = sum(stored_clicks(p) for p in ports)
                    said = {counter: value for counter, value in store_counters().items() if value and any(
                        w in counter for w in ("dropped", "without_details", "flush_failures", "pending"))}
                    say(f"{name}: {counted_requests[clicks_in]} requests so far, {stored} stored; {said}")
            if prepare is empty_cache and vcl_name == "boot":
                if not counted:
                    # Workers add to MAIN.client_req in batches, all once idle.
                    time.sleep(FLUSH_WAIT)
                answers = last_run_answers()
            if not run_id % 2:
                for pair in pairs:
                    paired_run(pair)
        for pair in pairs:
            done = paired_runs[pair[0]]
            scenarios[pair[0]] = median_of(done)
            if pair[2:] == (True,):
                requested = sum(r["clicks_requested"] for r in done)
                stored = sum(r["clicks_stored"] for r in done)
                # What the click pipeline spent per click it stored: the
                # flusher's thread and the clicks' Redis, from the run's start
                # until its last flush.
                flusher_us, redis_us, forks_us = (
                    round(sum(r["click_cpu_s"][i] for r in done) * 1e6 / max(stored, 1), 1) for i in (0, 1, 2))
                scenarios[pair[0]]["clicks"] = {"requests": requested, "stored": stored, "cpu_us_per_click": {
                    "flusher": flusher_us, "redis": redis_us, "redis_forks": forks_us}}
                say(f"{pair[0]}: {stored} clicks stored for {requested} requests "
                    f"({requested - stored} not stored); CPU per click stored: flusher {flusher_us} µs, "
                    f"clicks' Redis {redis_us} µs and its AOF rewrites {forks_us} µs")
            scenarios[name + "/" + pair[0]] = statistics.median(
                r["rps"] / p["rps"] for r, p in zip(runs, done))
            scenarios[name + "/" + pair[0] + " p99"] = statistics.median(
                r["p99_ms"] / p["p99_ms"] for r, p in zip(runs, done))
            say(f"{pair[0]}: {scenarios[pair[0]]['rps']:.0f} req/s (runs {scenarios[pair[0]]['runs_rps']}), "
                f"p99 {scenarios[pair[0]]['runs_p99_ms']} ms; {name} / {pair[0]} per pair: "
                f"{[round(r['rps'] / p['rps'], 3) for r, p in zip(runs, done)]}, p99 "
                f"{[round(r['p99_ms'] / p['p99_ms'], 3) for r, p in zip(runs, done)]}")
        # Whatever comes next (the writer's purges too) meets the
        # short-link VCL again.
        varnishadm(workdir, "vcl.use", "boot")
        scenarios[name] = median_of(runs)
        if all("click_cpu_s" in r for r in runs):
            requested = sum(r["clicks_requested"] for r in runs)
            scenarios[name]["click_cpu_us_per_click"] = dict(zip(("flusher", "redis", "redis_forks"), (
                round(sum(r["click_cpu_s"][i] for r in runs) * 1e6 / max(requested, 1), 2) for i in (0, 1, 2))))
            say(f"{name}: the click pipeline's CPU per click: {scenarios[name]['click_cpu_us_per_click']} µs")
        # Each VCL's object counts its own lookups, under the same names.
        counters = {}
        for counter, value in varnishstat_every(workdir, "shortlink.*"):
            counters[counter] = counters.get(counter, 0) + value
        lookups = counters.get("shortlink.shortlink_links.lookups", 0)
        trips = counters.get("shortlink.shortlink_links.round_trips", 0)
        failed = sum(counters.get(f"shortlink.shortlink_links.{c}", 0) for c in ("timeouts", "redis_errors"))
        if trips and vcl_name == "boot":
            say(f"{name}: last run: {lookups} lookups in {trips} Redis round trips ({lookups / trips:.1f} per trip), "
                f"{failed} failed")
        s = scenarios[name]
        if prepare is empty_cache and vcl_name == "boot":
            s["last_run_answers"] = answers
            say(f"{name}: last run's answers: {answers}")
        s["redis_stalls"] = redis_stalls(redis_port)
        s["clicks_redis_stalls"] = redis_stalls(clicks_port)
        non_3xx = "" if s.get("non_3xx") is None else f", non-3xx {s['non_3xx']}"
        kinds = {k: v for k, v in (s.get("socket_error_kinds") or {}).items() if v}
        # Answers of 4xx and 5xx, which are not counted as clicks, and
        # clicks dropped: what the click check's requests must allow for.
        dropped = sum(v for k, v in counters.items() if k.endswith(".clicks_dropped"))
        say(f"{name}: {s['rps']:.0f} req/s, p99 {s['p99_ms']} ms, socket errors {s['socket_errors']} {kinds or ''}"
            f"{non_3xx}, errors {s['errors']}, clicks dropped {dropped} (runs {s['runs_rps']}, "
            f"p99 {s['runs_p99_ms']}); Redis stalls: links {s['redis_stalls']}, clicks {s['clicks_redis_stalls']}")

    def empty_cache():
        # Restarting the child empties the cache outright; a ban would leave
        # dead objects filling storage until each is looked up again. The
        # last run's clicks are all sent first: a stopped child loses what
        # its flusher still holds, which after a saturated run (a miss run,
        # each click with its visit to log) can be seconds of clicks.
        # Redis quiet for seconds says every store's flusher is idle, whichever
        # VCL is in use (each VCL object publishes its counters only when it
        # answers, so clicks_settle reads the one in use alone).
        time.sleep(FLUSH_WAIT)
        for port in [clicks_port, *(cluster_ports if CLUSTER else [])]:
            flushes_settle(port)
        varnishadm(workdir, "stop")
        varnishadm(workdir, "start")
        wait_for_port(varnish_port, "Varnish")

    def links_wrk(mode, keys, connections=CONNECTIONS, duration=DURATION, statuses=False,
                  path="/l/", host="-", query="-", spread=False):
        # `statuses` counts answers that are not redirects, at the cost of a
        # Lua call per answer; `spread` sends each request as one of a few
        # devices and languages.
        args = [mode, str(keys), str(THREADS), "statuses" if statuses else "-", path, host, query,
                "spread" if spread else "-"]
        return lambda: wrk(base, "links.lua", args, connections=connections, duration=duration)

    redis_stalls(redis_port)  # the loading above is no scenario's
    redis_stalls(clicks_port)
    say("ceiling: fixed 301 from vcl_recv")
    scenario("ceiling", links_wrk("random", hit_keys), vcl_name="ceiling")

    # The cache holds nothing yet (the limit VCLs store nothing): warming
    # puts exactly the hit keys in it.
    warm = links_wrk("fresh", hit_keys, duration=max(2, DURATION // 3))
    # A run's p99 moves between runs of one machine by more than the target
    # allows (ceiling's read 1.7 to 6.8 ms in one run): hit's is judged by
    # the median of its ratios to runs of the ceiling paired with it.
    # Counting is judged the same way, by runs of hit-uncounted (the same
    # links on the VCL generated with counting off) paired with hit's: turns
    # of 50 ms would share the click pipeline's work (a flush a second, the
    # clicks' Redis) between both sides, and hide it.
    say("hit: cached links, each run paired with ceiling-paired (the ceiling on the same keys), "
        "hit-uncounted (the same links on the VCL generated with counting off) and hit-unlogged "
        "(counted, the visit log off)")
    scenario("hit", links_wrk("random", hit_keys), prepare=warm, counted=True,
             pairs=[("ceiling-paired", "ceiling"), ("hit-uncounted", "uncounted"),
                    ("hit-unlogged", "unlogged", True)])
    if "hit/hit-uncounted" in scenarios:
        scenarios["hit/counting"] = {
            "hit_rps": scenarios["hit"]["rps"], "uncounted_rps": scenarios["hit-uncounted"]["rps"],
            "ratio": round(scenarios["hit/hit-uncounted"], 3),
            "runs_hit_rps": scenarios["hit"]["runs_rps"],
            "runs_uncounted_rps": scenarios["hit-uncounted"]["runs_rps"]}

    def answers_checked(side, samples, host=None, query=None):
        """Asks for a few of `samples` (path, Location expected) as wrk
        will, and stops the bench unless each answers a 301 to it."""
        headers = {"User-Agent": "bench.py"}
        if host:
            headers["Host"] = host
        connection = http.client.HTTPConnection("127.0.0.1", varnish_port, timeout=5)
        try:
            for path, expected in samples:
                connection.request("GET", path + (f"?{query}" if query else ""), headers=headers)
                answer = connection.getresponse()
                answer.read()
                location = answer.getheader("Location")
                if answer.status != 301 or location != expected:
                    raise SystemExit(f"bench: {side}: {path} (Host {host or '127.0.0.1'}, query {query!r}) "
                                     f"answered {answer.status} {location!r}, not 301 {expected!r}")
        finally:
            connection.close()

    def forwarded():
        # Every loaded VCL has a counter of this name, and varnishstat's JSON
        # keeps one of them: the lines of -1 keep them all.
        lines = subprocess.run(["varnishstat", "-n", str(workdir), "-1", "-f", "*.queries_forwarded"],
                               capture_output=True, text=True, check=True).stdout.splitlines()
        fields = [line.split() for line in lines]
        return sum(int(f[1]) for f in fields if f and f[0].endswith(".queries_forwarded"))

    def in_turns(what, sides, duration=BESIDE_DURATION):
        """One run of `sides` taking turns (sides.lua), each side a dict of
        its "keys" file and, as links_wrk takes them, its "path", "host",
        "query" and "spread" (or "fresh": each key once, in order), and a
        "header" ("Name: value") to send. Stops the bench if a stored link
        answered 4xx or 5xx. Each side's figures (sides.lua's), and the
        run's latency and errors, both sides'."""
        args = [str(TURN_MS), str(SETTLE_MS), str(THREADS)]
        for side in sides:
            mode = "spread" if side.get("spread") else "fresh" if side.get("fresh") else "-"
            args += [str(side["keys"]), side.get("path", "/l/"), side.get("host", "-"), side.get("query", "-"),
                     mode, side.get("header", "-")]
        figures = wrk(base, "sides.lua", args, duration=duration)
        wrong = figures["errors"] - figures["socket_errors"]
        if wrong:
            raise SystemExit(f"bench: {what}: {wrong} answers of 4xx or 5xx for stored links")
        shared = {key: figures[key] for key in ("p50_ms", "p99_ms", "errors", "socket_errors",
                                                "socket_error_kinds", "reused_keys")}
        shared["runs_p99_ms"] = [figures["p99_ms"]]
        return figures["sides"], shared

    def beside_hit(sides):
        """Each of `sides` (name, where, prepare, answered[, after])
        measured in one run with `hit` (reported as hit-paired), the two
        taking turns of TURN_MS (sides.lua): the same seconds of the machine
        for both, and the click flushes of both charged to both alike. Its
        ratio is its settled rate over hit-paired's in that run. `where`
        says how its links are asked for (in_turns' side); each side
        prepares (warms its links, checks its answers) before its run, and
        `answered`, when given, is a counter of varnishstat and what it
        counts: the bench stops unless it grew by each of the side's
        requests (a query forwarded, a target chosen). `after` runs after
        the side's run. The clicks of all of them are accounted once, after
        the last run (waiting for them after each run would add seconds to
        it)."""
        chosen = [side for side in sides if not ONLY or side[0] in ONLY]
        if not chosen:
            return
        varnishadm(workdir, "vcl.use", "boot")
        shed_before = shed_so_far()
        before = client_requests()
        # hit's links are cached already when `hit` ran (nothing empties the
        # cache between them).
        if ONLY and "hit" not in ONLY:
            warm_beside(hit_keys)()
        paired, besides = [], {}
        for name, where, prepare, answered, *after in chosen:
            prepare()
            counted = answered[0]() if answered else 0
            commands = links_redis_commands()
            # "paired_spread": hit's links asked for by the same devices
            # and languages as the side's, so that its ratio is what its
            # links cost and not what more visitors cost the counting.
            hit_where = {"keys": hit_keys, "spread": where.get("paired_spread", False)}
            (hit, side), run = in_turns(f"{name} beside hit", [hit_where, where])
            commands = links_redis_commands() - commands
            if answered:
                # The last answers of each connection are in flight when wrk stops.
                counted = answered[0]() - counted
                if counted < side["requests"] - CONNECTIONS:
                    raise SystemExit(f"bench: {name}: {counted} {answered[1]} for {side['requests']} requests")
            run["links_redis_commands"] = commands
            scenarios[name] = {**run, "rps": side["rps"], "requests": side["requests"], "turns": side["turns"],
                               "runs_rps": [side["rps"]]}
            paired.append({**run, "rps": hit["rps"], "requests": hit["requests"], "turns": hit["turns"]})
            besides[name] = {"rps": side["rps"], "hit_rps": hit["rps"], "ratio": round(side["rps"] / hit["rps"], 3),
                             "turns": side["turns"], "hit_turns": hit["turns"]}
            say(f"{name}: {side['rps']:.0f} req/s beside hit-paired's {hit['rps']:.0f} "
                f"({besides[name]['ratio']:.3f}; {side['turns']} and {hit['turns']} turns of {TURN_MS} ms), "
                f"p99 of both {run['p99_ms']} ms, {run['socket_errors']} socket errors, "
                f"{commands} commands to the links' Redis")
            for then in after:
                then()
        varnishadm(workdir, "vcl.use", "boot")
        time.sleep(FLUSH_WAIT)
        counted_requests["requests"] += client_requests() - before
        catch_up["hit-paired"] = [round(FLUSH_WAIT + clicks_settle(), 1)]
        add_shed(shed_before)
        stalls = redis_stalls(redis_port), redis_stalls(clicks_port)
        hit = scenarios["hit-paired"] = median_of(paired)
        hit["runs_rps"] = [r["rps"] for r in paired]
        for name, *_ in chosen:
            scenarios[name]["redis_stalls"], scenarios[name]["clicks_redis_stalls"] = stalls
            scenarios[f"{name}/hit-paired"] = besides[name]
        hit["redis_stalls"], hit["clicks_redis_stalls"] = stalls

    def commands_alone(name, keys, **where):
        """Commands the links' Redis ran for a short run of `keys` alone."""
        commands = links_redis_commands()
        figures = links_wrk("random", keys, duration=DURATION_ALONE, **where)()
        if figures["errors"] - figures["socket_errors"]:
            raise SystemExit(f"bench: {name}: answers of 4xx or 5xx for stored links")
        commands = links_redis_commands() - commands
        say(f"{name} alone: {commands} commands to the links' Redis in {DURATION_ALONE} s")
        return commands

    # Commands of no request: the bench's own INFO, what a connection does
    # to open itself or to be checked, and the writer's read of its purge
    # queue (a stream, XRANGE, once a second whatever the traffic).
    housekeeping = {"cmdstat_info", "cmdstat_ping", "cmdstat_hello", "cmdstat_auth", "cmdstat_select",
                    "cmdstat_client|setname", "cmdstat_client|setinfo", "cmdstat_command|docs"}

    def links_redis_commands():
        """Commands the links' Redis has run for requests (INFO commandstats)."""
        stats = redis_cli(redis_port, "INFO", "commandstats")
        calls = {line.partition(":")[0]: int(line.split("calls=")[1].split(",")[0])
                 for line in stats.splitlines() if line.startswith("cmdstat_")}
        return sum(n for name, n in calls.items()
                   if name not in housekeeping and not name.startswith("cmdstat_x"))

    def targets_chosen():
        lines = subprocess.run(["varnishstat", "-n", str(workdir), "-1", "-f", "*.targets_chosen"],
                               capture_output=True, text=True, check=True).stdout.splitlines()
        fields = [line.split() for line in lines]
        return sum(int(f[1]) for f in fields if f and f[0].endswith(".targets_chosen"))

    def rules_checked():
        """Asks for a few hit-rules links as an iPhone, a French desktop and
        a desktop of no language, and stops the bench unless each answers a
        301 to its rule's target, or to a split target."""
        connection = http.client.HTTPConnection("127.0.0.1", varnish_port, timeout=5)
        agents = {"ios": ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) Mobile/15E148", ""),
                  "fr": ("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Firefox/128.0", "fr-FR,fr;q=0.9"),
                  "split": ("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Firefox/128.0", "")}
        try:
            for n in samples:
                key, url = rules_links[n]
                for rule, (agent, language) in agents.items():
                    connection.request("GET", f"/l/{key}", headers={"User-Agent": agent, "Accept-Language": language})
                    answer = connection.getresponse()
                    answer.read()
                    location = answer.getheader("Location")
                    expected = [f"{url}/a", f"{url}/b"] if rule == "split" else [f"{url}/{rule}"]
                    if answer.status != 301 or location not in expected:
                        raise SystemExit(f"bench: hit-rules: /l/{key} as {rule} answered {answer.status} "
                                         f"{location!r}, not 301 to one of {expected}")
        finally:
            connection.close()

    def warm_beside(keys, check=lambda: None, **where):
        # As `hit` warms, each side's links on its own path, then a look at
        # what they answer.
        warming = links_wrk("fresh", keys, duration=max(1, DURATION // 3), **where)
        return lambda: (warming(), check())

    domain_where = {"path": "/", "host": DOMAIN_ALIAS}
    query_where = {"query": CAMPAIGN_QUERY}
    samples = [0, 1, HIT_LINKS // 2, HIT_LINKS - 1]

    # The target is chosen from the cache: the links' Redis runs no more
    # commands for hit-rules than for hit, each asked for alone.
    rules_commands = {}
    say(f"hit-domain: hit's links on {SECOND_DOMAIN}, asked for as {DOMAIN_ALIAS}/<key>; hit-query: "
        f"links forwarding their query (?+), asked for with a {len(CAMPAIGN_QUERY)}-byte campaign query; "
        "hit-rules: links with four rules and a split, asked for by devices and languages; "
        f"each in a run of its own with hit (hit-paired), taking turns of {TURN_MS} ms")
    beside_hit([
        ("hit-domain", {"keys": hit_keys, **domain_where},
         warm_beside(hit_keys, lambda: answers_checked(
             "hit-domain", [(f"/{links[n][0]}", links[n][1]) for n in samples], host=DOMAIN_ALIAS),
                     **domain_where), None),
        ("hit-query", {"keys": query_keys, **query_where},
         warm_beside(query_keys, lambda: answers_checked(
             "hit-query", [(f"/l/{query_links[n][0]}", f"{query_links[n][1]}?{CAMPAIGN_QUERY}") for n in samples],
             query=CAMPAIGN_QUERY), **query_where), (forwarded, "queries forwarded")),
        ("hit-rules", {"keys": rules_keys, "spread": True, "paired_spread": True},
         warm_beside(rules_keys, rules_checked),
         (targets_chosen, "targets chosen"),
         lambda: rules_commands.update({"hit": commands_alone("hit", hit_keys),
                                        "hit-rules": commands_alone("hit-rules", rules_keys, spread=True)})),
        # For profiling only (BENCH_SCENARIOS=hit-spread): hit's links, with
        # no rules, asked for by hit-rules's devices and languages: what
        # more visitors and details cost the counting, apart from the rules.
        *([("hit-spread", {"keys": hit_keys, "spread": True}, lambda: None, None)]
          if "hit-spread" in ONLY else []),
    ])

    def miss_in_turns():
        """`miss` and `lookup-synth` taking turns in one run from an empty
        cache, through the router VCL, each asking for keys of its own,
        each once: keys never asked for, by Varnish or by the click store.
        Both count: their clicks are set apart from the exactness check."""
        # Shorter with fewer links: a side asks for at most about 30,000
        # keys a second.
        duration = max(1, min(MISS_TURNS_DURATION, (LINKS - HIT_LINKS) // 2 // 30_000))
        say(f"miss in turns with lookup-synth (each key looked up in vcl_recv and answered by a synthetic "
            f"redirect, counted, nothing cached): fresh keys of their own, never asked for, "
            f"{duration} s in turns of {TURN_MS} ms through the router VCL")
        empty_cache()
        varnishadm(workdir, "vcl.use", "router")
        time.sleep(FLUSH_WAIT)
        clicks_settle()
        stored_before = stored_clicks(clicks_port)
        (miss, lookup), run = in_turns("miss beside lookup-synth", [
            {"keys": fresh_miss_keys, "fresh": True, "header": f"{SIDE_HEADER}: counted"},
            {"keys": fresh_lookup_keys, "fresh": True, "header": f"{SIDE_HEADER}: lookup-synth"}],
            duration=duration)
        varnishadm(workdir, "vcl.use", "boot")
        if run["reused_keys"] and not QUICK:
            raise SystemExit(f"bench: miss beside lookup-synth: {run['reused_keys']} keys asked for twice; "
                             "load more links (BENCH_LINKS) or run it shorter")
        time.sleep(FLUSH_WAIT)
        clicks_settle()
        stored = stored_clicks(clicks_port) - stored_before
        counted_apart["stored"] += stored
        # The restart before the turns started the counters again.
        counters = store_counters()
        scenarios["miss/lookup-synth"] = {"miss_rps": miss["rps"], "lookup_synth_rps": lookup["rps"],
                                          "ratio": round(miss["rps"] / lookup["rps"], 3), "turns": miss["turns"],
                                          "requests": miss["requests"] + lookup["requests"],
                                          "clicks_stored": stored, "reused_keys": run["reused_keys"],
                                          "clicks_without_details": counters["clicks_without_details"],
                                          "clicks_dropped": counters["clicks_dropped"]}
        say(f"miss in turns with lookup-synth: {miss['rps']:.0f} against {lookup['rps']:.0f} req/s "
            f"({scenarios['miss/lookup-synth']['ratio']:.3f}; {miss['turns']} turns each), {stored} clicks stored "
            f"for {miss['requests'] + lookup['requests']} requests sent ({counters['clicks_without_details']} "
            f"without details, {counters['clicks_dropped']} dropped), p99 of both {run['p99_ms']} ms")

    say("origin-miss: every request a fresh key, fetched from an HTTP origin")
    scenario("origin-miss", links_wrk("fresh", fresh_keys), prepare=empty_cache, vcl_name="originmiss")
    if not ONLY or "miss" in ONLY:
        miss_in_turns()
    say("miss: every request a fresh key, each run paired with miss-uncounted (the same with counting off) "
        "and miss-cached-first (every answer cached at its first request, as before the admission rule)")
    scenario("miss", links_wrk("fresh", fresh_keys), prepare=empty_cache, counted=True,
             pairs=[("miss-uncounted", "uncounted"), ("miss-cached-first", "cachedfirst", True),
                    ("miss-unlogged", "unlogged", True)])
    if CLUSTER:
        say(f"miss-cluster: the same, each key looked up in the cluster of {CLUSTER_PRIMARIES} primaries")
        scenario("miss-cluster", links_wrk("fresh", fresh_keys), prepare=empty_cache, vcl_name="cluster",
                 counted=True)
        say("miss-cluster-clicks: the same, counting the clicks in the cluster too")
        scripts_before = cluster_script_usec(cluster_ports)
        scenario("miss-cluster-clicks", links_wrk("fresh", fresh_keys), prepare=empty_cache,
                 vcl_name="clusterclicks", counted=True, clicks_in="cluster")
        script_usec = cluster_script_usec(cluster_ports) - scripts_before
    say("zipf: s = 1.0 over every link, from an empty cache")
    scenario("zipf", links_wrk("zipf", all_keys), prepare=empty_cache, counted=True)
    if "zipf-uncounted" in ONLY:
        # For profiling only: what counting costs the long tail.
        scenario("zipf-uncounted", links_wrk("zipf", all_keys), prepare=empty_cache, vcl_name="uncounted")

    clicks = None
    if not ONLY or {"hit", "hit-domain", "hit-query", "hit-rules", "miss", "zipf"} & set(ONLY):
        time.sleep(FLUSH_WAIT)
        stored = stored_clicks(clicks_port) - counted_apart["stored"]
        clicks = {"requests": counted_requests["requests"], "stored": stored,
                  "lost": max(0, counted_requests["requests"] - stored),
                  "double": max(0, stored - counted_requests["requests"])}
        clicks["catch_up_s"] = catch_up
        clicks["without_details"] = shed["clicks_without_details"]
        clicks["dropped"] = shed["clicks_dropped"]
        clicks["stored_by_uncounted_runs"] = dict(stray_clicks)
        say(f"clicks: {clicks['stored']} stored for {clicks['requests']} link requests "
            f"in hit, hit-domain, hit-query, hit-rules, miss and zipf ({clicks['lost']} lost, {clicks['dropped']} of "
            f"them dropped by the click store past its backlog and queues; {clicks['double']} counted twice, "
            f"of them stored during runs that count none: {stray_clicks or 'none'}; "
            f"{clicks['without_details']} counted without details, the click store's backlog past half full); "
            f"all sent {catch_up} s after each run")
    clicks_cluster = None
    if CLUSTER and (not ONLY or "miss-cluster-clicks" in ONLY):
        requests = counted_requests["cluster"]
        stored = sum(stored_clicks(port) for port in cluster_ports)
        clicks_cluster = {"requests": requests, "stored": stored, "lost": max(0, requests - stored),
                          "double": max(0, stored - requests),
                          "script_usec_per_click": round(script_usec / max(1, requests), 2)}
        say(f"clicks in the cluster: {stored} stored for {requests} link requests in miss-cluster-clicks "
            f"({clicks_cluster['lost']} lost, {clicks_cluster['double']} counted twice); "
            f"{clicks_cluster['script_usec_per_click']} µs of the nodes' script time per click")

    # After the exactness check: neither the warm-up traffic nor the warming
    # fetches are in its request count.
    warming = {}
    # The same Zipf traffic measured just before each restart: what a warmed
    # restart is judged against.
    before_restart = []

    def restart_and_warm():
        links_wrk("zipf", all_keys, duration=ZIPF_WARMUP)()
        before_restart.append(links_wrk("zipf", all_keys)())
        empty_cache()
        started = time.monotonic()
        # A warm that could not load every link exits 1 and says why; the
        # run goes on with the links it did load, and the reason is kept.
        warm = subprocess.run([str(RELEASE / "shortlink"), "warm", "--config", str(config)],
                              capture_output=True, text=True)
        warming.setdefault("runs", []).append({"seconds": round(time.monotonic() - started, 2),
                                               "printed": (warm.stdout + warm.stderr).strip(),
                                               "exit": warm.returncode})

    say(f"zipf-restart: {ZIPF_WARMUP} s of Zipf traffic, {DURATION} s more measured (zipf-before-restart), "
        "Varnish restarted and warmed with `shortlink warm` (10,000 links), then measured")
    scenario("zipf-restart", links_wrk("zipf", all_keys), prepare=restart_and_warm)
    if before_restart:
        scenarios["zipf-before-restart"] = median_of(before_restart)
        ratios = [after / before["rps"] for after, before
                  in zip(scenarios["zipf-restart"]["runs_rps"], before_restart)]
        scenarios["zipf-restart/zipf-before-restart"] = statistics.median(ratios)
        say(f"zipf-before-restart: {scenarios['zipf-before-restart']['rps']:.0f} req/s "
            f"(runs {scenarios['zipf-before-restart']['runs_rps']}); zipf-restart / zipf-before-restart "
            f"per run: {[round(r, 3) for r in ratios]}")
    if warming:
        say(f"zipf-restart: warming took {[r['seconds'] for r in warming['runs']]} s: "
            f"{[r['printed'] for r in warming['runs']]}")

    say(f"storm: {STORM_CONNECTIONS} connections, uniform over {STORM_LINKS} links, from an empty cache, "
        f"each run paired with ceiling500 (the ceiling with as many connections): a storm's p99 moves "
        f"between runs with the machine's speed by more than the target allows")
    scenario("storm", links_wrk("random", storm_keys, STORM_CONNECTIONS, STORM_DURATION, statuses=True),
             prepare=empty_cache, pairs=[("ceiling500", "ceiling"), ("storm-unlogged", "unlogged", True)],
             counted=True)
    if "storm-uncounted" in ONLY:
        # For profiling only: what counting costs the storm.
        scenario("storm-uncounted", links_wrk("random", storm_keys, STORM_CONNECTIONS, STORM_DURATION,
                                              statuses=True), prepare=empty_cache, vcl_name="uncounted")
    if "storm-cached-first" in ONLY:
        # For profiling only: the storm with every answer cached at its
        # first request, as before the admission rule.
        scenario("storm-cached-first", links_wrk("random", storm_keys, STORM_CONNECTIONS, STORM_DURATION,
                                                 statuses=True), prepare=empty_cache, vcl_name="cachedfirst")

    # Not a target: how the architecture people build otherwise weathers
    # the same storm, for context on the storm's own p99.
    say("origin-storm: the storm through Varnish caching an HTTP origin")
    scenario("origin-storm", links_wrk("random", storm_keys, STORM_CONNECTIONS, STORM_DURATION, statuses=True),
             prepare=empty_cache, vcl_name="originmiss")

    writer = store = None
    if not ONLY or "writer" in ONLY:
        # Each writer run is paired with a store-ceiling run right before or
        # after it, so the two meet the same disk (fsync times drift over
        # minutes).
        say("writer: inserts through the JSON API, 16 clients, each run paired with the claim script "
            "straight at Redis, 16 clients (the store ceiling)")
        writer_runs, store_runs = [], []
        for run_id in range(PAIRS):
            # Every other pair starts with the store ceiling, so that a
            # drift of the disk within a pair favours neither side.
            if run_id % 2:
                store_runs.append(store_ceiling(redis_port))
            writer_runs.append(wrk(f"http://127.0.0.1:{writer_port}", "insert.lua",
                                   [f"r{run_id}-{os.getpid()}", BENCH_TOKEN], connections=16))
            if not run_id % 2:
                store_runs.append(store_ceiling(redis_port))
        writer = median_of(writer_runs)
        store = statistics.median(store_runs)
        pair_ratios = [w["rps"] / s for w, s in zip(writer_runs, store_runs)]
        writer["ratio"] = statistics.median(pair_ratios)
        say(f"writer: {writer['rps']:.0f} inserts/s, errors {writer['errors']} (runs {writer['runs_rps']})")
        say(f"store ceiling: {store:.0f} inserts/s (runs {store_runs}); "
            f"ratios {[round(r, 3) for r in pair_ratios]}")

    edit = None
    if not ONLY or "edit" in ONLY:
        edited = [key for key, _ in links[:EDITORS * KEYS_PER_EDITOR]]
        say(f"edit: {EDITORS} editors change {len(edited)} links through the API, each checking Varnish "
            f"right after the answer, while {EDIT_READERS} connections read the same links")
        # A wrong answer is a stale link or an error; for an error, what
        # Redis stalled on and the lookups that failed say which. Reading
        # the latency monitors starts them afresh for the scenario.
        redis_stalls(redis_port), redis_stalls(clicks_port)
        failed_before = lookup_failures()
        edit = edit_scenario(base, writer_port, varnish_port, write_keys("edit", edited))
        edit["redis_stalls"], edit["clicks_redis_stalls"] = redis_stalls(redis_port), redis_stalls(clicks_port)
        edit["lookups_failed"] = {name: value - failed_before.get(name, 0)
                                  for name, value in lookup_failures().items()}
        say(f"edit: {edit['edits_per_s']:.0f} edits/s, p99 {edit['p99_ms']} ms, "
            f"{edit['stale_after_answer']} stale after the answer (longest window {edit['max_window_ms']} ms), "
            f"{edit['failed']} failed, {edit['purge_warnings']} unpurged; readers {edit['readers']['rps']:.0f} req/s, "
            f"non-3xx {edit['readers']['non_3xx']} (runs {edit['runs_edits_per_s']}); lookups failed "
            f"{edit['lookups_failed']}; Redis stalls: links {edit['redis_stalls']}, "
            f"clicks {edit['clicks_redis_stalls']}"
            + (f"; e.g. {edit['examples']}" if edit["examples"] else ""))

    export = None
    if not ONLY or "export" in ONLY:
        # The smaller export's links: one owner's, stored as the writer
        # stores them (the owner word, the owner's list of keys).
        owned = make_links(LINKS // EXPORT_SHARE, "exported",
                           taken=(key for key, _ in links + query_links + rules_links))
        load(redis_port, [resp("HSET", PREFIX + key[:SPLIT], key[SPLIT:], f"{url} @{EXPORT_OWNER}")
                          for key, url in owned]
                         + [resp("RPUSH", f"{PREFIX}@{EXPORT_OWNER}", key) for key, _ in owned])
        say(f"export: {EXPORT_OWNER}'s links, then every link, as CSV through GET /api/links/export, "
            "the writer's resident memory sampled every 5 ms")
        small = export_scenario(writer_process.pid, writer_port, owner=EXPORT_OWNER)
        export = export_scenario(writer_process.pid, writer_port)
        export["owner"] = small
        for name, run in ((EXPORT_OWNER, small), ("every link", export)):
            say(f"export, {name}: {run['links']:,} links, {run['bytes'] / 1e6:.1f} MB in {run['seconds']} s "
                f"({run['links_per_s']:,.0f} links/s); writer RSS {run['rss_before_kib'] / 1024:.1f} MiB "
                f"before, {run['rss_peak_kib'] / 1024:.1f} MiB at most during it")

    if ONLY:
        return 0
    ceiling = scenarios["ceiling"]["rps"]
    report = {
        "machine": machine(),
        "quick": QUICK,
        "runs": RUNS,
        "duration_s": DURATION,
        "connections": CONNECTIONS,
        "storm": {"connections": STORM_CONNECTIONS, "duration_s": STORM_DURATION, "links": STORM_LINKS},
        "scenarios": {
            name: {**{k: s[k] for k in ("rps", "p50_ms", "p99_ms", "errors", "socket_errors", "socket_error_kinds")},
                   **({"non_3xx": s["non_3xx"]} if s.get("non_3xx") is not None else {}),
                   "ratio_to_ceiling": round(s["rps"] / ceiling, 3), "runs_rps": s["runs_rps"],
                   "runs_p99_ms": s["runs_p99_ms"],
                   **({"last_run_answers": s["last_run_answers"]} if "last_run_answers" in s else {}),
                   **({"click_cpu_us_per_click": s["click_cpu_us_per_click"]}
                      if "click_cpu_us_per_click" in s else {}),
                   "reused_keys": s["reused_keys"], "redis_stalls": s.get("redis_stalls"),
                   "clicks_redis_stalls": s.get("clicks_redis_stalls")}
            for name, s in scenarios.items() if "/" not in name
        },
        # hit and hit-uncounted in paired runs, the median of their ratios.
        "counting_cost": scenarios["hit/counting"],
        # Each of hit, miss and storm against runs paired with it on the VCL
        # with the visit log off: the median of their rate ratios.
        "visit_log_cost": {name: round(scenarios[f"{name}/{name}-unlogged"], 3)
                           for name in ("hit", "miss", "storm") if f"{name}/{name}-unlogged" in scenarios},
        "hit_p99_to_ceiling_per_pair_median": round(scenarios["hit/ceiling-paired p99"], 3),
        "storm_p99_to_ceiling500_per_pair_median": round(scenarios["storm/ceiling500 p99"], 3),
        "restart": {"zipf_restart_to_before_per_run_median":
                    round(scenarios["zipf-restart/zipf-before-restart"], 3)},
        # miss and lookup-synth in turns of one run, each key asked for once.
        "cold_path": {"miss_beside_lookup_synth": scenarios["miss/lookup-synth"],
                      "miss_to_uncounted_per_pair_median": round(scenarios["miss/miss-uncounted"], 3),
                      "miss_to_cached_first_per_pair_median": round(scenarios["miss/miss-cached-first"], 3),
                      "cached_first_clicks": scenarios["miss-cached-first"]["clicks"]},
        # Each against the `hit` turns of its own run (hit-paired).
        "domains_and_queries": {
            "second_domain": SECOND_DOMAIN, "asked_as": DOMAIN_ALIAS, "campaign_query": CAMPAIGN_QUERY,
            "turn_ms": TURN_MS, "settle_ms": SETTLE_MS, "run_s": BESIDE_DURATION,
            "hit_domain": scenarios["hit-domain/hit-paired"], "hit_query": scenarios["hit-query/hit-paired"],
        },
        "rules": {
            "words": RULES_WORDS,
            "hit_rules": scenarios["hit-rules/hit-paired"],
            # Commands the links' Redis ran during a run of each alone.
            "links_redis_commands": rules_commands, "alone_s": DURATION_ALONE,
        },
        "memory": {
            "links": LINKS,
            "bytes_per_link": round(hash_bytes, 1),
            "plain_keys_bytes_per_link": round(plain_bytes, 1),
            "ratio_to_plain": round(hash_bytes / plain_bytes, 3),
            "with_expiry_and_owner_bytes_per_link": round(owned_bytes, 1),
            "mean_url_bytes": round(url_bytes, 1),
            "hash_encoding": encodings,
            "click_totals_bytes_per_link": round(totals_bytes, 1),
            "daily_counts_bytes_per_link_day": round(day_bytes, 1),
            # Every link clicked on every day of a year: 365 measured days.
            "year_of_daily_counts_bytes_per_link": round(365 * day_bytes),
        },
        "writer": {"inserts_per_s": writer["rps"], "errors": writer["errors"], "p99_ms": writer["p99_ms"],
                   "runs_inserts_per_s": writer["runs_rps"],
                   "store_ceiling_inserts_per_s": round(store, 1),
                   "runs_store_ceiling_inserts_per_s": store_runs,
                   # The median of each run's ratio to the ceiling run that followed it.
                   "ratio_to_store_ceiling": round(writer["ratio"], 3)},
        "edit": {**edit, "ratio_to_store_ceiling": round(edit["edits_per_s"] / store, 3)},
        "clicks": clicks,
        "warming": warming,
        "export": export,
    }
    if clicks_cluster:
        report["clicks_cluster"] = clicks_cluster
    report["targets"] = judge(report)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "latest.json").write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    missed = [t for t in report["targets"] if not t["met"] and (not QUICK or t["always"])]
    for target in missed:
        say(f"target missed: {target['name']}: {target['ratio']} (target {target['target']})")
    return 1 if missed else 0


# The ceiling answers the very bytes a real redirect carries (status,
# headers, page), so the comparison measures the path, not the size.
CEILING_URL = "https://example.org/p/1"
REDIRECT_PAGE = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Moved</title>'
                 '</head><body><p>This link leads to <a href="@URL@">@URL@</a>.</p></body></html>\n')
SYNTH_REDIRECT = f"""sub vcl_synth {{
    set resp.http.Location = "{CEILING_URL}";
    set resp.http.Cache-Control = "public, max-age=86400";
    set resp.http.Content-Type = "text/html; charset=utf-8";
    set resp.http.X-Cache = "HIT";
    synthetic({{"{REDIRECT_PAGE.replace("@URL@", CEILING_URL)}"}});
    return (deliver);
}}
"""
# Placed before the shipped VCL's own subroutines, which it ends before
# they run: a key found is a 301 to its URL, made in vcl_synth and counted
# there; an unknown key a 404. The redirect's page is the ceiling's.
LOOKUP_SYNTH_VCL = f"""sub vcl_recv {{
    if (req.url ~ "^/l/[A-Za-z0-9_-]{{3,64}}$") {{
        set req.http.Shortlink-Target = shortlink_links.lookup(regsub(req.url, "^/l/", ""));
        if (req.http.Shortlink-Target == "") {{
            return (synth(404, "Not Found"));
        }}
        return (synth(301, "Moved Permanently"));
    }}
}}
sub vcl_synth {{
    if (resp.status == 301 && req.http.Shortlink-Target) {{
        set resp.http.Location = req.http.Shortlink-Target;
        set resp.http.Cache-Control = "no-cache";
        set resp.http.Content-Type = "text/html; charset=utf-8";
        shortlink_links.count(client.ip);
        synthetic({{"{REDIRECT_PAGE.replace("@URL@", CEILING_URL)}"}});
        return (deliver);
    }}
}}
"""
# The header the router VCL reads: "counted" or "lookup-synth".
SIDE_HEADER = "Bench-Side"
ROUTER_VCL = f"""vcl 4.1;
backend default none;
sub vcl_recv {{
    if (req.http.{SIDE_HEADER} == "lookup-synth") {{
        return (vcl(lookup_side));
    }}
    return (vcl(counted_side));
}}
"""
CEILING_VCL = ('vcl 4.1;\nbackend default none;\n'
               'sub vcl_recv { return (synth(301, "Moved Permanently")); }\n' + SYNTH_REDIRECT)
# The origin answers every path at once; the front caches what it answers
# for as long as the VMOD's redirects are cached.
ORIGIN_VCL = CEILING_VCL
CACHING_PROXY_VCL = """vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "@PORT@"; }
sub vcl_recv {
    unset req.http.Cookie;
    return (hash);
}
sub vcl_backend_response {
    set beresp.ttl = 1d;
    return (deliver);
}
"""

# name, what is measured, what it is measured against, the bound, and
# whether a quick run enforces it too (only what does not depend on speed);
# a ratio the report already holds (a median of paired runs) is used as it is.
TARGETS = [
    # Each run of hit against a run of the ceiling paired with it.
    ("hit p99", lambda r: r["scenarios"]["hit"]["p99_ms"], "ceiling-paired p99",
     lambda r: r["scenarios"]["ceiling-paired"]["p99_ms"], "<=", 1.3, False,
     lambda r: r["hit_p99_to_ceiling_per_pair_median"]),
    # Counted hits against uncounted ones, each run paired with one.
    ("counting cost", lambda r: r["counting_cost"]["hit_rps"], "hit-uncounted req/s",
     lambda r: r["counting_cost"]["uncounted_rps"], ">=", 0.95, False,
     lambda r: r["counting_cost"]["ratio"]),
    # Each side against the hit turns of its own run.
    *[(f"{side} req/s", lambda r, at=at, key=key: r[at][key]["rps"], "hit-paired req/s",
       lambda r, at=at, key=key: r[at][key]["hit_rps"], ">=", bound, False)
      for side, at, key, bound in (("hit-domain", "domains_and_queries", "hit_domain", DOMAIN_AND_QUERY_RATIO),
                                   ("hit-query", "domains_and_queries", "hit_query", DOMAIN_AND_QUERY_RATIO),
                                   ("hit-rules", "rules", "hit_rules", RULES_RATIO))],
    # No more commands than hit's: (rules + 1) / (hit + 1) <= 1 holds exactly
    # when hit-rules sent no more, whatever hit sent (often none at all).
    ("hit-rules Redis commands", lambda r: r["rules"]["links_redis_commands"]["hit-rules"],
     "hit Redis commands", lambda r: r["rules"]["links_redis_commands"]["hit"], "<=", 1.0, True,
     lambda r: round((r["rules"]["links_redis_commands"]["hit-rules"] + 1)
                     / (r["rules"]["links_redis_commands"]["hit"] + 1), 3)),
    # The visit log on against off, hits each run paired with one.
    ("visit log cost", lambda r: r["scenarios"]["hit"]["rps"], "hit-unlogged req/s",
     lambda r: r["scenarios"]["hit-unlogged"]["rps"], ">=", 0.97, False,
     lambda r: r["visit_log_cost"]["hit"]),
    # A cold request costs no more than one lookup and an answer.
    ("miss req/s, in turns", lambda r: r["cold_path"]["miss_beside_lookup_synth"]["miss_rps"],
     "lookup-synth req/s, in turns", lambda r: r["cold_path"]["miss_beside_lookup_synth"]["lookup_synth_rps"],
     ">=", 1.0, False, lambda r: r["cold_path"]["miss_beside_lookup_synth"]["ratio"]),
    # What counting costs a cold request.
    ("counting cost, miss", lambda r: r["scenarios"]["miss"]["rps"], "miss-uncounted req/s",
     lambda r: r["scenarios"]["miss-uncounted"]["rps"], ">=", 0.9, False,
     lambda r: r["cold_path"]["miss_to_uncounted_per_pair_median"]),
    # A restart, warmed, against the same traffic just before it.
    # The long tail: Zipf traffic over every link from an empty cache, most
    # of its keys asked for once.
    ("zipf req/s", lambda r: r["scenarios"]["zipf"]["rps"], "ceiling req/s",
     lambda r: r["scenarios"]["ceiling"]["rps"], ">=", 0.65, False),
    ("zipf-restart req/s", lambda r: r["scenarios"]["zipf-restart"]["rps"], "zipf-before-restart req/s",
     lambda r: r["scenarios"]["zipf-before-restart"]["rps"], ">=", 0.80, False,
     lambda r: r["restart"]["zipf_restart_to_before_per_run_median"]),
    # Each run of the storm against a run of ceiling500 paired with it.
    ("storm p99", lambda r: r["scenarios"]["storm"]["p99_ms"], "ceiling500 p99",
     lambda r: r["scenarios"]["ceiling500"]["p99_ms"], "<=", 3.0, False,
     lambda r: r["storm_p99_to_ceiling500_per_pair_median"]),
    ("writer inserts/s", lambda r: r["writer"]["inserts_per_s"], "store ceiling inserts/s",
     lambda r: r["writer"]["store_ceiling_inserts_per_s"], ">=", 0.6, False,
     lambda r: r["writer"]["ratio_to_store_ceiling"]),
    ("memory bytes/link", lambda r: r["memory"]["bytes_per_link"], "plain keys bytes/link",
     lambda r: r["memory"]["plain_keys_bytes_per_link"], "<=", 0.55, False),
    # The writer's peak memory while it streams every link, against its peak
    # while it streams a tenth as many: the same when the export streams.
    ("export peak memory", lambda r: r["export"]["rss_peak_kib"] * 1024, "peak exporting a tenth",
     lambda r: r["export"]["owner"]["rss_peak_kib"] * 1024, "<=", EXPORT_PEAK_RATIO, False),
]


def judge(report):
    """Every target as value / limit, both from this run."""
    judged = []
    for name, value, limit_name, limit, op, bound, always, *given_ratio in TARGETS:
        v, l = value(report), limit(report)
        ratio = given_ratio[0](report) if given_ratio else round(v / l, 3) if l else float("inf")
        met = ratio <= bound if op == "<=" else ratio >= bound
        judged.append({"name": name, "value": v, "limit_name": limit_name, "limit": l, "ratio": ratio,
                       "target": f"{op} {bound}", "met": met, "always": always})
    if "miss-cluster" in report["scenarios"]:
        v, l = report["scenarios"]["miss-cluster"]["rps"], report["scenarios"]["miss"]["rps"]
        ratio = round(v / l, 3) if l else float("inf")
        judged.append({"name": "miss in a cluster", "value": v, "limit_name": "miss req/s (one Redis)",
                       "limit": l, "ratio": ratio, "target": f">= {CLUSTER_MISS_RATIO}",
                       "met": ratio >= CLUSTER_MISS_RATIO, "always": False})
    in_cluster = report.get("clicks_cluster")
    if in_cluster:
        judged.append({"name": "clicks exact, cluster",
                       "value": {"lost": in_cluster["lost"], "double": in_cluster["double"]},
                       "limit_name": None, "limit": None,
                       "ratio": in_cluster["lost"] + in_cluster["double"], "target": "0 lost, 0 double",
                       "met": in_cluster["lost"] == 0 and in_cluster["double"] == 0
                       and in_cluster["stored"] > 0, "always": True})
    totals = report["memory"]["click_totals_bytes_per_link"]
    judged.append({"name": "memory, click totals", "value": {"bytes_per_link": totals},
                   "limit_name": None, "limit": CLICK_TOTALS_BYTES_LIMIT, "ratio": totals,
                   "target": f"<= {CLICK_TOTALS_BYTES_LIMIT} B/link",
                   "met": totals <= CLICK_TOTALS_BYTES_LIMIT, "always": False})
    owned = report["memory"]["with_expiry_and_owner_bytes_per_link"]
    judged.append({"name": "memory, owned links", "value": {"bytes_per_link": owned},
                   "limit_name": None, "limit": OWNED_BYTES_LIMIT, "ratio": owned,
                   "target": f"<= {OWNED_BYTES_LIMIT} B/link",
                   "met": owned <= OWNED_BYTES_LIMIT, "always": False})
    edit = report["edit"]
    judged.append({"name": "edit window", "value": {"stale_after_answer": edit["stale_after_answer"],
                                                     "failed": edit["failed"],
                                                     "unpurged": edit["purge_warnings"]},
                   "limit_name": None, "limit": None, "ratio": edit["stale_after_answer"],
                   "target": "0 stale, 0 failed, 0 unpurged",
                   "met": edit["stale_after_answer"] == 0 and edit["failed"] == 0
                   and edit["purge_warnings"] == 0 and edit["edits"] > 0,
                   "always": True})
    clicks = report["clicks"]
    judged.append({"name": "clicks exact", "value": {"lost": clicks["lost"], "double": clicks["double"]},
                   "limit_name": None, "limit": None, "ratio": clicks["lost"] + clicks["double"],
                   "target": "0 lost, 0 double",
                   "met": clicks["lost"] == 0 and clicks["double"] == 0 and clicks["stored"] > 0,
                   "always": True})
    storm = report["scenarios"]["storm"]
    judged.append({"name": "storm answers", "value": {"non_3xx": storm["non_3xx"],
                                                        "socket_errors": storm["socket_errors"]},
                   "limit_name": None, "limit": None, "ratio": storm["non_3xx"] + storm["socket_errors"],
                   "target": "0 non-3xx, 0 socket errors",
                   "met": storm["non_3xx"] == 0 and storm["socket_errors"] == 0, "always": True})
    return judged


def write_vcl(name, text):
    path = WORK / name
    path.write_text(text)
    return path


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
    st = report["storm"]
    print(f"\nshortlink bench ({'quick' if report['quick'] else 'full'}; {report['machine']}; "
          f"{report['connections']} connections, {report['duration_s']}s per run, median of {report['runs']}; "
          f"ceiling500 and storm: {st['connections']} connections, {st['duration_s']}s, {st['links']:,} links)\n")
    print(f"{'scenario':<20}{'req/s':>10}{'x ceiling':>11}{'p50 ms':>9}{'p99 ms':>9}{'socket err':>11}{'non-3xx':>9}")
    for name in ("ceiling", "hit", "hit-uncounted", "hit-paired", "hit-domain", "hit-query", "hit-rules",
                 "origin-miss", "miss", "miss-uncounted", "miss-cached-first", "miss-cluster", "miss-cluster-clicks",
                 "zipf", "zipf-before-restart", "zipf-restart",
                 "ceiling500",
                 "storm",
                 "origin-storm"):
        if name not in s:
            continue
        row = s[name]
        non_3xx = row.get("non_3xx", "")
        print(f"{name:<20}{row['rps']:>10,.0f}{row['ratio_to_ceiling']:>11.3f}"
              f"{row['p50_ms']:>9.3f}{row['p99_ms']:>9.3f}{row['socket_errors']:>11}{non_3xx:>9}")
    m = report["memory"]
    print(f"\nmemory      {m['bytes_per_link']:.1f} bytes/link in hashes ({m['hash_encoding']}), "
          f"{m['plain_keys_bytes_per_link']:.1f} as plain keys ({m['links']:,} links, URLs of "
          f"{m['mean_url_bytes']:.0f} bytes); with an expiry and an owner (and the owner's list): "
          f"{m['with_expiry_and_owner_bytes_per_link']:.1f}")
    print(f"clicks mem  {m['click_totals_bytes_per_link']:.1f} bytes/link for click totals; daily counts "
          f"{m['daily_counts_bytes_per_link_day']:.1f} bytes per link and day, so a year of them "
          f"{m['year_of_daily_counts_bytes_per_link']:,} bytes/link (365 x one measured day)")
    w = report["writer"]
    print(f"writer      {w['inserts_per_s']:,.0f} inserts/s through the JSON API, 16 clients, {w['errors']} errors; "
          f"the claim script straight at Redis: {w['store_ceiling_inserts_per_s']:,.0f}/s")
    e = report["edit"]
    print(f"edit        {e['edits_per_s']:,.0f} edits/s with their purges ({e['ratio_to_store_ceiling']:.3f} x the store "
          f"ceiling), p50 {e['p50_ms']} ms, p99 {e['p99_ms']} ms; {e['stale_after_answer']} of {e['edits']:,} "
          f"answers followed by the old target (longest window {e['max_window_ms']} ms); "
          f"readers {e['readers']['rps']:,.0f} req/s")
    x = report["export"]
    o = x["owner"]
    print(f"export      {x['links']:,} links ({x['bytes'] / 1e6:.1f} MB of CSV) in {x['seconds']} s; the writer's "
          f"RSS {x['rss_before_kib'] / 1024:.1f} MiB before, at most {x['rss_peak_kib'] / 1024:.1f} MiB during it; "
          f"one owner's {o['links']:,} links ({o['bytes'] / 1e6:.1f} MB) first: at most "
          f"{o['rss_peak_kib'] / 1024:.1f} MiB")
    c = report["clicks"]
    print(f"clicks      {c['stored']:,} stored for {c['requests']:,} link requests in hit, hit-domain, hit-query, hit-rules, "
          f"miss and zipf: "
          f"{c['lost']} lost ({c.get('dropped', 0)} of them dropped past the store's backlog and queues), "
          f"{c['double']} counted twice")
    if "clicks_cluster" in report:
        c = report["clicks_cluster"]
        print(f"            {c['stored']:,} stored in the cluster for {c['requests']:,} link requests in "
              f"miss-cluster-clicks: {c['lost']} lost, {c['double']} counted twice")
    print(f"\n{'target':<20}{'value':>12}  {'limit':<26}{'':>10}{'ratio':>8}  {'target':<10}")
    for t in report["targets"]:
        verdict = "met" if t["met"] else "MISSED"
        if t["limit_name"] is None:
            print(f"{t['name']:<20}{json.dumps(t['value']):>40}  {'':>16}  {t['target']:<28}{verdict}")
            continue
        print(f"{t['name']:<20}{t['value']:>12,.1f}  {t['limit_name']:<26}{t['limit']:>10,.1f}"
              f"{t['ratio']:>8.3f}  {t['target']:<10}{verdict}")
    print(f"\nwritten to {OUT / 'latest.json'}")


if __name__ == "__main__":
    sys.exit(main())
