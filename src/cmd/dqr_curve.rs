//! `ibfabric dqr-curve`: how many successive random link faults a routing
//! survives with dynamic quick reconfiguration (the DQR paper's tolerance
//! curves), from a topology file; the same figures as the `dqr` bench for
//! the same fabric, engine, variant and seed.

use anyhow::{Context, Result, bail};
use clap::Args;
use fabric::dqr::curve::{self, Curve, CurveSetup, ListAfter};
use fabric::dqr::{self, ChannelList, Options, Turns};
use fabric::routing::{EngineKind, EngineOptions};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct DqrCurveArgs {
    /// Topology file (ibnetdiscover grammar).
    #[arg(long, short)]
    topology: PathBuf,
    /// Routing engine of the tables the faults hit.
    #[arg(long, short)]
    engine: EngineKind,
    /// Link faults per run at most (k = 1..FAULTS).
    #[arg(long, default_value_t = 10)]
    faults: usize,
    /// Runs (each from the routed fabric, faults drawn anew).
    #[arg(long, default_value_t = 100)]
    runs: usize,
    /// Run r draws its faults from ChaCha8 seeded with SEED + r (the `dqr`
    /// bench uses 0).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// How turns that go down the channel list are admitted.
    #[arg(long, value_enum, default_value = "all")]
    turns: Turns,
    /// Local detours around each failed link before the search (default:
    /// `mesh` for `dor` and `ecube`, `none` otherwise, as `reroute`).
    #[arg(long, value_enum)]
    detours: Option<dqr::Detours>,
    /// The channel list after each reroute: pruned to the new tables (as
    /// the agent does), rebuilt afresh, or carried.
    #[arg(long, value_enum, default_value = "pruned")]
    list: ListAfter,
    /// Switch-to-switch flows as data traffic (the DQR paper's fat-tree
    /// experiment): each switch gets a management endpoint, the flows
    /// toward them start disconnected and DQR reconnects them (U-turns at
    /// fat-tree leaves) before the faults.
    #[arg(long)]
    switch_flows: bool,
    /// Also draw the curve as an SVG to this file.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct CurveJson<'a> {
    topology: &'a std::path::Path,
    engine: &'static str,
    turns: dqr::Turns,
    detours: dqr::Detours,
    list: ListAfter,
    route_seconds: f64,
    curve_seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    switch_flows: Option<Reconnected>,
    #[serde(flatten)]
    curve: &'a Curve,
}

pub fn run(a: DqrCurveArgs) -> Result<i32> {
    if a.runs == 0 || a.faults == 0 {
        bail!("--runs and --faults must be at least 1");
    }
    let f = super::read_fabric_to_route(&a.topology)?;
    let t = Instant::now();
    fabric::routing::check_lmc(a.engine.engine().as_ref(), &f)?;
    let routing = a
        .engine
        .engine()
        .route(&f, &EngineOptions::default())
        .with_context(|| format!("{}: routing with {}", a.topology.display(), a.engine.name()))?;
    let (list, report) = ChannelList::build(&f, &routing)
        .with_context(|| format!("{}: the channel list", a.topology.display()))?;
    if !report.all_pairs_routed() {
        bail!(
            "{}: {} left {} pairs unrouted; DQR reroutes faults of a connected routing",
            a.topology.display(),
            a.engine.name(),
            report.broken_pairs
        );
    }
    let route_seconds = t.elapsed().as_secs_f64();
    let (f, routing, list, reconnected) = if a.switch_flows {
        let (f, r, l, rec) = reconnect(&a, &f, &routing)?;
        (f, r, l, Some(rec))
    } else {
        (f, routing, list, None)
    };
    let detours = a.detours.unwrap_or(dqr::Detours::default_for(a.engine));
    let setup = CurveSetup {
        runs: a.runs,
        faults: a.faults,
        seed: a.seed,
        options: Options {
            turns: a.turns,
            detours,
            ..Options::default()
        },
        list: a.list,
    };
    let pb = super::progress_bar("runs");
    if let Some(pb) = &pb {
        pb.set_length(a.runs as u64);
    }
    let t = Instant::now();
    let c = curve::tolerance(&f, &routing, &list, &setup, |_| {
        if let Some(pb) = &pb {
            pb.inc(1);
        }
    });
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let curve_seconds = t.elapsed().as_secs_f64();
    tracing::info!(runs = a.runs, secs = curve_seconds, "curve computed");
    let label = format!(
        "{} {} ({:?}, {} runs, seed {})",
        a.topology.display(),
        a.engine.name(),
        setup.options.turns,
        a.runs,
        a.seed
    );
    if let Some(svg) = &a.svg {
        fabric::formats::write_file(svg, &dqr::curve_svg::svg(&[(label, c.percent.clone())]))
            .with_context(|| format!("writing {}", svg.display()))?;
    }
    if a.json {
        super::print_json(
            "dqr-curve",
            &CurveJson {
                topology: &a.topology,
                engine: a.engine.name(),
                turns: setup.options.turns,
                detours,
                list: setup.list,
                route_seconds,
                curve_seconds,
                switch_flows: reconnected,
                curve: &c,
            },
        )?;
    } else {
        print_text(&a, &c, route_seconds, curve_seconds, reconnected)?;
    }
    Ok(0)
}

/// What reconnecting the switch-to-switch flows took.
#[derive(Serialize, Clone, Copy)]
struct Reconnected {
    endpoints: usize,
    flows_broken: u64,
    flows_rerouted: u64,
    entries_changed: u64,
    vls_after: u32,
    seconds: f64,
}

/// The fabric with a management endpoint per switch, and `routing` with
/// the flows toward them reconnected by DQR (its own checks: connected,
/// deadlock free, no more VLs, a safe transition).
fn reconnect(
    a: &DqrCurveArgs,
    f: &fabric::Fabric,
    routing: &fabric::tables::Routing,
) -> Result<(
    fabric::Fabric,
    fabric::tables::Routing,
    ChannelList,
    Reconnected,
)> {
    let t = Instant::now();
    let sf = dqr::switch_flows::disconnected(f, routing)
        .with_context(|| format!("{}: adding the switches' endpoints", a.topology.display()))?;
    let (mut list, _) = ChannelList::build(&sf.fabric, &sf.routing).with_context(|| {
        format!(
            "{}: the channel list with switch flows",
            a.topology.display()
        )
    })?;
    let opts = Options {
        turns: a.turns,
        reconnect: true,
        ..Options::default()
    };
    let out = dqr::reroute(&sf.fabric, &sf.routing, &mut list, &opts).with_context(|| {
        format!(
            "{}: DQR could not reconnect the switch-to-switch flows of {}",
            a.topology.display(),
            a.engine.name()
        )
    })?;
    let s = &out.stats;
    let rec = Reconnected {
        endpoints: sf.endpoints.len(),
        flows_broken: s.flows_broken,
        flows_rerouted: s.flows_rerouted,
        entries_changed: s.entries_changed,
        vls_after: s.vls_after,
        seconds: t.elapsed().as_secs_f64(),
    };
    tracing::info!(
        flows = rec.flows_rerouted,
        secs = rec.seconds,
        "switch flows reconnected"
    );
    Ok((sf.fabric, out.routing, list, rec))
}

fn print_text(
    a: &DqrCurveArgs,
    c: &Curve,
    route_seconds: f64,
    curve_seconds: f64,
    reconnected: Option<Reconnected>,
) -> Result<()> {
    use std::io::Write as _;
    let mut o = std::io::stdout().lock();
    if let Some(r) = reconnected {
        writeln!(
            o,
            "switch flows: {} management endpoints, {} flows reconnected by DQR ({} entries) in {:.2} s, {} VL(s)",
            r.endpoints, r.flows_rerouted, r.entries_changed, r.seconds, r.vls_after
        )?;
    }
    writeln!(
        o,
        "{}: {} routed and its channel list built in {route_seconds:.2} s; {} runs of up to {} link faults in {curve_seconds:.1} s",
        a.topology.display(),
        a.engine.name(),
        c.runs,
        c.faults
    )?;
    writeln!(
        o,
        "{:>3} {:>10} {:>8} {:>15}",
        "k", "tolerated", "P(k)", "flows rerouted"
    )?;
    for k in 0..c.faults {
        let rer =
            c.flows_rerouted_percent[k].map_or_else(|| "-".to_string(), |p| format!("{p:.2}%"));
        writeln!(
            o,
            "{:>3} {:>10} {:>7.1}% {:>15}",
            k + 1,
            c.tolerated[k],
            c.percent[k],
            rer
        )?;
    }
    for s in &c.stopped {
        writeln!(o, "stopped at k={}: {} ({} runs)", s.k, s.reason, s.runs)?;
    }
    let ps: Vec<String> = c.percent.iter().map(|p| format!("{p:.1}")).collect();
    writeln!(
        o,
        "csv,{},{},{},{}",
        a.topology.display(),
        a.engine.name(),
        c.runs,
        ps.join(",")
    )?;
    o.flush()?;
    Ok(())
}
