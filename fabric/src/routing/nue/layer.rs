//! One virtual layer: its destinations, CDG and escape tree, and the
//! per-destination Dijkstra that grows its routes on the CDG.

use super::escape::{EscapeTree, insert_escape_turns};
use super::net::{BLOCKED, Cdg, Net, Turns, UNUSED, USED};
use super::partition::Dest;
use super::repair::repair;
use super::{HOP_COST, fail};
use crate::error::Result;
use crate::graph::level_order::LevelOrder;
use crate::graph::radix_heap::RadixHeap;
use crate::model::NONE;

/// One virtual layer: its destinations, escape tree, CDG and scratch space.
pub(super) struct Layer {
    pub(super) sl: u8,
    pub(super) dests: Vec<Dest>,
    /// Whether impasses try a local repair before the escape paths.
    pub(super) repair: bool,
    /// Next destination to route.
    pub(super) next: usize,
    /// Per switch: the channel toward its escape-tree parent (NONE at the root).
    pub(super) up: Vec<u32>,
    pub(super) turns: Turns,
    pub(super) order: LevelOrder,
    /// Load this layer added since the current round started, and its sum.
    pub(super) delta: Vec<u64>,
    pub(super) delta_sum: u64,
    /// Per routed destination: the out port of every switch.
    pub(super) cols: Vec<u8>,
    pub(super) s: Scratch,
    pub(super) fallbacks: u64,
    pub(super) repairs: u64,
    pub(super) fixed_total: u64,
    pub(super) reruns: u64,
    pub(super) blocked: u64,
    pub(super) most_queued: u64,
}

/// Per-destination working arrays, reused; stamps avoid clearing them.
pub(super) struct Scratch {
    pub(super) pass: u32,
    pub(super) seen: Vec<u32>,
    pub(super) dist: Vec<u64>,
    pub(super) out: Vec<u32>,
    /// Cheapest key queued per unreached switch (valid when `bstamp` = pass).
    pub(super) best: Vec<(u64, u32)>,
    pub(super) bstamp: Vec<u32>,
    pub(super) settled: Vec<u32>,
    pub(super) heap: RadixHeap,
    pub(super) added: Vec<u32>,
    /// Per turn: the pass that added it (to tell this pass's turns apart).
    pub(super) astamp: Vec<u32>,
    pub(super) blocked_now: Vec<u32>,
    /// A repair changed an out channel, so `settled` may list a switch
    /// before its next hop.
    pub(super) rerouted: bool,
    pub(super) hops: Vec<u32>,
    pub(super) hstamp: Vec<u32>,
    pub(super) cands: Vec<(u64, u32, u32)>,
    pub(super) tentative: Vec<u32>,
    pub(super) dest_stamp: u32,
    /// Ancestors of the destination in the escape tree, with the channel
    /// down toward it.
    pub(super) anc: Vec<u32>,
    pub(super) down: Vec<u32>,
    /// Switches fixed to their escape route, with its hops and weight.
    pub(super) fixed: Vec<u32>,
    pub(super) fixed_list: Vec<u32>,
    pub(super) ehops: Vec<u32>,
    pub(super) edist: Vec<u64>,
    pub(super) path: Vec<u32>,
    pub(super) flow: Vec<u64>,
    /// Per out channel `o`: the load on its reverse (the rounds' loads and
    /// this layer's own), the weight [`Scratch::relax`] reads.
    pub(super) load_in: Vec<u64>,
}

/// A heap entry's value: the channel `c` into the settled part, with its
/// tail `u` below it so that a pop need not look the tail up (a cache miss
/// per stale entry). The heap's order is still by `(key, c)`: `u` follows
/// from `c`.
#[inline]
fn way_in(c: u32, u: u32) -> u64 {
    ((c as u64) << 32) | u as u64
}

impl Scratch {
    /// Offers the channels into the settled switch `x` to their tails,
    /// weighed by `load_in` (indexed by `x`'s out channels, so the loop
    /// reads memory in order) plus `hop`.
    #[inline]
    pub(super) fn relax(&mut self, net: &Net, x: u32, pass: u32, hop: u64) {
        let dx = self.dist[x as usize];
        for o in net.outs(x) {
            let y = net.head[o as usize] as usize;
            if self.seen[y] == pass {
                continue;
            }
            let c = net.rev[o as usize];
            let key = dx + self.load_in[o as usize] + hop;
            if self.bstamp[y] != pass || (key, c) < self.best[y] {
                self.bstamp[y] = pass;
                self.best[y] = (key, c);
                self.heap.push(key, way_in(c, y as u32));
            }
        }
    }
}

impl Layer {
    pub(super) fn new(
        net: &Net,
        sl: u8,
        members: &[u32],
        weight: &[u64],
        dests: Vec<Dest>,
        repair: bool,
    ) -> Result<Self> {
        let n = net.nsw;
        let nch = net.nch();
        let tree = EscapeTree::new(net, members, weight)?;
        let mut order = tree.initial_order(net);
        let mut turns = Turns::new(net);
        insert_escape_turns(net, &tree, &mut turns, &mut order)?;
        let mut layer = Layer {
            sl,
            dests,
            next: 0,
            repair,
            up: tree.up,
            turns,
            order,
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
                heap: RadixHeap::new(),
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
                load_in: vec![0; nch],
            },
            fallbacks: 0,
            repairs: 0,
            fixed_total: 0,
            reruns: 0,
            blocked: 0,
            most_queued: 0,
        };
        layer.cols.reserve(layer.dests.len() * n);
        Ok(layer)
    }

    pub(super) fn route_round(
        &mut self,
        net: &Net,
        global: &[u64],
        global_sum: u64,
        nlayers: u64,
        round: usize,
    ) -> Result<()> {
        let end = (self.next + round).min(self.dests.len());
        for (o, l) in self.s.load_in.iter_mut().enumerate() {
            let c = net.rev[o] as usize;
            *l = global[c] + self.delta[c];
        }
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
            most_queued,
            ..
        } = self;
        s.dest_stamp += 1;
        let ds = s.dest_stamp;
        let dc = DestCtx {
            net,
            global,
            hop,
            t,
            ds,
            up,
        };
        let mut a = t;
        while up[a as usize] != NONE {
            let c = up[a as usize];
            let p = net.head[c as usize];
            s.anc[p as usize] = ds;
            s.down[p as usize] = net.rev[c as usize];
            a = p;
        }
        s.fixed_list.clear();
        let mut first = true;
        loop {
            if !first {
                *reruns += 1;
            }
            first = false;
            *repairs += dc.search(s, turns, order, delta, *try_repair);
            *most_queued = (*most_queued).max(s.heap.pushed());
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
            *fixed_total += dc.fix_unreached(s, turns, delta, *sl, d.lid)?;
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
                s.load_in[net.rev[c as usize] as usize] += fl;
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

/// What the search toward one destination switch `t` reads: the channel
/// weights (the rounds' loads, this layer's own, a hop cost) and the
/// escape tree (`up`; the destination's ancestors marked with `ds`).
struct DestCtx<'a> {
    net: &'a Net,
    global: &'a [u64],
    hop: u64,
    t: u32,
    ds: u32,
    up: &'a [u32],
}

impl DestCtx<'_> {
    #[inline]
    fn w(&self, delta: &[u64], c: u32) -> u64 {
        self.global[c as usize] + delta[c as usize] + self.hop
    }

    /// Escape-route out channel toward the destination: down the tree
    /// from its ancestors, up from the others.
    #[inline]
    fn esc(&self, anc: &[u32], down: &[u32], v: u32) -> u32 {
        if anc[v as usize] == self.ds {
            down[v as usize]
        } else {
            self.up[v as usize]
        }
    }

    /// One pass of the search: Dijkstra from the destination backwards
    /// over the channels, a turn admitted only if the layer's CDG stays
    /// acyclic, the fixed switches settled first on their escape routes;
    /// a repair reopens a way when some switch is left unreached. Returns
    /// the repairs made.
    fn search(
        &self,
        s: &mut Scratch,
        turns: &mut Turns,
        order: &mut LevelOrder,
        delta: &[u64],
        try_repair: bool,
    ) -> u64 {
        let (net, t) = (self.net, self.t);
        let mut repairs = 0;
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
            s.out[v as usize] = self.esc(&s.anc, &s.down, v);
            s.settled.push(v);
        }
        // Each unreached switch keeps only its cheapest way in on the
        // heap; the others are looked up again if that one is refused.
        for i in 0..s.settled.len() {
            let x = s.settled[i];
            s.relax(net, x, pass, self.hop);
        }
        s.rerouted = false;
        loop {
            while let Some((du, v)) = s.heap.pop() {
                let (c, u) = ((v >> 32) as u32, v as u32);
                if s.seen[u as usize] == pass {
                    continue;
                }
                let x = net.head[c as usize];
                let admitted = x == t || admit(net, turns, order, s, pass, c, s.out[x as usize]);
                if !admitted {
                    // Only the entry that is u's cheapest way stands for u:
                    // an older copy refused now is a way queued again by an
                    // earlier refusal, and queueing all the others once per
                    // such copy doubles the heap with every round (2^29
                    // entries on a 921-switch OFT).
                    if s.best[u as usize] == (du, c) {
                        self.queue_others(s, turns, delta, pass, u);
                    }
                    continue;
                }
                s.seen[u as usize] = pass;
                s.dist[u as usize] = du;
                s.out[u as usize] = c;
                s.settled.push(u);
                s.relax(net, u, pass, self.hop);
            }
            if s.settled.len() == net.nsw
                || !try_repair
                || !repair(net, turns, order, s, (t, pass, self.ds, self.hop), &|c| {
                    self.w(delta, c)
                })
            {
                break;
            }
            repairs += 1;
        }
        repairs
    }

    /// Switch `u`'s cheapest way in was refused: queues all the others
    /// that are still open (none is cheaper than the refused one).
    fn queue_others(&self, s: &mut Scratch, turns: &Turns, delta: &[u64], pass: u32, u: u32) {
        let net = self.net;
        let mut best = (u64::MAX, NONE);
        for o in net.outs(u) {
            let x2 = net.head[o as usize];
            if s.seen[x2 as usize] != pass
                || (x2 != self.t && turns[net.turn(o, s.out[x2 as usize])] == BLOCKED)
            {
                continue;
            }
            let key = s.dist[x2 as usize] + self.w(delta, o);
            best = best.min((key, o));
            s.heap.push(key, way_in(o, u));
        }
        s.best[u as usize] = best;
    }

    /// At an impasse: withdraws this destination's new turns (and the
    /// blocks judged against them) and fixes every unreached switch and the
    /// rest of its escape route, ordered by escape hops. Returns how many
    /// switches it fixed; none is an error.
    fn fix_unreached(
        &self,
        s: &mut Scratch,
        turns: &mut Turns,
        delta: &[u64],
        sl: u8,
        lid: u16,
    ) -> Result<u64> {
        let (net, t, ds, pass) = (self.net, self.t, self.ds, s.pass);
        for &tid in s.added.iter().chain(&s.blocked_now) {
            turns.set(net, tid as usize, UNUSED);
        }
        let before = s.fixed_list.len();
        for u in 0..net.nsw as u32 {
            if s.seen[u as usize] == pass || s.fixed[u as usize] == ds {
                continue;
            }
            s.path.clear();
            let mut v = u;
            while v != t && s.fixed[v as usize] != ds {
                s.fixed[v as usize] = ds;
                s.path.push(v);
                let e = self.esc(&s.anc, &s.down, v);
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
                let e = self.esc(&s.anc, &s.down, p);
                h += 1;
                dd += self.w(delta, e);
                s.ehops[p as usize] = h;
                s.edist[p as usize] = dd;
                s.fixed_list.push(p);
            }
        }
        let fixed = (s.fixed_list.len() - before) as u64;
        if fixed == 0 {
            return Err(fail(format!(
                "internal error: no progress routing to LID {lid} in layer {sl}"
            )));
        }
        let ehops = &s.ehops;
        s.fixed_list
            .sort_unstable_by_key(|&v| (ehops[v as usize], v));
        // Escape turns were inserted up front; check rather than trust.
        for &v in &s.fixed_list {
            let e = self.esc(&s.anc, &s.down, v);
            let x = net.head[e as usize];
            if x != t && turns[net.turn(e, self.esc(&s.anc, &s.down, x))] != USED {
                return Err(fail("internal error: an escape turn is missing"));
            }
        }
        Ok(fixed)
    }
}

/// Whether turn `a -> b` is in the layer's CDG or joins it without closing
/// a cycle; records what it decided for this pass.
pub(super) fn admit(
    net: &Net,
    turns: &mut Turns,
    order: &mut LevelOrder,
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
            if order
                .try_add_edge(
                    &Cdg {
                        net,
                        turns: &*turns,
                    },
                    a,
                    b,
                )
                .is_ok()
            {
                turns.set(net, tid, USED);
                s.added.push(tid as u32);
                s.astamp[tid] = pass;
                s.tentative.push(tid as u32);
                true
            } else {
                turns.set(net, tid, BLOCKED);
                s.blocked_now.push(tid as u32);
                false
            }
        }
    }
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
