#!/usr/bin/env bash
# Runs every test of the workspace, after installing what the tests need
# (OpenSM, ibsim and infiniband-diags for the interop tests) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The interop tests drive the real binary.
cargo build --bin ibfabric --quiet
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast
else
    cargo test --workspace --no-fail-fast
fi
