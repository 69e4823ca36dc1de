#!/usr/bin/env bash
# The Debian package as a fresh machine gets it: a clean Debian rootfs
# (debootstrap, imported into Docker: no image is pulled) where
# `apt-get install ./ibfabric_*.deb opensm ibsim-utils` works, the units
# verify, and OpenSM on ibsim applies a table set through the installed
# plugin (scripts/deb_test_inner.sh). Needs Docker, debootstrap (installed
# when missing) and Debian's mirror. Skips, saying so, without Docker.
# Usage: scripts/deb_test.sh [DEB]   (default: scripts/build-deb.sh's)
# The base image is kept as ibfabric-debtest-base:<suite>; DEBTEST_REBUILD=1
# makes it again.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEB=${1:-}
if ! docker info >/dev/null 2>&1; then
  echo "deb-test: SKIPPED (no Docker daemon)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "deb-test: SKIPPED (debootstrap and the image import need root)"
  exit 0
fi
if [ -z "$DEB" ]; then
  DEB=$("$ROOT/scripts/build-deb.sh" | tail -1)
fi
DEB=$(readlink -f "$DEB")
SUITE=$(. /etc/os-release && echo "$VERSION_CODENAME")
IMAGE=ibfabric-debtest-base:$SUITE
if [ -n "${DEBTEST_REBUILD:-}" ] || ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  ROOTFS=$(mktemp -d)
  trap 'rm -rf "$ROOTFS"' EXIT
  echo "deb-test: debootstrap $SUITE (minbase, a few minutes)"
  debootstrap --variant=minbase "$SUITE" "$ROOTFS" http://deb.debian.org/debian >/dev/null
  tar -C "$ROOTFS" -c . | docker import - "$IMAGE" >/dev/null
fi
echo "deb-test: $(basename "$DEB") in a clean $SUITE container"
docker run --rm -v "$(dirname "$DEB"):/deb:ro" -v "$ROOT/scripts/deb_test_inner.sh:/test.sh:ro" \
  -e DEB_NAME="$(basename "$DEB")" "$IMAGE" bash /test.sh
