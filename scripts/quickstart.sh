#!/usr/bin/env bash
# The main job on the embedded default: generate a subnet (an 8-ary 3-tree,
# 512 HCAs), route it with MinHop, verify the written files again from disk,
# and show where the OpenSM files went. No services or external state needed.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/quickstart}"
mkdir -p "$out"
cargo build --release --bin ibfabric --quiet
bin=target/release/ibfabric
"$bin" gen kary --k 8 --n 3 -o "$out/kary-8-3.net"
"$bin" info "$out/kary-8-3.net"
"$bin" route --topology "$out/kary-8-3.net" --engine minhop --out "$out/minhop"
"$bin" verify --topology "$out/kary-8-3.net" --dir "$out/minhop"
