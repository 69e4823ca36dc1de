//! Dynamic quick reconfiguration (Sem-Jacobsen and Lysne, "Topology
//! Agnostic Dynamic Quick Reconfiguration for Large-Scale Interconnection
//! Networks", CCGrid 2012): after a fault, reroute only the flows that
//! crossed the failed element, with the VLs the routing already uses, so
//! that the update from the old tables to the new ones is deadlock free
//! while it is applied.
//!
//! The [`ChannelList`] orders the channels of the routing in force so that
//! every dependency goes up. A broken flow gets the shortest path whose
//! every turn goes up the list or can be made to by reordering it; the
//! list then holds the old and the new dependencies together, which is
//! what makes the transition safe.
//!
//! InfiniBand forwards by destination: a switch holds one entry per
//! destination LID. A switch whose route toward a destination still
//! reaches it keeps its entry (its flows are not broken); the entries of
//! the switches whose route crossed the failed element are free, and every
//! flow through them is broken and rerouted here. A new path that reaches
//! a switch whose entry is fixed follows that entry, checking each
//! dependency on the way. The VL of each hop is what the SL-to-VL tables
//! in force give, never more than the routing used, so a DF-DN routing
//! keeps its VL-per-hop rule and no routing needs more VLs.
//!
//! The result is checked before it is returned: the new tables by the
//! verifier (connected, deadlock free, no more VLs) and the update by the
//! transition check of every old/new mix, the dependencies of the mixes
//! inserted into the same list.

pub mod channel_list;
pub mod curve;
pub mod curve_svg;
pub mod detour;
pub mod diff;
mod links;
mod reroute;
mod search;
pub mod switch_flows;
pub mod update_order;

pub use channel_list::{ChannelList, ChannelListError, Vertex};
pub use detour::Detours;
pub use diff::{Change, apply_change, change_between};
pub use update_order::{OrderError, OrderedUpdate, order_update};

use crate::model::{Fabric, NodeId, Slot};
use crate::tables::Routing;
use crate::verify::transition::{Changed, Mix};

/// A failed (or restored) element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The link at this port (either end).
    Link(Slot),
    /// Every link of this switch.
    Switch(NodeId),
}

/// The fabric after `faults`: the same nodes, ports and indices, with the
/// failed links down.
pub fn apply_faults(f: &Fabric, faults: &[Fault]) -> Fabric {
    let mut slots = Vec::new();
    for &fault in faults {
        match fault {
            Fault::Link(s) => slots.push(s),
            Fault::Switch(n) => slots.extend(f.port_slots(n)),
        }
    }
    f.without_links(&slots)
}

/// Times a destination is tried again in another flow order before its
/// flows count as without a path.
const ORDER_RETRIES: usize = 24;
/// Times a whole reroute is tried again with a destination that found no
/// path moved first.
const DEST_RETRIES: usize = 8;

/// How illegal turns (down the channel list) are admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Turns {
    /// Only turns that go up the list as it stands.
    None,
    /// Each illegal turn of a path is checked alone during the search; a
    /// path whose turns do not fit together is given up.
    Single,
    /// As `Single`, and a path whose turns do not fit together is searched
    /// again without the turn that failed.
    All,
}

/// Knobs of a reroute.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub turns: Turns,
    /// Search the other SLs (VL layers) the routing uses when the flow's
    /// own finds no path.
    pub layers: bool,
    /// Check the transition (every old/new mix) before returning.
    pub check_transition: bool,
    /// Verify the new tables in full before returning (callers that pass
    /// them through the verification gate anyway may skip it).
    pub verify_result: bool,
    /// Local detours around each failed link enabled before the search
    /// ([`reroute_from`]; [`reroute`] alone knows no failed link).
    pub detours: Detours,
    /// Also route the flows whose route ends at a switch with no entry for
    /// their destination, not only those that cross a link that is down:
    /// tables that leave pairs unrouted on purpose (the switches'
    /// management endpoints of [`switch_flows`], which the engine did not
    /// serve) are made whole. A connected routing has no such entry.
    pub reconnect: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            turns: Turns::All,
            layers: true,
            check_transition: true,
            verify_result: true,
            detours: Detours::None,
            reconnect: false,
        }
    }
}

/// What a reroute changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Source/destination pairs of end ports that are still connected.
    pub flows: u64,
    /// Pairs whose route crossed the failed element.
    pub flows_broken: u64,
    /// Broken pairs given a new path (all of them on success).
    pub flows_rerouted: u64,
    pub destinations_affected: u64,
    pub entries_changed: u64,
    /// Entries toward ports the fault cut off, removed.
    pub entries_dropped: u64,
    /// Entries toward switches (their port 0: management traffic, which
    /// the subnet manager sends on VL 15, outside the dependency graph)
    /// whose route crossed the fault, set to a shortest way around it.
    pub switch_entries_changed: u64,
    pub sls_changed: u64,
    /// Dependencies added to the channel list, and those that went down
    /// the list and moved channels.
    pub dependencies_added: u64,
    pub reorders: u64,
    /// Destinations undone and tried again with the flow that found no
    /// path first (the LFT entry a switch holds serves every SL).
    pub order_retries: u64,
    /// Whole reroutes tried again with a destination left without a path
    /// moved first.
    pub destination_retries: u64,
    /// VLs used on switch-to-switch links before and after.
    pub vls_before: u32,
    pub vls_after: u32,
    /// Dependencies of the old/new mixes the transition check inserted.
    pub transition_dependencies: u64,
    /// (Failed channel, VL) pairs given a local detour, those no detour
    /// fitted, and the dependencies the detours added.
    pub detours: u64,
    pub detours_refused: u64,
    /// The detours the reroute succeeded with (a kind whose detours left
    /// some flow without a path gives way to the next: mesh, local, none).
    pub detours_kind: Detours,
    pub detour_dependencies: u64,
}

/// A successful reroute: the tables to apply, in order.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The new tables.
    pub routing: Routing,
    /// When applying `routing` over the old tables in one step is not
    /// deadlock free, the tables to apply first: the old ones with every
    /// entry that led into the fault dropped (see [`reroute`]).
    pub drain: Option<Routing>,
    pub stats: Stats,
}

/// Why a reroute failed; the caller falls back to a full recompute.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DqrError {
    #[error(
        "the channel list was built for another fabric ({list} vertices, the fabric has {slots} ports)"
    )]
    OtherFabric { list: usize, slots: usize },
    #[error(
        "{unrouted} broken flows have no deadlock-free path within the channel list (first: LID {src} to LID {dst}); a full recompute is needed"
    )]
    NoPath { unrouted: u64, src: u16, dst: u16 },
    #[error("the rerouted tables fail verification: {0}")]
    Verify(String),
    #[error(
        "the update would not be deadlock free while it is applied: the dependency {0} of an old/new mix closes a cycle"
    )]
    Transition(String),
    #[error(
        "the rerouted tables use {now} VLs (up to VL {now_max}), the tables in force {before} (up to VL {before_max})"
    )]
    MoreVls {
        now: u32,
        now_max: u8,
        before: u32,
        before_max: u8,
    },
}

/// The guarantee on VLs: rerouted tables (`after`, the verifier's report)
/// use no more VLs than the tables in force did (`vls_used`), and none
/// above the highest they used (`max_vl`).
pub fn within_vls(
    after: &crate::verify::Report,
    max_vl: u8,
    vls_used: u32,
) -> Result<(), DqrError> {
    if after.max_vl > max_vl || after.vls_used > vls_used {
        return Err(DqrError::MoreVls {
            now: after.vls_used,
            now_max: after.max_vl,
            before: vls_used,
            before_max: max_vl,
        });
    }
    Ok(())
}

/// [`reroute`] of the fault that took `before` to `after`, with the local
/// detours `opts.detours` asks for enabled around its failed links first
/// ([`detour`]).
pub fn reroute_from(
    before: &Fabric,
    after: &Fabric,
    old: &Routing,
    list: &mut ChannelList,
    opts: &Options,
) -> Result<Outcome, DqrError> {
    if !list.fits(after.num_slots()) || before.num_slots() != after.num_slots() {
        return Err(DqrError::OtherFabric {
            list: list.len(),
            slots: after.num_slots(),
        });
    }
    // A detour that shuts out some flow's only path, or whose turns close
    // a cycle with a mix of the update, is given up: the next kind is
    // tried on the list as it was (the mesh plug-in, then the shortest
    // detours, then none).
    let first: &[Detours] = match opts.detours {
        Detours::None => &[],
        Detours::Local => &[Detours::Local],
        Detours::Mesh => &[Detours::Mesh, Detours::Local],
    };
    let attempt = |kind: Detours, list: &mut ChannelList| {
        let enabled = detour::enable(before, after, list, kind);
        let mut out = reroute(after, old, list, opts)?;
        out.stats.detours = enabled.detours;
        out.stats.detours_refused = enabled.refused;
        out.stats.detour_dependencies = enabled.dependencies;
        out.stats.detours_kind = kind;
        Ok(out)
    };
    let mut saved = (!first.is_empty()).then(|| list.clone());
    for (i, &kind) in first.iter().enumerate() {
        match attempt(kind, list) {
            Err(DqrError::NoPath { .. } | DqrError::Transition(_) | DqrError::Verify(_)) => {
                // The next kind starts from the list as it was; the last
                // one takes the saved copy itself.
                let restored = if i + 1 == first.len() {
                    saved.take()
                } else {
                    saved.clone()
                };
                if let Some(s) = restored {
                    *list = s;
                }
            }
            done => return done,
        }
    }
    attempt(Detours::None, list)
}

/// Reroutes the flows of `old` (tables for `f`'s nodes and ports) that no
/// longer reach their destination on `f`.
///
/// The update order: a switch whose route toward a destination crossed the
/// fault may get its new entry before the switch its old entry points to
/// (an upstream switch on the old route) gets its own; a packet can then
/// bounce between the two on one VL, a dependency cycle no single routing
/// has. When the one-step update admits such a mix, the outcome carries a
/// drain stage: the old tables with those entries dropped (their packets
/// were lost at the fault anyway). Old to drain only removes walks, and
/// every mix of drain and new walks new entries or drops, so both steps
/// are checked deadlock free; the caller applies the drain stage, waits
/// until every switch holds it, then applies the new tables. `list` is the channel list of
/// `old` (on the fabric before the fault; the numbering is the same); it
/// is updated with the new dependencies, so successive faults reroute
/// against everything in force. On error the list may hold dependencies
/// of the failed attempt: rebuild it from the tables then in force.
pub fn reroute(
    f: &Fabric,
    old: &Routing,
    list: &mut ChannelList,
    opts: &Options,
) -> Result<Outcome, DqrError> {
    // Destinations are rerouted one after the other, each on the
    // dependencies the ones before it added: a destination left without a
    // path is tried again first, on the list as it was (the dependencies
    // this try added withdrawn).
    let mut first: Vec<u16> = Vec::new();
    list.journal_start();
    let out = loop {
        match reroute::reroute_once(f, old, list, opts, &first) {
            Err(DqrError::NoPath { dst, .. })
                if first.len() < DEST_RETRIES && !first.contains(&dst) =>
            {
                list.undo_to(0);
                first.insert(0, dst);
            }
            out => break out,
        }
    };
    list.journal_stop();
    out.map(|mut o| {
        o.stats.destination_retries = first.len() as u64;
        o
    })
}

/// Copies `src`'s entries toward switch LIDs into `dst`: a drain stage
/// carries the repaired routes to the switches, so that the subnet
/// manager reaches every switch (to apply and read back the next stage)
/// while data toward the rerouted end ports is dropped. Management
/// packets travel on VL 15, outside the dependency graph.
pub(crate) fn switch_columns_from(f: &Fabric, dst: &mut Routing, src: &Routing) {
    for &sw in f.switches() {
        let lid = f.switch_lid(sw);
        if lid == 0 {
            continue;
        }
        for si in 0..f.switches().len() as u32 {
            dst.lfts.set(si, lid, src.lfts.get(si, lid));
        }
    }
}

/// The new tables in full: connected, deadlock free, within the VLs the
/// routing used.
fn verify_result(
    f: &Fabric,
    new: &Routing,
    list: &ChannelList,
    stats: &mut Stats,
) -> Result<(), DqrError> {
    let after = crate::verify::verify(f, new);
    if !after.ok() {
        let why = match after.describe_cycle(f) {
            Some(c) => format!("cycle {c}"),
            None => format!(
                "{} pairs unrouted (first {:?})",
                after.broken_pairs,
                after.broken_examples.first()
            ),
        };
        return Err(DqrError::Verify(why));
    }
    within_vls(&after, list.max_vl_used(), list.vls_used())?;
    stats.vls_after = after.vls_used;
    Ok(())
}

/// Inserts the dependencies of every old/new mix toward the destinations
/// that changed into `list` (the other destinations route as before, and
/// their dependencies are in the list already). The list then orders the
/// whole transition, or the first dependency that would close a cycle is
/// named and the list is left as it was. Each destination comes with the
/// switches whose entry toward it may change, or [`Changed::Compare`] to
/// find them.
pub(crate) fn admit_transition(
    f: &Fabric,
    old: &Routing,
    new: &Routing,
    list: &mut ChannelList,
    dests: &[((Slot, u16), Changed)],
) -> Result<u64, DqrError> {
    let mix = Mix::new(f, old, new, list.vls());
    let mut st = mix.scratch();
    let mut added = Vec::new();
    let mut bad = None;
    for (d, changed) in dests {
        let d = *d;
        // The list holds the old side's dependencies: only walks that
        // differ from it can add any.
        mix.walks_through(&mut st, d, *changed, &mut |c, vc, o, vo| {
            if bad.is_some() {
                return;
            }
            let (a, b) = (list.vertex(c, vc), list.vertex(o, vo));
            match list.add(a, b) {
                Ok(true) => added.push((a, b)),
                Ok(false) => {}
                Err(_) => bad = Some((c, vc, o, vo)),
            }
        });
        if let Some((c, vc, o, vo)) = bad {
            // The order stays one of the smaller graph: only the edges go.
            for &(a, b) in added.iter().rev() {
                list.remove(a, b);
            }
            let ch = |s, v| {
                crate::verify::describe_channel(f, crate::verify::VirtualChannel { slot: s, vl: v })
            };
            return Err(DqrError::Transition(format!(
                "{} -> {}",
                ch(c, vc),
                ch(o, vo)
            )));
        }
    }
    Ok(added.len() as u64)
}

/// Whether a switch's route toward one destination still reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    Unknown,
    Good,
    /// Free to change: the route crossed a failed element, or had none.
    Broken,
    /// Given a new entry by this reroute: fixed like a good one.
    Assigned,
}

impl Reach {
    pub(crate) fn fixed(self) -> bool {
        matches!(self, Reach::Good | Reach::Assigned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dqr::links::SwitchLinks;
    use crate::generate::{Topology, generate};
    use crate::model::NONE;
    use crate::routing::{EngineKind, EngineOptions};

    /// The backward search finds exactly the switches whose route, walked
    /// forward entry by entry, meets a link that is down: for every
    /// destination (end ports and switches) after single link and switch
    /// faults of a Dragonfly routed by DF-DN and a torus routed by E-cube.
    #[test]
    fn broken_switches_are_those_whose_walk_meets_the_fault() {
        for (t, engine) in [
            (Topology::Dragonfly { p: 3, hosts: None }, EngineKind::Dfdn),
            (
                Topology::Mesh {
                    dims: vec![4, 5],
                    torus: true,
                    hosts: 1,
                },
                EngineKind::Ecube,
            ),
        ] {
            let f0 = generate(&t).expect("fabric");
            let r = engine
                .engine()
                .route(&f0, &EngineOptions::default())
                .expect("routes");
            let links = f0.switch_links();
            let mut faults: Vec<Fault> = links.iter().step_by(7).map(|&l| Fault::Link(l)).collect();
            faults.push(Fault::Switch(f0.switches()[1]));
            for fault in faults {
                let f = apply_faults(&f0, &[fault]);
                let mut dests: Vec<Slot> = f.endports().to_vec();
                dests.extend(f.switches().iter().map(|&s| f.slot(s, 0)));
                let none = vec![false; f.max_lid() as usize + 1];
                let dlids: Vec<u16> = dests.iter().map(|&d| f.lid_of_slot(d)).collect();
                let got = SwitchLinks::new(&f, false).broken(&f, &r, &dlids, &none);
                let n = f.switches().len() as u32;
                for (&d, got) in dests.iter().zip(got) {
                    let dlid = f.lid_of_slot(d);
                    let dnode = f.node_of(d);
                    let want: Vec<u32> = (0..n)
                        .filter(|&si| {
                            let mut cur = si;
                            for _ in 0..=n {
                                let sw = f.switches()[cur as usize];
                                if sw == dnode {
                                    return false;
                                }
                                let e = r.lfts.get(cur, dlid);
                                let s = f0.slot(sw, e);
                                if f0.remote(s) == d {
                                    return false;
                                }
                                if f.remote(s) == NONE {
                                    return true;
                                }
                                match f.switch_index(f.node_of(f.remote(s))) {
                                    Some(next) => cur = next,
                                    None => return false,
                                }
                            }
                            panic!("a loop in the tables in force");
                        })
                        .collect();
                    assert_eq!(got, want, "{fault:?} toward LID {dlid}");
                }
            }
        }
    }
}
