//! DF-SSSP (Domke, Hoefler, Nagel, IPDPS'11): SSSP routes, made deadlock
//! free by splitting them over virtual layers (one SL and VL per layer).
//! All routes start in layer 0; while a layer's channel dependency graph
//! has a cycle, the cycle's "weakest" dependency (the turn the fewest host
//! pairs take) is cut by moving every route of the layer through it to the
//! next layer. Finally routes are spread over the layers left unused, which
//! keeps every layer acyclic (a subset of an acyclic layer is acyclic).
//!
//! Unlike OpenSM's dfsssp, which answers a random SL of a layer group on
//! every path record query, the result here is one fixed table: the same
//! input gives the same `path-sl.txt`.

use super::paths::{RouteSet, Topo, identity_sl2vl, sources, write_layers};
use super::{EngineOptions, RoutingEngine};
use crate::error::{Error, Result};
use crate::model::Fabric;
use crate::tables::{PathSl, Routing};

pub struct DfSssp;

impl RoutingEngine for DfSssp {
    fn split(&self, opts: &EngineOptions) -> super::Split {
        super::rounds::streams_split(self.name(), opts)
    }
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Dfsssp
    }
    fn description(&self) -> &'static str {
        "DF-SSSP: SSSP routes split over VL layers until every layer is acyclic, then balanced over the VLs allowed"
    }
    fn routes_lmc(&self) -> bool {
        true
    }
    fn claims_deadlock_free(&self) -> bool {
        true
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        layered_routing(f, super::sssp::sssp_lfts(f, opts)?, opts)
    }
}

/// DF-SSSP's layering of SSSP's LFTs (computed here, or merged from
/// streams routed elsewhere, [`super::sssp_streams`]).
pub fn layered_routing(
    f: &Fabric,
    lfts: crate::tables::Lfts,
    opts: &EngineOptions,
) -> Result<Routing> {
    let topo = Topo::new(f);
    let mut path_sl = PathSl::new(f.max_lid());
    let src = sources(f, "dfsssp", &mut path_sl)?;
    let routes = RouteSet::walk(f, &topo, &lfts, &src, "dfsssp")?;
    let weight: Vec<u64> = (0..routes.len())
        .map(|p| src.weight[p % routes.nsrc.max(1)] as u64)
        .collect();
    let budget = opts.max_vls.min(opts.max_sls).clamp(1, 15);
    let mut layer = vec![0u8; routes.len()];
    let needed = break_cycles(&topo, &routes, &weight, &mut layer, budget, opts)?;
    let used = balance(&mut layer, &weight, needed, budget);
    tracing::debug!(needed, used, routes = routes.len(), "dfsssp layers");
    write_layers(f, &src, &layer, &mut path_sl);
    Ok(Routing {
        lfts,
        sl2vl: Some(identity_sl2vl(f, used)),
        path_sl: Some(path_sl),
        vls_needed: Some(needed),
    })
}

/// Moves routes up the layers until each layer's dependency graph is
/// acyclic; returns the number of layers that hold routes.
fn break_cycles(
    topo: &Topo,
    routes: &RouteSet,
    weight: &[u64],
    layer: &mut [u8],
    budget: u8,
    opts: &EngineOptions,
) -> Result<u8> {
    let rows = topo.cube_rows;
    let (toff, tids) = routes.by_turn(rows);
    let nch = topo.num_channels();
    let mut load = vec![0u64; rows];
    let mut color = vec![0u8; nch];
    let mut at = vec![0u32; nch];
    // DFS frames: (channel, next out-port index to try); `taken[i]` is the
    // turn from frame i to frame i + 1.
    let mut stack: Vec<(u32, u16)> = Vec::new();
    let mut taken: Vec<u32> = Vec::new();
    let mut cuts = 0u64;
    let mut l: u8 = 0;
    loop {
        load.iter_mut().for_each(|x| *x = 0);
        let mut any = false;
        for p in 0..routes.len() {
            if layer[p] == l {
                any = true;
                for &t in routes.route(p) {
                    load[t as usize] += weight[p];
                }
            }
        }
        if !any {
            break;
        }
        color.iter_mut().for_each(|c| *c = 0);
        for start in 0..nch as u32 {
            if color[start as usize] != 0 {
                continue;
            }
            stack.clear();
            taken.clear();
            stack.push((start, 0));
            color[start as usize] = 1;
            at[start as usize] = 0;
            while let Some(&mut (c, ref mut next)) = stack.last_mut() {
                let h = topo.head[c as usize] as usize;
                let i = topo.head_in[c as usize] as usize;
                let d = topo.cube_dim[h] as usize;
                let mut step = None;
                while (*next as usize) < d {
                    let o = *next as usize;
                    *next += 1;
                    let row = topo.cube_base[h] + o * d + i;
                    if load[row] > 0 {
                        step = Some((row as u32, topo.chan_base[h] + o as u32));
                        break;
                    }
                }
                let Some((row, nxt)) = step else {
                    color[c as usize] = 2;
                    stack.pop();
                    taken.pop();
                    continue;
                };
                match color[nxt as usize] {
                    0 => {
                        color[nxt as usize] = 1;
                        at[nxt as usize] = stack.len() as u32;
                        stack.push((nxt, 0));
                        taken.push(row);
                    }
                    1 => {
                        // A cycle: the turns from `nxt`'s frame to the top, closed by `row`.
                        let from = at[nxt as usize] as usize;
                        let weakest = taken[from..]
                            .iter()
                            .copied()
                            .chain(std::iter::once(row))
                            .min_by_key(|&t| (load[t as usize], t))
                            .unwrap_or(row);
                        if l + 1 >= budget {
                            return Err(Error::Routing {
                                engine: "dfsssp".into(),
                                reason: format!(
                                    "not enough VLs: the routes need more than {budget} layer(s) to be deadlock free (--max-vls/--max-sls allow {budget})"
                                ),
                            });
                        }
                        let (a, b) = (toff[weakest as usize], toff[weakest as usize + 1]);
                        for &p in &tids[a as usize..b as usize] {
                            let p = p as usize;
                            if layer[p] == l {
                                layer[p] = l + 1;
                                for &t in routes.route(p) {
                                    load[t as usize] -= weight[p];
                                }
                            }
                        }
                        cuts += 1;
                        // Removing dependencies cannot make a finished (black)
                        // channel reach a cycle; only the open path restarts.
                        for &(g, _) in &stack {
                            color[g as usize] = 0;
                        }
                        stack.clear();
                        taken.clear();
                        stack.push((start, 0));
                        color[start as usize] = 1;
                        at[start as usize] = 0;
                    }
                    _ => {}
                }
            }
        }
        l += 1;
        opts.report(l as u64, budget as u64);
    }
    tracing::debug!(cuts, layers = l, "dfsssp cycles broken");
    Ok(l.max(1))
}

/// Spreads routes over the layers in `needed..budget`: each empty layer
/// takes every second route of the heaviest layer. Returns layers in use.
fn balance(layer: &mut [u8], weight: &[u64], needed: u8, budget: u8) -> u8 {
    let mut used = needed;
    while used < budget {
        let mut per = [0u64; 16];
        for (p, &l) in layer.iter().enumerate() {
            per[l as usize] += weight[p];
        }
        let Some((heavy, &w)) = per[..used as usize]
            .iter()
            .enumerate()
            .max_by_key(|&(i, &w)| (w, std::cmp::Reverse(i)))
        else {
            break;
        };
        if w == 0 {
            break;
        }
        let mut flip = false;
        for l in layer.iter_mut() {
            if *l as usize == heavy {
                if flip {
                    *l = used;
                }
                flip = !flip;
            }
        }
        used += 1;
    }
    used
}
