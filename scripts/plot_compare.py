#!/usr/bin/env python3
"""Plots compare_engines.py's TSV as a hand-written SVG (standard library only).

Two panels, one group of bars per topology, one bar per engine (OpenSM's
engines in blues, ibfabric's in oranges):
  * routing time in seconds, log scale (OpenSM `t_route_s`, ibfabric `seconds`);
    a timed-out run is a hatched bar up to its timeout;
  * virtual lanes (VLs needed as OpenSM logs them; VLs found by ibfabric's
    verifier), with the 8 data VLs of the hardware as a dashed line.
Markers at the foot of a bar slot: x = failed, T = timed out (VL panel),
n/r = not reported (OpenSM nue logs no VL count), n/a = not applicable
(dfd2 on a diameter other than 2).

Usage: scripts/plot_compare.py bench-out/compare.tsv bench-out/compare.svg
       rsvg-convert bench-out/compare.svg -o compare.png   # to look at it
"""

import csv
import math
import sys
from xml.sax.saxutils import escape

OPENSM_COLORS = ["#9ecae1", "#4292c6", "#08519c", "#c6dbef", "#2171b5", "#6baed6"]
OURS_COLORS = ["#fdae6b", "#e6550d", "#a63603", "#fdd0a2", "#f16913", "#7f2704"]
BAR_W, BAR_GAP, GROUP_GAP = 15, 2, 26
LEFT, RIGHT = 78, 24
PANEL_H = 250
MIN_WIDTH = 860
FONT = "DejaVu Sans, Arial, Helvetica, sans-serif"


def read_tsv(path):
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    header = next((l[2:] for l in lines if l.startswith("# ")), "")
    body = [l for l in lines if l.strip() and not l.startswith("#")]
    return list(csv.DictReader(body, delimiter="\t")), header


def engine_title(side, engine):
    if side == "opensm":
        return "OpenSM " + engine
    e, _, base = engine.partition("-")
    if e in ("dfdn", "dfd2"):
        return "ibfabric %s (%s base)" % (e, base or "minhop")
    return "ibfabric " + engine


def num(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def fmt_time(s):
    if s >= 1:
        return "%g s" % s
    if s >= 1e-3:
        return "%g ms" % round(s * 1e3, 6)
    return "%g µs" % round(s * 1e6, 6)


class Svg:
    def __init__(self):
        self.parts = []

    def add(self, s):
        self.parts.append(s)

    def text(self, x, y, s, size=11, anchor="start", weight="normal", fill="#222", rotate=None, extra=""):
        tr = ' transform="rotate(%d %.1f %.1f)"' % (rotate, x, y) if rotate is not None else ""
        self.add('<text x="%.1f" y="%.1f" font-size="%s" text-anchor="%s" font-weight="%s" fill="%s"%s%s>%s</text>'
                 % (x, y, size, anchor, weight, fill, tr, extra, escape(str(s))))

    def line(self, x1, y1, x2, y2, stroke="#000", width=1, dash=None):
        d = ' stroke-dasharray="%s"' % dash if dash else ""
        self.add('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%s"%s/>'
                 % (x1, y1, x2, y2, stroke, width, d))

    def rect(self, x, y, w, h, fill, stroke="none", title=None, extra=""):
        t = "<title>%s</title>" % escape(title) if title else ""
        self.add('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" stroke="%s" stroke-width="0.7"%s>%s</rect>'
                 % (x, y, w, h, fill, stroke, extra, t))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows, header = read_tsv(sys.argv[1])
    rows = [r for r in rows if r.get("side") in ("opensm", "ours")]
    if not rows:
        sys.exit("no result rows in %s" % sys.argv[1])
    topos = list(dict.fromkeys(r["spec"] for r in rows))
    engines = list(dict.fromkeys((r["side"], r["engine"]) for r in rows))
    engines.sort(key=lambda k: 0 if k[0] == "opensm" else 1)  # stable: keeps order within a side
    by = {(r["spec"], r["side"], r["engine"]): r for r in rows}
    tinfo = {}
    for r in rows:
        tinfo.setdefault(r["spec"], (r.get("topology") or r["spec"], r.get("switches", ""), r.get("hcas", "")))
    colors, no, nu = {}, 0, 0
    for k in engines:
        if k[0] == "opensm":
            colors[k] = OPENSM_COLORS[no % len(OPENSM_COLORS)]
            no += 1
        else:
            colors[k] = OURS_COLORS[nu % len(OURS_COLORS)]
            nu += 1

    bars_w = len(engines) * (BAR_W + BAR_GAP) - BAR_GAP
    width = max(LEFT + (bars_w + GROUP_GAP) * len(topos) + RIGHT, MIN_WIDTH)
    plot_w = width - LEFT - RIGHT
    group_w = plot_w / len(topos)
    # legend: OpenSM's engines on one line, ibfabric's on the next
    legend_cols = max(1, int((width - LEFT - RIGHT) // 210))
    legend_pos, row = {}, 0
    for side in ("opensm", "ours"):
        ks = [k for k in engines if k[0] == side]
        for i, k in enumerate(ks):
            legend_pos[k] = (i % legend_cols, row + i // legend_cols)
        row += -(-len(ks) // legend_cols) if ks else 0
    legend_rows = max(row, 1)
    title_h = 58
    legend_h = legend_rows * 18 + 8
    panel1_y = title_h + legend_h + 30
    panel2_y = panel1_y + PANEL_H + 92
    height = panel2_y + PANEL_H + 104

    svg = Svg()
    svg.add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s">'
            % (width, height, width, height, FONT))
    svg.add('<defs><pattern id="hatch" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
            '<rect width="5" height="5" fill="white"/><line x1="0" y1="0" x2="0" y2="5" stroke="#555" stroke-width="2"/>'
            '</pattern></defs>')
    svg.rect(0, 0, width, height, "white")
    svg.text(LEFT, 24, "Routing engines: ibfabric vs OpenSM 3.3.23 (on ibsim), same generated topologies",
             size=15, weight="bold")
    sub = header.split(" Command:")[0] if header else sys.argv[1]
    maxc = int((width - LEFT - RIGHT) / 5.6)
    svg.text(LEFT, 42, sub if len(sub) <= maxc else sub[:maxc - 3] + "...", size=10, fill="#555")

    # legend
    lx0, ly0 = LEFT, title_h + 4
    col_w = (width - LEFT - RIGHT) / legend_cols
    for k in engines:
        c, rw = legend_pos[k]
        x = lx0 + c * col_w
        y = ly0 + rw * 18
        svg.rect(x, y, 13, 13, colors[k], stroke="#333")
        svg.text(x + 19, y + 11, engine_title(*k), size=11)

    def slot_x(ti, ei):
        return LEFT + ti * group_w + (group_w - bars_w) / 2 + ei * (BAR_W + BAR_GAP)

    def x_labels(y0):
        for ti, spec in enumerate(topos):
            cx = LEFT + ti * group_w + group_w / 2
            name, sw, hca = tinfo[spec]
            svg.text(cx, y0 + PANEL_H + 16, name, size=11, anchor="middle")
            if sw:
                svg.text(cx, y0 + PANEL_H + 30, "%s sw / %s HCAs" % (sw, hca), size=9.5, anchor="middle", fill="#555")
            if ti:
                svg.line(LEFT + ti * group_w, y0 + PANEL_H, LEFT + ti * group_w, y0 + PANEL_H + 5, "#888")
        svg.text(LEFT + plot_w / 2, y0 + PANEL_H + 50, "topology (switches / HCAs)", size=12, anchor="middle")

    def marker(ti, ei, y0, label, color="#b00"):
        x = slot_x(ti, ei) + BAR_W / 2
        if len(label) == 1:
            svg.text(x, y0 + PANEL_H - 4, label, size=12, anchor="middle", fill=color, weight="bold")
        else:  # vertical, reading upwards from the axis
            svg.text(x + 3.5, y0 + PANEL_H - 3, label, size=9.5, anchor="start", fill=color, rotate=-90)

    def frame(y0, title, ylabel):
        svg.text(LEFT, y0 - 12, title, size=13, weight="bold")
        svg.line(LEFT, y0 + PANEL_H, LEFT + plot_w, y0 + PANEL_H, "#000", 1.2)
        svg.line(LEFT, y0, LEFT, y0 + PANEL_H, "#000", 1.2)
        svg.text(18, y0 + PANEL_H / 2, ylabel, size=12, anchor="middle", rotate=-90)

    # ---- panel 1: routing time, log scale
    y0 = panel1_y
    vals = []
    for r in rows:
        if r["status"] == "ok" and (num(r.get("seconds")) or 0) > 0:
            vals.append(num(r["seconds"]))
        elif r["status"] == "timeout" and num(r.get("timeout_s")):
            vals.append(num(r["timeout_s"]))
    frame(y0, "Routing time (log scale; hatched = timed out at the limit)", "routing time (s, log scale)")
    if vals:
        lo = math.floor(math.log10(min(vals)))
        hi = max(math.ceil(math.log10(max(vals))), lo + 1)
        scale = lambda v: (math.log10(v) - lo) / (hi - lo) * PANEL_H
        for k in range(lo, hi + 1):
            y = y0 + PANEL_H - (k - lo) / (hi - lo) * PANEL_H
            if k > lo:
                svg.line(LEFT, y, LEFT + plot_w, y, "#ddd")
            svg.line(LEFT - 4, y, LEFT, y)
            svg.text(LEFT - 7, y + 4, fmt_time(10.0 ** k), size=10, anchor="end")
            if k < hi:
                for m in range(2, 10):
                    ym = y0 + PANEL_H - (math.log10(m * 10.0 ** k) - lo) / (hi - lo) * PANEL_H
                    svg.line(LEFT - 2, ym, LEFT, ym, "#666", 0.6)
        for ti, spec in enumerate(topos):
            for ei, (side, eng) in enumerate(engines):
                r = by.get((spec, side, eng))
                x = slot_x(ti, ei)
                label = "%s, %s" % (tinfo[spec][0], engine_title(side, eng))
                if r is None:
                    continue
                st = r["status"]
                s = num(r.get("seconds"))
                if st == "ok" and s and s > 0:
                    h = max(scale(s), 1.5)
                    svg.rect(x, y0 + PANEL_H - h, BAR_W, h, colors[(side, eng)], stroke="#333",
                             title="%s: %s" % (label, fmt_time(s)))
                elif st == "timeout" and num(r.get("timeout_s")):
                    t = num(r["timeout_s"])
                    h = scale(t)
                    svg.rect(x, y0 + PANEL_H - h, BAR_W, h, colors[(side, eng)], stroke="#333")
                    svg.rect(x, y0 + PANEL_H - h, BAR_W, h, "url(#hatch)", stroke="#333",
                             title="%s: timed out after %g s" % (label, t), extra=' fill-opacity="0.55"')
                    svg.text(x + BAR_W / 2, y0 + PANEL_H - h - 4, ">%gs" % t, size=8.5, anchor="middle", fill="#b00")
                elif st == "skipped":
                    marker(ti, ei, y0, "n/a", "#888")
                elif st == "ok":
                    marker(ti, ei, y0, "n/r", "#888")
                else:
                    marker(ti, ei, y0, "x")
    x_labels(y0)

    # ---- panel 2: VLs
    y0 = panel2_y
    vls = [num(r.get("vls")) for r in rows if r["status"] == "ok" and num(r.get("vls")) is not None]
    top = max([8.0] + vls)
    frame(y0, "Virtual lanes needed", "VLs")
    scale = lambda v: v / top * PANEL_H
    step = 1 if top <= 10 else 2
    for k in range(0, int(top) + 1, step):
        y = y0 + PANEL_H - scale(k)
        if k:
            svg.line(LEFT, y, LEFT + plot_w, y, "#e4e4e4")
        svg.line(LEFT - 4, y, LEFT, y)
        svg.text(LEFT - 7, y + 4, k, size=10, anchor="end")
    y8 = y0 + PANEL_H - scale(8)
    svg.line(LEFT, y8, LEFT + plot_w, y8, "#b00", 1, dash="5,4")
    svg.text(LEFT + plot_w - 2, y8 - 4, "8 data VLs (hardware limit)", size=9.5, anchor="end", fill="#b00")
    for ti, spec in enumerate(topos):
        for ei, (side, eng) in enumerate(engines):
            r = by.get((spec, side, eng))
            if r is None:
                continue
            x = slot_x(ti, ei)
            st = r["status"]
            v = num(r.get("vls"))
            if st == "ok" and v is not None:
                h = max(scale(v), 1.5)
                svg.rect(x, y0 + PANEL_H - h, BAR_W, h, colors[(side, eng)], stroke="#333",
                         title="%s, %s: %g VLs" % (tinfo[spec][0], engine_title(side, eng), v))
                not_df = side == "ours" and r.get("deadlock_free") == "false"
                svg.text(x + BAR_W / 2, y0 + PANEL_H - h - 3, "%g%s" % (v, "*" if not_df else ""), size=9, anchor="middle")
            elif st == "ok":
                marker(ti, ei, y0, "n/r", "#888")
            elif st == "skipped":
                marker(ti, ei, y0, "n/a", "#888")
            elif st == "timeout":
                marker(ti, ei, y0, "T")
            else:
                marker(ti, ei, y0, "x")
    x_labels(y0)
    svg.text(LEFT, height - 26, "Markers: x = failed, T = timed out, n/r = not reported (OpenSM logs no VL count "
             "for nue), n/a = not applicable (dfd2 needs diameter 2),", size=10, fill="#444")
    svg.text(LEFT, height - 12, "* = not deadlock free. OpenSM: t_route_s from its log; ibfabric: engine seconds "
             "from route --json. Hover a bar for its value.", size=10, fill="#444")

    svg.add("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(svg.parts) + "\n")


if __name__ == "__main__":
    main()
