#!/usr/bin/env bash
# Makes the state directory compose.yaml mounts: a CA and one certificate
# per service (each naming its service's host name), every service's config
# at its default path (/etc/ibfabric/<role>.toml inside its container),
# and the two subnets' topology files.
#
#   deploy/compose/prepare.sh [--ibfabric BIN] [STATE_DIR]   (default: ./state)
#
# The fabric: two subnets of two leaves, two spines and four HCAs, joined by
# two routers (`ibfabric gen multi`). The `tester` directory holds a worker
# certificate for `ibfabric status` (and `route --workers`) against the
# running stack.
set -euo pipefail

B=ibfabric
while [ $# -gt 0 ]; do
    case "$1" in
        --ibfabric) B=${2:?--ibfabric needs a path}; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "prepare: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) break ;;
    esac
done
S=${1:-./state}
if ! command -v "$B" >/dev/null 2>&1; then
    echo "prepare: no '$B' to run: put ibfabric on PATH or give --ibfabric target/release/ibfabric" >&2
    exit 1
fi
if [ -e "$S/pki/ca-key.pem" ]; then
    echo "prepare: $S holds a CA key ($S/pki/ca-key.pem) from an earlier run; remove $S first" >&2
    exit 1
elif [ -e "$S" ]; then
    echo "prepare: $S exists (without a CA key); remove it first" >&2
    exit 1
fi
# A run that fails part way leaves no half-made state directory behind.
trap 'rc=$?; [ $rc -eq 0 ] || { rm -rf "$S"; echo "prepare: failed; $S removed" >&2; }' EXIT
mkdir -p "$S/pki" "$S/fabric"
"$B" certs --out "$S/pki" ca >/dev/null

# issue DIR ROLE-ARGS... : a certificate into DIR, with the CA beside it.
issue() {
    local dir=$1; shift
    mkdir -p "$S/$dir"
    "$B" certs --out "$S/$dir" issue --ca "$S/pki/ca.pem" --ca-key "$S/pki/ca-key.pem" "$@" >/dev/null
    cp "$S/pki/ca.pem" "$S/$dir/ca.pem"
}
tls() {
    printf '\n[tls]\nca = "ca.pem"\ncert = "%s.pem"\nkey = "%s-key.pem"\n' "$1" "$1"
}

"$B" gen multi --subnets 2 --leaves 2 --spines 2 --hosts 2 --routers 2 --out "$S/fabric" >/dev/null
for want in 0xfec0000000000001 0xfec0000000000002 0x0004000000000000 0x0004000000010000; do
    grep -q "\"$want\"" "$S/fabric/manifest.toml" || {
        echo "prepare: the generated fabric lacks $want; this script needs updating" >&2
        exit 1
    }
done

# etcd: every member's certificate also names etcd-1, the name the
# controllers check every member against (the first endpoint's).
for m in etcd-1 etcd-2 etcd-3; do
    names=(--dns "$m")
    [ "$m" = etcd-1 ] || names+=(--dns etcd-1)
    issue "$m" worker --name "$m" "${names[@]}"
done

ctls='["https://ctl-a:7100", "https://ctl-b:7100"]'
for c in ctl-a ctl-b; do
    issue "$c" controller --dns "$c"
    cat > "$S/$c/controller.toml" <<TOML
id = "$c"
listen = "0.0.0.0:7100"
algorithm = "issr"
lease_seconds = 10
metrics_listen = "0.0.0.0:9464"

[store]
kind = "etcd"
endpoints = ["https://etcd-1:2379", "https://etcd-2:2379", "https://etcd-3:2379"]
prefix = "/ibfabric/compose/"
election_ttl_seconds = 2

[store.tls]
ca = "ca.pem"
cert = "controller.pem"
key = "controller-key.pem"
$(tls controller)
TOML
done

# The etcd table every role that finds or registers workers carries, with
# that role's certificate as its etcd client identity.
store_table() {
    printf '\n[%s]\nkind = "etcd"\nendpoints = ["https://etcd-1:2379", "https://etcd-2:2379", "https://etcd-3:2379"]\nprefix = "/ibfabric/compose/"\nelection_ttl_seconds = 2\n\n[%s.tls]\nca = "ca.pem"\ncert = "%s.pem"\nkey = "%s-key.pem"\n' "$1" "$1" "$2" "$2"
}

# Workers register in etcd under a lease, at the URL they advertise.
for w in worker-1 worker-2; do
    issue "$w" worker --name "$w" --dns "$w"
    cat > "$S/$w/worker.toml" <<TOML
name = "$w"
listen = "0.0.0.0:7400"
metrics_listen = "0.0.0.0:9467"
advertise = "https://$w:7400"
coordinators = ["ibfabric://agent/0xfec0000000000001"]
$(store_table store "worker-$w")
$(tls "worker-$w")
TOML
done

# subnet0 routes with DF-DN, its base routes computed on the two workers
# (named: at its first routing the workers may not have registered yet;
# `[workers_store]` would find them in etcd).
i=0
for prefix in 0xfec0000000000001 0xfec0000000000002; do
    a=subnet$i
    issue "$a" agent --prefix "$prefix" --dns "$a"
    cp "$S/fabric/$a.net" "$S/$a/topology.net"
    extra=
    [ $i = 0 ] && extra=$'engine = "dfdn"\nworkers = ["https://worker-1:7400", "https://worker-2:7400"]'
    cat > "$S/$a/agent.toml" <<TOML
agent_id = "$a"
subnet_prefix = "$prefix"
topology = "topology.net"
out_dir = "/var/lib/ibfabric/out"
controllers = $ctls
listen = "0.0.0.0:7200"
metrics_listen = "0.0.0.0:9465"
$extra
$(tls "agent-$prefix")
TOML
    i=$((i + 1))
done

i=0
for guid in 0x0004000000000000 0x0004000000010000; do
    r=router$i
    issue "$r" router --guid "$guid" --dns "$r"
    cat > "$S/$r/router.toml" <<TOML
router_guid = "$guid"
listen = "0.0.0.0:7300"
controllers = $ctls
ports = 4
metrics_listen = "0.0.0.0:9466"
$(tls "router-$guid")
TOML
    i=$((i + 1))
done

issue tester worker --name tester
# `route --workers-from` and `status --workers-from` read this.
store_table store worker-tester > "$S/tester/store.toml"
echo "prepared $S"
