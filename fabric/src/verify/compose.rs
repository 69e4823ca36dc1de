//! The whole fabric's check from the subnets' dependency summaries
//! ([`super::summary`]) and the inter-subnet routes: the same answer as
//! walking every host pair ([`super::global`]), at a cost of router ports
//! times destinations instead of hosts squared.
//!
//! Delivery: inside a subnet the verification gate has delivered every
//! pair with a CA at either end, CA to router port and router port to CA
//! included. What is left is the routers' part: per destination, from each
//! other subnet, the router port its mapping names, then each router's
//! rule, egress port and next LID, and the transit legs between, until the
//! destination's subnet. A packet's next move depends on where it is, the
//! destination and, for a hash choice, the source LID; after the first
//! router the source LID is the last egress port's, so only the first
//! crossing depends on the source host, and that crossing takes every
//! candidate port some host of the subnet hashes to.
//!
//! Deadlock: the graph of the summaries' vertices and CA-to-CA edges,
//! plus the chains of the walks the routes use (a CA's walk to the router
//! port its mapping names, a router port's walk to the CA it delivers to,
//! the transit legs) and the router hops they make (from the channel a
//! packet arrives on to the channel it leaves on, with the VLs the tables
//! give at both ends), has a cycle exactly when the whole fabric's CDG as
//! the all-pairs check builds it has one outside the CA-to-CA graph of a
//! single subnet (acyclic: the gate refused the tables otherwise). Every
//! such cycle takes a step along a chain or a router hop, whose ends are
//! vertices, and between vertices the summary edges stand for every path.
//! The one coarser point: when some hosts of a subnet reach a destination
//! and others do not (a hash choice onto a broken port), the walks of all
//! of them to the router port count; the fabric is refused for the
//! unreachable pairs anyway.

use super::global::find_cycle;
use super::summary::{DependencySummary, Runs, SummaryError, Vertex};
use crate::intersubnet::{Choice, Gid, GlobalView, InterSubnetRoutes, Mapping, Match, Rule};
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Inputs the composition cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComposeError {
    #[error("two dependency summaries for subnet {0:#018x}")]
    DuplicateSummary(u64),
    #[error("subnet '{subnet}' ({prefix:#018x}) has no dependency summary")]
    MissingSummary { subnet: String, prefix: u64 },
    #[error("the dependency summary of subnet '{subnet}' is refused: {source}")]
    Malformed {
        subnet: String,
        #[source]
        source: SummaryError,
    },
    #[error("subnet '{subnet}': {reason}")]
    Inconsistent { subnet: String, reason: String },
}

/// A destination some hosts of a subnet cannot reach.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Undeliverable {
    pub source_subnet: String,
    /// The hosts of the source subnet that cannot reach it.
    pub hosts: u64,
    pub destination_subnet: String,
    /// The destination GID, `prefix:guid`.
    pub destination: String,
    pub destination_lid: u16,
    pub reason: String,
}

impl std::fmt::Display for Undeliverable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "from subnet '{}' ({} hosts) to {} (LID {} in '{}'): {}",
            self.source_subnet,
            self.hosts,
            self.destination,
            self.destination_lid,
            self.destination_subnet,
            self.reason
        )
    }
}

/// One channel of a dependency cycle.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CycleStep {
    pub subnet: String,
    pub channel: String,
    pub vl: u8,
}

impl std::fmt::Display for CycleStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}, VL {}", self.subnet, self.channel, self.vl)
    }
}

/// What the composition found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ComposeReport {
    /// Ordered host pairs of the whole fabric, as the all-pairs check
    /// counts them.
    pub pairs: u64,
    /// Pairs the routes do not deliver (the subnets' own pairs are the
    /// gate's, delivered).
    pub unreachable: u64,
    pub first_unreachable: Option<Undeliverable>,
    pub destinations: u64,
    /// Vertices and edges of the summary graph the cycle search ran on.
    pub vertices: usize,
    pub summary_edges: usize,
    pub router_hops: usize,
    /// Transit legs, and walks between CAs and router ports, in use.
    pub transit_legs: usize,
    pub chains: usize,
    pub cycle: Option<Vec<CycleStep>>,
}

impl ComposeReport {
    pub fn deadlock_free(&self) -> bool {
        self.cycle.is_none()
    }
    pub fn ok(&self) -> bool {
        self.unreachable == 0 && self.cycle.is_none()
    }
    /// The cycle as one line.
    pub fn describe_cycle(&self) -> Option<String> {
        self.cycle.as_ref().map(|c| {
            c.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" -> ")
        })
    }
}

/// A per-CA column read at random positions: expanded once, on first
/// need, unless every CA has the same value.
struct Column<'a> {
    runs: &'a Runs,
    uniform: Option<u32>,
    full: OnceLock<Vec<u32>>,
}

impl<'a> Column<'a> {
    fn new(runs: &'a Runs) -> Self {
        Self {
            runs,
            uniform: runs.uniform(),
            full: OnceLock::new(),
        }
    }
    fn get(&self, i: usize) -> u32 {
        match self.uniform {
            Some(v) => v,
            None => self
                .full
                .get_or_init(|| self.runs.expand())
                .get(i)
                .copied()
                .unwrap_or(0),
        }
    }
}

/// One subnet as the composition reads it.
struct Part<'a> {
    name: &'a str,
    sum: &'a DependencySummary,
    /// First global vertex id.
    offset: u32,
    /// Per router port and CA: the chains of the walks between them.
    arrive: Vec<Column<'a>>,
    depart: Vec<Column<'a>>,
    /// Per router port: the chains of the view's CAs' walks to it, and
    /// the vertices they arrive on.
    arrive_chains: Vec<Vec<u32>>,
    arrive_leaves: Vec<Vec<u32>>,
    /// The view's CAs: (LID, index in the summary).
    hosts: Vec<(u16, u32)>,
    /// Router port index by LID.
    by_lid: FastMap<u16, u32>,
}

const NO_VERTEX: u32 = u32::MAX;

/// Where a packet stands after a router: the router, the port it leaves
/// on and the LID it is sent to.
type State = (u64, u8, u16);

/// A router hop whose next walk delivers: the vertex it enters on, the
/// walk, the crossings from here on, and what follows a transit leg.
#[derive(Clone)]
struct Hop {
    enter: u32,
    walk: Used,
    depth: u32,
    next: Option<(State, u32)>,
}

/// A walk the routes use: (subnet, chain) or (subnet, transit leg).
#[derive(Clone, Copy)]
enum Used {
    Chain(u32, u32),
    Leg(u32, u32),
}

enum Step {
    /// Into the destination's subnet: the vertex entered, the chain.
    Deliver(u32, u32, u32),
    /// Across a transit subnet: the vertex entered, the leg, the next
    /// state and the vertex the leg arrives on there.
    Transit(u32, u32, u32, State, u32),
}

/// Checks delivery and deadlock freedom of the whole fabric from the
/// subnets' summaries (`(prefix, summary)`, one per subnet of `view`) and
/// the routes computed from `view`. See the module documentation.
pub fn compose(
    view: &GlobalView,
    summaries: &[(u64, &DependencySummary)],
    routes: &InterSubnetRoutes,
) -> Result<ComposeReport, ComposeError> {
    let mut by_prefix: HashMap<u64, &DependencySummary> = HashMap::new();
    for &(prefix, s) in summaries {
        if by_prefix.insert(prefix, s).is_some() {
            return Err(ComposeError::DuplicateSummary(prefix));
        }
    }
    let mut parts = Vec::with_capacity(view.subnets.len());
    let mut offset = 0u64;
    for sv in &view.subnets {
        let sum = *by_prefix
            .get(&sv.prefix)
            .ok_or_else(|| ComposeError::MissingSummary {
                subnet: sv.name.clone(),
                prefix: sv.prefix,
            })?;
        sum.validate().map_err(|source| ComposeError::Malformed {
            subnet: sv.name.clone(),
            source,
        })?;
        let inconsistent = |reason: String| ComposeError::Inconsistent {
            subnet: sv.name.clone(),
            reason,
        };
        let hosts = sv
            .end_ports
            .iter()
            .map(|e| {
                sum.host_index(e.lid)
                    .map(|i| (e.lid, i as u32))
                    .ok_or_else(|| {
                        inconsistent(format!(
                            "end port {:#018x} (LID {}) is not in the summary",
                            e.guid, e.lid
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        for p in &sum.ports {
            let known = sv
                .router_ports
                .iter()
                .any(|r| r.router_guid == p.router_guid && r.port == p.port && r.lid == p.lid);
            if !known {
                return Err(inconsistent(format!(
                    "the summary's router {:#018x} port {} (LID {}) is not among the subnet's router ports",
                    p.router_guid, p.port, p.lid
                )));
            }
        }
        let arrive: Vec<Column> = sum.ports.iter().map(|p| Column::new(&p.arrive)).collect();
        let arrive_chains: Vec<Vec<u32>> = if hosts.len() == sum.host_lids.len() {
            sum.ports.iter().map(|p| p.arrive.distinct()).collect()
        } else {
            arrive
                .iter()
                .map(|c| {
                    let mut v: Vec<u32> = hosts.iter().map(|&(_, i)| c.get(i as usize)).collect();
                    v.sort_unstable();
                    v.dedup();
                    v
                })
                .collect()
        };
        // Validated: every chain is non-empty.
        let last = |c: u32| {
            sum.chains
                .get(c as usize)
                .and_then(|c| c.last())
                .copied()
                .unwrap_or(NO_VERTEX)
        };
        let arrive_leaves = arrive_chains
            .iter()
            .map(|cs| {
                let mut v: Vec<u32> = cs.iter().map(|&c| last(c)).collect();
                v.sort_unstable();
                v.dedup();
                v
            })
            .collect();
        parts.push(Part {
            name: &sv.name,
            sum,
            offset: u32::try_from(offset)
                .map_err(|_| inconsistent("the summaries hold more than 2^32 vertices".into()))?,
            arrive,
            depart: sum.ports.iter().map(|p| Column::new(&p.depart)).collect(),
            arrive_chains,
            arrive_leaves,
            hosts,
            by_lid: sum
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| (p.lid, i as u32))
                .collect(),
        });
        offset += sum.vertices.len() as u64;
    }
    let total_vertices = u32::try_from(offset).map_err(|_| ComposeError::Inconsistent {
        subnet: "all".into(),
        reason: "the summaries hold more than 2^32 vertices".into(),
    })?;

    // Router ports: (router, port) and port GUID -> (subnet, port index).
    let mut port_at: FastMap<(u64, u8), (u32, u32)> = FastMap::default();
    for (si, p) in parts.iter().enumerate() {
        for (i, sp) in p.sum.ports.iter().enumerate() {
            port_at.insert((sp.router_guid, sp.port), (si as u32, i as u32));
        }
    }
    let mut port_by_guid: FastMap<u64, (u32, u32)> = FastMap::default();
    for sv in &view.subnets {
        for r in &sv.router_ports {
            if let Some(&at) = port_at.get(&(r.router_guid, r.port)) {
                port_by_guid.insert(r.port_guid, at);
            }
        }
    }
    let dests: Vec<(u32, u32)> = parts
        .iter()
        .enumerate()
        .flat_map(|(d, p)| (0..p.hosts.len() as u32).map(move |e| (d as u32, e)))
        .collect();
    let sums: Vec<&DependencySummary> = parts.iter().map(|p| p.sum).collect();
    let index = RouteIndex::new(view, routes, &dests, &sums, &port_by_guid);
    let bits =
        |n: usize| -> Vec<AtomicU64> { (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect() };
    let ctx = Ctx {
        view,
        parts: &parts,
        port_at: &port_at,
        index: &index,
        chains: parts.iter().map(|p| bits(p.sum.chains.len())).collect(),
        legs: parts.iter().map(|p| bits(p.sum.legs.len())).collect(),
        ingress: parts.iter().map(|p| bits(p.sum.ports.len())).collect(),
    };

    // Destinations in parallel; what they use is marked in shared bit
    // sets, the hops gathered per thread: all sets, so the result does not
    // depend on the order.
    let acc = dests
        .par_iter()
        .enumerate()
        .with_min_len(64)
        .fold(
            || (Acc::default(), Scratch::default()),
            |(mut acc, mut scratch), (k, &(d, e))| {
                ctx.destination(k, d as usize, e as usize, &mut acc, &mut scratch);
                (acc, scratch)
            },
        )
        .map(|(acc, _)| acc)
        .reduce(Acc::default, Acc::merge);
    let unreachable = acc.unreachable;
    let first = acc.first.map(|f| f.1);
    let hops = acc.hops;
    let marked = |words: &[AtomicU64]| -> Vec<u32> {
        let mut out = Vec::new();
        for (wi, w) in words.iter().enumerate() {
            let mut x = w.load(Ordering::Relaxed);
            while x != 0 {
                out.push((wi * 64) as u32 + x.trailing_zeros());
                x &= x - 1;
            }
        }
        out
    };
    let mut chains: HashSet<(u32, u32)> = HashSet::new();
    let mut legs: Vec<(u32, u32)> = Vec::new();
    for (s, p) in parts.iter().enumerate() {
        chains.extend(marked(&ctx.chains[s]).into_iter().map(|c| (s as u32, c)));
        legs.extend(marked(&ctx.legs[s]).into_iter().map(|l| (s as u32, l)));
        // A router port the hosts send to: every host's walk to it.
        for i in marked(&ctx.ingress[s]) {
            for &c in &p.arrive_chains[i as usize] {
                chains.insert((s as u32, c));
            }
        }
    }

    // The summary graph: every subnet's edges, the legs in use, the hops.
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut summary_edges = 0usize;
    for p in &parts {
        summary_edges += p.sum.edges.len();
        edges.extend(
            p.sum
                .edges
                .iter()
                .map(|&(a, b)| (a + p.offset, b + p.offset)),
        );
    }
    for &(s, li) in &legs {
        let p = &parts[s as usize];
        if let Some(Ok(path)) = p.sum.legs.get(li as usize).map(|l| &l.path) {
            edges.extend(path.windows(2).map(|w| (w[0] + p.offset, w[1] + p.offset)));
        }
    }
    for &(s, c) in &chains {
        let p = &parts[s as usize];
        if let Some(chain) = p.sum.chains.get(c as usize) {
            edges.extend(chain.windows(2).map(|w| (w[0] + p.offset, w[1] + p.offset)));
        }
    }
    let router_hops = hops.len();
    edges.extend(hops.into_iter().map(|h| ((h >> 32) as u32, h as u32)));
    edges.par_sort_unstable();
    edges.dedup();
    let n = total_vertices as usize;
    let mut start = vec![0usize; n + 1];
    for &(a, _) in &edges {
        start[a as usize + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let targets: Vec<usize> = edges.iter().map(|&(_, b)| b as usize).collect();
    let cycle = find_cycle(&start, &targets).map(|c| c.iter().map(|&x| ctx.name(x)).collect());
    let hosts: u64 = parts.iter().map(|p| p.hosts.len() as u64).sum();
    Ok(ComposeReport {
        pairs: hosts * hosts.saturating_sub(1),
        unreachable,
        first_unreachable: first,
        destinations: dests.len() as u64,
        vertices: n,
        summary_edges,
        router_hops,
        transit_legs: legs.len(),
        chains: chains.len(),
        cycle,
    })
}

struct Ctx<'a> {
    view: &'a GlobalView,
    parts: &'a [Part<'a>],
    port_at: &'a FastMap<(u64, u8), (u32, u32)>,
    index: &'a RouteIndex<'a>,
    /// Per subnet, bit sets of the chains, legs and router ports (as
    /// first ingress) the routes use.
    chains: Vec<Vec<AtomicU64>>,
    legs: Vec<Vec<AtomicU64>>,
    ingress: Vec<Vec<AtomicU64>>,
}

fn mark(words: &[AtomicU64], i: u32) {
    if let Some(w) = words.get(i as usize / 64) {
        let m = 1u64 << (i % 64);
        // Most marks repeat: a plain load keeps the line shared.
        if w.load(Ordering::Relaxed) & m == 0 {
            w.fetch_or(m, Ordering::Relaxed);
        }
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<MixHasher>>;
type FastSet<K> = HashSet<K, BuildHasherDefault<MixHasher>>;

/// One thread's per-destination state, cleared and reused.
#[derive(Default)]
struct Scratch {
    memo: FastMap<State, Result<Hop, String>>,
    collected: FastSet<State>,
}

/// What one thread's destinations found.
#[derive(Default)]
struct Acc {
    unreachable: u64,
    /// The first undeliverable, by destination order.
    first: Option<(usize, Undeliverable)>,
    /// Router hops, `leave << 32 | enter`.
    hops: FastSet<u64>,
}

impl Acc {
    fn merge(mut self, mut other: Acc) -> Acc {
        self.unreachable += other.unreachable;
        self.first = match (self.first.take(), other.first.take()) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        if self.hops.len() < other.hops.len() {
            std::mem::swap(&mut self.hops, &mut other.hops);
        }
        self.hops.extend(other.hops);
        self
    }
}

/// A hasher for the hop set's `u64` keys: one multiply and a fold, where
/// the default SipHash would dominate the walk over destinations.
#[derive(Default)]
struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        let m = (self.0 ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = m ^ (m >> 29);
    }
    fn write_u8(&mut self, x: u8) {
        self.write_u64(u64::from(x));
    }
    fn write_u16(&mut self, x: u16) {
        self.write_u64(u64::from(x));
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }
}

/// One destination's walk over router states, memoized: a state's
/// continuation does not depend on how the packet got there.
struct Walk<'c, 'a> {
    ctx: &'c Ctx<'a>,
    /// The destination's index.
    k: u32,
    d: usize,
    gid: Gid,
    lid: u16,
    host: usize,
    memo: &'c mut FastMap<State, Result<Hop, String>>,
    collected: &'c mut FastSet<State>,
}

impl Ctx<'_> {
    /// Destination `k`: end port `e` of subnet `d`.
    fn destination(&self, k: usize, d: usize, e: usize, acc: &mut Acc, scratch: &mut Scratch) {
        let pd = &self.parts[d];
        let (lid, host) = pd.hosts[e];
        let sv = &self.view.subnets[d];
        let gid = Gid {
            prefix: sv.prefix,
            guid: sv.end_ports[e].guid,
        };
        let mut w = Walk {
            ctx: self,
            k: k as u32,
            d,
            gid,
            lid,
            host: host as usize,
            memo: &mut scratch.memo,
            collected: &mut scratch.collected,
        };
        w.memo.clear();
        w.collected.clear();
        for a in 0..self.parts.len() {
            if a == d || self.parts[a].hosts.is_empty() {
                continue;
            }
            if let Some((hosts, reason)) = w.sources_in(a, acc) {
                acc.unreachable += hosts;
                if acc.first.as_ref().is_none_or(|f| f.0 > k) {
                    acc.first = Some((k, w.fault(a, hosts, reason)));
                }
            }
        }
    }

    /// Names a global vertex for a cycle report.
    fn name(&self, x: usize) -> CycleStep {
        let s = self
            .parts
            .partition_point(|p| p.offset as usize <= x)
            .saturating_sub(1);
        let p = &self.parts[s];
        let v = p.sum.vertices[x - p.offset as usize];
        let port = |i: u32| {
            let sp = &p.sum.ports[i as usize];
            format!(
                "router {:#018x} port {} (LID {})",
                sp.router_guid, sp.port, sp.lid
            )
        };
        let channel = match v {
            Vertex::Enter { port: i, .. } => format!("{} into the subnet", port(i)),
            Vertex::Leave { port: i, .. } => format!("the subnet onto {}", port(i)),
            Vertex::Inner { channel, .. } => p
                .sum
                .channels
                .get(channel as usize)
                .cloned()
                .unwrap_or_default(),
        };
        CycleStep {
            subnet: p.name.to_string(),
            channel,
            vl: v.vl(),
        }
    }
}

impl Walk<'_, '_> {
    fn fault(&self, a: usize, hosts: u64, reason: String) -> Undeliverable {
        let c = self.ctx;
        Undeliverable {
            source_subnet: c.parts[a].name.to_string(),
            hosts,
            destination_subnet: c.parts[self.d].name.to_string(),
            destination: self.gid.to_string(),
            destination_lid: self.lid,
            reason,
        }
    }

    /// Traffic from every host of subnet `a` to this destination: the
    /// hops and legs it uses go to `out`; the hosts it does not deliver
    /// and why come back.
    fn sources_in(&mut self, a: usize, acc: &mut Acc) -> Option<(u64, String)> {
        let c = self.ctx;
        let pa = &c.parts[a];
        let all = pa.hosts.len() as u64;
        let dst = self.gid;
        let (s, i, guid) = match c.index.ingress(a, self.k) {
            Ingress::Port(s, i, guid) => (s, i, guid),
            Ingress::None => {
                return Some((
                    all,
                    format!("subnet '{}' has no router port for {dst}", pa.name),
                ));
            }
            Ingress::Unknown(guid) => {
                return Some((
                    all,
                    format!("the mapping names router port {guid:#018x}, which no summary holds"),
                ));
            }
        };
        if s as usize != a {
            return Some((
                all,
                format!(
                    "the mapping names router port {guid:#018x} of subnet '{}'",
                    c.parts[s as usize].name
                ),
            ));
        }
        let sp = &pa.sum.ports[i as usize];
        let Some(rule) = c.index.rule(a as u32, i, self.k, dst.prefix) else {
            return Some((
                all,
                format!("router {:#018x} has no rule for {dst}", sp.router_guid),
            ));
        };
        if rule.ports.is_empty() {
            return Some((
                all,
                format!(
                    "router {:#018x}: rule for {dst} has no port",
                    sp.router_guid
                ),
            ));
        }
        // (arrival vertex, egress port) pairs the hosts of `a` make.
        let combos = self.first_crossings(a, i as usize, rule);
        let mut egress: Vec<u8> = combos.iter().map(|&(_, e)| e).collect();
        egress.sort_unstable();
        egress.dedup();
        let limit = c.parts.len() as u32;
        let mut bad: Vec<(u8, String)> = Vec::new();
        let mut good: Vec<(u8, u32)> = Vec::new();
        for &e in &egress {
            let st = (sp.router_guid, e, rule.next_lid);
            match self.chain(st) {
                Ok(h) if h.depth <= limit => {
                    good.push((e, h.enter));
                    self.collect(st, acc);
                }
                Ok(_) => bad.push((
                    e,
                    format!(
                        "the path to {dst} crosses more routers than there are subnets (a loop)"
                    ),
                )),
                Err(why) => bad.push((e, why)),
            }
        }
        if !good.is_empty() {
            mark(&c.ingress[a], i);
        }
        for &(leave, e) in &combos {
            if let Some(&(_, enter)) = good.iter().find(|g| g.0 == e) {
                acc.hops
                    .insert(u64::from(leave + pa.offset) << 32 | u64::from(enter));
            }
        }
        let (_, why) = bad.first()?;
        let hosts = match rule.choice {
            Choice::First => all,
            Choice::Hash => pa
                .hosts
                .iter()
                .filter(|&&(lid, _)| {
                    rule.egress_port(lid)
                        .is_some_and(|e| bad.iter().any(|b| b.0 == e))
                })
                .count() as u64,
        };
        Some((hosts, why.clone()))
    }

    /// The (arrival vertex, egress port) pairs of the first crossing from
    /// the hosts of subnet `a` through its router port `i`. A hash choice
    /// looks at the hosts one by one and stops once every pair has been
    /// seen.
    fn first_crossings(&self, a: usize, i: usize, rule: &Rule) -> Vec<(u32, u8)> {
        let pa = &self.ctx.parts[a];
        let leaves = &pa.arrive_leaves[i];
        match rule.choice {
            Choice::First => leaves.iter().map(|&w| (w, rule.ports[0])).collect(),
            Choice::Hash => {
                let mut distinct = [0u64; 4];
                for &e in &rule.ports {
                    distinct[e as usize / 64] |= 1u64 << (e % 64);
                }
                let ports: u32 = distinct.iter().map(|w| w.count_ones()).sum();
                let all = leaves.len() * ports as usize;
                // Per arrival vertex (by its place in `leaves`), the egress
                // ports seen, as a 256-bit set.
                let mut seen = vec![[0u64; 4]; leaves.len()];
                let mut count = 0;
                let one = leaves.len() == 1;
                for &(lid, h) in &pa.hosts {
                    let Some(e) = rule.egress_port(lid) else {
                        continue;
                    };
                    let wi = if one {
                        0
                    } else {
                        let w = pa
                            .sum
                            .chains
                            .get(pa.arrive[i].get(h as usize) as usize)
                            .and_then(|c| c.last())
                            .copied()
                            .unwrap_or(NO_VERTEX);
                        match leaves.binary_search(&w) {
                            Ok(wi) => wi,
                            Err(_) => continue,
                        }
                    };
                    let (word, bit) = (e as usize / 64, 1u64 << (e % 64));
                    if seen[wi][word] & bit == 0 {
                        seen[wi][word] |= bit;
                        count += 1;
                        if count == all {
                            break;
                        }
                    }
                }
                let mut out = Vec::with_capacity(count);
                for (wi, set) in seen.iter().enumerate() {
                    for (word, &bits) in set.iter().enumerate() {
                        let mut x = bits;
                        while x != 0 {
                            out.push((leaves[wi], (word * 64) as u8 + x.trailing_zeros() as u8));
                            x &= x - 1;
                        }
                    }
                }
                out
            }
        }
    }

    /// One router step from `st`.
    fn step(&self, st: State) -> Result<Step, String> {
        let c = self.ctx;
        let (router, port, next_lid) = st;
        let dst = self.gid;
        let &(to, q) = c
            .port_at
            .get(&(router, port))
            .ok_or_else(|| format!("router {router:#018x} has no port {port} in any subnet"))?;
        let pt = &c.parts[to as usize];
        if to as usize == self.d {
            if next_lid != self.lid {
                return Err(format!(
                    "router {router:#018x} sends {dst} to LID {next_lid} instead of its LID {}",
                    self.lid
                ));
            }
            let chain = pt.depart[q as usize].get(self.host);
            let enter = pt
                .sum
                .chains
                .get(chain as usize)
                .and_then(|c| c.first())
                .copied()
                .ok_or_else(|| format!("the summary of '{}' lacks chain {chain}", pt.name))?;
            return Ok(Step::Deliver(enter + pt.offset, to, chain));
        }
        let &nq = pt
            .by_lid
            .get(&next_lid)
            .ok_or_else(|| format!("next LID {next_lid} in '{}' is no router port", pt.name))?;
        let li = q as usize * pt.sum.ports.len() + nq as usize;
        let leg = pt
            .sum
            .legs
            .get(li)
            .ok_or_else(|| format!("the summary of '{}' lacks a transit leg", pt.name))?;
        let path = leg.path.as_ref().map_err(|why| {
            format!(
                "crossing '{}' from router {router:#018x} port {port} to LID {next_lid}: {why}",
                pt.name
            )
        })?;
        let (Some(&first), Some(&last)) = (path.first(), path.last()) else {
            return Err(format!(
                "the summary of '{}' has an empty transit leg",
                pt.name
            ));
        };
        let at = &pt.sum.ports[nq as usize];
        let rule = c
            .index
            .rule(to, nq, self.k, dst.prefix)
            .ok_or_else(|| format!("router {:#018x} has no rule for {dst}", at.router_guid))?;
        // Past the first router the source LID a hash sees is the last
        // egress port's.
        let egress = rule
            .egress_port(pt.sum.ports[q as usize].lid)
            .ok_or_else(|| {
                format!(
                    "router {:#018x}: rule for {dst} has no port",
                    at.router_guid
                )
            })?;
        Ok(Step::Transit(
            first + pt.offset,
            to,
            li as u32,
            (at.router_guid, egress, rule.next_lid),
            last + pt.offset,
        ))
    }

    /// Follows the states from `st` to delivery, a fault or a repeat (a
    /// loop), and memoizes every state on the way.
    fn chain(&mut self, st: State) -> Result<Hop, String> {
        let limit = self.ctx.parts.len() + 1;
        // Per state on the way: the hop it makes when the rest delivers.
        let mut path: Vec<(State, Option<Hop>)> = Vec::new();
        let mut cur = st;
        let end: Result<Hop, String> = loop {
            if let Some(m) = self.memo.get(&cur) {
                break m.clone();
            }
            if path.iter().any(|(s, _)| *s == cur) || path.len() > limit {
                // A repeat never delivers; a chain longer than the subnets
                // fails the same way at its first crossing.
                let why = format!(
                    "the path to {} crosses more routers than there are subnets (a loop)",
                    self.gid
                );
                if path.len() > limit {
                    return Err(why);
                }
                break Err(why);
            }
            match self.step(cur) {
                Ok(Step::Deliver(enter, s, chain)) => {
                    let hop = Hop {
                        enter,
                        walk: Used::Chain(s, chain),
                        depth: 1,
                        next: None,
                    };
                    path.push((cur, None));
                    break Ok(hop);
                }
                Ok(Step::Transit(enter, s, leg, next, leave)) => {
                    path.push((
                        cur,
                        Some(Hop {
                            enter,
                            walk: Used::Leg(s, leg),
                            depth: 0,
                            next: Some((next, leave)),
                        }),
                    ));
                    cur = next;
                }
                Err(why) => {
                    path.push((cur, None));
                    break Err(why);
                }
            }
        };
        // Back along the path: each state delivers one crossing before
        // the next, or fails as the end does.
        let mut res = end;
        for (s, hop) in path.into_iter().rev() {
            res = match (res, hop) {
                (Ok(next), Some(mut h)) => {
                    h.depth = next.depth + 1;
                    Ok(h)
                }
                (r, _) => r,
            };
            self.memo.insert(s, res.clone());
        }
        res
    }

    fn memo(&self, st: State) -> Option<&Hop> {
        match self.memo.get(&st) {
            Some(Ok(h)) => Some(h),
            _ => None,
        }
    }

    /// Marks the walks and adds the hops of the delivered chain of states
    /// from `st`.
    fn collect(&mut self, st: State, acc: &mut Acc) {
        let c = self.ctx;
        let mut cur = st;
        while self.collected.insert(cur) {
            let Some(h) = self.memo(cur) else { return };
            match h.walk {
                Used::Chain(s, ch) => mark(&c.chains[s as usize], ch),
                Used::Leg(s, l) => mark(&c.legs[s as usize], l),
            }
            let Some((next, leave)) = h.next else { return };
            let Some(n) = self.memo(next) else { return };
            acc.hops.insert(u64::from(leave) << 32 | u64::from(n.enter));
            cur = next;
        }
    }
}

/// Where a source subnet's mapping sends a destination.
enum Ingress {
    /// (subnet, router port index there, its GUID).
    Port(u32, u32, u64),
    /// No entry and no default.
    None,
    /// A port GUID no summary holds.
    Unknown(u64),
}

/// Where a rule sits: (router table, context, rule).
type RuleAt = (u32, u32, u32);

/// The mappings and router tables indexed by destination: lookups by
/// number where the all-pairs tracer hashes GIDs, with its rules (a
/// destination's first mapping line rules, its default the first default
/// port; a router takes the first context that accepts the ingress port,
/// there a GID rule before a prefix rule, the first of each).
struct RouteIndex<'a> {
    routes: &'a InterSubnetRoutes,
    /// Per subnet of the view: its mapping.
    mapping: Vec<Option<&'a Mapping>>,
    /// Per source subnet (the view's order, as the mappings are): per
    /// destination index, `NO` or 1 + the mapping entry that rules.
    entry: Vec<Vec<u32>>,
    /// Router port (subnet, index) by port GUID.
    by_guid: &'a FastMap<u64, (u32, u32)>,
    /// Per subnet, per router port: the slot of the context its router's
    /// table selects for packets entering there (`NO`: none).
    context: Vec<Vec<u32>>,
    /// Per slot: (table, context) and its rules by destination index.
    slots: Vec<(u32, u32, Vec<u32>)>,
    /// Prefix rules by (slot, prefix).
    by_prefix: FastMap<(u32, u64), u32>,
}

const NO: u32 = u32::MAX;

impl<'a> RouteIndex<'a> {
    fn new(
        view: &GlobalView,
        routes: &'a InterSubnetRoutes,
        dests: &[(u32, u32)],
        parts: &[&DependencySummary],
        by_guid: &'a FastMap<u64, (u32, u32)>,
    ) -> Self {
        let mut dest_of: FastMap<Gid, u32> = FastMap::default();
        for (k, &(d, e)) in dests.iter().enumerate() {
            let sv = &view.subnets[d as usize];
            let gid = Gid {
                prefix: sv.prefix,
                guid: sv.end_ports[e as usize].guid,
            };
            dest_of.entry(gid).or_insert(k as u32);
        }
        let n = dests.len();
        // By prefix, not by place: the caller's subnets need not be in
        // the order the routes were computed in.
        let mapping: Vec<Option<&'a Mapping>> = view
            .subnets
            .iter()
            .map(|sv| routes.mappings.iter().find(|m| m.prefix == sv.prefix))
            .collect();
        let entry = (0..view.subnets.len())
            .into_par_iter()
            .map(|si| {
                let mut col = vec![NO; n];
                if let Some(m) = mapping[si] {
                    for (i, e) in m.entries.iter().enumerate() {
                        if let Some(&k) = dest_of.get(&e.dest) {
                            if col[k as usize] == NO {
                                col[k as usize] = i as u32;
                            }
                        }
                    }
                }
                col
            })
            .collect();
        // A router GUID listed twice: the last table rules, as in the
        // all-pairs tracer.
        let mut table: FastMap<u64, u32> = FastMap::default();
        for (ti, t) in routes.routers.iter().enumerate() {
            table.insert(t.router_guid, ti as u32);
        }
        let mut which: FastMap<(u32, u32), u32> = FastMap::default();
        let mut used: Vec<(u32, u32)> = Vec::new();
        let context: Vec<Vec<u32>> = parts
            .iter()
            .map(|sum| {
                sum.ports
                    .iter()
                    .map(|p| {
                        let Some(&ti) = table.get(&p.router_guid) else {
                            return NO;
                        };
                        let t = &routes.routers[ti as usize];
                        let Some(ci) = t.contexts.iter().position(|c| {
                            c.ingress_ports.is_empty() || c.ingress_ports.contains(&p.port)
                        }) else {
                            return NO;
                        };
                        *which.entry((ti, ci as u32)).or_insert_with(|| {
                            used.push((ti, ci as u32));
                            (used.len() - 1) as u32
                        })
                    })
                    .collect()
            })
            .collect();
        let slots: Vec<(u32, u32, Vec<u32>)> = used
            .par_iter()
            .map(|&(ti, ci)| {
                let c = &routes.routers[ti as usize].contexts[ci as usize];
                let mut col = vec![NO; n];
                for (ri, r) in c.rules.iter().enumerate() {
                    if let Match::Gid(g) = r.matches {
                        if let Some(&k) = dest_of.get(&g) {
                            if col[k as usize] == NO {
                                col[k as usize] = ri as u32;
                            }
                        }
                    }
                }
                (ti, ci, col)
            })
            .collect();
        let mut by_prefix: FastMap<(u32, u64), u32> = FastMap::default();
        for (slot, &(ti, ci)) in used.iter().enumerate() {
            let c = &routes.routers[ti as usize].contexts[ci as usize];
            for (ri, r) in c.rules.iter().enumerate() {
                if let Match::Prefix(p) = r.matches {
                    by_prefix.entry((slot as u32, p)).or_insert(ri as u32);
                }
            }
        }
        Self {
            routes,
            mapping,
            entry,
            by_guid,
            context,
            slots,
            by_prefix,
        }
    }

    fn ingress(&self, a: usize, k: u32) -> Ingress {
        let Some(m) = self.mapping[a] else {
            return Ingress::None;
        };
        let i = self.entry[a][k as usize];
        let guid = if i == NO {
            match m.defaults.first() {
                Some(&g) => g,
                None => return Ingress::None,
            }
        } else {
            m.entries[i as usize].router_port_guid
        };
        match self.by_guid.get(&guid) {
            Some(&(s, p)) => Ingress::Port(s, p, guid),
            None => Ingress::Unknown(guid),
        }
    }

    /// The rule router port `i` of subnet `s` applies to destination
    /// `k` (prefix `prefix`) arriving there.
    fn rule(&self, s: u32, i: u32, k: u32, prefix: u64) -> Option<&'a Rule> {
        let slot = *self.context.get(s as usize)?.get(i as usize)?;
        let (ti, ci, col) = self.slots.get(slot as usize)?;
        let at: RuleAt = match col.get(k as usize) {
            Some(&ri) if ri != NO => (*ti, *ci, ri),
            _ => (*ti, *ci, *self.by_prefix.get(&(slot, prefix))?),
        };
        self.routes
            .routers
            .get(at.0 as usize)?
            .contexts
            .get(at.1 as usize)?
            .rules
            .get(at.2 as usize)
    }
}
