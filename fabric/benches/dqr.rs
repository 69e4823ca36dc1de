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
//! (`IBF_BENCH_TURNS`: none, single, all; default all); `IBF_BENCH_FAULTS`
//! (default 10).
//!
//! Speed (`IBF_BENCH_SPEED`, e.g. "df8-dfdn"): the channel list's build,
//! then `IBF_BENCH_RUNS` single random link faults, each rerouted from the
//! list and its transition checked; median and max.
//!
//! `IBF_BENCH_SETUPS="mesh10-updn" cargo bench -p fabric --bench dqr`

use fabric::dqr::{self, ChannelList, Fault, Options, Turns};
use fabric::gen::{generate, Topology};
use fabric::model::{Fabric, Slot};
use fabric::routing::{EngineKind, EngineOptions};
use rand::{Rng, SeedableRng};
use std::time::Instant;

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

fn switches_connected(f: &Fabric) -> bool {
    let g = fabric::graph::SwitchGraph::new(f);
    let mut dist = vec![u8::MAX; g.len()];
    let mut q = Vec::new();
    g.bfs_into(0, &mut dist, &mut q);
    dist.iter().all(|&d| d != u8::MAX)
}

fn tolerance(name: &str, runs: usize, faults: usize, turns: Turns) {
    let (t, engine) = setup(name);
    let f0 = generate(&t).expect("topology");
    let r0 = engine
        .engine()
        .route(&f0, &EngineOptions::default())
        .expect("routes");
    let (list0, rep) = ChannelList::build(&f0, &r0).expect("channel list");
    assert!(rep.ok());
    let mut survived = vec![0usize; faults + 1];
    let mut broken_share = vec![(0f64, 0usize); faults + 1];
    let opts = Options {
        turns,
        ..Options::default()
    };
    let t0 = Instant::now();
    for run in 0..runs {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(run as u64);
        let mut f = f0.clone();
        let mut r = r0.clone();
        let mut list = list0.clone();
        survived[0] += 1;
        for k in 1..=faults {
            let links = f.switch_links();
            let cand: Vec<Slot> = links
                .iter()
                .copied()
                .filter(|&l| switches_connected(&f.without_links(&[l])))
                .collect();
            if cand.is_empty() {
                break;
            }
            let l = cand[rng.gen_range(0..cand.len())];
            let f1 = dqr::apply_faults(&f, &[Fault::Link(l)]);
            match dqr::reroute(&f1, &r, &mut list, &opts) {
                Ok(o) => {
                    survived[k] += 1;
                    let s = &o.stats;
                    broken_share[k].0 += s.flows_broken as f64 / s.flows.max(1) as f64;
                    broken_share[k].1 += 1;
                    f = f1;
                    r = o.routing;
                }
                Err(_) => break,
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
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
        "{name} turns={turns:?} runs={runs}: P(k faults tolerated) k=1..{faults}: {}",
        pts.join(" ")
    );
    println!(
        "{name}   flows rerouted per fault k=1..{faults}: {}   ({secs:.1} s)",
        rer.join(" ")
    );
}

fn speed(name: &str, runs: usize) {
    let (t, engine) = setup(name);
    let f0 = generate(&t).expect("topology");
    let t0 = Instant::now();
    let r0 = engine
        .engine()
        .route(&f0, &EngineOptions::default())
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

fn main() {
    let runs: usize = env("IBF_BENCH_RUNS", "500").parse().expect("runs");
    if let Ok(s) = std::env::var("IBF_BENCH_SPEED") {
        for name in s.split_whitespace() {
            speed(name, runs);
        }
        return;
    }
    let faults: usize = env("IBF_BENCH_FAULTS", "10").parse().expect("faults");
    let turns = match env("IBF_BENCH_TURNS", "all").as_str() {
        "none" => Turns::None,
        "single" => Turns::Single,
        _ => Turns::All,
    };
    for name in env("IBF_BENCH_SETUPS", "mesh10-updn").split_whitespace() {
        tolerance(name, runs, faults, turns);
    }
}
