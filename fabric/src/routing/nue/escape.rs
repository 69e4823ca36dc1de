//! Escape paths: the Up*/Down* turns of a spanning tree that every layer
//! inserts before its first route, so that along the tree every switch can
//! always reach every destination of the layer.

use super::ROOT_SAMPLES;
use super::fail;
use super::net::{Cdg, Net, Turns, USED};
use crate::error::Result;
use crate::graph::level_order::LevelOrder;
use crate::model::NONE;

/// A layer's spanning tree, rooted at the switch closest to its
/// destinations.
pub(super) struct EscapeTree {
    /// Per switch: the channel toward its parent (NONE at the root).
    pub up: Vec<u32>,
    depth: Vec<u32>,
    /// Whether the subtree below each switch holds a destination switch of
    /// the layer.
    pub has_dest: Vec<bool>,
}

impl EscapeTree {
    pub(super) fn new(net: &Net, members: &[u32], weight: &[u64]) -> Result<Self> {
        let n = net.nsw;
        let root = pick_root(net, members, weight);

        // BFS tree; each switch hangs off the neighbour one level up that has
        // the fewest children so far, which keeps the tree's links spread.
        let mut depth = vec![u32::MAX; n];
        let mut up = vec![NONE; n];
        let mut nchild = vec![0u32; n];
        let mut bfs_order = vec![root];
        depth[root as usize] = 0;
        let mut level_start = 0;
        while level_start < bfs_order.len() {
            let level_end = bfs_order.len();
            for i in level_start..level_end {
                let x = bfs_order[i];
                for c in net.outs(x) {
                    let y = net.head[c as usize];
                    if depth[y as usize] == u32::MAX {
                        depth[y as usize] = depth[x as usize] + 1;
                        bfs_order.push(y);
                    }
                }
            }
            for &y in &bfs_order[level_end..] {
                let mut best = NONE;
                for c in net.outs(y) {
                    let p = net.head[c as usize];
                    if depth[p as usize] == depth[y as usize] - 1
                        && (best == NONE
                            || nchild[p as usize] < nchild[net.head[best as usize] as usize])
                    {
                        best = c;
                    }
                }
                if best == NONE {
                    return Err(fail("internal error: escape tree misses a parent"));
                }
                up[y as usize] = best;
                nchild[net.head[best as usize] as usize] += 1;
            }
            level_start = level_end;
        }
        if bfs_order.len() != n {
            return Err(fail("the switches are not connected"));
        }

        // Subtrees holding a destination switch of this layer.
        let mut has_dest = vec![false; n];
        for &m in members {
            has_dest[m as usize] = true;
        }
        for &v in bfs_order.iter().rev() {
            if has_dest[v as usize] && up[v as usize] != NONE {
                has_dest[net.head[up[v as usize] as usize] as usize] = true;
            }
        }
        Ok(Self {
            up,
            depth,
            has_dest,
        })
    }

    /// Levels the escape turns go up in: up channels by falling tail
    /// depth, then every other channel, then down channels by rising head
    /// depth.
    pub(super) fn initial_order(&self, net: &Net) -> LevelOrder {
        let (up, depth) = (&self.up, &self.depth);
        let deepest = depth.iter().copied().max().unwrap_or(0);
        let level = (0..net.nch() as u32)
            .map(|c| {
                let (u, x) = (net.tail[c as usize], net.head[c as usize]);
                if up[u as usize] == c {
                    deepest - depth[u as usize]
                } else if up[x as usize] == net.rev[c as usize] {
                    deepest + depth[x as usize]
                } else {
                    deepest
                }
            })
            .collect();
        LevelOrder::with_levels(level)
    }
}

/// Inserts the escape turns: up-up at every switch; up-down and down-down
/// only toward children whose subtree holds a destination of the layer.
pub(super) fn insert_escape_turns(
    net: &Net,
    tree: &EscapeTree,
    turns: &mut Turns,
    order: &mut LevelOrder,
) -> Result<()> {
    let (up, has_dest) = (&tree.up, &tree.has_dest);
    let mut kids: Vec<Vec<u32>> = vec![Vec::new(); net.nsw];
    for (v, &c) in up.iter().enumerate() {
        if c != NONE {
            kids[net.head[c as usize] as usize].push(v as u32);
        }
    }
    for (v, kv) in kids.iter().enumerate() {
        let upv = up[v];
        for &ch in kv {
            let upc = up[ch as usize];
            if upv != NONE {
                add_escape_turn(net, turns, order, upc, upv)?;
            }
        }
        for &c2 in kv {
            if !has_dest[c2 as usize] {
                continue;
            }
            let dn2 = net.rev[up[c2 as usize] as usize];
            for &c1 in kv {
                if c1 != c2 {
                    add_escape_turn(net, turns, order, up[c1 as usize], dn2)?;
                }
            }
            if upv != NONE {
                add_escape_turn(net, turns, order, net.rev[upv as usize], dn2)?;
            }
        }
    }
    Ok(())
}

fn add_escape_turn(
    net: &Net,
    turns: &mut Turns,
    order: &mut LevelOrder,
    a: u32,
    b: u32,
) -> Result<()> {
    let t = net.turn(a, b);
    if turns[t] == USED {
        return Ok(());
    }
    order
        .try_add_edge(
            &Cdg {
                net,
                turns: &*turns,
            },
            a,
            b,
        )
        .map_err(|_| fail("internal error: the escape turns are cyclic"))?;
    turns.set(net, t, USED);
    Ok(())
}

/// The switch with the least eccentricity toward the layer's destination
/// switches (the farthest of them, in hops), then the least summed
/// distance (weighted by their LIDs), measured from an even sample of
/// them; ties go to the lowest switch index. The farthest destination
/// counts first because escape routes run up the tree and down again: a
/// root central to most of a layer but far from a few of its destinations
/// (the stragglers a partition leaves, as on fat trees) puts those deep in
/// the tree, and the escape turns around them then block the minimal
/// routes toward them (10-ary 3-tree, 8 layers: busiest link 3,120 paths
/// with the summed distance alone, 1,760 this way; unchanged on
/// Dragonflies, Slim Flies, tori and random graphs).
fn pick_root(net: &Net, members: &[u32], weight: &[u64]) -> u32 {
    let n = net.nsw;
    // Switches with end ports are the destinations; a layer of switch LIDs
    // only measures from all its members.
    let dests: Vec<u32> = members
        .iter()
        .copied()
        .filter(|&m| net.hosts[m as usize] > 0)
        .collect();
    let dests = if dests.is_empty() {
        members
    } else {
        &dests[..]
    };
    let step = dests.len().div_ceil(ROOT_SAMPLES).max(1);
    let mut sum = vec![0u64; n];
    let mut ecc = vec![0u32; n];
    let mut dist = vec![0u32; n];
    let mut queue = Vec::new();
    for &m in dests.iter().step_by(step) {
        net.bfs(m, &mut dist, &mut queue);
        let wm = weight[m as usize];
        for ((s, e), &d) in sum.iter_mut().zip(ecc.iter_mut()).zip(&dist) {
            *s += wm * d as u64;
            *e = (*e).max(d);
        }
    }
    (0..n as u32)
        .min_by_key(|&v| (ecc[v as usize], sum[v as usize], v))
        .unwrap_or(0)
}
