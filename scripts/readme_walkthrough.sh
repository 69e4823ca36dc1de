#!/usr/bin/env bash
# Runs the README's walkthrough (the first code block under "## Using it")
# as written, line by line, in a scratch directory, with the binary given:
#
#   scripts/readme_walkthrough.sh target/release/ibfabric [DIR]
#
# The block's `cargo build --release` and `B=...` lines are what make the
# binary; the binary given stands for them. Every other line runs as
# written: a non-zero exit fails the walkthrough, except where the line's
# own comment says the exit (`# ... (exit 3: why)`). Prints each line and
# its seconds.
set -euo pipefail
bin=$(realpath "${1:?usage: $0 BINARY [DIR]}")
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${2:-}" ]; then
    dir=$2
else
    # A scratch directory of our own goes when the walkthrough passed.
    dir=$(mktemp -d)
    trap 'if [ $? -eq 0 ]; then rm -rf "$dir"; fi' EXIT
fi
mkdir -p "$dir"
cd "$dir"
block=$(awk '
  /^## Using it/ { inside = 1; next }
  inside && /^```/ { if (open) exit; open = 1; next }
  inside && open { print }
' "$here/README.md")
[ -n "$block" ] || { echo "readme_walkthrough: no block under '## Using it' in README.md" >&2; exit 1; }
B=$bin
export B
n=0
while IFS= read -r line; do
  case "$line" in
    ""|"#"*) continue ;;
    "cargo build --release"*|"B="*) continue ;;
  esac
  n=$((n + 1))
  want=0
  if [[ "$line" =~ \(exit\ ([0-9]+): ]]; then want=${BASH_REMATCH[1]}; fi
  start=$(date +%s%N)
  set +e
  eval "$line" > "step-$n.out" 2> "step-$n.err"
  rc=$?
  set -e
  ms=$((($(date +%s%N) - start) / 1000000))
  printf 'readme_walkthrough: %4d.%01d s  exit %d  %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$rc" "$line"
  if [ "$rc" -ne "$want" ]; then
    echo "readme_walkthrough: step $n exited $rc, the README says $want: $line" >&2
    tail -5 "step-$n.err" >&2
    exit 1
  fi
done <<< "$block"
echo "readme_walkthrough: $n steps as written, in $dir"
