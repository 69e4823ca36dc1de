//! The whole fabric's deadlock check: every host pair (within and across
//! subnets) walked through the emitted tables, and the channel dependency
//! graph of all subnets plus the router hops, with VLs, searched for a
//! cycle.

use crate::network::Network;
use rayon::prelude::*;

/// The result of the whole fabric's check.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GlobalReport {
    pub pairs: u64,
    pub unreachable: u64,
    /// Why the first unreachable pair failed.
    pub first_unreachable: Option<String>,
    pub channels: usize,
    pub dependencies: usize,
    pub vls_used: u8,
    /// A dependency cycle, as channel descriptions, when there is one.
    pub cycle: Option<Vec<String>>,
}

impl GlobalReport {
    pub fn deadlock_free(&self) -> bool {
        self.cycle.is_none()
    }
    pub fn ok(&self) -> bool {
        self.unreachable == 0 && self.cycle.is_none()
    }
}

/// See [`GlobalReport`]. Walks all host pairs, so it costs hosts squared
/// path walks (0.4 M for the paper's 648 HCAs).
pub fn verify_global(net: &Network<'_>) -> GlobalReport {
    verify_global_with(net, None)
}

/// [`verify_global`], calling `progress(sources done, sources)` after each
/// batch of sources.
pub fn verify_global_with(
    net: &Network<'_>,
    progress: Option<&(dyn Fn(u64, u64) + Sync)>,
) -> GlobalReport {
    let n = net.hosts().len();
    let chan = |(l, v): (u32, u8)| (l as u64) << 4 | v as u64;
    // Per source: dependencies, unreachable count, first reason, top VL.
    type PerSource = (Vec<(u64, u64)>, u64, Option<String>, u8);
    let walk = |src: usize| -> PerSource {
        let mut deps = Vec::new();
        let mut bad = 0u64;
        let mut why = None;
        let mut maxvl = 0u8;
        let mut ch = Vec::with_capacity(16);
        for dst in 0..n {
            if dst == src {
                continue;
            }
            ch.clear();
            match net.path_channels(src, dst, &mut ch) {
                Ok(()) => {
                    for w in ch.windows(2) {
                        deps.push((chan(w[0]), chan(w[1])));
                    }
                    maxvl = ch.iter().map(|c| c.1).fold(maxvl, u8::max);
                }
                Err(e) => {
                    bad += 1;
                    why.get_or_insert_with(|| e.to_string());
                }
            }
        }
        deps.sort_unstable();
        deps.dedup();
        (deps, bad, why, maxvl)
    };
    // Sources in batches, merged into one deduplicated set after each: the
    // distinct dependencies are few (channels x turns), while every
    // source's own list holds one entry per destination and hop, so keeping
    // them all at once would cost memory in hosts squared.
    let mut deps: Vec<(u64, u64)> = Vec::new();
    let (mut unreachable, mut first, mut maxvl) = (0u64, None, 0u8);
    let batch = (rayon::current_num_threads() * 16).max(1);
    for lo in (0..n).step_by(batch) {
        let per_source: Vec<PerSource> = (lo..(lo + batch).min(n))
            .into_par_iter()
            .map(walk)
            .collect();
        for (d, b, w, v) in per_source {
            deps.extend(d);
            unreachable += b;
            if first.is_none() {
                first = w;
            }
            maxvl = maxvl.max(v);
        }
        deps.par_sort_unstable();
        deps.dedup();
        if let Some(p) = progress {
            p(((lo + batch).min(n)) as u64, n as u64);
        }
    }
    let mut ids: Vec<u64> = deps.iter().flat_map(|&(a, b)| [a, b]).collect();
    ids.par_sort_unstable();
    ids.dedup();
    let id = |c: u64| ids.binary_search(&c).unwrap_or(0);
    let mut start = vec![0usize; ids.len() + 1];
    for &(a, _) in &deps {
        start[id(a) + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    // `deps` is sorted by source channel, so targets line up with `start`.
    let targets: Vec<usize> = deps.iter().map(|&(_, b)| id(b)).collect();
    let cycle = find_cycle(&start, &targets).map(|c| {
        c.iter()
            .map(|&i| net.describe((ids[i] >> 4) as u32, (ids[i] & 15) as u8))
            .collect()
    });
    GlobalReport {
        pairs: (n as u64) * (n.saturating_sub(1) as u64),
        unreachable,
        first_unreachable: first,
        channels: ids.len(),
        dependencies: deps.len(),
        vls_used: maxvl + 1,
        cycle,
    }
}

/// A cycle of the graph in CSR form (iterative depth-first search).
pub(crate) fn find_cycle(start: &[usize], targets: &[usize]) -> Option<Vec<usize>> {
    let n = start.len() - 1;
    // 0 unseen, 1 on the stack, 2 done.
    let mut colour = vec![0u8; n];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if colour[root] != 0 {
            continue;
        }
        colour[root] = 1;
        stack.push((root, start[root]));
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if *next < start[v + 1] {
                let w = targets[*next];
                *next += 1;
                match colour[w] {
                    0 => {
                        colour[w] = 1;
                        stack.push((w, start[w]));
                    }
                    1 => {
                        let from = stack.iter().position(|&(x, _)| x == w).unwrap_or(0);
                        return Some(stack[from..].iter().map(|&(x, _)| x).collect());
                    }
                    _ => {}
                }
            } else {
                colour[v] = 2;
                stack.pop();
            }
        }
    }
    None
}
