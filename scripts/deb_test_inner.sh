#!/usr/bin/env bash
# Runs inside a clean Debian container (scripts/deb_test.sh): installs the
# package as a site would, checks what it set up, verifies the units, and
# has OpenSM on ibsim apply a table set through the installed plugin,
# read back from the switches and compared entry by entry.
set -euo pipefail
step() { echo "deb-test: $*"; }
export DEBIAN_FRONTEND=noninteractive
step "apt-get install ./ibfabric_*.deb opensm ibsim-utils infiniband-diags (with systemd, man-db)"
apt-get update -qq
apt-get install -y -qq "/deb/$DEB_NAME" opensm ibsim-utils infiniband-diags systemd man-db >/tmp/apt.log 2>&1 ||
  { tail -30 /tmp/apt.log; exit 1; }

step "the package's user, group and directories"
getent passwd ibfabric >/dev/null
getent group ibfabric >/dev/null
test "$(stat -c '%U:%G %a' /etc/ibfabric/tls)" = "root:ibfabric 750"
for c in agent controller router worker; do test -f "/etc/ibfabric/$c.toml"; done
dpkg-query -W -f='${Conffiles}\n' ibfabric | grep -q /etc/ibfabric/agent.toml
ldconfig -p | grep -q libibfabric.so

step "systemd-analyze verify on the four units"
systemd-analyze verify /lib/systemd/system/ibfabric-*.service
man -w ibfabric >/dev/null
man -w ibfabric-route >/dev/null
test -f /usr/share/bash-completion/completions/ibfabric

step "a key made by root reaches the service user through the group (postinst)"
ibfabric certs --out /root/pki ca >/dev/null
ibfabric certs --out /etc/ibfabric/tls issue --ca /root/pki/ca.pem --ca-key /root/pki/ca-key.pem \
  controller --dns localhost >/dev/null
cp /root/pki/ca.pem /etc/ibfabric/tls/ca.pem
# A CA key left beside the services must not become theirs.
cp /root/pki/ca-key.pem /etc/ibfabric/tls/ca-key.pem
dpkg-reconfigure ibfabric
su -s /bin/sh ibfabric -c 'cat /etc/ibfabric/tls/controller-key.pem' >/dev/null
for who in ibfabric nobody; do
  if su -s /bin/sh "$who" -c 'cat /etc/ibfabric/tls/ca-key.pem' >/dev/null 2>&1; then
    echo "deb-test: $who reads the CA key" >&2
    exit 1
  fi
done
if su -s /bin/sh nobody -c 'cat /etc/ibfabric/tls/controller-key.pem' >/dev/null 2>&1; then
  echo "deb-test: a key is readable by others" >&2
  exit 1
fi
# Renewed in place, the key stays readable by the services.
ibfabric certs renew --ca /root/pki/ca.pem --ca-key /root/pki/ca-key.pem \
  --cert /etc/ibfabric/tls/controller.pem >/dev/null
su -s /bin/sh ibfabric -c 'cat /etc/ibfabric/tls/controller-key.pem' >/dev/null

step "OpenSM on ibsim applies a DF-DN set through the installed plugin"
W=/var/lib/ibfabric/agent
mkdir -p "$W/cache"
cd "$W"
ibfabric gen dragonfly --p 2 -o fab.net 2>/dev/null
ibfabric route -t fab.net -e dfdn -o subnet-a >/dev/null 2>&1
export IBSIM_SOCKNAME=debtest$$
ibsim -s -n fab.net >ibsim.log 2>&1 &
SIM=$!
sleep 2
SIM_HOST=$(awk '/^Ca/ {gsub(/"/, "", $3); print $3; exit}' fab.net)
export SIM_HOST OSM_CACHE_DIR=$W/cache OSM_TMP_DIR=$W/cache
PRELOAD=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
{
  echo "log_file $W/opensm.log"
  echo "log_flags 0x03"
  echo "force_log_flush TRUE"
  echo "sweep_interval 0"
  echo "dump_files_dir $W"
  grep -v '^#' /usr/share/doc/ibfabric/examples/opensm-ibfabric.conf
} >opensm.conf
LD_PRELOAD=$PRELOAD opensm -F opensm.conf >opensm.stdout 2>&1 &
OSM=$!
for _ in $(seq 1 90); do
  if grep -q -e "SUBNET UP" -e "No routing engine able" -e "ERRORS DURING" opensm.log 2>/dev/null; then break; fi
  sleep 1
done
cat subnet-a/opensm-plugin-status.txt
grep -q "SUBNET UP" opensm.log
grep -q "^applied generation" subnet-a/opensm-plugin-status.txt

step "the switches' tables read back equal the set and verify"
# Exit 0: every pair routed deadlock free and every entry as the set says
# (4 when they differ, 3 when unsafe).
LD_PRELOAD=$PRELOAD ibfabric audit -o readback --expect subnet-a -t fab.net --path-sample 4
kill "$OSM" "$SIM" 2>/dev/null || true
step "remove: the units go, the site's keys and state stay"
apt-get remove -y -qq ibfabric >/dev/null 2>&1
test ! -e /lib/systemd/system/ibfabric-agent.service
test -f /etc/ibfabric/tls/controller-key.pem
test -d /var/lib/ibfabric/agent/subnet-a
step "ok"
