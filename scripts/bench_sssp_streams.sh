#!/usr/bin/env bash
# SSSP's balance in streams against classic SSSP, same files, same run:
# for each topology, `route -e dfsssp` with --sssp-streams 0 (classic: the
# sequential greedy, best of its candidate orders), 1 (the sequential
# greedy in GUID order alone), and S streams exchanging loads in rounds.
# Prints the busiest link (HCA pairs per directed switch link), its ratio
# to classic, the VLs DF-SSSP needs, and the routing seconds (2 threads).
#
#   scripts/bench_sssp_streams.sh [STREAMS...]     (default: 4 16 64)
#   TOPOLOGIES="dragonfly:--p:4 ..." to choose the fabrics.
#
# Needs a release build (target/release/ibfabric).
set -euo pipefail
B=${IBFABRIC:-$(cd "$(dirname "$0")/.." && pwd)/target/release/ibfabric}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
S=("$@"); [ ${#S[@]} -gt 0 ] || S=(4 16 64)
T=${TOPOLOGIES:-"dragonfly:--p:4 dragonfly:--p:6 slimfly:--q:7 slimfly:--q:11 kary:--k:10:--n:3 torus:--dims:4x4x4 random:--switches:128:--degree:8:--hosts:4"}
echo "| topology | streams | busiest link | vs classic | DF-SSSP VLs needed | route s |"
echo "|---|---|---|---|---|---|"
for t in $T; do
    read -r -a g <<< "${t//:/ }"
    "$B" gen "${g[@]}" -o "$W/net" >/dev/null 2>&1
    base=
    for s in 0 1 "${S[@]}"; do
        name=$s; [ "$s" = 0 ] && name="classic"; [ "$s" = 1 ] && name="1 (GUID order)"
        if ! "$B" route -t "$W/net" -e dfsssp --dry-run --json --sssp-streams "$s" > "$W/j" 2> "$W/err"; then
            echo "| ${g[*]} | $name | failed: $(grep -o 'failed: .*' "$W/err" | head -1 | cut -c9-) | | | |"
            continue
        fi
        read -r max vls secs < <(python3 -c '
import json,sys; j=json.load(open(sys.argv[1]))
print(j["link_load"]["max"], j["vls_needed"], "%.3f" % j["route_seconds"])' "$W/j")
        [ -n "$base" ] || base=$max
        ratio=$(python3 -c "print('%+.1f%%' % (100.0 * $max / $base - 100))")
        echo "| ${g[*]} | $name | $max | $ratio | $vls | $secs |"
    done
done
