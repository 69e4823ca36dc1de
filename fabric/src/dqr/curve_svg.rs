//! The tolerance curves drawn as one SVG: P(k faults tolerated) against
//! k, one polyline per curve (a label with "paper" draws dashed).

use std::fmt::Write;

/// An SVG of `curves` (label, percent per k from k = 1).
pub fn svg(curves: &[(String, Vec<f64>)]) -> String {
    let kmax = curves.iter().map(|c| c.1.len()).max().unwrap_or(1).max(2);
    let (left, top, pw, ph) = (60.0, 40.0, 520.0, 320.0);
    let legend_h = 16.0 * curves.len() as f64;
    let (w, h) = (left + pw + 30.0, top + ph + 50.0 + legend_h);
    let x = |k: usize| left + (k - 1) as f64 / (kmax - 1) as f64 * pw;
    let y = |p: f64| top + ph - p / 100.0 * ph;
    let colors = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
        "#bcbd22", "#17becf",
    ];
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Arial, sans-serif" font-size="11">
<rect width="{w}" height="{h}" fill="white"/>
<text x="{left}" y="22" font-size="14" font-weight="bold">DQR: probability of tolerating k successive link faults</text>"##
    );
    for i in 0..=4 {
        let p = 25.0 * i as f64;
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{yy}" x2="{}" y2="{yy}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{p:.0}%</text>"##,
            left + pw,
            left - 4.0,
            y(p) + 4.0,
            yy = y(p)
        );
    }
    for k in 1..=kmax {
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="middle">{k}</text>"##,
            x(k),
            top + ph + 14.0
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" text-anchor="middle">link faults k</text>"##,
        left + pw / 2.0,
        top + ph + 30.0
    );
    for (i, (label, ps)) in curves.iter().enumerate() {
        let c = colors[i % colors.len()];
        let dash = if label.contains("paper") { "6,3" } else { "" };
        let pts: Vec<String> = ps
            .iter()
            .enumerate()
            .map(|(k, &p)| format!("{:.1},{:.1}", x(k + 1), y(p)))
            .collect();
        // Markers: a curve of one point (a figure the paper states alone)
        // shows too.
        for (k, &p) in ps.iter().enumerate() {
            let _ = writeln!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}"/>"##,
                x(k + 1),
                y(p)
            );
        }
        let ly = top + ph + 48.0 + 16.0 * i as f64;
        let _ = writeln!(
            s,
            r##"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2" stroke-dasharray="{dash}"><title>{label}</title></polyline>
<line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="{c}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{}" y="{ly}">{label}</text>"##,
            pts.join(" "),
            ly - 4.0,
            left + 24.0,
            ly - 4.0,
            left + 30.0
        );
    }
    s.push_str("</svg>\n");
    s
}
