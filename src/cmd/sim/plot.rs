//! The simulation's SVG: ROR bandwidth per setup and uniform throughput
//! against the inter-subnet share.

use super::{SimReport, rings_of};
use std::fmt::Write;

const DASHES: [&str; 4] = ["", "6,3", "2,2", "8,3,2,3"];

const COLORS: [&str; 6] = [
    "#9ecae1", "#fd8d3c", "#31a354", "#756bb1", "#e6550d", "#636363",
];

/// Two panels: ROR bandwidth per setup (bars: average, whiskers: min-max)
/// and uniform throughput against ISP (one line per setup and algorithm).
pub(super) fn plot(r: &SimReport) -> String {
    let algs: Vec<&str> = r
        .setups
        .first()
        .map(|s| s.results.iter().map(|x| x.algorithm.as_str()).collect())
        .unwrap_or_default();
    let (w, h, top, left, ph) = (980.0, 430.0, 60.0, 70.0, 300.0);
    let pw = 400.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Arial, sans-serif" font-size="11">
<rect width="{w}" height="{h}" fill="white"/>
<text x="{left}" y="22" font-size="14" font-weight="bold">Inter-subnet routing, {}-level simulation (engine {}, links {} MB/s)</text>
<text x="{left}" y="40" fill="#555">Left: HPCC random-order rings ({} rings; bar = average, whisker = min..max). Right: uniform traffic, {}% hot spot.</text>
"##,
        r.model,
        r.engine,
        r.link_mbs,
        rings_of(r),
        r.hot_spot * 100.0
    );
    left_panel(&mut s, r, &algs, (top, left, ph, pw));
    let rx = left + pw + 90.0;
    right_panel(&mut s, r, (top, rx, ph, pw));
    legend(&mut s, r, &algs, (h, left, rx));
    s.push_str("</svg>\n");
    s
}

/// ROR bandwidth per setup: bars (average) with whiskers (min..max).
fn left_panel(
    s: &mut String,
    r: &SimReport,
    algs: &[&str],
    (top, left, ph, pw): (f64, f64, f64, f64),
) {
    // Left panel.
    let ymax = r
        .setups
        .iter()
        .flat_map(|s| {
            s.results
                .iter()
                .filter_map(|x| x.traffic.as_ref())
                .map(|t| t.nor_mbs.max(t.ror_max_mbs))
        })
        .fold(1.0f64, f64::max);
    let y = |v: f64| top + ph - v / ymax * ph;
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="#333"/>"##,
        top + ph
    );
    for i in 0..=4 {
        let v = ymax * i as f64 / 4.0;
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end">{v:.0}</text><line x1="{left}" y1="{yy}" x2="{}" y2="{yy}" stroke="#ddd"/>"##,
            left - 4.0,
            y(v) + 4.0,
            left + pw,
            yy = y(v)
        );
    }
    let _ = writeln!(
        s,
        r##"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">MB/s per host</text>"##,
        top + ph / 2.0
    );
    let group = pw / r.setups.len().max(1) as f64;
    let bw = group * 0.8 / algs.len().max(1) as f64;
    for (si, st) in r.setups.iter().enumerate() {
        let x0 = left + si as f64 * group + group * 0.1;
        for (ai, x) in st.results.iter().enumerate() {
            let Some(t) = &x.traffic else { continue };
            let bx = x0 + ai as f64 * bw;
            let c = COLORS[ai % COLORS.len()];
            let _ = writeln!(
                s,
                r##"<rect x="{bx:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{c}" stroke="#333" stroke-width="0.5"><title>{}, {}: ROR avg {:.0} MB/s (min {:.0}, max {:.0})</title></rect>"##,
                y(t.ror_avg_mbs),
                bw * 0.9,
                top + ph - y(t.ror_avg_mbs),
                st.name,
                x.algorithm,
                t.ror_avg_mbs,
                t.ror_min_mbs,
                t.ror_max_mbs
            );
            let cx = bx + bw * 0.45;
            let _ = writeln!(
                s,
                r##"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="#000"/>"##,
                y(t.ror_min_mbs),
                y(t.ror_max_mbs)
            );
        }
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"##,
            x0 + group * 0.4,
            top + ph + 16.0,
            st.name
        );
    }
}

/// Uniform throughput against the inter-subnet share, one line per setup
/// and algorithm.
fn right_panel(s: &mut String, r: &SimReport, (top, rx, ph, pw): (f64, f64, f64, f64)) {
    // Right panel.
    let xr = |isp: f64| rx + isp / 100.0 * pw;
    let yr = |t: f64| top + ph - t / 100.0 * ph;
    let _ = writeln!(
        s,
        r##"<line x1="{rx}" y1="{top}" x2="{rx}" y2="{}" stroke="#333"/><line x1="{rx}" y1="{}" x2="{}" y2="{}" stroke="#333"/>"##,
        top + ph,
        top + ph,
        rx + pw,
        top + ph
    );
    for i in 0..=4 {
        let v = 25.0 * i as f64;
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end">{v:.0}%</text><text x="{}" y="{}" text-anchor="middle">{v:.0}</text>"##,
            rx - 4.0,
            yr(v) + 4.0,
            xr(v),
            top + ph + 14.0
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" text-anchor="middle">inter-subnet traffic (ISP, %)</text>"##,
        rx + pw / 2.0,
        top + ph + 30.0
    );
    for (si, st) in r.setups.iter().enumerate() {
        for (ai, x) in st.results.iter().enumerate() {
            let Some(t) = x.traffic.as_ref().filter(|t| !t.uniform.is_empty()) else {
                continue;
            };
            let pts: Vec<String> = t
                .uniform
                .iter()
                .map(|&(isp, t)| format!("{:.1},{:.1}", xr(isp as f64), yr(t)))
                .collect();
            let _ = writeln!(
                s,
                r##"<polyline points="{}" fill="none" stroke="{}" stroke-width="2" stroke-dasharray="{}"><title>{}, {}</title></polyline>"##,
                pts.join(" "),
                COLORS[ai % COLORS.len()],
                DASHES[si % DASHES.len()],
                st.name,
                x.algorithm
            );
        }
    }
}

fn legend(s: &mut String, r: &SimReport, algs: &[&str], (h, left, rx): (f64, f64, f64)) {
    // Legend.
    let ly = h - 24.0;
    for (ai, a) in algs.iter().enumerate() {
        let lx = left + ai as f64 * 110.0;
        let _ = writeln!(
            s,
            r##"<rect x="{lx}" y="{}" width="12" height="12" fill="{}" stroke="#333"/><text x="{}" y="{ly}">{a}</text>"##,
            ly - 10.0,
            COLORS[ai % COLORS.len()],
            lx + 16.0
        );
    }
    for (si, st) in r.setups.iter().enumerate() {
        let lx = rx + si as f64 * 110.0;
        let _ = writeln!(
            s,
            r##"<line x1="{lx}" y1="{}" x2="{}" y2="{}" stroke="#333" stroke-width="2" stroke-dasharray="{}"/><text x="{}" y="{ly}">{}</text>"##,
            ly - 4.0,
            lx + 24.0,
            ly - 4.0,
            DASHES[si % DASHES.len()],
            lx + 28.0,
            st.name
        );
    }
}
