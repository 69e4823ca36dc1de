# Sourced by the worker benchmarks (needs $B, the ibfabric binary): a
# temporary directory $W removed on exit with every worker started, a CA,
# `issue NAME` (a worker certificate for localhost), the client arguments
# `client` (the `ops` identity), and `start NAME PORT` (a worker with one
# rayon thread, mutual TLS on loopback, log in $W/NAME.log; returns once it
# listens; its PID is the last of `pids`).
W=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
"$B" certs --out "$W" ca >/dev/null
issue() { "$B" certs --out "$W" issue --ca "$W/ca.pem" --ca-key "$W/ca-key.pem" worker --name "$1" --dns localhost --ip 127.0.0.1 >/dev/null; }
issue ops
# shellcheck disable=SC2034 # used by the scripts that source this file
client=(--ca "$W/ca.pem" --cert "$W/worker-ops.pem" --key "$W/worker-ops-key.pem")
start() { # name port
    issue "$1"
    printf 'name = "%s"\nlisten = "127.0.0.1:%s"\n[tls]\nca = "ca.pem"\ncert = "worker-%s.pem"\nkey = "worker-%s-key.pem"\n' "$1" "$2" "$1" "$1" > "$W/$1.toml"
    RAYON_NUM_THREADS=1 RUST_LOG=info "$B" worker --config "$W/$1.toml" 2> "$W/$1.log" &
    pids+=($!)
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$2") 2>/dev/null && return; sleep 0.1; done
    echo "worker $1 did not listen" >&2; exit 1
}
