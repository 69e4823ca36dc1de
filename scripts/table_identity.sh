#!/usr/bin/env bash
# Routes one small fabric of every generator family with every engine and
# prints a SHA-256 per written table file (and the exit status of each
# run), so that a refactoring can be checked to leave every table byte for
# byte as it was: run it with the binaries before and after, then `diff`
# the two listings. Then reroutes (DQR) of a link fault and a switch fault
# on the sets that engines with a channel list wrote, and `verify --dir`
# of every set, whose JSON reports are hashed too (less the seconds).
#
#   scripts/table_identity.sh BIN OUTDIR > listing.txt
set -euo pipefail
bin=${1:?usage: table_identity.sh BIN OUTDIR}
out=${2:?usage: table_identity.sh BIN OUTDIR}
mkdir -p "$out"
declare -A topo=(
    [kary]="kary --k 4 --n 3"
    [fattree]="fattree --leaves 8 --spines 4 --hosts 4"
    [mesh]="mesh --dims 4x4 --hosts 2"
    [torus]="torus --dims 4x5 --hosts 1"
    [dragonfly]="dragonfly --p 3"
    [slimfly]="slimfly --q 5 --hosts 2"
    [hyperx]="hyperx --dims 3x3 --hosts 2"
    [random]="random --switches 16 --degree 4 --hosts 2 --seed 3"
)
engines="auto minhop sssp dfd2 dfdn dfsssp lash updn dnup ftree nue dor ecube"
for t in $(printf '%s\n' "${!topo[@]}" | sort); do
    # shellcheck disable=SC2086
    "$bin" gen ${topo[$t]} -o "$out/$t.net" >/dev/null
    for e in $engines; do
        d="$out/$t-$e"
        rm -rf "$d"
        args=(route --topology "$out/$t.net" --out "$d" --allow-cycles)
        [ "$e" = auto ] || args+=(--engine "$e")
        rc=0
        "$bin" "${args[@]}" >/dev/null 2>&1 || rc=$?
        echo "$t $e exit=$rc"
        if [ -d "$d" ]; then
            # The manifest's generation is a clock reading; the rest of it
            # (engine, sizes, digests) must not change.
            (cd "$d" && find . -type f ! -name '*.tmp*' ! -name ibfabric-tables.txt | sort | xargs -r sha256sum)
            [ ! -f "$d/ibfabric-tables.txt" ] || grep -v '^generation ' "$d/ibfabric-tables.txt" | sha256sum | sed 's|-$|./ibfabric-tables.txt (less its generation)|'
        fi
    done
done
# Reroutes: the last switch-to-switch port of the second switch, and the
# fifth switch whole.
for t in dragonfly torus mesh slimfly fattree random; do
    net="$out/$t.net"
    sw2=$(grep '^switchguid=' "$net" | sed -n 2p | cut -d= -f2)
    sw5=$(grep '^switchguid=' "$net" | sed -n 5p | cut -d= -f2)
    port=$(awk -v g="switchguid=$sw2" '$0==g{f=1;next} f&&/^$/{exit} f&&/^\[/{p=$1} END{print p}' "$net" | tr -d '[]')
    for e in auto dfdn nue lash dfsssp updn ftree ecube dor; do
        d="$out/$t-$e"
        [ -f "$d/ibfabric-tables.txt" ] || continue
        for fault in "$sw2:$port" "$sw5"; do
            r="$out/$t-$e-reroute-${fault//:/-}"
            rm -rf "$r"
            rc=0
            "$bin" reroute -t "$net" -d "$d" --fail "$fault" -o "$r" >/dev/null 2>&1 || rc=$?
            echo "$t $e reroute $fault exit=$rc"
            [ -d "$r" ] && (cd "$r" && find . -type f ! -name '*.tmp*' ! -name ibfabric-tables.txt | sort | xargs -r sha256sum)
        done
        rc=0
        "$bin" verify -t "$net" -d "$d" --json 2>/dev/null | grep -v '_seconds' | sha256sum | sed "s|-\$|$t $e verify|" || rc=$?
    done
done
# Multi-subnet fabrics: every subnet's tables, the mappings, prefix routes
# and router egress tables, and the whole-fabric check's report (--json,
# less the seconds), for each inter-subnet algorithm and transit rule.
for join in all chain ring; do
    m="$out/multi-$join"
    rm -rf "$m"
    "$bin" gen multi --subnets 4 --routers 4 --join "$join" -o "$m" >/dev/null 2>&1
    for alg in prefix issr isfr; do
        for transit in updown shortest; do
            o="$out/multi-$join-$alg-$transit"
            rm -rf "$o"
            rc=0
            "$bin" route-multi -m "$m/manifest.toml" -a "$alg" --transit "$transit" -o "$o" --json --exhaustive 2>/dev/null \
                | grep -v '_seconds' | sed "s|$out|OUT|g" | sha256sum \
                | sed "s|-\$|multi $join $alg $transit report|" || rc=$?
            [ -d "$o" ] && (cd "$o" && find . -type f ! -name '*.tmp*' ! -name ibfabric-tables.txt | sort | xargs -r sha256sum)
        done
    done
done
