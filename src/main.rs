//! `ibfabric`: the one user-facing binary.

mod gen_cli;
mod multi_cli;
mod services;
mod sim_cli;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use fabric::formats::{guids, ibnetdiscover, lft, pathsl, sl2vl, write_file};
use fabric::graph::SwitchGraph;
use fabric::routing::{self, EngineOptions};
use fabric::tables::Routing;
use fabric::verify::{self, Report};
use fabric::Fabric;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "ibfabric",
    version,
    about = "Deadlock-free routing for InfiniBand subnets: generate topologies, route, verify",
    long_about = "ibfabric computes and verifies routing tables for InfiniBand subnets.\n\n\
        Topologies are read in the ibnetdiscover grammar (what `ibnetdiscover` prints and \
        `ibsim` reads). Tables are written in the files OpenSM reads and writes: \
        opensm-lfts.dump (load with `opensm -R file -U FILE`), opensm-sl2vl.dump, and \
        path-sl.txt (the SL per source/destination LID).\n\n\
        Every table ibfabric writes has been checked by the verifier, which rebuilds the \
        channel dependency graph from the tables alone.\n\n\
        Logs go to stderr; set RUST_LOG (e.g. RUST_LOG=debug) or pass -v for more."
)]
struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate a topology file (ibnetdiscover grammar, loadable by ibsim).
    Gen(GenArgs),
    /// Print counts, diameter and radix of a topology file.
    Info(InfoArgs),
    /// Route a topology with an engine, verify the result, write OpenSM files.
    Route(RouteArgs),
    /// Route a multi-subnet fabric (manifest): every subnet, the inter-subnet
    /// routes, a whole-fabric deadlock check; write tables and mapping files.
    RouteMulti(multi_cli::RouteMultiArgs),
    /// Verify tables against a topology: connectivity, loops, deadlock freedom.
    Verify(VerifyArgs),
    /// List the routing engines.
    Engines,
    /// Run a subnet agent: route and verify the subnet, report to the controller, answer path queries.
    Agent(services::ConfigArgs),
    /// Run a controller: collect subnet reports, compute inter-subnet routes, push tables.
    Controller(services::ConfigArgs),
    /// Run a router's firmware side: hold egress tables, answer forwarding queries.
    Router(services::ConfigArgs),
    /// Generate a multi-subnet fabric and run controller, agents and routers in one process.
    Demo(services::DemoArgs),
    /// Simulate traffic (flow level) over inter-subnet routes: HPCC rings, uniform traffic.
    Sim(sim_cli::SimArgs),
}

#[derive(Args)]
struct GenArgs {
    #[command(subcommand)]
    kind: gen_cli::GenKind,
    /// Output file ("-" for standard output).
    #[arg(short, long, global = true, default_value = "-")]
    out: PathBuf,
    /// Print a JSON summary on stdout (needs --out FILE).
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Args)]
struct InfoArgs {
    /// Topology file (ibnetdiscover grammar).
    file: PathBuf,
    /// Machine-readable output (includes the sorted node GUIDs).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct RouteArgs {
    /// Topology file (ibnetdiscover grammar).
    #[arg(long, short)]
    topology: PathBuf,
    /// Routing engine (see `ibfabric engines`).
    #[arg(long, short, default_value = "minhop")]
    engine: String,
    /// Output directory; receives opensm-lfts.dump, and opensm-sl2vl.dump and
    /// path-sl.txt when the engine sets VLs or SLs.
    #[arg(long, short)]
    out: PathBuf,
    /// Data VLs the hardware offers.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(1..=15))]
    max_vls: u8,
    /// Service levels the engine may hand out.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u8).range(1..=16))]
    max_sls: u8,
    /// Base routing for dfdn and dfd2: minhop or sssp.
    #[arg(long, default_value = "minhop")]
    base: routing::Base,
    /// Root switches for updn: a file with one switch node GUID per line
    /// (0x...), `#` comments allowed. Default: the tree's top switches, or
    /// the graph centre.
    #[arg(long, value_name = "FILE")]
    root_guids: Option<PathBuf>,
    /// Refuse to write tables that are not deadlock free, whatever the engine.
    #[arg(long)]
    require_deadlock_free: bool,
    /// Machine-readable summary on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct VerifyArgs {
    /// Topology file (ibnetdiscover grammar).
    #[arg(long, short)]
    topology: PathBuf,
    /// Directory holding opensm-lfts.dump and optionally opensm-sl2vl.dump and path-sl.txt.
    #[arg(long, short, conflicts_with_all = ["lfts"])]
    dir: Option<PathBuf>,
    /// LFT dump file (opensm-lfts.dump format).
    #[arg(long)]
    lfts: Option<PathBuf>,
    /// SL-to-VL dump (opensm-sl2vl.dump format); absent = VL 0 everywhere.
    #[arg(long)]
    sl2vl: Option<PathBuf>,
    /// Path SL file (path-sl.txt format); absent = SL 0 for every pair.
    #[arg(long)]
    path_sl: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

fn main() {
    let cli = Cli::parse();
    let level = match cli.verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let res = match cli.cmd {
        Cmd::Gen(a) => cmd_gen(a),
        Cmd::Info(a) => cmd_info(a),
        Cmd::Route(a) => cmd_route(a),
        Cmd::RouteMulti(a) => multi_cli::cmd_route_multi(a),
        Cmd::Verify(a) => cmd_verify(a),
        Cmd::Agent(a) => services::cmd_agent(a),
        Cmd::Controller(a) => services::cmd_controller(a),
        Cmd::Router(a) => services::cmd_router(a),
        Cmd::Demo(a) => services::cmd_demo(a),
        Cmd::Sim(a) => sim_cli::cmd_sim(a),
        Cmd::Engines => {
            for e in routing::registry() {
                println!(
                    "{:<10} {}{}",
                    e.name(),
                    e.description(),
                    if e.claims_deadlock_free() {
                        ""
                    } else {
                        " [not deadlock free]"
                    }
                );
            }
            Ok(0)
        }
    };
    match res {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}

fn load(path: &Path) -> Result<Fabric> {
    let t = Instant::now();
    let f = ibnetdiscover::read(path)?;
    tracing::info!(
        file = %path.display(),
        switches = f.switches().len(),
        end_ports = f.endports().len(),
        secs = t.elapsed().as_secs_f64(),
        "topology loaded"
    );
    Ok(f)
}

#[derive(serde::Serialize)]
struct Info {
    switches: usize,
    cas: usize,
    routers: usize,
    links: usize,
    /// Connected CA and router ports.
    ports: usize,
    max_lid: u16,
    /// Switch-graph diameter in hops; null when disconnected.
    diameter: Option<u32>,
    /// Most ports on one switch.
    max_radix: u8,
    hosts_per_switch_min: usize,
    hosts_per_switch_max: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    guids: Vec<String>,
}

fn info_of(f: &Fabric, with_guids: bool) -> Info {
    let g = SwitchGraph::new(f);
    let mut hosts = vec![0usize; f.switches().len()];
    for &e in f.endports() {
        let r = f.remote(e);
        if let Some(si) = f.switch_index(f.node_of(r)) {
            hosts[si as usize] += 1;
        }
    }
    let mut guids: Vec<String> = if with_guids {
        (0..f.num_nodes() as u32)
            .map(|n| format!("0x{:016x}", f.guid(n)))
            .collect()
    } else {
        Vec::new()
    };
    guids.sort();
    Info {
        switches: f.switches().len(),
        cas: f.num_cas(),
        routers: f.num_routers(),
        links: f.num_links(),
        ports: f.endports().len(),
        max_lid: f.max_lid(),
        diameter: g.diameter(),
        max_radix: f
            .switches()
            .iter()
            .map(|&s| f.num_ports(s))
            .max()
            .unwrap_or(0),
        hosts_per_switch_min: hosts.iter().copied().min().unwrap_or(0),
        hosts_per_switch_max: hosts.iter().copied().max().unwrap_or(0),
        guids,
    }
}

fn print_info(i: &Info) {
    println!("switches        {}", i.switches);
    println!("CAs             {}", i.cas);
    println!("routers         {}", i.routers);
    println!("links           {}", i.links);
    println!("end ports       {}", i.ports);
    println!("max LID         {}", i.max_lid);
    match i.diameter {
        Some(d) => println!("diameter        {d} (switch hops)"),
        None => println!("diameter        disconnected"),
    }
    println!("max radix       {}", i.max_radix);
    println!(
        "hosts/switch    {}..{}",
        i.hosts_per_switch_min, i.hosts_per_switch_max
    );
}

fn cmd_gen(a: GenArgs) -> Result<i32> {
    if let Some(t) = gen_cli::tree_subnets(&a.kind)? {
        if a.out.as_os_str() == "-" {
            bail!("'gen multi' writes a directory: pass --out DIR");
        }
        let m = fabric::multi::tree_subnets(&t)?;
        let p = fabric::formats::manifest::write(&m, &a.out)?;
        let cas: usize = m.subnets.iter().map(|s| s.fabric.num_cas()).sum();
        if a.json {
            let v = serde_json::json!({
                "manifest": p.display().to_string(),
                "subnets": m.subnets.len(),
                "routers": m.routers.len(),
                "cas": cas,
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            eprintln!(
                "{} subnets, {} routers, {cas} CAs -> {}",
                m.subnets.len(),
                m.routers.len(),
                p.display()
            );
        }
        return Ok(0);
    }
    let topo = gen_cli::topology(&a.kind)?;
    let t = Instant::now();
    let f = fabric::gen::generate(&topo)?;
    let secs = t.elapsed().as_secs_f64();
    let text = ibnetdiscover::write(&f);
    if a.out.as_os_str() == "-" {
        if a.json {
            bail!("--json needs --out FILE (the topology itself goes to stdout otherwise)");
        }
        print!("{text}");
    } else {
        write_file(&a.out, &text)?;
        let info = info_of(&f, false);
        if a.json {
            let mut v = serde_json::to_value(&info)?;
            v["topology"] = serde_json::json!(topo.name());
            v["file"] = serde_json::json!(a.out.display().to_string());
            v["seconds"] = serde_json::json!(secs);
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            eprintln!(
                "{}: {} switches, {} CAs, {} links, diameter {} -> {}",
                topo.name(),
                info.switches,
                info.cas,
                info.links,
                info.diameter
                    .map(|d| d.to_string())
                    .unwrap_or_else(|| "disconnected".into()),
                a.out.display()
            );
        }
    }
    Ok(0)
}

fn cmd_info(a: InfoArgs) -> Result<i32> {
    let f = load(&a.file)?;
    let i = info_of(&f, a.json);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&i)?);
    } else {
        print_info(&i);
    }
    Ok(0)
}

pub(crate) fn progress_bar(label: &str) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new(0);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    pb.set_message(label.to_string());
    Some(pb)
}

fn report_json(r: &Report, f: &Fabric) -> serde_json::Value {
    serde_json::json!({
        "deadlock_free": r.deadlock_free(),
        "all_pairs_routed": r.all_pairs_routed(),
        "pairs": r.pairs,
        "broken_pairs": r.broken_pairs,
        "broken_examples": r.broken_examples,
        "vls": r.vls_used,
        "max_vl": r.max_vl,
        "sls": r.sls_used,
        "max_hops": r.max_hops,
        "cdg_vertices": r.cdg_vertices,
        "cdg_edges": r.cdg_edges,
        "cycle": r.cycle.as_ref().map(|c| c.iter().map(|vc| verify::describe_channel(f, *vc)).collect::<Vec<_>>()),
    })
}

fn print_report(r: &Report, f: &Fabric) {
    println!("pairs           {} ({} broken)", r.pairs, r.broken_pairs);
    for b in &r.broken_examples {
        println!(
            "  broken: LID {} -> LID {}: {:?}",
            b.src_lid, b.dst_lid, b.fault
        );
    }
    println!(
        "VLs used        {} (switch-to-switch channels, max VL {})",
        r.vls_used, r.max_vl
    );
    println!("SLs used        {}", r.sls_used);
    println!("max hops        {} (switch-to-switch links)", r.max_hops);
    println!(
        "CDG             {} virtual channels, {} dependencies",
        r.cdg_vertices, r.cdg_edges
    );
    match r.describe_cycle(f) {
        None => println!("deadlock free   yes"),
        Some(c) => {
            println!(
                "deadlock free   NO: channel dependency cycle of {} channels:",
                r.cycle.as_ref().map_or(0, |c| c.len())
            );
            println!("  {c}");
        }
    }
}

fn cmd_route(a: RouteArgs) -> Result<i32> {
    let engine = routing::by_name(&a.engine)?;
    let f = load(&a.topology)?;
    let roots = match &a.root_guids {
        Some(p) if !engine.uses_roots() => bail!(
            "--root-guids {} given, but engine '{}' takes no root switches (updn does)",
            p.display(),
            engine.name()
        ),
        Some(p) => Some(
            guids::read_switch_guids(&f, p)
                .with_context(|| format!("root switches for {}", engine.name()))?,
        ),
        None => None,
    };
    let pb = progress_bar(&format!("routing ({})", engine.name()));
    let cb = |done: u64, total: u64| {
        if let Some(pb) = &pb {
            pb.set_length(total);
            pb.set_position(done);
        }
    };
    let opts = EngineOptions {
        max_vls: a.max_vls,
        max_sls: a.max_sls,
        base: a.base,
        progress: Some(&cb),
        roots: roots.as_deref(),
    };
    let t = Instant::now();
    let routing = engine.route(&f, &opts)?;
    let route_secs = t.elapsed().as_secs_f64();
    if let Some(pb) = &pb {
        pb.finish_and_clear();
    }
    let t = Instant::now();
    let report = verify::verify(&f, &routing);
    let verify_secs = t.elapsed().as_secs_f64();
    tracing::info!(route_secs, verify_secs, "routed and verified");

    let refuse = if !report.all_pairs_routed() {
        Some(format!(
            "{} of {} pairs are not routed",
            report.broken_pairs, report.pairs
        ))
    } else if !report.deadlock_free() && (engine.claims_deadlock_free() || a.require_deadlock_free)
    {
        Some("the tables are not deadlock free".to_string())
    } else {
        None
    };
    let mut files = Vec::new();
    if refuse.is_none() {
        files = fabric::formats::write_routing(&f, &routing, &a.out)?;
    }
    if a.json {
        let mut v = report_json(&report, &f);
        v["engine"] = serde_json::json!(engine.name());
        v["switches"] = serde_json::json!(f.switches().len());
        v["hcas"] = serde_json::json!(f.num_cas());
        v["routers"] = serde_json::json!(f.num_routers());
        v["vls_needed"] = serde_json::json!(routing.vls_needed.map_or(report.vls_used, u32::from));
        v["seconds"] = serde_json::json!(route_secs);
        v["verify_seconds"] = serde_json::json!(verify_secs);
        v["files"] = serde_json::json!(files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>());
        v["written"] = serde_json::json!(refuse.is_none());
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("engine          {}", engine.name());
        println!("switches        {}", f.switches().len());
        println!("HCAs            {}", f.num_cas());
        println!("routing time    {route_secs:.3} s");
        println!("verify time     {verify_secs:.3} s");
        print_report(&report, &f);
        if let Some(n) = routing.vls_needed {
            println!("VLs needed      {n} (routes then spread over the VLs allowed)");
        }
        for p in &files {
            println!("wrote           {}", p.display());
        }
    }
    if let Some(why) = refuse {
        bail!("{why}; nothing written to {}", a.out.display());
    }
    if !report.deadlock_free() {
        tracing::warn!(
            engine = engine.name(),
            "tables written although they are NOT deadlock free"
        );
    }
    Ok(0)
}

fn cmd_verify(a: VerifyArgs) -> Result<i32> {
    let f = load(&a.topology)?;
    let (lfts_p, sl2vl_p, path_p) = match (&a.dir, &a.lfts) {
        (Some(d), _) => {
            let s = d.join("opensm-sl2vl.dump");
            (
                d.join("opensm-lfts.dump"),
                a.sl2vl.clone().or_else(|| s.exists().then_some(s)),
                Some(a.path_sl.clone().unwrap_or_else(|| d.join("path-sl.txt"))),
            )
        }
        (None, Some(l)) => (l.clone(), a.sl2vl.clone(), a.path_sl.clone()),
        (None, None) => bail!("give --dir DIR or --lfts FILE"),
    };
    let routing = Routing {
        lfts: lft::read(&f, &lfts_p)?,
        sl2vl: sl2vl_p.map(|p| sl2vl::read(&f, &p)).transpose()?,
        path_sl: match path_p {
            Some(p) => pathsl::read_optional(&f, &p)?,
            None => None,
        },
        vls_needed: None,
    };
    let t = Instant::now();
    let r = verify::verify(&f, &routing);
    let secs = t.elapsed().as_secs_f64();
    if a.json {
        let mut v = report_json(&r, &f);
        v["seconds"] = serde_json::json!(secs);
        v["switches"] = serde_json::json!(f.switches().len());
        v["hcas"] = serde_json::json!(f.num_cas());
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("verify time     {secs:.3} s");
        print_report(&r, &f);
    }
    Ok(if r.ok() { 0 } else { 2 })
}
