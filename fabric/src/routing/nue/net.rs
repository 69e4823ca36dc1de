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

/// One layer's CDG: the channels, and the turns marked [`USED`] as edges.
pub(super) struct Cdg<'a> {
    pub(super) net: &'a Net,
    pub(super) turns: &'a [u8],
}

impl Digraph for Cdg<'_> {
    fn successors(&self, v: u32) -> impl Iterator<Item = u32> + '_ {
        let net = self.net;
        let x = net.head[v as usize];
        let base = net.tbase[v as usize] as usize;
        let o0 = net.off[x as usize];
        let row = &self.turns[base..base + (net.off[x as usize + 1] - o0) as usize];
        row.iter()
            .enumerate()
            .filter(|&(_, &t)| t == USED)
            .map(move |(i, _)| o0 + i as u32)
    }

    fn predecessors(&self, v: u32) -> impl Iterator<Item = u32> + '_ {
        let (net, turns) = (self.net, self.turns);
        let x = net.tail[v as usize];
        let idx = v - net.off[x as usize];
        net.outs(x)
            .map(move |o| net.rev[o as usize])
            .filter(move |&w| turns[(net.tbase[w as usize] + idx) as usize] == USED)
    }
}
