//! Inter-subnet route computation at scale: 8 subnets of 16,384 HCAs
//! (override with IBF_BENCH_SUBNETS / IBF_BENCH_LEAVES / IBF_BENCH_HOSTS),
//! 8 routers on every spine. Prints the median of IBF_BENCH_RUNS (3) runs
//! per algorithm; the view is built once, as the controller keeps it.
//!
//! `cargo bench -p fabric --bench intersubnet`

use fabric::intersubnet::{self, GlobalView};
use fabric::multi::{Join, TreeSubnets, Wiring, tree_subnets};
use std::time::Instant;

fn env(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let t = TreeSubnets {
        subnets: env("IBF_BENCH_SUBNETS", 8),
        leaves: env("IBF_BENCH_LEAVES", 128),
        spines: 16,
        hosts: env("IBF_BENCH_HOSTS", 128),
        routers: 8,
        router_links: 1,
        wiring: Wiring::All,
        join: Join::All,
    };
    let runs = env("IBF_BENCH_RUNS", 3).max(1) as usize;
    let t0 = Instant::now();
    let m = match tree_subnets(&t) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("generator: {e}");
            std::process::exit(2);
        }
    };
    let hcas: usize = m.subnets.iter().map(|s| s.fabric.num_cas()).sum();
    println!(
        "{} subnets x {} HCAs ({hcas} total), {} routers; generated in {:.2} s",
        t.subnets,
        t.leaves * t.hosts,
        m.routers.len(),
        t0.elapsed().as_secs_f64()
    );
    let t1 = Instant::now();
    let mut view = GlobalView::from_multi(&m);
    println!("view: {:.3} s", t1.elapsed().as_secs_f64());
    // ISFR's primary paths come from the agents (fat-tree routing per
    // subnet); computed here once, outside the timed part.
    let t3 = Instant::now();
    for s in &m.subnets {
        let engine = fabric::routing::by_name("ftree").expect("registered");
        match engine.route(&s.fabric, &fabric::routing::EngineOptions::default()) {
            Ok(r) => view.set_primary(s.prefix, &intersubnet::primary_lids(&s.fabric, &r.lfts)),
            Err(e) => {
                eprintln!("ftree on {}: {e}", s.name);
                std::process::exit(1);
            }
        }
    }
    println!(
        "ftree + primary paths of every subnet (the agents' share): {:.2} s",
        t3.elapsed().as_secs_f64()
    );
    for alg in intersubnet::registry() {
        let mut times = Vec::with_capacity(runs);
        let mut rules = 0usize;
        for _ in 0..runs {
            let t2 = Instant::now();
            match alg.route(&view) {
                Ok(r) => {
                    times.push(t2.elapsed().as_secs_f64());
                    rules = r
                        .routers
                        .iter()
                        .flat_map(|t| t.contexts.iter())
                        .map(|c| c.rules.len())
                        .sum::<usize>()
                        + r.mappings.iter().map(|m| m.entries.len()).sum::<usize>();
                }
                Err(e) => {
                    eprintln!("{}: {e}", alg.name());
                    std::process::exit(1);
                }
            }
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{:<7} median {:.3} s over {runs} runs ({} mapping entries + router rules)",
            alg.name(),
            times[times.len() / 2],
            rules
        );
    }
}
