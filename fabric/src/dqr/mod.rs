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
pub mod detour;
pub mod diff;
pub mod plan;
mod search;

pub use channel_list::{ChannelList, ChannelListError, Vertex};
pub use detour::Detours;
pub use diff::{Change, apply_change, change_between};
pub use plan::{PlanError, Planned, order_update};

use crate::model::{Fabric, NONE, NodeId, NodeKind, Slot};
use crate::tables::{NO_PATH, NUM_SLS, Routing, SL_NONE};
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
}

impl Default for Options {
    fn default() -> Self {
        Self {
            turns: Turns::All,
            layers: true,
            check_transition: true,
            verify_result: true,
            detours: Detours::None,
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
        match reroute_once(f, old, list, opts, &first) {
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

fn reroute_once(
    f: &Fabric,
    old: &Routing,
    list: &mut ChannelList,
    opts: &Options,
    first: &[u16],
) -> Result<Outcome, DqrError> {
    if !list.fits(f.num_slots()) {
        return Err(DqrError::OtherFabric {
            list: list.len(),
            slots: f.num_slots(),
        });
    }
    // Dependencies through a link that is down are gone: withdrawing them
    // frees the turns that close a cycle only through the failed link.
    for s in 0..f.num_slots() as Slot {
        if f.remote(s) == NONE {
            list.isolate(s);
        }
    }
    // The list may carry earlier reroutes: count this one's share.
    let (added0, reorders0) = (list.added(), list.reorders());
    let mut stats = Stats {
        vls_before: list.vls_used(),
        ..Stats::default()
    };
    // Ports the fault cut off (a host behind a failed link or switch, a
    // switch with no link left) are no destination any more: no entry
    // names them (dropped below), so the set never routes to a port the
    // fabric lacks.
    let mut dropped_lid = vec![false; f.max_lid() as usize + 1];
    for lid in 1..=f.max_lid() {
        let Some(s) = f.lid_owner(lid) else { continue };
        let n = f.node_of(s);
        dropped_lid[lid as usize] = match f.kind(n) {
            NodeKind::Switch => f.port_slots(n).all(|p| f.remote(p) == NONE),
            _ => f.remote(s) == NONE,
        };
    }
    // A destination is affected only if some switch's entry toward it
    // leads into a link that is down (or nowhere): scanning the rows of
    // the switches with a dead port finds them without walking the rest.
    let mut affected_lid = vec![false; f.max_lid() as usize + 1];
    // Ports that lost their link, per switch (an unlinked port of the
    // fabric before the fault carries no entry of a connected routing).
    let dead_ports: Vec<(u32, Vec<bool>)> = f
        .switches()
        .iter()
        .enumerate()
        .filter_map(|(si, &sw)| {
            let dead: Vec<bool> = (0..=f.num_ports(sw))
                .map(|p| p > 0 && f.remote(f.slot(sw, p)) == NONE)
                .collect();
            dead.iter().any(|&d| d).then_some((si as u32, dead))
        })
        .collect();
    for (si, dead) in &dead_ports {
        for (lid, hit) in affected_lid.iter_mut().enumerate() {
            let e = old.lfts.get(*si, lid as u16);
            if dead.get(e as usize).copied().unwrap_or(false) {
                *hit = true;
            }
        }
    }
    let max_vl = list.max_vl_used();
    // The SLs (VL layers) the routing uses, read only when some flow's own
    // SL finds no path: most reroutes never need them.
    let mut layers: Option<Vec<u8>> = None;
    let layers_of = |r: &Routing| -> Vec<u8> {
        match &r.path_sl {
            Some(p) if opts.layers => {
                let seen = p.sls_used();
                (0..NUM_SLS as u8).filter(|&s| seen[s as usize]).collect()
            }
            _ => Vec::new(),
        }
    };
    let hosts = crate::verify::switch_hosts(f);
    let mut searcher = search::Searcher::new(f, list.vls());
    let host_switch: Vec<u32> = hosts
        .iter()
        .map(|&h| f.switch_index(f.node_of(f.remote(h))).unwrap_or(NONE))
        .collect();
    let mut unrouted = 0u64;
    let mut first_unrouted = None;
    let mut changed_dests = Vec::new();
    // Per destination of `changed_dests`: the switches whose route toward
    // it crossed the fault, the only entries the reroute may set.
    let mut broken_at: Vec<Vec<u32>> = Vec::new();
    let mut state = vec![Reach::Unknown; f.switches().len()];
    // Per destination: (source switch, SL, VL of the first hop) of the
    // flows rerouted on their own SL. Another host of that switch with the
    // same SL and first VL follows the same fixed entries from there, with
    // the same dependencies, all in the list already: its search would
    // find that path again and add nothing.
    let mut routed_from: Vec<(u32, u8, u8)> = Vec::new();
    // Positions in `hosts` by the switch the host hangs off.
    let mut hosts_at: Vec<Vec<u32>> = vec![Vec::new(); f.switches().len()];
    for (k, &si) in host_switch.iter().enumerate() {
        if si != NONE {
            hosts_at[si as usize].push(k as u32);
        }
    }
    let mut order: Vec<u32> = Vec::new();
    // Sources toward a destination, counted without walking them: every
    // host but the destination, and no router port toward a router port
    // (transit, the inter-subnet check's).
    let router_hosts = hosts
        .iter()
        .filter(|&&h| f.kind(f.node_of(h)) == NodeKind::Router)
        .count() as u64;
    // The switches whose route toward each affected destination crossed
    // the fault, found for all of them first, from the tables in force (a
    // destination's column changes only while it is rerouted, below).
    let mut affected_dests: Vec<Slot> = f
        .endports()
        .iter()
        .copied()
        .filter(|&d| affected_lid[f.lid_of_slot(d) as usize])
        .collect();
    // The destinations an earlier try found no path to go first.
    affected_dests.sort_by_key(|&d| !first.contains(&f.lid_of_slot(d)));
    let links = SwitchLinks::new(f);
    let broken_all = links.broken(f, old, &affected_dests, &dropped_lid);
    for &d in f.endports() {
        stats.flows += if f.kind(f.node_of(d)) == NodeKind::Router {
            hosts.len() as u64 - router_hosts
        } else {
            hosts.len() as u64 - u64::from(f.switch_index(f.node_of(f.remote(d))).is_some())
        };
    }
    // The destinations are rerouted on the tables in force and the entries
    // their paths set ([`search::Entries`]) while the other core copies the
    // tables in force into the new ones; the entries set go in after.
    let mut path_sl = old.path_sl.clone();
    let mut ent = search::Entries {
        old,
        assigned: vec![NO_PATH; f.switches().len()],
    };
    // The routes toward switches are repaired there too: the destinations
    // rerouted here are end ports, so the two touch different columns.
    let ((mut new, dropped, repaired), ()) = rayon::join(
        || {
            let mut new = old.clone();
            let mut dropped = 0u64;
            for (lid, _) in dropped_lid.iter().enumerate().filter(|&(_, &g)| g) {
                for si in 0..f.switches().len() as u32 {
                    if new.lfts.get(si, lid as u16) != NO_PATH {
                        new.lfts.set(si, lid as u16, NO_PATH);
                        dropped += 1;
                    }
                }
            }
            let repaired = repair_switch_lids(f, &links, &mut new, &affected_lid);
            (new, dropped, repaired)
        },
        || {
            for (&d, broken) in affected_dests.iter().zip(broken_all) {
                let dlid = f.lid_of_slot(d);
                let d_router = f.kind(f.node_of(d)) == NodeKind::Router;
                let reset = |state: &mut [Reach]| {
                    state.fill(Reach::Good);
                    for &si in &broken {
                        state[si as usize] = Reach::Broken;
                    }
                };
                reset(&mut state);
                // Most sources sit on switches the fault left alone: only those of
                // the others, in the order of `hosts`.
                order.clear();
                for (si, at) in hosts_at.iter().enumerate() {
                    if state[si] != Reach::Good {
                        order.extend_from_slice(at);
                    }
                }
                order.sort_unstable();
                // The switches share one entry per destination across SLs, so the
                // first flow routed fixes the way for the flows after it, whose
                // layers may not admit it: when some flow finds no path, the
                // destination is undone (entries, SLs, dependencies, counts) and
                // tried again with that flow first.
                let (stats0, set0) = (stats.clone(), searcher.set.len());
                let mut sl_changes: Vec<(u16, u8)> = Vec::new();
                let mark = list.journal_len();
                let mut affected = false;
                let mut retried = 0u64;
                for retry in 0..=ORDER_RETRIES {
                    let last = retry == ORDER_RETRIES;
                    let mut failed: Option<usize> = None;
                    affected = false;
                    routed_from.clear();
                    for (pos, &k) in order.iter().enumerate() {
                        let (h, si0) = (hosts[k as usize], host_switch[k as usize]);
                        if h == d || (d_router && f.kind(f.node_of(h)) == NodeKind::Router) {
                            continue;
                        }
                        let slid = f.lid_of_slot(h);
                        let sl = path_sl.as_ref().map_or(0, |p| p.get(slid, dlid));
                        if sl == SL_NONE {
                            // No path before the fault either: not this reroute's.
                            continue;
                        }
                        stats.flows_broken += 1;
                        affected = true;
                        // The VL this host's packets take out of its switch now, when
                        // that switch's entry is fixed.
                        let first_vl = |ent: &search::Entries, state: &[Reach]| {
                            state[si0 as usize].fixed().then(|| {
                                let out = ent.get(si0, dlid, state);
                                ent.vl(si0, f.port_of(f.remote(h)), out, sl)
                            })
                        };
                        if let Some(v) = first_vl(&ent, &state) {
                            if routed_from.contains(&(si0, sl, v)) {
                                stats.flows_rerouted += 1;
                                continue;
                            }
                        }
                        let mut done = false;
                        for attempt in 0.. {
                            let try_sl = if attempt == 0 {
                                sl
                            } else {
                                let others = layers.get_or_insert_with(|| layers_of(old));
                                match others.iter().copied().filter(|&l| l != sl).nth(attempt - 1) {
                                    Some(l) => l,
                                    None => break,
                                }
                            };
                            let found = searcher.route_flow(
                                f,
                                &mut ent,
                                list,
                                &search::Flow {
                                    src: h,
                                    dst: d,
                                    dlid,
                                    sl: try_sl,
                                    cached_sl: sl,
                                    max_vl,
                                },
                                &mut state,
                                opts.turns,
                            );
                            if found {
                                if try_sl == sl {
                                    if let Some(v) = first_vl(&ent, &state) {
                                        routed_from.push((si0, sl, v));
                                    }
                                }
                                if try_sl != sl {
                                    if let Some(p) = path_sl.as_mut() {
                                        p.set_pair(slid, dlid, try_sl);
                                        sl_changes.push((slid, sl));
                                    }
                                    stats.sls_changed += 1;
                                }
                                done = true;
                                break;
                            }
                        }
                        if done {
                            stats.flows_rerouted += 1;
                        } else if !last {
                            failed = Some(pos);
                            break;
                        } else {
                            unrouted += 1;
                            first_unrouted.get_or_insert((slid, dlid));
                        }
                    }
                    let Some(pos) = failed else { break };
                    list.undo_to(mark);
                    searcher.set.truncate(set0);
                    if let Some(p) = path_sl.as_mut() {
                        for &(slid, sl) in sl_changes.iter().rev() {
                            p.set_pair(slid, dlid, sl);
                        }
                    }
                    sl_changes.clear();
                    stats = stats0.clone();
                    retried += 1;
                    reset(&mut state);
                    let k = order.remove(pos);
                    order.insert(0, k);
                }
                stats.order_retries += retried;
                if affected {
                    stats.destinations_affected += 1;
                    changed_dests.push(d);
                    broken_at.push(broken);
                }
            }
        },
    );
    stats.entries_dropped = dropped;
    new.path_sl = path_sl;
    for &(si, dlid, port) in &searcher.set {
        new.lfts.set(si, dlid, port);
    }
    if let Some((src, dst)) = first_unrouted {
        return Err(DqrError::NoPath { unrouted, src, dst });
    }
    stats.switch_entries_changed = repaired.len() as u64;
    // Only entries a path set can differ (each set once): counting them
    // spares a pass over every switch for every destination.
    stats.entries_changed = searcher
        .set
        .iter()
        .filter(|&&(si, l, p)| old.lfts.get(si, l) != p)
        .count() as u64;
    stats.dependencies_added = list.added().saturating_sub(added0);
    stats.reorders = list.reorders().saturating_sub(reorders0);
    if opts.verify_result {
        verify_result(f, &new, list, &mut stats)?;
    }
    let mut drain = None;
    if opts.check_transition {
        // Which entries toward each destination may differ between the
        // stages: those of its broken switches, unless the fault cut the
        // destination off (every entry dropped) or it is a switch (whose
        // column the repair and the drain stage set too).
        let changes: Vec<(Slot, Changed)> = changed_dests
            .iter()
            .zip(&broken_at)
            .map(|(&d, b)| {
                let exact = !dropped_lid[f.lid_of_slot(d) as usize]
                    && f.kind(f.node_of(d)) != NodeKind::Switch;
                (
                    d,
                    if exact {
                        Changed::Given(b)
                    } else {
                        Changed::Compare
                    },
                )
            })
            .collect();
        // A refused one-step update leaves the list as it was.
        match admit_transition(f, old, &new, list, &changes) {
            Ok(n) => stats.transition_dependencies = n,
            Err(_) => {
                let mut d = old.clone();
                // The others are classified on the tables in force, their
                // entries all there (a dropped destination's included).
                let compared: Vec<Slot> = changes
                    .iter()
                    .filter(|(_, c)| matches!(c, Changed::Compare))
                    .map(|&(dst, _)| dst)
                    .collect();
                let none_dropped = vec![false; dropped_lid.len()];
                let mut compared_broken =
                    links.broken(f, old, &compared, &none_dropped).into_iter();
                for &(dst, changed) in &changes {
                    let broken = match changed {
                        Changed::Given(broken) => broken.to_vec(),
                        Changed::Compare => compared_broken.next().unwrap_or_default(),
                    };
                    let dlid = f.lid_of_slot(dst);
                    for si in broken {
                        d.lfts.set(si, dlid, NO_PATH);
                    }
                }
                // The repaired routes toward switches, the only switch
                // entries `new` changed (see `switch_columns_from`).
                for &(si, lid) in &repaired {
                    d.lfts.set(si, lid, new.lfts.get(si, lid));
                }
                stats.transition_dependencies = admit_transition(f, old, &d, list, &changes)?
                    + admit_transition(f, &d, &new, list, &changes)?;
                drain = Some(d);
            }
        }
    }
    if stats.sls_changed > 0 {
        list.mark_cached_sl_walks();
    }
    Ok(Outcome {
        routing: new,
        drain,
        stats,
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

/// Gives every switch whose route toward another switch's LID crossed the
/// fault an entry that arrives again; routes that still arrive stay. The
/// repair grows outward from the switches whose route arrives: a broken
/// switch next to one forwards to it, the others to a switch repaired
/// before them, so every repaired chain ends on a route that arrives, and
/// such a route passes no repaired switch (it would not have arrived):
/// no loop forms. A repaired route may be longer than the shortest; these
/// routes carry management packets (VL 15, outside the dependency graph).
/// Returns the entries changed (switch index, LID).
fn repair_switch_lids(
    f: &Fabric,
    links: &SwitchLinks,
    r: &mut Routing,
    affected_lid: &[bool],
) -> Vec<(u32, u16)> {
    let n = f.switches().len();
    // The destination switches with a link left, by a slot of theirs (any
    // slot of a switch addresses its LID; port 0's entry is 0, so routes
    // end there).
    let dests: Vec<Slot> = f
        .switches()
        .iter()
        .enumerate()
        .filter(|&(di, &dsw)| {
            let dlid = f.switch_lid(dsw);
            dlid != 0
                && affected_lid.get(dlid as usize).copied().unwrap_or(false)
                && links.has_link(di as u32)
        })
        .map(|(_, &dsw)| f.slot(dsw, 0))
        .collect();
    let none = vec![false; affected_lid.len()];
    let broken_all = links.broken(f, r, &dests, &none);
    let mut changed = Vec::new();
    let mut broken = vec![false; n];
    let mut queue = std::collections::VecDeque::new();
    for (&d, b) in dests.iter().zip(broken_all) {
        if b.is_empty() {
            continue;
        }
        let dlid = f.lid_of_slot(d);
        for &si in &b {
            broken[si as usize] = true;
        }
        // Outward from the switches whose route arrives: a broken switch
        // next to one forwards to it, and the others to a switch repaired
        // before them, so every repaired route ends on one that arrives.
        for &si in &b {
            if let Some(p) = links
                .out_of(f, si)
                .find_map(|(p, y)| (!broken[y as usize]).then_some(p))
            {
                r.lfts.set(si, dlid, p);
                changed.push((si, dlid));
                broken[si as usize] = false;
                queue.push_back(si);
            }
        }
        while let Some(x) = queue.pop_front() {
            for &(y, py) in links.links_into(x) {
                if broken[y as usize] {
                    r.lfts.set(y, dlid, py);
                    changed.push((y, dlid));
                    broken[y as usize] = false;
                    queue.push_back(y);
                }
            }
        }
        // Those left have no way to the destination on the fabric now.
        for &si in &b {
            broken[si as usize] = false;
        }
    }
    changed
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
    dests: &[(Slot, Changed)],
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

/// The switch-to-switch links of a fabric as the backward searches want
/// them: per switch its dead ports, and the links into it.
struct SwitchLinks {
    /// Switches with a port whose link is down, and those ports.
    dead: Vec<(u32, Vec<u8>)>,
    /// Per switch `x`, `into[into_off[x]..into_off[x + 1]]`: the links
    /// into it as (switch at the far end, that switch's port).
    into_off: Vec<u32>,
    into: Vec<(u32, u8)>,
}

impl SwitchLinks {
    fn new(f: &Fabric) -> Self {
        let n = f.switches().len();
        let mut dead = Vec::new();
        let mut by_target: Vec<Vec<(u32, u8)>> = vec![Vec::new(); n];
        for (si, &sw) in f.switches().iter().enumerate() {
            let mut d = Vec::new();
            for p in 1..=f.num_ports(sw) {
                let rem = f.remote(f.slot(sw, p));
                if rem == NONE {
                    d.push(p);
                } else if let Some(x) = f.switch_index(f.node_of(rem)) {
                    by_target[x as usize].push((si as u32, p));
                }
            }
            if !d.is_empty() {
                dead.push((si as u32, d));
            }
        }
        let mut into_off = vec![0u32; n + 1];
        let mut into = Vec::new();
        for (x, v) in by_target.into_iter().enumerate() {
            into.extend(v);
            into_off[x + 1] = into.len() as u32;
        }
        Self {
            dead,
            into_off,
            into,
        }
    }

    fn links_into(&self, x: u32) -> &[(u32, u8)] {
        &self.into[self.into_off[x as usize] as usize..self.into_off[x as usize + 1] as usize]
    }

    fn has_link(&self, x: u32) -> bool {
        !self.links_into(x).is_empty()
    }

    /// The linked ports of switch `si` toward other switches, as (port,
    /// switch index).
    fn out_of<'a>(&self, f: &'a Fabric, si: u32) -> impl Iterator<Item = (u8, u32)> + use<'a> {
        let sw = f.switches()[si as usize];
        (1..=f.num_ports(sw)).filter_map(move |p| {
            let rem = f.remote(f.slot(sw, p));
            (rem != NONE)
                .then(|| f.switch_index(f.node_of(rem)))
                .flatten()
                .map(|y| (p, y))
        })
    }

    /// Per destination of `dests`, the switches whose route toward it
    /// crosses a link that is down, in switch order: found backwards from
    /// the switches whose entry points into a dead port, along the links
    /// whose far switch forwards into them (a few switches and their links
    /// per destination, where a forward walk would follow every switch's
    /// route). A destination the fault cut off (`dropped_lid`) has every
    /// switch. Exact when every route of `r` reached its destination before
    /// the fault (tables the gate let through); a switch whose entry led
    /// nowhere before keeps it, as it carried no flow.
    fn broken(
        &self,
        f: &Fabric,
        r: &Routing,
        dests: &[Slot],
        dropped_lid: &[bool],
    ) -> Vec<Vec<u32>> {
        use rayon::prelude::*;
        let n = f.switches().len();
        dests
            .par_chunks(64)
            .flat_map_iter(|chunk| {
                let mut seen = vec![false; n];
                let mut stack: Vec<u32> = Vec::new();
                chunk
                    .iter()
                    .map(|&d| {
                        let dlid = f.lid_of_slot(d);
                        if dropped_lid[dlid as usize] {
                            // Every entry dropped: no route reaches it.
                            return (0..n as u32).collect();
                        }
                        for (si, ports) in &self.dead {
                            let e = r.lfts.get(*si, dlid);
                            if ports.contains(&e) && !seen[*si as usize] {
                                seen[*si as usize] = true;
                                stack.push(*si);
                            }
                        }
                        let mut out = Vec::new();
                        while let Some(x) = stack.pop() {
                            out.push(x);
                            for &(y, py) in self.links_into(x) {
                                if !seen[y as usize] && r.lfts.get(y, dlid) == py {
                                    seen[y as usize] = true;
                                    stack.push(y);
                                }
                            }
                        }
                        for &x in &out {
                            seen[x as usize] = false;
                        }
                        out.sort_unstable();
                        out
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }
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
    use crate::generate::{Topology, generate};
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
                let got = SwitchLinks::new(&f).broken(&f, &r, &dests, &none);
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
