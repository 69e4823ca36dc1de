//! Switch-to-switch adjacency in CSR form and all-pairs hop counts, the
//! shared basis of generators' checks, routing engines and `info`; and the
//! incremental orders that keep channel dependency graphs acyclic as
//! routes add to them: a total order ([`topo_order`], for LASH and DQR,
//! which also read positions) and levels ([`level_order`], for Nue, whose
//! dense layers near the LID limit make a total order move the same
//! channels again and again).

pub mod level_order;
pub mod radix_heap;
#[cfg(test)]
pub(crate) mod test_graph;
pub mod topo_order;

use crate::model::{Fabric, NONE, NodeKind, Slot};
use rayon::prelude::*;

/// Hop count marker for "unreachable".
pub const UNREACHABLE: u8 = u8::MAX;

/// Switch graph: for switch index `i`, `adj[off[i]..off[i+1]]` lists
/// `(neighbour switch index, outgoing slot)`. Parallel links appear once each.
#[derive(Debug, Clone)]
pub struct SwitchGraph {
    pub off: Vec<u32>,
    pub adj: Vec<(u32, Slot)>,
}

impl SwitchGraph {
    pub fn new(f: &Fabric) -> Self {
        let mut off = Vec::with_capacity(f.switches().len() + 1);
        let mut adj = Vec::new();
        off.push(0);
        for &sw in f.switches() {
            for s in f.port_slots(sw) {
                let r = f.remote(s);
                if r == NONE {
                    continue;
                }
                let rn = f.node_of(r);
                if f.kind(rn) == NodeKind::Switch {
                    if let Some(ri) = f.switch_index(rn) {
                        adj.push((ri, s));
                    }
                }
            }
            off.push(adj.len() as u32);
        }
        Self { off, adj }
    }

    pub fn len(&self) -> usize {
        self.off.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn neighbours(&self, i: u32) -> &[(u32, Slot)] {
        &self.adj[self.off[i as usize] as usize..self.off[i as usize + 1] as usize]
    }

    /// BFS hop counts from switch `src` into `dist` (len = switch count).
    pub fn bfs_into(&self, src: u32, dist: &mut [u8], queue: &mut Vec<u32>) {
        dist.fill(UNREACHABLE);
        queue.clear();
        dist[src as usize] = 0;
        queue.push(src);
        let mut head = 0;
        while head < queue.len() {
            let u = queue[head];
            head += 1;
            let du = dist[u as usize];
            for &(v, _) in self.neighbours(u) {
                if dist[v as usize] == UNREACHABLE {
                    dist[v as usize] = du.saturating_add(1).min(UNREACHABLE - 1);
                    queue.push(v);
                }
            }
        }
    }

    /// Row-major all-pairs hop matrix: `m[a * n + b]` = hops from a to b.
    /// Links are bidirectional, so the matrix is symmetric.
    pub fn hop_matrix(&self) -> Vec<u8> {
        let n = self.len();
        let mut m = vec![UNREACHABLE; n * n];
        m.par_chunks_mut(n.max(1))
            .enumerate()
            .for_each_init(Vec::new, |q, (i, row)| {
                self.bfs_into(i as u32, row, q);
            });
        m
    }

    /// Diameter of the switch graph, or `None` if it is disconnected.
    pub fn diameter(&self) -> Option<u32> {
        let n = self.len();
        if n == 0 {
            return Some(0);
        }
        let ecc: Vec<u8> = (0..n as u32)
            .into_par_iter()
            .map_init(
                || (vec![0u8; n], Vec::new()),
                |(d, q), i| {
                    self.bfs_into(i, d, q);
                    d.iter().copied().max().unwrap_or(0)
                },
            )
            .collect();
        let max = ecc.into_iter().max().unwrap_or(0);
        (max != UNREACHABLE).then_some(max as u32)
    }
}
