#!/usr/bin/env python3
"""Side-by-side routing comparison: OpenSM 3.3.23's engines on ibsim vs ibfabric.

For each topology: generate one file with `ibfabric gen` (so both sides route
the same fabric), read its diameter with `ibfabric info --json`, then route it

  * with OpenSM (real Debian opensm on the ibsim simulator, through
    ../shared/opensm/run_engine.sh): status, VLs needed (dfsssp and lash
    only; OpenSM logs no count for nue), t_route_s from its log, and the
    opensm peak RSS (VmHWM);
  * with ibfabric (`ibfabric route --json`, run under `/usr/bin/time -v`):
    engine seconds, VLs, SLs and deadlock freedom as found by our verifier,
    and the peak RSS of the whole command.

Raw rows go to a TSV (first line a "# " comment with date, nproc and command;
one row per topology x engine, written as they come, so
an interrupted run keeps what it measured); a markdown table goes to stdout.
A failed, timed-out or crashed run is recorded and the matrix goes on.

Usage:
  scripts/compare_engines.py --tsv bench-out/compare.tsv > bench-out/compare.md
  scripts/compare_engines.py --topos "slimfly:q=5 dragonfly:p=2 torus:dims=3x3" \\
      --opensm-engines "dfsssp lash" --timeout 60
  scripts/compare_engines.py --from-tsv bench-out/compare.tsv   # table only
  scripts/plot_compare.py bench-out/compare.tsv bench-out/compare.svg

Topology specs: KIND:KEY=VALUE,KEY=VALUE with KIND an `ibfabric gen`
subcommand and each KEY one of its options (slimfly:q=5, dragonfly:p=4,
dragonfly:p=4,hosts=2, torus:dims=4x4x4, kary:k=8,n=3).

Our engines (--ours): ENGINE or ENGINE-BASE, e.g. dfdn (= base minhop),
dfdn-sssp, dfd2, minhop, sssp. dfd2 runs only where the diameter is 2; it is
reported as n/a elsewhere.

OpenSM runs with LOGFLAGS=0x03 (ERROR|INFO) by default: no ROUTING dumps
(huge on big fabrics, and not needed here), and both counts parsed here
("Virtual Lanes needed", "Lanes needed") are INFO lines. Set
--opensm-logflags 0x43 to get OpenSM's dump files (with --keep).
"""

import argparse
import csv
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TOPOS = ("slimfly:q=5 slimfly:q=7 slimfly:q=11 dragonfly:p=2 dragonfly:p=4 "
                 "dragonfly:p=6 torus:dims=4x4x4 kary:k=8,n=3")
DEFAULT_OPENSM = "dfsssp lash nue"
DEFAULT_OURS = "dfdn dfdn-sssp dfd2 dfsssp lash nue updn ftree"
TIME_BIN = "/usr/bin/time"
# OpenSM engines that log a VL count (run_engine.sh's vls_needed)
OPENSM_VL_ENGINES = ("dfsssp", "lash")

COLS = ["topology", "spec", "switches", "hcas", "diameter", "side", "engine", "base",
        "status", "vls", "sls", "seconds", "rss_kb", "wall_s", "deadlock_free",
        "verify_seconds", "max_hops", "t_discover_s", "t_subnet_up_s", "ibsim_rss_kb",
        "timeout_s", "note"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def clean(s, limit=300):
    """One TSV-safe line."""
    s = re.sub(r"[\t\r\n]+", " ", str(s)).strip()
    return s if len(s) <= limit else s[:limit - 3] + "..."


# ---------------------------------------------------------------- processes

def run_group(cmd, timeout, env=None, cwd=None):
    """Runs cmd in its own process group. On timeout (or Ctrl-C) the whole
    group (e.g. run_engine.sh with its opensm and ibsim children) is stopped
    by its id. Returns (returncode or None on timeout, stdout, stderr, wall)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, cwd=cwd, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err, time.monotonic() - t0
    except BaseException as e:  # TimeoutExpired, KeyboardInterrupt
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, err = p.communicate(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            out, err = "", ""
        if not isinstance(e, subprocess.TimeoutExpired):
            raise
        return None, out or "", err or "", time.monotonic() - t0


class Binary:
    """Our release binary. Someone may rebuild it while the matrix runs:
    wait for it to come back, and remember whether it changed."""

    def __init__(self, path, wait):
        self.path, self.wait = path, wait
        self.mtime = self._mtime()
        self.changed = False

    def _mtime(self):
        try:
            return os.stat(self.path).st_mtime
        except OSError:
            return None

    def ready(self):
        t0 = time.monotonic()
        while not os.access(self.path, os.X_OK):
            if time.monotonic() - t0 > self.wait:
                return False
            log("  %s missing (rebuild?), waiting ..." % self.path)
            time.sleep(5)
        m = self._mtime()
        if self.mtime is None:
            self.mtime = m
        elif m != self.mtime and not self.changed:
            self.changed = True
            log("  WARNING: %s changed during the run" % self.path)
        return True

    def run(self, args, timeout):
        """rc None = timeout; rc 127 = binary vanished (after waiting)."""
        for attempt in range(3):
            if not self.ready():
                return 127, "", "binary %s missing" % self.path, 0.0
            try:
                rc, out, err, wall = run_group([self.path] + args, timeout)
            except OSError as e:  # ENOENT / ETXTBSY while it is being replaced
                log("  cannot run %s: %s; retrying" % (self.path, e))
                time.sleep(5)
                continue
            return rc, out, err, wall
        return 127, "", "binary %s could not be run" % self.path, 0.0


# ---------------------------------------------------------------- topologies

def gen_args(spec):
    kind, _, params = spec.partition(":")
    args = [kind]
    for kv in filter(None, params.split(",")):
        k, _, v = kv.partition("=")
        args += ["--" + k.strip()] + ([v.strip()] if v else [])
    return args


def safe_name(spec):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", spec).strip("_")


def prepare_topology(binary, spec, netdir, timeout):
    """Generates the file and reads its summary. Returns (info dict, error)."""
    net = os.path.join(netdir, safe_name(spec) + ".net")
    rc, out, err, _ = binary.run(["gen"] + gen_args(spec) + ["-o", net, "--json"], timeout)
    if rc != 0:
        return None, "gen: " + last_error(err, rc)
    try:
        g = json.loads(out)
    except ValueError:
        g = {}
    rc, out, err, _ = binary.run(["info", "--json", net], timeout)
    if rc != 0:
        return None, "info: " + last_error(err, rc)
    try:
        i = json.loads(out)
    except ValueError as e:
        return None, "info: bad JSON (%s)" % e
    return {"net": net, "spec": spec, "topology": g.get("topology") or safe_name(spec),
            "switches": i.get("switches", g.get("switches", "")),
            "hcas": i.get("cas", g.get("cas", "")),
            "diameter": i.get("diameter", g.get("diameter"))}, None


def last_error(stderr, rc):
    if rc is None:
        return "timeout"
    lines = [l for l in stderr.splitlines() if l.strip()]
    errs = [l for l in lines if "error" in l.lower()]
    return clean((errs or lines or ["exit status %s" % rc])[-1])


# ---------------------------------------------------------------- OpenSM

def parse_kv(path):
    res = {}
    with open(path) as f:
        for line in f:
            k, sep, v = line.rstrip("\n").partition("=")
            if sep:
                res[k.strip()] = v.strip()
    return res


def run_opensm(a, topo, engine, outdir):
    row = {"side": "opensm", "engine": engine, "base": "", "timeout_s": a.timeout}
    env = dict(os.environ, TIMEOUT=str(a.timeout), LOGFLAGS=a.opensm_logflags,
               KEEP_DUMPS_SMALL="1")
    script = os.path.join(a.opensm_dir, "run_engine.sh")
    # run_engine.sh enforces TIMEOUT itself (from opensm start); the extra
    # margin covers ibsim start-up and the log parsing after it
    rc, out, err, wall = run_group([script, topo["net"], engine, outdir], a.timeout + 180, env=env)
    row["wall_s"] = "%.2f" % wall
    res_path = os.path.join(outdir, "result.txt")
    if rc is None:
        row.update(status="timeout", note="run_engine.sh killed after %d s" % (a.timeout + 180))
        return row
    if not os.path.exists(res_path):
        row.update(status="no_result", note=clean("rc=%s %s %s" % (rc, out[-200:], err[-200:])))
        return row
    r = parse_kv(res_path)
    st = r.get("status", "?")
    if st == "up" and r.get("ok") != "yes":
        st = "up_wrong_engine(%s)" % (r.get("engine_used") or "none")
    elif st == "up":
        st = "ok"
    row["status"] = st
    if r.get("wall_s"):
        row["wall_s"] = "%.2f" % float(r["wall_s"])
    row["vls"] = r.get("vls_needed", "") if engine in OPENSM_VL_ENGINES else ""
    row["seconds"] = r.get("t_route_s", "")
    row["rss_kb"] = r.get("opensm_maxrss_kb", "")
    row["t_discover_s"] = r.get("t_discover_s", "")
    row["t_subnet_up_s"] = r.get("t_subnet_up_s", "")
    row["ibsim_rss_kb"] = r.get("ibsim_maxrss_kb", "")
    # run_engine.sh prints up to 3 OpenSM error lines as "  ERR: ..."
    errs = [l.strip()[5:].strip() for l in out.splitlines() if l.strip().startswith("ERR:")]
    if st == "timeout":
        # where it was stuck: the last line OpenSM logged
        try:
            with open(os.path.join(outdir, "opensm.log"), errors="replace") as f:
                tail = [l for l in f.read()[-4000:].splitlines() if l.strip()]
            if tail:
                errs.append("last log line: " + strip_log_prefix(tail[-1]))
        except OSError:
            pass
    row["note"] = clean(" | ".join(strip_log_prefix(e) for e in errs))
    return row


def strip_log_prefix(line):
    # "Nov 22 23:40:01 123456 [7F12...] 0x01 -> msg" -> "msg"
    return line.split(" -> ", 1)[1] if " -> " in line else line


# ---------------------------------------------------------------- ours

def our_args(label):
    engine, _, base = label.partition("-")
    args = ["--engine", engine]
    if base:
        args += ["--base", base]
    elif engine in ("dfdn", "dfd2"):
        base = "minhop"
        args += ["--base", base]
    return engine, base, args


def parse_time_v(path):
    """(wall seconds, max RSS kB) from /usr/bin/time -v -o PATH."""
    wall = rss = None
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("Elapsed (wall clock) time"):
                    t = line.rsplit(": ", 1)[1].split(":")
                    wall = sum(float(x) * 60 ** i for i, x in enumerate(reversed(t)))
                elif line.startswith("Maximum resident set size (kbytes)"):
                    rss = int(line.rsplit(":", 1)[1])
    except (OSError, ValueError, IndexError):
        pass
    return wall, rss


def run_ours(a, binary, topo, label, outdir):
    engine, base, args = our_args(label)
    row = {"side": "ours", "engine": label, "base": base, "timeout_s": a.timeout}
    if engine == "dfd2" and str(topo["diameter"]) != "2":
        row.update(status="skipped", note="dfd2 needs diameter 2, this is %s" % topo["diameter"])
        return row
    if engine == "ftree" and not topo["spec"].split(":")[0] in ("kary", "fattree"):
        row.update(status="skipped", note="ftree routes fat trees only")
        return row
    cmd = ["route", "--topology", topo["net"], "--out", outdir, "--json", "--allow-cycles"] + args
    timefile = outdir.rstrip("/") + ".time"
    if a.have_time:
        full = ["-v", "-o", timefile, binary.path] + cmd
        for attempt in range(3):
            if not binary.ready():
                rc, out, err, wall = 127, "", "binary missing", 0.0
                break
            rc, out, err, wall = run_group([TIME_BIN] + full, a.timeout)
            # 127: time could not exec the binary (replaced mid-rebuild)
            if rc != 127 or os.access(binary.path, os.X_OK):
                break
    else:
        rc, out, err, wall = binary.run(cmd, a.timeout)
    _, rss = parse_time_v(timefile) if a.have_time else (None, None)
    try:
        os.unlink(timefile)
    except OSError:
        pass
    # wall: our own monotonic clock around the command (time -v's "Elapsed"
    # has 10 ms resolution; exec overhead is well under 1 ms)
    row["wall_s"] = "%.3f" % wall
    row["rss_kb"] = rss if rss is not None else ""
    if rc is None:
        row.update(status="timeout", note="killed after %d s" % a.timeout)
        return row
    j = None
    try:
        j = json.loads(out) if out.strip() else None
    except ValueError:
        pass
    if rc != 0 or j is None:
        row.update(status="failed" if rc != 0 else "bad_json", note=last_error(err, rc))
        return row
    # VLs deadlock freedom needs: DF-SSSP then spreads its layers over every
    # VL allowed (as OpenSM's dfsssp does), which the verifier sees as used.
    row.update(status="ok", vls=j.get("vls_needed", j.get("vls", "")), sls=j.get("sls", ""),
               seconds=j.get("route_seconds", j.get("seconds", "")), verify_seconds=j.get("verify_seconds", ""),
               deadlock_free=str(j.get("deadlock_free", "")).lower(),
               max_hops=j.get("max_hops", ""))
    if j.get("broken_pairs"):
        row["note"] = "broken_pairs=%s" % j["broken_pairs"]
    elif j.get("vls_needed") not in (None, j.get("vls")):
        row["note"] = "tables spread over %s VLs" % j.get("vls")
    return row


# ---------------------------------------------------------------- output

def fmt_secs(v):
    s = float(v)
    if s >= 1000:
        return "%.0f" % s
    if s >= 0.01:
        return "%.3g" % s
    return ("%.5f" % s).rstrip("0").rstrip(".") if s > 0 else "0"


def cell(r):
    if r is None:
        return "-"
    st = r.get("status", "")
    if st == "skipped":
        if r.get("engine") == "ftree":
            return "n/a (not a fat tree)"
        return "n/a (diameter %s)" % r.get("diameter", "?")
    if st == "timeout":
        return "timeout (>%s s)" % r.get("timeout_s", "?")
    if st != "ok":
        return "FAIL(%s)" % st
    vls = r.get("vls") or "-"
    secs = fmt_secs(r["seconds"]) + " s" if r.get("seconds") not in ("", None) else "-"
    rss = "%d MB" % round(int(r["rss_kb"]) / 1024) if r.get("rss_kb") not in ("", None) else "- MB"
    s = "%s / %s / %s" % (vls, secs, rss)
    if r.get("side") == "ours" and r.get("deadlock_free") == "false":
        s += " (NOT deadlock free)"
    return s


def engine_title(side, engine):
    if side == "opensm":
        return "OpenSM " + engine
    e, _, base = engine.partition("-")
    if e in ("dfdn", "dfd2"):
        return "ibfabric %s (%s)" % (e, base or "minhop")
    return "ibfabric " + engine


def markdown(rows, header):
    lines = [header, ""]
    if not rows:
        return "\n".join(lines + ["(no results)"])
    topos = list(dict.fromkeys(r["spec"] for r in rows))
    engines = list(dict.fromkeys((r["side"], r["engine"]) for r in rows if r["side"] in ("opensm", "ours")))
    lines.append("| topology | switches / HCAs | diameter | "
                 + " | ".join(engine_title(s, e) for s, e in engines) + " |")
    lines.append("|---|---|---|" + "---|" * len(engines))
    notes = []
    for spec in topos:
        rs = [r for r in rows if r["spec"] == spec]
        first = rs[0]
        if first["side"] == "gen":
            lines.append("| %s | FAIL(%s) | | %s |" % (spec, first["status"], " | ".join("-" for _ in engines)))
            notes.append("%s: %s" % (spec, first.get("note", "")))
            continue
        by = {(r["side"], r["engine"]): r for r in rs}
        lines.append("| %s | %s / %s | %s | %s |" % (
            first["topology"], first["switches"], first["hcas"], first["diameter"],
            " | ".join(cell(by.get(k)) for k in engines)))
        for k in engines:
            r = by.get(k)
            if r and r["status"] not in ("ok", "skipped") and r.get("note"):
                notes.append("%s, %s: %s" % (first["topology"], engine_title(*k), r["note"]))
    lines += ["",
              "Cells: VLs / routing seconds / peak RSS. OpenSM: VLs needed as OpenSM logs them "
              "(dfsssp, lash; '-' for nue, which logs no count and uses all 8 VLs as layers), "
              "`t_route_s` from its log (engine compute plus queuing the LFT MADs; discovery over "
              "ibsim and SL2VL programming not included), VmHWM of the opensm process (ibsim not "
              "included). ibfabric: VLs found by the verifier in the written tables (for DF-SSSP the "
              "VLs its layers need before it spreads routes over all VLs allowed), the engine's "
              "`seconds` from `route --json` (parsing, verification and file writing not included), "
              "peak RSS of the whole `ibfabric route` command (parse, route, verify, write files) "
              "from `/usr/bin/time -v`. Failures: FAIL(status) with run_engine.sh's status "
              "(routing_failed, init_errors, opensm_exited, ...) or ibfabric's exit; "
              "timeout (>N s): OpenSM's limit counts from opensm's start, so it includes discovery."]
    if notes:
        lines += ["", "Failure messages:", ""] + ["* " + n for n in notes]
    return "\n".join(lines)


def read_tsv(path):
    """Rows and the '# ' header line (date, nproc, command) of our TSV."""
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    header = next((l[2:] for l in lines if l.startswith("# ")), "")
    body = [l for l in lines if l.strip() and not l.startswith("#")]
    return list(csv.DictReader(body, delimiter="\t")), header


def tool_versions(a):
    parts = []
    try:
        v = subprocess.run([a.bin, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        if v:
            parts.append(v)
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        g = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                           capture_output=True, text=True, timeout=30).stdout.strip()
        if g:
            parts[-1:] = [(parts[-1] if parts else "ibfabric") + " (git %s)" % g]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        v = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "opensm"],
                           capture_output=True, text=True, timeout=30).stdout.strip()
        if v:
            parts.append("opensm %s" % v)
    except (OSError, subprocess.SubprocessError):
        pass
    return ", ".join(parts)


def nproc():
    try:
        return subprocess.run(["nproc"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return str(len(os.sched_getaffinity(0)))


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topos", default=DEFAULT_TOPOS, help="space-separated specs [%(default)s]")
    ap.add_argument("--opensm-engines", default=DEFAULT_OPENSM, help="[%(default)s]; '' for none")
    ap.add_argument("--ours", default=DEFAULT_OURS, help="[%(default)s]; '' for none")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per run, each side [%(default)s]")
    ap.add_argument("--tsv", default=os.path.join(ROOT, "bench-out", "compare.tsv"), help="raw rows [%(default)s]")
    ap.add_argument("--md", help="also write the markdown table to this file")
    ap.add_argument("--workdir", help="for topology files and run outputs (default: a new temp dir, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep topology files and OpenSM run dirs (our big table files are always deleted)")
    ap.add_argument("--opensm-dir", default=os.environ.get("OPENSM_DIR", os.path.join(ROOT, "..", "shared", "opensm")))
    ap.add_argument("--opensm-logflags", default="0x03", help="OpenSM log_flags [%(default)s: no dump files]")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "ibfabric"))
    ap.add_argument("--bin-wait", type=int, default=900, help="seconds to wait for a missing binary (rebuild) [%(default)s]")
    ap.add_argument("--from-tsv", metavar="TSV", help="only print the markdown table of an existing TSV")
    a = ap.parse_args()

    if a.from_tsv:
        rows, header = read_tsv(a.from_tsv)
        print(markdown(rows, header or "Results from `%s`." % a.from_tsv))
        return 0

    a.opensm_dir = os.path.abspath(a.opensm_dir)
    binary = Binary(os.path.abspath(a.bin), a.bin_wait)
    if not binary.ready():
        sys.exit("no ibfabric binary at %s (cargo build --release)" % a.bin)
    osm_engines = a.opensm_engines.split()
    our_labels = a.ours.split()
    if osm_engines and not os.access(os.path.join(a.opensm_dir, "run_engine.sh"), os.X_OK):
        sys.exit("no run_engine.sh in %s (set --opensm-dir or OPENSM_DIR)" % a.opensm_dir)
    a.have_time = os.access(TIME_BIN, os.X_OK)
    notes_hdr = []
    if not a.have_time:
        msg = ("%s is missing (Debian package `time`: apt-get install time): "
               "ibfabric's peak RSS is not measured ('-')" % TIME_BIN)
        log("WARNING: " + msg)
        notes_hdr.append(msg)

    started = datetime.datetime.now().astimezone()
    cmdline = shlex.join([os.path.relpath(sys.argv[0], os.getcwd()) if os.path.exists(sys.argv[0]) else sys.argv[0]] + sys.argv[1:])
    try:
        load = "%.2f" % os.getloadavg()[0]
    except OSError:
        load = "?"
    header = ("Measured %s on %s, nproc %s (load avg %s at start); %s. Command: `%s`" % (
        started.strftime("%Y-%m-%d %H:%M %Z"), socket.gethostname(), nproc(), load,
        tool_versions(a), cmdline))

    tmp = a.workdir is None
    work = tempfile.mkdtemp(prefix="ibf-compare-") if tmp else os.path.abspath(a.workdir)
    netdir = os.path.join(work, "nets")
    os.makedirs(netdir, exist_ok=True)
    tsv_dir = os.path.dirname(os.path.abspath(a.tsv))
    os.makedirs(tsv_dir, exist_ok=True)
    log("work dir: %s\n%s" % (work, header))

    rows = []
    tsvf = open(a.tsv, "w", newline="")
    tsvf.write("# " + header + "\n")
    tsvf.write("\t".join(COLS) + "\n")
    tsvf.flush()

    def emit(topo, r):
        row = dict({k: "" for k in COLS}, **{k: topo.get(k, "") for k in ("topology", "spec", "switches", "hcas", "diameter")})
        row.update({k: ("" if v is None else v) for k, v in r.items()})
        row = {k: clean(row[k]) if k == "note" else str(row[k]) for k in COLS}
        rows.append(row)
        tsvf.write("\t".join(row[k] for k in COLS) + "\n")
        tsvf.flush()
        log("  -> %-7s %-12s %s%s" % (row["side"], row["engine"], cell(row),
                                        ("  [%s]" % row["note"]) if row["note"] and row["status"] != "ok" else ""))

    def on_term(signum, frame):
        raise KeyboardInterrupt  # stop the running group, keep what was measured
    signal.signal(signal.SIGTERM, on_term)

    interrupted = False
    try:
        for spec in a.topos.split():
            log("== %s" % spec)
            topo, err = prepare_topology(binary, spec, netdir, a.timeout)
            if topo is None:
                emit({"spec": spec, "topology": spec}, {"side": "gen", "engine": "", "status": "gen_failed", "note": err})
                continue
            log("   %s: %s switches, %s HCAs, diameter %s" % (topo["topology"], topo["switches"], topo["hcas"], topo["diameter"]))
            for e in osm_engines:
                out = os.path.join(work, "osm_%s_%s" % (safe_name(spec), e))
                shutil.rmtree(out, ignore_errors=True)
                log("   opensm %s ..." % e)
                try:
                    r = run_opensm(a, topo, e, out)
                except Exception as ex:  # never let one run abort the matrix
                    r = {"side": "opensm", "engine": e, "status": "script_error", "note": repr(ex)}
                emit(topo, r)
                if not a.keep:
                    shutil.rmtree(out, ignore_errors=True)
            for label in our_labels:
                out = os.path.join(work, "ours_%s_%s" % (safe_name(spec), label))
                shutil.rmtree(out, ignore_errors=True)
                log("   ibfabric %s ..." % label)
                try:
                    r = run_ours(a, binary, topo, label, out)
                except Exception as ex:
                    r = {"side": "ours", "engine": label, "status": "script_error", "note": repr(ex)}
                emit(topo, r)
                shutil.rmtree(out, ignore_errors=True)  # LFT dumps: hundreds of MB on big fabrics
            if not a.keep:
                try:
                    os.unlink(topo["net"])
                except OSError:
                    pass
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: the running job was stopped; writing what was measured")
    finally:
        tsvf.close()
        if tmp and not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        elif a.keep:
            log("kept: %s" % work)

    if binary.changed:
        notes_hdr.append("the ibfabric binary changed (rebuilt) during this run")
    if interrupted:
        notes_hdr.append("run interrupted: incomplete")
    text = markdown(rows, header + "".join("\n\nNote: %s." % n for n in notes_hdr))
    tsv_shown = os.path.abspath(a.tsv)
    if tsv_shown.startswith(ROOT + os.sep):
        tsv_shown = os.path.relpath(tsv_shown, ROOT)
    text += "\n\nRaw rows: `%s`." % tsv_shown
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text + "\n")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
