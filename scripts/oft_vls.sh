#!/usr/bin/env bash
# VLs that DF-DN, DF-SSSP, LASH and Nue need (and use: DF-SSSP and Nue
# spread their layers over every VL offered, for balance) on two-level orthogonal fat
# trees (DF-DN paper, Fig. 11), with route seconds, from the shipped binary.
# Usage: scripts/oft_vls.sh [BIN] [K...]   (default K: 3 4 6 8 12 14 18)
# Prints one Markdown row per k and engine; LASH gets TIMEOUT seconds
# (default 900) before its cell says so.
set -euo pipefail
BIN=${1:-target/release/ibfabric}
shift || true
KS=${*:-3 4 6 8 12 14 18}
TIMEOUT=${TIMEOUT:-900}
DIR=${OFT_DIR:-$(mktemp -d)}
echo "| k | switches | HCAs | engine | VLs needed | VLs used | SLs | longest route (links) | deadlock free | route s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for k in $KS; do
  "$BIN" gen oft --k "$k" -o "$DIR/oft$k.net" >/dev/null 2>&1
  for e in dfdn dfsssp lash nue; do
    if out=$(timeout "$TIMEOUT" "$BIN" route -t "$DIR/oft$k.net" -e "$e" --dry-run --json 2>/dev/null); then
      python3 -c '
import json, sys
d = json.loads(sys.argv[1])
cols = [sys.argv[2]] + [d[c] for c in ("switches", "hcas", "engine", "vls_needed", "vls", "sls", "max_hops", "deadlock_free")]
print("| " + " | ".join(str(c) for c in cols) + " | %.3f |" % d["route_seconds"])
' "$out" "$k"
    else
      echo "| $k | - | - | $e | failed or over ${TIMEOUT} s | | | | | |"
    fi
  done
done
