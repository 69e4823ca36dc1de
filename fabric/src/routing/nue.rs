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
//! date (Pearce and Kelly, ACM JEA 2006): a turn that agrees with the order
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

use super::{EngineOptions, RoutingEngine};
use crate::error::{Error, Result};
use crate::graph::SwitchGraph;
use crate::model::{Fabric, NONE};
use crate::tables::{Lfts, PathSl, Routing, Sl2Vl, NUM_SLS, SL_NONE};
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

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

/// States of a turn in a layer's CDG.
const UNUSED: u8 = 0;
const USED: u8 = 1;
const BLOCKED: u8 = 2;

/// The switch graph with dense channel ids: switch `x`'s out channels are
/// `off[x]..off[x + 1]`, in the order of [`SwitchGraph`].
struct Net {
    nsw: usize,
    off: Vec<u32>,
    head: Vec<u32>,
    tail: Vec<u32>,
    /// The channel of the same link in the other direction.
    rev: Vec<u32>,
    /// Out port at the tail switch.
    port: Vec<u8>,
    /// Turns out of channel `c` are `tbase[c] + k` for the `k`-th out channel
    /// of its head switch.
    tbase: Vec<u32>,
    nturns: usize,
    /// End ports attached to each switch: the sources whose load counts.
    hosts: Vec<u64>,
}

impl Net {
    fn new(f: &Fabric) -> Result<Self> {
        let g = SwitchGraph::new(f);
        let nsw = g.len();
        let nch = g.adj.len();
        let mut ch_of_slot = vec![NONE; f.num_slots()];
        for (c, &(_, s)) in g.adj.iter().enumerate() {
            ch_of_slot[s as usize] = c as u32;
        }
        let mut tail = Vec::with_capacity(nch);
        for x in 0..nsw {
            tail.extend(std::iter::repeat_n(
                x as u32,
                (g.off[x + 1] - g.off[x]) as usize,
            ));
        }
        let head: Vec<u32> = g.adj.iter().map(|&(nb, _)| nb).collect();
        let port = g.adj.iter().map(|&(_, s)| f.port_of(s)).collect();
        let rev = g
            .adj
            .iter()
            .map(|&(_, s)| match ch_of_slot.get(f.remote(s) as usize) {
                Some(&c) if c != NONE => Ok(c),
                _ => Err(fail(format!(
                    "internal error: the link at port {} of '{}' has no reverse channel",
                    f.port_of(s),
                    f.desc(f.node_of(s))
                ))),
            })
            .collect::<Result<Vec<u32>>>()?;
        let mut tbase = Vec::with_capacity(nch);
        let mut nturns = 0usize;
        for &h in &head {
            tbase.push(u32::try_from(nturns).map_err(|_| fail("too many turns"))?);
            nturns += (g.off[h as usize + 1] - g.off[h as usize]) as usize;
        }
        let mut hosts = vec![0u64; nsw];
        for &e in f.endports() {
            let si = switch_of_endport(f, e)?;
            hosts[si as usize] += 1;
        }
        Ok(Self {
            nsw,
            off: g.off,
            head,
            tail,
            rev,
            port,
            tbase,
            nturns,
            hosts,
        })
    }

    fn nch(&self) -> usize {
        self.head.len()
    }

    #[inline]
    fn outs(&self, x: u32) -> std::ops::Range<u32> {
        self.off[x as usize]..self.off[x as usize + 1]
    }

    /// Turn id of `a -> b`; `b` must leave the head of `a`.
    #[inline]
    fn turn(&self, a: u32, b: u32) -> usize {
        (self.tbase[a as usize] + (b - self.off[self.head[a as usize] as usize])) as usize
    }

    /// Hop distances from `src` (u32::MAX = unreached).
    fn bfs(&self, src: u32, dist: &mut [u32], queue: &mut Vec<u32>) {
        dist.fill(u32::MAX);
        queue.clear();
        dist[src as usize] = 0;
        queue.push(src);
        let mut i = 0;
        while i < queue.len() {
            let x = queue[i];
            i += 1;
            for c in self.outs(x) {
                let y = self.head[c as usize];
                if dist[y as usize] == u32::MAX {
                    dist[y as usize] = dist[x as usize] + 1;
                    queue.push(y);
                }
            }
        }
    }
}

fn switch_of_endport(f: &Fabric, e: u32) -> Result<u32> {
    let r = f.remote(e);
    let si = if r == NONE {
        None
    } else {
        f.switch_index(f.node_of(r))
    };
    si.ok_or_else(|| {
        fail(format!(
            "end port of '{}' is not linked to a switch",
            f.desc(f.node_of(e))
        ))
    })
}

/// One LID to route, or an end port and its switch's LID sharing a tree.
#[derive(Clone, Copy)]
struct Dest {
    switch: u32,
    lid: u16,
    /// Port of `switch` that delivers `lid` (0 for the switch itself).
    port: u8,
    /// The switch's own LID when it follows this tree (0 = none).
    switch_lid: u16,
}

impl Dest {
    fn end_port(&self) -> bool {
        self.port != 0
    }
}

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
        reorders = layers.iter().map(|l| l.order.reorders).sum::<u64>(),
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

/// A layer's destinations: the `j`-th end port of every member switch
/// before any `(j + 1)`-th, so consecutive Dijkstras target different
/// switches and loads build up evenly; switches without end ports last.
fn layer_dests(members: &[u32], ports_of: &[Vec<(u16, u8)>], switch_lid: &[u16]) -> Vec<Dest> {
    let mut dests = Vec::new();
    let most = members
        .iter()
        .map(|&s| ports_of[s as usize].len())
        .max()
        .unwrap_or(0);
    for j in 0..most {
        for &s in members {
            if let Some(&(lid, port)) = ports_of[s as usize].get(j) {
                dests.push(Dest {
                    switch: s,
                    lid,
                    port,
                    switch_lid: if j == 0 { switch_lid[s as usize] } else { 0 },
                });
            }
        }
    }
    for &s in members {
        if ports_of[s as usize].is_empty() && switch_lid[s as usize] != 0 {
            dests.push(Dest {
                switch: s,
                lid: switch_lid[s as usize],
                port: 0,
                switch_lid: 0,
            });
        }
    }
    dests
}

/// Splits the switches into `k` connected regions of similar weight: seeds
/// as far apart as BFS finds them, then the lightest region that can still
/// grow claims the next switch of its breadth-first frontier.
fn partition(net: &Net, weight: &[u64], k: usize) -> Vec<u32> {
    let n = net.nsw;
    let mut layer_of = vec![NONE; n];
    if n == 0 || k == 0 {
        return layer_of;
    }
    let mut dist = vec![0u32; n];
    let mut tmp = vec![0u32; n];
    let mut queue = Vec::new();
    net.bfs(0, &mut dist, &mut queue);
    let farthest = |d: &[u32]| (0..n).max_by_key(|&v| (d[v], Reverse(v))).unwrap_or(0) as u32;
    let mut seeds = vec![farthest(&dist)];
    net.bfs(seeds[0], &mut dist, &mut queue);
    while seeds.len() < k {
        let s = farthest(&dist);
        if dist[s as usize] == 0 {
            break;
        }
        seeds.push(s);
        net.bfs(s, &mut tmp, &mut queue);
        for (d, &t) in dist.iter_mut().zip(&tmp) {
            *d = (*d).min(t);
        }
    }
    let mut load = vec![0u64; seeds.len()];
    let mut frontier: Vec<VecDeque<u32>> = vec![VecDeque::new(); seeds.len()];
    let claim =
        |r: usize, v: u32, layer_of: &mut [u32], load: &mut [u64], fr: &mut VecDeque<u32>| {
            layer_of[v as usize] = r as u32;
            load[r] += weight[v as usize];
            for c in net.outs(v) {
                let y = net.head[c as usize];
                if layer_of[y as usize] == NONE {
                    fr.push_back(y);
                }
            }
        };
    for (r, &s) in seeds.iter().enumerate() {
        claim(r, s, &mut layer_of, &mut load, &mut frontier[r]);
    }
    let mut left = n - seeds.len();
    while left > 0 {
        let mut best: Option<usize> = None;
        for r in 0..seeds.len() {
            while let Some(&v) = frontier[r].front() {
                if layer_of[v as usize] == NONE {
                    break;
                }
                frontier[r].pop_front();
            }
            if !frontier[r].is_empty() && best.is_none_or(|b| load[r] < load[b]) {
                best = Some(r);
            }
        }
        let Some(r) = best else { break };
        if let Some(v) = frontier[r].pop_front() {
            claim(r, v, &mut layer_of, &mut load, &mut frontier[r]);
            left -= 1;
        }
    }
    layer_of
}

/// Topological order of one layer's CDG, kept up to date as turns are added
/// (Pearce and Kelly's dynamic topological sort).
struct Order {
    ord: Vec<u32>,
    mark: Vec<u32>,
    gen: u32,
    fwd: Vec<u32>,
    bwd: Vec<u32>,
    stack: Vec<u32>,
    pool: Vec<u32>,
    reorders: u64,
}

impl Order {
    /// Whether turn `a -> b` can join the CDG (`turns`, USED entries) without
    /// closing a cycle; if so the order is updated to admit it (the caller
    /// marks the turn USED).
    fn try_add(&mut self, net: &Net, turns: &[u8], a: u32, b: u32) -> bool {
        let lb = self.ord[b as usize];
        let ub = self.ord[a as usize];
        if ub < lb {
            return true;
        }
        if self.gen >= u32::MAX - 2 {
            self.mark.fill(0);
            self.gen = 0;
        }
        let gf = self.gen + 1;
        let gb = self.gen + 2;
        self.gen += 2;
        // Channels reachable from b that sit before a: a among them is a cycle.
        self.fwd.clear();
        self.stack.clear();
        self.stack.push(b);
        self.mark[b as usize] = gf;
        while let Some(v) = self.stack.pop() {
            self.fwd.push(v);
            let x = net.head[v as usize];
            let base = net.tbase[v as usize] as usize;
            let o0 = net.off[x as usize];
            let row = &turns[base..base + (net.off[x as usize + 1] - o0) as usize];
            for (i, &t) in row.iter().enumerate() {
                if t != USED {
                    continue;
                }
                let w = o0 + i as u32;
                if w == a {
                    return false;
                }
                if self.mark[w as usize] != gf && self.ord[w as usize] < ub {
                    self.mark[w as usize] = gf;
                    self.stack.push(w);
                }
            }
        }
        // Channels that reach a and sit after b.
        self.bwd.clear();
        self.stack.push(a);
        self.mark[a as usize] = gb;
        while let Some(v) = self.stack.pop() {
            self.bwd.push(v);
            let x = net.tail[v as usize];
            let idx = v - net.off[x as usize];
            for o in net.outs(x) {
                let w = net.rev[o as usize];
                if turns[(net.tbase[w as usize] + idx) as usize] == USED
                    && self.mark[w as usize] != gb
                    && self.ord[w as usize] > lb
                {
                    self.mark[w as usize] = gb;
                    self.stack.push(w);
                }
            }
        }
        // Both sets keep their inner order; the a side moves before the b
        // side, within the positions they held.
        let ord = &mut self.ord;
        self.fwd.sort_unstable_by_key(|&v| ord[v as usize]);
        self.bwd.sort_unstable_by_key(|&v| ord[v as usize]);
        self.pool.clear();
        self.pool
            .extend(self.bwd.iter().chain(&self.fwd).map(|&v| ord[v as usize]));
        self.pool.sort_unstable();
        for (&v, &p) in self.bwd.iter().chain(&self.fwd).zip(&self.pool) {
            ord[v as usize] = p;
        }
        self.reorders += 1;
        true
    }
}

/// One virtual layer: its destinations, escape tree, CDG and scratch space.
struct Layer {
    sl: u8,
    dests: Vec<Dest>,
    /// Whether impasses try a local repair before the escape paths.
    repair: bool,
    /// Next destination to route.
    next: usize,
    /// Per switch: the channel toward its escape-tree parent (NONE at the root).
    up: Vec<u32>,
    turns: Vec<u8>,
    order: Order,
    /// Load this layer added since the current round started, and its sum.
    delta: Vec<u64>,
    delta_sum: u64,
    /// Per routed destination: the out port of every switch.
    cols: Vec<u8>,
    s: Scratch,
    fallbacks: u64,
    repairs: u64,
    fixed_total: u64,
    reruns: u64,
    blocked: u64,
}

/// Per-destination working arrays, reused; stamps avoid clearing them.
struct Scratch {
    pass: u32,
    seen: Vec<u32>,
    dist: Vec<u64>,
    out: Vec<u32>,
    /// Cheapest key queued per unreached switch (valid when `bstamp` = pass).
    best: Vec<(u64, u32)>,
    bstamp: Vec<u32>,
    settled: Vec<u32>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    added: Vec<u32>,
    /// Per turn: the pass that added it (to tell this pass's turns apart).
    astamp: Vec<u32>,
    blocked_now: Vec<u32>,
    /// A repair changed an out channel, so `settled` may list a switch
    /// before its next hop.
    rerouted: bool,
    hops: Vec<u32>,
    hstamp: Vec<u32>,
    cands: Vec<(u64, u32, u32)>,
    tentative: Vec<u32>,
    dest_stamp: u32,
    /// Ancestors of the destination in the escape tree, with the channel
    /// down toward it.
    anc: Vec<u32>,
    down: Vec<u32>,
    /// Switches fixed to their escape route, with its hops and weight.
    fixed: Vec<u32>,
    fixed_list: Vec<u32>,
    ehops: Vec<u32>,
    edist: Vec<u64>,
    path: Vec<u32>,
    flow: Vec<u64>,
}

impl Scratch {
    /// Offers the channels into the settled switch `x` to their tails.
    #[inline]
    fn relax(&mut self, net: &Net, x: u32, pass: u32, w: impl Fn(u32) -> u64) {
        let dx = self.dist[x as usize];
        for o in net.outs(x) {
            let c = net.rev[o as usize];
            let y = net.tail[c as usize] as usize;
            if self.seen[y] == pass {
                continue;
            }
            let key = dx + w(c);
            if self.bstamp[y] != pass || (key, c) < self.best[y] {
                self.bstamp[y] = pass;
                self.best[y] = (key, c);
                self.heap.push(Reverse((key, c)));
            }
        }
    }
}

impl Layer {
    fn new(
        net: &Net,
        sl: u8,
        members: &[u32],
        weight: &[u64],
        dests: Vec<Dest>,
        repair: bool,
    ) -> Result<Self> {
        let n = net.nsw;
        let nch = net.nch();
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

        // Start from an order the escape turns agree with: up channels by
        // falling tail depth, other channels, down channels by rising head
        // depth.
        let mut key: Vec<(u8, u32, u32)> = (0..nch as u32)
            .map(|c| {
                let (u, x) = (net.tail[c as usize], net.head[c as usize]);
                if up[u as usize] == c {
                    (0, u32::MAX - depth[u as usize], c)
                } else if up[x as usize] == net.rev[c as usize] {
                    (2, depth[x as usize], c)
                } else {
                    (1, 0, c)
                }
            })
            .collect();
        key.sort_unstable();
        let mut ord = vec![0u32; nch];
        for (p, &(_, _, c)) in key.iter().enumerate() {
            ord[c as usize] = p as u32;
        }
        let mut layer = Layer {
            sl,
            dests,
            next: 0,
            repair,
            up,
            turns: vec![UNUSED; net.nturns],
            order: Order {
                ord,
                mark: vec![0; nch],
                gen: 0,
                fwd: Vec::new(),
                bwd: Vec::new(),
                stack: Vec::new(),
                pool: Vec::new(),
                reorders: 0,
            },
            delta: vec![0; nch],
            delta_sum: 0,
            cols: Vec::new(),
            s: Scratch {
                pass: 0,
                seen: vec![0; n],
                dist: vec![0; n],
                out: vec![NONE; n],
                best: vec![(0, 0); n],
                bstamp: vec![0; n],
                settled: Vec::with_capacity(n),
                heap: BinaryHeap::new(),
                added: Vec::new(),
                astamp: vec![0; net.nturns],
                blocked_now: Vec::new(),
                rerouted: false,
                hops: vec![0; n],
                hstamp: vec![0; n],
                cands: Vec::new(),
                tentative: Vec::new(),
                dest_stamp: 0,
                anc: vec![0; n],
                down: vec![NONE; n],
                fixed: vec![0; n],
                fixed_list: Vec::new(),
                ehops: vec![0; n],
                edist: vec![0; n],
                path: Vec::new(),
                flow: vec![0; n],
            },
            fallbacks: 0,
            repairs: 0,
            fixed_total: 0,
            reruns: 0,
            blocked: 0,
        };
        layer.cols.reserve(layer.dests.len() * n);

        // Escape turns: up-up at every switch; up-down and down-down only
        // toward children whose subtree holds a destination of the layer.
        let mut kids: Vec<Vec<u32>> = vec![Vec::new(); n];
        for v in 0..n {
            let c = layer.up[v];
            if c != NONE {
                kids[net.head[c as usize] as usize].push(v as u32);
            }
        }
        for (v, kv) in kids.iter().enumerate() {
            let upv = layer.up[v];
            for &ch in kv {
                let upc = layer.up[ch as usize];
                if upv != NONE {
                    layer.add_escape_turn(net, upc, upv)?;
                }
            }
            for &c2 in kv {
                if !has_dest[c2 as usize] {
                    continue;
                }
                let dn2 = net.rev[layer.up[c2 as usize] as usize];
                for &c1 in kv {
                    if c1 != c2 {
                        layer.add_escape_turn(net, layer.up[c1 as usize], dn2)?;
                    }
                }
                if upv != NONE {
                    layer.add_escape_turn(net, net.rev[upv as usize], dn2)?;
                }
            }
        }
        Ok(layer)
    }

    fn add_escape_turn(&mut self, net: &Net, a: u32, b: u32) -> Result<()> {
        let t = net.turn(a, b);
        if self.turns[t] == USED {
            return Ok(());
        }
        if !self.order.try_add(net, &self.turns, a, b) {
            return Err(fail("internal error: the escape turns are cyclic"));
        }
        self.turns[t] = USED;
        Ok(())
    }

    fn route_round(
        &mut self,
        net: &Net,
        global: &[u64],
        global_sum: u64,
        nlayers: u64,
        round: usize,
    ) -> Result<()> {
        let end = (self.next + round).min(self.dests.len());
        while self.next < end {
            let d = self.dests[self.next];
            // The other layers are assumed to have added as much as this one
            // since the round started.
            let sum = global_sum + self.delta_sum * nlayers;
            let hop = HOP_COST * sum / net.nch().max(1) as u64 + 1;
            self.route_dest(net, global, hop, d)?;
            self.next += 1;
        }
        Ok(())
    }

    fn route_dest(&mut self, net: &Net, global: &[u64], hop: u64, d: Dest) -> Result<()> {
        let n = net.nsw;
        let t = d.switch;
        let Layer {
            sl,
            repair: try_repair,
            up,
            turns,
            order,
            delta,
            delta_sum,
            cols,
            s,
            fallbacks,
            repairs,
            fixed_total,
            reruns,
            blocked,
            ..
        } = self;
        let w = |delta: &[u64], c: u32| global[c as usize] + delta[c as usize] + hop;

        s.dest_stamp += 1;
        let ds = s.dest_stamp;
        let mut a = t;
        while up[a as usize] != NONE {
            let c = up[a as usize];
            let p = net.head[c as usize];
            s.anc[p as usize] = ds;
            s.down[p as usize] = net.rev[c as usize];
            a = p;
        }
        // Escape-route out channel toward the destination.
        let esc = |anc: &[u32], down: &[u32], v: u32| {
            if anc[v as usize] == ds {
                down[v as usize]
            } else {
                up[v as usize]
            }
        };
        s.fixed_list.clear();

        let mut first = true;
        loop {
            if !first {
                *reruns += 1;
            }
            first = false;
            s.pass += 1;
            let pass = s.pass;
            s.settled.clear();
            s.heap.clear();
            s.added.clear();
            s.tentative.clear();
            s.blocked_now.clear();
            s.seen[t as usize] = pass;
            s.dist[t as usize] = 0;
            s.out[t as usize] = NONE;
            s.settled.push(t);
            for i in 0..s.fixed_list.len() {
                let v = s.fixed_list[i];
                s.seen[v as usize] = pass;
                s.dist[v as usize] = s.edist[v as usize];
                s.out[v as usize] = esc(&s.anc, &s.down, v);
                s.settled.push(v);
            }
            // Each unreached switch keeps only its cheapest way in on the
            // heap; the others are looked up again if that one is refused.
            for i in 0..s.settled.len() {
                let x = s.settled[i];
                s.relax(net, x, pass, |c| w(delta, c));
            }
            s.rerouted = false;
            loop {
                while let Some(Reverse((du, c))) = s.heap.pop() {
                    let u = net.tail[c as usize];
                    if s.seen[u as usize] == pass {
                        continue;
                    }
                    let x = net.head[c as usize];
                    let admitted =
                        x == t || admit(net, turns, order, s, pass, c, s.out[x as usize]);
                    if !admitted {
                        // Only the cheapest way in was queued; queue all the
                        // others that are still open (none is cheaper than
                        // the refused one, which was the cheapest).
                        let mut best = (u64::MAX, NONE);
                        for o in net.outs(u) {
                            let x2 = net.head[o as usize];
                            if s.seen[x2 as usize] != pass
                                || (x2 != t && turns[net.turn(o, s.out[x2 as usize])] == BLOCKED)
                            {
                                continue;
                            }
                            let key = s.dist[x2 as usize] + w(delta, o);
                            best = best.min((key, o));
                            s.heap.push(Reverse((key, o)));
                        }
                        s.best[u as usize] = best;
                        continue;
                    }
                    s.seen[u as usize] = pass;
                    s.dist[u as usize] = du;
                    s.out[u as usize] = c;
                    s.settled.push(u);
                    s.relax(net, u, pass, |c| w(delta, c));
                }
                if s.settled.len() == n
                    || !*try_repair
                    || !repair(net, turns, order, s, t, pass, ds, &|c| w(delta, c))
                {
                    break;
                }
                *repairs += 1;
            }
            *blocked += s.blocked_now.len() as u64;
            if s.settled.len() == n {
                break;
            }

            // Impasse: withdraw this destination's new turns (and the blocks
            // judged against them), fix the unreached switches and the rest of
            // their escape routes, and try again around them.
            if s.fixed_list.is_empty() {
                *fallbacks += 1;
            }
            for &tid in s.added.iter().chain(&s.blocked_now) {
                turns[tid as usize] = UNUSED;
            }
            let before = s.fixed_list.len();
            for u in 0..n as u32 {
                if s.seen[u as usize] == pass || s.fixed[u as usize] == ds {
                    continue;
                }
                s.path.clear();
                let mut v = u;
                while v != t && s.fixed[v as usize] != ds {
                    s.fixed[v as usize] = ds;
                    s.path.push(v);
                    let e = esc(&s.anc, &s.down, v);
                    if e == NONE {
                        return Err(fail("internal error: escape route leaves the tree"));
                    }
                    v = net.head[e as usize];
                }
                let (mut h, mut dd) = if v == t {
                    (0, 0)
                } else {
                    (s.ehops[v as usize], s.edist[v as usize])
                };
                for &p in s.path.iter().rev() {
                    let e = esc(&s.anc, &s.down, p);
                    h += 1;
                    dd += w(delta, e);
                    s.ehops[p as usize] = h;
                    s.edist[p as usize] = dd;
                    s.fixed_list.push(p);
                }
            }
            *fixed_total += (s.fixed_list.len() - before) as u64;
            if s.fixed_list.len() == before {
                return Err(fail(format!(
                    "internal error: no progress routing to LID {} in layer {sl}",
                    d.lid
                )));
            }
            let ehops = &s.ehops;
            s.fixed_list
                .sort_unstable_by_key(|&v| (ehops[v as usize], v));
            // Escape turns were inserted up front; check rather than trust.
            for &v in &s.fixed_list {
                let e = esc(&s.anc, &s.down, v);
                let x = net.head[e as usize];
                if x != t && turns[net.turn(e, esc(&s.anc, &s.down, x))] != USED {
                    return Err(fail("internal error: an escape turn is missing"));
                }
            }
        }

        // Loads: each switch's end ports cross every channel of its route.
        if d.end_port() {
            if s.rerouted {
                s.order_by_hops(net, t, s.pass);
            }
            s.flow.copy_from_slice(&net.hosts);
            for &v in s.settled.iter().rev() {
                if v == t {
                    continue;
                }
                let c = s.out[v as usize];
                let fl = s.flow[v as usize];
                delta[c as usize] += fl;
                *delta_sum += fl;
                s.flow[net.head[c as usize] as usize] += fl;
            }
        }
        for v in 0..n {
            cols.push(if v as u32 == t {
                d.port
            } else {
                net.port[s.out[v] as usize]
            });
        }
        Ok(())
    }
}

/// Whether turn `a -> b` is in the layer's CDG or joins it without closing
/// a cycle; records what it decided for this pass.
fn admit(
    net: &Net,
    turns: &mut [u8],
    order: &mut Order,
    s: &mut Scratch,
    pass: u32,
    a: u32,
    b: u32,
) -> bool {
    let tid = net.turn(a, b);
    match turns[tid] {
        USED => true,
        BLOCKED => false,
        _ => {
            if order.try_add(net, turns, a, b) {
                turns[tid] = USED;
                s.added.push(tid as u32);
                s.astamp[tid] = pass;
                s.tentative.push(tid as u32);
                true
            } else {
                turns[tid] = BLOCKED;
                s.blocked_now.push(tid as u32);
                false
            }
        }
    }
}

/// Local repair of an impasse (after Nue's local backtracking): an
/// unreached switch `u` joins through a reached neighbour `x` that moves
/// to another out channel `x -> y`, if the turns into and out of that
/// channel, including those of every switch already routed through `x`,
/// keep the CDG acyclic and `y` does not route through `x`. Returns whether
/// a switch joined; the caller resumes the Dijkstra from it.
#[allow(clippy::too_many_arguments)]
fn repair(
    net: &Net,
    turns: &mut [u8],
    order: &mut Order,
    s: &mut Scratch,
    t: u32,
    pass: u32,
    ds: u32,
    w: &dyn Fn(u32) -> u64,
) -> bool {
    for u in 0..net.nsw as u32 {
        if s.seen[u as usize] == pass {
            continue;
        }
        s.cands.clear();
        for c in net.outs(u) {
            let x = net.head[c as usize];
            if s.seen[x as usize] != pass || x == t || s.fixed[x as usize] == ds {
                continue;
            }
            for b in net.outs(x) {
                let y = net.head[b as usize];
                if b != s.out[x as usize] && s.seen[y as usize] == pass {
                    s.cands.push((s.dist[y as usize] + w(b) + w(c), c, b));
                }
            }
        }
        s.cands.sort_unstable();
        for i in 0..s.cands.len() {
            let (_, c, b) = s.cands[i];
            let x = net.head[c as usize];
            let y = net.head[b as usize];
            let mut v = y;
            let mut via_x = false;
            while v != t {
                if v == x {
                    via_x = true;
                    break;
                }
                v = net.head[s.out[v as usize] as usize];
            }
            if via_x {
                continue;
            }
            s.tentative.clear();
            let blocked_before = s.blocked_now.len();
            let mut ok = admit(net, turns, order, s, pass, c, b)
                && (y == t || admit(net, turns, order, s, pass, b, s.out[y as usize]));
            for o in net.outs(x) {
                if !ok {
                    break;
                }
                let z = net.rev[o as usize];
                let zt = net.tail[z as usize];
                if s.seen[zt as usize] == pass && s.out[zt as usize] == z {
                    ok = admit(net, turns, order, s, pass, z, b);
                }
            }
            if !ok {
                // A refusal judged with this attempt's own turns in place
                // may not hold without them.
                for &tid in s.tentative.iter().chain(&s.blocked_now[blocked_before..]) {
                    turns[tid as usize] = UNUSED;
                }
                s.blocked_now.truncate(blocked_before);
                continue;
            }
            // Turns only the old channel of x needed, if this destination
            // added them, leave the CDG again.
            let old = s.out[x as usize];
            let oy = net.head[old as usize];
            let mut drop = |tid: usize| {
                if s.astamp[tid] == pass && turns[tid] == USED {
                    turns[tid] = UNUSED;
                }
            };
            if oy != t {
                drop(net.turn(old, s.out[oy as usize]));
            }
            for o in net.outs(x) {
                let z = net.rev[o as usize];
                let zt = net.tail[z as usize];
                if s.seen[zt as usize] == pass && s.out[zt as usize] == z {
                    drop(net.turn(z, old));
                }
            }
            s.out[x as usize] = b;
            s.dist[x as usize] = s.dist[y as usize] + w(b);
            s.seen[u as usize] = pass;
            s.dist[u as usize] = s.dist[x as usize] + w(c);
            s.out[u as usize] = c;
            s.settled.push(u);
            s.relax(net, u, pass, w);
            s.rerouted = true;
            return true;
        }
    }
    false
}

impl Scratch {
    /// Reorders `settled` by hops to the destination `t`, so every switch
    /// comes after its next hop again.
    fn order_by_hops(&mut self, net: &Net, t: u32, pass: u32) {
        let mut path = std::mem::take(&mut self.path);
        for i in 0..self.settled.len() {
            let u = self.settled[i];
            path.clear();
            let mut v = u;
            while v != t && self.hstamp[v as usize] != pass {
                path.push(v);
                v = net.head[self.out[v as usize] as usize];
            }
            let mut h = if v == t { 0 } else { self.hops[v as usize] };
            for &p in path.iter().rev() {
                h += 1;
                self.hops[p as usize] = h;
                self.hstamp[p as usize] = pass;
            }
        }
        self.hops[t as usize] = 0;
        self.path = path;
        let hops = &self.hops;
        self.settled.sort_by_key(|&v| hops[v as usize]);
    }
}

/// The switch with the least summed hop distance to the layer's
/// destination switches (weighted by their LIDs), measured from an even sample of
/// them; ties go to the lowest switch index.
fn pick_root(net: &Net, members: &[u32], weight: &[u64]) -> u32 {
    let n = net.nsw;
    let step = members.len().div_ceil(ROOT_SAMPLES).max(1);
    let mut sum = vec![0u64; n];
    let mut dist = vec![0u32; n];
    let mut queue = Vec::new();
    for &m in members.iter().step_by(step) {
        net.bfs(m, &mut dist, &mut queue);
        let wm = weight[m as usize];
        for (s, &d) in sum.iter_mut().zip(&dist) {
            *s += wm * d as u64;
        }
    }
    (0..n as u32)
        .min_by_key(|&v| (sum[v as usize], v))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{generate, Topology};
    use crate::verify::verify;

    #[test]
    fn impasses_are_repaired_or_escape_and_stay_deadlock_free() {
        let mut with = Stats::default();
        let mut without = Stats::default();
        for seed in 0..40u64 {
            for (switches, degree) in [(12, 3), (16, 2), (20, 4), (30, 3)] {
                let f = generate(&Topology::RandomRegular {
                    switches,
                    degree,
                    hosts: 2,
                    seed,
                })
                .unwrap();
                for vls in [1, 2] {
                    let opts = EngineOptions {
                        max_vls: vls,
                        ..EngineOptions::default()
                    };
                    for (repair, total) in [(true, &mut with), (false, &mut without)] {
                        let (r, st) = route_with_stats(&f, &opts, repair).unwrap();
                        let rep = verify(&f, &r);
                        assert!(
                            rep.ok(),
                            "seed {seed} {switches}/{degree} vls {vls} repair {repair}"
                        );
                        total.repairs += st.repairs;
                        total.fallbacks += st.fallbacks;
                        total.fixed += st.fixed;
                    }
                }
            }
        }
        // Both ways out of an impasse were taken, and repairs spare most
        // escape routes.
        assert!(with.repairs > 0 && without.repairs == 0, "{with:?}");
        assert!(without.fallbacks > with.fallbacks, "{with:?} {without:?}");
        assert!(without.fixed > 0);
        println!("with repair {with:?}, without {without:?}");
    }
}
