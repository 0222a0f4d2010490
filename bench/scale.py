#!/usr/bin/env python3
"""One Redis at many links (opt-in, not in `make test` or `make bench`):
where a single Redis stops being enough, and so when to move to a cluster.

    python3 bench/scale.py                   # 100,000,000 links, split 3
    SCALE_LINKS=10000000 python3 bench/scale.py

Streams SCALE_LINKS links (keys chosen as the writer chooses them: the
shortest free prefix of the URL's digest, at least 4 characters) into one
Redis on the shipped configuration with split SCALE_SPLIT (3), and reports
Redis's bytes per link and the load time. Then it runs `miss` (every
request a fresh key, looked up in Redis) against it, and against a second
Redis holding 1,000,000 links with split 2 (the default bench's store),
through one varnishd, alternating runs; the ratio of each pair is the
figure. Targets: at most 40 bytes per link, and `miss` within 10 % of the
1M store's.

The big Redis runs without its append-only file: what is measured is
memory and lookups, and a 4 GB AOF written with fsync on every write would
only measure the disk. Figures go to target/bench/scale.json.
"""

import json
import os
import statistics
import subprocess
import sys
import time

import bench
from bench import (OUT, RELEASE, WORK, Processes, digest_key, free_port, load, make_links,
                   redis_cli, redis_memory, resp, say, start_redis, start_varnishd, varnishadm, wrk,
                   write_keys)

LINKS = int(os.environ.get("SCALE_LINKS", "100000000"))
SPLIT = int(os.environ.get("SCALE_SPLIT", "3"))
SMALL_LINKS = 1_000_000
SMALL_SPLIT = 2
# Keys requested by the miss runs: a sample spread over the whole store.
SAMPLE = 1_000_000
RUNS = int(os.environ.get("SCALE_RUNS", "3"))
DURATION = int(os.environ.get("SCALE_DURATION", "10"))
BYTES_LIMIT = 40
MISS_RATIO_LIMIT = 0.9
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
VALUE = {c: n for n, c in enumerate(ALPHABET)}


def prefix_number(key, length):
    number = 0
    for char in key[:length]:
        number = number * 64 + VALUE[char]
    return number


def stream_links(count, redis_port, every):
    """Pipes `count` links into Redis, as the writer would key them; answers
    every `every`-th key. Free prefixes of 4 and 5 characters are tracked in
    bitmaps (2 MB and 128 MB), longer ones in a set: a set of every key
    would not fit in memory at 100 million."""
    taken4, taken5 = bytearray(64 ** 4 // 8), bytearray(64 ** 5 // 8)
    longer = set()
    sample = []
    pipe = subprocess.Popen(["redis-cli", "-p", str(redis_port), "--pipe"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    chunk = []
    for i in range(count):
        url = f"https://example.org/s/{i}"
        digest = digest_key(url)
        n4 = prefix_number(digest, 4)
        if not taken4[n4 >> 3] & (1 << (n4 & 7)):
            taken4[n4 >> 3] |= 1 << (n4 & 7)
            key = digest[:4]
        else:
            n5 = n4 * 64 + VALUE[digest[4]]
            if not taken5[n5 >> 3] & (1 << (n5 & 7)):
                taken5[n5 >> 3] |= 1 << (n5 & 7)
                key = digest[:5]
            else:
                length = 6
                while digest[:length] in longer:
                    length += 1
                key = digest[:length]
                longer.add(key)
        chunk.append(resp("HSET", "short:" + key[:SPLIT], key[SPLIT:], url))
        if i % every == 0:
            sample.append(key)
        if len(chunk) == 100_000:
            pipe.stdin.write(b"".join(chunk))
            chunk = []
            if (i + 1) % 10_000_000 == 0:
                say(f"  {i + 1:,} links sent")
    pipe.stdin.write(b"".join(chunk))
    pipe.stdin.close()
    output = pipe.stdout.read()
    if pipe.wait() != 0 or b"errors: 0" not in output:
        raise SystemExit(f"scale: loading Redis failed: {output[-300:]!r}")
    return sample


def vcl_for(name, redis_port, split, varnish_port):
    """The VCL the writer generates for links in the Redis on `redis_port`."""
    toml, vcl = WORK / f"{name}.toml", WORK / f"{name}.vcl"
    toml.write_text(f'public_base_url = "http://127.0.0.1:{varnish_port}/l/"\n'
                    f'[redis]\nurl = "unix://{WORK / name / "redis.sock"}?db=0"\nsplit = {split}\n'
                    f'[clicks]\nenabled = false\n'
                    f'[varnish]\npurge_url = ""\nvmod = "{RELEASE / "libvmod_shortlink.so"}"\n')
    vcl.write_text(subprocess.run([str(RELEASE / "shortlink"), "vcl", "--config", str(toml)],
                                  capture_output=True, text=True, check=True).stdout)
    return vcl


def run(processes):
    big_port, small_port, varnish_port = free_port(), free_port(), free_port()
    start_redis(processes, "big", big_port, extra=("--appendonly", "no"))
    start_redis(processes, "small", small_port, extra=("--appendonly", "no"))
    empty = redis_memory(big_port)
    say(f"loading {LINKS:,} links with split {SPLIT} into one Redis")
    began = time.monotonic()
    big_sample = stream_links(LINKS, big_port, max(1, LINKS // SAMPLE))
    load_s = time.monotonic() - began
    stored = int(redis_cli(big_port, "DBSIZE").strip())
    bytes_per_link = (redis_memory(big_port) - empty) / LINKS
    encodings = redis_cli(big_port, "OBJECT", "ENCODING", "short:" + big_sample[0][:SPLIT]).strip()
    say(f"{LINKS:,} links in {stored:,} hashes ({encodings}), loaded in {load_s:.0f} s: "
        f"{bytes_per_link:.1f} bytes/link")

    say(f"loading {SMALL_LINKS:,} links with split {SMALL_SPLIT} into another")
    small = make_links(SMALL_LINKS, "p")
    load(small_port, [resp("HSET", "short:" + key[:SMALL_SPLIT], key[SMALL_SPLIT:], url)
                      for key, url in small])
    small_keys = write_keys("small", [key for key, _ in small])
    big_keys = write_keys("big", big_sample)

    workdir = start_varnishd(processes, "varnish", varnish_port,
                             vcl_for("big", big_port, SPLIT, varnish_port))
    varnishadm(workdir, "vcl.load", "small", str(vcl_for("small", small_port, SMALL_SPLIT, varnish_port)))
    base = f"http://127.0.0.1:{varnish_port}"

    def miss(vcl, keys):
        varnishadm(workdir, "vcl.use", vcl)
        # An empty cache: every request a fresh key, looked up in Redis.
        varnishadm(workdir, "stop")
        varnishadm(workdir, "start")
        bench.wait_for_port(varnish_port, "Varnish")
        return wrk(base, "links.lua", ["fresh", str(keys), str(bench.THREADS), "statuses"],
                   duration=DURATION)

    pairs = []
    for n in range(RUNS):
        # Which goes first alternates, so a drift of the machine favours neither.
        order = [("boot", big_keys), ("small", small_keys)]
        runs = dict(zip(["big", "small"], [None, None]))
        for vcl, keys in (order if n % 2 == 0 else order[::-1]):
            runs["big" if vcl == "boot" else "small"] = miss(vcl, keys)
        say(f"miss at {LINKS:,}: {runs['big']['rps']:.0f} req/s (p99 {runs['big']['p99_ms']} ms, non-3xx "
            f"{runs['big']['non_3xx']}); at {SMALL_LINKS:,}: {runs['small']['rps']:.0f} req/s "
            f"(p99 {runs['small']['p99_ms']} ms)")
        pairs.append(runs)
    ratio = statistics.median(p["big"]["rps"] / p["small"]["rps"] for p in pairs)
    report = {
        "links": LINKS, "split": SPLIT, "hashes": stored, "encoding": encodings,
        "load_s": round(load_s, 1), "bytes_per_link": round(bytes_per_link, 1),
        "miss_rps": statistics.median(p["big"]["rps"] for p in pairs),
        "miss_rps_1m": statistics.median(p["small"]["rps"] for p in pairs),
        "miss_ratio_to_1m_per_pair_median": round(ratio, 3),
        "non_3xx": sum(p["big"]["non_3xx"] or 0 for p in pairs),
        "runs": pairs,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "scale.json").write_text(json.dumps(report, indent=2) + "\n")
    met_bytes, met_miss = bytes_per_link <= BYTES_LIMIT, ratio >= MISS_RATIO_LIMIT
    print(f"\nscale: {LINKS:,} links, split {SPLIT}: {bytes_per_link:.1f} bytes/link (target <= {BYTES_LIMIT}: "
          f"{'met' if met_bytes else 'MISSED'}), loaded in {load_s:.0f} s; miss {report['miss_rps']:.0f} req/s, "
          f"{ratio:.3f} x the 1M store's {report['miss_rps_1m']:.0f} (target >= {MISS_RATIO_LIMIT}: "
          f"{'met' if met_miss else 'MISSED'}); non-3xx answers {report['non_3xx']}")
    return 0 if met_bytes and met_miss and report["non_3xx"] == 0 else 1


def main():
    for needed in [RELEASE / "shortlink", RELEASE / "libvmod_shortlink.so"]:
        if not needed.exists():
            raise SystemExit(f"scale: {needed} is missing: run `make build` first")
    bench.shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    processes = Processes()
    try:
        return run(processes)
    finally:
        processes.stop_all()


if __name__ == "__main__":
    sys.exit(main())
