//! Deadlock and connectivity verification from emitted tables alone.
//!
//! For every destination end port and every source end port (except pairs
//! of two router ports: traffic between two routers of one subnet is
//! transit, checked by the inter-subnet verification) the verifier walks
//! the route the LFTs give, with the SL the path-SL table gives and
//! the VLs the SL-to-VL tables give, and collects the channel dependency
//! graph (CDG) of the two-buffer model: vertices are virtual channels
//! (directed switch-to-switch link, VL), an edge `a^m -> b^q` exists when a
//! packet enters a switch on `a` with VL `m` and leaves on `b` with VL `q`.
//! Links to and from end ports cannot be part of a cycle (an end port never
//! forwards), so they are left out of the graph. Routing is deadlock free iff
//! the CDG is acyclic (Dally and Seitz).
//!
//! For a subnet with router ports the gate also keeps the CDG of the
//! CA-to-CA walks alone (CAs toward a CA are walked before the router
//! ports, so the states they leave carry only their edges): the dependency
//! summary ([`summary`]) is built on it.
//!
//! Work is deduplicated per destination: the continuation of a route from
//! switch-to-switch channel `o` with SL `s` does not depend on how the packet
//! got there (the next out port depends on the LFT, the next VL on in port,
//! out port and SL), so each `(o, s)` state is expanded once per destination;
//! later arrivals only add their own CDG edge. Sources the tables treat
//! alike are walked once (`classes.rs`), and so are destinations
//! (`alike.rs`): the report is the one a walk of every pair on its own
//! gives (`fabric/tests/verify_reference.rs`).

mod alike;
mod classes;
mod columns;
mod cycle;
mod parts;
mod walk;

pub mod compose;
pub mod gate;
pub mod global;
pub mod mcast;
pub mod summary;
pub mod transition;
mod transition_alike;

pub use compose::{ComposeError, ComposeReport, CycleStep, Undeliverable, compose};
pub use gate::{Policy, Refusal, Refused, Step, Verified, accept, accept_step};
pub use global::{GlobalReport, verify_global, verify_global_with};
pub use summary::{Chain, DependencySummary, Leg, Runs, SummaryError, SummaryPort, Vertex};
pub use transition::{TransitionReport, check_transition};

pub use columns::part_columns;
use columns::{walk_columns, walk_range};
use cycle::csr;
pub(crate) use cycle::{csr_of, cycle_in};
pub use parts::{MergeError, Part, merge_parts, verify_part, verify_part_columns};
use walk::{NO_SUCC, keep_first, route_to};

use crate::model::{Fabric, NONE, NodeKind, Slot};
use crate::tables::{NO_PATH, NUM_SLS, Routing, SL_NONE};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// A virtual channel: the directed link leaving `slot`, on `vl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct VirtualChannel {
    pub slot: Slot,
    pub vl: u8,
}

/// Why a source/destination pair is not delivered.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PairFault {
    /// The LFT of `switch` has no valid port for the destination.
    NoRoute { switch: String },
    /// The LFT points at a port that is not linked.
    DeadPort { switch: String, port: u8 },
    /// The route revisits a channel: a forwarding loop.
    Loop { switch: String },
    /// The route ends at an end port other than the destination.
    Misdelivered { at: String },
    /// `path-sl.txt` says the pair has no path (or gives an SL above 15).
    NoSl,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BrokenPair {
    pub src_lid: u16,
    pub dst_lid: u16,
    pub fault: PairFault,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    pub end_ports: usize,
    /// LIDs of the end ports (each port answers to 2^LMC of them).
    pub end_lids: usize,
    /// (Source LID, destination LID) pairs of two different ports, but
    /// those of two router ports.
    pub pairs: u64,
    pub broken_pairs: u64,
    /// Up to 16 examples of broken pairs.
    pub broken_examples: Vec<BrokenPair>,
    /// Distinct VLs used on switch-to-switch channels.
    pub vls_used: u32,
    /// Highest VL used on a switch-to-switch channel (0 when none).
    pub max_vl: u8,
    /// Distinct SLs the sources use.
    pub sls_used: u32,
    /// Switch-to-switch links on the longest route.
    pub max_hops: u32,
    pub cdg_vertices: u64,
    pub cdg_edges: u64,
    /// A dependency cycle, when there is one.
    pub cycle: Option<Vec<VirtualChannel>>,
}

impl Report {
    pub fn all_pairs_routed(&self) -> bool {
        self.broken_pairs == 0
    }
    pub fn deadlock_free(&self) -> bool {
        self.cycle.is_none()
    }
    /// Connected, loop free and deadlock free.
    pub fn ok(&self) -> bool {
        self.all_pairs_routed() && self.deadlock_free()
    }
    /// Human-readable cycle: `sw1[p] -> sw2 (VL v)` per channel.
    pub fn describe_cycle(&self, f: &Fabric) -> Option<String> {
        Some(describe_channels(f, self.cycle.as_ref()?))
    }
}

/// Channels (a cycle) as one line: [`describe_channel`] each, joined by
/// ` -> `.
pub fn describe_channels(f: &Fabric, c: &[VirtualChannel]) -> String {
    c.iter()
        .map(|vc| describe_channel(f, *vc))
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// One end of a channel, as scripts want it: the node's GUID and name and
/// the port number.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PortRef {
    /// Node GUID, `0x` and 16 hex digits.
    pub guid: String,
    pub name: String,
    pub port: u8,
}

/// A virtual channel as a structured object: the sending port, the port
/// it reaches (`None` when the link is gone) and the VL.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChannelRef {
    pub from: PortRef,
    pub to: Option<PortRef>,
    pub vl: u8,
}

pub fn channel_ref(f: &Fabric, vc: VirtualChannel) -> ChannelRef {
    let port = |s: Slot| {
        let n = f.node_of(s);
        PortRef {
            guid: format!("{:#018x}", f.guid(n)),
            name: f.desc(n).to_string(),
            port: f.port_of(s),
        }
    };
    let r = f.remote(vc.slot);
    ChannelRef {
        from: port(vc.slot),
        to: (r != NONE).then(|| port(r)),
        vl: vc.vl,
    }
}

pub fn describe_channel(f: &Fabric, vc: VirtualChannel) -> String {
    let n = f.node_of(vc.slot);
    let r = f.remote(vc.slot);
    let to = if r == NONE {
        "?".to_string()
    } else {
        format!("{}[{}]", f.desc(f.node_of(r)), f.port_of(r))
    };
    format!("{}[{}]=>{} VL{}", f.desc(n), f.port_of(vc.slot), to, vc.vl)
}

const IN_PROGRESS: u32 = u32::MAX;
const BROKEN_ROUTE: u32 = u32::MAX - 1;
const BROKEN_LOOP: u32 = u32::MAX - 2;

/// Per-thread scratch state, reused across destinations.
struct Scratch {
    /// The SLs the walked columns use, numbered densely (`sls` of them):
    /// the state per (channel, SL) is then a few MB, not sixteen times
    /// the channels.
    sls: usize,
    sl_dense: [u8; NUM_SLS],
    stamp: Vec<u32>,
    info: Vec<u32>,
    /// Per state: out port and VL of the next switch-to-switch hop.
    succ: Vec<u16>,
    stack: Vec<usize>,
    broken: u64,
    examples: Vec<BrokenPair>,
    /// Whether the walks now are CA-to-CA ones, whose edges also go to
    /// `Ctx::local`.
    local: bool,
    vl_mask: u16,
    sl_mask: u16,
    max_hops: u32,
}

/// A slot's link as the walks read it, in one place: a walk step reads
/// one of these instead of five tables of the model.
#[derive(Clone, Copy)]
struct Hop {
    /// The slot at the other end ([`NONE`]: unlinked).
    remote: Slot,
    /// Switch index of the node at the other end ([`NONE`]: not a switch).
    switch: u32,
    /// Port number of the other end, and of this slot.
    remote_port: u8,
    port: u8,
    /// Both ends are switches: a channel of the dependency graph.
    s2s: bool,
}

struct Ctx<'a> {
    f: &'a Fabric,
    r: &'a Routing,
    hops: Vec<Hop>,
    /// Per switch index: the slot of its port 0, and its port count.
    sw_slot0: Vec<Slot>,
    sw_ports: Vec<u8>,
    max_ports: usize,
    vls: usize,
    edges: Vec<AtomicU64>,
    hosts: Vec<Slot>,
    /// Per entry of `hosts`: its LID, the switch port it is linked to, and
    /// its path-SL row (`u32::MAX`: none, SL 0).
    host_info: Vec<(u16, u8, u32)>,
    /// Path-SL rows: a destination's path-SL column has one SL per row.
    sl_rows: usize,
    /// End ports whose link leads to another end port directly.
    direct: Vec<Slot>,
    /// The edges of the CA-to-CA walks alone, kept for a dependency
    /// summary ([`summary`]), which carries the walks from and to router
    /// ports on their own: the whole-fabric check counts those only where
    /// the inter-subnet routes use them.
    local: Option<Vec<AtomicU64>>,
    /// Hosts every walk treats alike, per switch.
    classes: classes::Classes,
    /// Every switch index, and those with a router port among their hosts.
    switch_ids: Vec<u32>,
    router_switches: Vec<u32>,
}

impl Ctx<'_> {
    #[inline]
    fn edge_bit(&self, c: Slot, out_port: u8, vc: u8, vo: u8) -> usize {
        edge_bit(self.max_ports, self.vls, c, out_port, vc, vo)
    }
    #[inline]
    fn add_edge(&self, c: Slot, out_port: u8, vc: u8, vo: u8, local: bool) {
        let b = self.edge_bit(c, out_port, vc, vo);
        set_bit(&self.edges, b);
        if local {
            if let Some(l) = &self.local {
                set_bit(l, b);
            }
        }
    }
}

/// Bit of the dependency `c` on VL `vc` -> out port `out_port` of the
/// switch `c` leads to, on VL `vo`, in an edge bitset for switches of up
/// to `max_ports` ports (port 0 included) and `vls` VLs.
#[inline]
pub(crate) fn edge_bit(
    max_ports: usize,
    vls: usize,
    c: Slot,
    out_port: u8,
    vc: u8,
    vo: u8,
) -> usize {
    ((c as usize * max_ports + out_port as usize) * vls + vc as usize) * vls + vo as usize
}

/// Per slot: whether its link joins two switches (the channels a CDG has).
pub(crate) fn switch_link_flags(f: &Fabric) -> Vec<bool> {
    (0..f.num_slots() as Slot)
        .map(|s| {
            let r = f.remote(s);
            r != NONE
                && f.kind(f.node_of(s)) == NodeKind::Switch
                && f.kind(f.node_of(r)) == NodeKind::Switch
        })
        .collect()
}

/// Ports of the widest switch, port 0 included (at least 1).
pub(crate) fn widest_switch(f: &Fabric) -> usize {
    f.switches()
        .iter()
        .map(|&s| f.num_ports(s) as usize + 1)
        .max()
        .unwrap_or(1)
}

/// The end ports linked to a switch: the sources every walk starts from.
pub(crate) fn switch_hosts(f: &Fabric) -> Vec<Slot> {
    f.endports()
        .iter()
        .copied()
        .filter(|&e| f.switch_index(f.node_of(f.remote(e))).is_some())
        .collect()
}

#[inline]
pub(crate) fn set_bit(words: &[AtomicU64], b: usize) {
    let w = &words[b / 64];
    let m = 1u64 << (b % 64);
    // A plain load first: most edges are already known, and skipping the
    // atomic read-modify-write keeps the cache line shared between threads.
    if w.load(Ordering::Relaxed) & m == 0 {
        w.fetch_or(m, Ordering::Relaxed);
    }
}

/// Verifies `routing` on `f`. Never panics on inconsistent tables: every
/// problem becomes a broken pair or a cycle in the report.
pub fn verify(f: &Fabric, routing: &Routing) -> Report {
    run(f, routing, false, false).0
}

/// [`verify`], also returning the whole CDG of the walks (the channel
/// list of dynamic reconfiguration starts from it).
pub fn verify_with_cdg(f: &Fabric, routing: &Routing) -> (Report, LocalCdg) {
    let (report, _, all) = run(f, routing, false, true);
    let all = all.unwrap_or(LocalCdg {
        vls: 1,
        start: vec![0],
        adj: Vec::new(),
    });
    (report, all)
}

/// A CDG in CSR form over virtual channels (vertex = slot * vls + VL):
/// the edges of vertex `v` are `adj[start[v]..start[v + 1]]`.
pub struct LocalCdg {
    pub vls: usize,
    pub start: Vec<u32>,
    pub adj: Vec<u32>,
}

/// [`verify`], also keeping the CDG of the CA-to-CA walks when `f` has a
/// router port.
pub(crate) fn verify_keeping_local(f: &Fabric, routing: &Routing) -> (Report, Option<LocalCdg>) {
    let (r, local, _) = run(f, routing, has_router_port(f), false);
    (r, local)
}

/// [`verify_keeping_local`], also keeping the whole CDG (for the
/// multicast check) from the same walk.
pub(crate) fn verify_keeping_both(
    f: &Fabric,
    routing: &Routing,
) -> (Report, Option<LocalCdg>, LocalCdg) {
    let (r, local, all) = run(f, routing, has_router_port(f), true);
    let all = all.unwrap_or(LocalCdg {
        vls: 1,
        start: vec![0],
        adj: Vec::new(),
    });
    (r, local, all)
}

fn has_router_port(f: &Fabric) -> bool {
    f.endports()
        .iter()
        .any(|&e| f.kind(f.node_of(e)) == NodeKind::Router)
}

fn run(
    f: &Fabric,
    routing: &Routing,
    keep: bool,
    all: bool,
) -> (Report, Option<LocalCdg>, Option<LocalCdg>) {
    let ctx = context(f, routing, keep);
    let walked = walk_range(&ctx, 0..f.end_lids().len());
    finish(&ctx, walked, all)
}

/// What the walks toward a range of destinations found, besides the
/// dependencies they set in the context's bitset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Walked {
    broken: u64,
    examples: Vec<BrokenPair>,
    vl_mask: u16,
    sl_mask: u16,
    max_hops: u32,
}

impl Walked {
    fn merge(mut self, b: Walked) -> Walked {
        self.broken += b.broken;
        self.examples = keep_first(self.examples, b.examples);
        self.vl_mask |= b.vl_mask;
        self.sl_mask |= b.sl_mask;
        self.max_hops = self.max_hops.max(b.max_hops);
        self
    }
}

fn context<'a>(f: &'a Fabric, routing: &'a Routing, keep: bool) -> Ctx<'a> {
    let n_slots = f.num_slots();
    let is_s2s = switch_link_flags(f);
    let hops = (0..n_slots as Slot)
        .map(|c| {
            let remote = f.remote(c);
            let linked = remote != NONE;
            Hop {
                remote,
                switch: if linked {
                    f.switch_index(f.node_of(remote)).unwrap_or(NONE)
                } else {
                    NONE
                },
                remote_port: if linked { f.port_of(remote) } else { 0 },
                port: f.port_of(c),
                s2s: is_s2s[c as usize],
            }
        })
        .collect();
    let max_ports = widest_switch(f);
    let vls = routing
        .sl2vl
        .as_ref()
        .map(|t| t.max_vl() as usize + 1)
        .unwrap_or(1)
        .min(16);
    let bits = n_slots * max_ports * vls * vls;
    let words = || (0..bits.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
    let edges = words();
    let local = keep.then(words);
    let mut per_switch: Vec<Vec<Slot>> = vec![Vec::new(); f.switches().len()];
    let mut direct = Vec::new();
    for &e in f.endports() {
        match f.switch_index(f.node_of(f.remote(e))) {
            Some(si) => per_switch[si as usize].push(e),
            None => direct.push(e),
        }
    }
    // A source with LMC > 0 is a host per LID: its LIDs may take
    // different path-SL rows. Those that take the same one fall into
    // one class, walked once.
    let mut host_off = vec![0u32];
    let mut hosts = Vec::with_capacity(f.end_lids().len());
    let mut host_lids = Vec::with_capacity(f.end_lids().len());
    for v in per_switch {
        for h in v {
            for lid in f.lids_of_slot(h) {
                hosts.push(h);
                host_lids.push(lid);
            }
        }
        host_off.push(hosts.len() as u32);
    }
    let router_switches: Vec<u32> = (0..f.switches().len())
        .filter(|&si| {
            hosts[host_off[si] as usize..host_off[si + 1] as usize]
                .iter()
                .any(|&h| f.kind(f.node_of(h)) == NodeKind::Router)
        })
        .map(|si| si as u32)
        .collect();
    let host_router: Vec<bool> = hosts
        .iter()
        .map(|&h| f.kind(f.node_of(h)) == NodeKind::Router)
        .collect();
    let host_info: Vec<(u16, u8, u32)> = hosts
        .iter()
        .zip(host_lids)
        .map(|(&h, lid)| {
            let row = routing
                .path_sl
                .as_ref()
                .and_then(|p| p.row_index(lid))
                .unwrap_or(u32::MAX);
            (lid, f.port_of(f.remote(h)), row)
        })
        .collect();
    let classes = classes::build(f, routing, &hosts, &host_off, &host_info, &host_router);
    Ctx {
        f,
        r: routing,
        hops,
        sw_slot0: f.switches().iter().map(|&s| f.slot(s, 0)).collect(),
        sw_ports: f.switches().iter().map(|&s| f.num_ports(s)).collect(),
        max_ports,
        vls,
        edges,
        host_info,
        classes,
        sl_rows: routing.path_sl.as_ref().map_or(0, |p| p.num_rows()),
        switch_ids: (0..f.switches().len() as u32).collect(),
        router_switches,
        hosts,
        direct,
        local,
    }
}

/// The report from the dependencies set in `ctx` and what the walks found.
fn finish(ctx: &Ctx, walked: Walked, all: bool) -> (Report, Option<LocalCdg>, Option<LocalCdg>) {
    let Walked {
        broken,
        mut examples,
        vl_mask,
        sl_mask,
        max_hops,
    } = walked;
    examples.sort_by_key(|e| (e.src_lid, e.dst_lid));
    let vls = ctx.vls;
    let (deg, adj, edge_count, vertices) = csr(ctx, &ctx.edges);
    let cycle = cycle_in(vls, &deg, &adj);
    let all = all.then_some(LocalCdg {
        vls,
        start: deg,
        adj,
    });
    let local = ctx.local.as_ref().map(|words| {
        let (start, adj, _, _) = csr(ctx, words);
        LocalCdg { vls, start, adj }
    });
    let report = Report {
        end_ports: ctx.f.endports().len(),
        end_lids: ctx.f.end_lids().len(),
        pairs: lid_pairs(ctx.f),
        broken_pairs: broken,
        broken_examples: examples,
        vls_used: vl_mask.count_ones(),
        max_vl: if vl_mask == 0 {
            0
        } else {
            15 - vl_mask.leading_zeros() as u8
        },
        sls_used: sl_mask.count_ones(),
        max_hops,
        cdg_vertices: vertices,
        cdg_edges: edge_count,
        cycle,
    };
    (report, local, all)
}

/// The pairs a verification checks: every LID of a port toward every LID
/// of another, but between two router ports.
fn lid_pairs(f: &Fabric) -> u64 {
    let (mut all, mut routers, mut same, mut same_router) = (0u64, 0u64, 0u64, 0u64);
    for &e in f.endports() {
        let k = 1u64 << f.lmc(e);
        all += k;
        same += k * k;
        if f.kind(f.node_of(e)) == NodeKind::Router {
            routers += k;
            same_router += k * k;
        }
    }
    (all * all - same) - (routers * routers - same_router)
}
