//! The switch graph as Nue works on it: dense channel and turn ids, and a
//! layer's channel dependency graph as the turns it holds.

use super::fail;
use crate::error::Result;
use crate::graph::SwitchGraph;
use crate::graph::topo_order::Digraph;
use crate::model::{Fabric, NONE};

/// States of a turn in a layer's CDG.
pub(super) const UNUSED: u8 = 0;
pub(super) const USED: u8 = 1;
pub(super) const BLOCKED: u8 = 2;

/// The switch graph with dense channel ids: switch `x`'s out channels are
/// `off[x]..off[x + 1]`, in the order of [`SwitchGraph`].
pub(super) struct Net {
    pub(super) nsw: usize,
    pub(super) off: Vec<u32>,
    pub(super) head: Vec<u32>,
    pub(super) tail: Vec<u32>,
    /// The channel of the same link in the other direction.
    pub(super) rev: Vec<u32>,
    /// Out port at the tail switch.
    pub(super) port: Vec<u8>,
    /// Turns out of channel `c` are `tbase[c] + k` for the `k`-th out channel
    /// of its head switch.
    pub(super) tbase: Vec<u32>,
    pub(super) nturns: usize,
    /// The channel each turn leaves from.
    pub(super) turn_tail: Vec<u32>,
    /// 64-bit words per channel in a [`Turns`] bit row: enough for the
    /// widest switch.
    pub(super) words: usize,
    /// End ports attached to each switch: the sources whose load counts.
    pub(super) hosts: Vec<u64>,
}

impl Net {
    pub(super) fn new(f: &Fabric) -> Result<Self> {
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
        let mut turn_tail = Vec::new();
        let mut nturns = 0usize;
        for (c, &h) in head.iter().enumerate() {
            tbase.push(u32::try_from(nturns).map_err(|_| fail("too many turns"))?);
            let k = (g.off[h as usize + 1] - g.off[h as usize]) as usize;
            nturns += k;
            turn_tail.extend(std::iter::repeat_n(c as u32, k));
        }
        let widest = (0..nsw).map(|x| g.off[x + 1] - g.off[x]).max().unwrap_or(0);
        let words = (widest as usize).div_ceil(64).max(1);
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
            turn_tail,
            words,
            hosts,
        })
    }

    pub(super) fn nch(&self) -> usize {
        self.head.len()
    }

    #[inline]
    pub(super) fn outs(&self, x: u32) -> std::ops::Range<u32> {
        self.off[x as usize]..self.off[x as usize + 1]
    }

    /// Turn id of `a -> b`; `b` must leave the head of `a`.
    #[inline]
    pub(super) fn turn(&self, a: u32, b: u32) -> usize {
        (self.tbase[a as usize] + (b - self.off[self.head[a as usize] as usize])) as usize
    }

    /// Hop distances from `src` (u32::MAX = unreached).
    pub(super) fn bfs(&self, src: u32, dist: &mut [u32], queue: &mut Vec<u32>) {
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

pub(super) fn switch_of_endport(f: &Fabric, e: u32) -> Result<u32> {
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

/// One layer's turns: each turn's state, and the used ones as bit rows
/// both ways, so that the cycle checks' searches read one word per channel
/// rather than a byte per neighbour.
pub(super) struct Turns {
    state: Vec<u8>,
    /// Per channel `a`, bit `k`: the turn onto the `k`-th out channel of
    /// `a`'s head is used.
    out_used: Vec<u64>,
    /// Per channel `v`, bit `j`: the turn from the reverse of the `j`-th
    /// out channel of `v`'s tail onto `v` is used.
    in_used: Vec<u64>,
    words: usize,
}

impl Turns {
    /// Every turn unused.
    pub(super) fn new(net: &Net) -> Self {
        let rows = net.nch() * net.words;
        Self {
            state: vec![UNUSED; net.nturns],
            out_used: vec![0; rows],
            in_used: vec![0; rows],
            words: net.words,
        }
    }

    /// Sets turn `tid`'s state, keeping the bit rows in step.
    #[inline]
    pub(super) fn set(&mut self, net: &Net, tid: usize, state: u8) {
        let was = std::mem::replace(&mut self.state[tid], state) == USED;
        if was == (state == USED) {
            return;
        }
        let a = net.turn_tail[tid];
        let k = tid - net.tbase[a as usize] as usize;
        let x = net.head[a as usize];
        let o0 = net.off[x as usize];
        let b = o0 as usize + k;
        let j = (net.rev[a as usize] - o0) as usize;
        self.out_used[a as usize * self.words + k / 64] ^= 1 << (k % 64);
        self.in_used[b * self.words + j / 64] ^= 1 << (j % 64);
    }

    fn row<'a>(&self, rows: &'a [u64], v: u32) -> Bits<'a> {
        let at = v as usize * self.words;
        Bits {
            words: &rows[at..at + self.words],
            base: 0,
            word: 0,
        }
    }
}

impl std::ops::Index<usize> for Turns {
    type Output = u8;
    #[inline]
    fn index(&self, tid: usize) -> &u8 {
        &self.state[tid]
    }
}

/// The set bits of a bit row, lowest first.
struct Bits<'a> {
    words: &'a [u64],
    base: u32,
    word: u64,
}

impl Iterator for Bits<'_> {
    type Item = u32;
    #[inline]
    fn next(&mut self) -> Option<u32> {
        while self.word == 0 {
            let (&w, rest) = self.words.split_first()?;
            self.words = rest;
            self.word = w;
            self.base += 64;
        }
        let bit = self.word.trailing_zeros();
        self.word &= self.word - 1;
        Some(self.base - 64 + bit)
    }
}

/// One layer's CDG: the channels, and the turns marked [`USED`] as edges.
pub(super) struct Cdg<'a> {
    pub(super) net: &'a Net,
    pub(super) turns: &'a Turns,
}

impl Digraph for Cdg<'_> {
    fn successors(&self, v: u32) -> impl Iterator<Item = u32> + '_ {
        let o0 = self.net.off[self.net.head[v as usize] as usize];
        self.turns.row(&self.turns.out_used, v).map(move |k| o0 + k)
    }

    fn predecessors(&self, v: u32) -> impl Iterator<Item = u32> + '_ {
        let net = self.net;
        let o0 = net.off[net.tail[v as usize] as usize];
        self.turns
            .row(&self.turns.in_used, v)
            .map(move |j| net.rev[(o0 + j) as usize])
    }
}
