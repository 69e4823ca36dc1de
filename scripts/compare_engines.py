#!/usr/bin/env python3
"""Side-by-side routing comparison: OpenSM's engines on ibsim vs ibfabric.

For each topology, generates one file with `ibfabric gen`, then routes it
with OpenSM 3.3.23 (../shared/opensm/run_engine.sh: real OpenSM on the ibsim
simulator) and with ibfabric's engines (`ibfabric route --json`, timed with
/usr/bin/time). Writes raw rows to a TSV and prints a markdown table.

Usage:
  scripts/compare_engines.py --tsv bench-out/compare.tsv
  scripts/compare_engines.py --topos "slimfly:q=5 dragonfly:p=2" --opensm-engines "dfsssp lash"

Topology specs: kind:key=value,... with kind one of ibfabric gen's
subcommands (slimfly:q=5, dragonfly:p=4, torus:dims=4x4x4, kary:k=8,n=3).
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TOPOS = ("slimfly:q=5 slimfly:q=7 slimfly:q=11 dragonfly:p=2 dragonfly:p=4 "
                 "dragonfly:p=6 torus:dims=4x4x4 kary:k=8,n=3")
# ours: label -> route arguments
OURS = {
    "dfdn": ["--engine", "dfdn", "--base", "minhop"],
    "dfdn-sssp": ["--engine", "dfdn", "--base", "sssp"],
    "dfd2": ["--engine", "dfd2"],
}


def gen_args(spec):
    kind, _, params = spec.partition(":")
    args = [kind]
    for kv in filter(None, params.split(",")):
        k, _, v = kv.partition("=")
        args += ["--" + k, v]
    return args


def run_ibfabric(bin_, args, timeout=None):
    return subprocess.run([bin_] + args, capture_output=True, text=True, timeout=timeout)


def run_opensm(opensm_dir, net, engine, outdir, timeout):
    env = dict(os.environ, TIMEOUT=str(timeout), LOGFLAGS="0x03", KEEP_DUMPS_SMALL="1")
    t0 = time.time()
    try:
        subprocess.run([os.path.join(opensm_dir, "run_engine.sh"), net, engine, outdir],
                       env=env, capture_output=True, text=True, timeout=timeout + 120)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "wall_s": time.time() - t0}
    res = {"wall_s": time.time() - t0}
    try:
        with open(os.path.join(outdir, "result.txt")) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                res[k] = v
    except OSError as e:
        res["status"] = "no_result(%s)" % e.strerror
    return res


def run_ours(bin_, net, label, outdir, timeout):
    time_bin = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
    cmd = [bin_, "route", "--topology", net, "--out", outdir, "--json"] + OURS[label]
    if time_bin:
        cmd = [time_bin, "-f", "TIME %e %M"] + cmd
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "wall_s": time.time() - t0}
    res = {"wall_s": time.time() - t0, "status": "up" if p.returncode == 0 else "failed"}
    for line in p.stderr.splitlines():
        if line.startswith("TIME "):
            _, wall, rss = line.split()
            res["wall_s"], res["maxrss_kb"] = float(wall), int(rss)
    if p.returncode != 0:
        err = [l for l in p.stderr.splitlines() if l.startswith("error:")]
        res["error"] = err[-1] if err else p.stderr.strip()[-200:]
        return res
    try:
        j = json.loads(p.stdout)
    except json.JSONDecodeError:
        res["status"] = "bad_json"
        return res
    res.update(seconds=j["seconds"], vls=j["vls"], sls=j["sls"],
               deadlock_free=j["deadlock_free"], verify_seconds=j["verify_seconds"])
    return res


def cell(r):
    if r is None:
        return "-"
    if r.get("status") != "up":
        return "FAIL(%s)" % r.get("status")
    vls = r.get("vls", "-")
    secs = r.get("seconds")
    rss = r.get("rss_mb")
    s = "%s VL" % (vls if vls not in ("", None) else "-")
    if secs not in (None, ""):
        s += " / %.3g s" % float(secs)
    if rss not in (None, ""):
        s += " / %d MB" % rss
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topos", default=DEFAULT_TOPOS)
    ap.add_argument("--opensm-engines", default="dfsssp lash nue")
    ap.add_argument("--ours", default="dfdn dfdn-sssp dfd2")
    ap.add_argument("--timeout", type=int, default=600, help="per OpenSM run, seconds")
    ap.add_argument("--tsv", default=os.path.join(ROOT, "bench-out", "compare.tsv"))
    ap.add_argument("--opensm-dir", default=os.environ.get("OPENSM_DIR", os.path.join(ROOT, "..", "shared", "opensm")))
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "ibfabric"))
    a = ap.parse_args()
    if not os.access(a.bin, os.X_OK):
        sys.exit("no release binary at %s: run cargo build --release" % a.bin)
    if not os.path.exists(os.path.join(a.opensm_dir, "run_engine.sh")):
        sys.exit("no run_engine.sh in %s (set --opensm-dir or OPENSM_DIR)" % a.opensm_dir)
    os.makedirs(os.path.dirname(os.path.abspath(a.tsv)), exist_ok=True)
    work = tempfile.mkdtemp(prefix="ibf-compare-")
    rows = []
    osm_engines = a.opensm_engines.split()
    our_engines = a.ours.split()
    try:
        for spec in a.topos.split():
            net = os.path.join(work, spec.replace(":", "_").replace(",", "_").replace("=", "") + ".net")
            g = run_ibfabric(a.bin, ["gen"] + gen_args(spec) + ["-o", net, "--json"])
            if g.returncode != 0:
                print("gen %s failed: %s" % (spec, g.stderr.strip()), file=sys.stderr)
                continue
            info = json.loads(g.stdout)
            base = {"topology": spec, "switches": info["switches"], "hcas": info["cas"], "diameter": info["diameter"]}
            for e in osm_engines:
                out = os.path.join(work, "osm_" + e)
                shutil.rmtree(out, ignore_errors=True)
                print("opensm %-8s %s ..." % (e, spec), file=sys.stderr, flush=True)
                r = run_opensm(a.opensm_dir, net, e, out, a.timeout)
                rss = r.get("opensm_maxrss_kb")
                rows.append(dict(base, side="opensm", engine=e, status=r.get("status", "?"),
                                 vls=r.get("vls_needed", ""), seconds=r.get("t_route_s", ""),
                                 rss_mb=int(rss) // 1024 if rss else None, wall_s="%.1f" % float(r["wall_s"])))
                shutil.rmtree(out, ignore_errors=True)
            for e in our_engines:
                if e == "dfd2" and info["diameter"] != 2:
                    continue
                out = os.path.join(work, "ours_" + e)
                print("ours   %-8s %s ..." % (e, spec), file=sys.stderr, flush=True)
                r = run_ours(a.bin, net, e, out, a.timeout)
                rows.append(dict(base, side="ours", engine=e, status=r["status"], vls=r.get("vls", ""),
                                 seconds=r.get("seconds", ""),
                                 rss_mb=r["maxrss_kb"] // 1024 if "maxrss_kb" in r else None,
                                 wall_s="%.1f" % float(r["wall_s"]), error=r.get("error", "")))
                shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    cols = ["topology", "switches", "hcas", "diameter", "side", "engine", "status", "vls", "seconds", "rss_mb", "wall_s"]
    with open(a.tsv, "w") as f:
        f.write("\t".join(cols) + "\n")
        for r in rows:
            f.write("\t".join("" if r.get(c) is None else str(r.get(c)) for c in cols) + "\n")

    engines = [("opensm", e) for e in osm_engines] + [("ours", e) for e in our_engines]
    print("Run %s on %s cores: `%s`\n" % (datetime.date.today().isoformat(), os.cpu_count(), " ".join(sys.argv)))
    print("| topology | switches | HCAs | " + " | ".join("%s %s" % (s if s == "ours" else "OpenSM", e) for s, e in engines) + " |")
    print("|---|---|---|" + "---|" * len(engines))
    for spec in a.topos.split():
        rs = [r for r in rows if r["topology"] == spec]
        if not rs:
            continue
        by = {(r["side"], r["engine"]): r for r in rs}
        print("| %s | %s | %s | %s |" % (spec, rs[0]["switches"], rs[0]["hcas"],
                                         " | ".join(cell(by.get(k)) for k in engines)))
    print("\nCells: VLs / routing seconds / peak RSS. OpenSM: VLs needed as it logs them (dfsssp, lash; "
          "nue logs none), t_route_s from its log, opensm RSS. ibfabric: VLs found by the verifier in the "
          "written tables, engine seconds, RSS of the whole command (parse, route, verify, write files).")
    print("Raw rows: %s" % a.tsv)


if __name__ == "__main__":
    main()
