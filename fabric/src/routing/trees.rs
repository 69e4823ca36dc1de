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
//! 1,472 HCA pairs against 1,616 for SSSP and 1,964 for MinHop; Slim Fly
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
    let g = SwitchGraph::new(f);
    let n = g.len();
    let mut lfts = Lfts::for_fabric(f);
    if n == 0 {
        return lfts;
    }
    // parent[r * n + v]: v's parent in the tree of r; down[r * n + v]: the
    // parent's port toward v.
    let mut parent = vec![NO_PARENT; n * n];
    let mut down = vec![NO_PATH; n * n];
    parent
        .par_chunks_mut(n)
        .zip(down.par_chunks_mut(n))
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

    // next[x * n + u]: u's port toward switch x. Roots are tried in order
    // and the first one that has u above x decides, so a column needs only
    // the chains from x up to each root, not whole trees.
    let done = AtomicU64::new(0);
    let mut next = vec![NO_PATH; n * n];
    next.par_chunks_mut(n).enumerate().for_each(|(x, col)| {
        let mut left = n - 1;
        for r in 0..n {
            let base = r * n;
            let mut v = x as u32;
            while left > 0 {
                let u = parent[base + v as usize];
                if u == NO_PARENT {
                    break;
                }
                if col[u as usize] == NO_PATH {
                    col[u as usize] = down[base + v as usize];
                    left -= 1;
                }
                v = u;
            }
            if left == 0 {
                break;
            }
        }
        let d = done.fetch_add(1, Ordering::Relaxed) + 1;
        if d.is_multiple_of(64) || d == n as u64 {
            opts.report(d, n as u64);
        }
    });

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{generate, Topology};
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
