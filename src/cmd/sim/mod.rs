//! `ibfabric sim`: bandwidth of the inter-subnet algorithms on routed
//! multi-subnet fabrics (HPCC rings, uniform traffic with hot spots), on
//! the packet model (credit-based flow control, virtual cut-through,
//! deadlock detection) or the flow model (max-min fair rates).

mod plot;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use plot::plot;

use fabric::intersubnet::AlgorithmKind;
use fabric::multi::{MultiFabric, PaperLayout, TreeSubnets, tree_subnets};
use fabric::network::Network;
use fabric::pipeline;
use fabric::routing::EngineKind;
use fabric::sim::packet::Config;
use fabric::sim::workload::{self, Saturate};
use fabric::sim::{self, RingStats, Uniform};
use fabric::verify::{GlobalReport, Policy, verify_global};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct SimArgs {
    /// The inter-subnet paper's setups with K two-level fat-tree subnets
    /// under routers; a comma list of K (2, 3, 6 in the paper).
    #[arg(long, value_delimiter = ',', default_value = "2,3,6")]
    paper: Vec<u32>,
    /// Which reading of the paper's setups: `text` (K x 72 HCAs, 12 per
    /// leaf, as the paper's text sizes them) or `ports648` (the 648-HCA
    /// three-level fat tree cut into K subnets).
    #[arg(long, value_enum, default_value_t = PaperLayout::Text)]
    paper_layout: PaperLayout,
    /// A multi-subnet manifest (see `ibfabric gen multi`) instead of the
    /// paper setups.
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Routing engine of the subnets whose manifest entry names none (ISFR
    /// needs ftree to find primary paths; elsewhere it falls back to ISSR).
    #[arg(long, value_enum, default_value_t = EngineKind::Ftree)]
    engine: EngineKind,
    /// Inter-subnet algorithms to compare.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "prefix,issr,isfr"
    )]
    algorithms: Vec<AlgorithmKind>,
    /// Random-order rings (the paper: 499, with the natural-order one).
    #[arg(long, default_value_t = 499)]
    rings: usize,
    /// Uniform traffic: inter-subnet percentages to sweep, comma-separated;
    /// empty (--isp "") to skip.
    #[arg(long, value_parser = parse_isp, default_value = "0,20,40,60,80,100")]
    isp: IspList,
    /// Share of each subnet's incoming traffic aimed at its hot spot.
    #[arg(long, default_value_t = 0.05)]
    hot_spot: f64,
    /// Random draws averaged per uniform-traffic point.
    #[arg(long, default_value_t = 10)]
    samples: usize,
    /// Seed of every random choice (rings, destinations, hot spots).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Link data bandwidth in MB/s (4x DDR, the paper's links: 2000).
    #[arg(long, default_value_t = 2000.0)]
    link_mbs: f64,
    /// Traffic model: `packet` simulates every packet with IB's link-level
    /// flow control (credits per VL, virtual cut-through, head-of-line
    /// blocking, congestion trees; a deadlock stops it with the cycle);
    /// `flow` shares bandwidth max-min fairly between flows (much faster,
    /// no congestion dynamics).
    #[arg(long, value_enum, default_value_t = Model::Packet)]
    model: Model,
    /// Let through subnet tables with a channel dependency cycle (from
    /// engines that do not claim deadlock freedom: minhop, sssp) to watch
    /// them deadlock in the packet model; exits 3 when one does.
    #[arg(long)]
    allow_cycles: bool,
    /// Packet model: bytes per ring message, in KB. The paper's 1954 KB
    /// gives the same ring figures within 0.8 % on its 2-subnet setup
    /// (rings reach their steady state within a few packets) at 16 times
    /// the time.
    #[arg(long, default_value_t = 128)]
    message_kb: u64,
    /// Packet model: largest packet in bytes (the paper: 2048).
    #[arg(long, default_value_t = 2048)]
    mtu: u32,
    /// Packet model: smallest packet of uniform traffic; each 2 KB message
    /// draws its packet size between this and the MTU (the paper's
    /// non-uniform traffic: 84). Default: the MTU.
    #[arg(long)]
    min_packet: Option<u32>,
    /// Packet model: input buffer per port and VL, in bytes (default four
    /// MTUs).
    #[arg(long)]
    buffer: Option<u32>,
    /// Packet model: cable and switch latency per hop, in ns.
    #[arg(long, default_value_t = 200.0)]
    latency_ns: f64,
    /// Packet model: the ideal link, payload only. By default every packet
    /// also carries InfiniBand's 66 bytes of headers and CRCs (LRH, GRH,
    /// BTH, ICRC, VCRC), which take link time and buffer space.
    #[arg(long)]
    ideal_link: bool,
    /// Packet model, uniform traffic: simulated time before measuring, µs.
    #[arg(long, default_value_t = 50.0)]
    warmup_us: f64,
    /// Packet model, uniform traffic: simulated time measured, µs.
    #[arg(long, default_value_t = 500.0)]
    window_us: f64,
    /// Write the results as an SVG plot to this file.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Machine-readable results on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    Packet,
    Flow,
}

impl std::fmt::Display for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Model::Packet => "packet",
            Model::Flow => "flow",
        })
    }
}

#[derive(Serialize)]
struct AlgResult {
    algorithm: String,
    /// Every host pair walked, global channel dependency graph checked.
    global: GlobalReport,
    /// Traffic figures; absent when some pairs are unreachable.
    traffic: Option<Traffic>,
}

#[derive(Serialize)]
struct Traffic {
    /// Ring figures in MB/s.
    nor_mbs: f64,
    ror_min_mbs: f64,
    ror_max_mbs: f64,
    ror_avg_mbs: f64,
    ror_flow_avg_mbs: f64,
    rings: usize,
    /// (ISP %, throughput as % of the injection bandwidth).
    uniform: Vec<(u32, f64)>,
    /// Packet model: the first deadlock seen (its run's figures are left
    /// out of the ring statistics; a uniform point counts what arrived
    /// before it).
    deadlock: Option<DeadlockSeen>,
}

#[derive(Serialize)]
struct DeadlockSeen {
    /// `ring` or `uniform ISP n%`.
    traffic: String,
    /// Simulated time when the cycle was found.
    at_us: f64,
    /// The cycle of full buffers: each channel's head packet waits on the
    /// next one's buffer.
    channels: Vec<String>,
}

#[derive(Serialize)]
struct SetupResult {
    name: String,
    subnets: usize,
    hosts: usize,
    routers: usize,
    results: Vec<AlgResult>,
}

#[derive(Serialize)]
struct SimReport {
    model: Model,
    /// The packet model's buffers, latency and MTU (byte times at the link
    /// rate); absent for the flow model.
    packet: Option<Config>,
    /// Packet model: ring message bytes.
    message_bytes: Option<u64>,
    engine: EngineKind,
    link_mbs: f64,
    seed: u64,
    hot_spot: f64,
    samples: usize,
    setups: Vec<SetupResult>,
    sim_seconds: f64,
}

/// The ISP percentages of `--isp`; an empty list skips uniform traffic.
#[derive(Clone, Debug)]
pub struct IspList(Vec<u32>);

fn parse_isp(s: &str) -> Result<IspList, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.parse().map_err(|e| format!("'{p}': {e}")))
        .collect::<Result<Vec<u32>, String>>()
        .map(IspList)
}

pub fn run(a: SimArgs) -> Result<i32> {
    let t0 = Instant::now();
    if !(a.link_mbs > 0.0 && a.link_mbs.is_finite()) {
        bail!("--link-mbs must be a positive number, not {}", a.link_mbs);
    }
    if !(0.0..=1.0).contains(&a.hot_spot) {
        bail!("--hot-spot is a probability in 0..=1, not {}", a.hot_spot);
    }
    if let Some(bad) = a.isp.0.iter().find(|&&p| p > 100) {
        bail!("--isp takes percentages 0..=100, not {bad}");
    }
    let cfg = packet_config(&a)?;
    let algorithms: Vec<_> = a.algorithms.iter().map(|k| k.algorithm()).collect();
    // Each setup with its subnets' engines (a manifest may name them).
    type Setup = (String, MultiFabric, Vec<Option<EngineKind>>);
    let setups: Vec<Setup> = match &a.manifest {
        Some(p) => {
            let man = fabric::formats::manifest::read(p)?;
            vec![(p.display().to_string(), man.fabric, man.engines)]
        }
        None => a
            .paper
            .iter()
            .map(|&k| {
                let t = TreeSubnets::paper_setup(a.paper_layout, k)?;
                Ok((
                    format!("paper-{k}"),
                    tree_subnets(&t)?,
                    vec![None; k as usize],
                ))
            })
            .collect::<Result<_>>()?,
    };
    let bar = progress(setups.len() * algorithms.len());
    let mut out = Vec::new();
    for (name, m, engines) in &setups {
        let engines: Vec<EngineKind> = engines.iter().map(|e| e.unwrap_or(a.engine)).collect();
        let policy = if a.allow_cycles {
            Policy::AllowCycles
        } else {
            Policy::DeadlockFree
        };
        let routed = pipeline::route_each_under(m, &engines, policy)
            .with_context(|| format!("routing the subnets of {name}"))?;
        let mut results = Vec::new();
        for algorithm in &algorithms {
            let alg = algorithm.name();
            let routes = algorithm.route(&routed.view)?;
            let net = Network::new(m, routed.tables(), &routed.view, &routes)?;
            let global = verify_global(&net);
            if !global.ok() {
                tracing::warn!(setup = %name, algorithm = %alg, "global check failed: {} unreachable pairs, cycle: {}", global.unreachable, global.cycle.is_some());
            }
            let traffic = if global.unreachable == 0 {
                Some(traffic(&net, &a, cfg, name, alg)?)
            } else {
                None
            };
            results.push(AlgResult {
                algorithm: alg.to_string(),
                global,
                traffic,
            });
            if let Some(b) = &bar {
                b.inc(1);
            }
            tracing::info!(setup = %name, algorithm = %alg, "simulated");
        }
        out.push(SetupResult {
            name: name.clone(),
            subnets: m.subnets.len(),
            hosts: m.subnets.iter().map(|s| s.fabric.num_cas()).sum(),
            routers: m.routers.len(),
            results,
        });
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let report = SimReport {
        model: a.model,
        packet: (a.model == Model::Packet).then_some(cfg),
        message_bytes: (a.model == Model::Packet).then_some(a.message_kb * 1024),
        engine: a.engine,
        link_mbs: a.link_mbs,
        seed: a.seed,
        hot_spot: a.hot_spot,
        samples: a.samples,
        setups: out,
        sim_seconds: t0.elapsed().as_secs_f64(),
    };
    if let Some(p) = &a.svg {
        fabric::formats::write_file(p, &plot(&report))?;
    }
    if a.json {
        super::print_json("sim", &report)?;
    } else {
        print_text(&report);
    }
    let deadlocked = report
        .setups
        .iter()
        .flat_map(|s| &s.results)
        .any(|x| x.traffic.as_ref().is_some_and(|t| t.deadlock.is_some()));
    if deadlocked {
        return Err(super::exit::Unsafe(
            "the packet simulation deadlocked (the cycle is in the report)".into(),
        )
        .into());
    }
    Ok(0)
}

/// The packet model's settings from the options, in byte times of the
/// link rate.
fn packet_config(a: &SimArgs) -> Result<Config> {
    let bytes_per_ns = a.link_mbs / 1000.0;
    if !(a.latency_ns >= 0.0 && a.latency_ns.is_finite()) {
        bail!(
            "--latency-ns must be a non-negative number, not {}",
            a.latency_ns
        );
    }
    if !(a.window_us > 0.0
        && a.window_us.is_finite()
        && a.warmup_us >= 0.0
        && a.warmup_us.is_finite())
    {
        bail!("--window-us must be positive and --warmup-us non-negative");
    }
    if a.mtu < 64 {
        bail!("--mtu must be at least 64 bytes, not {}", a.mtu);
    }
    if a.message_kb == 0 {
        bail!("--message-kb must be at least 1");
    }
    let overhead = if a.ideal_link {
        0
    } else {
        fabric::sim::packet::IB_PACKET_OVERHEAD
    };
    let buffer = a.buffer.unwrap_or(4 * a.mtu);
    if u64::from(buffer) < u64::from(a.mtu) + u64::from(overhead) {
        bail!(
            "--buffer ({buffer} bytes) must hold one packet: an MTU ({} bytes) and {overhead} bytes of headers",
            a.mtu
        );
    }
    if let Some(p) = a.min_packet {
        if p == 0 || p > a.mtu {
            bail!("--min-packet must lie in 1..=MTU ({}), not {p}", a.mtu);
        }
    }
    Ok(Config {
        buffer,
        latency: (a.latency_ns * bytes_per_ns).round() as u64,
        mtu: a.mtu,
        check_every: 64 * a.mtu as u64,
        overhead,
    })
}

fn traffic(net: &Network<'_>, a: &SimArgs, cfg: Config, name: &str, alg: &str) -> Result<Traffic> {
    let seen = |traffic: String, d: workload::Deadlocked| DeadlockSeen {
        traffic,
        at_us: d.at as f64 / a.link_mbs,
        channels: d.cycle.iter().map(|&(l, v)| net.describe(l, v)).collect(),
    };
    let mut deadlock = None;
    let r: RingStats = match a.model {
        Model::Flow => sim::rings(net, a.rings, a.seed),
        Model::Packet => workload::rings(net, cfg, a.rings, a.seed, a.message_kb * 1024).map(|r| {
            if let Some(d) = r.deadlock {
                deadlock = Some(seen(
                    format!("ring ({} of {} deadlocked)", r.deadlocked, a.rings + 1),
                    d,
                ));
            }
            r.stats
        }),
    }
    .with_context(|| format!("{name}, {alg}: ring traffic"))?;
    let mut uniform = Vec::new();
    for &isp in &a.isp.0 {
        let (t, d) = uniform_at(net, a, cfg, isp)
            .with_context(|| format!("{name}, {alg}: uniform traffic at ISP {isp}%"))?;
        if deadlock.is_none() {
            deadlock = d.map(|d| seen(format!("uniform ISP {isp}%"), d));
        }
        uniform.push((isp, t * 100.0));
    }
    let mbs = |x: f64| x * a.link_mbs;
    Ok(Traffic {
        nor_mbs: mbs(r.nor),
        ror_min_mbs: mbs(r.ror_min),
        ror_max_mbs: mbs(r.ror_max),
        ror_avg_mbs: mbs(r.ror_avg),
        ror_flow_avg_mbs: mbs(r.ror_flow_avg),
        rings: r.rings,
        uniform,
        deadlock,
    })
}

/// Uniform traffic at inter-subnet share `isp` (percent): the accepted
/// throughput (a share of the link rate) and the deadlock the packet
/// model saw, if any.
fn uniform_at(
    net: &Network<'_>,
    a: &SimArgs,
    cfg: Config,
    isp: u32,
) -> Result<(f64, Option<workload::Deadlocked>), fabric::Error> {
    let u = Uniform {
        isp: isp as f64 / 100.0,
        hot_spot: a.hot_spot,
        samples: a.samples,
        seed: a.seed,
    };
    match a.model {
        Model::Flow => sim::uniform(net, &u).map(|t| (t, None)),
        Model::Packet => {
            let us = |x: f64| (x * a.link_mbs).round() as u64;
            let s = Saturate {
                traffic: u,
                message: 2048,
                min_packet: a.min_packet.unwrap_or(a.mtu),
                warmup: us(a.warmup_us),
                window: us(a.window_us),
                skip_unroutable: false,
                mcast_share: 0.0,
            };
            workload::saturate(net, cfg, &s).map(|t| (t.throughput, t.deadlock))
        }
    }
}

fn progress(n: usize) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let b = indicatif::ProgressBar::new(n as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {pos}/{len} setups x algorithms",
    ) {
        b.set_style(style);
    }
    Some(b)
}

fn rings_of(r: &SimReport) -> usize {
    r.setups
        .iter()
        .flat_map(|s| s.results.iter())
        .find_map(|x| x.traffic.as_ref().map(|t| t.rings))
        .unwrap_or(0)
}

fn print_result(x: &AlgResult) {
    let g = &x.global;
    let check = if g.ok() {
        format!("ok, {} VL", g.vls_used)
    } else if g.cycle.is_some() {
        "CYCLE".to_string()
    } else {
        format!("{} unreach.", g.unreachable)
    };
    match &x.traffic {
        Some(t) => {
            let u: Vec<String> = t
                .uniform
                .iter()
                .map(|(isp, v)| format!("{isp}%:{v:.1}"))
                .collect();
            let ror = format!(
                "{:.0}/{:.0}/{:.0}",
                t.ror_min_mbs, t.ror_max_mbs, t.ror_avg_mbs
            );
            println!(
                "  {:<9} {:>10} {:>9.0} {:>22} {:>13.0}   {}",
                x.algorithm,
                check,
                t.nor_mbs,
                ror,
                t.ror_flow_avg_mbs,
                u.join(" ")
            );
        }
        None => println!(
            "  {:<9} {:>10}   (no traffic: unreachable pairs)",
            x.algorithm, check
        ),
    }
    if let Some(c) = &g.cycle {
        println!("    dependency cycle: {}", c.join(" => "));
    }
    if let Some(d) = x.traffic.as_ref().and_then(|t| t.deadlock.as_ref()) {
        println!(
            "    DEADLOCK in {} after {:.1} µs, full buffers waiting in a cycle: {}",
            d.traffic,
            d.at_us,
            d.channels.join(" => ")
        );
    }
    if let Some(w) = &g.first_unreachable {
        println!(
            "    {} of {} pairs unreachable, e.g. {w}",
            g.unreachable, g.pairs
        );
    }
}

fn print_text(r: &SimReport) {
    println!(
        "{} model, engine {} (where a manifest names none), links {} MB/s, seed {}, {} random rings; uniform: hot spot {}, {} samples",
        r.model,
        r.engine,
        r.link_mbs,
        r.seed,
        rings_of(r),
        r.hot_spot,
        r.samples
    );
    for s in &r.setups {
        println!(
            "\n{}: {} subnets, {} HCAs, {} routers",
            s.name, s.subnets, s.hosts, s.routers
        );
        println!(
            "  {:<9} {:>10} {:>9} {:>22} {:>13}   uniform throughput % by ISP",
            "algorithm", "global", "NOR MB/s", "ROR min/max/avg MB/s", "flow avg MB/s"
        );
        for x in &s.results {
            print_result(x);
        }
        let avg = |n: &str| {
            s.results
                .iter()
                .find(|x| x.algorithm == n)
                .and_then(|x| x.traffic.as_ref())
                .map(|t| t.ror_avg_mbs)
        };
        if let (Some(p), Some(f)) = (avg("prefix"), avg("isfr")) {
            if p > 0.0 {
                println!("  ROR avg ISFR / prefix: {:.2}", f / p);
            }
        }
    }
    println!("\nsimulated in {:.1} s", r.sim_seconds);
}
