#!/usr/bin/env bash
# Starts Redis and Varnish in the foreground for local use, and stops both
# on Ctrl-C or SIGTERM. `make run` builds first, then runs this.
#
# Environment (defaults in brackets):
#   REDIS_PORT     [6380]   port of the Redis this starts
#   REDIS_URL      [redis://127.0.0.1:$REDIS_PORT/0]  what Varnish looks links up in
#   VARNISH_PORT   [6081]   port Varnish answers on
#   VARNISH_LISTEN [127.0.0.1:$VARNISH_PORT]
#   VAR_DIR        [./var]  Redis data and Varnish's working directory
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
redis_port=${REDIS_PORT:-6380}
redis_url=${REDIS_URL:-redis://127.0.0.1:$redis_port/0}
varnish_port=${VARNISH_PORT:-6081}
varnish_listen=${VARNISH_LISTEN:-127.0.0.1:$varnish_port}
var_dir=${VAR_DIR:-$root/var}
mkdir -p "$var_dir/redis" "$var_dir/run"
var_dir=$(cd "$var_dir" && pwd)

say() { printf '==> %s\n' "$*" >&2; }

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

say "starting Redis on 127.0.0.1:$redis_port (data in $var_dir/redis)"
redis-server "$root/redis/redis.conf" --port "$redis_port" --dir "$var_dir/redis" \
    --pidfile "$var_dir/run/redis.pid" --logfile "" &
pids+=($!)
ready=0
for _ in $(seq 100); do
    if [ "$(redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ]; then ready=1; break; fi
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 0.05
done
if [ "$ready" -ne 1 ]; then
    say "Redis did not come up on port $redis_port; see its messages above (port taken? set REDIS_PORT)"
    exit 1
fi

# The shipped VCL names the default Redis; point a copy at this one.
vcl="$var_dir/run/shortlink.vcl"
sed "s|redis://127.0.0.1:6380/0|$redis_url|" "$root/vcl/shortlink.vcl" >"$vcl"

vmod_path="$root/target/release:$(pkg-config --variable=vmoddir varnishapi)"
# As root, varnishd compiles and runs the VCL as its own unprivileged users,
# which cannot read a checkout under a private home directory: run unjailed
# then, rather than fail.
jail=()
if [ "$(id -u)" -eq 0 ] && id varnish >/dev/null 2>&1 &&
    ! runuser -u varnish -- test -r "$vcl" -a -r "$root/target/release/libvmod_shortlink.so"; then
    say "Varnish's own users cannot read this checkout: running varnishd without its jail"
    jail=(-j none)
fi
say "starting Varnish on $varnish_listen"
varnishd -F "${jail[@]}" -a "$varnish_listen" -n "$var_dir/varnish" -f "$vcl" \
    -p vmod_path="$vmod_path" -T 127.0.0.1:0 -s malloc,256m &
pids+=($!)

ready=0
for _ in $(seq 150); do
    if curl -fs "http://$varnish_listen/" >/dev/null 2>&1; then ready=1; break; fi
    kill -0 "${pids[1]}" 2>/dev/null || break
    sleep 0.1
done
if [ "$ready" -ne 1 ]; then
    say "Varnish did not come up on $varnish_listen; see its messages above"
    exit 1
fi
cat >&2 <<MSG
==> ready. Try:
      redis-cli -p $redis_port HSET short:Lm 25 https://example.org/
      curl -i http://$varnish_listen/l/Lm25
    Counters: varnishstat -n $var_dir/varnish -1 -f 'shortlink.*'
    Ctrl-C stops everything.
MSG

# Whichever exits first brings the other down.
wait -n "${pids[@]}"
say "a server exited; stopping the rest"
