#!/usr/bin/env bash
# VLs each engine needs and uses on topology files, with route seconds, from
# the shipped binary: one Markdown row per file and engine.
# Usage: scripts/vls_table.sh BIN FILE...
# ENGINES (default "dfdn dfsssp lash nue") picks the engines; an engine gets
# TIMEOUT seconds (default 900), and a failure shows its first error line.
set -euo pipefail
BIN=${1:?usage: vls_table.sh BIN FILE...}
shift
ENGINES=${ENGINES:-dfdn dfsssp lash nue}
TIMEOUT=${TIMEOUT:-900}
err=$(mktemp)
trap 'rm -f "$err"' EXIT
echo "| fabric | switches | HCAs | engine | VLs needed | VLs used | SLs | longest route (links) | deadlock free | route s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for file in "$@"; do
  name=$(basename "$file")
  name=${name%.*}
  for e in $ENGINES; do
    if out=$(timeout "$TIMEOUT" "$BIN" route -t "$file" -e "$e" --dry-run --json 2>"$err") &&
      python3 -c '
import json, sys
d = json.loads(sys.argv[1])
cols = [sys.argv[2]] + [d[c] for c in ("switches", "hcas", "engine", "vls_needed", "vls", "sls", "max_hops", "deadlock_free")]
print("| " + " | ".join(str(c) for c in cols) + " | %.3f |" % d["route_seconds"])
' "$out" "$name"; then
      continue
    fi
    # A '|' in the message would end the table cell.
    why=$(grep -m1 -i "error" "$err" | cut -c1-140 | tr '|' '/' || true)
    echo "| $name | | | $e | refused or over ${TIMEOUT} s: ${why:-no message} | | | | | |"
  done
done
