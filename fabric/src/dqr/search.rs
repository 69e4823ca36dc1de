//! The path search of one broken flow: A* over (channel, VL) states
//! whose every dependency goes up the channel list or can be made to, then
//! the commit of the path found into the list and the LFTs.

use super::channel_list::{ChannelList, Vertex};
use super::{Reach, Turns};
use crate::model::{Fabric, NONE, Slot};
use crate::tables::Routing;

/// The entries a reroute reads while the new tables are copied beside it:
/// those in force, and the ones this destination's paths set. A switch
/// whose route toward the destination still arrives keeps the entry in
/// force, and only the destination being rerouted gets entries, so the
/// two together are the new tables' column.
pub(crate) struct Entries<'a> {
    pub old: &'a Routing,
    /// Per switch index: the entry set toward the destination being
    /// rerouted, meaningful where the switch's state is `Assigned`.
    pub assigned: Vec<u8>,
}

impl Entries<'_> {
    #[inline]
    pub(crate) fn get(&self, si: u32, dlid: u16, state: &[Reach]) -> u8 {
        if state[si as usize] == Reach::Assigned {
            self.assigned[si as usize]
        } else {
            self.old.lfts.get(si, dlid)
        }
    }
    /// The VL of a hop by the SL-to-VL tables in force (a reroute keeps
    /// them).
    #[inline]
    pub(crate) fn vl(&self, si: u32, inp: u8, out: u8, sl: u8) -> u8 {
        self.old.switch_vl(si, inp, out, sl)
    }
}
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Cost of a hop, and of a turn that goes down the list: a path may take
/// one more hop to avoid reordering the list.
const HOP: u32 = 2;
const TURN: u32 = 3;
/// Searches of one flow in [`Turns::All`] mode, each without the turns
/// that failed before.
const RETRIES: usize = 8;

pub(crate) struct Flow {
    pub src: Slot,
    pub dst: Slot,
    pub dlid: u16,
    pub sl: u8,
    /// The SL the source holds now: until it asks again, its packets take
    /// the new path with this SL, so that walk must fit the list too.
    pub cached_sl: u8,
    pub max_vl: u8,
}

pub(crate) struct Searcher {
    vls: usize,
    is_s2s: Vec<bool>,
    dist: Vec<u32>,
    parent: Vec<u32>,
    stamp: Vec<u32>,
    tag: u32,
    heap: BinaryHeap<Reverse<(u32, u32)>>,
    forbidden: Vec<(Vertex, Vertex)>,
    /// Every (switch index, LID, port) entry a committed path set, once
    /// each (a switch given an entry is fixed from then on).
    pub(crate) set: Vec<(u32, u16, u8)>,
    graph: crate::graph::SwitchGraph,
    /// Hops from every switch to `to_sw` on the fabric after the fault:
    /// the search's lower bound of the cost still to go (A*), which keeps
    /// it from spreading away from the destination.
    to_dst: Vec<u8>,
    to_sw: u32,
    queue: Vec<u32>,
}

impl Searcher {
    pub(crate) fn new(f: &Fabric, vls: usize) -> Self {
        let n = f.num_slots() * vls;
        Self {
            vls,
            is_s2s: crate::verify::switch_link_flags(f),
            dist: vec![u32::MAX; n],
            parent: vec![u32::MAX; n],
            stamp: vec![0; n],
            tag: 0,
            heap: BinaryHeap::new(),
            forbidden: Vec::new(),
            set: Vec::new(),
            graph: crate::graph::SwitchGraph::new(f),
            to_dst: vec![crate::graph::UNREACHABLE; f.switches().len()],
            to_sw: NONE,
            queue: Vec::new(),
        }
    }

    /// Finds and commits a path for `flow`; false when none fits.
    pub(crate) fn route_flow(
        &mut self,
        f: &Fabric,
        r: &mut Entries,
        list: &mut ChannelList,
        flow: &Flow,
        state: &mut [Reach],
        turns: Turns,
    ) -> bool {
        self.forbidden.clear();
        let tries = if turns == Turns::All { RETRIES } else { 1 };
        for _ in 0..tries {
            let Some(path) = self.search(f, r, list, flow, state, turns) else {
                return false;
            };
            match commit(f, r, list, flow, state, &path, &self.is_s2s) {
                Ok(assigned) => {
                    self.set
                        .extend(assigned.into_iter().map(|(si, p)| (si, flow.dlid, p)));
                    return true;
                }
                Err(turn) => self.forbidden.push(turn),
            }
        }
        false
    }

    fn search(
        &mut self,
        f: &Fabric,
        r: &Entries,
        list: &mut ChannelList,
        flow: &Flow,
        state: &[Reach],
        turns: Turns,
    ) -> Option<Vec<(Slot, u8)>> {
        let vls = self.vls as u32;
        if self.tag == u32::MAX {
            self.stamp.fill(0);
            self.tag = 0;
        }
        self.tag += 1;
        let tag = self.tag;
        self.heap.clear();
        let dsw = f
            .switch_index(f.node_of(f.remote(flow.dst)))
            .unwrap_or(NONE);
        if dsw != NONE && dsw != self.to_sw {
            self.graph.bfs_into(dsw, &mut self.to_dst, &mut self.queue);
            self.to_sw = dsw;
        }
        // Lower bound of what a state still costs: a hop per switch still to
        // cross, and the last link. None: the destination is out of reach.
        let to_dst = &self.to_dst;
        let bound = |c: Slot| -> Option<u32> {
            let rem = f.remote(c);
            if rem == flow.dst || dsw == NONE {
                return Some(0);
            }
            if rem == NONE {
                return None;
            }
            let si = f.switch_index(f.node_of(rem))?;
            let h = to_dst[si as usize];
            (h != crate::graph::UNREACHABLE).then(|| HOP * (h as u32 + 1))
        };
        let start = flow.src * vls;
        self.stamp[start as usize] = tag;
        self.dist[start as usize] = 0;
        self.parent[start as usize] = u32::MAX;
        self.heap
            .push(Reverse((bound(flow.src).unwrap_or(0), start)));
        while let Some(Reverse((key, s))) = self.heap.pop() {
            let cost = self.dist[s as usize];
            if bound(s / vls).is_none_or(|h| cost + h != key) {
                // Superseded by a cheaper way to the same state.
                continue;
            }
            let (c, vc) = (s / vls, (s % vls) as u8);
            let rem = f.remote(c);
            if rem == flow.dst {
                return Some(self.path(s));
            }
            if rem == NONE {
                continue;
            }
            let node = f.node_of(rem);
            let Some(si) = f.switch_index(node) else {
                continue;
            };
            if self.revisits(f, s, node) {
                continue;
            }
            let inp = f.port_of(rem);
            let fixed = state[si as usize].fixed();
            let outs = if fixed {
                let e = r.get(si, flow.dlid, state);
                e..=e
            } else {
                1..=f.num_ports(node)
            };
            for out in outs {
                let Some(o) = f.linked_port(node, out) else {
                    continue;
                };
                let next = f.remote(o);
                if next != flow.dst && f.switch_index(f.node_of(next)).is_none() {
                    continue;
                }
                let vo = r.vl(si, inp, out, flow.sl);
                if vo > flow.max_vl {
                    continue;
                }
                let mut step = HOP;
                if self.is_s2s[c as usize] && self.is_s2s[o as usize] {
                    let (a, b) = (list.vertex(c, vc), list.vertex(o, vo));
                    if !(list.goes_up(a, b) || list.has_edge(a, b)) {
                        if turns == Turns::None
                            || self.forbidden.contains(&(a, b))
                            || !list.admits(a, b)
                        {
                            continue;
                        }
                        step += TURN;
                    }
                }
                let ns = o * vls + vo as u32;
                let nc = cost + step;
                let Some(h) = bound(o) else { continue };
                if self.stamp[ns as usize] != tag || nc < self.dist[ns as usize] {
                    self.stamp[ns as usize] = tag;
                    self.dist[ns as usize] = nc;
                    self.parent[ns as usize] = s;
                    self.heap.push(Reverse((nc + h, ns)));
                }
            }
        }
        None
    }

    /// Whether the path to state `s` entered `node` before `s` did: an
    /// LFT holds one entry per destination, so a route passes a switch
    /// once.
    fn revisits(&self, f: &Fabric, s: u32, node: u32) -> bool {
        let vls = self.vls as u32;
        let mut p = self.parent[s as usize];
        while p != u32::MAX {
            let rem = f.remote(p / vls);
            if rem != NONE && f.node_of(rem) == node {
                return true;
            }
            p = self.parent[p as usize];
        }
        false
    }

    fn path(&self, end: u32) -> Vec<(Slot, u8)> {
        let vls = self.vls as u32;
        let mut out = Vec::new();
        let mut s = end;
        while s != u32::MAX {
            out.push((s / vls, (s % vls) as u8));
            s = self.parent[s as usize];
        }
        out.reverse();
        out
    }
}

/// Adds the path's dependencies to the list (all or none), then gives its
/// free switches their entries; returns those switches, or the dependency
/// that did not fit.
fn commit(
    f: &Fabric,
    r: &mut Entries,
    list: &mut ChannelList,
    flow: &Flow,
    state: &mut [Reach],
    path: &[(Slot, u8)],
    is_s2s: &[bool],
) -> Result<Vec<(u32, u8)>, (Vertex, Vertex)> {
    let s2s = |s: Slot| is_s2s[s as usize];
    // The path's own dependencies, then (when the SL changes) those of the
    // same path under the SL the source still holds.
    let mut deps: Vec<(Slot, u8, Slot, u8)> = path
        .windows(2)
        .map(|w| (w[0].0, w[0].1, w[1].0, w[1].1))
        .collect();
    if flow.cached_sl != flow.sl {
        let mut prev: Option<(Slot, u8)> = None;
        for &(o, _) in &path[1..] {
            let node = f.node_of(o);
            let (Some(si), Some((c, vc))) = (f.switch_index(node), prev.or(Some((path[0].0, 0))))
            else {
                continue;
            };
            let inp = f.port_of(f.remote(c));
            let vo = r.vl(si, inp, f.port_of(o), flow.cached_sl);
            if vo > flow.max_vl {
                // The old SL would leave the VLs the routing uses.
                let v = list.vertex(o, 0);
                return Err((v, v));
            }
            deps.push((c, vc, o, vo));
            prev = Some((o, vo));
        }
    }
    list.add_all(
        deps.into_iter()
            .filter(|&(c, _, o, _)| s2s(c) && s2s(o))
            .map(|(c, vc, o, vo)| (list.vertex(c, vc), list.vertex(o, vo)))
            .collect::<Vec<_>>(),
    )?;
    let mut assigned = Vec::new();
    for &(o, _) in &path[1..] {
        let node = f.node_of(o);
        let Some(si) = f.switch_index(node) else {
            continue;
        };
        if !state[si as usize].fixed() {
            r.assigned[si as usize] = f.port_of(o);
            state[si as usize] = Reach::Assigned;
            assigned.push((si, f.port_of(o)));
        }
    }
    Ok(assigned)
}
