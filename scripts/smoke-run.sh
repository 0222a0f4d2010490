#!/usr/bin/env bash
# End-to-end check of `make run`: it starts, serves a link added by hand with
# redis-cli and one added through the writer, counts clicks in the Redis for
# clicks, brings Redis back by itself after a kill -9 with every acknowledged
# link, warms the new cache after a kill -9 of Varnish's child, and leaves no
# process behind when sent SIGTERM.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
redis_port=$(free_port)
clicks_port=$(free_port)
varnish_port=$(free_port)
writer_port=$(free_port)
log=$tmp/run.log

fail() { echo "smoke-run: FAILED: $*" >&2; tail -30 "$log" >&2 || true; exit 1; }

VAR_DIR=$tmp/var REDIS_PORT=$redis_port CLICKS_REDIS_PORT=$clicks_port VARNISH_PORT=$varnish_port WRITER_PORT=$writer_port \
    make -s -C "$root" run >"$log" 2>&1 &
make_pid=$!
cleanup() {
    kill -TERM "$make_pid" 2>/dev/null || true
    pkill -f "$tmp/var" 2>/dev/null || true
    # redis-server renames its process title, so pkill -f cannot see it.
    for pid_file in "$tmp/var/run/redis.pid" "$tmp/var/run/clicks.pid"; do
        [ -f "$pid_file" ] && kill -9 "$(cat "$pid_file")" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

for _ in $(seq 300); do
    curl -fs "http://127.0.0.1:$writer_port/" >/dev/null 2>&1 && break
    kill -0 "$make_pid" 2>/dev/null || fail "make run exited early"
    sleep 0.2
done

redis-cli -p "$redis_port" HSET short:Sm 0ke https://example.org/smoke >/dev/null
# As a browser: only people's clicks make a link hot (see the warming below).
browser='Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0'
headers=$(curl -s -A "$browser" -o /dev/null -D - "http://127.0.0.1:$varnish_port/l/Sm0ke")
grep -q '^HTTP/1.1 301' <<<"$headers" || fail "expected a 301, got: $headers"
grep -qi '^Location: https://example.org/smoke' <<<"$headers" || fail "wrong Location: $headers"

created=$(curl -s -H 'Content-Type: application/json' -d '{"url": "https://example.org/via-writer"}' \
    "http://127.0.0.1:$writer_port/api/links")
short=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["short_url"])' <<<"$created") ||
    fail "the writer answered: $created"
headers=$(curl -s -o /dev/null -D - "$short")
grep -qi '^Location: https://example.org/via-writer' <<<"$headers" || fail "$short answered: $headers"

# The counters command make run prints works as printed, from anywhere
# (Varnish's tools would read a relative -n against their own directory).
counters=$(sed -n 's/^ *Counters: *//p' "$log")
[ -n "$counters" ] || fail "make run printed no counters command"
found=$(cd / && bash -c "$counters") || fail "the printed command failed: $counters"
grep -q '^shortlink.shortlink_links.found  *[1-9]' <<<"$found" || fail "$counters printed: $found"

# The clicks are in the Redis for clicks (within a flush interval), not
# next to the links.
for _ in $(seq 50); do
    clicks=$(redis-cli -p "$clicks_port" HGET short:clicks:Sm 0ke)
    [ -n "$clicks" ] && break
    sleep 0.1
done
[ "${clicks:-0}" -ge 1 ] || fail "no click on Sm0ke reached the Redis for clicks"
[ "$(redis-cli -p "$redis_port" EXISTS short:clicks:Sm)" = 0 ] || fail "clicks were stored next to the links"

# kill -9 Redis right after an acknowledged insert: make run starts it again
# from its append-only file, and the link is still there.
created=$(curl -s -H 'Content-Type: application/json' -d '{"url": "https://example.org/before-crash"}' \
    "http://127.0.0.1:$writer_port/api/links")
key=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])' <<<"$created") ||
    fail "the writer answered: $created"
redis_pid=$(cat "$tmp/var/run/redis.pid")
kill -9 "$redis_pid"
for _ in $(seq 100); do
    new_pid=$(cat "$tmp/var/run/redis.pid" 2>/dev/null || true)
    if [ -n "$new_pid" ] && [ "$new_pid" != "$redis_pid" ] &&
        [ "$(redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ]; then
        break
    fi
    sleep 0.1
done
[ "$(redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ] || fail "Redis did not come back after kill -9"
stored=$(redis-cli -p "$redis_port" HGET "short:${key:0:2}" "${key:2}")
[ "$stored" = https://example.org/before-crash ] || fail "the acknowledged link was lost: got '$stored'"
headers=$(curl -s -o /dev/null -D - "http://127.0.0.1:$varnish_port/l/$key")
grep -qi '^Location: https://example.org/before-crash' <<<"$headers" || fail "after the restart: $headers"

# kill -9 Varnish's child: the manager starts a new one with an empty cache,
# and make run warms it with the links clicked so far, before anyone asks.
# (Clicks reach Redis within a second.)
sleep 2
manager=$(pgrep -o -f "varnishd -F .*$tmp/var/varnish")
child=$(ps -o pid= --ppid "$manager" | tr -d ' ')
[ -n "$child" ] || fail "no Varnish child process to kill"
# Only a warm of the new child counts: earlier ones depend on whether the
# first clicks had reached Redis before it was killed above.
warmed_before=$(grep -c '^warmed [1-9]' "$log" || true)
kill -9 "$child"
warmed=
for _ in $(seq 100); do
    sleep 0.2
    new_child=$(ps -o pid= --ppid "$manager" | tr -d ' ')
    [ -n "$new_child" ] && [ "$new_child" != "$child" ] || continue
    if [ "$(grep -c '^warmed [1-9]' "$log")" -gt "$warmed_before" ]; then
        warmed=yes
        break
    fi
done
[ -n "$warmed" ] || fail "the new Varnish child's cache was not warmed"
headers=$(curl -s -o /dev/null -D - "http://127.0.0.1:$varnish_port/l/Sm0ke")
grep -qi '^X-Cache: HIT' <<<"$headers" || fail "a clicked link was not in the warmed cache: $headers"

kill -TERM "$make_pid"
for _ in $(seq 100); do kill -0 "$make_pid" 2>/dev/null || break; sleep 0.1; done
sleep 0.5
for name in redis clicks; do
    last_redis=$(cat "$tmp/var/run/$name.pid" 2>/dev/null || true)
    if [ -n "$last_redis" ] && kill -0 "$last_redis" 2>/dev/null; then
        fail "Redis ($name.pid, pid $last_redis) left running after SIGTERM"
    fi
done
for port in "$redis_port" "$clicks_port"; do
    redis-cli -p "$port" ping >/dev/null 2>&1 && fail "Redis on port $port still answers after SIGTERM"
done
if pgrep -f "$tmp/var" >/dev/null; then
    pgrep -af "$tmp/var" >&2
    fail "processes left behind after SIGTERM"
fi
echo "smoke-run: make run served links added by hand and through the writer, counted clicks in" \
    "the Redis for clicks, brought Redis back" \
    "after kill -9 with the acknowledged link, warmed the cache of a new Varnish child, and" \
    "stopped cleanly"
