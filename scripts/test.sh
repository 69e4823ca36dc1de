#!/usr/bin/env bash
# Runs every test of the workspace, after installing what the tests need
# (OpenSM, ibsim and infiniband-diags for the interop tests, etcd) when
# missing; then the chaos suite (integration-tests/tests/chaos.rs) and the
# Compose example's test (integration-tests/tests/compose.rs), which run the
# services as containers when a Docker daemon answers and print
# `chaos: SKIPPED (...)` / `compose: SKIPPED (...)` when it does not.
set -euo pipefail
cd "$(dirname "$0")/.."
# A CI run builds once: incremental caches would double target/'s size.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
say() { printf '\n==> %s\n' "$*" >&2; }
say "installing what the tests need when missing (apt: protoc, opensm, ibsim, etcd, ...)"
bash scripts/install-deps.sh
say "format and lints (the first build of the workspace: 10-20 minutes on 2 cores; target/ grows to a few GB)"
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The interop tests drive the real binary, and the chaos suite puts it in
# its image.
say "building the binary the process tests run"
cargo build --bin ibfabric --quiet
# The OpenSM plugin and the PathRecord reader the plugin tests load, and
# the plugin's own checks of its table-set reader.
say "building the OpenSM plugin and checking its table-set reader"
make -s -C opensm-plugin all check
say "the test suites: about 5 minutes, then the chaos suite (about 2 minutes) and the Compose stack"
status=0
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast -E 'not binary(chaos) and not binary(compose)' || status=$?
    # Alone and uncaptured: their containers share the machine with nothing
    # else of ours, and their lines are the measurements.
    # Selected from the workspace, not with -p: the same feature set as the
    # run above, so nothing is compiled a second time.
    cargo nextest run --workspace -E 'binary(chaos)' --no-capture || status=$?
    cargo nextest run --workspace -E 'binary(compose)' --no-capture || status=$?
else
    cargo test --workspace --no-fail-fast -- --skip chaos_suite --skip the_compose_stack || status=$?
    cargo test --workspace --test chaos -- --nocapture || status=$?
    cargo test --workspace --test compose -- --nocapture || status=$?
fi
# The README's walkthrough as a newcomer runs it: the release binary it
# builds, every line as written.
say "the README's walkthrough, as written (a release build: 5-8 minutes on 2 cores, then about a minute)"
if cargo build --release --bin ibfabric --quiet; then
    bash scripts/readme_walkthrough.sh target/release/ibfabric || status=$?
    # The Debian package on a clean Debian: installs, units verify, OpenSM
    # on ibsim applies a set through the installed plugin.
    say "the Debian package in a clean Debian container (first run: debootstrap, 2-3 minutes)"
    deb=$(bash scripts/build-deb.sh --binary target/release/ibfabric | tail -1) &&
        bash scripts/deb_test.sh "$deb" || status=$?
else
    status=1
fi
exit "$status"
