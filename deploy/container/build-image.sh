#!/usr/bin/env bash
# Builds the ibfabric container image FROM scratch, and optionally an etcd
# image from Debian's etcd-server for the Compose example.
#
#   deploy/container/build-image.sh [--binary PATH] [--tag TAG] [--etcd-tag TAG]
#
# Without --binary the static release binary is built first
# (x86_64-unknown-linux-musl, no debug info). With --binary PATH that build
# goes in as it is, with the shared libraries `ldd` lists for it (the
# Compose test uses the workspace's debug build this way).
set -euo pipefail

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=""
tag="ibfabric:latest"
etcd_tag=""
while [ $# -gt 0 ]; do
    case "$1" in
        --binary) bin=${2:?--binary needs a path}; shift 2 ;;
        --tag) tag=${2:?--tag needs a name}; shift 2 ;;
        --etcd-tag) etcd_tag=${2:?--etcd-tag needs a name}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build-image: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

command -v docker >/dev/null || { echo "build-image: docker is not installed" >&2; exit 1; }

if [ -z "$bin" ]; then
    target=x86_64-unknown-linux-musl
    rustup target list --installed | grep -qx "$target" || rustup target add "$target"
    if ! command -v musl-gcc >/dev/null; then
        echo "build-image: installing musl-tools (musl-gcc) for the static build" >&2
        sudo_=""
        [ "$(id -u)" = 0 ] || sudo_=sudo
        $sudo_ apt-get install -y musl-tools >/dev/null || {
            echo "build-image: musl-gcc is missing and could not be installed (Debian: apt-get install musl-tools); or give --binary target/release/ibfabric" >&2
            exit 1
        }
    fi
    (cd "$root" && cargo build --release --target "$target" --bin ibfabric)
    bin="$root/target/$target/release/ibfabric"
fi
[ -x "$bin" ] || { echo "build-image: $bin is not an executable" >&2; exit 1; }

# The shared libraries a binary needs, by the paths ldd gives; none for a
# static one.
libs_of() {
    { ldd "$1" 2>/dev/null || true; } | awk '/=> \// {print $3} /^[[:space:]]*\// {print $1}'
}

# A build context: rootfs/ with $1 at $2 and its libraries, the Dockerfile.
# A subshell, so that its EXIT trap removes the context however it ends.
build() (
    src=$1 dest=$2 dockerfile=$3 image=$4
    ctx=$(mktemp -d)
    trap 'rm -rf "$ctx"' EXIT
    trap 'exit 130' INT TERM
    mkdir -p "$ctx/rootfs$(dirname "$dest")"
    cp -L "$src" "$ctx/rootfs$dest"
    for lib in $(libs_of "$src"); do
        mkdir -p "$ctx/rootfs$(dirname "$lib")"
        cp -L "$lib" "$ctx/rootfs$lib"
    done
    mkdir -p "$ctx/rootfs/etc/ibfabric" "$ctx/rootfs/var/lib/ibfabric" "$ctx/rootfs/tmp"
    # Names resolve through /etc/hosts and the engine's DNS (service names).
    echo "hosts: files dns" > "$ctx/rootfs/etc/nsswitch.conf"
    cp "$dockerfile" "$ctx/Dockerfile"
    docker build -q -t "$image" "$ctx" >/dev/null 2>"$ctx/build.log" || {
        cat "$ctx/build.log" >&2
        exit 1
    }
    echo "built $image ($(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1/1e6}'))"
)

build "$bin" /usr/bin/ibfabric "$here/Dockerfile" "$tag"
if [ -n "$etcd_tag" ]; then
    etcd=$(command -v etcd || true)
    [ -n "$etcd" ] || etcd=/usr/bin/etcd
    [ -x "$etcd" ] || { echo "build-image: no etcd binary (Debian: apt-get install etcd-server)" >&2; exit 1; }
    build "$etcd" /usr/bin/etcd "$here/etcd.Dockerfile" "$etcd_tag"
fi
