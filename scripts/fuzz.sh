#!/usr/bin/env bash
# Runs each cargo-fuzz target in fuzz/ for a bounded time; fails if any of
# them finds an input that breaks one of its properties.
#
#   scripts/fuzz.sh [TARGET...]        (default: every target)
#
# FUZZ_SECONDS   how long each target runs (default 20)
# FUZZ_TOOLCHAIN nightly or stable (default: nightly when rustup has one).
#                The coverage instrumentation needs -Z flags, so stable runs
#                with RUSTC_BOOTSTRAP=1, which unlocks them; only this
#                script's own fuzz build sees it.
# FUZZ_SANITIZER none (default) or address. The targets and what they
#                call are safe Rust, where what the fuzzing looks for
#                (a panic, a broken property) needs no sanitizer; ASan
#                makes the build of every dependency slower. A cold build
#                on 2 cores: 4m46s with ASan, 3m19s without (opt-level 1,
#                as fuzz/Cargo.toml sets; 5m25s with ASan at opt-level 3).
#
# Corpora grow in target/fuzz/corpus/<target>, on top of the seeds in
# fuzz/seeds/<target>; failing inputs land in target/fuzz/artifacts/<target>.
# The fuzz build has its own target directory, target/fuzz/build-<sanitizer>,
# as its instrumented compiles share nothing with the workspace's.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

seconds=${FUZZ_SECONDS:-20}
cargo_fuzz_version=0.13.2
tools=target/tools
work=target/fuzz

say() { printf '==> %s\n' "$*" >&2; }

# libFuzzer reads 0 as "no limit": refuse it rather than run forever.
if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
    say "FUZZ_SECONDS must be a whole number of seconds, at least 1 (got '$seconds')"
    exit 2
fi

# cargo-fuzz goes into the checkout's target/tools, so nothing global is
# needed or changed, and a later run reuses it.
if ! "$tools/bin/cargo-fuzz" --version 2>/dev/null | grep -qx "cargo-fuzz $cargo_fuzz_version"; then
    say "installing cargo-fuzz $cargo_fuzz_version into $tools"
    cargo install --locked --quiet --root "$tools" --version "=$cargo_fuzz_version" cargo-fuzz
fi
export PATH="$root/$tools/bin:$PATH"

toolchain=${FUZZ_TOOLCHAIN:-}
if [ -z "$toolchain" ]; then
    toolchain=stable
    # The rolling nightly only: `+nightly` names no dated one.
    host=$(rustc -vV | sed -n 's/^host: //p')
    if command -v rustup >/dev/null && rustup toolchain list | grep -Eq "^nightly-$host( |\$)"; then
        toolchain=nightly
    fi
fi
sanitizer=${FUZZ_SANITIZER:-none}
case $sanitizer in
    none | address) ;;
    *)
        say "FUZZ_SANITIZER must be none or address (got '$sanitizer')"
        exit 2
        ;;
esac
case $toolchain in
    nightly) env_prefix=() ;;
    stable) env_prefix=(RUSTC_BOOTSTRAP=1) ;;
    *)
        say "FUZZ_TOOLCHAIN must be nightly or stable (got '$toolchain')"
        exit 2
        ;;
esac
cargo_fuzz=(env "${env_prefix[@]}" cargo)
if command -v rustup >/dev/null; then
    cargo_fuzz+=("+$toolchain")
fi
cargo_fuzz+=(fuzz)
# A directory per sanitizer: switching does not rebuild the other's.
build_flags=(--sanitizer "$sanitizer" --target-dir "$work/build-$sanitizer")

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    list=$("${cargo_fuzz[@]}" list)
    mapfile -t targets <<<"$list"
fi
if [ -z "${targets[*]}" ]; then
    say "no fuzz targets to run"
    exit 2
fi

say "building the fuzz targets ($toolchain, sanitizer $sanitizer)"
"${cargo_fuzz[@]}" build "${build_flags[@]}"

failed=()
for target in "${targets[@]}"; do
    corpus=$work/corpus/$target
    artifacts=$work/artifacts/$target
    log=$work/logs/$target.log
    mkdir -p "$corpus" "$artifacts" "$work/logs"
    # libFuzzer takes the last -artifact_prefix, so this overrides the one
    # cargo-fuzz puts first; a timeout or running out of memory is a failure.
    args=(-max_total_time="$seconds" -artifact_prefix="$artifacts/" -timeout=10 -rss_limit_mb=2048)
    if [ -f "fuzz/dicts/$target.dict" ]; then
        args+=(-dict="fuzz/dicts/$target.dict")
    fi
    start=$work/.start-$target
    touch "$start"
    say "fuzzing $target for ${seconds}s (log: $log)"
    # The first corpus directory takes what the run finds; the seeds are only read.
    if "${cargo_fuzz[@]}" run "${build_flags[@]}" "$target" "$corpus" "fuzz/seeds/$target" \
        -- "${args[@]}" >"$log" 2>&1; then
        grep -E '^#[0-9]+' "$log" | tail -n 1 >&2 || true
        continue
    fi
    failed+=("$target")
    # From the panic or sanitizer report on: the property that broke, and why.
    sed -n '/panicked at\|ERROR: libFuzzer\|==ERROR\|^error/,$p' "$log" | head -n 200 >&2 || true
    found=$(find "$artifacts" -type f -newer "$start" \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | head -n 1 || true)
    say "$target FAILED: ${found:-no input was saved (see $log)}"
    if [ -n "$found" ]; then
        say "input: $found ($(wc -c <"$found") bytes; see it with: cat -v $found)"
        say "reproduce: PATH=\"\$PWD/$tools/bin:\$PATH\" ${cargo_fuzz[*]:1} run ${build_flags[*]} $target $found"
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    say "fuzzing failed: ${failed[*]}"
    exit 1
fi
say "fuzzing passed: ${targets[*]}, ${seconds}s each"
