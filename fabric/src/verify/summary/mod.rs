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

mod build;

pub(crate) use build::build;

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
    #[error(
        "a port has LMC {0}: the dependency summary of a subnet with routers counts one LID per port, so such a subnet is not joined to others"
    )]
    Lmc(u8),
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
