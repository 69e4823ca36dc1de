//! Core benchmark: topology generate/write/parse, then each engine's routing
//! and the verifier on Dragonfly p=6 and p=8 and Slim Fly q=11. Medians of `IBF_BENCH_RUNS`
//! runs (default 3). Knobs: `IBF_BENCH_DF="4 6"` (Dragonfly sizes),
//! `IBF_BENCH_SF="11"` (Slim Fly sizes, for DF-D2),
//! `IBF_BENCH_ENGINES="minhop sssp dfdn dfdn-sssp dfd2 nue"` (`engine-base`, e.g.
//! `dfdn-sssp` or `lash-minhop`, picks the base routing; a plain name takes
//! the engine's default), `IBF_BENCH_VERIFY=0` to skip verification.
//!
//! `cargo bench -p fabric --bench core`

use fabric::formats::ibnetdiscover;
use fabric::generate::{Topology, generate};
use fabric::routing::{self, Base, EngineOptions};
use fabric::verify;
use std::path::Path;
use std::time::Instant;

fn median<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        last = Some(f());
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(|a, b| a.total_cmp(b));
    let Some(v) = last else {
        unreachable!("runs >= 1")
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

fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split_whitespace()
        .map(String::from)
        .collect()
}

fn main() {
    let runs: usize = std::env::var("IBF_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let topos: Vec<Topology> = env_list("IBF_BENCH_DF", "6 8")
        .iter()
        .filter_map(|v| v.parse().ok())
        .map(|p| Topology::Dragonfly { p, hosts: None })
        .chain(
            env_list("IBF_BENCH_SF", "11")
                .iter()
                .filter_map(|v| v.parse().ok())
                .map(|q| Topology::SlimFly { q, hosts: None }),
        )
        .collect();
    let engines = env_list("IBF_BENCH_ENGINES", "minhop sssp dfdn dfdn-sssp");
    let do_verify = std::env::var("IBF_BENCH_VERIFY").map_or(true, |v| v != "0");
    println!(
        "threads: {}, runs per figure: {runs} (median)\n",
        rayon::current_num_threads()
    );
    println!("| topology | switches | HCAs | generate s | write s | parse s |");
    println!("|---|---|---|---|---|---|");
    let mut fabrics = Vec::new();
    for topo in &topos {
        let (t_gen, f) = median(runs, || {
            generate(topo).expect("generator parameters are valid")
        });
        let (t_write, text) = median(runs, || ibnetdiscover::write(&f));
        let (t_parse, g) = median(runs, || {
            ibnetdiscover::parse(&text, Path::new("bench.net")).expect("own output parses")
        });
        assert_eq!(g.num_nodes(), f.num_nodes());
        println!(
            "| {} | {} | {} | {t_gen:.4} | {t_write:.4} | {t_parse:.4} |",
            topo.name(),
            f.switches().len(),
            f.num_cas()
        );
        fabrics.push((topo.name(), f));
    }
    println!();
    println!(
        "| topology | engine | route s | verify s | VLs | SLs | max hops | deadlock free | peak RSS MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, f) in &fabrics {
        for e in &engines {
            // `engine-base` picks the base; the plain name takes the
            // engine's default.
            let (engine, base) = match e.split_once('-') {
                Some((engine, base)) => {
                    (engine, Some(base.parse::<Base>().expect("a base routing")))
                }
                None => (e.as_str(), None),
            };
            let eng = routing::by_name(engine).expect("engine is registered");
            let opts = EngineOptions {
                base,
                ..EngineOptions::default()
            };
            if let Err(err) = eng.route(f, &opts) {
                println!("| {name} | {e} | refused: {err} | | | | | | |");
                continue;
            }
            let (t_route, r) = median(runs, || {
                eng.route(f, &opts).expect("engine routed once already")
            });
            let (t_verify, rep) = if do_verify {
                let (t, rep) = median(1, || verify::verify(f, &r));
                assert!(rep.all_pairs_routed());
                (format!("{t:.3}"), Some(rep))
            } else {
                ("-".into(), None)
            };
            let show = |v: Option<String>| v.unwrap_or_else(|| "-".into());
            println!(
                "| {name} | {e} | {t_route:.3} | {t_verify} | {} | {} | {} | {} | {:.0} |",
                show(rep.as_ref().map(|r| r.vls_used.to_string())),
                show(rep.as_ref().map(|r| r.sls_used.to_string())),
                show(rep.as_ref().map(|r| r.max_hops.to_string())),
                show(rep.as_ref().map(|r| if r.deadlock_free() {
                    "yes".into()
                } else {
                    "no".into()
                })),
                peak_rss_mb()
            );
        }
    }
}
