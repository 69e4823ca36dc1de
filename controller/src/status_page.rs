//! The read-only status page (`GET /status` beside the metrics, when the
//! config turns it on): the controller's state as `ibfabric status --json`
//! shows it, rendered on the server as HTML with an SVG picture of
//! subnets and routers. No script: a page an operator's browser loads over
//! an SSH tunnel.

use proto::v1;
use std::fmt::Write;

/// Escapes text for HTML content and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What holds a subnet back from the published routes, if anything.
fn subnet_lag(s: &v1::SubnetState) -> Option<String> {
    if !s.left_out.is_empty() {
        return Some(format!("left out: {}", s.left_out));
    }
    if !s.live {
        return Some("not live: no report within the lease".into());
    }
    if s.held_mapping_version < s.mapping_version {
        return Some(format!(
            "holds mapping version {:#x}, {:#x} published",
            s.held_mapping_version, s.mapping_version
        ));
    }
    None
}

fn router_lag(r: &v1::RouterInfo) -> Option<String> {
    (r.held_version < r.egress_version).then(|| {
        format!(
            "holds egress version {:#x}, {:#x} published",
            r.held_version, r.egress_version
        )
    })
}

const OK: &str = "#2e7d32";
const LAG: &str = "#c62828";

/// The page for `state`.
pub fn render(state: &v1::ControllerState) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"10\"><title>ibfabric: {id}</title>\
         <style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:left}}\
         .lag{{color:{LAG};font-weight:bold}}.ok{{color:{OK}}}</style></head><body>\n\
         <h1>ibfabric controller {id}</h1>\n<p>{role}, term {term}, algorithm {alg}; store {store}</p>\n",
        id = esc(&state.controller_id),
        role = if state.leader { "leader" } else { "follower" },
        term = state.term,
        alg = esc(&state.algorithm),
        store = match &state.store {
            Some(s) if !s.ok =>
                format!("<span class=\"lag\">failing: {}</span>", esc(&s.last_error)),
            Some(s) if s.pending => "<span class=\"lag\">writes pending</span>".to_string(),
            _ => "<span class=\"ok\">ok</span>".to_string(),
        },
    );
    if !state.refused.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"lag\">Routes not published: {}</p>",
            esc(&state.refused)
        );
    }
    lags(&mut h, state);
    picture(&mut h, state);
    subnets(&mut h, state);
    routers(&mut h, state);
    h.push_str("</body></html>\n");
    h
}

fn lags(h: &mut String, state: &v1::ControllerState) {
    let mut items = Vec::new();
    for s in &state.subnets {
        if let Some(why) = subnet_lag(s) {
            items.push(format!(
                "subnet {} ({:#018x}): {why}",
                s.agent_id, s.subnet_prefix
            ));
        }
    }
    for r in &state.routers {
        if let Some(why) = router_lag(r) {
            items.push(format!(
                "router {} ({:#018x}): {why}",
                r.desc, r.router_guid
            ));
        }
    }
    h.push_str("<h2>What lags</h2>\n");
    if items.is_empty() {
        h.push_str(
            "<p class=\"ok\">Nothing: every subnet and router holds what is published.</p>\n",
        );
        return;
    }
    h.push_str("<ul id=\"lags\">\n");
    for i in items {
        let _ = writeln!(h, "<li class=\"lag\">{}</li>", esc(&i));
    }
    h.push_str("</ul>\n");
}

/// Subnets on the left, routers on the right, a line per router port
/// group; red where something lags.
fn picture(h: &mut String, state: &v1::ControllerState) {
    let row = 34;
    let n = state.subnets.len().max(state.routers.len()).max(1);
    let height = n * row + 20;
    let _ = writeln!(
        h,
        "<h2>Fabric</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"{height}\" role=\"img\" aria-label=\"subnets and routers\">"
    );
    let y = |i: usize| 20 + i * row;
    for (i, s) in state.subnets.iter().enumerate() {
        for g in &s.router_guids {
            if let Some(j) = state.routers.iter().position(|r| r.router_guid == *g) {
                let lag = subnet_lag(s).is_some() || router_lag(&state.routers[j]).is_some();
                let _ = writeln!(
                    h,
                    "<line x1=\"200\" y1=\"{}\" x2=\"440\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"/>",
                    y(i),
                    y(j),
                    if lag { LAG } else { "#9e9e9e" }
                );
            }
        }
    }
    for (i, s) in state.subnets.iter().enumerate() {
        let c = if subnet_lag(s).is_some() { LAG } else { OK };
        let _ = writeln!(
            h,
            "<rect x=\"10\" y=\"{}\" width=\"190\" height=\"24\" rx=\"4\" fill=\"{c}\"/><text x=\"18\" y=\"{}\" fill=\"#fff\" font-size=\"13\">{}</text>",
            y(i) - 12,
            y(i) + 5,
            esc(&s.agent_id)
        );
    }
    for (j, r) in state.routers.iter().enumerate() {
        let c = if router_lag(r).is_some() { LAG } else { OK };
        let name = if r.desc.is_empty() {
            format!("{:#018x}", r.router_guid)
        } else {
            r.desc.clone()
        };
        let _ = writeln!(
            h,
            "<rect x=\"440\" y=\"{}\" width=\"190\" height=\"24\" rx=\"4\" fill=\"{c}\"/><text x=\"448\" y=\"{}\" fill=\"#fff\" font-size=\"13\">{}</text>",
            y(j) - 12,
            y(j) + 5,
            esc(&name)
        );
    }
    h.push_str("</svg>\n");
}

fn subnets(h: &mut String, state: &v1::ControllerState) {
    h.push_str(
        "<h2>Subnets</h2>\n<table id=\"subnets\"><tr><th>agent</th><th>prefix</th><th>state</th>\
         <th>generation</th><th>switches / HCAs</th><th>engine</th><th>VLs / SLs</th>\
         <th>deadlock free</th><th>route s</th><th>link load</th><th>last change</th><th>mapping published / held</th></tr>\n",
    );
    for s in &state.subnets {
        let r = s.routing.clone().unwrap_or_default();
        let t = s.topology.unwrap_or_default();
        let change = r.update.as_ref().map_or("first route".to_string(), |u| {
            format!(
                "{}: {} links down, {} switches down, {} links back; {} flows rerouted, {} entries changed, {} drain stages, {:.2} s{}",
                u.method,
                u.links_failed,
                u.switches_failed,
                u.links_restored,
                u.flows_rerouted,
                u.entries_changed,
                u.stages,
                u.seconds,
                if u.reason.is_empty() { String::new() } else { format!(" ({})", u.reason) }
            )
        });
        let state_cell = match subnet_lag(s) {
            Some(why) => format!("<span class=\"lag\">{}</span>", esc(&why)),
            None => "<span class=\"ok\">live</span>".to_string(),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{:#018x}</td><td>{state_cell}</td><td>{}</td><td>{} / {}</td><td>{}</td>\
             <td>{} / {}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{:#x} / {:#x}</td></tr>",
            esc(&s.agent_id),
            s.subnet_prefix,
            s.generation,
            t.switches,
            t.cas,
            esc(&r.engine),
            r.vls,
            r.sls,
            if r.deadlock_free { "yes" } else { "no" },
            r.route_seconds,
            load_cell(r.link_load.as_ref()),
            esc(&change),
            s.mapping_version,
            s.held_mapping_version
        );
    }
    h.push_str("</table>\n");
}

/// A subnet's link-load histogram as a small bar chart (links per load
/// bucket, 0 to the busiest link), with the busiest and the mean.
fn load_cell(l: Option<&v1::LinkLoadSummary>) -> String {
    let Some(l) = l.filter(|l| !l.buckets.is_empty()) else {
        return "-".to_string();
    };
    let (w, h) = (120.0, 28.0);
    let most = l.buckets.iter().map(|b| b.links).max().unwrap_or(0).max(1) as f64;
    let bw = w / l.buckets.len() as f64;
    let mut svg =
        format!("<svg class=\"load\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">");
    for (i, b) in l.buckets.iter().enumerate() {
        let bh = (b.links as f64 / most * h).max(if b.links > 0 { 1.0 } else { 0.0 });
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"#4a7\">\
             <title>{} links carry {}-{} paths</title></rect>",
            i as f64 * bw + 0.5,
            h - bh,
            (bw - 1.0).max(0.5),
            b.links,
            b.low,
            b.high
        );
    }
    svg.push_str("</svg>");
    format!(
        "{svg}<br><small>max {} paths, mean {:.1} on {} links{}</small>",
        l.max,
        l.mean,
        l.links,
        if l.unrouted > 0 {
            format!(", {} pairs unrouted", l.unrouted)
        } else {
            String::new()
        }
    )
}

fn routers(h: &mut String, state: &v1::ControllerState) {
    h.push_str(
        "<h2>Routers</h2>\n<table id=\"routers\"><tr><th>router</th><th>GUID</th>\
         <th>egress published / held</th><th>state</th></tr>\n",
    );
    for r in &state.routers {
        let state_cell = match router_lag(r) {
            Some(why) => format!("<span class=\"lag\">{}</span>", esc(&why)),
            None => "<span class=\"ok\">in step</span>".to_string(),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{:#018x}</td><td>{:#x} / {:#x}</td><td>{state_cell}</td></tr>",
            esc(&r.desc),
            r.router_guid,
            r.egress_version,
            r.held_version
        );
    }
    h.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_load_histogram_has_a_bar_per_bucket_and_says_the_busiest() {
        let l = v1::LinkLoadSummary {
            links: 40,
            max: 90,
            mean: 31.5,
            buckets: (0..10)
                .map(|i| v1::LoadBucket {
                    low: i * 9,
                    high: i * 9 + 8,
                    links: i % 3,
                })
                .collect(),
            ..Default::default()
        };
        let cell = load_cell(Some(&l));
        assert_eq!(cell.matches("<rect ").count(), 10, "{cell}");
        assert!(
            cell.contains("max 90 paths, mean 31.5 on 40 links"),
            "{cell}"
        );
        assert!(
            cell.contains("<title>2 links carry 18-26 paths</title>"),
            "{cell}"
        );
        assert_eq!(load_cell(None), "-");
    }

    #[test]
    fn a_stopped_agent_and_a_router_behind_are_shown_lagging_and_text_is_escaped() {
        let live = v1::SubnetState {
            agent_id: "subnet-a".into(),
            subnet_prefix: 0xfec0_0000_0000_0001,
            live: true,
            mapping_version: 5,
            held_mapping_version: 5,
            router_guids: vec![7],
            ..Default::default()
        };
        let stopped = v1::SubnetState {
            agent_id: "<b>".into(),
            live: false,
            router_guids: vec![7],
            ..live.clone()
        };
        let state = v1::ControllerState {
            controller_id: "ctl".into(),
            leader: true,
            subnets: vec![live, stopped],
            routers: vec![v1::RouterInfo {
                router_guid: 7,
                desc: "r1".into(),
                egress_version: 9,
                held_version: 8,
            }],
            ..Default::default()
        };
        let page = render(&state);
        assert!(
            page.contains("subnet &lt;b&gt; (0xfec0000000000001): not live"),
            "{page}"
        );
        assert!(!page.contains("<b>"), "agent ids are escaped");
        assert!(
            page.contains(
                "router r1 (0x0000000000000007): holds egress version 0x8, 0x9 published"
            )
        );
        assert!(
            !page.contains("subnet subnet-a (0xfec0000000000001)"),
            "a live subnet does not lag"
        );
        assert_eq!(
            page.matches("<line ").count(),
            2,
            "one line per subnet and router"
        );
        let quiet = v1::ControllerState {
            subnets: vec![state.subnets[0].clone()],
            routers: vec![v1::RouterInfo {
                held_version: 9,
                ..state.routers[0].clone()
            }],
            ..state
        };
        assert!(
            render(&quiet).contains("Nothing: every subnet and router holds what is published.")
        );
    }
}
