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

use fabric::dqr::curve::{self, CurveSetup, ListAfter, bridges};
use fabric::dqr::{self, ChannelList, Detours, Fault, Options, Turns};
use fabric::generate::{Topology, generate};
use fabric::model::Fabric;
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
    let variant = match detours {
        Detours::None => format!("{turns:?}"),
        Detours::Local => format!("{turns:?}+local"),
        Detours::Mesh => format!("{turns:?}+mesh"),
    };
    // `IBF_BENCH_REBUILD=1` orders the list afresh after each reroute,
    // `0` carries it; else it is pruned (as the agent does).
    let (list, variant) = match env("IBF_BENCH_REBUILD", "prune").as_str() {
        "prune" => (ListAfter::Pruned, variant),
        "0" => (ListAfter::Carried, format!("{variant}/carried")),
        _ => (ListAfter::Rebuilt, format!("{variant}/rebuilt")),
    };
    let setup = CurveSetup {
        runs,
        faults,
        seed: 0,
        options: Options {
            turns,
            detours,
            ..Options::default()
        },
        list,
    };
    let t0 = Instant::now();
    let c = curve::tolerance(&f0, &r0, &list0, &setup, |_| {});
    let secs = t0.elapsed().as_secs_f64();
    let whys: Vec<String> = c
        .stopped
        .iter()
        .map(|s| format!("k={} {}: {}", s.k, s.reason, s.runs))
        .collect();
    println!("{name}   failures: {}", whys.join(", "));
    let pts: Vec<String> = c.percent.iter().map(|p| format!("{p:.0}%")).collect();
    let rer: Vec<String> = c
        .flows_rerouted_percent
        .iter()
        .map(|p| p.map_or_else(|| "-".into(), |p| format!("{p:.2}%")))
        .collect();
    println!(
        "{name} {variant} runs={runs}: P(k faults tolerated) k=1..{faults}: {}",
        pts.join(" ")
    );
    println!(
        "{name}   flows rerouted per fault k=1..{faults}: {}   ({secs:.1} s)",
        rer.join(" ")
    );
    let ps: Vec<String> = c.percent.iter().map(|p| format!("{p:.1}")).collect();
    println!("csv,{name},{variant},{runs},{}", ps.join(","));
}

/// Draws the curves of `csv,NAME,VARIANT,RUNS,P1,...` lines: P(k faults
/// tolerated) against k, one polyline per line.
fn plot(csv: &str, svg: &str) {
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
    std::fs::write(svg, dqr::curve_svg::svg(&curves)).expect("plot: SVG output");
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
