//! Shared machinery of the engines that reason about routes on the channel
//! dependency graph (DF-DN, DF-SSSP, LASH): the dense layout of turns
//! (switch, in port, out port) between switch-to-switch ports, the channels
//! they connect, and the set of routes a destination-based routing induces,
//! one per (source switch, destination end port).
//!
//! Hosts on one switch share every switch-to-switch hop of their routes, so
//! a route is keyed by its source switch: that is what keeps Dragonfly p=8
//! (272 M host pairs) at 34 M routes.

use crate::error::{Error, Result};
use crate::model::{Fabric, NONE, NodeKind, Slot};
use crate::tables::{Lfts, NO_PATH, NUM_SLS, PathSl, SL_NONE, Sl2Vl};
use rayon::prelude::*;

/// What one channel leads to, precomputed so a walk step is one lookup.
#[derive(Clone, Copy)]
pub(crate) struct Hop {
    pub remote: Slot,
    /// Switch index at the far end, `NONE` for an end port or no link.
    pub next: u32,
    /// For switch-to-switch channels: turn row of (tail switch, this out
    /// port, in port index 0), and the in-port index at the far switch.
    pub row_base: u32,
    pub next_in: u16,
}

/// Switch data for route walks, plus the layout of turns. Only (in, out)
/// pairs between switch-to-switch ports can take part in a dependency, so
/// a turn row exists just for those: half the size of the full SL-to-VL
/// tables for a Dragonfly router, which keeps per-turn arrays in cache.
///
/// Channels (directed switch-to-switch links) get dense ids too: channel
/// `chan_base[s] + k` leaves switch `s` through its `k`-th switch port.
/// Turn row `cube_base[s] + o * cube_dim[s] + i` joins the channel arriving
/// on in-port index `i` to the channel leaving on out-port index `o`; rows
/// sharing an out port are adjacent (one destination uses one out port per
/// switch).
pub(crate) struct Topo {
    pub hop: Vec<Hop>,
    /// Per switch index: slot of port 0 and port count.
    pub base: Vec<Slot>,
    pub nports: Vec<u8>,
    /// Per switch index: first turn row and number of switch-to-switch ports.
    pub cube_base: Vec<usize>,
    pub cube_dim: Vec<u16>,
    /// Per slot: index among its switch's switch-to-switch ports.
    pub s2s_idx: Vec<u16>,
    pub cube_rows: usize,
    /// Per switch index: first channel id (= `cube_dim` channels each).
    pub chan_base: Vec<u32>,
    /// Per channel: the channel that arrives on the same port index, i.e.
    /// the reverse direction of the link.
    pub reverse: Vec<u32>,
    /// Per channel: head switch and in-port index there.
    pub head: Vec<u32>,
    pub head_in: Vec<u16>,
    /// Per channel: tail switch.
    pub tail: Vec<u32>,
    /// Per channel: the slot it leaves from.
    pub chan_slot: Vec<Slot>,
}

impl Topo {
    pub fn new(f: &Fabric) -> Self {
        let mut s2s_idx = vec![u16::MAX; f.num_slots()];
        let mut cube_base = Vec::with_capacity(f.switches().len());
        let mut cube_dim = Vec::with_capacity(f.switches().len());
        let mut chan_base = Vec::with_capacity(f.switches().len());
        let mut chan_slot = Vec::new();
        let mut tail = Vec::new();
        let mut rows = 0usize;
        for (si, &n) in f.switches().iter().enumerate() {
            chan_base.push(chan_slot.len() as u32);
            let mut k = 0u16;
            for s in f.port_slots(n) {
                let r = f.remote(s);
                if r != NONE && f.kind(f.node_of(r)) == NodeKind::Switch {
                    s2s_idx[s as usize] = k;
                    chan_slot.push(s);
                    tail.push(si as u32);
                    k += 1;
                }
            }
            cube_base.push(rows);
            cube_dim.push(k);
            rows += k as usize * k as usize;
        }
        let hop = (0..f.num_slots() as Slot)
            .map(|s| {
                let r = f.remote(s);
                let far = if r == NONE {
                    None
                } else {
                    f.switch_index(f.node_of(r))
                };
                let mut h = Hop {
                    remote: r,
                    next: far.unwrap_or(NONE),
                    row_base: 0,
                    next_in: 0,
                };
                if let (Some(tail), Some(_)) = (f.switch_index(f.node_of(s)), far) {
                    let o = s2s_idx[s as usize] as usize;
                    h.row_base =
                        (cube_base[tail as usize] + o * cube_dim[tail as usize] as usize) as u32;
                    h.next_in = s2s_idx[r as usize];
                }
                h
            })
            .collect();
        let mut head = Vec::with_capacity(chan_slot.len());
        let mut head_in = Vec::with_capacity(chan_slot.len());
        let mut reverse = Vec::with_capacity(chan_slot.len());
        for &s in &chan_slot {
            let r = f.remote(s);
            let h = f.switch_index(f.node_of(r)).unwrap_or(NONE);
            head.push(h);
            head_in.push(s2s_idx[r as usize]);
            reverse.push(chan_base[h as usize] + s2s_idx[r as usize] as u32);
        }
        Self {
            hop,
            base: f.switches().iter().map(|&n| f.slot(n, 0)).collect(),
            nports: f.switches().iter().map(|&n| f.num_ports(n)).collect(),
            cube_base,
            cube_dim,
            s2s_idx,
            cube_rows: rows,
            chan_base,
            reverse,
            head,
            head_in,
            tail,
            chan_slot,
        }
    }

    pub fn num_channels(&self) -> usize {
        self.chan_slot.len()
    }

    /// Turn row of (switch index, in port, out port), both switch-to-switch.
    #[inline]
    pub fn row(&self, si: u32, in_port: u8, out_port: u8) -> usize {
        let b = self.base[si as usize];
        let i = self.s2s_idx[(b + in_port as u32) as usize] as usize;
        let o = self.s2s_idx[(b + out_port as u32) as usize] as usize;
        let d = self.cube_dim[si as usize] as usize;
        self.cube_base[si as usize] + o * d + i
    }

    /// Turns leaving channel `c` at its head switch: (turn row, next channel).
    #[inline]
    pub fn turns_from(&self, c: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let h = self.head[c as usize] as usize;
        let i = self.head_in[c as usize] as usize;
        let d = self.cube_dim[h] as usize;
        let (rb, cb) = (self.cube_base[h], self.chan_base[h]);
        (0..d).map(move |o| ((rb + o * d + i) as u32, cb + o as u32))
    }

    /// Turns entering channel `c` at its tail switch: (turn row, previous channel).
    #[inline]
    pub fn turns_into(&self, c: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let t = self.tail[c as usize] as usize;
        let o = (c - self.chan_base[t]) as usize;
        let d = self.cube_dim[t] as usize;
        let (rb, cb) = (self.cube_base[t], self.chan_base[t]);
        (0..d).map(move |i| {
            let arriving = self.reverse[(cb + i as u32) as usize];
            ((rb + o * d + i) as u32, arriving)
        })
    }
}

/// One switch's step toward the current destination.
#[derive(Clone, Copy, Default)]
pub(crate) struct Step {
    /// Next switch index; `DELIVER` when this switch hands the packet to
    /// the destination; `BROKEN` when the LFT entry leads nowhere useful.
    pub next: u32,
    /// Turn row of (this switch, out port, in port index 0): add the in-port index.
    pub row_base: u32,
    /// Index of the in port at the next switch among its switch ports.
    pub next_in: u16,
}

pub(crate) const DELIVER: u32 = u32::MAX;
pub(crate) const BROKEN: u32 = u32::MAX - 1;

/// Resolves each switch's next hop toward end port `d` from its LFT column,
/// so that walks from many sources read one small array.
pub(crate) fn fill_steps(topo: &Topo, col: &[u8], d: Slot, steps: &mut Vec<Step>) {
    steps.clear();
    steps.extend((0..col.len()).map(|si| {
        let port = col[si];
        if port == NO_PATH || port == 0 || port > topo.nports[si] {
            return Step {
                next: BROKEN,
                ..Step::default()
            };
        }
        let h = topo.hop[(topo.base[si] + port as u32) as usize];
        if h.remote == d {
            return Step {
                next: DELIVER,
                ..Step::default()
            };
        }
        if h.next == NONE {
            return Step {
                next: BROKEN,
                ..Step::default()
            };
        }
        Step {
            next: h.next,
            row_base: h.row_base,
            next_in: h.next_in,
        }
    }));
}

/// Source switches (those with end ports), their host counts, and a
/// path-SL row per source switch.
pub(crate) struct Sources {
    /// Switch indices, ascending.
    pub switches: Vec<u32>,
    /// End ports on each source switch (the host pairs a route stands for).
    pub weight: Vec<u32>,
    /// Per switch index: path-SL row, `u32::MAX` when it has no end port.
    pub row_of_switch: Vec<u32>,
}

/// Finds the source switches and gives each a blank path-SL row (all
/// [`SL_NONE`]) that its end ports share.
pub(crate) fn sources(f: &Fabric, engine: &str, path_sl: &mut PathSl) -> Result<Sources> {
    let nsw = f.switches().len();
    let mut row_of_switch = vec![u32::MAX; nsw];
    let mut count = vec![0u32; nsw];
    let mut switches: Vec<u32> = Vec::new();
    let blank = vec![SL_NONE; path_sl.width()];
    for &e in f.endports() {
        let r = f.remote(e);
        let Some(si) = f.switch_index(f.node_of(r)) else {
            return Err(Error::Routing {
                engine: engine.into(),
                reason: format!(
                    "end port of '{}' is not linked to a switch",
                    f.desc(f.node_of(e))
                ),
            });
        };
        if row_of_switch[si as usize] == u32::MAX {
            row_of_switch[si as usize] = path_sl.push_row(&blank);
            switches.push(si);
        }
        count[si as usize] += 1;
        // Every LID of the port (LMC) sends on its switch's row.
        for lid in f.lids_of_slot(e) {
            path_sl.assign(lid, row_of_switch[si as usize]);
        }
    }
    switches.sort_unstable();
    let weight = switches.iter().map(|&s| count[s as usize]).collect();
    Ok(Sources {
        switches,
        weight,
        row_of_switch,
    })
}

/// Every route of a destination-based routing, as the turns it takes.
/// Route `k * sources + j` goes from source switch `j` to destination LID
/// `k` (in `f.end_lids()` order: with LMC, every LID of a port is a
/// destination of its own); its turns are `turns[off[p]..off[p + 1]]`.
pub(crate) struct RouteSet {
    pub nsrc: usize,
    pub off: Vec<u32>,
    pub turns: Vec<u32>,
}

impl RouteSet {
    /// Walks all routes of `lfts` in parallel. A route that does not reach
    /// its destination is an error naming the switch where it breaks.
    pub fn walk(f: &Fabric, topo: &Topo, lfts: &Lfts, src: &Sources, engine: &str) -> Result<Self> {
        const BATCH: usize = 256;
        let nsw = f.switches().len();
        let dests = f.end_lids();
        let nsrc = src.switches.len();
        let chunks: Vec<Result<(Vec<u32>, Vec<u32>)>> = dests
            .par_chunks(BATCH)
            .map_init(Vec::new, |steps, batch| {
                let cols = lfts.columns(batch);
                let mut lens = Vec::with_capacity(batch.len() * nsrc);
                let mut turns = Vec::with_capacity(batch.len() * nsrc * 2);
                for (k, &(d, dlid)) in batch.iter().enumerate() {
                    fill_steps(topo, &cols[k * nsw..(k + 1) * nsw], d, steps);
                    for &s in &src.switches {
                        let before = turns.len();
                        walk_one(f, steps, s, dlid, nsw, &mut turns, engine)?;
                        lens.push((turns.len() - before) as u32);
                    }
                }
                Ok((lens, turns))
            })
            .collect();
        let mut off = Vec::with_capacity(dests.len() * nsrc + 1);
        off.push(0u32);
        let mut turns = Vec::new();
        for c in chunks {
            let (lens, t) = c?;
            let total = turns.len() as u64 + t.len() as u64;
            if total > u32::MAX as u64 {
                return Err(Error::Routing {
                    engine: engine.into(),
                    reason: "too many route turns for one subnet (over 4 G)".into(),
                });
            }
            let mut acc = *off.last().unwrap_or(&0);
            for l in lens {
                acc += l;
                off.push(acc);
            }
            turns.extend_from_slice(&t);
        }
        Ok(Self { nsrc, off, turns })
    }

    pub fn len(&self) -> usize {
        self.off.len() - 1
    }

    #[inline]
    pub fn route(&self, p: usize) -> &[u32] {
        &self.turns[self.off[p] as usize..self.off[p + 1] as usize]
    }

    /// Routes through each turn row: `(offsets, route ids)` in CSR form.
    pub fn by_turn(&self, rows: usize) -> (Vec<u32>, Vec<u32>) {
        let mut off = vec![0u32; rows + 1];
        for &t in &self.turns {
            off[t as usize + 1] += 1;
        }
        for i in 0..rows {
            off[i + 1] += off[i];
        }
        let mut fill = off.clone();
        let mut ids = vec![0u32; self.turns.len()];
        for p in 0..self.len() {
            for &t in self.route(p) {
                ids[fill[t as usize] as usize] = p as u32;
                fill[t as usize] += 1;
            }
        }
        (off, ids)
    }
}

/// Appends the turns of the route from switch `s` toward the destination
/// whose steps are `steps`.
#[allow(clippy::too_many_arguments)]
fn walk_one(
    f: &Fabric,
    steps: &[Step],
    s: u32,
    dlid: u16,
    nsw: usize,
    out: &mut Vec<u32>,
    engine: &str,
) -> Result<()> {
    let mut si = s;
    let mut hops = 0u32;
    let mut in_idx = 0u16;
    loop {
        let st = steps[si as usize];
        match st.next {
            DELIVER => return Ok(()),
            BROKEN => {
                return Err(Error::Routing {
                    engine: engine.into(),
                    reason: format!(
                        "the base routing has no usable route from switch '{}' to LID {dlid}",
                        f.desc(f.switches()[si as usize]),
                    ),
                });
            }
            _ => {}
        }
        if hops as usize >= nsw {
            return Err(Error::Routing {
                engine: engine.into(),
                reason: format!(
                    "the base routing loops on the way to LID {dlid} (through switch '{}')",
                    f.desc(f.switches()[si as usize])
                ),
            });
        }
        if hops > 0 {
            out.push(st.row_base + in_idx as u32);
        }
        hops += 1;
        in_idx = st.next_in;
        si = st.next;
    }
}

/// Writes each route's layer as its SL into the source switch's path-SL row.
pub(crate) fn write_layers(f: &Fabric, src: &Sources, layer: &[u8], path_sl: &mut PathSl) {
    let nsrc = src.switches.len();
    for (j, &s) in src.switches.iter().enumerate() {
        let row = path_sl.row_mut(src.row_of_switch[s as usize]);
        for (k, &(_, dlid)) in f.end_lids().iter().enumerate() {
            row[dlid as usize] = layer[k * nsrc + j];
        }
    }
}

/// SL-to-VL tables mapping SL `l` to VL `l` for the first `layers` SLs on
/// every port (switch ports and end-port injection), the rest to VL 0.
pub(crate) fn identity_sl2vl(f: &Fabric, layers: u8) -> Sl2Vl {
    let mut row = [0u8; NUM_SLS];
    for (sl, v) in row.iter_mut().enumerate().take(layers as usize) {
        *v = sl as u8;
    }
    let mut t = Sl2Vl::new(f);
    for (si, &sw) in f.switches().iter().enumerate() {
        let np = f.num_ports(sw);
        for i in 0..=np {
            for o in 0..=np {
                t.set_switch_row(si as u32, i, o, row);
            }
        }
    }
    for &e in f.endports() {
        t.set_port_row(e, row);
    }
    t
}
