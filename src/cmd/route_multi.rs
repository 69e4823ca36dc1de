//! `ibfabric route-multi`: routes every subnet of a multi-subnet manifest,
//! computes the inter-subnet routes, checks the whole fabric and only then
//! writes the tables. The check composes the subnets' dependency
//! summaries with the router hops (`verify::compose`: router ports times
//! destinations); `--exhaustive` also walks every host pair through one
//! channel dependency graph of the whole fabric (`verify::verify_global`,
//! hosts squared), the reference the composition is tested against.

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use fabric::formats::routes_files;
use fabric::intersubnet::{self, AlgorithmKind, Transit};
use fabric::network::Network;
use fabric::pipeline;
use fabric::routing::EngineKind;
use fabric::verify::{ComposeReport, DependencySummary, GlobalReport, compose, verify_global_with};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Copy, ValueEnum)]
enum TransitArg {
    /// Up*/Down* over the subnet graph: no cycle through the routers.
    Updown,
    /// Shortest subnet paths: can close a cycle through the routers on a
    /// ring of subnets (the global check then refuses the tables).
    Shortest,
}

#[derive(Args)]
pub struct RouteMultiArgs {
    /// Multi-subnet manifest (see `ibfabric gen multi`).
    #[arg(long, short)]
    manifest: PathBuf,
    /// Engine for the subnets whose manifest entry names none.
    #[arg(long, short, value_enum, default_value_t = EngineKind::Ftree)]
    engine: EngineKind,
    /// Inter-subnet algorithm: prefix (OpenSM's prefix routes; prefix-bylid and prefix-spread are
    /// readings of it, BENCHMARKS.md), issr or isfr.
    #[arg(long, short, value_enum, default_value_t = AlgorithmKind::Isfr)]
    algorithm: AlgorithmKind,
    /// How routes cross transit subnets (issr only; isfr and prefix always
    /// use updown).
    #[arg(long, value_enum, default_value = "updown")]
    transit: TransitArg,
    /// Output directory: one directory per subnet with the OpenSM dumps and
    /// its mapping file (ibfabric-mapping.txt), and router-egress.txt. Files
    /// are replaced whole, crash-safely; table files an earlier engine left
    /// that this run's does not set are removed.
    #[arg(long, short)]
    out: PathBuf,
    /// Also write OpenSM's text dumps (opensm-lfts.dump, opensm-sl2vl.dump,
    /// path-sl.txt) beside the compact set: for stock OpenSM's `-R file`
    /// loader and external checkers. They take about 40 times the space.
    #[arg(long)]
    opensm_dump: bool,
    /// Also walk every host pair through the whole fabric's dependency
    /// graph (the all-pairs reference: hosts squared, hours at 100k HCAs);
    /// the tables are written only when both checks pass.
    #[arg(long)]
    exhaustive: bool,
    /// Machine-readable summary on stdout.
    #[arg(long)]
    json: bool,
}

/// The whole-fabric verdict, whichever check gave it.
#[derive(Serialize)]
struct Verdict {
    /// "compositional", or "compositional+exhaustive".
    method: &'static str,
    pairs: u64,
    unreachable: u64,
    first_unreachable: Option<String>,
    /// A dependency cycle, one channel per entry (subnet, channel, VL),
    /// when the composition found one.
    cycle: Option<Vec<fabric::verify::compose::CycleStep>>,
    /// The cycle as one line, whichever check found it.
    cycle_text: Option<String>,
}

impl Verdict {
    fn ok(&self) -> bool {
        self.unreachable == 0 && self.cycle_text.is_none()
    }
}

#[derive(Serialize)]
struct SubnetOut {
    name: String,
    prefix: String,
    engine: EngineKind,
    hcas: usize,
    switches: usize,
    vls: u32,
    deadlock_free: bool,
    mapping_entries: usize,
    default_routes: usize,
}

#[derive(Serialize)]
struct Summary {
    algorithm: String,
    transit: &'static str,
    subnets: Vec<SubnetOut>,
    routers: usize,
    router_rules: usize,
    global: Verdict,
    compose: ComposeReport,
    exhaustive: Option<GlobalReport>,
    written: bool,
    files: Vec<String>,
    /// Files of an earlier run that this one does not produce.
    removed: Vec<String>,
    route_seconds: f64,
    inter_subnet_seconds: f64,
    check_seconds: f64,
    exhaustive_seconds: Option<f64>,
}

pub fn run(a: RouteMultiArgs) -> Result<i32> {
    let algorithm = a.algorithm.algorithm();
    if matches!(a.transit, TransitArg::Shortest) && a.algorithm != AlgorithmKind::Issr {
        bail!(
            "--transit shortest applies to issr only ('{}' always routes transit subnets up*/down*)",
            algorithm.name()
        );
    }
    let man = fabric::formats::manifest::read(&a.manifest)?;
    let m = &man.fabric;
    for (s, file) in m.subnets.iter().zip(&man.files) {
        fabric::discovery::check(None, &s.fabric).map_err(|e| {
            anyhow::anyhow!(
                "{}: subnet '{}' ({}): {e}; nothing routed or written",
                a.manifest.display(),
                s.name,
                file.display()
            )
        })?;
    }
    let engines: Vec<EngineKind> = man.engines.iter().map(|e| e.unwrap_or(a.engine)).collect();

    let t = Instant::now();
    let routed = route_subnets(&a, m, &engines)?;
    let route_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let routes = match a.transit {
        TransitArg::Shortest => intersubnet::issr_with_transit(&routed.view, Transit::Shortest)?,
        TransitArg::Updown => algorithm.route(&routed.view)?,
    };
    let inter_subnet_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let summaries: Vec<(u64, &DependencySummary)> = m
        .subnets
        .iter()
        .zip(&routed.routings)
        .map(|(s, v)| {
            v.dependencies()
                .map(|d| (s.prefix, d))
                .map_err(Clone::clone)
                .with_context(|| format!("the dependency summary of subnet '{}'", s.name))
        })
        .collect::<Result<_>>()?;
    let composed = compose(&routed.view, &summaries, &routes)?;
    let check_seconds = t.elapsed().as_secs_f64();
    let (exhaustive, exhaustive_seconds) = if a.exhaustive {
        let t = Instant::now();
        let g = all_pairs(m, &routed, &routes)?;
        (Some(g), Some(t.elapsed().as_secs_f64()))
    } else {
        (None, None)
    };
    tracing::info!(
        route_seconds,
        inter_subnet_seconds,
        check_seconds,
        ?exhaustive_seconds,
        "routed and checked"
    );
    let global = verdict(&composed, exhaustive.as_ref());

    let (files, removed) = if global.ok() {
        write_all(&a, m, &routed, &routes)?
    } else {
        (Vec::new(), Vec::new())
    };
    let summary = Summary {
        algorithm: routes.algorithm.clone(),
        transit: match a.transit {
            TransitArg::Updown => "updown",
            TransitArg::Shortest => "shortest",
        },
        subnets: subnet_rows(m, &routed, &routes, &engines),
        routers: routes.routers.len(),
        router_rules: routes
            .routers
            .iter()
            .flat_map(|r| &r.contexts)
            .map(|c| c.rules.len())
            .sum(),
        written: global.ok(),
        global,
        compose: composed,
        exhaustive,
        files: files.iter().map(|p| p.display().to_string()).collect(),
        removed: removed.iter().map(|p| p.display().to_string()).collect(),
        route_seconds,
        inter_subnet_seconds,
        check_seconds,
        exhaustive_seconds,
    };
    if a.json {
        super::print_json("route-multi", &summary)?;
    } else {
        print_text(&summary);
    }
    conclude(&a, &summary)
}

/// Routes every subnet through the gate; a refused subnet is unsafe
/// (exit 3), nothing written.
fn route_subnets(
    a: &RouteMultiArgs,
    m: &fabric::multi::MultiFabric,
    engines: &[EngineKind],
) -> Result<pipeline::Routed> {
    match pipeline::route_each(m, engines) {
        Ok(r) => Ok(r),
        Err(e @ fabric::Error::SubnetRefused { .. }) => Err(super::exit::Unsafe(format!(
            "routing the subnets of {}: {e}; nothing written",
            a.manifest.display()
        ))
        .into()),
        Err(e) => Err(anyhow::Error::from(e)
            .context(format!("routing the subnets of {}", a.manifest.display()))),
    }
}

/// Stages every subnet's table set and commits the whole fabric's files:
/// what was written and what an earlier run left that was removed.
fn write_all(
    a: &RouteMultiArgs,
    m: &fabric::multi::MultiFabric,
    routed: &pipeline::Routed,
    routes: &fabric::intersubnet::InterSubnetRoutes,
) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let export = fabric::formats::Export {
        opensm_dump: a.opensm_dump,
    };
    let mut subnets = Vec::with_capacity(m.subnets.len());
    for (s, v) in m.subnets.iter().zip(&routed.routings) {
        let dir = a.out.join(&s.name);
        subnets.push(routes_files::SubnetOut {
            tables: fabric::formats::stage_routing(&s.fabric, v, &dir, export)?,
            dir,
            fabric: &s.fabric,
            prefix: s.prefix,
        });
    }
    let done = routes_files::write_fabric(&a.out, subnets, routes)?;
    Ok((done.written, done.removed))
}

/// One summary row per subnet.
fn subnet_rows(
    m: &fabric::multi::MultiFabric,
    routed: &pipeline::Routed,
    routes: &fabric::intersubnet::InterSubnetRoutes,
    engines: &[EngineKind],
) -> Vec<SubnetOut> {
    let mapping_of = |prefix: u64| routes.mappings.iter().find(|mp| mp.prefix == prefix);
    m.subnets
        .iter()
        .zip(&routed.routings)
        .zip(engines)
        .map(|((s, v), &engine)| {
            let rep = v.report();
            let mp = mapping_of(s.prefix);
            SubnetOut {
                name: s.name.clone(),
                prefix: format!("{:#018x}", s.prefix),
                engine,
                hcas: s.fabric.num_cas(),
                switches: s.fabric.switches().len(),
                vls: rep.vls_used,
                deadlock_free: rep.deadlock_free(),
                mapping_entries: mp.map_or(0, |mp| mp.entries.len()),
                default_routes: mp.map_or(0, |mp| mp.defaults.len()),
            }
        })
        .collect()
}

/// The all-pairs check of the whole fabric (hosts squared), with progress.
fn all_pairs(
    m: &fabric::multi::MultiFabric,
    routed: &pipeline::Routed,
    routes: &fabric::intersubnet::InterSubnetRoutes,
) -> Result<GlobalReport> {
    let net = Network::new(m, routed.tables(), &routed.view, routes)?;
    let pb = super::progress_bar("all-pairs check (sources)");
    let cb = |done: u64, total: u64| {
        if let Some(pb) = &pb {
            pb.set_length(total);
            pb.set_position(done);
        }
    };
    let g = verify_global_with(&net, Some(&cb));
    if let Some(pb) = &pb {
        pb.finish_and_clear();
    }
    Ok(g)
}

/// The exit status: refused routes are unsafe (exit 3), nothing written;
/// the two checks disagreeing is an error.
fn conclude(a: &RouteMultiArgs, summary: &Summary) -> Result<i32> {
    let g = &summary.global;
    if let Some(x) = &summary.exhaustive {
        // The two checks answer the same question; a difference is a bug
        // in one of them, never a verdict to pick from.
        if (x.unreachable, x.deadlock_free())
            != (summary.compose.unreachable, summary.compose.deadlock_free())
        {
            bail!(
                "the compositional check ({} unreachable, {}) and the all-pairs check ({} unreachable, {}) disagree; nothing written to {}",
                summary.compose.unreachable,
                if summary.compose.deadlock_free() {
                    "deadlock free"
                } else {
                    "a cycle"
                },
                x.unreachable,
                if x.deadlock_free() {
                    "deadlock free"
                } else {
                    "a cycle"
                },
                a.out.display()
            );
        }
    }
    if g.unreachable > 0 {
        return Err(super::exit::Unsafe(format!(
            "{} of {} host pairs are unreachable through the routers (first: {}); nothing written to {}",
            g.unreachable,
            g.pairs,
            g.first_unreachable.as_deref().unwrap_or("?"),
            a.out.display()
        ))
        .into());
    }
    if let Some(c) = &g.cycle_text {
        return Err(super::exit::Unsafe(format!(
            "the routes close a channel dependency cycle across the subnets ({c}); nothing written to {}",
            a.out.display()
        ))
        .into());
    }
    Ok(0)
}

/// One verdict from the composition and, when it ran, the all-pairs check:
/// refused when either refuses.
fn verdict(c: &ComposeReport, x: Option<&GlobalReport>) -> Verdict {
    let (unreachable, first_unreachable) = match x {
        Some(x) if x.unreachable > c.unreachable => (x.unreachable, x.first_unreachable.clone()),
        _ => (
            c.unreachable,
            c.first_unreachable.as_ref().map(ToString::to_string),
        ),
    };
    Verdict {
        method: if x.is_some() {
            "compositional+exhaustive"
        } else {
            "compositional"
        },
        pairs: c.pairs,
        unreachable,
        first_unreachable,
        cycle: c.cycle.clone(),
        cycle_text: c
            .cycle
            .as_ref()
            .map(|cy| {
                cy.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" -> ")
            })
            .or_else(|| x.and_then(|x| x.cycle.as_ref().map(|c| c.join(" -> ")))),
    }
}

fn print_text(s: &Summary) {
    println!(
        "{:<12} {:<18} {:<8} {:>6} {:>8} {:>4} {:>13} {:>9}",
        "subnet", "prefix", "engine", "HCAs", "switches", "VLs", "deadlock free", "mappings"
    );
    for x in &s.subnets {
        println!(
            "{:<12} {:<18} {:<8} {:>6} {:>8} {:>4} {:>13} {:>9}",
            x.name,
            x.prefix,
            x.engine,
            x.hcas,
            x.switches,
            x.vls,
            if x.deadlock_free { "yes" } else { "NO" },
            x.mapping_entries
        );
    }
    println!(
        "inter-subnet    {} (transit {}): {} routers, {} egress rules",
        s.algorithm, s.transit, s.routers, s.router_rules
    );
    let c = &s.compose;
    println!(
        "global check    {} host pairs, {} unreachable; summaries: {} vertices, {} router hops, {} walks and {} transit legs in use; {}",
        c.pairs,
        c.unreachable,
        c.vertices,
        c.router_hops,
        c.chains,
        c.transit_legs,
        if c.deadlock_free() {
            "deadlock free"
        } else {
            "CYCLE"
        }
    );
    if let Some(g) = &s.exhaustive {
        println!(
            "all pairs       {} host pairs, {} unreachable; CDG {} channels, {} dependencies, {} VLs; {}",
            g.pairs,
            g.unreachable,
            g.channels,
            g.dependencies,
            g.vls_used,
            if g.deadlock_free() {
                "deadlock free"
            } else {
                "CYCLE"
            }
        );
    }
    println!(
        "time            subnets {:.3} s, inter-subnet {:.3} s, global check {:.3} s{}",
        s.route_seconds,
        s.inter_subnet_seconds,
        s.check_seconds,
        s.exhaustive_seconds
            .map(|x| format!(", all pairs {x:.3} s"))
            .unwrap_or_default()
    );
    for f in &s.files {
        println!("wrote           {f}");
    }
    for f in &s.removed {
        println!("removed         {f} (not produced by this run)");
    }
}
