//! Nue (Domke, Hoefler, Matsuoka, "Routing on the Dependency Graph: A New
//! Approach to Deadlock-Free High-Performance Routing", HPDC'16):
//! destination-based routes computed on the channel dependency graph (CDG)
//! itself, deadlock free with any number of VLs, one included.
//!
//! **Layers.** Destinations are split into `k = min(max VLs, max SLs)`
//! virtual layers. Layer `i` is SL `i`, and SL `i` maps to VL `i` on every
//! port, so a packet stays in its destination's layer end to end. Each layer
//! keeps its own *complete* CDG: vertices are the switch-to-switch channels,
//! edges are the turns (in channel -> out channel at one switch). A turn
//! becomes part of a layer's CDG only when a route uses it, and only if the
//! CDG stays acyclic; an acyclic CDG per VL is deadlock freedom (Dally and
//! Seitz), so the result is deadlock free by construction, not by repair.
//!
//! **Routes.** Per destination, a Dijkstra grows the tree of routes toward
//! it backwards from the destination's switch: a switch joins through the
//! cheapest channel toward an already joined switch whose turn onto that
//! switch's chosen out channel is in the CDG already or can be added without
//! closing a cycle. The turn is checked when the candidate is taken from the
//! heap, not when it is queued: other turns enter the CDG in between, and
//! only the turns of the final tree should. Channel weights balance the
//! load as in Nue: every route adds its source end ports to each channel it
//! crosses. A per-hop cost of twice the mean channel load (plus one) is
//! added, so routes detour only around channels loaded well above average
//! and stay short.
//!
//! **Escape paths.** Each layer first inserts the turns of an Up*/Down*
//! routing over a spanning tree rooted at the switch closest (in summed hop
//! distance) to the layer's destinations: up-up turns everywhere, and up-down
//! and down-down turns toward subtrees that hold a destination of the
//! layer. These turns are acyclic (up channels ordered by falling depth, then
//! down channels by rising depth), so along the tree every switch can always
//! reach every destination of the layer.
//!
//! **Impasses.** When the Dijkstra leaves switches unreached (every way in
//! would close a cycle), a local repair comes first, after Nue's local
//! backtracking: an unreached switch may join through a reached neighbour
//! that moves to another out channel, if every turn this needs (its own,
//! the neighbour's new one, and those of all switches already routed through
//! the neighbour) keeps the CDG acyclic and the new next hop does not route
//! back through the neighbour; the Dijkstra then resumes. If no repair
//! applies, the turns this destination added are withdrawn, the unreached
//! switches and every switch on their tree routes are fixed to the tree
//! route, and the Dijkstra runs again around them. Each rerun fixes more
//! switches, so it ends, at worst with the whole destination on the tree
//! (OpenSM's Nue moves the whole destination to the tree at once).
//!
//! **Cycle checks.** Each layer keeps a topological order of its CDG up to
//! date ([`crate::graph::topo_order`], Pearce and Kelly's dynamic
//! topological sort, shared with LASH): a turn that agrees with the order
//! costs one comparison; otherwise a search bounded by the two positions
//! either finds the cycle or reorders just the channels in between. A turn
//! found to close a cycle stays blocked, as in Nue: the CDG only grows, so it
//! would close one later as well.
//!
//! **Partition.** OpenSM's Nue partitions the destinations with METIS. Here
//! destination switches (with their end ports and the switch's own LID) are
//! split into `k` connected regions of balanced LID counts, grown breadth
//! first from seeds far apart (the lightest region claims the next switch).
//! End ports of one switch share a layer; each gets its own Dijkstra (their
//! loads differ, which spreads the routes toward one switch). A switch's own
//! LID follows the tree of one of its end ports, so management traffic to
//! switches is deadlock free as well.
//!
//! **Parallelism.** Layers are independent except for the channel loads.
//! They run in parallel in rounds of up to [`ROUND`] destinations per layer; within
//! a round a layer sees every layer's loads as of the round's start plus its
//! own since, and the rounds' load changes are summed in a fixed order, so
//! the result does not depend on thread timing.
//!
//! **Files.** `net` holds channel and turn ids and a layer's CDG, `partition`
//! the layers' destinations, `escape` the escape tree and its turns, `layer`
//! the per-destination Dijkstra and the fallback to the escape paths,
//! `repair` the local repair; this file drives the rounds and writes the
//! tables.

mod escape;
mod layer;
mod net;
mod partition;
mod repair;

use super::{EngineOptions, RoutingEngine};
use crate::error::{Error, Result};
use crate::model::Fabric;
use crate::tables::{Lfts, PathSl, Routing, Sl2Vl, NUM_SLS, SL_NONE};
use layer::Layer;
use net::{switch_of_endport, Net};
use partition::{layer_dests, partition};
use rayon::prelude::*;

pub struct Nue;

fn fail(reason: impl Into<String>) -> Error {
    Error::Routing {
        engine: "nue".into(),
        reason: reason.into(),
    }
}

impl RoutingEngine for Nue {
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Nue
    }
    fn description(&self) -> &'static str {
        "Nue: routes on the channel dependency graph, deadlock free with any --max-vls (Domke et al.)"
    }
    fn claims_deadlock_free(&self) -> bool {
        true
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        route(f, opts)
    }
}

/// Most destinations a layer routes per round: few enough that layers see
/// each other's loads often, enough that the rounds' barriers stay rare.
const ROUND: usize = 16;
/// Fewest rounds: small fabrics take shorter rounds so their layers still
/// see each other's loads.
const MIN_ROUNDS: usize = 32;
/// Cost of one hop in units of the mean channel load: a route takes an
/// extra hop only to avoid channels loaded about this much above the mean.
/// Lower values balance harder and lengthen routes; 2 keeps routes on
/// Dragonflies within one hop of minimal with 4 or more VLs.
const HOP_COST: u64 = 2;
/// Destination switches a layer measures distances from to pick the root of
/// its escape tree; more only refines a choice that is already central.
const ROOT_SAMPLES: usize = 64;

/// How often the impasse handling ran (for logs and tests).
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    /// Impasses solved by moving one reached switch to another out channel.
    repairs: u64,
    /// Destinations for which some switches had to take their escape route.
    fallbacks: u64,
    /// Switches fixed to their escape route, over all destinations.
    fixed: u64,
}

fn route(f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
    route_with_stats(f, opts, true).map(|(r, _)| r)
}

/// `repair: false` sends every impasse to the escape paths (tests use it to
/// exercise them).
fn route_with_stats(f: &Fabric, opts: &EngineOptions, repair: bool) -> Result<(Routing, Stats)> {
    let t_start = std::time::Instant::now();
    let net = Net::new(f)?;
    let nsw = net.nsw;
    let k = opts.max_vls.clamp(1, 15).min(opts.max_sls.clamp(1, 16)) as usize;

    let mut lfts = Lfts::for_fabric(f);
    let mut sl2vl = Sl2Vl::new(f);
    let mut ident = [0u8; NUM_SLS];
    for (sl, v) in ident.iter_mut().enumerate() {
        // SLs past the layers fold onto them, so no SL leaves the VL budget.
        *v = (sl % k) as u8;
    }
    for row in sl2vl.raw_mut().chunks_exact_mut(NUM_SLS) {
        row.copy_from_slice(&ident);
    }
    for &e in f.endports() {
        sl2vl.set_port_row(e, ident);
    }
    let mut path_sl = PathSl::new(f.max_lid());
    let mut sl_row = vec![SL_NONE; path_sl.width()];

    if nsw > 0 {
        let mut dist = vec![0u32; nsw];
        net.bfs(0, &mut dist, &mut Vec::new());
        if let Some(v) = dist.iter().position(|&d| d == u32::MAX) {
            return Err(fail(format!(
                "the switches are not connected: '{}' cannot reach '{}'",
                f.desc(f.switches()[0]),
                f.desc(f.switches()[v])
            )));
        }
    }

    // End ports per switch, in end-port order.
    let mut ports_of: Vec<Vec<(u16, u8)>> = vec![Vec::new(); nsw];
    for &e in f.endports() {
        let si = switch_of_endport(f, e)?;
        ports_of[si as usize].push((f.lid_of_slot(e), f.port_of(f.remote(e))));
    }
    let switch_lid: Vec<u16> = f.switches().iter().map(|&n| f.switch_lid(n)).collect();
    let weight: Vec<u64> = (0..nsw).map(|v| ports_of[v].len() as u64 + 1).collect();
    let nlayers = k.min(nsw);
    let layer_of = partition(&net, &weight, nlayers);
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); nlayers];
    for (v, &l) in layer_of.iter().enumerate() {
        if let Some(m) = members.get_mut(l as usize) {
            m.push(v as u32);
        } else {
            return Err(fail(format!(
                "internal error: switch '{}' is in no layer",
                f.desc(f.switches()[v])
            )));
        }
    }
    let t_partition = t_start.elapsed().as_secs_f64();

    let mut layers = members
        .par_iter()
        .enumerate()
        .map(|(l, sw)| {
            let dests = layer_dests(sw, &ports_of, &switch_lid);
            Layer::new(&net, l as u8, sw, &weight, dests, repair)
        })
        .collect::<Result<Vec<Layer>>>()?;
    let t_setup = t_start.elapsed().as_secs_f64();

    let total: usize = layers.iter().map(|l| l.dests.len()).sum();
    let most = layers.iter().map(|l| l.dests.len()).max().unwrap_or(0);
    let round = (most / MIN_ROUNDS).clamp(1, ROUND);
    let mut global = vec![0u64; net.nch()];
    loop {
        if layers.iter().all(|l| l.next >= l.dests.len()) {
            break;
        }
        let global_sum = global.iter().sum::<u64>();
        layers
            .par_iter_mut()
            .try_for_each(|l| l.route_round(&net, &global, global_sum, nlayers as u64, round))?;
        for l in &mut layers {
            for (g, d) in global.iter_mut().zip(l.delta.iter_mut()) {
                *g += *d;
                *d = 0;
            }
            l.delta_sum = 0;
        }
        let done: usize = layers.iter().map(|l| l.next.min(l.dests.len())).sum();
        opts.report(done as u64, total as u64);
    }
    let t_routes = t_start.elapsed().as_secs_f64();

    // Columns to rows: each switch row gathers one byte per routed LID.
    let mut entries: Vec<(u16, u32, u32)> = Vec::with_capacity(total * 2);
    for (l, layer) in layers.iter().enumerate() {
        for (i, d) in layer.dests.iter().enumerate() {
            entries.push((d.lid, l as u32, i as u32));
            sl_row[d.lid as usize] = l as u8;
            if d.switch_lid != 0 {
                entries.push((d.switch_lid, l as u32, i as u32));
                sl_row[d.switch_lid as usize] = l as u8;
            }
        }
    }
    lfts.par_rows_mut().enumerate().for_each(|(v, row)| {
        for &(lid, l, i) in &entries {
            let layer = &layers[l as usize];
            let d = &layer.dests[i as usize];
            let p = layer.cols[i as usize * nsw + v];
            row[lid as usize] = if lid == d.switch_lid && v == d.switch as usize {
                0
            } else {
                p
            };
        }
    });
    let row = path_sl.push_row(&sl_row);
    for &e in f.endports() {
        path_sl.assign(f.lid_of_slot(e), row);
    }

    let stats = Stats {
        repairs: layers.iter().map(|l| l.repairs).sum(),
        fallbacks: layers.iter().map(|l| l.fallbacks).sum(),
        fixed: layers.iter().map(|l| l.fixed_total).sum(),
    };
    tracing::debug!(
        layers = nlayers,
        destinations = total,
        repairs = stats.repairs,
        fallbacks = stats.fallbacks,
        fixed = stats.fixed,
        reruns = layers.iter().map(|l| l.reruns).sum::<u64>(),
        blocked = layers.iter().map(|l| l.blocked).sum::<u64>(),
        reorders = layers.iter().map(|l| l.order.reorders()).sum::<u64>(),
        t_partition,
        t_setup,
        t_routes,
        t_total = t_start.elapsed().as_secs_f64(),
        "nue routed"
    );
    let routing = Routing {
        lfts,
        sl2vl: Some(sl2vl),
        path_sl: Some(path_sl),
        vls_needed: None,
    };
    Ok((routing, stats))
}

#[cfg(test)]
mod tests;
