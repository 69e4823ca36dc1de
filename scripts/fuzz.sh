#!/usr/bin/env bash
# Runs the libFuzzer targets in fuzz/ one after the other.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 60 s, all targets)
#   scripts/fuzz.sh --smoke [TARGET...]                (5 s each: does it all still run)
#
# Needs the nightly toolchain (sanitizer flags) and cargo-fuzz, which is
# installed when missing. Each target reads its seeds from fuzz/seeds/<t>
# and grows fuzz/corpus/<t>; a crash is saved under fuzz/artifacts/<t>/ and
# can be replayed with `cargo +nightly fuzz run <t> <file>`. Not part of CI:
# a useful budget takes minutes per target.
set -uo pipefail

cd "$(dirname "$0")/.."

secs=60
if [[ "${1:-}" == "--smoke" ]]; then
    secs=5
    shift
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
    secs=$1
    shift
fi

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz.sh: the nightly toolchain is missing: rustup toolchain install nightly" >&2
    exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz || exit 2
fi

# Shared machines: one compile job unless the caller says otherwise.
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"

if [[ $# -gt 0 ]]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

echo "building ${#targets[@]} fuzz targets"
cargo +nightly fuzz build || exit 2

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=0
results=()
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/seeds/$t"
    log="$logs/$t.log"
    echo "== $t: ${secs}s"
    start=$(date +%s)
    # A malloc limit well below the RSS limit reports a huge allocation
    # from a small input as a crash instead of letting it pass.
    # TMPDIR: what a target writes there (the manifest round trip) goes
    # when the script ends.
    mkdir -p "$logs/tmp"
    TMPDIR="$logs/tmp" cargo +nightly fuzz run "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
        -print_final_stats=1 >"$log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    runs=$(grep -oE '^Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' | tail -1)
    if [[ -z "$runs" ]]; then
        runs=$(grep -oE '^#[0-9]+' "$log" | tr -d '#' | tail -1)
    fi
    corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
    if [[ $rc -eq 0 ]]; then
        status=ok
    else
        status=CRASH
        failed=1
        echo "-- $t failed (exit $rc):"
        grep -E "panicked|ERROR|SUMMARY|Test unit written|out-of-memory|deadly signal" "$log" | head -20
    fi
    results+=("$(printf '%-15s %12s runs %6ss  corpus %6s  %s' "$t" "${runs:-?}" "$took" "$corpus" "$status")")
done

echo
echo "target               executions    time  corpus      result"
printf '%s\n' "${results[@]}"
exit $failed
