//! Dynamic quick reconfiguration: how many successive random link faults
//! a routing survives, and how fast one fault is rerouted.
//!
//! Tolerance (the DQR paper's figures 3-6): per setup, `IBF_BENCH_RUNS`
//! runs (default 500); each routes the fabric, builds the channel list,
//! then fails random switch-to-switch links one after the other (a link
//! whose loss disconnects the switches is not drawn: the paper counts
//! routing failures, not a cut fabric), rerouting with DQR after each, and
//! stops at the first fault DQR cannot reroute. The point for k is the
//! share of runs that rerouted k faults. Every successful reroute is
//! verified (connected, deadlock free, no more VLs) and its update checked
//! deadlock free inside `dqr::reroute`.
//!
//! Setups (`IBF_BENCH_SETUPS`, default "mesh10-updn"): `meshN-ENGINE`,
//! `torusN-ENGINE`, `dfP-ENGINE`, `sfQ-ENGINE`, `ft648-ENGINE`. Variant
//! (`IBF_BENCH_TURNS`: none, single, all; default all; `IBF_BENCH_DETOURS`:
//! none, local, mesh; default none); `IBF_BENCH_FAULTS` (default 10).
//!
//! Single faults (`IBF_BENCH_SINGLE`, e.g. "torus20-ecube"): every
//! switch-to-switch link that is no bridge, failed alone, rerouted from
//! the tables as routed; how many DQR reroutes (a plug-in's guarantee,
//! checked link by link).
//!
//! Speed (`IBF_BENCH_SPEED`, e.g. "df8-dfdn"): the channel list's build,
//! then `IBF_BENCH_RUNS` single random link faults, each rerouted from the
//! list and its transition checked; median and max.
//!
//! Each tolerance curve is also printed as a CSV line (`csv,NAME,VARIANT,
//! RUNS,P1,...`); `IBF_BENCH_PLOT=IN.csv:OUT.svg` draws the curves of such
//! lines (the paper's next to ours, for example) as one SVG and exits.
//!
//! `IBF_BENCH_BASE` (minhop, sssp, trees, auto) routes on another base
//! than the engine's default. After each reroute the list is pruned to
//! the new tables' dependencies unless a reroute ever moved flows to
//! other SLs, as the agent does once an update is in force;
//! `IBF_BENCH_REBUILD=1` rebuilds it (a fresh order) after a reroute
//! that moved none, `IBF_BENCH_REBUILD=0` carries it.
//!
//! `IBF_BENCH_SETUPS="mesh10-updn" cargo bench -p fabric --bench dqr`

use fabric::dqr::{self, ChannelList, Detours, Fault, Options, Turns};
use fabric::generate::{Topology, generate};
use fabric::model::{Fabric, Slot};
use fabric::routing::{EngineKind, EngineOptions};
use rand::{Rng, SeedableRng};
use std::time::Instant;

/// The engine's options: its default base, or `IBF_BENCH_BASE`'s.
fn engine_options() -> EngineOptions<'static> {
    EngineOptions {
        base: std::env::var("IBF_BENCH_BASE").ok().map(|b| {
            b.parse()
                .expect("IBF_BENCH_BASE: minhop, sssp, trees or auto")
        }),
        ..EngineOptions::default()
    }
}

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.into())
}

fn setup(name: &str) -> (Topology, EngineKind) {
    let (topo, engine) = name.split_once('-').expect("setup NAME-ENGINE");
    let engine: EngineKind = engine.parse().expect("engine");
    let num = |p: &str| topo[p.len()..].parse::<u32>().expect("size");
    let t = if topo.starts_with("mesh") {
        Topology::Mesh {
            dims: vec![num("mesh"); 2],
            torus: false,
            hosts: 1,
        }
    } else if topo.starts_with("torus") {
        Topology::Mesh {
            dims: vec![num("torus"); 2],
            torus: true,
            hosts: 1,
        }
    } else if topo.starts_with("df") {
        Topology::Dragonfly {
            p: num("df"),
            hosts: None,
        }
    } else if topo.starts_with("sf") {
        Topology::SlimFly {
            q: num("sf"),
            hosts: None,
        }
    } else if topo == "ft648" {
        Topology::ft648()
    } else {
        panic!("unknown setup {name}")
    };
    (t, engine)
}

/// The switch-to-switch links whose loss cuts the switches apart
/// (bridges, by Tarjan's low-link numbers; a parallel link is no bridge).
fn bridges(f: &Fabric) -> std::collections::HashSet<Slot> {
    let n = f.switches().len();
    let mut adj: Vec<Vec<(usize, Slot)>> = vec![Vec::new(); n];
    for l in f.switch_links() {
        let a = f.switch_index(f.node_of(l)).expect("switch") as usize;
        let b = f.switch_index(f.node_of(f.remote(l))).expect("switch") as usize;
        adj[a].push((b, l));
        adj[b].push((a, l));
    }
    let (mut disc, mut low) = (vec![usize::MAX; n], vec![0usize; n]);
    let mut out = std::collections::HashSet::new();
    let mut time = 0;
    for root in 0..n {
        if disc[root] != usize::MAX {
            continue;
        }
        // (node, the link it was entered by, next neighbour to look at)
        let mut stack: Vec<(usize, Slot, usize)> = vec![(root, Slot::MAX, 0)];
        disc[root] = time;
        low[root] = time;
        time += 1;
        while let Some(&mut (v, via, ref mut i)) = stack.last_mut() {
            if *i < adj[v].len() {
                let (w, l) = adj[v][*i];
                *i += 1;
                if l == via {
                    continue;
                }
                if disc[w] == usize::MAX {
                    disc[w] = time;
                    low[w] = time;
                    time += 1;
                    stack.push((w, l, 0));
                } else {
                    low[v] = low[v].min(disc[w]);
                }
            } else {
                stack.pop();
                if let Some(&(u, _, _)) = stack.last() {
                    low[u] = low[u].min(low[v]);
                    if low[v] > disc[u] {
                        out.insert(via);
                    }
                }
            }
        }
    }
    out
}

/// The setup's fabric, routed by its engine, and the tables' channel list.
fn routed(name: &str) -> (Fabric, fabric::tables::Routing, ChannelList) {
    let (t, engine) = setup(name);
    let f0 = generate(&t).expect("topology");
    let r0 = engine
        .engine()
        .route(&f0, &engine_options())
        .expect("routes");
    let (list0, rep) = ChannelList::build(&f0, &r0).expect("channel list");
    assert!(rep.ok());
    (f0, r0, list0)
}

fn tolerance(name: &str, runs: usize, faults: usize, turns: Turns, detours: Detours) {
    let (f0, r0, list0) = routed(name);
    let mut survived = vec![0usize; faults + 1];
    let mut broken_share = vec![(0f64, 0usize); faults + 1];
    let opts = Options {
        turns,
        detours,
        ..Options::default()
    };
    let variant = match detours {
        Detours::None => format!("{turns:?}"),
        Detours::Local => format!("{turns:?}+local"),
        Detours::Mesh => format!("{turns:?}+mesh"),
    };
    // The list pruned to the new tables' dependencies after each reroute,
    // unless one ever moved flows to other SLs (as the agent does in the
    // background once the update is in force), its order kept;
    // `IBF_BENCH_REBUILD=1` orders it afresh, `0` carries it with the old
    // routing's and the transition's dependencies.
    let keep = env("IBF_BENCH_REBUILD", "prune");
    let (prune, rebuild) = (keep == "prune", keep != "0");
    let variant = match keep.as_str() {
        "prune" => variant,
        "0" => format!("{variant}/carried"),
        _ => format!("{variant}/rebuilt"),
    };
    let mut why: std::collections::BTreeMap<(usize, &str), usize> = Default::default();
    let t0 = Instant::now();
    for run in 0..runs {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(run as u64);
        let mut f = f0.clone();
        let mut r = r0.clone();
        let mut list = list0.clone();
        survived[0] += 1;
        for k in 1..=faults {
            let cut = bridges(&f);
            let cand: Vec<Slot> = f
                .switch_links()
                .into_iter()
                .filter(|l| !cut.contains(l))
                .collect();
            if cand.is_empty() {
                break;
            }
            let l = cand[rng.gen_range(0..cand.len())];
            let f1 = dqr::apply_faults(&f, &[Fault::Link(l)]);
            match dqr::reroute_from(&f, &f1, &r, &mut list, &opts) {
                Ok(o) => {
                    survived[k] += 1;
                    let s = &o.stats;
                    broken_share[k].0 += s.flows_broken as f64 / s.flows.max(1) as f64;
                    broken_share[k].1 += 1;
                    if prune {
                        list.prune_to(&f1, &o.routing).expect("channel list");
                    } else if rebuild && !list.holds_cached_sl_walks() {
                        list = ChannelList::build(&f1, &o.routing).expect("channel list").0;
                    }
                    f = f1;
                    r = o.routing;
                }
                Err(e) => {
                    let kind = match e {
                        dqr::DqrError::NoPath { .. } => "no path",
                        dqr::DqrError::Transition(_) => "transition",
                        dqr::DqrError::Verify(_) => "verify",
                        dqr::DqrError::MoreVls { .. } => "more VLs",
                        dqr::DqrError::OtherFabric { .. } => "other fabric",
                    };
                    *why.entry((k, kind)).or_insert(0usize) += 1;
                    break;
                }
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    // In fault order (the map's), not as text: k=10 after k=9.
    let whys: Vec<String> = why
        .iter()
        .map(|((k, kind), n)| format!("k={k} {kind}: {n}"))
        .collect();
    println!("{name}   failures: {}", whys.join(", "));
    let pts: Vec<String> = (1..=faults)
        .map(|k| format!("{:.0}%", 100.0 * survived[k] as f64 / runs as f64))
        .collect();
    let rer: Vec<String> = (1..=faults)
        .map(|k| {
            let (s, n) = broken_share[k];
            if n == 0 {
                "-".into()
            } else {
                format!("{:.2}%", 100.0 * s / n as f64)
            }
        })
        .collect();
    println!(
        "{name} {variant} runs={runs}: P(k faults tolerated) k=1..{faults}: {}",
        pts.join(" ")
    );
    println!(
        "{name}   flows rerouted per fault k=1..{faults}: {}   ({secs:.1} s)",
        rer.join(" ")
    );
    let ps: Vec<String> = (1..=faults)
        .map(|k| format!("{:.1}", 100.0 * survived[k] as f64 / runs as f64))
        .collect();
    println!("csv,{name},{variant},{runs},{}", ps.join(","));
}

/// Draws the curves of `csv,NAME,VARIANT,RUNS,P1,...` lines: P(k faults
/// tolerated) against k, one polyline per line.
fn plot(csv: &str, svg: &str) {
    use std::fmt::Write;
    let text = std::fs::read_to_string(csv).expect("plot: CSV input");
    let curves: Vec<(String, Vec<f64>)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("csv,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let label = format!("{} ({}, {} runs)", f[0], f[1], f[2]);
            let ps = f[3..].iter().filter_map(|x| x.parse().ok()).collect();
            (label, ps)
        })
        .collect();
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
    std::fs::write(svg, s).expect("plot: SVG output");
}

fn speed(name: &str, runs: usize) {
    let (t, engine) = setup(name);
    let f0 = generate(&t).expect("topology");
    let t0 = Instant::now();
    let r0 = engine
        .engine()
        .route(&f0, &engine_options())
        .expect("routes");
    let route_s = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let (list0, rep) = ChannelList::build(&f0, &r0).expect("channel list");
    let list_s = t0.elapsed().as_secs_f64();
    assert!(rep.ok());
    let links = f0.switch_links();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut times = Vec::new();
    let mut drains = 0;
    let mut fails = 0;
    let mut broken = 0u64;
    for _ in 0..runs {
        let l = links[rng.gen_range(0..links.len())];
        let f1 = dqr::apply_faults(&f0, &[Fault::Link(l)]);
        let mut list = list0.clone();
        let t = Instant::now();
        // The caller's gate verifies the result in full (timed on its own
        // by the core bench); here the reroute and its transition check.
        let opts = Options {
            verify_result: false,
            ..Options::default()
        };
        let res = dqr::reroute(&f1, &r0, &mut list, &opts);
        times.push(t.elapsed().as_secs_f64());
        match res {
            Ok(o) => {
                drains += usize::from(o.drain.is_some());
                broken += o.stats.flows_broken;
            }
            Err(e) => {
                fails += 1;
                eprintln!("{e}");
            }
        }
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{name}: {} switches, {} HCAs; route {route_s:.2} s, channel list {list_s:.2} s ({} dependencies); one link fault rerouted + transition checked: median {:.3} s, max {:.3} s over {runs} faults ({fails} not reroutable, {drains} with a drain stage, {:.0} broken flows per fault)",
        f0.switches().len(),
        f0.num_cas(),
        list0.num_edges(),
        times[times.len() / 2],
        times[times.len() - 1],
        broken as f64 / runs.max(1) as f64
    );
}

/// Every switch-to-switch link of the setup failed alone (bridges left
/// out), each rerouted from the list of the tables in force: how many DQR
/// reroutes, the guarantee a plug-in claims, checked link by link.
fn single_faults(name: &str, turns: Turns, detours: Detours) {
    let (f0, r0, list0) = routed(name);
    let opts = Options {
        turns,
        detours,
        ..Options::default()
    };
    let cut = bridges(&f0);
    let (mut tried, mut rerouted, mut retried) = (0usize, 0usize, 0u64);
    let t0 = Instant::now();
    for l in f0.switch_links() {
        if cut.contains(&l) {
            continue;
        }
        tried += 1;
        let f1 = dqr::apply_faults(&f0, &[Fault::Link(l)]);
        let mut list = list0.clone();
        match dqr::reroute_from(&f0, &f1, &r0, &mut list, &opts) {
            Ok(o) => {
                rerouted += 1;
                retried += o.stats.order_retries + o.stats.destination_retries;
            }
            Err(e) => eprintln!("{name}: link at slot {l}: {e}"),
        }
    }
    println!(
        "{name} {turns:?}+{detours:?}: every single link fault: {rerouted} of {tried} rerouted ({retried} retries in another order), {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

fn main() {
    if let Ok(p) = std::env::var("IBF_BENCH_PLOT") {
        let (csv, svg) = p.split_once(':').expect("IBF_BENCH_PLOT=IN.csv:OUT.svg");
        plot(csv, svg);
        return;
    }
    let runs: usize = env("IBF_BENCH_RUNS", "500").parse().expect("runs");
    if let Ok(s) = std::env::var("IBF_BENCH_SPEED") {
        for name in s.split_whitespace() {
            speed(name, runs);
        }
        return;
    }
    let faults: usize = env("IBF_BENCH_FAULTS", "10").parse().expect("faults");
    let detours = match env("IBF_BENCH_DETOURS", "none").as_str() {
        "local" => Detours::Local,
        "mesh" => Detours::Mesh,
        _ => Detours::None,
    };
    let turns = match env("IBF_BENCH_TURNS", "all").as_str() {
        "none" => Turns::None,
        "single" => Turns::Single,
        _ => Turns::All,
    };
    if let Ok(s) = std::env::var("IBF_BENCH_SINGLE") {
        for name in s.split_whitespace() {
            single_faults(name, turns, detours);
        }
        return;
    }
    for name in env("IBF_BENCH_SETUPS", "mesh10-updn").split_whitespace() {
        tolerance(name, runs, faults, turns, detours);
    }
}
