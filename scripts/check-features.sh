#!/usr/bin/env bash
# Fails when `cargo test --workspace` would build a dependency with other
# features than `cargo build --workspace` does: make test would then compile
# it, and every crate above it, twice. The fix is to name the features it
# prints in workspace-hack/Cargo.toml.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each crate with its features, as a build without the dev-dependencies
# resolves them (`-e no-dev`), and as a test build does.
features() {
    cargo tree --workspace --locked "$@" --format '{p} [{f}]' --prefix none | sed 's/ (\*)$//' | sort -u
}
without_dev=$(features -e no-dev)
with_dev=$(features)
# A crate (name and version) both builds list, with features the test
# build alone sees.
differ=$(awk 'NR == FNR { seen[$1 " " $2] = 1; line[$0] = 1; next }
    ($1 " " $2) in seen && !($0 in line)' <(echo "$without_dev") <(echo "$with_dev"))
if [ -n "$differ" ]; then
    echo "check-features: cargo test would compile these again, with the features shown;" >&2
    echo "check-features: name the missing ones in workspace-hack/Cargo.toml:" >&2
    echo "$differ" >&2
    exit 1
fi
echo "check-features: cargo build and cargo test share every dependency ($(echo "$without_dev" | wc -l) crates)"
