#!/usr/bin/env bash
# Builds the Debian package target/debian/shortlink_<version>_<arch>.deb
# from what `cargo build --release --workspace` built: `make deb` runs both.
# The package is described in writer/Cargo.toml ([package.metadata.deb]);
# this script makes what that cannot be static there:
#
#   - the man pages and shell completions (`shortlink generate`, hidden) and
#     the include VCL (`shortlink vcl --include`, from the defaults);
#   - the VMOD under the path of Varnish's VMOD directory;
#   - the dependency on the Varnish ABI the VMOD was compiled for, which
#     replaces `${varnish:Depends}` in the package's control file.
#
# It builds nothing with Cargo, so the package holds exactly the binaries
# the tests ran. It prints the package's path on standard output, and the
# rest on standard error.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo=${CARGO:-cargo}
PATH="$root/target/tools/bin:$PATH"

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'deb: %s\n' "$*" >&2; exit 1; }

command -v cargo-deb >/dev/null || die "cargo-deb is missing: run scripts/install-deps.sh deb"
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing: this builds Debian packages on Debian"

# The target directory as Cargo sees it (CARGO_TARGET_DIR included), the
# version of the workspace, and the writer's description.
{ read -r target_dir; read -r version; read -r description; } < <("$cargo" metadata --format-version 1 --no-deps | python3 -c '
import json, sys
m = json.load(sys.stdin)
w = next(p for p in m["packages"] if p["name"] == "shortlink-writer")
print(m["target_directory"], w["version"], " ".join(w["description"].split()), sep="\n")')
[ -n "${description:-}" ] || die "cargo metadata did not give the target directory, version and description"
# The package's synopsis (at most 80 characters).
synopsis="URL shortener: Varnish module and writer for short links in Redis"
release=$target_dir/release
writer=$release/shortlink
vmod=$release/libvmod_shortlink.so
for built in "$writer" "$vmod"; do
    [ -f "$built" ] || die "$built is missing: run \`make deb\`, which builds it first"
done

vmoddir=$(pkg-config --variable=vmoddir varnishapi) || die "pkg-config knows no varnishapi: install libvarnishapi-dev"
case "$vmoddir" in
    /*) ;;
    *) die "Varnish's VMOD directory is not an absolute path: '$vmoddir'" ;;
esac

# The Varnish ABI. The VMOD declares VRT 0.0, so Varnish loads it only if
# its own ABI string ("Varnish 7.7.0 <commit>") is the one compiled into the
# VMOD: the package depends on exactly that Varnish, through the virtual
# packages Debian's varnish Provides (varnish-modules depends on the same).
# Taken from the built VMOD itself, and checked against the headers, so
# that a VMOD built against other headers is not packaged as this one.
abi=$(grep -aoE -m1 'Varnish [0-9][0-9A-Za-z.~+-]* [0-9a-f]{40}' "$vmod") ||
    die "no Varnish ABI string in $vmod"
abi=${abi%%$'\n'*}
include=$(pkg-config --variable=pkgincludedir varnishapi)
header_abi=$(sed -n 's/^#define[[:space:]]*VMOD_ABI_Version[[:space:]]*"\(.*\)"/\1/p' "$include/vmod_abi.h")
[ "$abi" = "$header_abi" ] ||
    die "$vmod was built for '$abi' but the headers are '$header_abi': rebuild (cargo clean -p vmod_shortlink)"
vrt() { sed -n "s/^#define[[:space:]]*VRT_$1_VERSION[[:space:]]*\([0-9]*\)U.*/\1/p" "$include/vrt.h"; }
vrt_major=$(vrt MAJOR)
vrt_minor=$(vrt MINOR)
[ -n "$vrt_major" ] && [ -n "$vrt_minor" ] || die "no VRT_MAJOR_VERSION/VRT_MINOR_VERSION in $include/vrt.h"
varnish_depends="varnishabi-$vrt_major.$vrt_minor, varnishabi-strict-${abi##* }"
if provides=$(dpkg-query -W -f='${Provides}' varnish 2>/dev/null) &&
    [[ ", $provides," != *", varnishabi-strict-${abi##* },"* ]]; then
    say "warning: the installed varnish package does not provide varnishabi-strict-${abi##* }: the package will not install next to it"
fi

# What the assets under target/release/shortlink-deb/ name.
stage=$release/shortlink-deb
rm -rf "$stage"
mkdir -p "$stage/vmod$vmoddir" "$stage/man" "$stage/completions"
cp "$vmod" "$stage/vmod$vmoddir/"
env -u SHORTLINK_CONFIG "$writer" generate --out "$stage/generated"
for page in "$stage"/generated/*.1; do
    gzip -9n <"$page" >"$stage/man/${page##*/}.gz"
done
mv "$stage/generated/shortlink.bash" "$stage/generated/_shortlink" "$stage/generated/shortlink.fish" "$stage/completions/"
env -u SHORTLINK_CONFIG "$writer" vcl --include >"$stage/shortlink-include.vcl"

arch=$(dpkg --print-architecture)
deb=$target_dir/debian/shortlink_${version}_${arch}.deb
mkdir -p "$target_dir/debian"
rm -f "$deb"
say "cargo deb -p shortlink-writer --no-build"
# --strip: the binaries' line tables (the release profile keeps them for
# backtraces) would triple the package and its compression time; the
# unstripped ones stay in target/release. --fast: it is packed again below.
"$cargo" deb -p shortlink-writer --no-build --strip --fast --output "$deb" >/dev/null

# Unpack, finish DEBIAN/, pack again; the files, their modes, the
# conffiles and the maintainer scripts stay as cargo-deb made them.
unpacked=$target_dir/debian/shortlink-unpacked
rm -rf "$unpacked"
dpkg-deb --raw-extract "$deb" "$unpacked"
# In the control file: ${varnish:Depends}, and the synopsis. cargo-deb takes
# that from the crate's description (the first line of `shortlink --help`),
# longer than a synopsis' 80 characters, and wraps the rest into the long
# description.
python3 - "$unpacked/DEBIAN/control" "$varnish_depends" "$synopsis" "$description" <<'PYTHON'
import re, sys
path, depends, synopsis, description = sys.argv[1:]
control = open(path).read()
depends_line = re.search(r"^Depends: .*$", control, re.M)
if not depends_line or "${varnish:Depends}" not in depends_line[0]:
    sys.exit("deb: ${varnish:Depends} is not in the Depends cargo-deb wrote: see writer/Cargo.toml")
control = control.replace("${varnish:Depends}", depends)
# The synopsis is the lines after "Description:" whose words are the description's.
field = re.search(r"^Description: (.*\n(?: .*\n)*)", control, re.M)
lines = field[1].splitlines(keepends=True)
for n in range(1, len(lines) + 1):
    if "".join(lines[:n]).split() == description.split():
        break
else:
    sys.exit("deb: the synopsis cargo-deb wrote is not the crate's description")
control = control[: field.start(1)] + synopsis + "\n" + "".join(lines[n:]) + control[field.end(1):]
if "${" in control:
    sys.exit("deb: a variable is left in the control file:\n" + control)
open(path, "w").write(control)
PYTHON
# cargo-deb writes no md5sums; dpkg --verify and debsums read them.
(cd "$unpacked" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0r md5sum) >"$unpacked/DEBIAN/md5sums"
dpkg-deb --root-owner-group -Zxz --build "$unpacked" "$deb" >/dev/null
rm -rf "$unpacked"

say "built $deb ($(du -k "$deb" | cut -f1) kB)"
dpkg-deb --field "$deb" Package Version Architecture Depends >&2
# The one line on standard output: where the package is.
printf '%s\n' "$deb"
