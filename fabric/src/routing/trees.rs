//! BFS-tree routes: the routes OpenSM's LASH lays into its layers
//! (`osm_ucast_lash.c`, `shortest_path` and `generate_routing_func_for_mst`).
//!
//! Every switch r grows a BFS tree over the switch graph (neighbours in port
//! order, the first link to a switch being the tree edge). Switch u routes
//! toward switch x through its child on the way to x in the tree of the
//! lowest-numbered root r in which u is an ancestor of x. In the tree of r
//! the way down from u to x has depth(x) - depth(u) hops, at most the hop
//! count from u to x, so every route is minimal, and u = r always qualifies,
//! so every reachable pair gets a route. All LIDs of a switch follow its
//! route (LASH works per switch pair).
//!
//! Why a base of its own: it spreads all-to-all traffic better than MinHop
//! and SSSP on Dragonflies and Slim Flies (busiest link on a Dragonfly p=4:
//! 1,472 HCA pairs against 1,556 for SSSP and 1,964 for MinHop; Slim Fly
//! q=7: 684 against 756), because consecutive roots claim their trees' edges
//! in a pattern that differs from root to root, while SSSP's per-destination
//! greedy choice and MinHop's per-switch port count both lock onto the same
//! early links. SSSP stays better on tori (42 against 48 on 4x4x4).

use super::EngineOptions;
use crate::graph::SwitchGraph;
use crate::model::{Fabric, NONE};
use crate::routing::minhop::lid_targets;
use crate::tables::{Lfts, NO_PATH};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// No parent: the root itself, or a switch the tree does not reach.
const NO_PARENT: u32 = u32::MAX;

/// LFTs from the BFS trees of every switch (see the module docs).
pub(crate) fn tree_lfts(f: &Fabric, opts: &EngineOptions) -> Lfts {
    let t0 = std::time::Instant::now();
    let trees = TreeParents::new(f);
    let t_trees = t0.elapsed().as_secs_f64();
    let next = trees.next_toward(0..trees.n, opts);
    let t_columns = t0.elapsed().as_secs_f64() - t_trees;
    let lfts = lfts_from_next(f, &next);
    tracing::debug!(
        t_trees,
        t_columns,
        t_total = t0.elapsed().as_secs_f64(),
        "tree routes"
    );
    lfts
}

/// The BFS tree of every switch: what every column of the routes needs.
/// A job cut by destination switch builds these once per worker (O(n m))
/// and then computes only its columns.
pub struct TreeParents {
    n: usize,
    /// parent[r * n + v]: v's parent in the tree of r.
    parent: Vec<u32>,
    /// down[r * n + v]: the parent's port toward v.
    down: Vec<u8>,
}

impl TreeParents {
    pub fn new(f: &Fabric) -> Self {
        let g = SwitchGraph::new(f);
        let n = g.len();
        let mut parent = vec![NO_PARENT; n * n];
        let mut down = vec![NO_PATH; n * n];
        parent
            .par_chunks_mut(n.max(1))
            .zip(down.par_chunks_mut(n.max(1)))
            .enumerate()
            .for_each_init(Vec::new, |queue: &mut Vec<u32>, (r, (par, dn))| {
                let mut seen = vec![false; n];
                queue.clear();
                queue.push(r as u32);
                seen[r] = true;
                let mut head = 0;
                while head < queue.len() {
                    let u = queue[head];
                    head += 1;
                    for &(v, slot) in g.neighbours(u) {
                        if !seen[v as usize] {
                            seen[v as usize] = true;
                            par[v as usize] = u;
                            dn[v as usize] = f.port_of(slot);
                            queue.push(v);
                        }
                    }
                }
            });
        Self { n, parent, down }
    }

    /// Switches in the fabric (and columns in all).
    pub fn switches(&self) -> usize {
        self.n
    }

    /// The columns of destination switches `xs`: entry
    /// `(x - xs.start) * n + u` is u's port toward switch x. A column
    /// depends on the trees only, never on another column, so any cut gives
    /// the same bytes.
    pub fn next_toward(&self, xs: std::ops::Range<usize>, opts: &EngineOptions) -> Vec<u8> {
        let n = self.n;
        let xs = xs.start.min(n)..xs.end.min(n);
        let total = xs.len() as u64;
        let done = AtomicU64::new(0);
        let mut next = vec![NO_PATH; xs.len() * n];
        next.par_chunks_mut(n.max(1))
            .zip(xs.into_par_iter())
            .for_each(|(col, x)| {
                // Roots are tried in order and the first one that has u
                // above x decides, so a column needs only the chains from
                // x up to each root, not whole trees.
                let mut left = n - 1;
                for r in 0..n {
                    let base = r * n;
                    let mut v = x as u32;
                    while left > 0 {
                        let u = self.parent[base + v as usize];
                        if u == NO_PARENT {
                            break;
                        }
                        if col[u as usize] == NO_PATH {
                            col[u as usize] = self.down[base + v as usize];
                            left -= 1;
                        }
                        v = u;
                    }
                    if left == 0 {
                        break;
                    }
                }
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if d.is_multiple_of(64) || d == total {
                    opts.report(d, total);
                }
            });
        next
    }
}

/// LFTs from the columns of every destination switch
/// ([`TreeParents::next_toward`] over all switches, in order).
pub fn lfts_from_next(f: &Fabric, next: &[u8]) -> Lfts {
    let n = f.switches().len();
    let mut lfts = Lfts::for_fabric(f);
    if n == 0 || next.len() != n * n {
        return lfts;
    }
    let targets = lid_targets(f);
    lfts.par_rows_mut().enumerate().for_each(|(u, row)| {
        for (lid, t) in targets.iter().enumerate() {
            if t.switch == NONE {
                continue;
            }
            row[lid] = if t.switch as usize == u {
                t.port
            } else {
                next[t.switch as usize * n + u]
            };
        }
    });
    lfts
}

/// The link-load sums of the routes toward the CA ports of destination
/// switches `xs`, from their columns `next` (as
/// [`TreeParents::next_toward`] returns them).
pub fn load_toward(f: &Fabric, xs: std::ops::Range<usize>, next: &[u8]) -> crate::load::LoadSums {
    let n = f.switches().len();
    let targets = lid_targets(f);
    let dests: Vec<(crate::model::Slot, u32, u8)> = crate::load::ca_ports(f)
        .into_iter()
        .filter_map(|d| {
            let t = &targets[f.lid_of_slot(d) as usize];
            (t.switch != NONE && xs.contains(&(t.switch as usize))).then_some((d, t.switch, t.port))
        })
        .collect();
    let slots: Vec<crate::model::Slot> = dests.iter().map(|d| d.0).collect();
    crate::load::load_sums(f, &slots, |k, si| {
        let (_, x, port) = dests[k];
        if si == x {
            port
        } else {
            next[(x as usize - xs.start) * n + si as usize]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};
    use crate::verify;

    fn dragonfly(p: u32) -> Fabric {
        generate(&Topology::Dragonfly { p, hosts: None }).unwrap()
    }

    fn routes_every_pair_minimally(f: &Fabric) {
        let lfts = tree_lfts(f, &EngineOptions::default());
        let routing = crate::tables::Routing::lfts_only(lfts);
        let report = verify::verify(f, &routing);
        assert_eq!(report.broken_pairs, 0, "every HCA pair connected");
        let diameter = SwitchGraph::new(f).diameter().expect("connected");
        assert!(
            report.max_hops <= diameter,
            "routes are minimal: {} hops > diameter {diameter}",
            report.max_hops
        );
    }

    #[test]
    fn every_pair_is_routed_on_shortest_paths() {
        routes_every_pair_minimally(&dragonfly(3));
        routes_every_pair_minimally(
            &generate(&Topology::Mesh {
                dims: vec![4, 4, 3],
                torus: true,
                hosts: 1,
            })
            .unwrap(),
        );
        routes_every_pair_minimally(&generate(&Topology::SlimFly { q: 5, hosts: None }).unwrap());
    }

    #[test]
    fn busiest_link_matches_opensm_lash_on_a_dragonfly() {
        // OpenSM 3.3.23's LASH on the same generated Dragonfly p=4 loads its
        // busiest link with 1,472 HCA pairs (BENCHMARKS.md, link load side by
        // side); the same trees give the same figure.
        let f = dragonfly(4);
        let lfts = tree_lfts(&f, &EngineOptions::default());
        let load = crate::load::link_load(&f, &lfts);
        assert_eq!(load.max, 1472);
    }
}
