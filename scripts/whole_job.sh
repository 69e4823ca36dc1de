#!/usr/bin/env bash
# The whole job a user runs, per topology and engine: `ibfabric route
# --json` into an output directory, timed with /usr/bin/time. Prints one
# TSV row per (binary, case): route s, verify s, write s (from --json; "-"
# from releases without it), wall s,
# peak RSS MB, bytes written. Give one or more binaries to compare them
# in one run (a base commit's, built in its own target dir, and today's).
#
#   scripts/whole_job.sh [--cases "df6:dfdn df8:dfdn ..."] BIN [BIN...]
#
# Cases: dfP (Dragonfly p=P), sfQ (Slim Fly q=Q), then the engine.
set -euo pipefail
cases="df6:dfdn df8:dfdn df10:dfdn sf13:dfdn df8:nue df8:dfsssp"
if [ "${1:-}" = "--cases" ]; then cases=$2; shift 2; fi
[ $# -ge 1 ] || { echo "usage: $0 [--cases LIST] BIN [BIN...]" >&2; exit 2; }
work=${WHOLE_JOB_DIR:-$(mktemp -d)}
mkdir -p "$work"
gen=$1
printf 'binary\tcase\troute_s\tverify_s\twrite_s\twall_s\tpeak_rss_mb\tbytes\n'
for c in $cases; do
    topo=${c%%:*}
    engine=${c##*:}
    net=$work/$topo.net
    if [ ! -f "$net" ]; then
        case $topo in
        df*) "$gen" gen dragonfly --p "${topo#df}" -o "$net" >/dev/null ;;
        sf*) "$gen" gen slimfly --q "${topo#sf}" -o "$net" >/dev/null ;;
        *) echo "unknown case $c" >&2; exit 2 ;;
        esac
    fi
    for bin in "$@"; do
        out=$work/out
        rm -rf "$out"
        echo "$(date +%T) $bin $c" >&2
        /usr/bin/time -f "%e %M" -o "$work/time" \
            "$bin" route --topology "$net" --engine "$engine" --out "$out" --json >"$work/r.json" 2>"$work/err" ||
            { echo "failed: $bin $c" >&2; tail -3 "$work/err" >&2; continue; }
        read -r wall rss <"$work/time"
        bytes=$(du -sb "$out" | cut -f1)
        python3 - "$work/r.json" "$bin" "$c" "$wall" "$rss" "$bytes" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
_, _, b, c, wall, rss, nbytes = sys.argv
# Releases before write_seconds: "-".
w = d.get("write_seconds")
ws = "-" if w is None else f"{w:.2f}"
print(f"{b}\t{c}\t{d['route_seconds']:.2f}\t{d['verify_seconds']:.2f}\t{ws}\t{float(wall):.2f}\t{int(rss)//1024}\t{int(nbytes)}")
PY
        rm -rf "$out"
    done
done
