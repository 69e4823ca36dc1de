//! SSSP (Hoefler, Schneider, Lumsdaine, HOTI'09; the base of DF-SSSP):
//! destination by destination, a shortest-path tree toward the destination
//! over channel weights that grow with every route laid over them, so later
//! destinations avoid the links earlier ones loaded. Not deadlock free by
//! itself.
//!
//! Weights are compared as (hops, load): routes stay minimal, which keeps the
//! VL bound of DF-DN (VLs = longest route), and load decides among the
//! minimal ones. Because hop counts are fixed, the tree is built layer by
//! layer in BFS order without a heap: O(links) per destination.
//!
//! The greedy is sensitive to the order of destinations and to ties, and
//! no one order wins everywhere (busiest link, Dragonfly p=4 / p=6: 1,616 /
//! 8,472 in GUID order, 1,556 / 9,750 in byte-swapped GUID order, OpenSM's
//! 1,560 / 9,714). So the engine routes in both orders (in parallel) and,
//! on small fabrics where it costs milliseconds, also exactly as OpenSM
//! does ([`super::sssp_opensm`]), and keeps the tables whose busiest link
//! carries the fewest paths (the first on ties; every candidate is minimal
//! and deterministic, so the choice is too).

use super::{EngineOptions, RoutingEngine};
use crate::error::Result;
use crate::graph::{SwitchGraph, UNREACHABLE};
use crate::model::{Fabric, NONE};
use crate::routing::minhop::{LidTarget, lid_targets};
use crate::tables::{Lfts, NO_PATH, Routing};

pub struct Sssp;

impl RoutingEngine for Sssp {
    fn split(&self, opts: &EngineOptions) -> super::Split {
        super::rounds::streams_split(self.name(), opts)
    }
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Sssp
    }
    fn description(&self) -> &'static str {
        "SSSP: minimal routes balanced globally by link load (Hoefler et al.); not deadlock free by itself"
    }
    fn routes_lmc(&self) -> bool {
        true
    }
    fn claims_deadlock_free(&self) -> bool {
        false
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        Ok(Routing::lfts_only(sssp_lfts(f, opts)?))
    }
}

/// Fabrics up to this many (switch, LID) entries also get OpenSM's own
/// SSSP among the candidates: about 0.1 s there.
const OPENSM_RUN_ENTRIES: usize = 1_000_000;

/// Balanced minimal LFTs; shared with engines that build on SSSP. With
/// `opts.sssp_streams` set, the streamed variant ([`super::sssp_streams`]).
pub(crate) fn sssp_lfts(f: &Fabric, opts: &EngineOptions) -> Result<Lfts> {
    if opts.sssp_streams > 0 {
        return super::sssp_streams::streamed_lfts(f, opts.sssp_streams as usize, opts);
    }
    let quiet = EngineOptions {
        progress: None,
        ..*opts
    };
    let g = SwitchGraph::new(f);
    let hops = g.hop_matrix();
    let (guid, swapped) = rayon::join(
        || layered(f, &g, &hops, opts, false),
        || layered(f, &g, &hops, &quiet, true),
    );
    // The search's own weights count the routes over each link (every end
    // port toward every end-port LID): the busiest link for free. Small
    // fabrics also weigh OpenSM's routing, by the index proper for all.
    let small = f.switches().len() * (f.max_lid() as usize + 1) <= OPENSM_RUN_ENTRIES;
    let mut candidates = vec![
        ("guid order", guid.0),
        ("byte-swapped guid order", swapped.0),
    ];
    let mut loads = vec![guid.1, swapped.1];
    if small {
        candidates.push(("OpenSM's", super::sssp_opensm::opensm_sssp_lfts(f)));
        loads = candidates
            .iter()
            .map(|(_, l)| crate::load::link_load(f, l).max)
            .collect();
    }
    let best = (0..candidates.len())
        .min_by_key(|&i| (loads[i], i))
        .unwrap_or(0);
    tracing::debug!(
        chosen = candidates[best].0,
        busiest = ?loads,
        "sssp candidates"
    );
    Ok(candidates.swap_remove(best).1)
}

/// The sequential greedy in GUID order alone (one candidate of
/// [`sssp_lfts`]).
#[cfg(test)]
pub(crate) fn guid_order_lfts(f: &Fabric) -> Lfts {
    let g = SwitchGraph::new(f);
    let hops = g.hop_matrix();
    layered(f, &g, &hops, &EngineOptions::default(), false).0
}

/// End-port LIDs in the order SSSP balances them: switches with more HCAs
/// first (by GUID among equals, or by the GUID's bytes reversed, how
/// OpenSM's switch map orders them on x86), each switch's HCAs by port.
/// End ports come first because they carry the traffic whose balance
/// matters; switch LIDs (management only) follow, in LID order.
pub(crate) fn end_port_order(
    f: &Fabric,
    targets: &[LidTarget],
    hosts: &[u64],
    swapped: bool,
) -> Vec<u16> {
    let mut ends: Vec<u16> = (0..targets.len() as u16)
        .filter(|&l| targets[l as usize].end_port && targets[l as usize].switch != NONE)
        .collect();
    ends.sort_by_key(|&l| {
        let t = targets[l as usize];
        let guid = f.guid(f.switches()[t.switch as usize]);
        // With LMC, every port's base LID before any second LID: the base
        // LIDs balance among themselves as at LMC 0, and each later LID
        // finds its port's earlier ones in the weights.
        let offset = f.lid_owner(l).map_or(0, |s| l - f.lid_of_slot(s));
        (
            offset,
            std::cmp::Reverse(hosts[t.switch as usize]),
            if swapped { guid.swap_bytes() } else { guid },
            t.port,
        )
    });
    ends
}

/// HCAs behind each switch: the routes a tree toward an end port carries
/// from there. A port counts once whatever its LMC: it sends from one
/// port.
pub(crate) fn hosts_per_switch(n: usize, targets: &[LidTarget]) -> Vec<u64> {
    let mut hosts = vec![0u64; n];
    for t in targets {
        if t.end_port && t.first && t.switch != NONE {
            hosts[t.switch as usize] += 1;
        }
    }
    hosts
}

/// What every destination's tree reads.
#[derive(Clone, Copy)]
pub(crate) struct Net<'a> {
    pub f: &'a Fabric,
    pub g: &'a SwitchGraph,
    pub hops: &'a [u8],
    /// HCAs behind each switch ([`hosts_per_switch`]).
    pub hosts: &'a [u64],
}

/// One destination's shortest-path tree over the channel weights, with
/// the scratch it reuses from one destination to the next.
pub(crate) struct Tree {
    order: Vec<u32>,
    cost: Vec<u64>,
    parent: Vec<u32>,
    flow: Vec<u64>,
    /// The destination switch `order` and `cand` were built for.
    order_of: u32,
    cand: Vec<u32>,
    cand_off: Vec<u32>,
}

impl Tree {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            order: Vec::with_capacity(n),
            cost: vec![0; n],
            parent: vec![u32::MAX; n],
            flow: vec![0; n],
            order_of: u32::MAX,
            cand: Vec::new(),
            cand_off: Vec::new(),
        }
    }

    /// Routes toward `t`: the port of every switch into `col` (one entry
    /// per switch, NO_PATH where none leads on). For an end port, every
    /// host's route to it is added to the weight of the channels it
    /// crosses. Among channels of equal cost the first wins, counting from
    /// the `rotate`-th: streams that route on the same weights rotate by
    /// their number, so they do not all pile onto the same link.
    pub(crate) fn route(
        &mut self,
        net: &Net,
        t: LidTarget,
        weight: &mut [u64],
        col: &mut [u8],
        rotate: usize,
    ) {
        self.tree(net, t, weight, col, rotate);
        if t.end_port {
            // Every host routes to this destination: add the number of
            // routes crossing each channel to its weight, leaves first.
            let (g, hosts) = (net.g, net.hosts);
            let flow = &mut self.flow;
            for &v in self.order.iter().rev() {
                let v = v as usize;
                flow[v] += hosts[v];
                let e = self.parent[v];
                if e != u32::MAX {
                    weight[e as usize] += flow[v];
                    let u = g.adj[e as usize].0 as usize;
                    flow[u] += flow[v];
                }
                flow[v] = 0;
            }
        }
    }

    /// The tree toward `t` alone, weights unchanged: [`Self::route`] without
    /// the routes added (what a switch LID, which carries no HCA traffic,
    /// needs).
    pub(crate) fn tree(
        &mut self,
        net: &Net,
        t: LidTarget,
        weight: &[u64],
        col: &mut [u8],
        rotate: usize,
    ) {
        let Net { f, g, hops, .. } = *net;
        let n = g.len();
        let j = t.switch as usize;
        let hrow = &hops[j * n..(j + 1) * n];
        if self.order_of != t.switch {
            self.prepare(g, hrow);
            self.order_of = t.switch;
        }
        let (order, cand, cand_off) = (&self.order, &self.cand, &self.cand_off);
        let (cost, parent) = (&mut self.cost, &mut self.parent);
        cost[j] = 0;
        parent[j] = u32::MAX;
        col[j] = t.port;
        for (pos, &v) in order.iter().enumerate().skip(1) {
            let v = v as usize;
            let mut best = (u64::MAX, u32::MAX);
            let here = &cand[cand_off[pos] as usize..cand_off[pos + 1] as usize];
            let turn = if here.is_empty() {
                0
            } else {
                rotate % here.len()
            };
            for &e in here[turn..].iter().chain(&here[..turn]) {
                let u = g.adj[e as usize].0 as usize;
                let c = cost[u] + weight[e as usize];
                // Equal totals: the neighbour closer to the destination by
                // weight first, as Dijkstra settles it first.
                if c < best.0
                    || (c == best.0
                        && best.1 != u32::MAX
                        && cost[u] < cost[g.adj[best.1 as usize].0 as usize])
                {
                    best = (c, e);
                }
            }
            cost[v] = best.0;
            parent[v] = best.1;
            col[v] = if best.1 == u32::MAX {
                NO_PATH
            } else {
                f.port_of(g.adj[best.1 as usize].1)
            };
        }
    }

    /// Switches by hop distance to the destination switch (counting sort)
    /// and, per switch in that order, the channels one hop closer: shared
    /// by every LID on that switch.
    fn prepare(&mut self, g: &SwitchGraph, hrow: &[u8]) {
        let order = &mut self.order;
        order.clear();
        let maxh = hrow
            .iter()
            .copied()
            .filter(|&h| h != UNREACHABLE)
            .max()
            .unwrap_or(0) as usize;
        let mut bucket = vec![0u32; maxh + 2];
        for &h in hrow {
            if h != UNREACHABLE {
                bucket[h as usize + 1] += 1;
            }
        }
        for i in 1..bucket.len() {
            bucket[i] += bucket[i - 1];
        }
        order.resize(bucket[maxh + 1] as usize, 0);
        for (v, &h) in hrow.iter().enumerate() {
            if h != UNREACHABLE {
                order[bucket[h as usize] as usize] = v as u32;
                bucket[h as usize] += 1;
            }
        }
        self.cand.clear();
        self.cand_off.clear();
        self.cand_off.push(0);
        for &v in order.iter() {
            let hv = hrow[v as usize];
            let start = g.off[v as usize] as usize;
            for (i, &(u, _)) in g.neighbours(v).iter().enumerate() {
                if hrow[u as usize] != UNREACHABLE && hrow[u as usize] + 1 == hv {
                    self.cand.push((start + i) as u32);
                }
            }
            self.cand_off.push(self.cand.len() as u32);
        }
    }
}

/// The layered search with destinations in [`end_port_order`]; with the
/// most routes any link carries.
fn layered(
    f: &Fabric,
    g: &SwitchGraph,
    hops: &[u8],
    opts: &EngineOptions,
    swapped: bool,
) -> (Lfts, u64) {
    let n = g.len();
    let targets = lid_targets(f);
    let mut lfts = Lfts::for_fabric(f);
    let mut weight = vec![0u64; g.adj.len()];
    let hosts = hosts_per_switch(n, &targets);
    let mut tree = Tree::new(n);
    let net = Net {
        f,
        g,
        hops,
        hosts: &hosts,
    };
    let lids: Vec<u16> = end_port_order(f, &targets, &hosts, swapped)
        .into_iter()
        .chain((0..targets.len() as u16).filter(|&l| !targets[l as usize].end_port))
        .collect();
    let total = lids.len() as u64;
    // LFT entries go to a destination-major buffer first and reach the
    // switch rows 64 LIDs at a time: one cache miss per row and block
    // instead of one per entry.
    const BLOCK: usize = 64;
    let mut cols = vec![NO_PATH; BLOCK * n];
    let mut pending: Vec<u16> = Vec::with_capacity(BLOCK);
    let flush = |lfts: &mut Lfts, cols: &mut [u8], pending: &mut Vec<u16>| {
        for v in 0..n {
            let row = lfts.row_mut(v as u32);
            for (k, &lid) in pending.iter().enumerate() {
                row[lid as usize] = cols[k * n + v];
            }
        }
        cols.fill(NO_PATH);
        pending.clear();
    };
    for (k, &lid) in lids.iter().enumerate() {
        let t = targets[lid as usize];
        if t.switch == NONE {
            continue;
        }
        if pending.len() == BLOCK {
            flush(&mut lfts, &mut cols, &mut pending);
        }
        let col = &mut cols[pending.len() * n..(pending.len() + 1) * n];
        pending.push(lid);
        tree.route(&net, t, &mut weight, col, 0);
        if k % 256 == 0 {
            opts.report(k as u64, total);
        }
    }
    flush(&mut lfts, &mut cols, &mut pending);
    opts.report(total, total);
    let busiest = weight.iter().copied().max().unwrap_or(0);
    (lfts, busiest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};

    #[test]
    fn no_link_carries_more_than_under_opensms_sssp() {
        // Busiest link under OpenSM 3.3.23's sssp on the same generated
        // files (BENCHMARKS.md, link load side by side, measured on ibsim).
        let cases = [
            (Topology::Dragonfly { p: 4, hosts: None }, 1560),
            (Topology::SlimFly { q: 7, hosts: None }, 756),
            (
                Topology::Mesh {
                    dims: vec![4, 4, 4],
                    torus: true,
                    hosts: 1,
                },
                58,
            ),
            (Topology::KaryNTree { k: 10, n: 3 }, 1800),
            (
                Topology::RandomRegular {
                    switches: 128,
                    degree: 8,
                    hosts: 4,
                    seed: 1,
                },
                964,
            ),
        ];
        for (t, opensm) in cases {
            let f = generate(&t).expect("topology");
            let r = Sssp.route(&f, &EngineOptions::default()).expect("routes");
            let l = crate::load::link_load(&f, &r.lfts);
            assert_eq!(l.unrouted, 0, "{t:?}");
            assert!(l.max <= opensm, "{t:?}: {} > OpenSM's {opensm}", l.max);
        }
    }

    #[test]
    fn a_torus_is_balanced_within_a_third_of_the_mean() {
        // 4x4x4 torus, one HCA per switch: 32 paths per directed link on
        // average with minimal routes. OpenSM 3.3.23's SSSP puts 58 on its
        // busiest link, MinHop 70; an even spread stays near the mean.
        let f = generate(&Topology::Mesh {
            dims: vec![4, 4, 4],
            torus: true,
            hosts: 1,
        })
        .expect("torus");
        let r = Sssp.route(&f, &EngineOptions::default()).expect("routes");
        let l = crate::load::link_load(&f, &r.lfts);
        assert_eq!((l.unrouted, l.mean), (0, 32.0));
        assert!(l.max as f64 <= 1.34 * l.mean, "{l:?}");
    }
}
