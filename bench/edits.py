"""The `edit` scenario's driver: editors change links through the writer's
API while readers request the same links through Varnish.

Each editor process owns its own keys and loops: PATCH a key to a new
target, and as soon as the API answers, GET the key through Varnish. The
key was cached with its previous target (the editor's own GET of the last
round, and the readers keep it hot), so a GET that still finds the old
target is a window between the answer and Varnish serving the change. For
such a stale answer the editor asks again until the new target shows, and
records how long that took.
"""

import http.client
import json
import multiprocessing
import statistics
import time

# Editor processes, and the keys each owns (the readers request them all).
EDITORS = 8
KEYS_PER_EDITOR = 25


def _editor(job):
    worker, keys, writer_port, varnish_port, token, link_path, seconds = job
    writer = http.client.HTTPConnection("127.0.0.1", writer_port, timeout=10)
    varnish = http.client.HTTPConnection("127.0.0.1", varnish_port, timeout=10)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    figures = {"edits": 0, "failed": 0, "warned": 0, "stale": 0, "windows_ms": [], "latencies_ms": [],
               "examples": []}

    def served(key):
        varnish.request("GET", f"{link_path}{key}")
        response = varnish.getresponse()
        response.read()
        return response.getheader("Location")

    round_ = 0
    began = time.monotonic()
    deadline = began + seconds
    while time.monotonic() < deadline:
        key = keys[round_ % len(keys)]
        target = f"https://example.org/edited/{worker}/{round_}"
        round_ += 1
        started = time.perf_counter()
        writer.request("PATCH", f"/api/links/{key}", body=json.dumps({"url": target}), headers=headers)
        response = writer.getresponse()
        body = response.read()
        answered = time.perf_counter()
        if response.status != 200:
            figures["failed"] += 1
            if len(figures["examples"]) < 3:
                figures["examples"].append(f"PATCH {key}: {response.status} {body[:200]!r}")
            continue
        figures["edits"] += 1
        figures["latencies_ms"].append((answered - started) * 1000)
        if b'"warning"' in body:
            # Stored but not purged: the API said so; not a silent window.
            figures["warned"] += 1
            continue
        seen = served(key)
        if seen == target:
            continue
        figures["stale"] += 1
        if len(figures["examples"]) < 3:
            figures["examples"].append(f"{key}: Varnish served {seen} after the API answered {target}")
        while seen != target and time.perf_counter() - answered < 5:
            seen = served(key)
        figures["windows_ms"].append((time.perf_counter() - answered) * 1000)
    figures["seconds"] = time.monotonic() - began
    return figures


def edit_keys(keys):
    """The keys the editors own, EDITORS lists of KEYS_PER_EDITOR."""
    return [keys[i * KEYS_PER_EDITOR:(i + 1) * KEYS_PER_EDITOR] for i in range(EDITORS)]


def run_editors(keys, writer_port, varnish_port, token, link_path, seconds):
    """Edits for `seconds` from EDITORS processes; the summed figures.
    The editors are spawned, not forked: the caller runs its readers in a
    thread meanwhile, and a fork can copy a lock that thread holds into an
    editor, which then waits on it for good (a full run hung so)."""
    jobs = [(worker, owned, writer_port, varnish_port, token, link_path, seconds)
            for worker, owned in enumerate(edit_keys(keys))]
    with multiprocessing.get_context("spawn").Pool(EDITORS) as pool:
        try:
            results = pool.map_async(_editor, jobs).get(timeout=seconds + 60)
        except multiprocessing.TimeoutError:
            raise SystemExit(f"bench: edit: editors still running {seconds + 60} s after they started") from None
    latencies = sorted(l for r in results for l in r["latencies_ms"])
    windows = [w for r in results for w in r["windows_ms"]]
    edits = sum(r["edits"] for r in results)
    return {
        # Each editor's rate over its own loop, its start-up left out.
        "edits_per_s": round(sum(r["edits"] / r["seconds"] for r in results), 1),
        "edits": edits,
        "failed": sum(r["failed"] for r in results),
        "purge_warnings": sum(r["warned"] for r in results),
        "stale_after_answer": sum(r["stale"] for r in results),
        "max_window_ms": round(max(windows), 3) if windows else 0,
        "p50_ms": round(statistics.median(latencies), 3) if latencies else None,
        "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 3) if latencies else None,
        "examples": [e for r in results for e in r["examples"]][:5],
    }
