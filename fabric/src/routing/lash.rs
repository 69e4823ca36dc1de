//! LASH (Skeie, Lysne, Theiss, "Layered shortest path (LASH) routing in
//! irregular system area networks", IPDPS'02): minimal routes, each put in
//! the lowest virtual layer (one SL and VL per layer) whose channel
//! dependency graph stays acyclic with it.
//!
//! OpenSM's lash re-searches the whole dependency graph for every route,
//! which does not finish on a Dragonfly p=6 in ten minutes. Here each layer
//! keeps a topological order of its channels ([`crate::graph::topo_order`],
//! Pearce and Kelly's dynamic topological sort): a route whose turns are
//! already in the layer costs a lookup per turn, and a new turn only
//! searches the channels between its two ends in that order.
//!
//! The base routing is `auto` (or any other with `--base`): the BFS trees
//! OpenSM's LASH routes on, or SSSP when it loads its busiest link less.
//! LASH keeps the base's routes as they are, so the balance of the base is
//! the balance of the result (busiest link on a Dragonfly p=4: 1,472 HCA
//! pairs on the trees, 1,556 on SSSP, 1,964 on MinHop; on a 4x4x4 torus
//! SSSP's 42 against the trees' 48, with fewer VLs); routes are taken
//! destination by destination, source switch by source switch.

use super::paths::{RouteSet, Topo, identity_sl2vl, sources, write_layers};
use super::{EngineOptions, RoutingEngine};
use crate::error::{Error, Result};
use crate::graph::topo_order::{Digraph, TopoOrder};
use crate::model::Fabric;
use crate::tables::{PathSl, Routing};

pub struct Lash;

impl RoutingEngine for Lash {
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Lash
    }
    fn description(&self) -> &'static str {
        "LASH: minimal routes (--base auto, the default: the better balanced of trees and sssp; or minhop), each in the lowest VL layer it keeps acyclic"
    }
    fn routes_lmc(&self) -> bool {
        true
    }
    fn claims_deadlock_free(&self) -> bool {
        true
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        let lfts = if f.max_lmc() > 0 {
            opts.base_lfts(f, opts.lmc_base("lash")?)?
        } else {
            opts.base_lfts(f, super::Base::Auto)?
        };
        let topo = Topo::new(f);
        let mut path_sl = PathSl::new(f.max_lid());
        let src = sources(f, "lash", &mut path_sl)?;
        let routes = RouteSet::walk(f, &topo, &lfts, &src, "lash")?;
        let budget = opts.max_vls.min(opts.max_sls).clamp(1, 15);
        let (layer, used) = assign_layers(&topo, &routes, budget, opts)?;
        write_layers(f, &src, &layer, &mut path_sl);
        Ok(Routing {
            lfts,
            sl2vl: Some(identity_sl2vl(f, used)),
            path_sl: Some(path_sl),
            vls_needed: None,
        })
    }
}

/// One virtual layer: which turns it holds and a topological order of its
/// channels consistent with them.
struct Layer {
    /// Routes through each turn row.
    count: Vec<u32>,
    /// Turns known to close a cycle here. Committed dependencies are never
    /// removed, so once a turn closes a cycle on them it always will: most
    /// routes that do not fit a layer are turned away by this lookup
    /// instead of a search.
    blocked: Vec<bool>,
    order: TopoOrder,
}

/// A layer's channel dependency graph: the turns with routes through them.
struct LayerCdg<'a> {
    topo: &'a Topo,
    count: &'a [u32],
}

impl Digraph for LayerCdg<'_> {
    fn successors(&self, c: u32) -> impl Iterator<Item = u32> + '_ {
        self.topo
            .turns_from(c)
            .filter(|&(row, _)| self.count[row as usize] != 0)
            .map(|(_, next)| next)
    }
    fn predecessors(&self, c: u32) -> impl Iterator<Item = u32> + '_ {
        self.topo
            .turns_into(c)
            .filter(|&(row, _)| self.count[row as usize] != 0)
            .map(|(_, prev)| prev)
    }
}

/// Channels at both ends of each turn row.
struct TurnEnds {
    from: Vec<u32>,
    to: Vec<u32>,
}

fn assign_layers(
    topo: &Topo,
    routes: &RouteSet,
    budget: u8,
    opts: &EngineOptions,
) -> Result<(Vec<u8>, u8)> {
    let nch = topo.num_channels();
    let rows = topo.cube_rows;
    let mut from = vec![0u32; rows];
    let mut to = vec![0u32; rows];
    for c in 0..nch as u32 {
        for (row, nxt) in topo.turns_from(c) {
            from[row as usize] = c;
            to[row as usize] = nxt;
        }
    }
    let ends = TurnEnds { from, to };
    let mut layers: Vec<Layer> = Vec::new();
    let mut layer = vec![0u8; routes.len()];
    let mut added: Vec<u32> = Vec::new();
    let n = routes.len();
    let tick = (n / 100).max(1);
    for (p, lp) in layer.iter_mut().enumerate() {
        let turns = routes.route(p);
        let mut l = 0usize;
        loop {
            if l == layers.len() {
                if l == budget as usize {
                    return Err(Error::Routing {
                        engine: "lash".into(),
                        reason: format!(
                            "not enough VLs: the routes need more than {budget} layer(s) to be deadlock free (--max-vls/--max-sls allow {budget})"
                        ),
                    });
                }
                layers.push(Layer {
                    count: vec![0; rows],
                    blocked: vec![false; rows],
                    order: TopoOrder::new(nch),
                });
            }
            if try_add(topo, &mut layers[l], &ends, turns, &mut added) {
                break;
            }
            l += 1;
        }
        *lp = l as u8;
        if p % tick == 0 {
            opts.report(p as u64, n as u64);
        }
    }
    Ok((layer, layers.len().max(1) as u8))
}

/// Adds a route's turns to `ly` if that keeps it acyclic; otherwise leaves
/// the layer as it was and returns false.
fn try_add(
    topo: &Topo,
    ly: &mut Layer,
    ends: &TurnEnds,
    turns: &[u32],
    added: &mut Vec<u32>,
) -> bool {
    added.clear();
    if turns.iter().any(|&t| ly.blocked[t as usize]) {
        return false;
    }
    for &t in turns {
        if ly.count[t as usize] > 0 {
            continue;
        }
        let (u, v) = (ends.from[t as usize], ends.to[t as usize]);
        let cdg = LayerCdg {
            topo,
            count: &ly.count,
        };
        if ly.order.try_add_edge(&cdg, u, v).is_ok() {
            // Present from now on, so later turns of this route see it.
            ly.count[t as usize] = 1;
            added.push(t);
        } else {
            if added.is_empty() {
                // The cycle runs over committed dependencies only.
                ly.blocked[t as usize] = true;
            }
            // Dropping dependencies keeps the order valid: no repair needed.
            for &a in added.iter() {
                ly.count[a as usize] = 0;
            }
            return false;
        }
    }
    for &t in turns {
        if !added.contains(&t) {
            ly.count[t as usize] += 1;
        }
    }
    true
}
