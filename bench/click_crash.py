#!/usr/bin/env python3
"""How many clicks a SIGKILL of the Varnish child loses, under load.

docs/clicks.md ("Loss bounds") says a crash of the Varnish child loses the clicks
of at most one flush interval: those counted in memory and not yet sent.
This measures it, with bench.py's helpers, in its own directory
(target/bench/work/crash), on free loopback ports:

1. Starts Redis (the shipped configuration) and a varnishd on the generated
   VCL (the shipped parameters, Redis over its unix socket), loads 1,000
   links in the storage format and asks for each through Varnish (1 s);
   once those clicks are flushed, the stored clicks are the base.
2. Drives wrk over the links (uniform, 64 connections, 2 threads, 8 s) and,
   4 s in, kills the child (the varnishd manager's only child process) with
   SIGKILL. The manager starts a new child by itself (auto_restart); wrk's
   connections reconnect to it.
3. Once no more clicks arrive for a flush interval and a margin, `stored`
   is the stored clicks less the base. The reference is `received`: the
   redirects wrk received (its completed requests less its non-3xx answers,
   which are not counted as clicks).
   `lost = received - stored`; it may be slightly negative, by answers the
   killed child counted and sent but whose bytes never reached wrk (at most
   one per connection). Divided by wrk's request rate, it is the counting
   time lost, to compare with the flush interval. That rate is over the
   whole run, the restart and the new child's empty cache included, so it
   can be below the rate at the kill, and the time lost then overstated.
   (The child's MAIN.client_req cannot give the rate at the kill: workers
   add to it in batches, mostly once idle.)

Prints one line "CRASH_JSON {...}" and a sentence. Everything it starts is
stopped when it ends, whatever happens; its directory is removed after a
run that succeeded (kept for its logs otherwise). About 30 s; stopped
after 110 s whatever it waits for.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

NAME = "crash"
DIR = bench.WORK / NAME
LINKS = 1_000
CONNECTIONS = 64
THREADS = 2
DURATION = 8
KILL_AFTER = 4
# The VMOD's default flush_interval, which the generated configuration keeps.
FLUSH_INTERVAL_S = 1.0
# A run takes about 30 s; past this, whatever it waits for, it stops.
DEADLINE_S = 110


def child_pids(manager):
    """The varnishd manager's child processes (with -j none: the child)."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(manager.pid)], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]


def the_child(manager, timeout=10):
    """The one child of the manager, waiting for it to be there."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        pids = child_pids(manager)
        if len(pids) == 1:
            return pids[0]
        time.sleep(0.05)
    raise SystemExit(f"click_crash: varnishd has children {child_pids(manager)}, not one")


def settled_clicks(redis_port, timeout=15):
    """The stored clicks once a flush interval and a margin pass without
    any more arriving (a flusher behind under load catches up first)."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        time.sleep(bench.FLUSH_WAIT)
        stored = bench.stored_clicks(redis_port)
        if stored == last:
            return stored
        last = stored
    raise SystemExit(f"click_crash: stored clicks still changing after {timeout} s")


def start_wrk(processes, base, keys):
    """wrk on links.lua as bench.wrk runs it, answers counted by status, in
    the background; bench.wrk's figures leave out `requests`, so its
    BENCH_JSON line is read from its log (see figures_of)."""
    command = ["wrk", "-t", str(THREADS), "-c", str(CONNECTIONS), "-d", f"{DURATION}s", "--timeout", "5s",
               "-s", str(bench.WRK_DIR / "links.lua"), base, "--", "random", str(keys), str(THREADS), "statuses"]
    return processes.start(command, f"{NAME}/wrk.log", env=dict(os.environ, LUA_PATH=f"{bench.WRK_DIR}/?.lua;;"))


def figures_of(wrk):
    """The BENCH_JSON figures of a wrk started by start_wrk, once it ends."""
    wrk.wait(timeout=DURATION + 10)
    output = (DIR / "wrk.log").read_text()
    for line in output.splitlines():
        if line.startswith("BENCH_JSON "):
            return json.loads(line[len("BENCH_JSON "):])
    raise SystemExit(f"click_crash: wrk gave no figures:\n{output}")


def run(processes):
    redis_port, varnish_port, writer_port = (bench.free_port() for _ in range(3))
    bench.start_redis(processes, f"{NAME}/redis", redis_port)
    # As bench.run: the writer's configuration (the writer is not started;
    # its port only fills the field), and the VCL generated from it.
    config = DIR / "shortlink.toml"
    config.write_text(
        f'listen = "127.0.0.1:{writer_port}"\n'
        f'public_base_url = "http://127.0.0.1:{varnish_port}/l/"\n'
        f'[redis]\nurl = "unix://{DIR / "redis" / "redis.sock"}?db=0"\n'
        f'[varnish]\npurge_url = "http://127.0.0.1:{varnish_port}"\n'
        f'vmod = "{bench.RELEASE / "libvmod_shortlink.so"}"\n')
    vcl = DIR / "shortlink.vcl"
    vcl.write_text(subprocess.run([str(bench.RELEASE / "shortlink"), "vcl", "--config", str(config)],
                                  capture_output=True, text=True, check=True).stdout)
    workdir = bench.start_varnishd(processes, f"{NAME}/varnish", varnish_port, vcl)
    manager = processes.started[-1]
    base = f"http://127.0.0.1:{varnish_port}"

    links = bench.make_links(LINKS, "crash")
    bench.load(redis_port, [bench.resp("HSET", bench.PREFIX + key[:bench.SPLIT], key[bench.SPLIT:], url)
                            for key, url in links])
    keys = bench.write_keys(f"{NAME}/links", [key for key, _ in links])
    bench.say(f"warming {LINKS} links through Varnish")
    bench.wrk(base, "links.lua", ["fresh", str(keys), str(THREADS), "-"], connections=CONNECTIONS, duration=1)
    before = settled_clicks(redis_port)

    child_before = the_child(manager)
    bench.say(f"load: {CONNECTIONS} connections for {DURATION} s; SIGKILL to the child {child_before} "
              f"{KILL_AFTER} s in")
    wrk = start_wrk(processes, base, keys)
    time.sleep(KILL_AFTER)
    os.kill(child_before, signal.SIGKILL)
    figures = figures_of(wrk)
    child_after = the_child(manager)
    if child_after == child_before:
        raise SystemExit(f"click_crash: the child {child_before} is still there after SIGKILL")
    state = bench.varnishadm(workdir, "status").strip()

    stored = settled_clicks(redis_port) - before
    received = figures["requests"] - figures["non_3xx"]
    rps = figures["requests"] / (figures["duration_us"] / 1e6)
    lost = received - stored
    report = {
        "links": LINKS, "connections": CONNECTIONS, "duration_s": DURATION, "killed_at_s": KILL_AFTER,
        "child_pid_before": child_before, "child_pid_after": child_after, "varnish_status": state,
        "requests": figures["requests"], "non_3xx": figures["non_3xx"],
        "socket_errors": figures["socket_errors"], "received": received, "stored": stored, "lost": lost,
        "rps": round(rps, 1), "lost_seconds": round(lost / rps, 3), "flush_interval_s": FLUSH_INTERVAL_S,
    }
    print("CRASH_JSON " + json.dumps(report))
    print(f"Killing the Varnish child (pid {child_before}, restarted as {child_after}) with SIGKILL under "
          f"{rps:,.0f} req/s lost {lost:,} of {received:,} clicks received ({stored:,} stored): "
          f"{lost / rps:.3f} s of counting at that rate, for a flush interval of {FLUSH_INTERVAL_S:g} s.")


def main():
    for needed in [bench.RELEASE / "shortlink", bench.RELEASE / "libvmod_shortlink.so"]:
        if not needed.exists():
            raise SystemExit(f"click_crash: {needed} is missing: run `make build` first")
    shutil.rmtree(DIR, ignore_errors=True)
    DIR.mkdir(parents=True)
    signal.signal(signal.SIGALRM, lambda *_: sys.exit(f"click_crash: not done after {DEADLINE_S} s"))
    signal.alarm(DEADLINE_S)
    processes = bench.Processes()
    try:
        run(processes)
    finally:
        processes.stop_all()
    shutil.rmtree(DIR, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
