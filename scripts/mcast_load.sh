#!/usr/bin/env bash
# Multicast under load on the packet model (`ibfabric load`): per fabric
# and engine, IPoIB's broadcast group with reserved trees (the set `route
# --mcast-groups` writes) against min-hop trees on SL 0 (OpenSM's default
# kind) over the same engine's routes without the reservation. Prints a
# Markdown table: throughput and whether a deadlock stopped the run.
# Usage: scripts/mcast_load.sh BIN [SHARE] [SAMPLES]   (default 0.3, 4)
set -euo pipefail
BIN=${1:?usage: mcast_load.sh BIN [SHARE] [SAMPLES]}
SHARE=${2:-0.3}
SAMPLES=${3:-4}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
echo "0xC000 sl=0 all" > "$DIR/all.txt"
"$BIN" gen dragonfly --p 3 -o "$DIR/df3.net" >/dev/null
"$BIN" gen torus --dims 6x6 -o "$DIR/t6.net" >/dev/null
"$BIN" gen slimfly --q 5 -o "$DIR/sf5.net" >/dev/null
"$BIN" gen oft --k 4 -o "$DIR/oft4.net" >/dev/null
"$BIN" gen random --switches 64 --degree 6 --seed 1 -o "$DIR/rr64.net" >/dev/null
# One cell: throughput, then "deadlock N ch" or "-" ("failed" when the
# command failed for another reason).
cell() {
  local out rc
  set +e
  out=$("$BIN" load "$@" --mcast-share "$SHARE" --samples "$SAMPLES" --json 2>/dev/null)
  rc=$?
  set -e
  if [ $rc -ne 0 ] && [ $rc -ne 3 ]; then echo "failed | failed"; return; fi
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); d=j["deadlock"]
print("%.3f | %s" % (j["throughput"], "deadlock, %d ch" % d["channels"] if d else "-"))' "$out"
}
echo "| fabric | engine | reserved: throughput | reserved: deadlock | min-hop SL 0: throughput | min-hop SL 0: deadlock |"
echo "|---|---|---|---|---|---|"
for t in df3 t6 sf5 oft4 rr64; do
  for e in dfdn dfsssp lash nue updn; do
    net="$DIR/$t.net"
    if ! "$BIN" route -t "$net" -e "$e" --mcast-groups "$DIR/all.txt" -o "$DIR/r" >/dev/null 2>&1 ||
      ! "$BIN" route -t "$net" -e "$e" -o "$DIR/p" >/dev/null 2>&1; then
      echo "| $t | $e | route failed | | | |"
      continue
    fi
    echo "| $t | $e | $(cell -t "$net" -d "$DIR/r") | $(cell -t "$net" -d "$DIR/p" --mcast-groups "$DIR/all.txt" --mcast-trees min-hop) |"
  done
done
