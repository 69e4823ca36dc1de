#!/usr/bin/env bash
# The main job on the embedded default: generate a subnet (a Dragonfly with
# 1,056 HCAs), route it deadlock free with DF-DN, verify the written files
# again from disk; then `ibfabric demo`: three subnets joined by routers,
# with controller (in-memory store), agents and router services in one
# process over loopback gRPC. No etcd or other external state is needed;
# protoc (to compile the gRPC contracts) is installed when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/quickstart}"
mkdir -p "$out"
say() { printf '\n==> %s\n' "$*" >&2; }
say "checking build dependencies (protoc; apt when missing)"
bash scripts/install-deps.sh --build-only
say "building the release binary: 10-20 minutes on 2 cores the first time, about 3 GB under target/"
cargo build --release --bin ibfabric
bin=target/release/ibfabric
say "routing a 1,056-HCA Dragonfly with DF-DN, then verifying the files from disk (seconds)"
"$bin" gen dragonfly --p 4 -o "$out/dragonfly-p4.net"
"$bin" info "$out/dragonfly-p4.net"
"$bin" route --topology "$out/dragonfly-p4.net" --engine dfdn --out "$out/dfdn"
"$bin" verify --topology "$out/dragonfly-p4.net" --dir "$out/dfdn"
say "ibfabric demo: controller, agents and routers over loopback gRPC (about a minute)"
"$bin" demo
