#!/usr/bin/env python3
"""Link load side by side: OpenSM's engines and ibfabric's on the same files.

For each topology and engine pair, OpenSM 3.3.23 routes the file on ibsim
(../shared/opensm/run_engine.sh with DIAG=1, so the topology as OpenSM
numbered it and its LFT dump are kept); `ibfabric verify --json` computes
the link load (HCA pairs per directed switch-to-switch link) of OpenSM's
tables, and `ibfabric route --json` routes the same file with ours. Prints
one markdown table: max / mean / stdev paths per link, VLs, seconds.

    scripts/compare_balance.py --topologies "dragonfly:p=4 torus:dims=4x4x4" \\
        --engines "sssp:sssp dfsssp:dfsssp lash:lash nue:nue minhop:minhop updn:updn"

An engine pair is OPENSM_ENGINE:OURS. Needs target/release/ibfabric and
OpenSM, ibsim and infiniband-diags (scripts/install-deps.sh).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def gen_args(spec):
    kind, _, params = spec.partition(":")
    args = [kind]
    for kv in filter(None, params.split(",")):
        k, v = kv.split("=")
        args += ["--" + k, v]
    return args


def run(cmd, timeout, env=None):
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    return p, time.time() - t


def kv(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                out[k] = v
    except OSError:
        pass
    return out


def opensm_row(a, net, engine, work):
    out = os.path.join(work, "opensm-" + engine)
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, TIMEOUT=str(a.timeout), DIAG="1", KEEP_DUMPS_SMALL="1")
    script = os.path.join(a.opensm_dir, "run_engine.sh")
    try:
        run([script, net, engine, out], a.timeout + 300, env)
    except subprocess.TimeoutExpired:
        return {"status": "timeout"}
    r = kv(os.path.join(out, "result.txt"))
    topo, lfts = os.path.join(out, "ibnetdiscover.txt"), os.path.join(out, "opensm-lfts.dump")
    if r.get("status") != "up" or not os.path.exists(lfts) or not os.path.exists(topo):
        return {"status": r.get("status", "no result")}
    p, _ = run([a.ibfabric, "verify", "-t", topo, "--lfts", lfts, "--json"], a.timeout)
    try:
        j = json.loads(p.stdout)
    except ValueError:
        return {"status": "verify failed: " + p.stderr.strip()[-200:]}
    return {"status": "ok", "load": j["link_load"], "vls": r.get("vls_needed", ""),
            "seconds": r.get("t_route_s", "")}


def ours_row(a, net, engine, work):
    out = os.path.join(work, "ours-" + engine)
    p, _ = run([a.ibfabric, "route", "-t", net, "-e", engine, "-o", out, "--json"], a.timeout)
    try:
        j = json.loads(p.stdout)
    except ValueError:
        return {"status": "failed: " + p.stderr.strip()[-200:]}
    return {"status": "ok", "load": j["link_load"], "vls": j.get("vls_needed", j.get("vls")),
            "seconds": "%.3f" % j["seconds"]}


def cell(r):
    if r["status"] != "ok":
        return r["status"]
    l = r["load"]
    return "%d / %.1f / %.1f (%s VLs, %s s)" % (l["max"], l["mean"], l["stdev"], r["vls"] or "-",
                                               r["seconds"])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topologies", default="dragonfly:p=4 torus:dims=4x4x4")
    ap.add_argument("--engines", default="sssp:sssp dfsssp:dfsssp lash:lash nue:nue minhop:minhop updn:updn")
    ap.add_argument("--ibfabric", default="target/release/ibfabric")
    ap.add_argument("--opensm-dir", default=os.path.join("..", "shared", "opensm"))
    ap.add_argument("--timeout", type=int, default=900)
    a = ap.parse_args()
    a.opensm_dir = os.path.abspath(a.opensm_dir)
    a.ibfabric = os.path.abspath(a.ibfabric)
    print("Measured %s UTC, nproc %d. Cells: max / mean / stdev paths per directed switch link "
          "(HCA pairs), VLs, routing seconds.\n" % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                                                    os.cpu_count()))
    print("| topology | engine | OpenSM 3.3.23 | ibfabric | max: ours vs OpenSM |")
    print("|---|---|---|---|---|")
    for spec in a.topologies.split():
        with tempfile.TemporaryDirectory() as work:
            net = os.path.join(work, "fabric.net")
            p, _ = run([a.ibfabric, "gen"] + gen_args(spec) + ["-o", net], a.timeout)
            if p.returncode != 0:
                print("| %s | gen failed: %s |" % (spec, p.stderr.strip()[-200:]))
                continue
            for pair in a.engines.split():
                theirs, _, ours = pair.partition(":")
                o = opensm_row(a, net, theirs, work)
                u = ours_row(a, net, ours or theirs, work)
                ratio = ""
                if o["status"] == "ok" and u["status"] == "ok" and o["load"]["max"]:
                    ratio = "%+.0f%%" % (100.0 * (u["load"]["max"] / o["load"]["max"] - 1))
                print("| %s | %s / %s | %s | %s | %s |" % (spec, theirs, ours or theirs, cell(o),
                                                         cell(u), ratio))
                sys.stdout.flush()


if __name__ == "__main__":
    main()
