#!/usr/bin/env bash
# The main job on the embedded default: generate a subnet (a Dragonfly with
# 1,056 HCAs), route it deadlock free with DF-DN, verify the written files
# again from disk, and show where the OpenSM files went. No services or
# external state are needed.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/quickstart}"
mkdir -p "$out"
cargo build --release --bin ibfabric --quiet
bin=target/release/ibfabric
"$bin" gen dragonfly --p 4 -o "$out/dragonfly-p4.net"
"$bin" info "$out/dragonfly-p4.net"
"$bin" route --topology "$out/dragonfly-p4.net" --engine dfdn --out "$out/dfdn"
"$bin" verify --topology "$out/dragonfly-p4.net" --dir "$out/dfdn"
