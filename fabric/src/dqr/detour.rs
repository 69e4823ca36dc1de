//! Local detours around a failed link, enabled in the channel list before
//! the broken flows are searched (the DQR paper's "local reroute" and its
//! mesh plug-in).
//!
//! For a failed channel `u -> v` the detour is a short path from `u` to
//! `v` on the fabric after the fault. Its dependencies are added to the
//! list together (all or none): the channels that fed `u -> v` into the
//! detour's first hop, the detour's own turns, and its last hop into the
//! channels `u -> v` fed. The flows that crossed the link then have a
//! path whose every turn is in the list already (their old route to `u`,
//! the detour, their old route from `v`), so the search finds them a
//! legal path without enabling turns of its own.
//!
//! Which detour: [`Detours::Local`] tries the shortest paths around the
//! link first (one per neighbour of `u`). [`Detours::Mesh`] is the mesh
//! plug-in of the paper, after Lysne, Skeie and Waadeland's one-fault
//! tolerance for XY routing: first the detours of two and three hops
//! (around the square on either side of the link in a mesh), the one whose
//! switches lie nearest the centre of the fabric first (smallest
//! eccentricity); then the local ones. On an XY-routed mesh the square
//! toward the centre always fits, so one link fault is always tolerated
//! (measured: every link of meshes 5x5 to 20x20, `fabric/tests/dqr.rs`).
//!
//! Every VL the failed channel carried gets its own detour on that VL: a
//! layered routing (LASH, Nue, DF-SSSP: one VL per SL throughout) is
//! served exactly; a routing whose VL changes along the path (DF-DN) gets
//! same-VL detours its flows may not take, and leans on the search.

use super::channel_list::{ChannelList, Vertex};
use crate::model::{Fabric, NONE, NodeId, NodeKind, Slot};
use std::collections::{HashMap, VecDeque};

/// Which local detours are enabled before the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Detours {
    /// None: every broken flow is searched end to end.
    #[default]
    None,
    /// The shortest paths around the failed link.
    Local,
    /// The mesh plug-in: the square toward the centre first, then as
    /// `Local`.
    Mesh,
}

impl Detours {
    /// The detours for tables `engine` computed when none are asked for:
    /// the mesh plug-in for dimension order (the routing it is defined
    /// on) and for E-cube's layers (the torus plug-in: each layer is a
    /// mesh routed in dimension order), none otherwise.
    pub fn default_for(engine: crate::routing::EngineKind) -> Self {
        if matches!(
            engine,
            crate::routing::EngineKind::Dor | crate::routing::EngineKind::Ecube
        ) {
            Detours::Mesh
        } else {
            Detours::None
        }
    }
}

/// Local detours tried per failed channel and VL.
const CANDIDATES: usize = 8;
/// Squares looked at per failed link (a mesh has two to eight; a fat
/// tree's leaf-to-spine link thousands, all alike).
const SQUARES: usize = 32;
/// Hops a local detour may take (a detour is short, and the search past
/// that depth would cover the whole fabric for every failed link).
const MAX_DETOUR: u32 = 6;

/// What [`enable`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Enabled {
    /// (Failed channel, VL) pairs given a detour.
    pub detours: u64,
    /// Those for which no candidate fitted the list.
    pub refused: u64,
    /// Dependencies the detours added.
    pub dependencies: u64,
}

/// Enables detours (`kind`) around every switch-to-switch link that is up
/// in `before` and down in `after`, in `list` (the channel list of the
/// routing in force on `before`, with the dependencies of the failed
/// channels still in it: call before the reroute withdraws them).
pub fn enable(before: &Fabric, after: &Fabric, list: &mut ChannelList, kind: Detours) -> Enabled {
    let mut out = Enabled::default();
    if kind == Detours::None || !list.fits(after.num_slots()) {
        return out;
    }
    let mut centrality = Centrality::default();
    for (a, u, v) in failed_links(before, after) {
        let mut cands: Option<Vec<Vec<Slot>>> = None;
        for vl in 0..list.vls() as u8 {
            let va = list.vertex(a, vl);
            let (preds, succs) = (list.preds(va).to_vec(), list.succs(va).to_vec());
            if preds.is_empty() && succs.is_empty() {
                continue;
            }
            let cands =
                cands.get_or_insert_with(|| candidates(before, after, u, v, kind, &mut centrality));
            match cands
                .iter()
                .find_map(|path| try_detour(after, list, path, vl, &preds, &succs))
            {
                Some(n) => {
                    out.dependencies += n;
                    out.detours += 1;
                }
                None => out.refused += 1,
            }
        }
    }
    out
}

/// The switch-to-switch links up in `before` and down in `after`, as (the
/// out-slot on `u`, `u`, `v`), where both switches still have a link: a
/// switch that failed whole has no way around it to detour to.
fn failed_links(before: &Fabric, after: &Fabric) -> Vec<(Slot, NodeId, NodeId)> {
    let alive = |n: NodeId| after.port_slots(n).any(|s| after.remote(s) != NONE);
    let mut out = Vec::new();
    for &u in before.switches() {
        for a in before.port_slots(u) {
            let b = before.remote(a);
            if b == NONE || after.remote(a) != NONE {
                continue;
            }
            let v = before.node_of(b);
            if before.kind(v) == NodeKind::Switch && alive(u) && alive(v) {
                out.push((a, u, v));
            }
        }
    }
    out
}

/// Eccentricities on `before`'s switch graph, per switch index, found as
/// the mesh plug-in's candidates need them.
#[derive(Default)]
struct Centrality {
    ecc: HashMap<u32, u32>,
    bfs: Option<(crate::graph::SwitchGraph, Vec<u8>, Vec<u32>)>,
}

impl Centrality {
    fn ecc(&mut self, before: &Fabric, si: u32) -> u32 {
        let bfs = &mut self.bfs;
        *self.ecc.entry(si).or_insert_with(|| {
            let (g, dist, queue) = bfs.get_or_insert_with(|| {
                let g = crate::graph::SwitchGraph::new(before);
                let n = g.len();
                (g, vec![0; n], Vec::new())
            });
            g.bfs_into(si, dist, queue);
            dist.iter()
                .filter(|&&d| d != crate::graph::UNREACHABLE)
                .map(|&d| u32::from(d))
                .max()
                .unwrap_or(0)
        })
    }
}

/// The detours around the link `u` -> `v`, in the order they are tried:
/// for the mesh plug-in the squares, toward the fabric's centre first
/// (least summed eccentricity of the switches they pass, then the
/// shortest); then the shortest ways around not listed yet.
fn candidates(
    before: &Fabric,
    after: &Fabric,
    u: NodeId,
    v: NodeId,
    kind: Detours,
    centrality: &mut Centrality,
) -> Vec<Vec<Slot>> {
    let mut c = Vec::new();
    if kind == Detours::Mesh {
        c = squares(after, u, v);
        c.sort_by_cached_key(|p| {
            let inner: u32 = p[1..]
                .iter()
                .filter_map(|&s| before.switch_index(after.node_of(s)))
                .map(|si| centrality.ecc(before, si))
                .sum();
            (inner, p.len())
        });
    }
    for p in shortest_around(after, u, v) {
        if !c.contains(&p) {
            c.push(p);
        }
    }
    c
}

/// Adds the detour `path` (out-slots from `u` to `v`) on VL `vl` with its
/// entry and exit turns, all or none; returns the dependencies added.
fn try_detour(
    f: &Fabric,
    list: &mut ChannelList,
    path: &[Slot],
    vl: u8,
    preds: &[Vertex],
    succs: &[Vertex],
) -> Option<u64> {
    let vls = list.vls() as u32;
    let slot = |v: Vertex| v / vls;
    // Switches the detour passes after `u`: a route crosses a switch once,
    // so a feeder from one of them, or a continuation into one, never
    // follows the detour.
    let on_path: Vec<NodeId> = path.iter().map(|&s| f.node_of(f.remote(s))).collect();
    let first = list.vertex(path[0], vl);
    let last = list.vertex(path[path.len() - 1], vl);
    let mut deps: Vec<(Vertex, Vertex)> = Vec::new();
    for &p in preds {
        let s = slot(p);
        if f.remote(s) != NONE && !on_path.contains(&f.node_of(s)) {
            deps.push((p, first));
        }
    }
    for w in path.windows(2) {
        deps.push((list.vertex(w[0], vl), list.vertex(w[1], vl)));
    }
    for &q in succs {
        let r = f.remote(slot(q));
        if r != NONE
            && !on_path[..on_path.len() - 1].contains(&f.node_of(r))
            && f.node_of(r) != f.node_of(path[0])
        {
            deps.push((last, q));
        }
    }
    list.add_all(deps).ok()
}

/// The neighbouring switch across `s`, if the link is up and leads to one.
fn switch_across(f: &Fabric, s: Slot) -> Option<NodeId> {
    let r = f.remote(s);
    (r != NONE && f.kind(f.node_of(r)) == NodeKind::Switch).then(|| f.node_of(r))
}

/// Paths of one to three hops from `u` to `v` on `f` (a parallel link, a
/// common neighbour, a square), each passing a switch once.
fn squares(f: &Fabric, u: NodeId, v: NodeId) -> Vec<Vec<Slot>> {
    let mut out = Vec::new();
    for o1 in f.port_slots(u) {
        let Some(u1) = switch_across(f, o1) else {
            continue;
        };
        if u1 == v {
            out.push(vec![o1]);
            continue;
        }
        if u1 == u {
            continue;
        }
        for o2 in f.port_slots(u1) {
            let Some(v1) = switch_across(f, o2) else {
                continue;
            };
            if v1 == v {
                out.push(vec![o1, o2]);
                continue;
            }
            if v1 == u || v1 == u1 {
                continue;
            }
            for o3 in f.port_slots(v1) {
                if switch_across(f, o3) == Some(v) {
                    out.push(vec![o1, o2, o3]);
                }
            }
            if out.len() >= SQUARES {
                return out;
            }
        }
    }
    out
}

/// Up to [`CANDIDATES`] shortest paths from `u` to `v` on `f` of at most
/// [`MAX_DETOUR`] hops: per first hop out of `u`, a shortest way from
/// there to `v` that avoids `u`; shortest first, then by port.
fn shortest_around(f: &Fabric, u: NodeId, v: NodeId) -> Vec<Vec<Slot>> {
    // Hops to `v` and the next slot on a shortest way, avoiding `u`,
    // within the depth a detour may take.
    let mut dist = vec![u32::MAX; f.num_nodes()];
    let mut next = vec![NONE; f.num_nodes()];
    dist[v as usize] = 0;
    let mut queue = VecDeque::from([v]);
    while let Some(x) = queue.pop_front() {
        let d = dist[x as usize];
        if d + 1 >= MAX_DETOUR {
            continue;
        }
        for s in f.port_slots(x) {
            let Some(y) = switch_across(f, s) else {
                continue;
            };
            if y == u || dist[y as usize] != u32::MAX {
                continue;
            }
            // y reaches x by the link's other end.
            dist[y as usize] = d + 1;
            next[y as usize] = f.remote(s);
            queue.push_back(y);
        }
    }
    let mut out: Vec<Vec<Slot>> = Vec::new();
    for o1 in f.port_slots(u) {
        let Some(y) = switch_across(f, o1) else {
            continue;
        };
        let d = dist[y as usize];
        if d == u32::MAX {
            continue;
        }
        let mut path = vec![o1];
        let mut x = y;
        for _ in 0..d {
            let hop = next[x as usize];
            path.push(hop);
            x = f.node_of(f.remote(hop));
        }
        out.push(path);
    }
    out.sort_by_key(Vec::len);
    out.dedup();
    out.truncate(CANDIDATES);
    out
}
