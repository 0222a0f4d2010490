#!/usr/bin/env bash
# End-to-end check of `make run` against a Redis it does not run: a master
# and a replica watched by a Sentinel, named by REDIS_URL. `make run` must
# start no Redis, serve and store links through the master the Sentinel
# names, and follow it when the Sentinel switches to the replica.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
master_port=$(free_port)
replica_port=$(free_port)
sentinel_port=$(free_port)
varnish_port=$(free_port)
writer_port=$(free_port)
log=$tmp/run.log

fail() { echo "smoke-run-sentinel: FAILED: $*" >&2; tail -30 "$log" >&2 || true; exit 1; }

server_pids=()
start_server() { # name, redis-server arguments...
    local name=$1
    shift
    mkdir -p "$tmp/$name"
    redis-server --bind 127.0.0.1 --dir "$tmp/$name" --save '' --appendonly no \
        --daemonize no --logfile "$tmp/$name/log" "$@" &
    server_pids+=($!)
}
start_server master --port "$master_port"
start_server replica --port "$replica_port" --replicaof 127.0.0.1 "$master_port"
printf 'port %s\nbind 127.0.0.1\nsentinel monitor links 127.0.0.1 %s 1\n' \
    "$sentinel_port" "$master_port" >"$tmp/sentinel.conf"
mkdir -p "$tmp/sentinel"
redis-server "$tmp/sentinel.conf" --sentinel --dir "$tmp/sentinel" --daemonize no \
    --logfile "$tmp/sentinel/log" &
server_pids+=($!)

VAR_DIR=$tmp/var REDIS_URL="redis+sentinel://127.0.0.1:$sentinel_port/links" \
    VARNISH_PORT=$varnish_port WRITER_PORT=$writer_port make -s -C "$root" run >"$log" 2>&1 &
make_pid=$!
cleanup() {
    kill -TERM "$make_pid" 2>/dev/null || true
    pkill -f "$tmp/var" 2>/dev/null || true
    kill -9 "${server_pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

for _ in $(seq 300); do
    curl -fs "http://127.0.0.1:$writer_port/" >/dev/null 2>&1 && break
    kill -0 "$make_pid" 2>/dev/null || fail "make run exited early"
    sleep 0.2
done
[ ! -e "$tmp/var/run/redis.pid" ] && [ ! -e "$tmp/var/run/clicks.pid" ] ||
    fail "make run started a Redis although REDIS_URL names one"

# Inserts `url` through the writer and checks that Varnish redirects to it
# and that the server on `port` (the master) holds it; says why not.
insert_and_follow() { # url, port of the master
    local created short key headers
    created=$(curl -s -H 'Content-Type: application/json' -d "{\"url\": \"$1\"}" \
        "http://127.0.0.1:$writer_port/api/links")
    short=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["short_url"])' <<<"$created") ||
        return 1
    key=${short##*/}
    headers=$(curl -s -o /dev/null -D - "$short")
    grep -qi "^Location: $1" <<<"$headers" || { echo "$short answered: $headers" >&2; return 1; }
    [ "$(redis-cli -p "$2" HEXISTS "short:${key:0:2}" "${key:2}")" = 1 ] ||
        { echo "$short is not on the master (port $2)" >&2; return 1; }
}
insert_and_follow https://example.org/sentinel-before "$master_port" ||
    fail "the writer did not store a link through the Sentinel's master"

# Sentinel switches to the replica; the writer and the VMOD follow. It
# refuses (NOGOODSLAVE) until it has heard from the replica itself.
answer=
for _ in $(seq 100); do
    answer=$(redis-cli -p "$sentinel_port" SENTINEL FAILOVER links)
    [ "$answer" = OK ] && break
    sleep 0.2
done
[ "$answer" = OK ] || fail "SENTINEL FAILOVER refused for 20 s: $answer"
followed=
for _ in $(seq 100); do
    sleep 0.1
    if insert_and_follow "https://example.org/sentinel-after-$RANDOM" "$replica_port" 2>/dev/null; then
        followed=yes
        break
    fi
done
[ -n "$followed" ] || fail "no link was stored on the new master within 10 s of the switch"

kill -TERM "$make_pid"
for _ in $(seq 100); do kill -0 "$make_pid" 2>/dev/null || break; sleep 0.1; done
if pgrep -f "$tmp/var" >/dev/null; then
    pgrep -af "$tmp/var" >&2
    fail "processes left behind after SIGTERM"
fi
echo "smoke-run-sentinel: make run started no Redis for REDIS_URL, stored and served links" \
    "through the master a Sentinel named, and followed the Sentinel's switch to the replica"
