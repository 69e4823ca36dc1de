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

mod index;
mod walk;

use super::global::find_cycle;
use super::summary::{DependencySummary, Runs, SummaryError, Vertex};
use crate::intersubnet::{Choice, Gid, GlobalView, InterSubnetRoutes, Mapping, Match, Rule};
use index::{Ingress, RouteIndex};
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

impl<'a> Part<'a> {
    /// Subnet `sv` as its summary `sum` says it, its vertices numbered
    /// from `offset`; refused when the summary is malformed or does not
    /// match the view (an end port or router port missing).
    fn new(
        sv: &'a crate::intersubnet::SubnetView,
        sum: &'a DependencySummary,
        offset: u64,
    ) -> Result<Self, ComposeError> {
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
        Ok(Part {
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
        })
    }
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
        parts.push(Part::new(sv, sum, offset)?);
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
    let (chains, legs) = used_walks(&ctx);
    let n = total_vertices as usize;
    let router_hops = hops.len();
    let (start, targets, summary_edges) = summary_graph(&parts, &chains, &legs, hops, n);
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

/// The bits set in `words`.
fn marked(words: &[AtomicU64]) -> Vec<u32> {
    let mut out = Vec::new();
    for (wi, w) in words.iter().enumerate() {
        let mut x = w.load(Ordering::Relaxed);
        while x != 0 {
            out.push((wi * 64) as u32 + x.trailing_zeros());
            x &= x - 1;
        }
    }
    out
}

/// A walk of a subnet's summary: (subnet, chain or transit leg index).
type WalkAt = (u32, u32);

/// The walks the destinations' routes used: chains and transit legs.
fn used_walks(ctx: &Ctx<'_>) -> (HashSet<WalkAt>, Vec<WalkAt>) {
    let mut chains: HashSet<(u32, u32)> = HashSet::new();
    let mut legs: Vec<(u32, u32)> = Vec::new();
    for (s, p) in ctx.parts.iter().enumerate() {
        chains.extend(marked(&ctx.chains[s]).into_iter().map(|c| (s as u32, c)));
        legs.extend(marked(&ctx.legs[s]).into_iter().map(|l| (s as u32, l)));
        // A router port the hosts send to: every host's walk to it.
        for i in marked(&ctx.ingress[s]) {
            for &c in &p.arrive_chains[i as usize] {
                chains.insert((s as u32, c));
            }
        }
    }
    (chains, legs)
}

/// The summary graph on `n` vertices in CSR form (start, targets) and the
/// summaries' own edge count: every subnet's edges, the chains and legs in
/// use, the router hops.
fn summary_graph(
    parts: &[Part<'_>],
    chains: &HashSet<WalkAt>,
    legs: &[WalkAt],
    hops: FastSet<u64>,
    n: usize,
) -> (Vec<usize>, Vec<usize>, usize) {
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut summary_edges = 0usize;
    for p in parts {
        summary_edges += p.sum.edges.len();
        edges.extend(
            p.sum
                .edges
                .iter()
                .map(|&(a, b)| (a + p.offset, b + p.offset)),
        );
    }
    for &(s, li) in legs {
        let p = &parts[s as usize];
        if let Some(Ok(path)) = p.sum.legs.get(li as usize).map(|l| &l.path) {
            edges.extend(path.windows(2).map(|w| (w[0] + p.offset, w[1] + p.offset)));
        }
    }
    for &(s, c) in chains {
        let p = &parts[s as usize];
        if let Some(chain) = p.sum.chains.get(c as usize) {
            edges.extend(chain.windows(2).map(|w| (w[0] + p.offset, w[1] + p.offset)));
        }
    }
    edges.extend(hops.into_iter().map(|h| ((h >> 32) as u32, h as u32)));
    edges.par_sort_unstable();
    edges.dedup();
    let mut start = vec![0usize; n + 1];
    for &(a, _) in &edges {
        start[a as usize + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let targets: Vec<usize> = edges.iter().map(|&(_, b)| b as usize).collect();
    (start, targets, summary_edges)
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
