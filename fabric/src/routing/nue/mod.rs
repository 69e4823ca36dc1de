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
//! **Cycle checks.** Each layer keeps levels of its CDG's channels up to
//! date ([`crate::graph::level_order`], Bender, Fineman, Gilbert and
//! Tarjan's incremental cycle detection): a turn to a higher level costs
//! one comparison; otherwise a bounded search among equal levels and a
//! forward search that only lifts levels either finds the cycle or admits
//! the turn. The answer is exact, so the routes are those a total order
//! (Pearce and Kelly's, which LASH and DQR keep) gives, at a fraction of
//! the searching near the LID limit. A turn found to close a cycle stays
//! blocked, as in Nue: the CDG only grows, so it would close one later as
//! well.
//!
//! **Partition.** OpenSM's Nue partitions the destinations with METIS. Here
//! destination switches (with their end ports and the switch's own LID) are
//! split into `k` connected regions of balanced LID counts, grown breadth
//! first from seeds far apart (the lightest region claims the next switch).
//! End ports of one switch share a layer; each gets its own Dijkstra (their
//! loads differ, which spreads the routes toward one switch). With LMC each
//! LID of a port is a destination of its own, the ports' base LIDs first:
//! a second LID is routed once the first LIDs have loaded their channels,
//! so it takes other ways where the fabric offers them. A switch's own
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
use crate::tables::{Lfts, NUM_SLS, PathSl, Routing, SL_NONE, Sl2Vl};
use layer::Layer;
use net::{Net, switch_of_endport};
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
    fn split(&self, _opts: &EngineOptions) -> crate::routing::Split {
        crate::routing::Split::Rounds
    }
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Nue
    }
    fn description(&self) -> &'static str {
        "Nue: routes on the channel dependency graph, deadlock free with any --max-vls (Domke et al.)"
    }
    fn claims_deadlock_free(&self) -> bool {
        true
    }
    fn routes_lmc(&self) -> bool {
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
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Impasses solved by moving one reached switch to another out channel.
    pub repairs: u64,
    /// Destinations for which some switches had to take their escape route.
    pub fallbacks: u64,
    /// Switches fixed to their escape route, over all destinations.
    pub fixed: u64,
    /// Dijkstras run again around fixed switches.
    pub reruns: u64,
    /// Turns found to close a cycle.
    pub blocked: u64,
    /// Turns that lifted levels in the layers' orders (the wire name is
    /// older than the level orders).
    pub reorders: u64,
    /// Most heap entries one search pass queued (a destination's reruns
    /// are passes of their own): a refused cheapest way re-queues the
    /// switch's other ways, once per refusal, not once per copy.
    pub most_queued: u64,
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.repairs += o.repairs;
        self.fallbacks += o.fallbacks;
        self.fixed += o.fixed;
        self.reruns += o.reruns;
        self.blocked += o.blocked;
        self.reorders += o.reorders;
        self.most_queued = self.most_queued.max(o.most_queued);
    }
}

fn route(f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
    route_with_stats(f, opts, true).map(|(r, _)| r)
}

/// `repair: false` sends every impasse to the escape paths (tests use it to
/// exercise them).
fn route_with_stats(f: &Fabric, opts: &EngineOptions, repair: bool) -> Result<(Routing, Stats)> {
    let t_start = std::time::Instant::now();
    let plan = LayerPlan::with_repair(f, opts, repair)?;
    let t_setup = t_start.elapsed().as_secs_f64();
    let all: Vec<usize> = (0..plan.layers()).collect();
    let mut layers = plan.start(&all)?;
    let mut global = vec![0u64; plan.channels()];
    for _ in 0..plan.rounds() {
        let delta = layers.round(&plan, &global)?;
        for (g, d) in global.iter_mut().zip(&delta) {
            *g += *d;
        }
        opts.report(layers.routed() as u64, plan.destinations() as u64);
    }
    let t_routes = t_start.elapsed().as_secs_f64();
    let (routing, stats) = plan.tables_with_stats(f, layers.finish())?;
    tracing::debug!(
        layers = plan.layers(),
        destinations = plan.destinations(),
        repairs = stats.repairs,
        fallbacks = stats.fallbacks,
        fixed = stats.fixed,
        reruns = stats.reruns,
        blocked = stats.blocked,
        reorders = stats.reorders,
        most_queued = stats.most_queued,
        t_setup,
        t_routes,
        t_total = t_start.elapsed().as_secs_f64(),
        "nue routed"
    );
    Ok((routing, stats))
}

/// What every layer of one Nue run reads: the channels and turns, the
/// partition into layers and each layer's destinations, and the round
/// length. Built from the fabric and the VL budget alone, so the process
/// that routes every layer and the workers that route some of them
/// ([`super::shard`]) build the same plan.
pub struct LayerPlan {
    net: Net,
    /// The VL budget: SLs fold onto this many VLs (layers may be fewer,
    /// one per switch at most).
    vls: usize,
    members: Vec<Vec<u32>>,
    dests: Vec<Vec<partition::Dest>>,
    weight: Vec<u64>,
    round: usize,
    repair: bool,
}

impl LayerPlan {
    pub fn new(f: &Fabric, opts: &EngineOptions) -> Result<Self> {
        Self::with_repair(f, opts, true)
    }

    fn with_repair(f: &Fabric, opts: &EngineOptions, repair: bool) -> Result<Self> {
        let net = Net::new(f)?;
        let nsw = net.nsw;
        let k = opts.max_vls.clamp(1, 15).min(opts.max_sls.clamp(1, 16)) as usize;
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
        // Destination LIDs per switch: every end port's base LID in
        // end-port order, then (with LMC) each next offset of them all, so
        // a port's second LID is routed after the first LIDs of its
        // switch have loaded their channels and takes other ways where the
        // fabric has them. Each LID is a Dijkstra of its own, as in
        // OpenSM's Nue.
        let mut ports_of: Vec<Vec<(u16, u8)>> = vec![Vec::new(); nsw];
        for k in 0..1u16 << f.max_lmc() {
            for &e in f.endports() {
                if k < 1 << f.lmc(e) {
                    let si = switch_of_endport(f, e)?;
                    ports_of[si as usize].push((f.lid_of_slot(e) + k, f.port_of(f.remote(e))));
                }
            }
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
        let dests: Vec<Vec<partition::Dest>> = members
            .iter()
            .map(|sw| layer_dests(sw, &ports_of, &switch_lid))
            .collect();
        let most = dests.iter().map(Vec::len).max().unwrap_or(0);
        Ok(Self {
            net,
            vls: k,
            members,
            dests,
            weight,
            round: (most / MIN_ROUNDS).clamp(1, ROUND),
            repair,
        })
    }

    /// Virtual layers (SLs and VLs) the plan routes over.
    pub fn layers(&self) -> usize {
        self.members.len()
    }

    /// Length of the load vectors [`Layers::round`] reads and returns.
    pub fn channels(&self) -> usize {
        self.net.nch()
    }

    /// Destinations (Dijkstras) in all layers.
    pub fn destinations(&self) -> usize {
        self.dests.iter().map(Vec::len).sum()
    }

    /// Rounds until every layer has routed all its destinations.
    pub fn rounds(&self) -> usize {
        let most = self.dests.iter().map(Vec::len).max().unwrap_or(0);
        most.div_ceil(self.round)
    }

    /// Builds layers `ids` (escape tree, initial CDG), ready for round 0.
    pub fn start(&self, ids: &[usize]) -> Result<Layers> {
        let layers =
            ids.par_iter()
                .map(|&l| {
                    let sw = self.members.get(l).ok_or_else(|| {
                        fail(format!("no layer {l} in a plan of {}", self.layers()))
                    })?;
                    Layer::new(
                        &self.net,
                        l as u8,
                        sw,
                        &self.weight,
                        self.dests[l].clone(),
                        self.repair,
                    )
                })
                .collect::<Result<Vec<Layer>>>()?;
        Ok(Layers {
            ids: ids.to_vec(),
            layers,
            rounds_done: 0,
        })
    }

    /// The tables of the finished layers, each of the plan's layers once
    /// (any order, from any mix of processes).
    pub fn tables(&self, f: &Fabric, parts: Vec<LayerCols>) -> Result<Routing> {
        self.tables_with_stats(f, parts).map(|(r, _)| r)
    }

    fn tables_with_stats(&self, f: &Fabric, parts: Vec<LayerCols>) -> Result<(Routing, Stats)> {
        let nsw = self.net.nsw;
        let cols =
            LayerCols::each_once(parts, self.layers(), "layer", |l| self.dests[l].len() * nsw)
                .map_err(fail)?;

        let mut lfts = Lfts::for_fabric(f);
        let mut sl2vl = Sl2Vl::new(f);
        let mut ident = [0u8; NUM_SLS];
        for (sl, v) in ident.iter_mut().enumerate() {
            // SLs past the budget fold onto it, so no SL leaves it.
            *v = (sl % self.vls.max(1)) as u8;
        }
        for row in sl2vl.raw_mut().chunks_exact_mut(NUM_SLS) {
            row.copy_from_slice(&ident);
        }
        for &e in f.endports() {
            sl2vl.set_port_row(e, ident);
        }
        let mut path_sl = PathSl::new(f.max_lid());
        let mut sl_row = vec![SL_NONE; path_sl.width()];
        // Columns to rows: each switch row gathers one byte per routed LID.
        let mut entries: Vec<(u16, u32, u32)> = Vec::with_capacity(self.destinations() * 2);
        for (l, dests) in self.dests.iter().enumerate() {
            for (i, d) in dests.iter().enumerate() {
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
                let d = &self.dests[l as usize][i as usize];
                let p = cols[l as usize].cols[i as usize * nsw + v];
                row[lid as usize] = if lid == d.switch_lid && v == d.switch as usize {
                    0
                } else {
                    p
                };
            }
        });
        // A destination LID's layer is its SL from every source LID.
        let row = path_sl.push_row(&sl_row);
        for &(_, lid) in f.end_lids() {
            path_sl.assign(lid, row);
        }
        let mut stats = Stats::default();
        for c in &cols {
            stats.add(&c.stats);
        }
        let routing = Routing {
            lfts,
            sl2vl: Some(sl2vl),
            path_sl: Some(path_sl),
            vls_needed: None,
        };
        Ok((routing, stats))
    }
}

/// Some layers of a plan, routed round by round. In round `r` every layer
/// routes its next destinations seeing the load all layers added before
/// the round (`global`) plus its own since: the result depends on the
/// rounds' loads only, not on which process holds which layer.
pub struct Layers {
    ids: Vec<usize>,
    layers: Vec<Layer>,
    rounds_done: usize,
}

impl Layers {
    /// The layers held, as plan indices.
    pub fn ids(&self) -> &[usize] {
        &self.ids
    }

    /// Rounds routed so far.
    pub fn rounds_done(&self) -> usize {
        self.rounds_done
    }

    /// Destinations routed so far.
    pub fn routed(&self) -> usize {
        self.layers.iter().map(|l| l.next.min(l.dests.len())).sum()
    }

    /// Routes the next round on `global` (one load per channel, as of the
    /// round's start) and returns the load these layers added, summed.
    pub fn round(&mut self, plan: &LayerPlan, global: &[u64]) -> Result<Vec<u64>> {
        if global.len() != plan.channels() {
            return Err(fail(format!(
                "round {}: {} channel loads for {} channels",
                self.rounds_done,
                global.len(),
                plan.channels()
            )));
        }
        let global_sum = global.iter().sum::<u64>();
        let nlayers = plan.layers() as u64;
        self.layers
            .par_iter_mut()
            .try_for_each(|l| l.route_round(&plan.net, global, global_sum, nlayers, plan.round))?;
        let mut sum = vec![0u64; plan.channels()];
        for l in &mut self.layers {
            for (s, d) in sum.iter_mut().zip(l.delta.iter_mut()) {
                *s += *d;
                *d = 0;
            }
            l.delta_sum = 0;
        }
        self.rounds_done += 1;
        Ok(sum)
    }

    /// Each layer's columns, once every round has run.
    pub fn finish(self) -> Vec<LayerCols> {
        self.ids
            .into_iter()
            .zip(self.layers)
            .map(|(layer, l)| LayerCols {
                layer,
                stats: Stats {
                    repairs: l.repairs,
                    fallbacks: l.fallbacks,
                    fixed: l.fixed_total,
                    reruns: l.reruns,
                    blocked: l.blocked,
                    reorders: l.order.lifts(),
                    most_queued: l.most_queued,
                },
                cols: l.cols,
            })
            .collect()
    }
}

/// A finished layer: per destination (in the layer's order) the out port
/// of every switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerCols {
    pub layer: usize,
    pub cols: Vec<u8>,
    pub stats: Stats,
}

impl LayerCols {
    /// `parts` in unit order, each of `units` once with `len(unit)` column
    /// bytes (any arrival order, from any mix of processes); otherwise
    /// what is wrong, naming the unit (`what`: "layer", "stream").
    pub fn each_once(
        parts: Vec<LayerCols>,
        units: usize,
        what: &str,
        len: impl Fn(usize) -> usize,
    ) -> std::result::Result<Vec<LayerCols>, String> {
        let mut slots: Vec<Option<LayerCols>> = (0..units).map(|_| None).collect();
        for p in parts {
            let u = p.layer;
            let slot = slots
                .get_mut(u)
                .ok_or_else(|| format!("a part for {what} {u} of {units}"))?;
            let want = len(u);
            if p.cols.len() != want {
                return Err(format!(
                    "{what} {u}: {} column bytes, expected {want}",
                    p.cols.len()
                ));
            }
            if slot.replace(p).is_some() {
                return Err(format!("{what} {u} came back twice"));
            }
        }
        slots
            .into_iter()
            .enumerate()
            .map(|(u, c)| c.ok_or_else(|| format!("{what} {u} did not come back")))
            .collect()
    }
}

#[cfg(test)]
mod tests;
