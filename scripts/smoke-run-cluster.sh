#!/usr/bin/env bash
# End-to-end check of `make run` against a Redis Cluster it does not run,
# named by REDIS_URL, for links and clicks alike. `make run` must start no
# Redis, store and serve links across the cluster's primaries, and count
# their clicks there, in the cluster's layout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
node_ports=("$(free_port)" "$(free_port)" "$(free_port)")
varnish_port=$(free_port)
writer_port=$(free_port)
log=$tmp/run.log

fail() { echo "smoke-run-cluster: FAILED: $*" >&2; tail -30 "$log" >&2 || true; exit 1; }

server_pids=()
start_server() { # name, redis-server arguments...
    local name=$1
    shift
    mkdir -p "$tmp/$name"
    redis-server --bind 127.0.0.1 --dir "$tmp/$name" --save '' --appendonly no \
        --daemonize no --logfile "$tmp/$name/log" "$@" &
    server_pids+=($!)
}
nodes=()
for port in "${node_ports[@]}"; do
    start_server "node-$port" --port "$port" --cluster-enabled yes \
        --cluster-port "$(free_port)" --cluster-config-file nodes.conf
    nodes+=("127.0.0.1:$port")
done
make_pid=
cleanup() {
    [ -n "$make_pid" ] && kill -TERM "$make_pid" 2>/dev/null || true
    pkill -f "$tmp/var" 2>/dev/null || true
    kill -9 "${server_pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
for port in "${node_ports[@]}"; do
    for _ in $(seq 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create "${nodes[@]}" --cluster-yes >"$tmp/create.log" 2>&1 ||
    fail "redis-cli --cluster create: $(tail -5 "$tmp/create.log")"
cluster_ok() {
    for port in "${node_ports[@]}"; do
        redis-cli -p "$port" CLUSTER INFO | grep -q cluster_state:ok || return 1
    done
}
for _ in $(seq 100); do cluster_ok && break; sleep 0.1; done
cluster_ok || fail "the cluster's nodes did not all report cluster_state:ok within 10 s"
cluster_url="redis+cluster://$(IFS=,; echo "${nodes[*]}")"

VAR_DIR=$tmp/var REDIS_URL=$cluster_url VARNISH_PORT=$varnish_port WRITER_PORT=$writer_port \
    make -s -C "$root" run >"$log" 2>&1 &
make_pid=$!
for _ in $(seq 300); do
    curl -fs "http://127.0.0.1:$writer_port/" >/dev/null 2>&1 && break
    kill -0 "$make_pid" 2>/dev/null || fail "make run exited early"
    sleep 0.2
done
[ ! -e "$tmp/var/run/redis.pid" ] && [ ! -e "$tmp/var/run/clicks.pid" ] ||
    fail "make run started a Redis although REDIS_URL names one"

# Twenty links: each redirects, and each is on the primary serving its
# hash's slot (redis-cli -c follows the cluster's redirects).
keys=()
for n in $(seq 20); do
    url=https://example.org/cluster-$n
    created=$(curl -s -H 'Content-Type: application/json' -d "{\"url\": \"$url\"}" \
        "http://127.0.0.1:$writer_port/api/links")
    short=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["short_url"])' <<<"$created") ||
        fail "inserting $url answered: $created"
    key=${short##*/}
    curl -s -o /dev/null -D - "$short" | grep -qi "^Location: $url" ||
        fail "$short does not redirect to $url"
    [ "$(redis-cli -c -p "${node_ports[0]}" HGET "short:${key:0:2}" "${key:2}")" = "$url" ] ||
        fail "$short is not in the cluster"
    keys+=("$key")
done
holding=0
for port in "${node_ports[@]}"; do
    # Link hashes only: short: and two key characters.
    [ -n "$(redis-cli -p "$port" KEYS 'short:??')" ] && holding=$((holding + 1))
done
[ "$holding" -ge 2 ] || fail "20 links landed on $holding primaries"

# Each redirect was counted once (curl is a bot), in the cluster's layout
# (the key's first character is the hash tag), within a few flushes.
counted() { # key
    redis-cli -c -p "${node_ports[0]}" HGET "short:bots:{${1:0:1}}${1:1:1}" "${1:2}"
}
for key in "${keys[@]}"; do
    for _ in $(seq 50); do [ "$(counted "$key")" = 1 ] && break; sleep 0.1; done
    [ "$(counted "$key")" = 1 ] ||
        fail "the redirect of $key was counted '$(counted "$key")' times in the cluster, not once"
done

kill -TERM "$make_pid"
for _ in $(seq 100); do kill -0 "$make_pid" 2>/dev/null || break; sleep 0.1; done
if pgrep -f "$tmp/var" >/dev/null; then
    pgrep -af "$tmp/var" >&2
    fail "processes left behind after SIGTERM"
fi
echo "smoke-run-cluster: make run started no Redis, stored and served 20 links across" \
    "$holding primaries of the cluster REDIS_URL named, and counted each redirect once there"
