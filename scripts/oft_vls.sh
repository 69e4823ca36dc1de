#!/usr/bin/env bash
# VLs that DF-DN, DF-SSSP, LASH and Nue need (and use: DF-SSSP and Nue
# spread their layers over every VL offered, for balance) on two-level
# orthogonal fat trees (DF-DN paper, Fig. 11), with route seconds, from the
# shipped binary.
# Usage: scripts/oft_vls.sh [BIN] [K...]   (default K: 3 4 6 8 12 14 18)
set -euo pipefail
BIN=${1:-target/release/ibfabric}
shift || true
KS=${*:-3 4 6 8 12 14 18}
DIR=${OFT_DIR:-$(mktemp -d)}
mkdir -p "$DIR"
files=()
for k in $KS; do
  "$BIN" gen oft --k "$k" -o "$DIR/oft-k$k.net" >/dev/null
  files+=("$DIR/oft-k$k.net")
done
exec "$(dirname "$0")/vls_table.sh" "$BIN" "${files[@]}"
