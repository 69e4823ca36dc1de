#!/usr/bin/env bash
# Runs every test of the workspace, after installing what the tests need
# (OpenSM, ibsim and infiniband-diags for the interop tests, etcd) when
# missing; then the chaos suite (integration-tests/tests/chaos.rs), which
# runs the services as containers when a Docker daemon answers and prints
# `chaos: SKIPPED (no Docker daemon): ...` when none does.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The interop tests drive the real binary, and the chaos suite puts it in
# its image.
cargo build --bin ibfabric --quiet
# The OpenSM plugin and the PathRecord reader the plugin tests load, and
# the plugin's own checks of its table-set reader.
make -s -C opensm-plugin all check
status=0
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast -E 'not binary(chaos)' || status=$?
    # Alone and uncaptured: its containers share the machine with nothing
    # else of ours, and its per-scenario lines are the measurements.
    cargo nextest run -p integration-tests --test chaos --no-capture || status=$?
else
    cargo test --workspace --no-fail-fast -- --skip chaos_suite || status=$?
    cargo test -p integration-tests --test chaos -- --nocapture || status=$?
fi
exit "$status"
