#!/usr/bin/env python3
"""Link load side by side: OpenSM's engines and ibfabric's on the same files.

For each topology and engine pair, OpenSM 3.3.23 routes the file on ibsim
(../shared/opensm/run_engine.sh with DIAG=1, so the topology as OpenSM
numbered it and its LFT dump are kept); `ibfabric verify --json` computes
the link load (HCA pairs per directed switch-to-switch link) of OpenSM's
tables, and `ibfabric route --json` routes the same file with ours. Prints
one markdown table: max / mean / stdev paths per link, VLs, seconds;
`--json FILE` keeps the rows, `--svg FILE` draws max/mean per engine,
OpenSM's bar beside ours, one panel per topology.

    scripts/compare_balance.py --topologies "dragonfly:p=4 torus:dims=4x4x4" \\
        --engines "sssp:sssp dfsssp:dfsssp lash:lash nue:nue minhop:minhop updn:updn"
    scripts/compare_balance.py --from-json rows.json --svg docs/balance.svg

An engine pair is OPENSM_ENGINE:OURS; `-:OURS` (given as `--engines=-:OURS` when it is the
only one) runs ours alone (no OpenSM
counterpart). For `updn`, ours runs first and OpenSM is given the roots ours
chose (its root_guid_file), so both orient the fabric from the same
switches. Needs target/release/ibfabric and OpenSM, ibsim and
infiniband-diags (scripts/install-deps.sh).
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


def opensm_row(a, net, engine, work, roots=None):
    if engine == "-":
        return {"status": "-"}
    out = os.path.join(work, "opensm-" + engine)
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, TIMEOUT=str(a.timeout), DIAG="1", KEEP_DUMPS_SMALL="1")
    if a.lmc:
        env["EXTRA_CONF"] = (env.get("EXTRA_CONF", "") + "\nlmc %d" % a.lmc).lstrip("\n")
    if roots:
        path = os.path.join(work, "roots-" + engine + ".txt")
        with open(path, "w") as f:
            f.write("".join(r + "\n" for r in roots))
        env["ROOT_GUID_FILE"] = path
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
            "seconds": r.get("t_route_s", ""), "spread": j.get("lid_spread"),
            "base": j.get("link_load_base"),
            "pairs": j.get("pairs"), "verify_seconds": "%.3f" % j["verify_seconds"]}


def ours_row(a, net, engine, work):
    out = os.path.join(work, "ours-" + engine)
    p, _ = run([a.ibfabric, "route", "-t", net, "-e", engine, "-o", out, "--json", "--allow-cycles"], a.timeout)
    try:
        j = json.loads(p.stdout)
    except ValueError:
        return {"status": "failed: " + p.stderr.strip()[-200:]}
    return {"status": "ok", "load": j["link_load"], "vls": j.get("vls_needed", j.get("vls")),
            "seconds": "%.3f" % j["route_seconds"], "roots": j.get("roots"),
            "spread": j.get("lid_spread"), "pairs": j.get("pairs"),
            "base": j.get("link_load_base"),
            "verify_seconds": "%.3f" % j["verify_seconds"]}


def cell(r):
    if r["status"] != "ok":
        return r["status"]
    l = r["load"]
    c = "%d / %.1f / %.1f (%s VLs, %s s)" % (l["max"], l["mean"], l["stdev"], r["vls"] or "-",
                                            r["seconds"])
    if r.get("spread"):
        c += ", LIDs apart %.1f %%" % (100.0 * r["spread"]["first_hops_share"])
    if r.get("base"):
        c += ", base LIDs %d / %.1f" % (r["base"]["max"], r["base"]["mean"])
    return c


def ratio(o, u):
    if o["status"] == "ok" and u["status"] == "ok" and o["load"]["max"]:
        return "%+.0f%%" % (100.0 * (u["load"]["max"] / o["load"]["max"] - 1))
    return ""


def print_table(rows):
    print("| topology | engine | OpenSM 3.3.23 | ibfabric | max: ours vs OpenSM |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s / %s | %s | %s | %s |" % (r["topology"], r["theirs"], r["ours"],
                                                 cell(r["opensm"]), cell(r["ibfabric"]),
                                                 ratio(r["opensm"], r["ibfabric"])))


def svg(rows, path):
    """Max/mean per engine, OpenSM beside ours, one panel per topology."""
    from xml.sax.saxutils import escape
    topos = []
    for r in rows:
        if r["topology"] not in topos:
            topos.append(r["topology"])
    font = "DejaVu Sans, Arial, Helvetica, sans-serif"
    bw, gap, left, ph, top = 14, 16, 60, 150, 40

    def rel(side):
        if side["status"] == "ok" and side["load"]["mean"]:
            return side["load"]["max"] / side["load"]["mean"]
        return None

    cap = 4.0
    width = max(640, left + 40 + max(
        len([r for r in rows if r["topology"] == t]) for t in topos) * (2 * bw + gap))
    height = top + len(topos) * (ph + 50) + 10
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="%s" font-size="11">' % (width, height, font),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="18" font-size="13">Busiest link / mean link load (HCA pairs per '
           'directed switch link); lower is better</text>' % left,
           '<text x="%d" y="35">bars capped at %gx (the figure written in the bar)</text>'
           % (left + 200, cap),
           '<rect x="%d" y="26" width="10" height="10" fill="#4292c6"/>'
           '<text x="%d" y="35">OpenSM 3.3.23</text>' % (left, left + 14),
           '<rect x="%d" y="26" width="10" height="10" fill="#e6550d"/>'
           '<text x="%d" y="35">ibfabric</text>' % (left + 110, left + 124)]
    for ti, t in enumerate(topos):
        y0 = top + ti * (ph + 50) + 20
        out.append('<text x="%d" y="%d" font-weight="bold">%s</text>' % (left, y0 - 4, escape(t)))
        for k in range(0, int(cap) + 1):
            y = y0 + ph - ph * k / cap
            out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'
                       % (left, width - 20, y, y))
            out.append('<text x="%d" y="%.1f" text-anchor="end">%dx</text>' % (left - 4, y + 4, k))
        x = left + 8
        for r in [r for r in rows if r["topology"] == t]:
            for side, color in (("opensm", "#4292c6"), ("ibfabric", "#e6550d")):
                v = rel(r[side])
                if v is None:
                    mark = "-" if r[side]["status"] == "-" else "x"
                    out.append('<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>'
                               % (x + bw / 2, y0 + ph - 3, mark))
                else:
                    h = ph * min(v, cap) / cap
                    name = r["ours"] if side == "ibfabric" else r["theirs"]
                    out.append('<rect x="%.1f" y="%.1f" width="%d" height="%.1f" fill="%s">'
                               '<title>%s %s: max %d, mean %.1f (%.2fx)</title></rect>'
                               % (x, y0 + ph - h, bw, h, color, side, escape(name),
                                  r[side]["load"]["max"], r[side]["load"]["mean"], v))
                    if v > cap:
                        cx, cy = x + bw / 2 + 3, y0 + 4
                        out.append('<text x="%.1f" y="%.1f" text-anchor="end" font-size="9" '
                                   'fill="white" transform="rotate(-90 %.1f %.1f)">%.0fx</text>'
                                   % (cx, cy, cx, cy, v))
                x += bw
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                       % (x - bw, y0 + ph + 14, escape(r["ours"])))
            x += gap
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topologies", default="dragonfly:p=4 torus:dims=4x4x4")
    ap.add_argument("--engines", default="sssp:sssp dfsssp:dfsssp lash:lash nue:nue minhop:minhop updn:updn")
    ap.add_argument("--ibfabric", default="target/release/ibfabric")
    ap.add_argument("--opensm-dir", default=os.path.join("..", "shared", "opensm"))
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--lmc", type=int, default=0,
                    help="LMC of the CA ports: ours generate it (gen --lmc), OpenSM is run "
                         "with 'lmc N'; cells add the share of a destination's LIDs on first "
                         "hops of their own")
    ap.add_argument("--json", help="write the rows here (rewritten after each row)")
    ap.add_argument("--from-json", help="print the table (and --svg) from rows written by --json")
    ap.add_argument("--svg", help="draw max/mean per engine, OpenSM beside ours")
    a = ap.parse_args()
    a.opensm_dir = os.path.abspath(a.opensm_dir)
    a.ibfabric = os.path.abspath(a.ibfabric)
    if not a.from_json:
        print("Measured %s UTC, nproc %d. Cells: max / mean / stdev paths per directed switch "
              "link (HCA pairs), VLs, routing seconds.\n"
              % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), os.cpu_count()))
    rows = []
    if a.from_json:
        with open(a.from_json) as f:
            rows = json.load(f)
        print_table(rows)
    else:
        print("| topology | engine | OpenSM 3.3.23 | ibfabric | max: ours vs OpenSM |")
        print("|---|---|---|---|---|")
    for spec in ([] if a.from_json else a.topologies.split()):
        with tempfile.TemporaryDirectory() as work:
            net = os.path.join(work, "fabric.net")
            p, _ = run([a.ibfabric, "gen"] + gen_args(spec) + ["--lmc", str(a.lmc), "-o", net],
                       a.timeout)
            if p.returncode != 0:
                print("| %s | gen failed: %s |" % (spec, p.stderr.strip()[-200:]))
                continue
            for pair in a.engines.split():
                theirs, _, ours = pair.partition(":")
                ours = ours or theirs
                if ours == "ftree" and spec.split(":")[0] not in ("kary", "fattree"):
                    continue  # both sides route fat trees only
                u = ours_row(a, net, ours, work)
                o = opensm_row(a, net, theirs, work, u.get("roots") if theirs == "updn" else None)
                r = {"topology": spec, "theirs": theirs, "ours": ours, "opensm": o, "ibfabric": u,
                     "lmc": a.lmc}
                rows.append(r)
                print("| %s | %s / %s | %s | %s | %s |" % (spec, theirs, ours, cell(o), cell(u),
                                                         ratio(o, u)))
                sys.stdout.flush()
                if a.json:
                    with open(a.json, "w") as f:
                        json.dump(rows, f, indent=1)
    if a.svg:
        svg(rows, a.svg)


if __name__ == "__main__":
    main()
