#!/usr/bin/env bash
# Verification on worker processes against one process, same tables, same
# run: `verify --json` locally with 1 and 2 threads, then with 1, 2 and 4
# workers (one thread each, mutual TLS on loopback) and a run where one of
# two workers is killed once it has the job; by default each part carries
# its LFT and path-SL columns (one row sends each worker the whole tables
# instead). Prints a markdown table.
#
#   scripts/bench_workers.sh TOPOLOGY TABLE_DIR [PARTS_PER_WORKER]
#
# Needs a release build (target/release/ibfabric). On a 2-core machine 4
# workers share 2 cores: that row shows overhead, not speed-up.
set -euo pipefail
B=${IBFABRIC:-$(cd "$(dirname "$0")/.." && pwd)/target/release/ibfabric}
T=${1:?topology}; D=${2:?table dir}; PARTS=${3:-4}
# shellcheck source=scripts/workers_lib.sh
source "$(dirname "$0")/workers_lib.sh"
secs() {
    python3 -c '
import json, sys
j = json.load(sys.stdin)
job = j.get("job")
cells = ["%.3f" % j["verify_seconds"], str(j["deadlock_free"]).lower(), str(j["cdg_edges"])]
if job:
    ws = job["workers"]
    lost = [w["address"] for w in ws if w["lost"]]
    cells += ["%.3f" % job["merge_seconds"], "%.1f MB + %.1f MB" % (job["bytes_per_load"] / 1e6, job["column_bytes"] / 1e6),
              "%.3f" % sum(w["load_seconds"] for w in ws), "%.3f" % sum(w["part_seconds"] for w in ws),
              "%d lost, %d local parts" % (len(lost), job["local_parts"])]
else:
    cells += ["", "", "", "", ""]
print(" | ".join(cells))'
}
echo "| run | verify s | deadlock free | CDG edges | merge s | loaded per worker + columns in all | load s (sum) | part s (sum) | lost |"
echo "|---|---|---|---|---|---|---|---|---|"
for th in 1 2; do
    echo "| one process, $th thread(s) | $(RAYON_NUM_THREADS=$th "$B" verify -t "$T" -d "$D" --json | secs) |"
done
port=7461
addrs=()
for n in 1 2 4; do
    while [ ${#addrs[@]} -lt $n ]; do start "w${#addrs[@]}" $port; addrs+=("http://127.0.0.1:$port"); port=$((port + 1)); done
    list=$(IFS=,; echo "${addrs[*]:0:$n}")
    echo "| $n worker(s) x 1 thread, $PARTS parts each | $(RUST_LOG=error "$B" verify -t "$T" -d "$D" --json --workers "$list" --parts-per-worker "$PARTS" "${client[@]}" | secs) |"
done
list=$(IFS=,; echo "${addrs[*]:0:2}")
echo "| 2 workers x 1 thread, whole tables to each, $PARTS parts each | $(RUST_LOG=error "$B" verify -t "$T" -d "$D" --json --workers "$list" --whole-tables --parts-per-worker "$PARTS" "${client[@]}" | secs) |"
# Kill w1 once it has loaded this job (its log counts loads).
before=$(grep -c "job loaded" "$W/w1.log" || true)
( while [ "$(grep -c "job loaded" "$W/w1.log" || true)" -le "$before" ]; do sleep 0.01; done; kill -9 "${pids[1]}" 2>/dev/null ) &
killer=$!
list=$(IFS=,; echo "${addrs[*]:0:2}")
echo "| 2 workers, one killed after loading, $PARTS parts each | $(RUST_LOG=error "$B" verify -t "$T" -d "$D" --json --workers "$list" --parts-per-worker "$PARTS" "${client[@]}" | secs) |"
wait "$killer" 2>/dev/null || true
