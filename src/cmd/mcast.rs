//! Multicast for `route` and `verify`: the groups file, the trees, and
//! the check of unicast and multicast dependencies together.

use anyhow::{Context, Result, bail};
use clap::Args;
use fabric::Fabric;
use fabric::mcast::Multicast;
use fabric::mcast::tree::{self, TreeMode};
use fabric::routing::EngineOptions;
use fabric::tables::Routing;
use fabric::verify::mcast::{McastFault, McastReport};
use std::path::{Path, PathBuf};

#[derive(Args, Clone, Debug, Default)]
pub struct McastArgs {
    /// Multicast groups to build trees for (one per line: MLID, sl=N, then
    /// member port GUIDs or `all`; docs/multicast.md). The trees are
    /// checked with the unicast routes in one dependency graph and written
    /// to the set as ibfabric-mcast-groups.txt and ibfabric-mfts.txt
    /// (OpenSM's opensm.mcfdbs form).
    #[arg(long, value_name = "FILE")]
    pub mcast_groups: Option<PathBuf>,
    /// How multicast trees keep the routes deadlock free. reserved (the
    /// default): every group on the top SL and the top VL, which unicast
    /// then does not use (the engine routes with one VL and one SL fewer),
    /// all trees parts of one spanning tree: deadlock free with any engine.
    /// shared: each group's own SL on the unicast VLs, trees of the same
    /// spanning tree; refused if a cycle results. min-hop: a tree per group
    /// as OpenSM's default multicast manager builds it, to see what that
    /// does to the routes; refused if a cycle results.
    #[arg(long, value_enum, requires = "mcast_groups")]
    pub mcast_trees: Option<TreeMode>,
}

impl McastArgs {
    fn mode(&self) -> TreeMode {
        self.mcast_trees.unwrap_or(TreeMode::Reserved)
    }

    fn reserving(&self) -> bool {
        self.mcast_groups.is_some() && self.mode() == TreeMode::Reserved
    }

    /// Only reserved trees go into a set: the OpenSM plugin builds the
    /// trees of the groups members join at run time from their plan, which
    /// keeps the guarantee for any groups. The other modes are checks.
    pub fn check_writable(&self, dry_run: bool) -> Result<()> {
        if self.mcast_groups.is_some() && self.mode() != TreeMode::Reserved && !dry_run {
            bail!(
                "--mcast-trees {:?} checks what such trees would do to the routes: give \
                 --dry-run (a set carries reserved trees only, which the OpenSM plugin can \
                 build for any group at run time)",
                self.mode()
            );
        }
        Ok(())
    }

    /// The engine's options with the multicast SL and VL taken out.
    pub fn engine_options<'a>(&self, mut o: EngineOptions<'a>) -> Result<EngineOptions<'a>> {
        if self.reserving() {
            if o.max_vls < 2 || o.max_sls < 2 {
                bail!(
                    "--mcast-trees reserved needs a VL and an SL for multicast alone, and \
                     --max-vls {} --max-sls {} leave none: raise them or use --mcast-trees shared",
                    o.max_vls,
                    o.max_sls
                );
            }
            o.max_vls -= 1;
            o.max_sls -= 1;
        }
        Ok(o)
    }

    /// Reads the groups and builds their trees; for reserved trees also
    /// maps the multicast SL to its VL in `routing`. `max_vls`/`max_sls`
    /// are the hardware's, before [`McastArgs::engine_options`].
    pub fn plan(
        &self,
        f: &Fabric,
        routing: &mut Routing,
        max_vls: u8,
        max_sls: u8,
    ) -> Result<Option<Multicast>> {
        let Some(path) = &self.mcast_groups else {
            return Ok(None);
        };
        let mut groups = read_groups(f, path)?;
        let reserved = self.reserving().then(|| (max_sls - 1, max_vls - 1));
        let (mfts, plan) = tree::build(f, routing, &mut groups, self.mode(), reserved)
            .with_context(|| format!("multicast trees for {}", path.display()))?;
        tracing::info!(
            groups = groups.len(),
            entries = mfts.len(),
            mode = ?self.mode(),
            "multicast trees built"
        );
        Ok(Some(Multicast { groups, mfts, plan }))
    }
}

/// The groups and the forwarding tables of a command's `--mcast-groups`
/// and `--mfts` (clap requires both or neither).
pub fn read_given(
    f: &Fabric,
    groups: Option<&Path>,
    mfts: Option<&Path>,
) -> Result<Option<Multicast>> {
    match (groups, mfts) {
        (Some(g), Some(m)) => Ok(Some(Multicast {
            groups: read_groups(f, g)?,
            mfts: read_mfts(f, m)?,
            plan: None,
        })),
        _ => Ok(None),
    }
}

pub fn read_groups(f: &Fabric, path: &Path) -> Result<Vec<fabric::mcast::Group>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading multicast groups {}", path.display()))?;
    Ok(fabric::formats::mcast::parse_groups(f, &text, path)?)
}

pub fn read_mfts(f: &Fabric, path: &Path) -> Result<fabric::mcast::Mfts> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading multicast forwarding tables {}", path.display()))?;
    Ok(fabric::formats::mcast::parse_mfts(f, &text, path)?)
}

/// A multicast report for `--json`: the report, with its cycle also as
/// named channels and one line of text.
#[derive(serde::Serialize)]
pub struct McastJson {
    #[serde(flatten)]
    pub report: McastReport,
    pub deadlock_free: bool,
    pub cycle_channels: Option<Vec<fabric::verify::ChannelRef>>,
    pub cycle_text: Option<String>,
}

impl McastJson {
    pub fn new(report: McastReport, f: &Fabric) -> Self {
        let cycle_channels = report.cycle.as_ref().map(|c| {
            c.iter()
                .map(|vc| fabric::verify::channel_ref(f, *vc))
                .collect()
        });
        let cycle_text = report.describe_cycle(f);
        Self {
            deadlock_free: report.cycle.is_none(),
            report,
            cycle_channels,
            cycle_text,
        }
    }
}

/// The multicast lines of a text report.
pub fn print(r: &McastReport, f: &Fabric) {
    println!(
        "multicast       {} groups, {} memberships, {} forwarding entries, {} dependencies on {} VLs",
        r.groups, r.memberships, r.mft_entries, r.dependencies, r.vls_used
    );
    for x in &r.faults {
        match x {
            McastFault::Unreached { mlid, from, to } => {
                println!("  broken: MLID 0x{mlid:04X}: from '{from}' never reaches '{to}'")
            }
            McastFault::Loop { mlid, from, switch } => println!(
                "  broken: MLID 0x{mlid:04X}: from '{from}' reaches '{switch}' twice (a loop)"
            ),
            McastFault::Detached { mlid, member } => {
                println!("  broken: MLID 0x{mlid:04X}: member '{member}' is not on a switch")
            }
            McastFault::NoGroup { mlid } => {
                println!("  broken: MLID 0x{mlid:04X} is forwarded but no group names it")
            }
            McastFault::BadVl { mlid, switch, vl } => println!(
                "  broken: MLID 0x{mlid:04X}: '{switch}' sends copies on VL {vl}, which drops them"
            ),
        }
    }
    match &r.cycle {
        None => println!("with multicast  deadlock free"),
        Some(c) => {
            let mlids: Vec<String> = r.cycle_mlids.iter().map(|m| format!("0x{m:04X}")).collect();
            println!(
                "with multicast  NOT deadlock free: a cycle of {} channels through MLID {}:",
                c.len(),
                if mlids.is_empty() {
                    "none (unicast alone)".to_string()
                } else {
                    mlids.join(", ")
                }
            );
            println!("  {}", r.describe_cycle(f).unwrap_or_default());
        }
    }
}

/// The multicast of the set in `dir` rebuilt for `f1`, the fabric after a
/// fault (`None`: the set has no multicast plan).
pub fn carry_over(f0: &Fabric, f1: &Fabric, dir: &Path) -> Result<Option<(Multicast, Multicast)>> {
    let Some(old) = fabric::formats::tableset::read_multicast(f0, dir)? else {
        return Ok(None);
    };
    let Some(plan) = &old.plan else {
        bail!(
            "{}: the set carries multicast groups but no plan to rebuild their trees from",
            dir.display()
        );
    };
    let (groups, mfts, plan) = tree::rebuild(f1, plan, &old.groups)?;
    let new = Multicast {
        groups,
        mfts,
        plan: Some(plan),
    };
    Ok(Some((old, new)))
}

/// Refuses an update from the trees `old` to `mc` with `routing`: trees
/// broken or in a cycle with the routes, or old and new entries mixed on
/// the switches that could close one. The routes are walked once.
pub fn require_update_ok(
    f: &Fabric,
    routing: &Routing,
    mc: &Multicast,
    old: &Multicast,
    what: &str,
) -> Result<()> {
    let (_, r, mixed) = fabric::verify::mcast::verify_update(f, routing, mc, old);
    if let Some(why) = r.refusal() {
        return Err(super::exit::Unsafe(format!("{what}: {why}")).into());
    }
    match mixed {
        Some(c) => Err(super::exit::Unsafe(format!(
            "switches holding old and new multicast entries during the update could close a \
             cycle of {} channels",
            c.len()
        ))
        .into()),
        None => Ok(()),
    }
}

/// Refuses tables whose multicast trees, checked with them, are broken or
/// close a cycle.
pub fn require_ok(f: &Fabric, routing: &Routing, mc: &Multicast, what: &str) -> Result<()> {
    let (_, r) = fabric::verify::mcast::verify_with_mcast(f, routing, mc);
    match r.refusal() {
        Some(why) => Err(super::exit::Unsafe(format!("{what}: {why}")).into()),
        None => Ok(()),
    }
}
