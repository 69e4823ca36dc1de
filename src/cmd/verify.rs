//! `ibfabric verify`: re-verify tables from disk against a topology.

use super::report::{TablesJson, print_report};
use anyhow::{Result, bail};
use clap::Args;
use fabric::formats::{lft, pathsl, sl2vl};
use fabric::tables::Routing;
use fabric::verify;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Args)]
#[command(group(clap::ArgGroup::new("tables").required(true).args(["dir", "lfts", "transition"])))]
pub struct VerifyArgs {
    /// Topology file (ibnetdiscover grammar).
    #[arg(long, short)]
    topology: PathBuf,
    /// Directory holding opensm-lfts.dump and optionally opensm-sl2vl.dump and path-sl.txt.
    #[arg(long, short, conflicts_with_all = ["lfts"])]
    dir: Option<PathBuf>,
    /// Check an update in progress instead: every mix of the OLD and NEW
    /// table sets (per switch and destination, per SL-to-VL row, per
    /// source's cached SL) on the topology as it is now (--topology). A
    /// NEW_DIR that `reroute` wrote with a drain stage (NEW_DIR/drain,
    /// applied first) is checked in its two steps: OLD to the drain stage,
    /// then the drain stage to NEW.
    #[arg(long, num_args = 2, value_names = ["OLD_DIR", "NEW_DIR"], conflicts_with_all = ["dir", "lfts", "sl2vl", "path_sl"])]
    transition: Option<Vec<PathBuf>>,
    /// With --transition: elements down since --topology was discovered
    /// (`GUID:PORT` or a switch `GUID`, as `ibfabric reroute --fail`).
    #[arg(long = "fail", value_name = "GUID[:PORT]", requires = "transition")]
    fail: Vec<String>,
    /// LFT file: ibfabric-lfts.bin or OpenSM's opensm-lfts.dump (also what
    /// dump_lfts prints); the first bytes tell which.
    #[arg(long)]
    lfts: Option<PathBuf>,
    /// SL-to-VL file (ibfabric-sl2vl.bin or opensm-sl2vl.dump); absent = VL
    /// 0 everywhere.
    #[arg(long)]
    sl2vl: Option<PathBuf>,
    /// Path SL file (ibfabric-pathsl.bin or path-sl.txt); absent = SL 0 for
    /// every pair.
    #[arg(long)]
    path_sl: Option<PathBuf>,
    /// Multicast groups (the form `route --mcast-groups` reads) whose
    /// forwarding tables --mfts gives: their trees are checked with the
    /// unicast routes in one dependency graph. A set that `route` wrote
    /// with multicast is checked with its own groups and trees.
    #[arg(
        long,
        value_name = "FILE",
        requires = "mfts",
        conflicts_with = "transition"
    )]
    mcast_groups: Option<PathBuf>,
    /// Multicast forwarding tables in OpenSM's opensm.mcfdbs form.
    #[arg(long, value_name = "FILE", requires = "mcast_groups")]
    mfts: Option<PathBuf>,
    #[command(flatten)]
    workers: super::workers::WorkerArgs,
    /// With --workers or --workers-from: send each worker the whole tables
    /// instead of each part its LFT and path-SL columns (for comparison;
    /// the columns cross the network once in all, the whole tables once
    /// per worker).
    #[arg(long)]
    whole_tables: bool,
    /// With --dir: check the files found although the directory has no
    /// manifest (ibfabric-tables.txt): a set written by an older release
    /// or by hand. Without it such a directory is refused, since a set
    /// caught mid-write or mixed with another routing's files has none.
    #[arg(long, requires = "dir")]
    no_manifest: bool,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

impl VerifyArgs {
    /// Whether the command talks to workers over the network.
    pub fn uses_network(&self) -> bool {
        self.workers.wanted()
    }
}

#[derive(Serialize)]
struct VerifyJson {
    #[serde(flatten)]
    tables: TablesJson,
    /// With --workers: the job, who computed what, what was lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    job: Option<worker::coordinator::JobRun>,
    verify_seconds: f64,
    switches: usize,
    hcas: usize,
    #[serde(flatten)]
    load: super::report::LoadJson,
    /// The multicast trees checked with the unicast routes.
    #[serde(skip_serializing_if = "Option::is_none")]
    multicast: Option<super::mcast::McastJson>,
}

#[derive(Serialize)]
struct TransitionJson {
    /// The sets checked, in order: OLD to NEW, or OLD to NEW/drain to NEW
    /// when NEW is a reroute's output with a drain stage.
    from: PathBuf,
    to: PathBuf,
    #[serde(flatten)]
    report: verify::TransitionReport,
    deadlock_free: bool,
    cycle: Option<Vec<verify::ChannelRef>>,
    cycle_text: Option<String>,
    /// When both sets carry multicast trees: a cycle that switches holding
    /// old and new entries could close (none: the mix is safe).
    #[serde(skip_serializing_if = "Option::is_none")]
    multicast_mix_cycle: Option<String>,
    verify_seconds: f64,
}

#[derive(Serialize)]
struct StepsJson {
    deadlock_free: bool,
    steps: Vec<TransitionJson>,
}

/// One step of an update: every mix of the `from` and `to` sets on `f`
/// (the fabric now); their multicast trees are read against `f0`, the
/// fabric as discovered (the old trees may cross a link down since).
fn transition_step(
    f0: &fabric::Fabric,
    f: &fabric::Fabric,
    from: &Path,
    to: &Path,
) -> Result<TransitionJson> {
    let old = fabric::formats::tableset::read_set(f, from)?;
    let new = fabric::formats::tableset::read_set(f, to)?;
    let t = Instant::now();
    let r = verify::check_transition(f, &old, &new);
    let mix = match (
        fabric::formats::tableset::read_multicast(f0, from)?,
        fabric::formats::tableset::read_multicast(f0, to)?,
    ) {
        (Some(a), Some(b)) => {
            verify::mcast::check_mixed(f, &new, &a, &b).map(|c| verify::describe_channels(f, &c))
        }
        _ => None,
    };
    let secs = t.elapsed().as_secs_f64();
    Ok(TransitionJson {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
        deadlock_free: r.deadlock_free() && mix.is_none(),
        multicast_mix_cycle: mix,
        cycle: r
            .cycle
            .as_ref()
            .map(|c| c.iter().map(|vc| verify::channel_ref(f, *vc)).collect()),
        cycle_text: r.describe_cycle(f),
        report: r,
        verify_seconds: secs,
    })
}

fn print_step(s: &TransitionJson, steps: usize) {
    if steps > 1 {
        println!("step            {} -> {}", s.from.display(), s.to.display());
    }
    let r = &s.report;
    println!("transition time {:.3} s", s.verify_seconds);
    println!(
        "changed         {} LFT entries toward {} destinations, {} path SLs, {} SL-to-VL rows",
        r.entries_changed, r.destinations_changed, r.sls_changed, r.sl2vl_rows_changed
    );
    println!(
        "mixed walks     {} states, CDG {} channels, {} dependencies",
        r.states, r.cdg_vertices, r.cdg_edges
    );
    if let Some(c) = &s.multicast_mix_cycle {
        println!("multicast mix   NOT deadlock free: old and new trees mixed close {c}");
    }
    match &s.cycle_text {
        None if s.multicast_mix_cycle.is_some() => {}
        None => println!("transition      deadlock free: every mix of old and new tables"),
        Some(c) => println!(
            "transition      NOT deadlock free: a mix of old and new tables has the cycle {c}"
        ),
    }
}

/// Checks the update from OLD to NEW. A reroute that needs a drain stage
/// writes it under NEW/drain, to be applied first: then each step is
/// checked (OLD to the drain stage, the drain stage to NEW), as the
/// switches take them, and not the mix of OLD and NEW that never happens.
fn run_transition(
    f0: &fabric::Fabric,
    f: &fabric::Fabric,
    dirs: &[PathBuf],
    json: bool,
) -> Result<i32> {
    let [old_dir, new_dir] = dirs else {
        bail!("--transition takes OLD_DIR NEW_DIR");
    };
    let drain = new_dir.join("drain");
    let steps = if drain
        .join(fabric::formats::tableset::MANIFEST_FILE)
        .exists()
    {
        vec![
            transition_step(f0, f, old_dir, &drain)?,
            transition_step(f0, f, &drain, new_dir)?,
        ]
    } else {
        vec![transition_step(f0, f, old_dir, new_dir)?]
    };
    let ok = steps.iter().all(|s| s.deadlock_free);
    if json {
        match <[TransitionJson; 1]>::try_from(steps) {
            // One step: its report, as before.
            Ok([one]) => super::print_json("verify", &one)?,
            Err(steps) => super::print_json(
                "verify",
                &StepsJson {
                    deadlock_free: ok,
                    steps,
                },
            )?,
        }
    } else {
        for s in &steps {
            print_step(s, steps.len());
        }
    }
    Ok(if ok {
        super::exit::OK
    } else {
        super::exit::UNSAFE
    })
}

pub fn run(a: VerifyArgs) -> Result<i32> {
    if a.transition.is_some() && a.workers.wanted() {
        bail!("--transition checks here: it takes no --workers or --workers-from");
    }
    if a.whole_tables && !a.workers.wanted() {
        bail!("--whole-tables is for --workers or --workers-from");
    }
    let f = super::read_topology(&a.topology)?;
    if let Some(dirs) = &a.transition {
        let faults = a
            .fail
            .iter()
            .map(|s| super::reroute::parse_fault(&f, s))
            .collect::<Result<Vec<_>>>()?;
        let now = fabric::dqr::apply_faults(&f, &faults);
        return run_transition(&f, &now, dirs, a.json);
    }
    // A set with its manifest is read as a whole (every file's size and
    // digest checked); without one it may be caught mid-write or mixed
    // with another routing's files.
    if let Some(d) = a
        .dir
        .as_ref()
        .filter(|_| a.sl2vl.is_none() && a.path_sl.is_none())
    {
        let manifest = d.join(fabric::formats::tableset::MANIFEST_FILE);
        if manifest.exists() {
            let routing = fabric::formats::tableset::read_set(&f, d)?;
            let mc = match multicast_args(&a, &f)? {
                Some(mc) => Some(mc),
                None => fabric::formats::tableset::read_multicast(&f, d)?,
            };
            return verify_routing(&a, &f, routing, mc);
        }
        if !a.no_manifest {
            bail!(
                "{}: no manifest ({}): the set may have been caught mid-write or mixed with \
                 another routing's files; give --no-manifest to check the files as they are \
                 (a set written by an older release, or by hand)",
                d.display(),
                fabric::formats::tableset::MANIFEST_FILE
            );
        }
    }
    // Without a manifest, the files as they are (the compact ones when
    // the directory has them).
    if let Some(d) = a
        .dir
        .as_ref()
        .filter(|_| a.sl2vl.is_none() && a.path_sl.is_none())
    {
        let routing = fabric::formats::tableset::read_as_found(&f, d)?;
        return verify_routing(&a, &f, routing, multicast_args(&a, &f)?);
    }
    let (lfts_p, sl2vl_p, path_p) = match (&a.dir, &a.lfts) {
        // --dir with --sl2vl or --path-sl given: the directory's other
        // files, the compact ones where present.
        (Some(d), _) => {
            use fabric::formats::{PATH_SL_FILE, SL2VL_FILE, compact};
            let prefer = |bin: &str, text: &str| {
                let b = d.join(bin);
                if b.is_file() { b } else { d.join(text) }
            };
            let s = prefer(compact::SL2VL_FILE, SL2VL_FILE);
            (
                prefer(compact::LFTS_FILE, fabric::formats::LFTS_FILE),
                a.sl2vl.clone().or_else(|| s.exists().then_some(s)),
                Some(
                    a.path_sl
                        .clone()
                        .unwrap_or_else(|| prefer(compact::PATH_SL_FILE, PATH_SL_FILE)),
                ),
            )
        }
        (None, Some(l)) => (l.clone(), a.sl2vl.clone(), a.path_sl.clone()),
        (None, None) => bail!("give --dir DIR or --lfts FILE"),
    };
    // Files named one by one may be compact ones: their first bytes say.
    use fabric::formats::compact::{self, has_magic};
    let lfts = if has_magic(&lfts_p, compact::lft::MAGIC) {
        compact::lft::read(&f, &lfts_p)?
    } else {
        lft::read(&f, &lfts_p)?
    };
    let sl2vl = match sl2vl_p {
        Some(p) if has_magic(&p, compact::sl2vl::MAGIC) => Some(compact::sl2vl::read(&f, &p)?),
        Some(p) => Some(sl2vl::read(&f, &p)?),
        None => None,
    };
    let path_sl = match path_p {
        Some(p) if has_magic(&p, compact::pathsl::MAGIC) => Some(compact::pathsl::read(&f, &p)?),
        Some(p) => pathsl::read_optional(&f, &p)?,
        None => None,
    };
    let routing = Routing {
        lfts,
        sl2vl,
        path_sl,
        vls_needed: None,
    };
    verify_routing(&a, &f, routing, multicast_args(&a, &f)?)
}

/// The groups and trees --mcast-groups and --mfts name.
fn multicast_args(a: &VerifyArgs, f: &fabric::Fabric) -> Result<Option<fabric::mcast::Multicast>> {
    super::mcast::read_given(f, a.mcast_groups.as_deref(), a.mfts.as_deref())
}

/// Verifies `routing` on `f` (here or on the workers) and reports; with
/// multicast, also its trees with the unicast routes (here: the check
/// needs the whole dependency graph).
fn verify_routing(
    a: &VerifyArgs,
    f: &fabric::Fabric,
    routing: Routing,
    mc: Option<fabric::mcast::Multicast>,
) -> Result<i32> {
    let t = Instant::now();
    let sp = super::spinner("verifying (channel dependency graph from the tables)");
    let exec = a.workers.executor(!a.whole_tables)?;
    let rt = super::runtime::runtime()?;
    let placed = super::workers::place(&rt, &exec, &a.workers, f)?;
    // With multicast and no workers one walk gives both reports.
    let (r, job, mrep) = match (&mc, placed.as_ref()) {
        (Some(mc), None) => {
            let (r, m) = verify::mcast::verify_with_mcast(f, &routing, mc);
            (r, None, Some(m))
        }
        _ => {
            let (r, job) = rt.block_on(worker::exec::verify(placed.as_ref(), f, &routing))?;
            let mrep = mc
                .as_ref()
                .map(|mc| verify::mcast::verify_with_mcast(f, &routing, mc).1);
            (r, job, mrep)
        }
    };
    drop(sp);
    let secs = t.elapsed().as_secs_f64();
    if a.json {
        super::print_json(
            "verify",
            &VerifyJson {
                tables: TablesJson::new(&r, f),
                job: job.clone(),
                verify_seconds: secs,
                switches: f.switches().len(),
                hcas: f.num_cas(),
                load: super::report::LoadJson::new(f, &routing.lfts),
                multicast: mrep.clone().map(|m| super::mcast::McastJson::new(m, f)),
            },
        )?;
    } else {
        println!("verify time     {secs:.3} s");
        if let Some(j) = &job {
            super::report::print_job(j);
        }
        print_report(&r, f);
        if let Some(m) = &mrep {
            super::mcast::print(m, f);
        }
        super::report::LoadJson::new(f, &routing.lfts).print();
    }
    let vl_taken = mc
        .as_ref()
        .and_then(|mc| verify::mcast::reserved_vl_taken(&r, mc));
    if let Some(why) = &vl_taken {
        tracing::error!("{why}");
        if !a.json {
            println!("with multicast  NOT alone on its VL: {why}");
        }
    }
    Ok(
        if r.ok() && vl_taken.is_none() && mrep.as_ref().is_none_or(|m| m.ok()) {
            super::exit::OK
        } else {
            super::exit::UNSAFE
        },
    )
}
