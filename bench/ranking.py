#!/usr/bin/env python3
"""What ranking an hour of busy minutes costs Redis, and the writer.

`GET /api/trending` and `shortlink warm` rank links by their clicks over
the last minutes, summed over one hash per minute (docs/clicks.md,
"Warming a new cache"). Each hash holds every link clicked in its minute, so a busy hour is
millions of entries. This fills a Redis of its own (no persistence) with
60 minute hashes in the storage layout, each of MEMBERS Zipf-ranked links
drawn from a million, then measures the writer's ranking, through
`GET /api/trending?minutes=60` on a writer started for it: its wall time,
the Redis CPU it took (INFO cpu) and the slowest single command Redis ran
meanwhile (SLOWLOG), which every lookup would wait behind. (A `ZUNION` of
the 60 minutes, when they were sorted sets, held Redis 2 s in one
command.)

Prints one line "RANKING_JSON {...}" and a sentence. Its directory
(target/bench/work/ranking) is removed after a run that succeeded. About a
minute; stopped after 300 s whatever it waits for.
"""

import json
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402

NAME = "ranking"
DIR = bench.WORK / NAME
SETS = 60
MEMBERS = 100_000
TOKEN = "ranking-" + "0" * 32
DEADLINE_S = 300


def fill(redis_port):
    """SETS minute hashes ending at this minute: rank r has 1000 / r clicks
    (at least 1), its link a stable pick from a million with some jitter,
    so that the hottest links are hot in every minute and the tail varies."""
    rng = random.Random(7)
    now = time.time()
    names = []
    for n in range(SETS):
        name = f"{bench.PREFIX}minute:{time.strftime('%Y%m%d%H%M', time.gmtime(now - n * 60))}"
        names.append(name)
        commands, args = [], []
        for rank in range(1, MEMBERS + 1):
            link = (rank + rng.randint(0, rank // 5)) * 7919 % 1_000_003
            args += [f"K{link:07d}", str(max(1, 1000 // rank))]
            if len(args) >= 2000:
                commands.append(bench.resp("HSET", name, *args))
                args = []
        if args:
            commands.append(bench.resp("HSET", name, *args))
        commands.append(bench.resp("EXPIRE", name, "7200"))
        bench.load(redis_port, commands)
    return names


def slowest_us(redis_port):
    """The slowest command in SLOWLOG (µs) and how many it holds; then
    SLOWLOG starts afresh."""
    log = subprocess.run(["redis-cli", "--no-raw", "-p", str(redis_port), "SLOWLOG", "GET", "100000"],
                         capture_output=True, text=True, check=True).stdout
    durations = [int(d) for d in re.findall(r"3\) \(integer\) (\d+)", log)]
    bench.redis_cli(redis_port, "SLOWLOG", "RESET")
    return max(durations, default=0), len(durations)


def redis_cpu_s(redis_port):
    info = bench.redis_cli(redis_port, "INFO", "cpu")
    return sum(float(line.split(":")[1]) for line in info.splitlines()
               if line.startswith(("used_cpu_user:", "used_cpu_sys:")))


def run(processes):
    redis_port, writer_port = bench.free_port(), bench.free_port()
    bench.start_redis(processes, f"{NAME}/redis", redis_port, persistent=False)
    bench.say(f"filling {SETS} minute hashes of {MEMBERS:,} links each")
    names = fill(redis_port)
    entries = sum(int(bench.redis_cli(redis_port, "HLEN", name)) for name in names)
    # Every command of a millisecond or more is logged.
    bench.redis_cli(redis_port, "CONFIG", "SET", "slowlog-log-slower-than", "1000")
    bench.redis_cli(redis_port, "CONFIG", "SET", "slowlog-max-len", "100000")
    bench.redis_cli(redis_port, "SLOWLOG", "RESET")

    config = DIR / "shortlink.toml"
    config.write_text(f'listen = "127.0.0.1:{writer_port}"\n'
                      f'[redis]\nurl = "redis://127.0.0.1:{redis_port}/0"\n'
                      f'[access]\ntokens = [{{ name = "ops", token = "{TOKEN}", admin = true }}]\n')
    processes.start([str(bench.RELEASE / "shortlink"), "serve", "--config", str(config)], f"{NAME}/writer.log")
    bench.wait_for_port(writer_port, "writer")
    cpu_before = redis_cpu_s(redis_port)
    started = time.monotonic()
    request = urllib.request.Request(f"http://127.0.0.1:{writer_port}/api/trending?minutes={SETS}&limit=100",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=DEADLINE_S) as answer:
        ranked = json.load(answer)["links"]
    ranking_s = time.monotonic() - started
    ranking_cpu_s = redis_cpu_s(redis_port) - cpu_before
    ranking_us, slow_commands = slowest_us(redis_port)

    report = {
        "minutes": SETS, "entries": entries,
        "ranking_s": round(ranking_s, 3), "ranking_redis_cpu_s": round(ranking_cpu_s, 3),
        "ranking_slowest_command_ms": round(ranking_us / 1000, 1), "ranking_commands_over_1ms": slow_commands,
        "top": ranked[:3],
    }
    print("RANKING_JSON " + json.dumps(report))
    print(f"{SETS} minute hashes, {entries:,} entries: the writer ranked them in {ranking_s:.2f} s "
          f"({ranking_cpu_s:.2f} s of Redis CPU), no command longer than {ranking_us / 1000:.1f} ms.")


def main():
    if not (bench.RELEASE / "shortlink").exists():
        raise SystemExit(f"ranking: {bench.RELEASE / 'shortlink'} is missing: run `make build` first")
    shutil.rmtree(DIR, ignore_errors=True)
    DIR.mkdir(parents=True)
    signal.signal(signal.SIGALRM, lambda *_: sys.exit(f"ranking: not done after {DEADLINE_S} s"))
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
