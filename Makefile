# Two commands matter: `make run` and `make test`. Both install whatever is
# missing first (scripts/install-deps.sh), so a fresh Debian machine needs
# nothing else.

CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all deps deps-test build run test faults bench bench-scale vcl vcl/shortlink.vcl deb clean

all: build

deps:
	@scripts/install-deps.sh run

deps-test:
	@scripts/install-deps.sh test

## build: the VMOD (target/release/libvmod_shortlink.so) and everything else, release mode
build: deps
	@$(CARGO) build --release --workspace

## run: Redis on 127.0.0.1:6380, Varnish on 127.0.0.1:6081, the writer on 127.0.0.1:8080
run: build
	exec scripts/run.sh

## vcl: the VCL that `make run` loads, generated from its configuration
vcl: build
	@scripts/run.sh --print-vcl

## vcl/shortlink.vcl: the VCL for the default configuration, as shipped
vcl/shortlink.vcl: build
	target/release/shortlink vcl > $@

## deb: the Debian package target/debian/shortlink_<version>_<arch>.deb: the writer and its systemd unit, the VMOD in Varnish's VMOD directory, the configuration in /etc/shortlink, man pages, completions, example VCL
deb:
	@scripts/install-deps.sh deb
	@$(CARGO) build --release --workspace
	scripts/deb.sh

# The fault suite runs as fault-tests' one test target, built with the
# workspace's features as every other build here: `-p fault-tests` would
# resolve features of its own and compile 19 crates again.
FAULT_SUITE = $(CARGO) test --release --workspace --test under_load

# Fuzzing itself is `make faults`: cargo-fuzz and its instrumented build
# took 454 s of the about 1,924 s a fresh clone's `make test` took, step by
# step, for 7 seconds a target; the seeds, replayed uninstrumented in
# `cargo test`, keep every input that once broke a property tried.
## test: every test: relative links in the Markdown files, one set of dependency features for builds and tests, unit and integration tests, VTC suites, every fuzz target's seeds through its properties, the Debian package (installed, used, purged), `make run` smoke tests (one Redis, Sentinel, Cluster), the fault suite under load, the quick bench, hadolint, compose schema, rustfmt, clippy
test: deps-test
	python3 scripts/check-links.py
	scripts/check-features.sh
	@$(CARGO) build --release --workspace
	scripts/test-deb.sh
	$(CARGO) test --release --workspace --exclude fault-tests --no-fail-fast
	scripts/smoke-run.sh
	scripts/smoke-run-sentinel.sh
	scripts/smoke-run-cluster.sh
	$(FAULT_SUITE)
	BENCH_QUICK=1 python3 bench/bench.py
	target/tools/venv/bin/hadolint --config docker/.hadolint.yaml docker/*.Dockerfile
	target/tools/venv/bin/check-jsonschema --builtin-schema vendor.compose-spec docker/compose*.yaml
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

## faults: faults under load (Redis hung, killed, down at start; the writer without Redis; kill -9 after acknowledged inserts; Varnish restarted), then every fuzz target for FUZZ_SECONDS (20) each
faults: deps-test
	@$(CARGO) build --release --workspace
	$(FAULT_SUITE)
	scripts/fuzz.sh

## bench: every redirect path against Varnish's ceiling; writes target/bench/latest.json
bench: build
	@scripts/install-deps.sh bench
	python3 bench/bench.py

## bench-scale: one Redis at 100 million links (split 3): bytes per link, load time, and miss against a 1M store (opt-in: about 15 minutes and 6 GB of memory; SCALE_LINKS for another count)
bench-scale: build
	@scripts/install-deps.sh bench
	python3 bench/scale.py

clean:
	$(CARGO) clean
	rm -rf var
