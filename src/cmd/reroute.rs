//! `ibfabric reroute`: after a link or switch fault, reroute only the
//! flows that crossed it (dynamic quick reconfiguration), and write the
//! new table set, with a drain stage to apply first when the one-step
//! update would not be deadlock free.

use anyhow::{Context, Result, bail};
use clap::Args;
use fabric::dqr::{self, ChannelList, Fault, Options, Turns};
use fabric::formats::{self, tableset};
use fabric::model::{Fabric, NodeKind};
use fabric::routing::EngineKind;
use fabric::verify::{Step, accept_step};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct RerouteArgs {
    /// Topology file (ibnetdiscover grammar) the tables in force were
    /// computed for, before the fault.
    #[arg(long, short)]
    topology: PathBuf,
    /// Table set in force (a directory `ibfabric route` wrote).
    #[arg(long, short)]
    dir: PathBuf,
    /// A failed element: `GUID:PORT` for the link at that port (node GUID
    /// of either end), `GUID` for a whole switch. Repeat for several.
    #[arg(long = "fail", required = true, value_name = "GUID[:PORT]")]
    fail: Vec<String>,
    /// Where to write the new table set. When the update needs a drain
    /// stage it goes to OUT/drain, to be applied (and confirmed) first.
    #[arg(long, short)]
    out: PathBuf,
    /// Also write OpenSM's text dumps beside the compact set (the default
    /// when the tables in force carry them, so an export stays exported).
    #[arg(long)]
    opensm_dump: bool,
    /// Engine that computed the tables in force (recorded in the set's
    /// manifest; read from there when not given).
    #[arg(long)]
    engine: Option<EngineKind>,
    /// How turns that go down the channel list are admitted.
    #[arg(long, value_enum, default_value = "all")]
    turns: Turns,
    /// Keep every flow on its SL (do not search the other VL layers).
    #[arg(long)]
    no_layers: bool,
    /// Local detours enabled around each failed link before the search:
    /// `local` the shortest ways around it, `mesh` the DQR mesh plug-in
    /// (the square toward the centre first; one link fault is always
    /// tolerated on a mesh routed by `dor`). Default: `mesh` for tables
    /// of `dor`, `none` otherwise.
    #[arg(long, value_enum)]
    detours: Option<dqr::Detours>,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct RerouteJson {
    rerouted: bool,
    out: PathBuf,
    drain: Option<PathBuf>,
    stats: Option<dqr::Stats>,
    error: Option<String>,
    channel_list_seconds: f64,
    reroute_seconds: f64,
}

/// Parses `GUID[:PORT]` against the fabric.
pub(crate) fn parse_fault(f: &Fabric, s: &str) -> Result<Fault> {
    let (g, port) = match s.split_once(':') {
        Some((g, p)) => (
            g,
            Some(
                p.parse::<u8>()
                    .with_context(|| format!("--fail {s}: bad port '{p}'"))?,
            ),
        ),
        None => (s, None),
    };
    let guid = u64::from_str_radix(g.trim_start_matches("0x"), 16)
        .with_context(|| format!("--fail {s}: bad GUID '{g}'"))?;
    let Some(n) = f.find_node_by_guid(guid) else {
        bail!("--fail {s}: no node with GUID 0x{guid:016x} in the topology");
    };
    match port {
        Some(p) => {
            if p == 0 || p > f.num_ports(n) {
                bail!(
                    "--fail {s}: '{}' has ports 1..={}",
                    f.desc(n),
                    f.num_ports(n)
                );
            }
            let slot = f.slot(n, p);
            if f.remote(slot) == fabric::model::NONE {
                bail!("--fail {s}: port {p} of '{}' has no link", f.desc(n));
            }
            Ok(Fault::Link(slot))
        }
        None if f.kind(n) == NodeKind::Switch => Ok(Fault::Switch(n)),
        None => bail!(
            "--fail {s}: '{}' is not a switch; name the link as GUID:PORT",
            f.desc(n)
        ),
    }
}

pub fn run(a: RerouteArgs) -> Result<i32> {
    let f0 = super::read_fabric_to_route(&a.topology)?;
    let (set, old) = tableset::read_set_with_manifest(&f0, &a.dir)?;
    let engine = match a.engine {
        Some(e) => e,
        None => set.engine.parse::<EngineKind>().with_context(|| {
            format!(
                "{}: the manifest names no known engine; give --engine",
                a.dir.display()
            )
        })?,
    };
    let faults = a
        .fail
        .iter()
        .map(|s| parse_fault(&f0, s))
        .collect::<Result<Vec<_>>>()?;
    let t = Instant::now();
    let (mut list, before) = ChannelList::build(&f0, &old)
        .with_context(|| format!("{}: the tables in force", a.dir.display()))?;
    let list_secs = t.elapsed().as_secs_f64();
    if !before.all_pairs_routed() {
        bail!(
            "{}: {} pairs were not routed before the fault; reroute repairs faults of a connected routing",
            a.dir.display(),
            before.broken_pairs
        );
    }
    let f1 = dqr::apply_faults(&f0, &faults);
    let opts = Options {
        turns: a.turns,
        layers: !a.no_layers,
        check_transition: true,
        // The gate below verifies the new tables in full before writing.
        verify_result: false,
        detours: a.detours.unwrap_or(dqr::Detours::default_for(engine)),
        reconnect: false,
    };
    let t = Instant::now();
    let res = dqr::reroute_from(&f0, &f1, &old, &mut list, &opts);
    let secs = t.elapsed().as_secs_f64();
    let out = match res {
        Ok(o) => o,
        Err(e) => return report_failure(&a, e, list_secs, secs),
    };
    let dqr::Outcome {
        routing,
        drain,
        stats: mut s,
    } = out;
    let drain_dir = a.out.join("drain");
    let export = formats::Export {
        opensm_dump: a.opensm_dump || a.dir.join(formats::LFTS_FILE).is_file(),
    };
    // Both stages pass the gate before either is written: a drain stage
    // must never be left without the tables that follow it.
    let unsafe_ = |what: &str, e: &dyn std::fmt::Display| {
        anyhow::Error::from(super::exit::Unsafe(format!("{what}: {e}")))
    };
    let v = accept_step(&f1, engine, routing, Step::Final)
        .map_err(|e| unsafe_("rerouted tables refused", &e))?;
    dqr::within_vls(v.report(), list.max_vl_used(), list.vls_used())
        .map_err(|e| unsafe_("rerouted tables refused", &e))?;
    let drain = drain
        .map(|d| accept_step(&f1, engine, d, Step::Drain))
        .transpose()
        .map_err(|e| unsafe_("drain stage refused", &e))?;
    // Multicast trees follow the fault too, checked with both stages.
    let carried = super::mcast::carry_over(&f0, &f1, &a.dir)?;
    if let Some((old_mc, mc)) = &carried {
        super::mcast::require_update_ok(&f1, v.get(), mc, old_mc, "rerouted tables refused")?;
        if let Some(d) = &drain {
            super::mcast::require_ok(&f1, d.get(), mc, "drain stage refused")?;
        }
    }
    let mc = carried.map(|(_, new)| new);
    let write = |r: &fabric::verify::Verified<fabric::tables::Routing>, dir: &std::path::Path| {
        let mut staged = formats::stage_routing(&f1, r, dir, export)?;
        if let Some(mc) = &mc {
            staged = staged.with_multicast(&f1, mc)?;
        }
        anyhow::Ok(staged.commit()?)
    };
    s.vls_after = v.report().vls_used;

    let mut drain_written = None;
    if let Some(d) = drain {
        write(&d, &drain_dir)?;
        drain_written = Some(drain_dir.clone());
    } else if drain_dir.exists() {
        // A drain stage of an earlier reroute must not be applied with this one.
        std::fs::remove_dir_all(&drain_dir)
            .with_context(|| format!("removing {}", drain_dir.display()))?;
    }
    write(&v, &a.out)?;
    if a.json {
        super::print_json(
            "reroute",
            &RerouteJson {
                rerouted: true,
                out: a.out.clone(),
                drain: drain_written,
                stats: Some(s.clone()),
                error: None,
                channel_list_seconds: list_secs,
                reroute_seconds: secs,
            },
        )?;
    } else {
        print_text(&a, &s, &list, list_secs, secs, drain_written.as_deref());
    }
    Ok(0)
}

/// A reroute that failed: said (as JSON with `--json`), and the exit
/// status: only a missing path calls for the recompute exit 5 names;
/// tables that fail the checks are unsafe; the rest is an error.
fn report_failure(a: &RerouteArgs, e: dqr::DqrError, list_secs: f64, secs: f64) -> Result<i32> {
    tracing::warn!("{e}");
    if a.json {
        super::print_json(
            "reroute",
            &RerouteJson {
                rerouted: false,
                out: a.out.clone(),
                drain: None,
                stats: None,
                error: Some(e.to_string()),
                channel_list_seconds: list_secs,
                reroute_seconds: secs,
            },
        )?;
    } else {
        eprintln!("ibfabric: {e}");
    }
    Ok(match e {
        dqr::DqrError::NoPath { .. } => super::exit::NO_REROUTE,
        dqr::DqrError::Verify(_) | dqr::DqrError::Transition(_) | dqr::DqrError::MoreVls { .. } => {
            super::exit::UNSAFE
        }
        dqr::DqrError::OtherFabric { .. } => super::exit::ERROR,
    })
}

fn print_text(
    a: &RerouteArgs,
    s: &dqr::Stats,
    list: &ChannelList,
    list_secs: f64,
    secs: f64,
    drain_written: Option<&std::path::Path>,
) {
    println!(
        "channel list    {list_secs:.3} s ({} dependencies)",
        list.num_edges()
    );
    println!("reroute         {secs:.3} s");
    println!(
        "flows           {} broken of {}, {} rerouted ({:.2}%)",
        s.flows_broken,
        s.flows,
        s.flows_rerouted,
        100.0 * s.flows_broken as f64 / s.flows.max(1) as f64
    );
    println!(
        "changed         {} LFT entries toward {} destinations, {} path SLs",
        s.entries_changed, s.destinations_affected, s.sls_changed
    );
    println!(
        "VLs             {} before, {} after",
        s.vls_before, s.vls_after
    );
    println!(
        "channel list    {} dependencies added, {} reorders",
        s.dependencies_added, s.reorders
    );
    match &drain_written {
        Some(d) => println!(
            "transition      two steps: apply {} first, then {} (each step checked deadlock free)",
            d.display(),
            a.out.display()
        ),
        None => println!(
            "transition      one step: every mix of old and new tables is deadlock free; apply {}",
            a.out.display()
        ),
    }
}
