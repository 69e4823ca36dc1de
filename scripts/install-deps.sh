#!/usr/bin/env bash
# Installs what the build and the tests need when it is missing: protoc
# (the gRPC contracts are compiled at build time), OpenSM, the ibsim
# simulator with its umad2sim preload, infiniband-diags, GNU time, and etcd
# (the controller's store tests start a real one), what the OpenSM plugin
# builds with (libopensm-dev, libibmad-dev, libibumad-dev), Prometheus's
# promtool (the alert rules' tests), dpkg-dev and debootstrap (the Debian
# package and its test), chromium, NSS's tools, curl and openssl (the
# status page in a real browser, over mutual TLS), and
# docker-compose where Docker is installed.
# `--build-only` installs just what building needs.
set -euo pipefail
need=()
pkgs=()
command -v protoc >/dev/null 2>&1 || { need+=(protoc); pkgs+=(protobuf-compiler); }
if [ "${1:-}" != "--build-only" ]; then
    for t in opensm ibsim ibnetdiscover dump_lfts; do
        command -v "$t" >/dev/null 2>&1 || need+=("$t")
    done
    [ -e /usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so ] || need+=(libumad2sim)
    [ -x /usr/bin/time ] || need+=(time)
    command -v etcd >/dev/null 2>&1 || { need+=(etcd); pkgs+=(etcd-server); }
    # promtool checks and unit-tests the alert rules (deploy/prometheus/).
    command -v promtool >/dev/null 2>&1 || { need+=(promtool); pkgs+=(prometheus); }
    # The Compose example's test, where a Docker engine is installed.
    if command -v docker >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1 \
        && ! docker compose version >/dev/null 2>&1; then
        need+=(docker-compose); pkgs+=(docker-compose)
    fi
    # The OpenSM plugin (opensm-plugin/) and its PathRecord reader.
    for h in opensm/osm_event_plugin.h infiniband/mad.h infiniband/umad.h; do
        [ -e "/usr/include/infiniband/$h" ] || [ -e "/usr/include/$h" ] || need+=("$h")
    done
    # The Debian package (scripts/build-deb.sh) and its test on a clean
    # Debian (scripts/deb_test.sh).
    command -v dpkg-shlibdeps >/dev/null 2>&1 || { need+=(dpkg-shlibdeps); pkgs+=(dpkg-dev); }
    command -v debootstrap >/dev/null 2>&1 || { need+=(debootstrap); pkgs+=(debootstrap); }
    # The controller's status page is checked in a real browser, over
    # mutual TLS with an operator's certificate (NSS's certutil and
    # pk12util put it where chromium finds it; curl and openssl too).
    command -v chromium >/dev/null 2>&1 || { need+=(chromium); pkgs+=(chromium); }
    command -v pk12util >/dev/null 2>&1 || { need+=(pk12util); pkgs+=(libnss3-tools); }
    command -v openssl >/dev/null 2>&1 || { need+=(openssl); pkgs+=(openssl); }
    command -v curl >/dev/null 2>&1 || { need+=(curl); pkgs+=(curl); }
    command -v make >/dev/null 2>&1 || need+=(make)
    command -v cc >/dev/null 2>&1 || need+=(cc)
    [ ${#need[@]} -eq ${#pkgs[@]} ] || pkgs+=(opensm ibsim-utils infiniband-diags libibumad3 time \
        libopensm-dev libibmad-dev libibumad-dev make gcc)
fi
if [ ${#need[@]} -eq 0 ]; then
    echo "install-deps: all present"
    exit 0
fi
echo "install-deps: missing ${need[*]}; installing with apt-get"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${pkgs[@]}" >/dev/null
echo "install-deps: done"
