#!/usr/bin/env python3
"""Plots compare_engines.py's TSV as an SVG: routing seconds (log scale) and
VLs per topology, one bar per engine (OpenSM's and ibfabric's side by side).

Usage: scripts/plot_compare.py bench-out/compare.tsv docs/compare.svg
"""

import csv
import math
import sys

COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    topos = list(dict.fromkeys(r["topology"] for r in rows))
    engines = list(dict.fromkeys((r["side"], r["engine"]) for r in rows))
    by = {(r["topology"], r["side"], r["engine"]): r for r in rows}
    gw = 26 + 14 * len(engines)  # group width
    left, top, ph = 70, 40, 220
    width = max(left + gw * len(topos) + 190, 720)
    height = top + 2 * (ph + 80) + 20
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (width, height),
           '<rect width="100%" height="100%" fill="white"/>']

    def panel(y0, title, value, log):
        vals = [value(by.get((t, s, e))) for t in topos for s, e in engines]
        vals = [v for v in vals if v is not None and v > 0]
        if not vals:
            return
        if log:
            lo = math.floor(math.log10(min(vals)))
            hi = math.ceil(math.log10(max(vals)))
            hi = max(hi, lo + 1)
            scale = lambda v: (math.log10(v) - lo) / (hi - lo)
            ticks = [(10 ** k, "%g" % 10 ** k) for k in range(lo, hi + 1)]
        else:
            hi = max(vals)
            scale = lambda v: v / hi
            ticks = [(k, str(k)) for k in range(0, int(hi) + 1)]
        out.append('<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>' % (left, y0 - 12, title))
        for tv, label in ticks:
            y = y0 + ph - scale(tv) * ph if tv > 0 or not log else y0 + ph
            out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (left, left + gw * len(topos), y, y))
            out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 4, y + 4, label))
        for ti, t in enumerate(topos):
            x0 = left + ti * gw + 13
            for ei, (s, e) in enumerate(engines):
                r = by.get((t, s, e))
                v = value(r)
                x = x0 + ei * 14
                if v is None or v <= 0:
                    mark = "" if r is None else ("x" if r["status"] != "up" else "-")
                    out.append('<text x="%d" y="%d" fill="%s" text-anchor="middle">%s</text>' % (x + 6, y0 + ph - 3, COLORS[ei % 8], mark))
                    continue
                h = max(scale(v) * ph, 1.5)
                out.append('<rect x="%d" y="%.1f" width="12" height="%.1f" fill="%s"%s><title>%s %s %s: %s</title></rect>' % (
                    x, y0 + ph - h, h, COLORS[ei % 8], ' stroke="black" stroke-width="0.6"' if s == "ours" else "", t, s, e, v))
            out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % (left + ti * gw + gw / 2, y0 + ph + 14, t))
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="black"/>' % (left, left + gw * len(topos), y0 + ph, y0 + ph))

    def secs(r):
        if r is None or r["status"] != "up" or not r["seconds"]:
            return None
        return float(r["seconds"])

    def vls(r):
        if r is None or r["status"] != "up" or not r["vls"]:
            return None
        return float(r["vls"])

    panel(top + 10, "Routing time, seconds (log scale; x = failed or timed out)", secs, True)
    panel(top + ph + 90, "Virtual lanes needed (x = failed, - = not reported: OpenSM nue logs no VL count)", vls, False)
    lx = left + gw * len(topos) + 20
    for ei, (s, e) in enumerate(engines):
        y = top + 20 + ei * 18
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"%s/>' % (lx, y, COLORS[ei % 8], ' stroke="black"' if s == "ours" else ""))
        out.append('<text x="%d" y="%d">%s %s</text>' % (lx + 18, y + 10, "ibfabric" if s == "ours" else "OpenSM", e))
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
