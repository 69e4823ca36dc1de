//! The compositional whole-fabric check (`verify::compose`) at scale, side
//! by side with the all-pairs check (`verify::verify_global`) where that
//! finishes. Per setup: every subnet routed by ftree and passed through
//! the gate (which builds its dependency summary: the agents' share, timed
//! separately), the inter-subnet routes, then the composition (median of
//! `IBF_BENCH_RUNS`, default 3) and, up to `IBF_BENCH_GLOBAL_MAX` HCAs
//! (default 10,000), the all-pairs check once, with both answers compared.
//!
//! Setups (`IBF_BENCH_SETUPS`, default "paper3 4x1024 8x16384 64x2048"):
//! `paperK` the inter-subnet paper's 648 HCAs in K subnets; `4x1024`,
//! `8x2048`, `8x16384`: two-level fat trees, 16 spines, 8 routers on every
//! spine; `64x2048`: 64 subnets of 32 leaves x 64 HCAs and 16 spines, 16
//! routers each on one spine of every subnet; `64x2048ring`: the same in
//! a ring (router `r` joins subnets `r` and `r+1`), where traffic crosses
//! up to 32 transit subnets. `IBF_BENCH_ALGS` (default "prefix issr isfr").
//!
//! `cargo bench -p fabric --bench compose`

use fabric::intersubnet;
use fabric::multi::{Join, TreeSubnets, Wiring, tree_subnets};
use fabric::network::Network;
use fabric::pipeline;
use fabric::routing::{EngineKind, EngineOptions};
use fabric::verify::{self, DependencySummary, Policy, compose, verify_global};
use std::time::Instant;

fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split_whitespace()
        .map(String::from)
        .collect()
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn setup(name: &str) -> Option<TreeSubnets> {
    let tree = |subnets, leaves, hosts, spines, routers, wiring, join| TreeSubnets {
        subnets,
        leaves,
        spines,
        hosts,
        routers,
        router_links: 1,
        wiring,
        join,
    };
    Some(match name {
        "paper2" => TreeSubnets::paper(2).ok()?,
        "paper3" => TreeSubnets::paper(3).ok()?,
        "paper6" => TreeSubnets::paper(6).ok()?,
        "4x1024" => tree(4, 32, 32, 16, 8, Wiring::All, Join::All),
        "8x2048" => tree(8, 32, 64, 16, 8, Wiring::All, Join::All),
        "8x16384" => tree(8, 128, 128, 16, 8, Wiring::All, Join::All),
        "64x2048" => tree(64, 32, 64, 16, 16, Wiring::Stripe, Join::All),
        "64x2048ring" => tree(64, 32, 64, 16, 64, Wiring::All, Join::Ring),
        _ => return None,
    })
}

fn main() {
    let runs = env_num("IBF_BENCH_RUNS", 3).max(1);
    let global_max = env_num("IBF_BENCH_GLOBAL_MAX", 10_000);
    let algs = env_list("IBF_BENCH_ALGS", "prefix issr isfr");
    for name in env_list("IBF_BENCH_SETUPS", "paper3 4x1024 8x16384 64x2048") {
        let Some(t) = setup(&name) else {
            eprintln!("unknown setup '{name}'");
            std::process::exit(2);
        };
        let m = match tree_subnets(&t) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("{name}: {e}");
                std::process::exit(2);
            }
        };
        let hcas: usize = m.subnets.iter().map(|s| s.fabric.num_cas()).sum();
        println!(
            "== {name}: {} subnets, {hcas} HCAs, {} routers",
            m.subnets.len(),
            m.routers.len()
        );
        // The agents' share: route and gate every subnet (the gate builds
        // the summary), and, for the first subnet, the verifier alone.
        let t0 = Instant::now();
        let routed = match pipeline::route_subnets(&m, EngineKind::Ftree) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{name}: {e}");
                std::process::exit(1);
            }
        };
        let agents = t0.elapsed().as_secs_f64();
        // Subnet 0 once more, by parts: the engine, the verifier alone,
        // and the gate (verifier keeping the CA-to-CA graph, then the
        // summary); the difference of the last two is the summary's cost.
        let s0 = &m.subnets[0];
        let engine = EngineKind::Ftree.engine();
        let t1 = Instant::now();
        let Ok(r0) = engine.route(&s0.fabric, &EngineOptions::default()) else {
            eprintln!("{name}: ftree fails on subnet 0");
            std::process::exit(1);
        };
        let route_one = t1.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let _ = verify::verify(&s0.fabric, &r0);
        let verify_one = t1.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let gated = verify::accept(&s0.fabric, engine.as_ref(), r0, Policy::DeadlockFree).is_ok();
        let gate_one = t1.elapsed().as_secs_f64();
        println!(
            "agents: all {} subnets routed and gated in {agents:.2} s here; subnet 0: ftree \
             {route_one:.3} s, verifier alone {verify_one:.3} s, gate with summary {gate_one:.3} s{}",
            m.subnets.len(),
            if gated { "" } else { " (refused)" }
        );
        let sums: Vec<(u64, &DependencySummary)> = match m
            .subnets
            .iter()
            .zip(&routed.routings)
            .map(|(s, v)| v.dependencies().map(|d| (s.prefix, d)))
            .collect::<Result<_, _>>()
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{name}: no summary: {e}");
                std::process::exit(1);
            }
        };
        let d0 = sums[0].1;
        println!(
            "summary of subnet 0: {} router ports, {} vertices, {} edges, {} chains, {} legs",
            d0.ports.len(),
            d0.vertices.len(),
            d0.edges.len(),
            d0.chains.len(),
            d0.legs.len()
        );
        for alg in &algs {
            let Ok(a) = intersubnet::by_name(alg) else {
                eprintln!("unknown algorithm '{alg}'");
                std::process::exit(2);
            };
            let routes = match a.route(&routed.view) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("{name} {alg}: {e}");
                    std::process::exit(1);
                }
            };
            let mut times = Vec::with_capacity(runs);
            let mut report = None;
            for _ in 0..runs {
                let t = Instant::now();
                match compose(&routed.view, &sums, &routes) {
                    Ok(r) => report = Some(r),
                    Err(e) => {
                        eprintln!("{name} {alg}: {e}");
                        std::process::exit(1);
                    }
                }
                times.push(t.elapsed().as_secs_f64());
            }
            times.sort_by(f64::total_cmp);
            let Some(c) = report else { continue };
            print!(
                "{alg:<7} compose median {:.3} s over {runs} runs ({} pairs, {} unreachable, {}; \
                 {} vertices, {} hops, {} chains, {} legs)",
                times[times.len() / 2],
                c.pairs,
                c.unreachable,
                if c.deadlock_free() {
                    "deadlock free"
                } else {
                    "CYCLE"
                },
                c.vertices,
                c.router_hops,
                c.chains,
                c.transit_legs
            );
            if hcas <= global_max {
                let net = match Network::new(&m, routed.tables(), &routed.view, &routes) {
                    Ok(n) => n,
                    Err(e) => {
                        eprintln!("{name} {alg}: {e}");
                        std::process::exit(1);
                    }
                };
                let t = Instant::now();
                let g = verify_global(&net);
                let secs = t.elapsed().as_secs_f64();
                let same = g.unreachable == c.unreachable && g.deadlock_free() == c.deadlock_free();
                print!(
                    "; all pairs {secs:.3} s ({}), {}",
                    if g.ok() { "ok" } else { "refused" },
                    if same {
                        "same answer"
                    } else {
                        "DIFFERENT ANSWER"
                    }
                );
                if !same {
                    println!();
                    eprintln!("{name} {alg}: all pairs {g:?} vs composed {c:?}");
                    std::process::exit(1);
                }
            }
            println!();
        }
        println!("peak RSS so far {:.0} MB", peak_rss_mb());
    }
}
