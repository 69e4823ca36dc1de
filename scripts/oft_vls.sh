#!/usr/bin/env bash
# VLs that DF-DN, DF-SSSP, LASH and Nue need (and use: DF-SSSP and Nue
# spread their layers over every VL offered, for balance) on two-level
# orthogonal fat trees (DF-DN paper, Fig. 11), with route seconds, from the
# shipped binary.
# Usage: scripts/oft_vls.sh BIN [K...]   (default K: 3 4 6 8 12 14 18)
# OFT_DIR keeps the generated files there; without it they are removed.
set -euo pipefail
BIN=${1:?usage: oft_vls.sh BIN [K...]}
shift
KS=${*:-3 4 6 8 12 14 18}
if [ -n "${OFT_DIR:-}" ]; then
  DIR=$OFT_DIR
  mkdir -p "$DIR"
else
  DIR=$(mktemp -d)
  trap 'rm -rf "$DIR"' EXIT
fi
files=()
for k in $KS; do
  "$BIN" gen oft --k "$k" -o "$DIR/oft-k$k.net" >/dev/null
  files+=("$DIR/oft-k$k.net")
done
"$(dirname "$0")/vls_table.sh" "$BIN" "${files[@]}"
