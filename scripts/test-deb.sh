#!/usr/bin/env bash
# The Debian package, as `make test` checks it: built from what `make`
# built (scripts/deb.sh), installed with apt, used (`shortlink --version`,
# a VCL that says plain `import shortlink;` compiled by varnishd, the man
# page, the completions, the systemd unit), then purged: every file it
# installed must be gone. Root, or sudo, for apt. Refuses to run if a
# shortlink package is installed already, and purges its own on the way
# out, failed or not.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

checks=0
say() { printf 'test-deb: %s\n' "$*" >&2; }
ok() { checks=$((checks + 1)); say "ok: $*"; }
fail() { say "FAIL: $*"; exit 1; }

if [ "$(id -u)" -eq 0 ]; then
    as_root() { "$@"; }
elif command -v sudo >/dev/null; then
    as_root() { sudo "$@"; }
else
    fail "installing a package needs root or sudo"
fi
# A fresh machine's daily apt run may hold dpkg's lock for a while: wait for it.
apt_get() { as_root env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=120 "$@"; }

# Whether dpkg knows shortlink in any state (installed, half-installed,
# config files left...).
known() { dpkg-query -W -f='${db:Status-Abbrev}' shortlink 2>/dev/null | grep -vq '^un'; }

if known; then
    fail "a shortlink package is already on this machine ($(dpkg-query -W -f='${Version} ${db:Status-Abbrev}' shortlink)): this test installs and purges its own; remove that one first"
fi

tmp=$(mktemp -d)
# varnishd reads the VCL after dropping root for its own user.
chmod 755 "$tmp"
cleanup() {
    if known; then
        say "purging the package on the way out"
        apt_get purge shortlink >/dev/null 2>&1 || as_root dpkg --purge shortlink >/dev/null 2>&1 || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

deb=$(scripts/deb.sh)
[ -f "$deb" ] || fail "scripts/deb.sh did not make a package"
version=$(dpkg-deb --field "$deb" Version)
ok "built $(basename "$deb")"

# Docker-style Debian images tell dpkg to skip man pages and docs
# (path-exclude in /etc/dpkg/dpkg.cfg.d/): they would not be installed,
# and the checks below would fail for that. This test puts the package's
# own back; the exclusions stay for everything else.
dpkg_options=()
if excluded=$(grep -hs '^path-exclude' /etc/dpkg/dpkg.cfg.d/* /etc/dpkg/dpkg.cfg) && [ -n "$excluded" ]; then
    say "dpkg excludes paths here ($(echo "$excluded" | tr '\n' ' ')): including the package's man pages and docs for this test"
    for keep in '/usr/share/man/man1/shortlink*' '/usr/share/doc/shortlink/*'; do
        dpkg_options+=(-o "DPkg::Options::=--path-include=$keep")
    done
fi

apt_get "${dpkg_options[@]}" install "$deb" >"$tmp/apt.log" 2>&1 || {
    cat "$tmp/apt.log" >&2
    fail "apt-get install $deb"
}
dpkg-query -W -f='${db:Status-Abbrev}' shortlink | grep -q '^ii' || fail "shortlink is not installed after apt-get install"
ok "apt-get install $(basename "$deb")"
dpkg -L shortlink >"$tmp/files"
[ -s "$tmp/files" ] || fail "dpkg -L shortlink lists nothing"

# The dependency on the Varnish ABI the VMOD was built for, which the
# installed varnish provides (else apt would have refused).
depends=$(dpkg-query -W -f='${Depends}' shortlink)
[[ "$depends" == *varnishabi-strict-* ]] || fail "Depends has no varnishabi-strict-*: $depends"
ok "Depends: $depends"

[ "$(command -v shortlink)" = /usr/bin/shortlink ] || fail "shortlink is not /usr/bin/shortlink but '$(command -v shortlink)'"
shortlink --version >"$tmp/version" || fail "shortlink --version failed"
grep -qw "$version" "$tmp/version" || fail "shortlink --version says '$(cat "$tmp/version")', not $version"
ok "shortlink --version: $(cat "$tmp/version")"

vmoddir=$(pkg-config --variable=vmoddir varnishapi)
[ -f "$vmoddir/libvmod_shortlink.so" ] || fail "no libvmod_shortlink.so in Varnish's VMOD directory $vmoddir"
grep -qx "$vmoddir/libvmod_shortlink.so" "$tmp/files" || fail "dpkg -L does not list $vmoddir/libvmod_shortlink.so"
ok "the VMOD is $vmoddir/libvmod_shortlink.so"

# varnishd compiles each example VCL, which finds the VMOD by its plain
# name in its default vmod_path and loads it (a VMOD built for another
# Varnish fails here). The include form goes into a site's VCL.
examples=/usr/share/doc/shortlink/examples
printf 'vcl 4.1;\n\ninclude "%s/shortlink-include.vcl";\n\nbackend site { .host = "127.0.0.1"; .port = "8081"; }\n' \
    "$examples" >"$tmp/site.vcl"
for vcl in "$examples/shortlink.vcl" "$tmp/site.vcl"; do
    [ -f "$vcl" ] || fail "$vcl is missing"
    if [ "$vcl" != "$tmp/site.vcl" ]; then
        grep -qx 'import shortlink;' "$vcl" || fail "$vcl does not say plain 'import shortlink;'"
    fi
    varnishd -C -n "$tmp/varnishd" -f "$vcl" >"$tmp/vcc.out" 2>"$tmp/vcc.err" || {
        cat "$tmp/vcc.err" >&2
        fail "varnishd -C -f $vcl"
    }
    ok "varnishd -C -f $vcl"
done
grep -qx 'import shortlink;' "$examples/shortlink-include.vcl" ||
    fail "$examples/shortlink-include.vcl does not say plain 'import shortlink;'"

# The configuration: a conffile, root's only, and valid.
conf=/etc/shortlink/shortlink.toml
dpkg-query -W -f='${Conffiles}\n' shortlink | grep -q "^ $conf " || fail "$conf is not a conffile"
[ "$(stat -c '%a %U' "$conf")" = "640 root" ] || fail "$conf is $(stat -c '%a %U' "$conf"), not 640 root"
# The configuration is root's alone (mode 640), as the unit hands it over.
as_root shortlink --config "$conf" vcl >/dev/null || fail "shortlink does not accept the packaged $conf"
ok "$conf: a conffile, mode 640, valid"

command -v man >/dev/null || fail "man is missing (scripts/install-deps.sh test installs man-db)"
for page in shortlink shortlink-serve shortlink-add; do
    where=$(man -w "$page") || fail "man -w $page finds no page"
    ok "man -w $page: $where"
done
# Into a file first: `grep -q` leaving early would break man's pipe.
MANPAGER=cat MANWIDTH=80 man shortlink >"$tmp/man.txt" 2>/dev/null || fail "man shortlink failed"
grep -q -- '--config' "$tmp/man.txt" || fail "man shortlink does not show --config"

for completion in /usr/share/bash-completion/completions/shortlink \
    /usr/share/zsh/vendor-completions/_shortlink \
    /usr/share/fish/vendor_completions.d/shortlink.fish; do
    [ -s "$completion" ] || fail "$completion is missing or empty"
done
bash -c 'source /usr/share/bash-completion/completions/shortlink && complete -p shortlink' >/dev/null ||
    fail "the bash completion does not register for shortlink"
ok "completions for bash, zsh and fish"

unit=/usr/lib/systemd/system/shortlink.service
[ -f "$unit" ] || fail "$unit is missing"
if command -v systemd-analyze >/dev/null; then
    # It checks the directives, that the binary exists and that the
    # Documentation= man pages do; any message fails the test.
    if ! systemd-analyze verify "$unit" >"$tmp/verify" 2>&1 || [ -s "$tmp/verify" ]; then
        cat "$tmp/verify" >&2
        fail "systemd-analyze verify $unit"
    fi
    ok "systemd-analyze verify $unit"
else
    say "skipped: systemd-analyze verify (no systemd-analyze here)"
fi

# Purged, the package must leave nothing: every path it listed is gone,
# but directories another package owns too.
apt_get purge shortlink >"$tmp/apt.log" 2>&1 || {
    cat "$tmp/apt.log" >&2
    fail "apt-get purge shortlink"
}
if known; then fail "dpkg still knows shortlink after the purge"; fi
left=()
while IFS= read -r path; do
    [ "$path" = /. ] && continue
    [ -e "$path" ] || [ -L "$path" ] || continue
    if [ -d "$path" ] && [ ! -L "$path" ] && dpkg-query -S "$path" >/dev/null 2>&1; then
        continue
    fi
    left+=("$path")
done <"$tmp/files"
[ ! -e /etc/shortlink ] || left+=(/etc/shortlink)
# deb-systemd-helper's records of the unit.
while IFS= read -r path; do left+=("$path"); done < <(
    find /etc/systemd /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked \
        -name '*shortlink*' 2>/dev/null
)
if [ "${#left[@]}" -gt 0 ]; then
    fail "left behind after the purge: $(printf '%s\n' "${left[@]}" | sort -u | tr '\n' ' ')"
fi
ok "apt-get purge shortlink: none of its $(grep -vcx '/\.' "$tmp/files") paths is left but shared directories, /etc/shortlink is gone"

say "all $checks checks passed"
