#!/usr/bin/env bash
# Side by side on ibsim, same topology files, same machine and run:
#   ibfabric: `route` (release) computes and verifies the tables, then
#             OpenSM with the ibfabric plugin applies them;
#   OpenSM:   its own engine computes and applies.
# Prints one markdown row per (topology, engine pair). Needs ../shared/opensm
# (run_engine.sh), the plugin built (make -C opensm-plugin) and a release
# binary (cargo build --release).
#
#   scripts/bench_plugin.sh [OUTDIR]
#   NETS="dragonfly:3 dragonfly:4" PAIRS="dfdn:dfsssp lash:lash" scripts/bench_plugin.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
B=$ROOT/target/release/ibfabric
RUN=$(readlink -f ../shared/opensm/run_engine.sh)
PLUGIN=$ROOT/opensm-plugin/build
OUT=${1:-$(mktemp -d)}
NETS=${NETS:-"dragonfly:3 dragonfly:4 slimfly:7 torus:4x4x4"}
PAIRS=${PAIRS:-"dfdn:dfsssp dfsssp:dfsssp lash:lash nue:nue"}
[ -x "$B" ] || { echo "no $B: cargo build --release --bin ibfabric" >&2; exit 1; }
[ -e "$PLUGIN/libibfabric.so" ] || { echo "no plugin: make -C opensm-plugin" >&2; exit 1; }
mkdir -p "$OUT"
key() { sed -n "s/^$2=//p" "$1/result.txt"; }
echo "| topology | ours: engine | route+verify s | plugin apply s | SUBNET UP s | OpenSM: engine | route s | SUBNET UP s | VLs needed ours / OpenSM |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in $NETS; do
    fam=${n%%:*}; arg=${n#*:}
    case $fam in
        dragonfly) g=(dragonfly --p "$arg") ;;
        slimfly) g=(slimfly --q "$arg") ;;
        torus) g=(torus --dims "$arg" --hosts 1) ;;
        *) echo "unknown family $fam" >&2; exit 1 ;;
    esac
    net=$OUT/$fam-$arg.net
    "$B" gen "${g[@]}" -o "$net" >/dev/null
    for pair in $PAIRS; do
        ours=${pair%%:*}; theirs=${pair#*:}
        tables=$OUT/$fam-$arg-$ours
        js=$("$B" route -t "$net" -e "$ours" --require-deadlock-free -o "$tables" --json 2>/dev/null) || {
            echo "| $fam $arg | $ours | refused | | | | | | |"; continue; }
        rs=$(python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["route_seconds"]+j["verify_seconds"],3), j.get("vls_needed") or j["vls"])' <<<"$js")
        o1=$OUT/run-$fam-$arg-$ours-plugin
        LD_LIBRARY_PATH=$PLUGIN QOS=1 LOGFLAGS=0x03 TIMEOUT=900 \
            EXTRA_CONF="event_plugin_name ibfabric\nevent_plugin_options ibfabric_dir=$tables ibfabric_poll_ms=0" \
            bash "$RUN" "$net" ibfabric "$o1" >/dev/null 2>&1 || true
        o2=$OUT/run-$fam-$arg-$theirs-opensm
        LOGFLAGS=0x03 TIMEOUT=900 bash "$RUN" "$net" "$theirs" "$o2" >/dev/null 2>&1 || true
        echo "| $fam $arg | $ours | ${rs% *} | $(key "$o1" t_route_s) | $(key "$o1" t_subnet_up_s) ($(key "$o1" status)) | $theirs | $(key "$o2" t_route_s) | $(key "$o2" t_subnet_up_s) ($(key "$o2" status)) | ${rs#* } / $(key "$o2" vls_needed) |"
    done
done
