//! Core benchmark: parse, generate, MinHop and verify on Dragonfly p=6 and
//! p=8 (override with `IBF_BENCH_DF="4 6"`), timed as the median of
//! `IBF_BENCH_RUNS` runs (default 5). Prints a markdown table.
//!
//! `cargo bench -p fabric --bench core`

use fabric::formats::ibnetdiscover;
use fabric::gen::{generate, Topology};
use fabric::routing::{self, EngineOptions};
use fabric::verify;
use std::path::Path;
use std::time::Instant;

fn median<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let t = Instant::now();
        last = Some(f());
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(|a, b| a.total_cmp(b));
    let Some(v) = last else {
        panic!("at least one run")
    };
    (times[times.len() / 2], v)
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

fn main() {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    let runs: usize = std::env::var("IBF_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let ps: Vec<u32> = std::env::var("IBF_BENCH_DF")
        .unwrap_or_else(|_| "6 8".into())
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    println!(
        "threads: {}, runs per figure: {runs} (median)",
        rayon::current_num_threads()
    );
    println!();
    println!("| topology | switches | HCAs | generate s | write s | parse s | minhop s | verify s | CDG edges | deadlock free | peak RSS MB |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let engine = routing::by_name("minhop").expect("minhop is registered");
    for p in ps {
        let topo = Topology::Dragonfly { p, hosts: None };
        let (t_gen, f) = median(runs, || {
            generate(&topo).expect("generator parameters are valid")
        });
        let (t_write, text) = median(runs, || ibnetdiscover::write(&f));
        let (t_parse, g) = median(runs, || {
            ibnetdiscover::parse(&text, Path::new("bench.net")).expect("own output parses")
        });
        assert_eq!(g.num_nodes(), f.num_nodes());
        let opts = EngineOptions::default();
        let (t_route, r) = median(runs, || engine.route(&f, &opts).expect("minhop routes"));
        let (t_verify, rep) = median(runs, || verify::verify(&f, &r));
        assert!(rep.all_pairs_routed());
        println!(
            "| {} | {} | {} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {} | {} | {:.0} |",
            topo.name(),
            f.switches().len(),
            f.num_cas(),
            t_gen,
            t_write,
            t_parse,
            t_route,
            t_verify,
            rep.cdg_edges,
            if rep.deadlock_free() { "yes" } else { "no" },
            peak_rss_mb()
        );
    }
}
