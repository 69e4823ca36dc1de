#!/usr/bin/env bash
# Routing and verification on worker processes against one process, same
# topology, same run: `route --engine $ENGINE` (default dfdn) locally with 1
# and 2 threads, then with 1, 2 and 4 workers (one thread each, mutual TLS
# on loopback; the coordinator keeps its 2 threads for the SL choice and
# the merge), then 2 workers of which one is killed once it has loaded its
# first job. Every run's tables are compared byte for byte with the one-process
# tables. Prints a markdown table. dfdn, minhop and nue route on the
# workers (nue by virtual layer, exchanging channel loads every round), and
# sssp and dfsssp with EXTRA="--sssp-streams N" (by stream, the same way);
# other engines route in the coordinator (only the verification is cut).
# PARTS_PER_WORKER cuts DF-DN's, MinHop's and the verification's parts; the
# engines routed in rounds hold one session per worker whatever it says.
#
#   [ENGINE=nue|minhop|sssp|dfsssp] [EXTRA="--allow-cycles --sssp-streams 16"] scripts/bench_route_workers.sh TOPOLOGY [PARTS_PER_WORKER]
#
# EXTRA: more `route` arguments (MinHop on a Dragonfly needs --allow-cycles
# to write its tables; `route` then exits 1, which is expected here).
#
# Needs a release build (target/release/ibfabric). On a 2-core machine the
# workers share the 2 cores with each other and with the coordinator.
set -euo pipefail
B=${IBFABRIC:-$(cd "$(dirname "$0")/.." && pwd)/target/release/ibfabric}
T=${1:?topology}; PARTS=${2:-4}; E=${ENGINE:-dfdn}
read -r -a X <<< "${EXTRA:-}"
# A run counts when it printed its JSON (exit 1 = cyclic tables written
# under --allow-cycles).
ran() { [ -s "$W/j" ]; }
# shellcheck source=scripts/workers_lib.sh
source "$(dirname "$0")/workers_lib.sh"
same() { # dir: the one-process tables, byte for byte (the generation stamp
    # aside); then removed, as the tables of a large fabric fill a disk fast
    local verdict=identical
    for f in opensm-lfts.dump opensm-sl2vl.dump path-sl.txt; do
        # Tables an engine does not set are absent on both sides.
        [ -e "$W/one/$f" ] || [ -e "$1/$f" ] || continue
        cmp -s "$W/one/$f" "$1/$f" || { verdict="differ ($f)"; break; }
    done
    [ "$1" = "$W/one" ] || rm -rf "$1"
    echo "$verdict"
}
cells() { # out dir
    python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
jobs = {x["kind"]: x for x in j.get("jobs", [])}
r, v = jobs.get("route"), jobs.get("verify")
cells = ["%.2f" % j["route_seconds"], "%.2f" % j["verify_seconds"], str(j["vls"])]
ws = r["workers"] if r else []
lost = sum(1 for w in ws if w["lost"])
if r:
    cells += ["%.2f" % sum(w["part_seconds"] for w in ws), "%.2f" % r["merge_seconds"], "%.1f" % (r["reply_bytes"] / 1e6)]
else:
    cells += ["", "", ""]
if v:
    vlost = sum(1 for w in v["workers"] if w["lost"])
    cells += ["%.2f" % sum(w["part_seconds"] for w in v["workers"]),
              "route: %s; verify: %d lost, %d local parts" % ("%d lost, %d local parts" % (lost, r["local_parts"]) if r else "here", vlost, v["local_parts"])]
    for w in ws + v["workers"]:
        if w["lost"]:
            print("lost %s: %s" % (w["address"], w["lost"]), file=sys.stderr)
else:
    cells += ["", ""]
print(" | ".join(cells))' "$1"
}
echo "| run | route s | verify s | VLs | route parts s (sum) | merge + SL choice s | route replies MB | verify parts s (sum) | lost | tables |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for th in 1 2; do
    d=$W/one; [ "$th" = 1 ] || d=$W/one2
    RAYON_NUM_THREADS=$th "$B" route -t "$T" -e "$E" -o "$d" --json "${X[@]}" > "$W/j" 2>/dev/null || ran
    echo "| one process, $th thread(s) | $(cells "$W/j") | $(same "$d") |"
done
port=7561
addrs=()
for n in 1 2 4; do
    while [ ${#addrs[@]} -lt $n ]; do start "w${#addrs[@]}" $port; addrs+=("http://127.0.0.1:$port"); port=$((port + 1)); done
    list=$(IFS=,; echo "${addrs[*]:0:$n}")
    RUST_LOG=error "$B" route -t "$T" -e "$E" -o "$W/w$n" --json "${X[@]}" --workers "$list" --parts-per-worker "$PARTS" "${client[@]}" > "$W/j" || ran
    echo "| $n worker(s) x 1 thread, $PARTS parts each | $(cells "$W/j") | $(same "$W/w$n") |"
done
# One of two workers dies once it holds its first job (a fresh worker,
# so the job is not already loaded there).
start victim $port; victim=${pids[-1]}
list="${addrs[0]},http://127.0.0.1:$port"
RUST_LOG=error "$B" route -t "$T" -e "$E" -o "$W/k" --json "${X[@]}" --workers "$list" --parts-per-worker "$PARTS" "${client[@]}" > "$W/j" &
job=$!
for _ in $(seq 600); do grep -q "job loaded" "$W/victim.log" && break; sleep 0.05; done
kill -9 "$victim"
wait "$job" || ran
echo "| 2 workers, one killed once it loaded its first job | $(cells "$W/j") | $(same "$W/k") |"
