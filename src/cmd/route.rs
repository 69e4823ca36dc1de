//! `ibfabric route`: route one subnet, pass the tables through the
//! verification gate, write the OpenSM files.

use super::report::{TablesJson, print_report};
use anyhow::{Context, Result, bail};
use clap::Args;
use fabric::formats::{RoutingFiles, guids};
use fabric::routing::{Base, EngineKind, EngineOptions, RoutingEngine};
use fabric::verify::Policy;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct RouteArgs {
    /// Topology file (ibnetdiscover grammar).
    #[arg(long, short)]
    topology: PathBuf,
    /// Routing engine (`ibfabric engines` describes them). Default: a
    /// deadlock-free one chosen from the topology, printed with the reason:
    /// ftree on a fat tree; dfdn when the switch diameter fits in --max-vls
    /// (one VL per hop; balanced and fast on Dragonflies, Slim Flies, tori);
    /// nue otherwise (deadlock free with any VL count).
    #[arg(long, short, value_enum)]
    engine: Option<EngineKind>,
    /// Output directory; receives the compact table set
    /// (docs/table-set-format.md): ibfabric-lfts.bin, and ibfabric-sl2vl.bin
    /// and ibfabric-pathsl.bin when the engine sets VLs or SLs (else those of
    /// an earlier engine are removed), named with their digests in
    /// ibfabric-tables.txt. Files are replaced whole, crash-safely.
    #[arg(long, short, required_unless_present = "dry_run")]
    out: Option<PathBuf>,
    /// Also write OpenSM's text dumps (opensm-lfts.dump, opensm-sl2vl.dump,
    /// path-sl.txt) beside the compact set: for stock OpenSM's `-R file`
    /// loader and external checkers. They take about 40 times the space.
    #[arg(long)]
    opensm_dump: bool,
    /// Route and verify, print the report, write no tables (--load-svg is
    /// still drawn).
    #[arg(long, conflicts_with = "out")]
    dry_run: bool,
    /// Data VLs the hardware offers.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(1..=15))]
    max_vls: u8,
    /// Service levels the engine may hand out.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u8).range(1..=16))]
    max_sls: u8,
    /// Base routing for dfdn, dfd2 and lash: minhop, sssp, trees (the BFS
    /// trees OpenSM's LASH routes on) or auto (whichever of trees and sssp
    /// loads its busiest link less). Default: auto for lash; for dfdn the
    /// trees (balanced on Dragonflies and Slim Flies, and the fastest), or
    /// auto when the trees load a link more than twice the mean (fat trees,
    /// random graphs); minhop for dfd2.
    #[arg(long, value_enum)]
    base: Option<Base>,
    /// Balance SSSP (sssp, dfsssp, and the sssp base) in N fixed streams
    /// that exchange link loads in rounds instead of one destination after
    /// another: the streams run side by side here and can be shared by
    /// --workers, with the same tables either way. The tables depend on N
    /// (1 is the sequential greedy in GUID order). With 4-16 streams the
    /// busiest link stays within a few percent of classic SSSP's on
    /// Dragonflies, Slim Flies and random graphs, but is up to a few times
    /// worse on fat trees and tori (route those with ftree, updn or
    /// ecube), and DF-SSSP may need a VL or two more. 0: classic SSSP.
    #[arg(long, value_name = "N", default_value_t = 0)]
    sssp_streams: u16,
    /// Root switches for updn: a file with one switch node GUID per line
    /// (0x...), `#` comments allowed. Default: the tree's top switches, or
    /// the graph centre.
    #[arg(long, value_name = "FILE")]
    root_guids: Option<PathBuf>,
    /// Write the tables even when they are not deadlock free (minhop and
    /// sssp on rings, tori, Dragonflies); the exit code is then 3. Without
    /// it such tables are refused and nothing is written.
    #[arg(long)]
    allow_cycles: bool,
    /// Refuse tables that are not deadlock free: the default; kept so that
    /// scripts written for earlier releases still run.
    #[arg(long, hide = true, conflicts_with = "allow_cycles")]
    require_deadlock_free: bool,
    /// Also draw the link-load histogram (links per band of paths per
    /// link) as an SVG file.
    #[arg(long, value_name = "FILE")]
    load_svg: Option<PathBuf>,
    #[command(flatten)]
    mcast: super::mcast::McastArgs,
    #[command(flatten)]
    workers: super::workers::WorkerArgs,
    /// Machine-readable summary on stdout.
    #[arg(long)]
    json: bool,
}

impl RouteArgs {
    fn export(&self) -> fabric::formats::Export {
        fabric::formats::Export {
            opensm_dump: self.opensm_dump,
        }
    }

    /// Whether the command talks to workers over the network.
    pub fn uses_network(&self) -> bool {
        self.workers.wanted()
    }
}

#[derive(Serialize)]
struct RouteJson {
    /// With --workers: the routing job (when the engine split) and the
    /// verification job: who computed which part, what was lost.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    jobs: Vec<worker::coordinator::JobRun>,
    engine: EngineKind,
    /// Why this engine, when none was named.
    #[serde(skip_serializing_if = "Option::is_none")]
    engine_reason: Option<String>,
    dry_run: bool,
    switches: usize,
    hcas: usize,
    routers: usize,
    vls_needed: u32,
    route_seconds: f64,
    /// The verification alone.
    verify_seconds: f64,
    /// Writing the set (files complete on disk, with their digests); 0
    /// when nothing was written. The unicast files are written beside the
    /// verification and put in place once it accepts them (the multicast
    /// files after the trees are accepted), so the wall time is less than
    /// the sum.
    write_seconds: f64,
    files: Vec<String>,
    /// Table files of an earlier routing that this engine does not set.
    removed: Vec<String>,
    written: bool,
    #[serde(flatten)]
    load: super::report::LoadJson,
    /// Node GUIDs of the root switches, for engines that orient the fabric
    /// from roots (the form a root GUID file takes).
    #[serde(skip_serializing_if = "Option::is_none")]
    roots: Option<Vec<String>>,
    #[serde(flatten)]
    tables: TablesJson,
    /// With --mcast-groups: the trees checked with the unicast routes.
    #[serde(skip_serializing_if = "Option::is_none")]
    multicast: Option<super::mcast::McastJson>,
}

pub fn run(a: RouteArgs) -> Result<i32> {
    let f = super::read_fabric_to_route(&a.topology)?;
    let (kind, reason) = match a.engine {
        Some(k) => (k, None),
        None => {
            let c = fabric::routing::auto::choose(&f, a.max_vls);
            tracing::info!(engine = c.engine.name(), reason = %c.reason, "engine chosen");
            (c.engine, Some(c.reason))
        }
    };
    run_with(&a, &f, kind.engine().as_ref(), reason)
}

/// `route` with the engine given (tests hand it engines the registry does
/// not have).
fn run_with(
    a: &RouteArgs,
    f: &fabric::Fabric,
    engine: &dyn RoutingEngine,
    reason: Option<String>,
) -> Result<i32> {
    let roots = read_roots(a, f, engine)?;
    a.mcast.check_writable(a.dry_run)?;
    let progress = Progress::new(format!("routing ({})", engine.name()));
    let cb = |done: u64, total: u64| progress.update(done, total);
    let opts = a.mcast.engine_options(EngineOptions {
        max_vls: a.max_vls,
        max_sls: a.max_sls,
        base: a.base,
        progress: Some(&cb),
        roots: roots.as_deref(),
        sssp_streams: a.sssp_streams,
    })?;
    let exec = a.workers.executor(true)?;
    let rt = super::runtime::runtime()?;
    let placed = super::workers::place(&rt, &exec, &a.workers, f)?;
    let t = Instant::now();
    let mut jobs = Vec::new();
    let (mut routing, job) = rt.block_on(worker::exec::route(placed.as_ref(), engine, f, &opts))?;
    jobs.extend(job);
    let mc = a.mcast.plan(f, &mut routing, a.max_vls, a.max_sls)?;
    let route_secs = t.elapsed().as_secs_f64();
    progress.finish();
    let vls_needed = routing.vls_needed;
    let load = super::report::LoadJson::new(f, &routing.lfts);
    if let Some(p) = &a.load_svg {
        let title = format!("{} on {}", engine.name(), a.topology.display());
        fabric::formats::write_file(p, &load.link_load.histogram_svg(&title))
            .context("writing the link-load histogram")?;
    }
    let root_guids = if engine.uses_roots() {
        Some(
            fabric::routing::updn::selected_roots(f, roots.as_deref())?
                .into_iter()
                .map(|n| format!("{:#018x}", f.guid(n)))
                .collect::<Vec<_>>(),
        )
    } else {
        None
    };
    // Cyclic tables reach a fabric only when the operator says so.
    let policy = if a.allow_cycles {
        Policy::AllowCycles
    } else {
        Policy::DeadlockFree
    };
    let sp = super::spinner("verifying (channel dependency graph from the tables)");
    let g = gate(
        a,
        f,
        engine,
        routing,
        policy,
        (&rt, placed.as_ref()),
        mc.as_ref(),
    )?;
    jobs.extend(g.job);
    let (outcome, mrep, candidate) = (g.outcome, g.mrep, g.candidate);
    let mcast_refusal = match (&outcome, &mc) {
        (Ok(v), Some(mc)) => fabric::verify::mcast::reserved_vl_taken(v.report(), mc),
        _ => None,
    }
    .or_else(|| mrep.as_ref().and_then(|m| m.refusal()));
    drop(sp);
    let verify_secs = g.verify_seconds;
    tracing::info!(route_secs, verify_secs, "routed and verified");

    let t = Instant::now();
    let (report, files) = match (&outcome, &a.out) {
        (Ok(v), Some(out)) if !a.dry_run && mcast_refusal.is_none() => {
            let _sp = super::spinner(&format!("writing tables to {}", out.display()));
            let mut staged = match candidate {
                Some(c) => c?.confirm(f, v)?,
                None => fabric::formats::stage_routing(f, v, out, a.export())?,
            };
            if let Some(mc) = &mc {
                staged = staged.with_multicast(f, mc)?;
            }
            (v.report(), staged.commit()?)
        }
        (Ok(v), _) => (v.report(), RoutingFiles::default()),
        (Err(refused), _) => (&*refused.report, RoutingFiles::default()),
    };
    let write_secs = g.staged_seconds + t.elapsed().as_secs_f64();
    let paths = |ps: &[PathBuf]| ps.iter().map(|p| p.display().to_string()).collect();
    let summary = RouteJson {
        jobs,
        engine: engine.kind(),
        engine_reason: reason,
        dry_run: a.dry_run,
        switches: f.switches().len(),
        hcas: f.num_cas(),
        routers: f.num_routers(),
        vls_needed: vls_needed.map_or(report.vls_used, u32::from),
        route_seconds: route_secs,
        verify_seconds: verify_secs,
        write_seconds: write_secs,
        files: paths(&files.written),
        removed: paths(&files.removed),
        written: outcome.is_ok() && !a.dry_run && mcast_refusal.is_none(),
        load,
        roots: root_guids,
        tables: TablesJson::new(report, f),
        multicast: mrep.map(|m| super::mcast::McastJson::new(m, f)),
    };
    if a.json {
        super::print_json("route", &summary)?;
    } else {
        print_text(&summary, report, f, engine, vls_needed);
    }
    if let Some(why) = mcast_refusal {
        return Err(super::exit::Unsafe(format!("{why}; nothing written")).into());
    }
    conclude(a, engine, outcome)
}

/// What the verification gate said, with the set staged beside it.
struct Gated {
    outcome: Result<fabric::verify::Verified<fabric::tables::Routing>, fabric::verify::Refused>,
    mrep: Option<fabric::verify::mcast::McastReport>,
    job: Option<worker::coordinator::JobRun>,
    /// The unicast set written while the verifier ran (not a dry run); the
    /// multicast files join it once the trees are accepted.
    candidate: Option<Result<fabric::formats::Candidate, fabric::Error>>,
    staged_seconds: f64,
    /// The verification alone (the set was staged beside it).
    verify_seconds: f64,
}

/// Passes the routing through the gate. The set is staged beside the
/// verification, to be put in place only if accepted; with multicast and
/// no workers, one walk gives the unicast report and the graph the trees
/// are checked in.
fn gate(
    a: &RouteArgs,
    f: &fabric::Fabric,
    engine: &dyn RoutingEngine,
    routing: fabric::tables::Routing,
    policy: Policy,
    (rt, placed): (&tokio::runtime::Runtime, Option<&worker::exec::Placement>),
    mc: Option<&fabric::mcast::Multicast>,
) -> Result<Gated> {
    let early = match &a.out {
        Some(out) if !a.dry_run => Some(out.as_path()),
        _ => None,
    };
    let stage = |r: &fabric::tables::Routing| {
        let t = Instant::now();
        let c =
            early.map(|out| fabric::formats::stage_candidate(f, r, engine.kind(), out, a.export()));
        (c, t.elapsed().as_secs_f64())
    };
    if let (None, Some(mc)) = (placed, mc) {
        let (outcome, mrep, (candidate, staged_seconds), took) =
            fabric::verify::gate::accept_with_mcast_while(f, engine, routing, policy, mc, stage);
        return Ok(Gated {
            outcome,
            mrep,
            job: None,
            candidate,
            staged_seconds,
            verify_seconds: took.as_secs_f64(),
        });
    }
    let done = worker::exec::accept_while(rt, placed, f, engine, routing, policy, stage)?;
    let mrep = match (&done.accepted, mc) {
        (Ok(v), Some(mc)) => Some(fabric::verify::mcast::verify_with_mcast(f, v.get(), mc).1),
        _ => None,
    };
    Ok(Gated {
        outcome: done.accepted,
        mrep,
        job: done.job,
        candidate: done.side.0,
        staged_seconds: done.side.1,
        verify_seconds: done.verify_seconds,
    })
}

/// The root switch GUIDs `--root-guids` names, for an engine that takes
/// them.
fn read_roots(
    a: &RouteArgs,
    f: &fabric::Fabric,
    engine: &dyn RoutingEngine,
) -> Result<Option<Vec<u64>>> {
    match &a.root_guids {
        Some(p) if !engine.uses_roots() => bail!(
            "--root-guids {} given, but engine '{}' takes no root switches (updn does)",
            p.display(),
            engine.name()
        ),
        Some(p) => {
            Ok(Some(guids::read_switch_guids(f, p).with_context(|| {
                format!("root switches for {}", engine.name())
            })?))
        }
        None => Ok(None),
    }
}

/// The routing's progress bar. Engines that work in stages (LASH: paths,
/// then layers) restart the count with a new total: each stage gets its
/// own number.
struct Progress {
    label: String,
    pb: Option<indicatif::ProgressBar>,
    stage: std::sync::atomic::AtomicU64,
}

impl Progress {
    fn new(label: String) -> Self {
        Self {
            pb: super::progress_bar(&label),
            label,
            stage: std::sync::atomic::AtomicU64::new(1),
        }
    }

    fn update(&self, done: u64, total: u64) {
        let Some(pb) = &self.pb else { return };
        if pb.length().is_some_and(|l| l != 0 && l != total) {
            let n = self
                .stage
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1;
            pb.set_message(format!("{}, stage {n}", self.label));
            pb.reset();
        }
        pb.set_length(total);
        pb.set_position(done);
    }

    fn finish(&self) {
        if let Some(pb) = &self.pb {
            pb.finish_and_clear();
        }
    }
}

fn print_text(
    s: &RouteJson,
    report: &fabric::verify::Report,
    f: &fabric::Fabric,
    engine: &dyn RoutingEngine,
    vls_needed: Option<u8>,
) {
    match &s.engine_reason {
        Some(r) => println!("engine          {} (chosen: {r})", engine.name()),
        None => println!("engine          {}", engine.name()),
    }
    println!("switches        {}", s.switches);
    println!("HCAs            {}", s.hcas);
    println!("routing time    {:.3} s", s.route_seconds);
    println!("verify time     {:.3} s", s.verify_seconds);
    if s.written {
        println!("write time      {:.3} s", s.write_seconds);
    }
    for j in &s.jobs {
        super::report::print_job(j);
    }
    print_report(report, f);
    if let Some(m) = &s.multicast {
        super::mcast::print(&m.report, f);
    }
    s.load.print();
    if let Some(r) = &s.roots {
        println!("roots           {}", r.join(" "));
    }
    if let Some(n) = vls_needed {
        println!("VLs needed      {n} (routes then spread over the VLs allowed)");
    }
    for p in &s.files {
        println!("wrote           {p}");
    }
    for p in &s.removed {
        println!("removed         {p} (not set by {})", engine.name());
    }
}

/// The exit status: refused tables are an error (nothing written), tables
/// written although unsafe exit 3.
fn conclude(
    a: &RouteArgs,
    engine: &dyn RoutingEngine,
    outcome: Result<fabric::verify::Verified<fabric::tables::Routing>, fabric::verify::Refused>,
) -> Result<i32> {
    let out = a
        .out
        .as_ref()
        .map_or_else(|| "(dry run)".to_string(), |p| p.display().to_string());
    match outcome {
        Err(refused) => {
            let hint = if refused.report.ok() || engine.claims_deadlock_free() {
                String::new()
            } else {
                format!(
                    " ({} is not deadlock free here: omit --engine to have a deadlock-free \
                     one chosen, or pass --allow-cycles)",
                    engine.name()
                )
            };
            Err(super::exit::Unsafe(format!(
                "{}; nothing written to {out}{hint}",
                refused.refusal
            ))
            .into())
        }
        Ok(v) if !v.report().ok() => {
            tracing::warn!(
                engine = engine.name(),
                "tables written although they are NOT deadlock free or leave pairs unreachable"
            );
            Ok(super::exit::UNSAFE)
        }
        Ok(_) if a.dry_run => {
            if !a.json {
                println!("dry run         nothing written");
            }
            Ok(super::exit::OK)
        }
        Ok(_) => Ok(super::exit::OK),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric::testing::{MislabelledEngine, cyclic_torus};

    fn args(topology: PathBuf, out: PathBuf) -> RouteArgs {
        RouteArgs {
            topology,
            engine: Some(EngineKind::Dfdn),
            out: Some(out),
            opensm_dump: false,
            dry_run: false,
            max_vls: 8,
            max_sls: 16,
            base: None,
            sssp_streams: 0,
            root_guids: None,
            allow_cycles: false,
            require_deadlock_free: false,
            load_svg: None,
            mcast: Default::default(),
            workers: super::super::workers::WorkerArgs {
                workers: Vec::new(),
                workers_from: None,
                parts_per_worker: 4,
                tls: super::super::runtime::ClientTls {
                    ca: None,
                    cert: None,
                    key: None,
                    insecure: false,
                },
            },
            json: true,
        }
    }

    #[test]
    fn load_svg_draws_the_histogram_of_the_tables_written() {
        let d = tempfile::tempdir().expect("tmp");
        let net = d.path().join("df.net");
        let f = fabric::generate::generate(&fabric::generate::Topology::Dragonfly {
            p: 2,
            hosts: None,
        })
        .expect("dragonfly");
        fabric::formats::write_file(&net, &fabric::formats::ibnetdiscover::write(&f))
            .expect("write");
        let svg = d.path().join("load.svg");
        let mut a = args(net.clone(), d.path().join("out"));
        a.load_svg = Some(svg.clone());
        assert_eq!(
            run_with(&a, &f, EngineKind::Dfdn.engine().as_ref(), None).expect("routed"),
            0
        );
        // The figures drawn are those of the LFTs written, read back.
        let g = fabric::formats::ibnetdiscover::read(&net).expect("parse");
        let lfts = fabric::formats::tableset::read_set(&g, &d.path().join("out"))
            .expect("lfts written")
            .lfts;
        let load = fabric::load::link_load(&g, &lfts);
        let text = std::fs::read_to_string(&svg).expect("svg written");
        assert!(text.starts_with("<svg"), "{text}");
        assert!(text.contains(&format!("max {} paths, mean {:.1}", load.max, load.mean)));
        let bars = text.matches("<rect x=").count();
        assert_eq!(bars, load.histogram.len(), "one bar per bucket");
    }

    #[test]
    fn route_refuses_a_cyclic_routing_from_an_engine_that_claims_deadlock_freedom() {
        let d = tempfile::tempdir().expect("tmp");
        let net = d.path().join("torus.net");
        let f = cyclic_torus().expect("torus");
        fabric::formats::write_file(&net, &fabric::formats::ibnetdiscover::write(&f))
            .expect("write");
        let out = d.path().join("out");
        // Even with --allow-cycles: the engine's claim is wrong.
        let mut allow = args(net.clone(), out.clone());
        allow.allow_cycles = true;
        let err = run_with(&allow, &f, &MislabelledEngine, None).expect_err("refused");
        assert_eq!(crate::cmd::exit::code_of(&err), crate::cmd::exit::UNSAFE);
        assert!(err.to_string().contains("claims deadlock freedom"), "{err}");
        assert!(err.to_string().contains("nothing written"), "{err}");
        assert!(!out.exists(), "nothing written");
        // The real DF-DN on the same file passes and writes its three files.
        let dfdn = EngineKind::Dfdn.engine();
        assert_eq!(
            run_with(&args(net, out.clone()), &f, dfdn.as_ref(), None).expect("routes"),
            0
        );
        assert!(out.join("ibfabric-lfts.bin").is_file());
        assert!(out.join("ibfabric-sl2vl.bin").is_file());
        assert!(out.join("ibfabric-pathsl.bin").is_file());
        // Refused over a set in place: the cyclic tables were written beside
        // the verification, and none of them is left; the set is unchanged.
        let listing = |dir: &std::path::Path| {
            let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
                .expect("dir")
                .map(|e| {
                    let e = e.expect("entry");
                    let name = e.file_name().to_string_lossy().into_owned();
                    (name, std::fs::read(e.path()).expect("read"))
                })
                .collect();
            v.sort();
            v
        };
        let before = listing(&out);
        let err = run_with(&allow, &f, &MislabelledEngine, None).expect_err("refused");
        assert!(err.to_string().contains("nothing written"), "{err}");
        assert_eq!(
            listing(&out),
            before,
            "the set in place, and nothing beside it"
        );
    }
}
