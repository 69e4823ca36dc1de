//! Flow-level traffic simulation over routed (multi-subnet) fabrics.
//!
//! Every flow follows the path the emitted tables give it: the source's LFT
//! walk to the router port its subnet's mapping names, the routers' relay
//! decisions, then the LFT walks in the next subnets. Bandwidth is shared
//! max-min fairly (progressive filling): the model of a lossless network
//! whose flows each get the most they can without taking from a flow that
//! has less. It ignores head-of-line blocking and congestion trees, so it
//! shows what the routes allow, not packet-level dynamics. Deterministic:
//! every random choice comes from a seeded ChaCha stream.

use crate::error::{Error, Result};
use crate::intersubnet::{Gid, GlobalView, InterSubnetRoutes, Tracer};
use crate::model::{NodeKind, Slot, NONE};
use crate::multi::MultiFabric;
use crate::tables::{Routing, SL_NONE};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// An end node that sends and receives traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    pub subnet: usize,
    pub slot: Slot,
    pub gid: Gid,
    pub lid: u16,
}

/// A routed fabric, ready to give each (source, destination) host pair the
/// list of directed links its packets cross. Link ids are the sending port
/// slots, offset per subnet, so a link is one direction of one cable.
pub struct Network<'a> {
    m: &'a MultiFabric,
    routings: &'a [Routing],
    tracer: Tracer<'a>,
    offsets: Vec<u32>,
    num_links: usize,
    hosts: Vec<Host>,
    /// (router GUID, port) -> (subnet, slot of the port there, its LID).
    router_ports: HashMap<(u64, u8), (usize, Slot, u16)>,
}

fn sim_err(reason: String) -> Error {
    Error::Invalid(format!("simulation: {reason}"))
}

impl<'a> Network<'a> {
    /// `routings[i]` routes subnet `i`; `view` and `routes` are the
    /// controller's inputs and outputs for the same fabric.
    pub fn new(
        m: &'a MultiFabric,
        routings: &'a [Routing],
        view: &'a GlobalView,
        routes: &'a InterSubnetRoutes,
    ) -> Result<Self> {
        if routings.len() != m.subnets.len() {
            return Err(sim_err(format!(
                "{} subnets but {} routings",
                m.subnets.len(),
                routings.len()
            )));
        }
        let mut offsets = Vec::with_capacity(m.subnets.len());
        let mut num_links = 0usize;
        let mut hosts = Vec::new();
        for (si, s) in m.subnets.iter().enumerate() {
            offsets.push(num_links as u32);
            num_links += s.fabric.num_slots();
            let f = &s.fabric;
            for &e in f.endports() {
                if f.kind(f.node_of(e)) == NodeKind::Ca && f.remote(e) != NONE {
                    hosts.push(Host {
                        subnet: si,
                        slot: e,
                        gid: Gid {
                            prefix: s.prefix,
                            guid: f.port_guid(e),
                        },
                        lid: f.lid_of_slot(e),
                    });
                }
            }
        }
        if num_links > u32::MAX as usize {
            return Err(sim_err("more than 2^32 ports".into()));
        }
        let mut router_ports = HashMap::new();
        let index: Vec<HashMap<u64, Slot>> = m
            .subnets
            .iter()
            .map(|s| s.fabric.port_guid_index())
            .collect();
        for r in &m.routers {
            for p in &r.ports {
                let slot = *index[p.subnet].get(&p.port_guid).ok_or_else(|| {
                    sim_err(format!(
                        "router '{}' port {} is missing from its subnet",
                        r.name, p.port
                    ))
                })?;
                router_ports.insert((r.guid, p.port), (p.subnet, slot, p.lid));
            }
        }
        Ok(Self {
            m,
            routings,
            tracer: Tracer::new(view, routes),
            offsets,
            num_links,
            hosts,
            router_ports,
        })
    }

    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    pub fn num_links(&self) -> usize {
        self.num_links
    }

    /// Appends the channels (link, VL) from `start` (a sending end port
    /// with LID `slid`) to the end port with `dlid` in subnet `s`,
    /// following the LFTs, the pair's SL and the SL-to-VL tables.
    fn walk(
        &self,
        s: usize,
        start: Slot,
        slid: u16,
        dlid: u16,
        out: &mut Vec<(u32, u8)>,
    ) -> Result<()> {
        let f = &self.m.subnets[s].fabric;
        let r = &self.routings[s];
        let name = &self.m.subnets[s].name;
        let off = self.offsets[s];
        let sl = r.path_sl.as_ref().map_or(0, |p| p.get(slid, dlid));
        if sl == SL_NONE {
            return Err(sim_err(format!(
                "subnet '{name}' has no SL for LID {slid} -> {dlid}"
            )));
        }
        let mut slot = start;
        let mut vl = r.sl2vl.as_ref().map_or(0, |t| t.port_vl(start, sl));
        for _ in 0..=f.switches().len() + 1 {
            out.push((off + slot, vl));
            let rem = f.remote(slot);
            if rem == NONE {
                return Err(sim_err(format!(
                    "port {} of '{}' is not linked",
                    f.port_of(slot),
                    f.desc(f.node_of(slot))
                )));
            }
            let node = f.node_of(rem);
            match f.switch_index(node) {
                None if f.lid_of_slot(rem) == dlid => return Ok(()),
                None => {
                    return Err(sim_err(format!(
                        "the route to LID {dlid} in '{name}' ends at '{}'",
                        f.desc(node)
                    )))
                }
                Some(si) => {
                    let p = r.lfts.get(si, dlid);
                    if p == 0 || p > f.num_ports(node) {
                        return Err(sim_err(format!(
                            "switch '{}' in '{name}' has no route to LID {dlid}",
                            f.desc(node)
                        )));
                    }
                    vl = r
                        .sl2vl
                        .as_ref()
                        .map_or(0, |t| t.switch_vl(si, f.port_of(rem), p, sl));
                    slot = f.slot(node, p);
                }
            }
        }
        Err(sim_err(format!(
            "the route to LID {dlid} in '{name}' loops"
        )))
    }

    /// Appends the channels (link, VL) of the path from host `src` to host
    /// `dst`: the LFT walk to the router port the source subnet's mapping
    /// names, then after each router the walk to the next LID.
    pub fn path_channels(&self, src: usize, dst: usize, out: &mut Vec<(u32, u8)>) -> Result<()> {
        let (hs, hd) = (self.hosts[src], self.hosts[dst]);
        if hs.subnet == hd.subnet {
            return self.walk(hs.subnet, hs.slot, hs.lid, hd.lid, out);
        }
        let crossings = self.tracer.trace(hs.gid, hd.gid)?;
        let port = |c: &crate::intersubnet::Crossing, p: u8| {
            self.router_ports
                .get(&(c.router_guid, p))
                .copied()
                .ok_or_else(|| sim_err(format!("router {:#018x} has no port {p}", c.router_guid)))
        };
        let first = crossings
            .first()
            .ok_or_else(|| sim_err(format!("no router crossing from {} to {}", hs.gid, hd.gid)))?;
        let (_, _, in_lid) = port(first, first.ingress_port)?;
        self.walk(hs.subnet, hs.slot, hs.lid, in_lid, out)?;
        for c in &crossings {
            let (sn, slot, lid) = port(c, c.egress_port)?;
            self.walk(sn, slot, lid, c.next_lid, out)?;
        }
        Ok(())
    }

    /// Names a channel for reports: the sending port and its VL.
    pub fn describe(&self, link: u32, vl: u8) -> String {
        let s = self
            .offsets
            .partition_point(|&o| o <= link)
            .saturating_sub(1);
        let f = &self.m.subnets[s].fabric;
        let slot = link - self.offsets[s];
        let rem = f.remote(slot);
        let to = if rem == NONE {
            "nothing".to_string()
        } else {
            f.desc(f.node_of(rem)).to_string()
        };
        format!(
            "{}: '{}' port {} -> '{to}' VL {vl}",
            self.m.subnets[s].name,
            f.desc(f.node_of(slot)),
            f.port_of(slot)
        )
    }

    /// Max-min fair rates (fractions of one link's bandwidth) of flows
    /// given as (source host, destination host) pairs. With equal message
    /// sizes these rates also give completion times (size / rate): a flow's
    /// bottleneck only carries flows as slow or slower, so none of them
    /// speeds up when faster messages end.
    pub fn rates(&self, flows: &[(usize, usize)]) -> Result<Vec<f64>> {
        let mut links = Vec::with_capacity(flows.len() * 8);
        let mut starts = Vec::with_capacity(flows.len() + 1);
        starts.push(0);
        let mut ch = Vec::with_capacity(16);
        for &(s, d) in flows {
            ch.clear();
            self.path_channels(s, d, &mut ch)?;
            links.extend(ch.iter().map(|c| c.0));
            starts.push(links.len());
        }
        Ok(max_min(&links, &starts, self.num_links))
    }
}

/// The whole fabric's check: every host pair (within and across subnets)
/// walked through the emitted tables, and the channel dependency graph of
/// all subnets plus the router hops, with VLs, searched for a cycle.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GlobalReport {
    pub pairs: u64,
    pub unreachable: u64,
    /// Why the first unreachable pair failed.
    pub first_unreachable: Option<String>,
    pub channels: usize,
    pub dependencies: usize,
    pub vls_used: u8,
    /// A dependency cycle, as channel descriptions, when there is one.
    pub cycle: Option<Vec<String>>,
}

impl GlobalReport {
    pub fn deadlock_free(&self) -> bool {
        self.cycle.is_none()
    }
    pub fn ok(&self) -> bool {
        self.unreachable == 0 && self.cycle.is_none()
    }
}

/// See [`GlobalReport`]. Walks all host pairs, so it costs hosts squared
/// path walks (0.4 M for the paper's 648 HCAs).
pub fn verify_global(net: &Network<'_>) -> GlobalReport {
    verify_global_with(net, None)
}

/// [`verify_global`], calling `progress(sources done, sources)` after each
/// batch of sources.
pub fn verify_global_with(
    net: &Network<'_>,
    progress: Option<&(dyn Fn(u64, u64) + Sync)>,
) -> GlobalReport {
    let n = net.hosts.len();
    let chan = |(l, v): (u32, u8)| (l as u64) << 4 | v as u64;
    // Per source: dependencies, unreachable count, first reason, top VL.
    type PerSource = (Vec<(u64, u64)>, u64, Option<String>, u8);
    let walk = |src: usize| -> PerSource {
        let mut deps = Vec::new();
        let mut bad = 0u64;
        let mut why = None;
        let mut maxvl = 0u8;
        let mut ch = Vec::with_capacity(16);
        for dst in 0..n {
            if dst == src {
                continue;
            }
            ch.clear();
            match net.path_channels(src, dst, &mut ch) {
                Ok(()) => {
                    for w in ch.windows(2) {
                        deps.push((chan(w[0]), chan(w[1])));
                    }
                    maxvl = ch.iter().map(|c| c.1).fold(maxvl, u8::max);
                }
                Err(e) => {
                    bad += 1;
                    why.get_or_insert_with(|| e.to_string());
                }
            }
        }
        deps.sort_unstable();
        deps.dedup();
        (deps, bad, why, maxvl)
    };
    // Sources in batches, merged into one deduplicated set after each: the
    // distinct dependencies are few (channels x turns), while every
    // source's own list holds one entry per destination and hop, so keeping
    // them all at once would cost memory in hosts squared.
    let mut deps: Vec<(u64, u64)> = Vec::new();
    let (mut unreachable, mut first, mut maxvl) = (0u64, None, 0u8);
    let batch = (rayon::current_num_threads() * 16).max(1);
    for lo in (0..n).step_by(batch) {
        let per_source: Vec<PerSource> = (lo..(lo + batch).min(n))
            .into_par_iter()
            .map(walk)
            .collect();
        for (d, b, w, v) in per_source {
            deps.extend(d);
            unreachable += b;
            if first.is_none() {
                first = w;
            }
            maxvl = maxvl.max(v);
        }
        deps.par_sort_unstable();
        deps.dedup();
        if let Some(p) = progress {
            p(((lo + batch).min(n)) as u64, n as u64);
        }
    }
    let mut ids: Vec<u64> = deps.iter().flat_map(|&(a, b)| [a, b]).collect();
    ids.par_sort_unstable();
    ids.dedup();
    let id = |c: u64| ids.binary_search(&c).unwrap_or(0);
    let mut start = vec![0usize; ids.len() + 1];
    for &(a, _) in &deps {
        start[id(a) + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    // `deps` is sorted by source channel, so targets line up with `start`.
    let targets: Vec<usize> = deps.iter().map(|&(_, b)| id(b)).collect();
    let cycle = find_cycle(&start, &targets).map(|c| {
        c.iter()
            .map(|&i| net.describe((ids[i] >> 4) as u32, (ids[i] & 15) as u8))
            .collect()
    });
    GlobalReport {
        pairs: (n as u64) * (n.saturating_sub(1) as u64),
        unreachable,
        first_unreachable: first,
        channels: ids.len(),
        dependencies: deps.len(),
        vls_used: maxvl + 1,
        cycle,
    }
}

/// A cycle of the graph in CSR form (iterative depth-first search).
fn find_cycle(start: &[usize], targets: &[usize]) -> Option<Vec<usize>> {
    let n = start.len() - 1;
    // 0 unseen, 1 on the stack, 2 done.
    let mut colour = vec![0u8; n];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if colour[root] != 0 {
            continue;
        }
        colour[root] = 1;
        stack.push((root, start[root]));
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if *next < start[v + 1] {
                let w = targets[*next];
                *next += 1;
                match colour[w] {
                    0 => {
                        colour[w] = 1;
                        stack.push((w, start[w]));
                    }
                    1 => {
                        let from = stack.iter().position(|&(x, _)| x == w).unwrap_or(0);
                        return Some(stack[from..].iter().map(|&(x, _)| x).collect());
                    }
                    _ => {}
                }
            } else {
                colour[v] = 2;
                stack.pop();
            }
        }
    }
    None
}

/// Per-subnet routing of a multi-subnet fabric and the view the controller
/// builds from it.
pub struct Routed {
    pub routings: Vec<Routing>,
    /// The verifier's report of each subnet's tables.
    pub reports: Vec<crate::verify::Report>,
    pub view: GlobalView,
}

/// Routes every subnet with `engine`; see [`route_each`].
pub fn route_subnets(m: &MultiFabric, engine: &str) -> Result<Routed> {
    route_each(m, &vec![engine; m.subnets.len()])
}

/// Routes subnet `i` with `engines[i]` and verifies each result (tables
/// that could deadlock or leave pairs unrouted are refused: a fabric built
/// on them cannot run). The view carries ISFR's primary destinations of
/// the subnets routed by fat-tree routing.
pub fn route_each(m: &MultiFabric, engines: &[&str]) -> Result<Routed> {
    if engines.len() != m.subnets.len() {
        return Err(sim_err(format!(
            "{} engines for {} subnets",
            engines.len(),
            m.subnets.len()
        )));
    }
    let mut view = GlobalView::from_multi(m);
    let mut routings = Vec::with_capacity(m.subnets.len());
    let mut reports = Vec::with_capacity(m.subnets.len());
    for (s, &engine) in m.subnets.iter().zip(engines) {
        let e = crate::routing::by_name(engine)?;
        let r = e.route(&s.fabric, &crate::routing::EngineOptions::default())?;
        let rep = crate::verify::verify(&s.fabric, &r);
        if !rep.ok() {
            return Err(sim_err(format!(
                "engine '{engine}' gives subnet '{}' tables that fail verification: {}",
                s.name,
                if rep.all_pairs_routed() {
                    format!(
                        "dependency cycle {}",
                        rep.describe_cycle(&s.fabric).unwrap_or_default()
                    )
                } else {
                    format!("{} of {} pairs unrouted", rep.broken_pairs, rep.pairs)
                }
            )));
        }
        view.set_primary(
            s.prefix,
            &crate::intersubnet::reported_primary_lids(e.as_ref(), &s.fabric, &r.lfts),
        );
        routings.push(r);
        reports.push(rep);
    }
    Ok(Routed {
        routings,
        reports,
        view,
    })
}

/// Total order on non-NaN shares, for the heap.
#[derive(Clone, Copy, PartialEq)]
struct Share(f64);
impl Eq for Share {}
impl PartialOrd for Share {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Share {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// Progressive filling with unit link capacities: the link with the least
/// capacity left per unfrozen flow saturates next and fixes the rates of
/// its flows. Flow `f` crosses `links[starts[f]..starts[f+1]]`. A link's
/// share only grows as flows freeze elsewhere, so a lazy heap holds them.
pub fn max_min(links: &[u32], starts: &[usize], num_links: usize) -> Vec<f64> {
    let nflows = starts.len().saturating_sub(1);
    let mut count = vec![0u32; num_links + 1];
    for &l in links {
        count[l as usize + 1] += 1;
    }
    for i in 1..count.len() {
        count[i] += count[i - 1];
    }
    let mut by_link = vec![0u32; links.len()];
    let mut fill = count.clone();
    for f in 0..nflows {
        for &l in &links[starts[f]..starts[f + 1]] {
            by_link[fill[l as usize] as usize] = f as u32;
            fill[l as usize] += 1;
        }
    }
    let mut left = vec![1.0f64; num_links];
    let mut active: Vec<u32> = (0..num_links).map(|l| count[l + 1] - count[l]).collect();
    let mut heap: BinaryHeap<Reverse<(Share, u32)>> = (0..num_links)
        .filter(|&l| active[l] > 0)
        .map(|l| Reverse((Share(1.0 / active[l] as f64), l as u32)))
        .collect();
    let mut rate = vec![f64::NAN; nflows];
    while let Some(Reverse((Share(share), l))) = heap.pop() {
        let l = l as usize;
        if active[l] == 0 || share != left[l] / active[l] as f64 {
            continue;
        }
        for &f in &by_link[count[l] as usize..count[l + 1] as usize] {
            let f = f as usize;
            if !rate[f].is_nan() {
                continue;
            }
            rate[f] = share;
            for &k in &links[starts[f]..starts[f + 1]] {
                let k = k as usize;
                left[k] = (left[k] - share).max(0.0);
                active[k] -= 1;
                if active[k] > 0 && k != l {
                    heap.push(Reverse((Share(left[k] / active[k] as f64), k as u32)));
                }
            }
        }
    }
    // Flows that cross no link (none here: every path has an injection
    // link) would be unconstrained; give them the line rate.
    rate.iter()
        .map(|&r| if r.is_nan() { 1.0 } else { r })
        .collect()
}

/// HPC Challenge ring results, as fractions of one link's bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RingStats {
    /// Natural-order ring (hosts in subnet, then port order).
    pub nor: f64,
    pub ror_min: f64,
    pub ror_max: f64,
    pub ror_avg: f64,
    /// Mean flow rate over the random rings' messages, ignoring that a
    /// send-receive waits for its slower half: the optimistic view.
    pub ror_flow_avg: f64,
    /// Random-order rings simulated.
    pub rings: usize,
}

/// One ring's figure, the HPCC ring test's ping-pong: every host sends to
/// its left neighbour while receiving from its right one (a send-receive
/// that ends when both messages are through), then the same to the right.
/// A host's bandwidth is its two messages over the time of its two
/// exchanges; the figure is the mean over hosts, in link bandwidths.
/// Also returns the mean flow rate of the ring's messages.
pub fn ring(net: &Network<'_>, order: &[usize]) -> Result<(f64, f64)> {
    let n = order.len();
    if n < 2 {
        return Err(sim_err("a ring needs at least two hosts".into()));
    }
    let left: Vec<(usize, usize)> = (0..n).map(|i| (order[i], order[(i + n - 1) % n])).collect();
    let right: Vec<(usize, usize)> = (0..n).map(|i| (order[i], order[(i + 1) % n])).collect();
    let (l, r) = (net.rates(&left)?, net.rates(&right)?);
    let mut sum = 0.0;
    for i in 0..n {
        // Host i sends left[i] and receives left[i+1]; then sends right[i]
        // and receives right[i-1].
        let t1 = (1.0 / l[i]).max(1.0 / l[(i + 1) % n]);
        let t2 = (1.0 / r[i]).max(1.0 / r[(i + n - 1) % n]);
        sum += 2.0 / (t1 + t2);
    }
    let flows = (l.iter().sum::<f64>() + r.iter().sum::<f64>()) / (2 * n) as f64;
    Ok((sum / n as f64, flows))
}

/// The natural-order ring and `random` random-order rings (seeded; ring `i`
/// draws from stream `i` of `seed`, so results do not depend on threads).
pub fn rings(net: &Network<'_>, random: usize, seed: u64) -> Result<RingStats> {
    let natural: Vec<usize> = (0..net.hosts.len()).collect();
    let nor = ring(net, &natural)?.0;
    let values: Vec<(f64, f64)> = (0..random)
        .into_par_iter()
        .map(|i| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(i as u64);
            let mut order = natural.clone();
            order.shuffle(&mut rng);
            ring(net, &order)
        })
        .collect::<Result<_>>()?;
    let (mut lo, mut hi, mut sum, mut flows) = (f64::INFINITY, 0.0f64, 0.0, 0.0);
    for &(v, f) in &values {
        lo = lo.min(v);
        hi = hi.max(v);
        sum += v;
        flows += f;
    }
    let k = values.len().max(1) as f64;
    Ok(RingStats {
        nor,
        ror_min: if values.is_empty() { nor } else { lo },
        ror_max: if values.is_empty() { nor } else { hi },
        ror_avg: if values.is_empty() { nor } else { sum / k },
        ror_flow_avg: if values.is_empty() { nor } else { flows / k },
        rings: values.len(),
    })
}

/// Uniform traffic with hot spots, as in the inter-subnet paper: every host
/// sends one flow; with probability `isp` to another subnet, else to its
/// own. One hot spot per subnet (drawn per sample) receives a `hot_spot`
/// share of the traffic headed to that subnet; the rest picks uniformly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Uniform {
    /// Inter-subnet percentage as a probability, 0..=1.
    pub isp: f64,
    /// Probability of sending to the destination subnet's hot spot (the
    /// paper: 0.05; 0 for plain uniform traffic).
    pub hot_spot: f64,
    /// Independent draws averaged.
    pub samples: usize,
    pub seed: u64,
}

/// Throughput as a fraction of the hosts' injection bandwidth, averaged
/// over the samples.
pub fn uniform(net: &Network<'_>, u: &Uniform) -> Result<f64> {
    if !(0.0..=1.0).contains(&u.isp) || !(0.0..=1.0).contains(&u.hot_spot) {
        return Err(sim_err(
            "ISP and hot-spot probabilities lie in 0..=1".into(),
        ));
    }
    let hosts = &net.hosts;
    let nsub = net.m.subnets.len();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); nsub];
    for (i, h) in hosts.iter().enumerate() {
        members[h.subnet].push(i);
    }
    // Per subnet: the other subnets with hosts, and how many hosts they hold.
    let others: Vec<Vec<usize>> = (0..nsub)
        .map(|s| {
            (0..nsub)
                .filter(|&t| t != s && !members[t].is_empty())
                .collect()
        })
        .collect();
    let remote_hosts: Vec<usize> = others
        .iter()
        .map(|o| o.iter().map(|&t| members[t].len()).sum())
        .collect();
    let values: Vec<f64> = (0..u.samples.max(1))
        .into_par_iter()
        .map(|sample| {
            let mut rng = ChaCha8Rng::seed_from_u64(u.seed);
            rng.set_stream(sample as u64);
            let hot: Vec<Option<usize>> = members
                .iter()
                .map(|m| m.choose(&mut rng).copied())
                .collect();
            let mut flows = Vec::with_capacity(hosts.len());
            for (src, h) in hosts.iter().enumerate() {
                let others = &others[h.subnet];
                let remote = !others.is_empty() && rng.gen_bool(u.isp);
                let target_subnet = if remote {
                    // Weighted by size: a uniform pick among remote hosts.
                    let mut k = rng.gen_range(0..remote_hosts[h.subnet]);
                    let mut pick = others[0];
                    for &s in others {
                        if k < members[s].len() {
                            pick = s;
                            break;
                        }
                        k -= members[s].len();
                    }
                    pick
                } else {
                    h.subnet
                };
                let pool = &members[target_subnet];
                let hot_dst = hot[target_subnet].filter(|&d| d != src);
                let dst = match hot_dst {
                    Some(d) if rng.gen_bool(u.hot_spot) => d,
                    _ => {
                        if pool.len() < 2 && !remote {
                            continue;
                        }
                        loop {
                            let d = pool[rng.gen_range(0..pool.len())];
                            if d != src {
                                break d;
                            }
                        }
                    }
                };
                flows.push((src, dst));
            }
            let r = net.rates(&flows)?;
            Ok(r.iter().sum::<f64>() / hosts.len().max(1) as f64)
        })
        .collect::<Result<_>>()?;
    Ok(values.iter().sum::<f64>() / values.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flows(paths: &[&[u32]]) -> (Vec<u32>, Vec<usize>) {
        let mut links = Vec::new();
        let mut starts = vec![0];
        for p in paths {
            links.extend_from_slice(p);
            starts.push(links.len());
        }
        (links, starts)
    }

    #[test]
    fn max_min_gives_the_textbook_answer() {
        // Link 0 carries flows a, b, c; link 1 carries c, d. Link 0
        // saturates first (1/3 each); d then takes what c leaves on link 1.
        let (l, s) = flows(&[&[0], &[0], &[0, 1], &[1]]);
        let r = max_min(&l, &s, 2);
        let want = [1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 2.0 / 3.0];
        for (a, b) in r.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{r:?}");
        }
        // Independent flows each get the line rate; shared links split.
        let (l, s) = flows(&[&[0, 2], &[1, 2], &[3]]);
        assert_eq!(max_min(&l, &s, 4), vec![0.5, 0.5, 1.0]);
    }
}
