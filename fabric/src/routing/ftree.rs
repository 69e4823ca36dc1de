//! Fat-tree routing (OpenSM `ftree`, Zahavi et al.).
//!
//! **Detection.** Leaf switches are the switches with end ports; levels are
//! hops from the nearest leaf ([`super::updn::tree_levels`]). The fabric is a
//! fat tree when every switch-to-switch link joins adjacent levels (so each
//! switch's ports split into down ports, up ports and end ports) and every
//! switch below the top links to the level above, which puts all leaves at
//! the same depth; and every two leaves share a switch above them. Anything
//! else is refused with the reason, e.g. on a torus "all 64 switches have
//! HCAs attached".
//!
//! **Order.** Destinations are the end ports in *ftree order*: leaf switches
//! by node GUID, and on each leaf the end ports by switch port number
//! ([`hca_order`]).
//!
//! **Routing, per destination in that order.** From the destination's leaf
//! the *main path* climbs to the top: at each switch it takes the up-link
//! group (the links to one upper switch) that carries the fewest main paths
//! so far, and in it the least used link; the upper switch's LFT entry comes
//! down that link. A leaf with fewer end ports than the fullest leaf routes
//! placeholder destinations for the difference, as OpenSM does, so that
//! partly populated leaves keep the same rotation. Every other switch
//! reaches the destination over a minimal up*/down* route (the same route
//! states as [`super::updn`], with the tops as roots); among the qualifying
//! ports it prefers those that merge into the main path: going down, the
//! main-path switch below; going up, a switch under the main-path switch of
//! the level where the route turns. Remaining ties go to the port with the
//! fewest end-port destinations, then the lowest port.
//!
//! On a full k-ary n-tree whose up-links are numbered in the order of the
//! upper switches (as the generators number them) the main paths rotate over
//! the up-links the way D-mod-K routing does, every other route merges into
//! its destination's main path where it turns, and shift permutations over
//! the ftree order use every switch-to-switch channel at most once (the
//! tests check all shifts of 2-ary 3-, 4-ary 3- and 3-ary 4-trees and a
//! sample on ft648). All routes are up*/down* with respect to the levels, so
//! one VL is deadlock free.
//!
//! **LMC.** Each LID of an end port is a destination of its own: every
//! leaf's base LIDs first, in the order above (they get the LMC 0 routes,
//! entry for entry), then each next offset, leaf by leaf, the leaf's ports
//! rotated by the offset, so a port's next LID climbs through another
//! up-link than its previous one. (OpenSM 3.3.23's ftree refuses LMC and
//! falls back to its default engine.)
//!
//! Switch LIDs are routed like Up*/Down* does (least-loaded legal port, not
//! counted toward the load); top switches have no legal route to each other
//! and keep empty entries, as in OpenSM without `connect_roots`.

use super::minhop::{least_loaded, lid_targets};
use super::updn::{
    DOWN, HOPS, Orientation, OrientationError, TreeError, fail, legal_ports, orient_from_roots,
    tree_levels, unreachable_pair,
};
use super::{EngineOptions, RoutingEngine};
use crate::error::{Error, Result};
use crate::graph::SwitchGraph;
use crate::model::{Fabric, NONE, NodeKind, Slot};
use crate::tables::{Lfts, NO_PATH, Routing};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct FTree;

impl RoutingEngine for FTree {
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Ftree
    }
    fn reports_primary_paths(&self) -> bool {
        true
    }
    fn description(&self) -> &'static str {
        "fat-tree routing (OpenSM ftree): non-blocking shift permutations on full fat trees, 1 VL; refuses other topologies"
    }
    fn claims_deadlock_free(&self) -> bool {
        true
    }
    fn routes_lmc(&self) -> bool {
        true
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        let g = SwitchGraph::new(f);
        let t = Tree::detect(f, &g).map_err(not_a_fat_tree)?;
        Ok(Routing::lfts_only(t.route(f, &g, opts)))
    }
}

/// Why the fabric is not a fat tree ftree can route.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NotAFatTree {
    #[error(transparent)]
    Levels(#[from] TreeError),
    #[error(transparent)]
    Orientation(#[from] OrientationError),
    #[error("leaf switches '{a}' and '{b}' have no common switch above them")]
    NoCommonSwitch { a: String, b: String },
}

fn not_a_fat_tree(reason: NotAFatTree) -> Error {
    fail("ftree", format!("not a fat tree: {reason}"))
}

/// The end ports in the order ftree routes them: leaf switches by node GUID,
/// then end ports by the leaf's port number. Fails like the engine when the
/// fabric is not a fat tree.
pub fn hca_order(f: &Fabric) -> Result<Vec<Slot>> {
    let g = SwitchGraph::new(f);
    let t = Tree::detect(f, &g).map_err(not_a_fat_tree)?;
    // With LMC a port is a destination per LID: its base LID's place.
    Ok(t.dests
        .iter()
        .zip(&t.dest_lid)
        .filter(|&(&s, &l)| f.lid_of_slot(s) == l)
        .map(|(&s, _)| s)
        .collect())
}

/// A legal next hop toward a leaf: the neighbour, the port to it, and the
/// level of the main-path switch that routes through it should merge with.
struct Candidate {
    nb: u32,
    port: u8,
    meet: usize,
}

/// A detected fat tree.
struct Tree {
    level: Vec<u32>,
    height: u32,
    plan: Orientation,
    /// Destinations in ftree order: the end port, its LID (with LMC, one
    /// destination per LID), and its leaf switch index.
    dests: Vec<Slot>,
    dest_lid: Vec<u16>,
    dest_leaf: Vec<u32>,
    /// The destinations' runs on one leaf, in order: the leaf's switch
    /// index and the run's length (every leaf once per LID offset).
    leaves: Vec<(u32, u32)>,
}

impl Tree {
    fn detect(f: &Fabric, g: &SwitchGraph) -> Result<Self, NotAFatTree> {
        let lv = tree_levels(f, g)?;
        let n = g.len();
        let tops: Vec<u32> = (0..n as u32)
            .filter(|&i| lv.level[i as usize] == lv.height)
            .collect();
        let plan = orient_from_roots(f, g, tops)?;
        let is_leaf: Vec<bool> = lv.level.iter().map(|&l| l == 0).collect();
        if let Some((a, b)) = unreachable_pair(&plan, &is_leaf, n) {
            return Err(NotAFatTree::NoCommonSwitch {
                a: f.desc(f.switches()[a as usize]).to_string(),
                b: f.desc(f.switches()[b as usize]).to_string(),
            });
        }
        let mut leaf_ids: Vec<u32> = (0..n as u32).filter(|&i| is_leaf[i as usize]).collect();
        leaf_ids.sort_by_key(|&i| f.guid(f.switches()[i as usize]));
        let mut dests = Vec::new();
        let mut dest_lid = Vec::new();
        let mut dest_leaf = Vec::new();
        let mut leaves = Vec::with_capacity(leaf_ids.len());
        let ports: Vec<Vec<Slot>> = leaf_ids
            .iter()
            .map(|&li| {
                let sw = f.switches()[li as usize];
                f.port_slots(sw)
                    .map(|s| f.remote(s))
                    .filter(|&r| r != NONE && f.kind(f.node_of(r)) != NodeKind::Switch)
                    .collect()
            })
            .collect();
        // With LMC, every leaf's base LIDs first, in the LMC 0 order (they
        // get the LMC 0 routes), then each next offset, leaf by leaf with
        // the leaf's ports rotated by the offset: a port's next LID climbs
        // through another up-link than its previous one.
        for o in 0..1usize << f.max_lmc() {
            for (&li, ports) in leaf_ids.iter().zip(&ports) {
                let before = dests.len();
                let c = ports.len();
                for t in 0..c {
                    let r = ports[(t + o) % c];
                    if o < 1 << f.lmc(r) {
                        dests.push(r);
                        dest_lid.push(f.lid_of_slot(r) + o as u16);
                        dest_leaf.push(li);
                    }
                }
                if o == 0 || dests.len() > before {
                    leaves.push((li, (dests.len() - before) as u32));
                }
            }
        }
        Ok(Self {
            level: lv.level,
            height: lv.height,
            plan,
            dests,
            dest_lid,
            dest_leaf,
            leaves,
        })
    }

    fn route(&self, f: &Fabric, g: &SwitchGraph, opts: &EngineOptions) -> Lfts {
        let n = g.len();
        let (paths, ports) = self.main_paths(f, g);
        let anc = self.ancestors(g);
        let words = n.div_ceil(64);
        let h1 = self.height as usize + 1;
        let targets = lid_targets(f);
        let dest_lids = &self.dest_lid;
        let mut is_dest_lid = vec![false; targets.len()];
        for &l in dest_lids {
            is_dest_lid[l as usize] = true;
        }
        let mut lfts = Lfts::for_fabric(f);
        let done = AtomicU64::new(0);
        let has_anc =
            |nb: u32, x: u32| anc[nb as usize * words + x as usize / 64] >> (x % 64) & 1 == 1;
        lfts.par_rows_mut().enumerate().for_each_init(
            || (Vec::<Candidate>::new(), Vec::<u8>::new(), Vec::<u32>::new()),
            |(cand, pick, load), (a, row)| {
                let a = a as u32;
                let la = self.level[a as usize] as usize;
                load.clear();
                load.resize(f.num_ports(f.switches()[a as usize]) as usize + 1, 0);
                let mut cand_leaf = NONE;
                for (i, &lid) in dest_lids.iter().enumerate() {
                    let path = &paths[i * h1..(i + 1) * h1];
                    let port = if path[la] == a {
                        ports[i * h1 + la]
                    } else {
                        // Destinations come leaf by leaf, and the legal ports
                        // depend on the leaf alone.
                        let leaf = self.dest_leaf[i];
                        if leaf != cand_leaf {
                            cand_leaf = leaf;
                            cand.clear();
                            let down = self.plan.state(n, a, leaf) & DOWN != 0;
                            legal_ports(f, g, &self.plan, a, leaf, |nb, port| {
                                let ln = self.level[nb as usize] as usize;
                                // The main-path switch a route through `nb`
                                // should meet: the one below when descending,
                                // the one where the route turns when climbing.
                                let meet = if down {
                                    ln
                                } else {
                                    ((self.plan.state(n, nb, leaf) & HOPS) as usize + ln) / 2
                                };
                                cand.push(Candidate { nb, port, meet });
                            });
                        }
                        let (mut any, mut merge) = ((u32::MAX, NO_PATH), (u32::MAX, NO_PATH));
                        for c in cand.iter() {
                            let l = load[c.port as usize];
                            if l < any.0 {
                                any = (l, c.port);
                            }
                            if l < merge.0 && has_anc(c.nb, path[c.meet]) {
                                merge = (l, c.port);
                            }
                        }
                        if merge.1 != NO_PATH { merge.1 } else { any.1 }
                    };
                    row[lid as usize] = port;
                    if port != NO_PATH {
                        load[port as usize] += 1;
                    }
                }
                // Switch LIDs carry management traffic only: they follow the
                // least-loaded legal port and do not add to the load.
                for (lid, t) in targets.iter().enumerate() {
                    if t.switch == NONE || is_dest_lid[lid] {
                        continue;
                    }
                    row[lid] = if t.switch == a {
                        t.port
                    } else {
                        pick.clear();
                        legal_ports(f, g, &self.plan, a, t.switch, |_, p| pick.push(p));
                        least_loaded(pick, load)
                    };
                }
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if d.is_multiple_of(64) || d == n as u64 {
                    opts.report(d, n as u64);
                }
            },
        );
        lfts
    }

    /// Main paths of all destinations in ftree order: per destination
    /// `height + 1` switch indices (leaf first) and, per level, the port of
    /// that switch toward the destination (the end port's port on the leaf,
    /// the down-link taken on the others).
    fn main_paths(&self, f: &Fabric, g: &SwitchGraph) -> (Vec<u32>, Vec<u8>) {
        let n = g.len();
        let h1 = self.height as usize + 1;
        // Up-link groups per switch: the links to one upper switch, in the
        // order of their first port.
        let mut grp_off = vec![0u32; n + 1];
        let mut grp_remote = Vec::new();
        let mut grp_slots_off = vec![0u32];
        let mut grp_slots: Vec<Slot> = Vec::new();
        for a in 0..n as u32 {
            let up = self.level[a as usize] + 1;
            let first = grp_remote.len();
            for &(nb, slot) in g.neighbours(a) {
                if self.level[nb as usize] != up {
                    continue;
                }
                match grp_remote[first..].iter().position(|&r| r == nb) {
                    Some(k) => {
                        // Parallel links arrive in port order, so the group's
                        // slots stay sorted when spliced in at its end.
                        let gi = first + k;
                        let at = grp_slots_off[gi + 1] as usize;
                        grp_slots.insert(at, slot);
                        for o in &mut grp_slots_off[gi + 1..] {
                            *o += 1;
                        }
                    }
                    None => {
                        grp_remote.push(nb);
                        grp_slots.push(slot);
                        grp_slots_off.push(grp_slots.len() as u32);
                    }
                }
            }
            grp_off[a as usize + 1] = grp_remote.len() as u32;
        }
        let mut grp_load = vec![0u32; grp_remote.len()];
        let mut link_load = vec![0u32; f.num_slots()];
        let mut climb = |leaf: u32, out: Option<(&mut [u32], &mut [u8])>| {
            let mut cur = leaf;
            let mut out = out;
            for lvl in 1..h1 {
                let gs = grp_off[cur as usize] as usize..grp_off[cur as usize + 1] as usize;
                let Some(gi) = gs.min_by_key(|&gi| grp_load[gi]) else {
                    break;
                };
                let links = &grp_slots[grp_slots_off[gi] as usize..grp_slots_off[gi + 1] as usize];
                let Some(&slot) = links.iter().min_by_key(|&&s| link_load[s as usize]) else {
                    break;
                };
                grp_load[gi] += 1;
                link_load[slot as usize] += 1;
                cur = grp_remote[gi];
                if let Some((p, q)) = out.as_mut() {
                    p[lvl] = cur;
                    q[lvl] = f.port_of(f.remote(slot));
                }
            }
        };
        let mut paths = vec![NONE; self.dests.len() * h1];
        let mut ports = vec![NO_PATH; self.dests.len() * h1];
        let fullest = self.leaves.iter().map(|l| l.1).max().unwrap_or(0);
        let mut i = 0;
        for &(leaf, count) in &self.leaves {
            for _ in 0..count {
                let p = &mut paths[i * h1..(i + 1) * h1];
                let q = &mut ports[i * h1..(i + 1) * h1];
                p[0] = leaf;
                q[0] = f.port_of(f.remote(self.dests[i]));
                climb(leaf, Some((p, q)));
                i += 1;
            }
            for _ in count..fullest {
                climb(leaf, None);
            }
        }
        (paths, ports)
    }

    /// Per switch index, a bitset of the switches reachable from it by up
    /// links only, itself included.
    fn ancestors(&self, g: &SwitchGraph) -> Vec<u64> {
        let n = g.len();
        let words = n.div_ceil(64);
        let mut anc = vec![0u64; n * words];
        let mut by_level: Vec<u32> = (0..n as u32).collect();
        by_level.sort_by_key(|&i| std::cmp::Reverse(self.level[i as usize]));
        for &a in &by_level {
            let a = a as usize;
            anc[a * words + a / 64] |= 1 << (a % 64);
            for &(nb, _) in g.neighbours(a as u32) {
                let nb = nb as usize;
                if self.level[nb] == self.level[a] + 1 {
                    // Upper levels are complete before any lower switch.
                    let (lo, hi) = if nb < a {
                        let (x, y) = anc.split_at_mut(a * words);
                        (&mut y[..words], &x[nb * words..(nb + 1) * words])
                    } else {
                        let (x, y) = anc.split_at_mut(nb * words);
                        (&mut x[a * words..(a + 1) * words], &y[..words])
                    };
                    for (d, s) in lo.iter_mut().zip(hi) {
                        *d |= *s;
                    }
                }
            }
        }
        anc
    }
}
