#!/usr/bin/env bash
# Starts Redis (one for links, one for clicks), Varnish and the writer in the
# foreground for local use, and stops them all on Ctrl-C or SIGTERM. Each is
# supervised: one that dies is started again (Redis from its append-only
# file, so no acknowledged link is lost). Each new Varnish cache is warmed
# with the hottest links (`shortlink warm`). `make run` builds first, then
# runs this; `scripts/run.sh --print-vcl` prints the VCL it would load.
#
# Environment (defaults in brackets):
#   REDIS_PORT     [6380]   port of the Redis this starts
#   REDIS_URL      [redis://127.0.0.1:$REDIS_PORT/0]  where links are stored;
#                           when set, this starts no Redis for them: e.g. a
#                           redis+sentinel://host:port,.../master-name or a
#                           redis+cluster://host:port,...
#   CLICKS_REDIS_PORT [6381] port of the Redis for clicks this starts
#   CLICKS_REDIS_URL  [redis://127.0.0.1:$CLICKS_REDIS_PORT/0, or REDIS_URL
#                           when that is set]  where clicks are stored; when
#                           set, this starts no Redis for them
#   VARNISH_PORT   [6081]   port Varnish answers on
#   VARNISH_LISTEN [127.0.0.1:$VARNISH_PORT]
#   WRITER_PORT    [8080]   port of the writer's web form and API
#   SHORTLINK_CONFIG        a writer configuration to use as it is, instead
#                           of one made from the variables above
#   VAR_DIR        [./var]  Redis data, Varnish's working directory, configs
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
redis_port=${REDIS_PORT:-6380}
redis_url=${REDIS_URL:-redis://127.0.0.1:$redis_port/0}
clicks_redis_port=${CLICKS_REDIS_PORT:-6381}
if [ -n "${REDIS_URL:-}" ]; then
    clicks_redis_url=${CLICKS_REDIS_URL:-$REDIS_URL}
else
    clicks_redis_url=${CLICKS_REDIS_URL:-redis://127.0.0.1:$clicks_redis_port/0}
fi
varnish_port=${VARNISH_PORT:-6081}
varnish_listen=${VARNISH_LISTEN:-127.0.0.1:$varnish_port}
writer_port=${WRITER_PORT:-8080}
var_dir=${VAR_DIR:-$root/var}
shortlink=$root/target/release/shortlink
mkdir -p "$var_dir/redis" "$var_dir/clicks" "$var_dir/run"
var_dir=$(cd "$var_dir" && pwd)

say() { printf '==> %s\n' "$*" >&2; }

config=${SHORTLINK_CONFIG:-$var_dir/run/shortlink.toml}
if [ -z "${SHORTLINK_CONFIG:-}" ]; then
    # Purges and warm-ups need this besides a loopback address, so nothing
    # else on this machine that relays clients (a TLS terminator) can send
    # them. Made once, kept with the rest of var/.
    secret_file=$var_dir/run/purge.secret
    if [ ! -s "$secret_file" ]; then
        (umask 077 && od -An -tx1 -N24 /dev/urandom | tr -d ' \n' >"$secret_file")
    fi
    cat >"$config" <<TOML
# Made by scripts/run.sh from its environment; see writer/shortlink.example.toml.
listen = "127.0.0.1:$writer_port"
public_base_url = "http://$varnish_listen/l/"

[redis]
url = "$redis_url"

[clicks]
redis_url = "$clicks_redis_url"

[varnish]
purge_url = "http://$varnish_listen"
purge_secret = "$(cat "$secret_file")"
vmod = "$root/target/release/libvmod_shortlink.so"
TOML
fi
vcl="$var_dir/run/shortlink.vcl"
"$shortlink" vcl --config "$config" >"$vcl"
if [ "${1:-}" = --print-vcl ]; then
    cat "$vcl"
    exit 0
fi

pids=()
stop_all() {
    trap - INT TERM EXIT
    say "stopping"
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a command again whenever it exits, until this script stops it. One
# that keeps dying at once (a port in use, say) is given up on, which stops
# everything.
supervise() { # name, command...
    local name=$1
    shift
    (
        # Whatever runs now, even one started a moment before the signal.
        trap 'kill -TERM $(jobs -p) 2>/dev/null; wait 2>/dev/null; exit 0' TERM INT
        quick_exits=0
        while true; do
            started=$SECONDS
            "$@" &
            status=0
            wait $! || status=$?
            if [ $((SECONDS - started)) -lt 3 ]; then
                quick_exits=$((quick_exits + 1))
            else
                quick_exits=0
            fi
            if [ "$quick_exits" -ge 5 ]; then
                say "$name keeps exiting (status $status); giving up"
                exit 1
            fi
            say "$name exited (status $status); starting it again"
            sleep 1
        done
    ) &
    pids+=($!)
}

wait_until() { # what, pid, command...
    local what=$1 pid=$2
    shift 2
    for _ in $(seq 150); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        if ! kill -0 "$pid" 2>/dev/null; then break; fi
        sleep 0.1
    done
    say "$what did not come up; see its messages above"
    exit 1
}

start_redis() { # what, port, configuration, data directory, variable naming the port, niceness
    say "starting $1 on 127.0.0.1:$2 (data in $4)"
    supervise "$1" nice -n "$6" redis-server "$root/redis/$3" --port "$2" --dir "$4" \
        --pidfile "$var_dir/run/${3%.conf}.pid" --logfile ""
    wait_until "$1 (port $2 free? set $5)" "${pids[-1]}" \
        sh -c "[ \"\$(redis-cli -p $2 ping)\" = PONG ]"
}
# A Redis named by URL is someone else's to run (a Sentinel group, say).
if [ -n "${REDIS_URL:-}" ]; then
    say "links in $redis_url (REDIS_URL): starting no Redis for them"
else
    start_redis "Redis for links" "$redis_port" redis.conf "$var_dir/redis" REDIS_PORT 0
fi
if [ -n "${CLICKS_REDIS_URL:-}" ] || [ -n "${REDIS_URL:-}" ]; then
    say "clicks in $clicks_redis_url: starting no Redis for them"
else
    # Below Varnish, as docs/deploying.md advises: answers first, counts
    # when a core is free.
    start_redis "Redis for clicks" "$clicks_redis_port" clicks.conf "$var_dir/clicks" CLICKS_REDIS_PORT 10
fi

# As root, varnishd compiles and runs the VCL as its own unprivileged users,
# which cannot read a checkout under a private home directory: run unjailed
# then, rather than fail.
jail=()
if [ "$(id -u)" -eq 0 ] && id varnish >/dev/null 2>&1 &&
    ! runuser -u varnish -- test -r "$vcl" -a -r "$root/target/release/libvmod_shortlink.so"; then
    say "Varnish's own users cannot read this checkout: running varnishd without its jail"
    jail=(-j none)
fi
# Thread pools and the rest, tuned for short links (see the file's comments).
params=()
while read -r line; do
    line=${line%%#*}
    line=${line//[[:space:]]/}
    [ -n "$line" ] && params+=(-p "$line")
done <"$root/vcl/varnishd.params"
say "starting Varnish on $varnish_listen with the VCL generated from $config"
supervise Varnish varnishd -F "${jail[@]}" -a "$varnish_listen" -n "$var_dir/varnish" -f "$vcl" \
    -T 127.0.0.1:0 -s malloc,256m "${params[@]}"
wait_until "Varnish (port ${varnish_listen##*:} free? set VARNISH_PORT)" "${pids[-1]}" \
    curl -fs "http://$varnish_listen/"

# Every new cache starts empty: after Varnish starts, after the supervisor
# starts it again, and after its child process crashed and was restarted
# by the manager. The child's uptime going back is the sign of each; the
# hottest links are then loaded before people ask for them.
warm_new_caches() {
    local last=-1 uptime
    while sleep 1; do
        uptime=$(varnishstat -n "$var_dir/varnish" -1 -f MAIN.uptime 2>/dev/null |
            awk '$1 == "MAIN.uptime" {print $2}') || continue
        [ -n "$uptime" ] || continue
        if [ "$uptime" -lt "$last" ] || [ "$last" -lt 0 ]; then
            say "warming Varnish's new cache with the hottest links"
            if ! "$shortlink" warm --config "$config" >&2; then
                # Tried again next second, with Redis or Varnish back.
                last=-1
                continue
            fi
        fi
        last=$uptime
    done
}
warm_new_caches &
pids+=($!)

say "starting the writer"
supervise "The writer" "$shortlink" serve --config "$config"
writer_listen=$(sed -n 's/^listen = "\(.*\)"$/\1/p' "$config")
writer_listen=${writer_listen:-127.0.0.1:8080}
wait_until "the writer (port ${writer_listen##*:} free? set WRITER_PORT)" "${pids[-1]}" \
    curl -fs "http://$writer_listen/"

cat >&2 <<MSG
==> ready.
    Shorten a link:  http://$writer_listen/   (or: $shortlink add URL --config $config)
    By hand:         redis-cli -p $redis_port HSET short:Lm 25 https://example.org/
    Its clicks:      redis-cli -p $clicks_redis_port HGET short:clicks:Lm 25
    Follow it:       curl -i http://$varnish_listen/l/Lm25
    Counters:        varnishstat -n $var_dir/varnish -1 -f 'shortlink.*'
    Ctrl-C stops everything.
MSG

# A supervisor that gave up brings the others down.
wait -n "${pids[@]}" || true
say "a server could not be kept running; stopping the rest"
