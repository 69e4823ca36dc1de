#!/usr/bin/env bash
# Installs what the tests need when it is missing: OpenSM, the ibsim
# simulator with its umad2sim preload, infiniband-diags, and GNU time.
set -euo pipefail
need=()
for t in opensm ibsim ibnetdiscover dump_lfts; do
    command -v "$t" >/dev/null 2>&1 || need+=("$t")
done
[ -e /usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so ] || need+=(libumad2sim)
[ -x /usr/bin/time ] || need+=(time)
if [ ${#need[@]} -eq 0 ]; then
    echo "install-deps: all present"
    exit 0
fi
echo "install-deps: missing ${need[*]}; installing with apt-get"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq opensm ibsim-utils infiniband-diags libibumad3 time >/dev/null
echo "install-deps: done"
