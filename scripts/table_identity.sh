#!/usr/bin/env bash
# Routes one small fabric of every generator family with every engine and
# prints a SHA-256 per written table file (and the exit status of each
# run), so that a refactoring can be checked to leave every table byte for
# byte as it was: run it with the binaries before and after, then `diff`
# the two listings.
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
