//! The channel dependency graph in CSR form, and the search for a cycle
//! in it.

use super::*;

/// The CDG of an edge bitset in CSR form: (start, targets, edges,
/// vertices with an edge).
pub(super) fn csr(ctx: &Ctx, words: &[AtomicU64]) -> (Vec<u32>, Vec<u32>, u64, u64) {
    csr_of(ctx.f, ctx.max_ports, ctx.vls, words)
}

/// [`csr`] for an edge bitset laid out as [`Ctx::edge_bit`] lays it out
/// with `max_ports` and `vls`.
pub(crate) fn csr_of(
    f: &Fabric,
    max_ports: usize,
    v: usize,
    words: &[AtomicU64],
) -> (Vec<u32>, Vec<u32>, u64, u64) {
    let n_vert = f.num_slots() * v;
    // Two passes over the bits: count, then fill.
    let mut deg = vec![0u32; n_vert + 1];
    let decode = |bit: usize| {
        let vo = bit % v;
        let rest = bit / v;
        let vc = rest % v;
        let rest = rest / v;
        let out_port = (rest % max_ports) as u8;
        let c = (rest / max_ports) as Slot;
        let head = f.node_of(f.remote(c));
        let o = f.slot(head, out_port);
        (c as usize * v + vc, o as usize * v + vo)
    };
    let mut total = 0u64;
    for (wi, w) in words.iter().enumerate() {
        let mut x = w.load(Ordering::Relaxed);
        while x != 0 {
            let b = x.trailing_zeros() as usize;
            x &= x - 1;
            let (from, _) = decode(wi * 64 + b);
            deg[from + 1] += 1;
            total += 1;
        }
    }
    for i in 0..n_vert {
        deg[i + 1] += deg[i];
    }
    let mut fill = deg.clone();
    let mut adj = vec![0u32; total as usize];
    let mut has_vertex = vec![false; n_vert];
    for (wi, w) in words.iter().enumerate() {
        let mut x = w.load(Ordering::Relaxed);
        while x != 0 {
            let b = x.trailing_zeros() as usize;
            x &= x - 1;
            let (from, to) = decode(wi * 64 + b);
            adj[fill[from] as usize] = to as u32;
            fill[from] += 1;
            has_vertex[from] = true;
            has_vertex[to] = true;
        }
    }
    let vertices = has_vertex.iter().filter(|&&b| b).count() as u64;
    (deg, adj, total, vertices)
}

/// The cycle the DFS `stack` closes by reaching grey vertex `w` again.
fn closed_at(stack: &[(u32, u32)], w: usize, v: usize) -> Vec<VirtualChannel> {
    let pos = stack.iter().position(|e| e.0 as usize == w).unwrap_or(0);
    stack[pos..]
        .iter()
        .map(|e| VirtualChannel {
            slot: (e.0 as usize / v) as Slot,
            vl: (e.0 as usize % v) as u8,
        })
        .collect()
}

/// A cycle of a CDG in CSR form (vertex = slot * `v` + VL), if any.
pub(crate) fn cycle_in(v: usize, deg: &[u32], adj: &[u32]) -> Option<Vec<VirtualChannel>> {
    let n_vert = deg.len() - 1;

    // Iterative DFS with colours; a grey successor closes a cycle.
    let mut color = vec![0u8; n_vert];
    let mut stack: Vec<(u32, u32)> = Vec::new();
    for start in 0..n_vert {
        if color[start] != 0 || deg[start] == deg[start + 1] {
            continue;
        }
        color[start] = 1;
        stack.push((start as u32, deg[start]));
        while let Some(top) = stack.last_mut() {
            let u = top.0 as usize;
            if top.1 < deg[u + 1] {
                let w = adj[top.1 as usize] as usize;
                top.1 += 1;
                match color[w] {
                    0 => {
                        color[w] = 1;
                        stack.push((w as u32, deg[w]));
                    }
                    1 => return Some(closed_at(&stack, w, v)),
                    _ => {}
                }
            } else {
                color[u] = 2;
                stack.pop();
            }
        }
    }
    None
}
