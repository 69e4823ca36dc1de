//! SSSP balanced in fixed streams that exchange their loads in rounds, so
//! the destinations can be routed by several processes and the tables stay
//! the same whoever routes what.
//!
//! Classic SSSP ([`super::sssp`]) routes one destination after another, each
//! on the channel weights every earlier destination raised: nothing can run
//! beside it. Here the end-port destinations (in SSSP's order, a switch's
//! HCAs together) are dealt, switch by switch and round robin, over a
//! fixed number of streams, each starting at another point of the order. In round `r` every stream routes its next few destinations on
//! the weights all streams had at the round's start plus what it added
//! itself since; after the round the streams' additions are summed. The
//! tables depend on the stream count (an engine option) and on the sums,
//! never on which process routed which stream, nor on how many there were.
//!
//! The price is balance: a stream does not see what the others add during
//! a round, and streams routing on the same weights pick the same links.
//! On Dragonflies, Slim Flies and random graphs the busiest link stays
//! within a few percent of classic SSSP's (either way: the greedy is
//! chaotic); on fat trees and tori, where every destination has many equal
//! minimal ways, it is up to a few times worse (BENCHMARKS.md): route those
//! with ftree, updn or dor/ecube. DF-SSSP may need a VL or two more.
//! Switch LIDs (management traffic only, adding no weight) are routed once
//! every round has run, on the final weights.

use super::EngineOptions;
use super::minhop::{LidTarget, lid_targets};
use super::nue::{LayerCols, Stats};
use super::sssp::{Net, Tree, end_port_order, hosts_per_switch};
use crate::error::{Error, Result};
use crate::graph::SwitchGraph;
use crate::model::{Fabric, NONE};
use crate::tables::{Lfts, NO_PATH};
use rayon::prelude::*;

/// Rounds a plan aims at: each stream sees the others' loads this often.
/// More rounds balance better and cost one exchange of the channel loads
/// each when the streams are on several processes.
const ROUNDS: usize = 256;

fn fail(reason: String) -> Error {
    Error::Routing {
        engine: "sssp".into(),
        reason,
    }
}

/// What every stream of one run reads: the switch graph, its hop matrix
/// and each stream's destinations. Built from the fabric and the stream
/// count alone, so every process that routes streams builds the same.
pub struct StreamPlan {
    g: SwitchGraph,
    hops: Vec<u8>,
    targets: Vec<LidTarget>,
    hosts: Vec<u64>,
    /// End-port LIDs of each stream, in routing order.
    streams: Vec<Vec<u16>>,
    /// Destinations a stream routes per round.
    round: usize,
}

impl StreamPlan {
    /// A plan of `streams` streams (at least 1; one stream is classic SSSP
    /// in GUID order).
    pub fn new(f: &Fabric, streams: usize) -> Result<Self> {
        if streams == 0 {
            return Err(fail("a stream count of 0: at least 1 is needed".into()));
        }
        let g = SwitchGraph::new(f);
        let hops = g.hop_matrix();
        let targets = lid_targets(f);
        let hosts = hosts_per_switch(g.len(), &targets);
        // Switches are dealt round robin in SSSP's order (a switch's HCAs
        // stay together: they share the tree's preparation). Streams that
        // route neighbours at the same time pile onto the same links into
        // their pod or group; hence the rotation below. Measured
        // (BENCHMARKS.md), busiest link over classic SSSP with 4 and 16
        // streams: round robin alone +4/+7 % (Dragonfly p=4), +1/+4 % (p=6),
        // +264/+550 % (fat tree); with the rotation -8/+4 %, -10/-8 %,
        // +65/+175 %; in blocks +18/+6 %, +15/+12 %, +72/+121 %.
        let order = end_port_order(f, &targets, &hosts, false);
        let mut switches: Vec<u32> = order.iter().map(|&l| targets[l as usize].switch).collect();
        switches.dedup();
        let mut stream_of = vec![0usize; g.len()];
        for (i, &sw) in switches.iter().enumerate() {
            stream_of[sw as usize] = i % streams;
        }
        let mut lists: Vec<Vec<u16>> = vec![Vec::new(); streams];
        for lid in order {
            lists[stream_of[targets[lid as usize].switch as usize]].push(lid);
        }
        // Stream s starts `s / streams` of the way into its list (at a
        // switch's first HCA), so the destinations routed in the same round
        // lie far apart in the order (other pods, groups, regions of a
        // torus) while each stream still covers the whole fabric.
        for (si, list) in lists.iter_mut().enumerate() {
            let mut at = (si * list.len() / streams).min(list.len());
            while at > 0
                && at < list.len()
                && targets[list[at] as usize].switch == targets[list[at - 1] as usize].switch
            {
                at -= 1;
            }
            list.rotate_left(at);
        }
        let most = lists.iter().map(Vec::len).max().unwrap_or(0);
        Ok(Self {
            g,
            hops,
            targets,
            hosts,
            streams: lists,
            round: most.div_ceil(ROUNDS).max(1),
        })
    }

    pub fn streams(&self) -> usize {
        self.streams.len()
    }

    fn net<'a>(&'a self, f: &'a Fabric) -> Net<'a> {
        Net {
            f,
            g: &self.g,
            hops: &self.hops,
            hosts: &self.hosts,
        }
    }

    /// Length of the weight vectors [`Streams::round`] reads and returns.
    pub fn channels(&self) -> usize {
        self.g.adj.len()
    }

    /// Rounds until every stream has routed all its destinations.
    pub fn rounds(&self) -> usize {
        let most = self.streams.iter().map(Vec::len).max().unwrap_or(0);
        most.div_ceil(self.round)
    }

    /// Streams `ids`, ready for round 0.
    pub fn start(&self, ids: &[usize]) -> Result<Streams> {
        let n = self.g.len();
        let held = ids
            .iter()
            .map(|&s| {
                let lids = self.streams.get(s).ok_or_else(|| {
                    fail(format!("no stream {s} in a plan of {}", self.streams()))
                })?;
                Ok(Stream {
                    id: s,
                    next: 0,
                    cols: vec![NO_PATH; lids.len() * n],
                    weight: Vec::new(),
                    tree: Tree::new(n),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Streams {
            held,
            rounds_done: 0,
        })
    }

    /// The LFTs from every stream's columns (each stream once, any order,
    /// from any mix of processes) and the weights after the last round.
    pub fn lfts(&self, f: &Fabric, parts: Vec<LayerCols>, weight: &[u64]) -> Result<Lfts> {
        let n = self.g.len();
        if weight.len() != self.channels() {
            return Err(fail(format!(
                "{} channel weights for {} channels",
                weight.len(),
                self.channels()
            )));
        }
        let cols = LayerCols::each_once(parts, self.streams(), "stream", |u| {
            self.streams[u].len() * n
        })
        .map_err(fail)?;
        // Switch LIDs on the final weights; they add none, so they route
        // side by side.
        let switch_lids: Vec<u16> = (0..self.targets.len() as u16)
            .filter(|&l| {
                let t = self.targets[l as usize];
                !t.end_port && t.switch != NONE
            })
            .collect();
        let switch_cols: Vec<u8> = switch_lids
            .par_iter()
            .map_init(
                || Tree::new(n),
                |tree, &lid| {
                    let mut col = vec![NO_PATH; n];
                    let t = self.targets[lid as usize];
                    tree.tree(&self.net(f), t, weight, &mut col, 0);
                    col
                },
            )
            .flatten()
            .collect();
        let mut lfts = Lfts::for_fabric(f);
        let entries: Vec<(u16, &[u8])> = self
            .streams
            .iter()
            .zip(&cols)
            .flat_map(|(lids, c)| lids.iter().copied().zip(c.cols.chunks_exact(n.max(1))))
            .chain(
                switch_lids
                    .iter()
                    .copied()
                    .zip(switch_cols.chunks_exact(n.max(1))),
            )
            .collect();
        lfts.par_rows_mut().enumerate().for_each(|(v, row)| {
            for &(lid, col) in &entries {
                row[lid as usize] = col[v];
            }
        });
        Ok(lfts)
    }
}

struct Stream {
    id: usize,
    /// Destinations routed so far.
    next: usize,
    /// Per destination, the port of every switch.
    cols: Vec<u8>,
    /// The weights this stream routes on during a round.
    weight: Vec<u64>,
    tree: Tree,
}

/// Some streams of a plan, routed round by round (see the module doc).
pub struct Streams {
    held: Vec<Stream>,
    rounds_done: usize,
}

impl Streams {
    pub fn rounds_done(&self) -> usize {
        self.rounds_done
    }

    /// Routes the next round on `global` (one weight per channel, as of
    /// the round's start) and returns what these streams added, summed.
    pub fn round(&mut self, f: &Fabric, plan: &StreamPlan, global: &[u64]) -> Result<Vec<u64>> {
        if global.len() != plan.channels() {
            return Err(fail(format!(
                "round {}: {} channel weights for {} channels",
                self.rounds_done,
                global.len(),
                plan.channels()
            )));
        }
        let n = plan.g.len();
        let net = plan.net(f);
        self.held.par_iter_mut().for_each(|s| {
            s.weight.clear();
            s.weight.extend_from_slice(global);
            let lids = &plan.streams[s.id];
            let end = (s.next + plan.round).min(lids.len());
            let cols = s.cols[s.next * n..end * n].chunks_exact_mut(n.max(1));
            for (&lid, col) in lids[s.next..end].iter().zip(cols) {
                let t = plan.targets[lid as usize];
                s.tree.route(&net, t, &mut s.weight, col, s.id);
            }
            s.next = end;
        });
        let mut sum = vec![0u64; plan.channels()];
        for s in &mut self.held {
            for ((x, w), g) in sum.iter_mut().zip(&s.weight).zip(global) {
                *x += w - g;
            }
        }
        self.rounds_done += 1;
        Ok(sum)
    }

    /// Each stream's columns, once every round has run (as Nue's layers
    /// return theirs: `layer` is the stream).
    pub fn finish(self) -> Vec<LayerCols> {
        self.held
            .into_iter()
            .map(|s| LayerCols {
                layer: s.id,
                cols: s.cols,
                stats: Stats::default(),
            })
            .collect()
    }
}

/// Every stream in this process: the LFTs the streams give wherever they
/// run.
pub fn streamed_lfts(f: &Fabric, streams: usize, opts: &EngineOptions) -> Result<Lfts> {
    let plan = StreamPlan::new(f, streams)?;
    let all: Vec<usize> = (0..plan.streams()).collect();
    let mut held = plan.start(&all)?;
    let mut global = vec![0u64; plan.channels()];
    for r in 0..plan.rounds() {
        let d = held.round(f, &plan, &global)?;
        global.iter_mut().zip(d).for_each(|(x, y)| *x += y);
        opts.report((r + 1) as u64, plan.rounds() as u64);
    }
    plan.lfts(f, held.finish(), &global)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};

    #[test]
    fn one_stream_is_sssp_in_guid_order_and_more_streams_stay_close() {
        let f = generate(&Topology::Dragonfly { p: 4, hosts: None }).expect("df4");
        let guid = super::super::sssp::guid_order_lfts(&f);
        let one = streamed_lfts(&f, 1, &EngineOptions::default()).expect("1");
        assert!(one == guid, "one stream is not the sequential greedy");
        let classic = crate::load::link_load(&f, &guid).max;
        // 16 streams on 264 switches: within a tenth of the sequential
        // greedy (BENCHMARKS.md).
        let sixteen = crate::load::link_load(
            &f,
            &streamed_lfts(&f, 16, &EngineOptions::default()).expect("16"),
        )
        .max;
        assert!(
            sixteen as f64 <= 1.1 * classic as f64,
            "{sixteen} vs {classic}"
        );
    }

    #[test]
    fn a_plan_refuses_what_it_cannot_route() {
        let f = generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("df2");
        assert!(StreamPlan::new(&f, 0).is_err());
        let plan = StreamPlan::new(&f, 4).expect("plan");
        assert!(plan.start(&[4]).is_err());
        let mut s = plan.start(&[0]).expect("start");
        assert!(s.round(&f, &plan, &[0u64; 3]).is_err());
        let none = plan.lfts(&f, Vec::new(), &vec![0; plan.channels()]);
        assert!(none.is_err());
    }
}
