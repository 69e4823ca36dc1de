//! A subnet's dependency summary: what the whole-fabric check needs of a
//! subnet, without its tables.
//!
//! The whole fabric's channel dependency graph (CDG) is the union of the
//! walks packets make inside the subnets and of the router hops between
//! them: a packet that arrives at a router port on the last channel of one
//! walk leaves the router on the first channel of the next. Inside a
//! subnet there are four kinds of walk:
//!
//! - CA to CA: local traffic, always there;
//! - CA to router port and router port to CA: the first and last legs of
//!   inter-subnet traffic, there only where the mapping and the router
//!   tables send packets (a port no mapping names carries nothing);
//! - router port to router port: transit legs, there only where the
//!   routes cross the subnet.
//!
//! The verification gate walked every one but the transit legs and found
//! their union acyclic. The summary keeps the kinds apart so that the
//! whole-fabric check ([`super::compose`]) counts each walk exactly where
//! the routes use it:
//!
//! - *vertices*: the channels into the subnet (router port -> switch) and
//!   out of it (switch -> router port) per VL, and every
//!   switch-to-switch channel, per VL, that a walk from or to a router
//!   port crosses;
//! - *edges*: `a -> b` when the CDG of the CA-to-CA walks has a path from
//!   `a` to `b` through no other vertex, so reachability between vertices
//!   over the edges is reachability in that CDG;
//! - *chains*: every walk from or to a router port as its vertices in
//!   order (CAs that share a walk's channels share its chain): per router
//!   port and CA, the chain from the CA to the port (ending with the VL
//!   the packet arrives on) and from the port to the CA (starting with
//!   the VL it leaves on), and per ordered pair of router ports the
//!   transit leg, or why the tables do not deliver it.
//!
//! A dependency of the whole fabric is then a summary edge, a step along a
//! chain the routes use, or a router hop; a cycle of the whole CDG that is
//! not one of a single subnet's CA-to-CA graph (acyclic, the gate saw to
//! it) passes chain steps or router hops, whose ends are vertices, and
//! between vertices the summary edges stand for every path.

use super::LocalCdg;
use crate::model::{Fabric, NONE, NodeKind, Slot};
use crate::tables::{NUM_SLS, Routing, SL_NONE};
use rayon::prelude::*;
use std::collections::HashMap;

/// The highest data VL: VL 15 is the subnet management lane.
pub const MAX_DATA_VL: u8 = 14;
/// Router ports one summary may hold (transit legs grow as their square).
pub const MAX_PORTS: usize = 1024;
/// CAs one summary may hold (the unicast LID space).
pub const MAX_HOSTS: usize = 49_151;
pub const MAX_VERTICES: usize = 1 << 20;
pub const MAX_EDGES: usize = 1 << 23;
pub const MAX_CHAINS: usize = 1 << 22;
/// Vertices on one chain or transit leg.
pub const MAX_CHAIN_LEN: usize = 256;
/// Runs of one per-CA column.
pub const MAX_RUNS: usize = MAX_HOSTS;
/// Bytes of one channel name.
pub const MAX_NAME: usize = 256;

/// Why a summary could not be made, or was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummaryError {
    #[error("the subnet has no router port linked to a switch")]
    NoRouterPorts,
    #[error("{what}: {count}, the bound is {bound}")]
    TooBig {
        what: &'static str,
        count: usize,
        bound: usize,
    },
    #[error("the tables use VL {vl} on {at}; data VLs are 0..=14")]
    ManagementVl { vl: u8, at: String },
    #[error("LID {src} does not reach LID {dst}: {why}")]
    Unrouted { src: u16, dst: u16, why: String },
    #[error("the subnet's own channel dependency graph has a cycle")]
    Cyclic,
    #[error(
        "the tables were verified in parts on workers, which keep no dependency graph to summarise"
    )]
    Merged,
    #[error("malformed summary: {0}")]
    Malformed(String),
}

/// One value per CA, in the order of [`DependencySummary::host_lids`], as
/// runs of (count, value): CAs behind one switch tend to share their
/// walks, so a column is a run per switch or fewer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Runs(pub Vec<(u32, u32)>);

impl Runs {
    pub fn from_column(col: &[u32]) -> Self {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for &v in col {
            match runs.last_mut() {
                Some((n, x)) if *x == v => *n += 1,
                _ => runs.push((1, v)),
            }
        }
        Self(runs)
    }

    /// CAs covered.
    pub fn len(&self) -> usize {
        self.0.iter().map(|&(n, _)| n as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn expand(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.len());
        for &(n, v) in &self.0 {
            out.extend(std::iter::repeat_n(v, n as usize));
        }
        out
    }

    /// The values present, ascending.
    pub fn distinct(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.0.iter().map(|r| r.1).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The value when every CA has the same one.
    pub fn uniform(&self) -> Option<u32> {
        match self.0.as_slice() {
            [(_, v)] => Some(*v),
            _ => None,
        }
    }
}

/// A router port of the subnet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryPort {
    pub router_guid: u64,
    pub port: u8,
    pub lid: u16,
    /// Per CA: the chain of its walk to this port.
    pub arrive: Runs,
    /// Per CA: the chain of this port's walk to it.
    pub depart: Runs,
}

/// A virtual channel the summary names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Vertex {
    /// From router port `port` (an index into the ports) into the subnet.
    Enter { port: u32, vl: u8 },
    /// From the subnet onto router port `port`.
    Leave { port: u32, vl: u8 },
    /// A switch-to-switch channel (an index into the channel names).
    Inner { channel: u32, vl: u8 },
}

impl Vertex {
    pub fn vl(self) -> u8 {
        match self {
            Vertex::Enter { vl, .. } | Vertex::Leave { vl, .. } | Vertex::Inner { vl, .. } => vl,
        }
    }
}

/// A walk's vertices in order (indices into the vertices). The walk from
/// a CA starts at the channel leaving its switch (the CA's own link never
/// depends on another channel); the walk to a CA ends at the channel
/// entering the CA's switch (its last link depends on nothing).
pub type Chain = Vec<u32>;

/// The walk from router port `from` to router port `to` through the
/// subnet's tables (the first vertex an `Enter` of `from`, the last a
/// `Leave` of `to`), or why it fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leg {
    pub from: u32,
    pub to: u32,
    pub path: Result<Chain, String>,
}

/// See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DependencySummary {
    /// The subnet's CA LIDs, ascending: the order of every per-CA column.
    pub host_lids: Vec<u16>,
    /// Ascending by (router GUID, port).
    pub ports: Vec<SummaryPort>,
    /// Names of the switch-to-switch channels `Inner` vertices refer to.
    pub channels: Vec<String>,
    pub vertices: Vec<Vertex>,
    /// `(a, b)`: the CA-to-CA walks' CDG has a path from `a` to `b`
    /// through no other vertex.
    pub edges: Vec<(u32, u32)>,
    /// The walks between CAs and router ports the port columns refer to.
    pub chains: Vec<Chain>,
    /// One per ordered pair of ports (`from` == `to` included), `from`
    /// major: the leg from `i` to `j` is `legs[i * ports + j]`.
    pub legs: Vec<Leg>,
}

impl DependencySummary {
    pub fn leg(&self, from: usize, to: usize) -> Option<&Leg> {
        self.legs.get(from * self.ports.len() + to)
    }

    /// Index of a CA by LID.
    pub fn host_index(&self, lid: u16) -> Option<usize> {
        self.host_lids.binary_search(&lid).ok()
    }

    /// Everything the whole-fabric check relies on: sizes within the
    /// bounds, indices in range, data VLs only, legs in order, chains
    /// shaped as the columns that use them say.
    pub fn validate(&self) -> Result<(), SummaryError> {
        let bad = |why: String| Err(SummaryError::Malformed(why));
        let bound = |what: &'static str, count: usize, bound: usize| {
            if count > bound {
                Err(SummaryError::TooBig { what, count, bound })
            } else {
                Ok(())
            }
        };
        let np = self.ports.len();
        bound("CAs", self.host_lids.len(), MAX_HOSTS)?;
        bound("router ports", np, MAX_PORTS)?;
        bound("vertices", self.vertices.len(), MAX_VERTICES)?;
        bound("channel names", self.channels.len(), MAX_VERTICES)?;
        bound("edges", self.edges.len(), MAX_EDGES)?;
        bound("chains", self.chains.len(), MAX_CHAINS)?;
        if self.host_lids.iter().any(|&l| !(1..=0xBFFF).contains(&l)) {
            return bad("a CA LID outside the unicast range".into());
        }
        if self.host_lids.windows(2).any(|w| w[0] >= w[1]) {
            return bad("CA LIDs are not strictly ascending".into());
        }
        if let Some(c) = self.channels.iter().find(|c| c.len() > MAX_NAME) {
            return bad(format!("a channel name of {} bytes", c.len()));
        }
        let mut seen = std::collections::HashSet::with_capacity(self.vertices.len());
        for (i, &v) in self.vertices.iter().enumerate() {
            if v.vl() > MAX_DATA_VL {
                return Err(SummaryError::ManagementVl {
                    vl: v.vl(),
                    at: format!("vertex {i}"),
                });
            }
            let ok = match v {
                Vertex::Enter { port, .. } | Vertex::Leave { port, .. } => (port as usize) < np,
                Vertex::Inner { channel, .. } => (channel as usize) < self.channels.len(),
            };
            if !ok {
                return bad(format!("vertex {i} names no router port or channel"));
            }
            if !seen.insert(v) {
                return bad(format!("vertex {i} appears twice"));
            }
        }
        let nv = self.vertices.len() as u32;
        if let Some(e) = self.edges.iter().find(|&&(a, b)| a >= nv || b >= nv) {
            return bad(format!("edge {} -> {} names no vertex", e.0, e.1));
        }
        let vertex = |x: u32| self.vertices.get(x as usize).copied();
        let inner = |c: &[u32]| {
            c.iter()
                .all(|&x| matches!(vertex(x), Some(Vertex::Inner { .. })))
        };
        for (i, c) in self.chains.iter().enumerate() {
            if c.is_empty() || c.len() > MAX_CHAIN_LEN {
                return bad(format!("chain {i} has {} vertices", c.len()));
            }
        }
        for (i, p) in self.ports.iter().enumerate() {
            if p.port == 0 || p.port == 255 || !(1..=0xBFFF).contains(&p.lid) {
                return bad(format!("router port {i}: port {} LID {}", p.port, p.lid));
            }
            if i > 0
                && (self.ports[i - 1].router_guid, self.ports[i - 1].port)
                    >= (p.router_guid, p.port)
            {
                return bad("router ports are not strictly ascending".into());
            }
            for (arrive, col) in [(true, &p.arrive), (false, &p.depart)] {
                let what = if arrive { "arrival" } else { "departure" };
                bound("runs of a column", col.0.len(), MAX_RUNS)?;
                if col.len() != self.host_lids.len() || col.0.iter().any(|&(n, _)| n == 0) {
                    return bad(format!(
                        "router port {i}: the {what} column covers {} CAs of {}",
                        col.len(),
                        self.host_lids.len()
                    ));
                }
                for id in col.distinct() {
                    let Some(c) = self.chains.get(id as usize) else {
                        return bad(format!("router port {i}: no chain {id}"));
                    };
                    let port = i as u32;
                    let shaped = if arrive {
                        matches!(vertex(c[c.len() - 1]), Some(Vertex::Leave { port: q, .. }) if q == port)
                            && inner(&c[..c.len() - 1])
                    } else {
                        matches!(vertex(c[0]), Some(Vertex::Enter { port: q, .. }) if q == port)
                            && inner(&c[1..])
                    };
                    if !shaped {
                        return bad(format!("router port {i}: {what} chain {id} runs elsewhere"));
                    }
                }
            }
        }
        if self.legs.len() != np * np {
            return bad(format!(
                "{} transit legs for {np} router ports",
                self.legs.len()
            ));
        }
        for (i, leg) in self.legs.iter().enumerate() {
            let (from, to) = ((i / np.max(1)) as u32, (i % np.max(1)) as u32);
            if leg.from != from || leg.to != to {
                return bad(format!("transit leg {i} is out of order"));
            }
            let Ok(path) = &leg.path else { continue };
            if path.len() < 2 || path.len() > MAX_CHAIN_LEN {
                return bad(format!("transit leg {i} has {} vertices", path.len()));
            }
            let shaped = matches!(vertex(path[0]), Some(Vertex::Enter { port, .. }) if port == from)
                && matches!(vertex(path[path.len() - 1]), Some(Vertex::Leave { port, .. }) if port == to)
                && inner(&path[1..path.len() - 1]);
            if !shaped {
                return bad(format!(
                    "transit leg {i} does not run from its port to its port"
                ));
            }
        }
        Ok(())
    }
}

/// A channel on a walk: slot << 4 | VL.
type Packed = u32;

fn pack(s: Slot, vl: u8) -> Packed {
    s << 4 | vl as u32 & 15
}

fn unpack(x: Packed) -> (Slot, u8) {
    (x >> 4, (x & 15) as u8)
}

/// One port's walks: its distinct chains (as packed channels) and per CA
/// the index of its chain among them.
struct PortWalks {
    arrive: (Vec<Vec<Packed>>, Vec<u32>),
    depart: (Vec<Vec<Packed>>, Vec<u32>),
}

/// Builds the summary of a subnet from its tables and the CDG of its
/// CA-to-CA walks.
pub(crate) fn build(
    f: &Fabric,
    r: &Routing,
    local: &LocalCdg,
) -> Result<DependencySummary, SummaryError> {
    let mut hosts: Vec<(u16, Slot)> = f
        .endports()
        .iter()
        .filter(|&&e| f.kind(f.node_of(e)) == NodeKind::Ca && f.remote(e) != NONE)
        .map(|&e| (f.lid_of_slot(e), e))
        .collect();
    hosts.sort_unstable();
    // Router ports on a switch, in (router GUID, port) order. A router
    // port linked straight to a CA or another router leaves every other
    // CA unreachable, which the gate refuses.
    let mut slots: Vec<Slot> = f
        .endports()
        .iter()
        .copied()
        .filter(|&e| {
            f.kind(f.node_of(e)) == NodeKind::Router
                && f.remote(e) != NONE
                && f.switch_index(f.node_of(f.remote(e))).is_some()
        })
        .collect();
    slots.sort_by_key(|&s| (f.guid(f.node_of(s)), f.port_of(s)));
    let np = slots.len();
    if np == 0 {
        return Err(SummaryError::NoRouterPorts);
    }
    if np > MAX_PORTS {
        return Err(SummaryError::TooBig {
            what: "router ports",
            count: np,
            bound: MAX_PORTS,
        });
    }
    let walker = Walker { f, r };
    let walks: Vec<PortWalks> = slots
        .par_iter()
        .map(|&p| walker.port_walks(p, &hosts))
        .collect::<Result<_, _>>()?;
    let legs: Vec<Result<Vec<Packed>, String>> = (0..np * np)
        .into_par_iter()
        .map(|i| {
            let (a, b) = (slots[i / np], slots[i % np]);
            let mut ch = Vec::new();
            walker
                .walk(a, f.lid_of_slot(a), f.lid_of_slot(b), &mut ch)
                .map(|()| ch.iter().map(|&(s, v)| pack(s, v)).collect())
        })
        .collect();

    // Vertices: the router links per VL, then the switch-to-switch
    // channels on the walks.
    let mut enter = vec![0u16; np];
    let mut leave = vec![0u16; np];
    let mut inner: Vec<Packed> = Vec::new();
    let check = |c: &[Packed]| -> Result<(), SummaryError> {
        if c.len() > MAX_CHAIN_LEN {
            return Err(SummaryError::TooBig {
                what: "channels on one walk",
                count: c.len(),
                bound: MAX_CHAIN_LEN,
            });
        }
        for &x in c {
            let (s, vl) = unpack(x);
            if vl > MAX_DATA_VL {
                return Err(SummaryError::ManagementVl {
                    vl,
                    at: describe(f, s),
                });
            }
        }
        Ok(())
    };
    for (i, w) in walks.iter().enumerate() {
        for c in &w.arrive.0 {
            check(c)?;
            leave[i] |= 1 << unpack(c[c.len() - 1]).1;
            inner.extend_from_slice(&c[..c.len() - 1]);
        }
        for c in &w.depart.0 {
            check(c)?;
            enter[i] |= 1 << unpack(c[0]).1;
            inner.extend_from_slice(&c[1..]);
        }
    }
    for (i, leg) in legs.iter().enumerate() {
        let Ok(c) = leg else { continue };
        check(c)?;
        enter[i / np] |= 1 << unpack(c[0]).1;
        leave[i % np] |= 1 << unpack(c[c.len() - 1]).1;
        inner.extend_from_slice(&c[1..c.len() - 1]);
    }
    inner.sort_unstable();
    inner.dedup();
    let mut vertices = Vec::new();
    let mut enter_id = vec![[u32::MAX; 16]; np];
    let mut leave_id = vec![[u32::MAX; 16]; np];
    for i in 0..np {
        for vl in 0..16u8 {
            if enter[i] & 1 << vl != 0 {
                enter_id[i][vl as usize] = vertices.len() as u32;
                vertices.push(Vertex::Enter { port: i as u32, vl });
            }
            if leave[i] & 1 << vl != 0 {
                leave_id[i][vl as usize] = vertices.len() as u32;
                vertices.push(Vertex::Leave { port: i as u32, vl });
            }
        }
    }
    let mut channels = Vec::new();
    let mut channel_of: HashMap<Slot, u32> = HashMap::new();
    // Packed channel -> vertex, and CDG vertex -> vertex.
    let mut inner_id: HashMap<Packed, u32> = HashMap::with_capacity(inner.len());
    let mut key: HashMap<u32, u32> = HashMap::with_capacity(inner.len());
    for &x in &inner {
        let (s, vl) = unpack(x);
        let c = *channel_of.entry(s).or_insert_with(|| {
            channels.push(describe(f, s));
            (channels.len() - 1) as u32
        });
        let id = vertices.len() as u32;
        inner_id.insert(x, id);
        if (vl as usize) < local.vls {
            key.insert((s as usize * local.vls + vl as usize) as u32, id);
        }
        vertices.push(Vertex::Inner { channel: c, vl });
    }
    if vertices.len() > MAX_VERTICES {
        return Err(SummaryError::TooBig {
            what: "vertices",
            count: vertices.len(),
            bound: MAX_VERTICES,
        });
    }
    let mid = |x: &Packed| inner_id.get(x).copied().unwrap_or(u32::MAX);

    // Chains in vertex ids, shared between ports.
    let mut chains: Vec<Chain> = Vec::new();
    let mut chain_of: HashMap<Chain, u32> = HashMap::new();
    let mut intern = |c: Chain| -> u32 {
        *chain_of.entry(c).or_insert_with_key(|c| {
            chains.push(c.clone());
            (chains.len() - 1) as u32
        })
    };
    let mut ports = Vec::with_capacity(np);
    for (i, w) in walks.into_iter().enumerate() {
        let arrive: Vec<u32> = w
            .arrive
            .0
            .iter()
            .map(|c| {
                let n = c.len() - 1;
                let mut v: Chain = c[..n].iter().map(mid).collect();
                v.push(leave_id[i][unpack(c[n]).1 as usize]);
                intern(v)
            })
            .collect();
        let depart: Vec<u32> = w
            .depart
            .0
            .iter()
            .map(|c| {
                let mut v: Chain = vec![enter_id[i][unpack(c[0]).1 as usize]];
                v.extend(c[1..].iter().map(mid));
                intern(v)
            })
            .collect();
        let p = slots[i];
        ports.push(SummaryPort {
            router_guid: f.guid(f.node_of(p)),
            port: f.port_of(p),
            lid: f.lid_of_slot(p),
            arrive: Runs::from_column(
                &w.arrive
                    .1
                    .iter()
                    .map(|&k| arrive[k as usize])
                    .collect::<Vec<_>>(),
            ),
            depart: Runs::from_column(
                &w.depart
                    .1
                    .iter()
                    .map(|&k| depart[k as usize])
                    .collect::<Vec<_>>(),
            ),
        });
    }
    if chains.len() > MAX_CHAINS {
        return Err(SummaryError::TooBig {
            what: "chains",
            count: chains.len(),
            bound: MAX_CHAINS,
        });
    }
    let legs = legs
        .into_iter()
        .enumerate()
        .map(|(i, leg)| {
            let (a, b) = (i / np, i % np);
            Leg {
                from: a as u32,
                to: b as u32,
                path: leg.map(|c| {
                    let n = c.len() - 1;
                    let mut v: Chain = vec![enter_id[a][unpack(c[0]).1 as usize]];
                    v.extend(c[1..n].iter().map(mid));
                    v.push(leave_id[b][unpack(c[n]).1 as usize]);
                    v
                }),
            }
        })
        .collect();
    let mut edges = direct_edges(local, &key)?;
    edges.sort_unstable();
    if edges.len() > MAX_EDGES {
        return Err(SummaryError::TooBig {
            what: "edges",
            count: edges.len(),
            bound: MAX_EDGES,
        });
    }
    Ok(DependencySummary {
        host_lids: hosts.iter().map(|h| h.0).collect(),
        ports,
        channels,
        vertices,
        edges,
        chains,
        legs,
    })
}

fn describe(f: &Fabric, s: Slot) -> String {
    let r = f.remote(s);
    let to = if r == NONE {
        "?".to_string()
    } else {
        format!("'{}' port {}", f.desc(f.node_of(r)), f.port_of(r))
    };
    let mut name = format!("'{}' port {} -> {to}", f.desc(f.node_of(s)), f.port_of(s));
    if name.len() > MAX_NAME {
        let mut cut = MAX_NAME;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    name
}

/// The summary edges: from every `Inner` vertex (the only ones with
/// CA-to-CA dependencies), the vertices its paths in the CA-to-CA CDG
/// reach first. Each CDG vertex's set of first vertices is computed once
/// (depth first, memoized), so shared route tails cost once.
fn direct_edges(
    local: &LocalCdg,
    key: &HashMap<u32, u32>,
) -> Result<Vec<(u32, u32)>, SummaryError> {
    let n = local.start.len().saturating_sub(1);
    let succ = |u: usize| &local.adj[local.start[u] as usize..local.start[u + 1] as usize];
    const UNSEEN: u32 = u32::MAX;
    const ACTIVE: u32 = u32::MAX - 1;
    // Per CDG vertex: its set in `sets`, or UNSEEN / ACTIVE.
    let mut set_of = vec![UNSEEN; n];
    let mut sets: Vec<Vec<u32>> = vec![Vec::new()];
    let first_of = |u: usize, set_of: &[u32], sets: &[Vec<u32>], acc: &mut Vec<u32>| {
        acc.clear();
        for &s in succ(u) {
            match key.get(&s) {
                Some(&id) => acc.push(id),
                None => acc.extend_from_slice(&sets[set_of[s as usize] as usize]),
            }
        }
        acc.sort_unstable();
        acc.dedup();
    };
    let mut stack: Vec<(usize, usize)> = Vec::new();
    let mut acc = Vec::new();
    let mut edges = Vec::new();
    let mut roots: Vec<(u32, u32)> = key.iter().map(|(&u, &id)| (u, id)).collect();
    roots.sort_unstable();
    for (u, from) in roots {
        let u = u as usize;
        if u >= n {
            continue;
        }
        // Every successor outside the summary gets its set first.
        for &s in succ(u) {
            let s = s as usize;
            if key.contains_key(&(s as u32)) || set_of[s] != UNSEEN {
                continue;
            }
            set_of[s] = ACTIVE;
            stack.push((s, 0));
            while let Some(top) = stack.last_mut() {
                let (x, i) = *top;
                let sx = succ(x);
                if i < sx.len() {
                    top.1 += 1;
                    let y = sx[i] as usize;
                    if key.contains_key(&(y as u32)) {
                        continue;
                    }
                    match set_of[y] {
                        UNSEEN => {
                            set_of[y] = ACTIVE;
                            stack.push((y, 0));
                        }
                        ACTIVE => return Err(SummaryError::Cyclic),
                        _ => {}
                    }
                } else {
                    stack.pop();
                    // One successor outside the summary: share its set.
                    set_of[x] = match sx {
                        [y] if !key.contains_key(y) => set_of[*y as usize],
                        _ => {
                            first_of(x, &set_of, &sets, &mut acc);
                            if acc.is_empty() {
                                0
                            } else {
                                sets.push(std::mem::take(&mut acc));
                                (sets.len() - 1) as u32
                            }
                        }
                    };
                }
            }
        }
        first_of(u, &set_of, &sets, &mut acc);
        edges.extend(acc.iter().map(|&to| (from, to)));
    }
    Ok(edges)
}

/// Walks routes through one subnet's tables, as the whole-fabric check's
/// network does (`crate::network`): the pair's SL, the first VL from the
/// sending port's SL-to-VL row, then per switch the LFT and SL-to-VL.
struct Walker<'a> {
    f: &'a Fabric,
    r: &'a Routing,
}

impl Walker<'_> {
    fn sl(&self, slid: u16, dlid: u16) -> u8 {
        self.r.path_sl.as_ref().map_or(0, |p| p.get(slid, dlid))
    }

    /// Appends the channels (slot, VL) from `start` to the end port `dlid`.
    fn walk(
        &self,
        start: Slot,
        slid: u16,
        dlid: u16,
        out: &mut Vec<(Slot, u8)>,
    ) -> Result<(), String> {
        let sl = self.sl(slid, dlid);
        if sl == SL_NONE || sl as usize >= NUM_SLS {
            return Err(format!("no SL for LID {slid} -> {dlid}"));
        }
        let vl = self.r.port_vl(start, sl);
        self.walk_on(start, vl, sl, dlid, out)
    }

    fn walk_on(
        &self,
        start: Slot,
        vl: u8,
        sl: u8,
        dlid: u16,
        out: &mut Vec<(Slot, u8)>,
    ) -> Result<(), String> {
        crate::network::walk_channels(self.f, self.r, 0, start, vl, sl, dlid, out)
    }

    /// Router port `p`'s walks from and to every CA, deduplicated: CAs
    /// behind one switch that agree on SL and first VL share the rest of
    /// their walk to `p`.
    fn port_walks(&self, p: Slot, hosts: &[(u16, Slot)]) -> Result<PortWalks, SummaryError> {
        let f = self.f;
        let plid = f.lid_of_slot(p);
        let mut arrive: (Vec<Vec<Packed>>, Vec<u32>) =
            (Vec::new(), Vec::with_capacity(hosts.len()));
        let mut depart: (Vec<Vec<Packed>>, Vec<u32>) =
            (Vec::new(), Vec::with_capacity(hosts.len()));
        let mut seen_arrive: HashMap<Vec<Packed>, u32> = HashMap::new();
        let mut seen_depart: HashMap<Vec<Packed>, u32> = HashMap::new();
        // (switch, SL, VL leaving it) -> chain of the walk to `p`.
        let mut memo: HashMap<(u32, u8, u8), u32> = HashMap::new();
        let mut ch = Vec::new();
        let mut buf: Vec<Packed> = Vec::new();
        // Looked up by slice: a chain is allocated only when it is new.
        let intern =
            |seen: &mut HashMap<Vec<Packed>, u32>, list: &mut Vec<Vec<Packed>>, c: &[Packed]| {
                if let Some(&id) = seen.get(c) {
                    return id;
                }
                let id = list.len() as u32;
                list.push(c.to_vec());
                seen.insert(c.to_vec(), id);
                id
            };
        for &(hlid, h) in hosts {
            // From the port to the CA: the CA's own link depends on nothing.
            ch.clear();
            self.walk(p, plid, hlid, &mut ch)
                .map_err(|why| SummaryError::Unrouted {
                    src: plid,
                    dst: hlid,
                    why,
                })?;
            buf.clear();
            buf.extend(ch[..ch.len() - 1].iter().map(|&(s, v)| pack(s, v)));
            let id = intern(&mut seen_depart, &mut depart.0, &buf);
            depart.1.push(id);

            // From the CA to the port, from the channel leaving its switch.
            let unrouted = |why: String| SummaryError::Unrouted {
                src: hlid,
                dst: plid,
                why,
            };
            let sl = self.sl(hlid, plid);
            if sl == SL_NONE || sl as usize >= NUM_SLS {
                return Err(unrouted("no SL".into()));
            }
            let rem = f.remote(h);
            let node = f.node_of(rem);
            let Some(si) = f.switch_index(node) else {
                return Err(unrouted(format!("'{}' is no switch", f.desc(node))));
            };
            let out = self.r.lfts.get(si, plid);
            if out == 0 || out > f.num_ports(node) {
                return Err(unrouted(format!("switch '{}' has no route", f.desc(node))));
            }
            let vo = self.r.switch_vl(si, f.port_of(rem), out, sl);
            let id = match memo.get(&(si, sl, vo)) {
                Some(&id) => id,
                None => {
                    ch.clear();
                    self.walk_on(f.slot(node, out), vo, sl, plid, &mut ch)
                        .map_err(unrouted)?;
                    buf.clear();
                    buf.extend(ch.iter().map(|&(s, v)| pack(s, v)));
                    let id = intern(&mut seen_arrive, &mut arrive.0, &buf);
                    memo.insert((si, sl, vo), id);
                    id
                }
            };
            arrive.1.push(id);
        }
        Ok(PortWalks { arrive, depart })
    }
}
