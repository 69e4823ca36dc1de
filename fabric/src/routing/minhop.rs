//! MinHop: shortest paths in switch hops, balanced per switch by the number
//! of end-port destinations already assigned to each port, as OpenSM's
//! `minhop` does (`osm_switch_recommend_path` with port profiles; routes to
//! switch LIDs do not count toward the load). Not deadlock free in general:
//! on a torus the verifier finds the cycle.
//!
//! The destinations are taken in OpenSM's order ([`opensm_order`]), not by
//! LID: the balance depends on it, and with it the tables are OpenSM's
//! entry for entry (a Dragonfly p=4 routed by OpenSM 3.3.23 on ibsim: all
//! 348,480 entries equal; by LID order the busiest link carried 1,964 HCA
//! pairs against OpenSM's 1,960).

use super::{EngineOptions, RoutingEngine};
use crate::error::Result;
use crate::graph::{SwitchGraph, UNREACHABLE};
use crate::model::{Fabric, NONE, NodeKind};
use crate::tables::{Lfts, NO_PATH, Routing};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct MinHop;

/// Where a LID sits: on which switch, and the port that reaches it from there.
#[derive(Clone, Copy)]
pub(crate) struct LidTarget {
    /// Switch index the LID is on or attached to (`NONE` = unreachable).
    pub switch: u32,
    /// Port of that switch that delivers it (0 for the switch itself).
    pub port: u8,
    /// Whether the LID is an end port (counts toward port load).
    pub end_port: bool,
    /// Whether the LID is its port's base LID (with LMC, the first of
    /// its 2^LMC): a source of traffic counts once, by this one.
    pub first: bool,
}

/// Resolves every LID to its switch and delivery port.
pub(crate) fn lid_targets(f: &Fabric) -> Vec<LidTarget> {
    (0..=f.max_lid())
        .map(|lid| {
            let none = LidTarget {
                switch: NONE,
                port: 0,
                end_port: false,
                first: false,
            };
            let Some(s) = f.lid_owner(lid) else {
                return none;
            };
            let n = f.node_of(s);
            if let Some(si) = f.switch_index(n) {
                return LidTarget {
                    switch: si,
                    port: 0,
                    end_port: false,
                    first: f.lid_of_slot(s) == lid,
                };
            }
            let r = f.remote(s);
            if r == NONE || f.kind(f.node_of(r)) != NodeKind::Switch {
                return none;
            }
            match f.switch_index(f.node_of(r)) {
                Some(si) => LidTarget {
                    switch: si,
                    port: f.port_of(r),
                    end_port: true,
                    first: f.lid_of_slot(s) == lid,
                },
                None => none,
            }
        })
        .collect()
}

/// The order OpenSM's unicast manager routes destinations in
/// (`ucast_mgr_build_lfts`): the end ports of each switch, in port order,
/// switch after switch by end-port count (most first; among equals in the
/// order of OpenSM's switch table, as glibc 2.36's `qsort` leaves them;
/// glibc 2.37 and 2.38 sort unstably, and an OpenSM built on them may order
/// equal switches otherwise), then every other LID (switches)
/// in the order of its port table. Both tables are maps keyed by the GUID
/// in network byte order compared as a native integer, so on the x86 hosts
/// OpenSM runs on they iterate by the byte-swapped GUID.
pub(crate) fn opensm_order(f: &Fabric, targets: &[LidTarget]) -> Vec<u16> {
    // Per switch: its end ports' LIDs in port order, sorted by their
    // count (most first), then by the byte-swapped GUID (a stable sort).
    let mut sws: Vec<(std::cmp::Reverse<usize>, u64, Vec<u16>)> = f
        .switches()
        .iter()
        .map(|&sw| {
            let ends: Vec<u16> = f
                .port_slots(sw)
                .filter_map(|s| {
                    let r = f.remote(s);
                    (r != NONE && f.kind(f.node_of(r)) != NodeKind::Switch)
                        .then(|| f.lid_of_slot(r))
                })
                .collect();
            (std::cmp::Reverse(ends.len()), f.guid(sw).swap_bytes(), ends)
        })
        .collect();
    sws.sort_by_key(|s| (s.0, s.1));
    let mut bases = Vec::with_capacity(targets.len());
    let mut placed = vec![false; targets.len()];
    for lid in sws.into_iter().flat_map(|(_, _, ends)| ends) {
        if let Some(p) = placed.get_mut(lid as usize).filter(|p| !**p) {
            *p = true;
            bases.push(lid);
        }
    }
    let mut rest: Vec<(u64, u16)> = (0..targets.len())
        .filter(|&lid| !placed[lid] && targets[lid].switch != NONE && targets[lid].first)
        .map(|lid| {
            let guid = f.lid_owner(lid as u16).map_or(0, |s| f.port_guid(s));
            (guid.swap_bytes(), lid as u16)
        })
        .collect();
    rest.sort_unstable();
    bases.extend(rest.into_iter().map(|(_, lid)| lid));
    // With LMC, every port's first LID, then every port's second, and so
    // on (`ucast_mgr_process_tbl`): a port's later LIDs are placed knowing
    // where its earlier ones went on each switch.
    let mut order = Vec::with_capacity(f.end_lids().len() + f.switches().len());
    for k in 0..1u16 << f.max_lmc() {
        for &b in &bases {
            let count = f.lid_owner(b).map_or(1, |s| 1u16 << f.lmc(s));
            if k < count {
                order.push(b + k);
            }
        }
    }
    order
}

impl RoutingEngine for MinHop {
    fn split(&self, _opts: &EngineOptions) -> super::Split {
        super::Split::SourceSwitches
    }
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Minhop
    }
    fn description(&self) -> &'static str {
        "shortest paths, balanced by port load (OpenSM minhop); not deadlock free on rings, tori, Dragonflies"
    }
    fn routes_lmc(&self) -> bool {
        true
    }
    fn claims_deadlock_free(&self) -> bool {
        false
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        let g = SwitchGraph::new(f);
        let hops = g.hop_matrix();
        Ok(Routing::lfts_only(minhop_lfts(f, &g, &hops, opts)))
    }
}

/// Fills LFTs from a hop matrix; shared with engines that start from MinHop.
pub(crate) fn minhop_lfts(f: &Fabric, g: &SwitchGraph, hops: &[u8], opts: &EngineOptions) -> Lfts {
    balanced_lfts(f, g, opts, |si, j, out| {
        minhop_candidates(f, g, hops, si, j, out)
    })
}

/// Fills every switch's LFT from per-destination-switch candidate ports,
/// spreading end-port LIDs over the candidates by port load the way MinHop
/// does. `candidates(si, j, out)` appends, in ascending port order, the
/// ports of switch index `si` that lead toward switch index `j` (nothing
/// when `j` is unreachable; never called with `si == j`). Rows are filled in
/// parallel, so the candidates must depend on the switch pair alone.
pub(crate) fn balanced_lfts<C>(
    f: &Fabric,
    g: &SwitchGraph,
    opts: &EngineOptions,
    candidates: C,
) -> Lfts
where
    C: Fn(u32, u32, &mut Vec<u8>) + Sync,
{
    let n = g.len();
    let targets = lid_targets(f);
    let order = opensm_order(f, &targets);
    let mut lfts = Lfts::for_fabric(f);
    let done = AtomicU64::new(0);
    lfts.par_rows_mut().enumerate().for_each_init(
        || (Vec::<u8>::new(), Vec::<u32>::new(), Vec::<u32>::new()),
        |scratch, (si, row)| {
            fill_row(f, g, &targets, &order, si as u32, &candidates, scratch, row);
            let d = done.fetch_add(1, Ordering::Relaxed) + 1;
            if d.is_multiple_of(64) || d == n as u64 {
                opts.report(d, n as u64);
            }
        },
    );
    lfts
}

/// MinHop's LFT rows of switches `rows` (indices), concatenated: each row
/// depends on its own switch's counters only, so rows computed apart are
/// the rows [`MinHop`] computes in one pass, byte for byte.
pub fn minhop_rows(
    f: &Fabric,
    g: &SwitchGraph,
    hops: &[u8],
    rows: std::ops::Range<usize>,
) -> Vec<u8> {
    let n = g.len();
    let rows = rows.start.min(n)..rows.end.min(n);
    let width = f.max_lid() as usize + 1;
    let targets = lid_targets(f);
    let order = opensm_order(f, &targets);
    let mut out = vec![NO_PATH; rows.len() * width];
    let candidates = |si: u32, j: u32, out: &mut Vec<u8>| minhop_candidates(f, g, hops, si, j, out);
    out.par_chunks_mut(width.max(1)).enumerate().for_each_init(
        || (Vec::<u8>::new(), Vec::<u32>::new(), Vec::<u32>::new()),
        |scratch, (i, row)| {
            fill_row(
                f,
                g,
                &targets,
                &order,
                (rows.start + i) as u32,
                &candidates,
                scratch,
                row,
            );
        },
    );
    out
}

/// Switch `si`'s ports on a shortest path toward switch `j`, ascending.
fn minhop_candidates(f: &Fabric, g: &SwitchGraph, hops: &[u8], si: u32, j: u32, out: &mut Vec<u8>) {
    let n = g.len();
    let h = hops[si as usize * n + j as usize];
    if h != UNREACHABLE && h > 0 {
        for &(nb, slot) in g.neighbours(si) {
            if hops[nb as usize * n + j as usize] == h - 1 {
                out.push(f.port_of(slot));
            }
        }
    }
}

/// One switch's row: every LID in `order`, end ports spread over the
/// candidates by this switch's own port counters.
#[allow(clippy::too_many_arguments)]
fn fill_row<C>(
    f: &Fabric,
    g: &SwitchGraph,
    targets: &[LidTarget],
    order: &[u16],
    si: u32,
    candidates: &C,
    (cand, cand_off, load): &mut (Vec<u8>, Vec<u32>, Vec<u32>),
    row: &mut [u8],
) where
    C: Fn(u32, u32, &mut Vec<u8>),
{
    let n = g.len();
    let sw = f.switches()[si as usize];
    // Candidate ports per destination switch, computed once and shared by
    // every LID on that switch.
    cand.clear();
    cand_off.clear();
    cand_off.push(0);
    for j in 0..n as u32 {
        if j != si {
            candidates(si, j, cand);
        }
        cand_off.push(cand.len() as u32);
    }
    load.clear();
    load.resize(f.num_ports(sw) as usize + 1, 0);
    // With LMC, the node behind each port: a LID avoids the nodes its
    // port's earlier LIDs were sent to.
    let behind: Vec<u32> = if f.max_lmc() > 0 {
        (0..=f.num_ports(sw))
            .map(|p| match f.remote(f.slot(sw, p)) {
                NONE => NONE,
                r => f.node_of(r),
            })
            .collect()
    } else {
        Vec::new()
    };
    for &lid in order {
        let lid = lid as usize;
        let t = &targets[lid];
        if t.switch == NONE {
            continue;
        }
        let port = if t.switch == si {
            t.port
        } else {
            let c = &cand
                [cand_off[t.switch as usize] as usize..cand_off[t.switch as usize + 1] as usize];
            if behind.is_empty() {
                least_loaded(c, load)
            } else {
                let base = f
                    .lid_owner(lid as u16)
                    .map_or(lid, |s| f.lid_of_slot(s) as usize);
                spread(c, load, &behind, &row[base..lid])
            }
        };
        row[lid] = port;
        if t.end_port && port != NO_PATH {
            load[port as usize] += 1;
        }
    }
}

/// OpenSM's choice for a LID when the subnet has LMC
/// (`osm_switch_recommend_path` with `routing_for_lmc`): among the
/// candidates, taken from the port after the one the LID before went to,
/// the least loaded one toward a node none of the port's earlier LIDs
/// (`earlier`, their entries on this switch) was sent to; when every
/// candidate leads to such a node, the least loaded, ties to the node
/// those LIDs went to least. OpenSM tells systems from nodes; a node is
/// its own system here, so the two preferences are one.
fn spread(cand: &[u8], load: &[u32], behind: &[u32], earlier: &[u8]) -> u8 {
    let node = |p: u8| behind.get(p as usize).copied().unwrap_or(NONE);
    let sent = |p: u8| {
        earlier
            .iter()
            .filter(|&&q| q != NO_PATH && node(q) == node(p))
            .count()
    };
    let start = earlier.last().map_or(1, |&q| q as usize + 1) % behind.len().max(1);
    let rotated = cand
        .iter()
        .filter(|&&p| p as usize >= start)
        .chain(cand.iter().filter(|&&p| (p as usize) < start))
        .copied();
    let (mut best, mut least, mut least_sent) = (NO_PATH, u32::MAX, usize::MAX);
    let (mut other, mut least_other) = (NO_PATH, u32::MAX);
    for p in rotated {
        let n = load[p as usize];
        let k = sent(p);
        if k == 0 && n < least_other {
            other = p;
            least_other = n;
            least_sent = 0;
        }
        if n < least {
            best = p;
            least = n;
            if k > 0 && k < least_sent {
                least_sent = k;
            }
        } else if k > 0 && n == least && k < least_sent {
            least_sent = k;
            best = p;
        }
    }
    if other != NO_PATH { other } else { best }
}

/// The candidate with the fewest end-port destinations so far; candidates
/// come in ascending port order, so ties go to the lowest port.
#[inline]
pub(crate) fn least_loaded(cand: &[u8], load: &[u32]) -> u8 {
    cand.iter()
        .copied()
        .min_by_key(|&p| load[p as usize])
        .unwrap_or(NO_PATH)
}
