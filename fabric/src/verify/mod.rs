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
//! later arrivals only add their own CDG edge.

pub mod compose;
pub mod gate;
pub mod global;
pub mod summary;
pub mod transition;

pub use compose::{ComposeError, ComposeReport, CycleStep, Undeliverable, compose};
pub use gate::{Policy, Refusal, Refused, Step, Verified, accept, accept_step};
pub use global::{GlobalReport, verify_global, verify_global_with};
pub use summary::{Chain, DependencySummary, Leg, Runs, SummaryError, SummaryPort, Vertex};
pub use transition::{TransitionReport, check_transition};

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
        let c = self.cycle.as_ref()?;
        Some(
            c.iter()
                .map(|vc| describe_channel(f, *vc))
                .collect::<Vec<_>>()
                .join(" -> "),
        )
    }
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
    sls: usize,
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

struct Ctx<'a> {
    f: &'a Fabric,
    r: &'a Routing,
    is_s2s: Vec<bool>,
    max_ports: usize,
    vls: usize,
    edges: Vec<AtomicU64>,
    /// End ports per switch index (CSR): the sources a switch injects.
    host_off: Vec<u32>,
    hosts: Vec<Slot>,
    /// Per entry of `hosts`: its LID, the switch port it is linked to, and
    /// its path-SL row (`u32::MAX`: none, SL 0).
    host_info: Vec<(u16, u8, u32)>,
    /// Per entry of `hosts`: whether it is a router port.
    host_router: Vec<bool>,
    /// Path-SL rows: a destination's path-SL column has one SL per row.
    sl_rows: usize,
    /// End ports whose link leads to another end port directly.
    direct: Vec<Slot>,
    /// The edges of the CA-to-CA walks alone, kept for a dependency
    /// summary ([`summary`]), which carries the walks from and to router
    /// ports on their own: the whole-fabric check counts those only where
    /// the inter-subnet routes use them.
    local: Option<Vec<AtomicU64>>,
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
    let keep = f
        .endports()
        .iter()
        .any(|&e| f.kind(f.node_of(e)) == NodeKind::Router);
    let (r, local, _) = run(f, routing, keep, false);
    (r, local)
}

fn run(
    f: &Fabric,
    routing: &Routing,
    keep: bool,
    all: bool,
) -> (Report, Option<LocalCdg>, Option<LocalCdg>) {
    let ctx = context(f, routing, keep);
    let walked = walk_range(&ctx, 0..f.endports().len());
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
    let mut host_off = vec![0u32];
    let mut hosts = Vec::with_capacity(f.endports().len());
    for v in per_switch {
        hosts.extend(v);
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
    Ctx {
        f,
        r: routing,
        is_s2s,
        max_ports,
        vls,
        edges,
        host_off,
        host_router: hosts
            .iter()
            .map(|&h| f.kind(f.node_of(h)) == NodeKind::Router)
            .collect(),
        host_info: hosts
            .iter()
            .map(|&h| {
                let lid = f.lid_of_slot(h);
                let row = routing
                    .path_sl
                    .as_ref()
                    .and_then(|p| p.row_index(lid))
                    .unwrap_or(u32::MAX);
                (lid, f.port_of(f.remote(h)), row)
            })
            .collect(),
        sl_rows: routing.path_sl.as_ref().map_or(0, |p| p.num_rows()),
        switch_ids: (0..f.switches().len() as u32).collect(),
        router_switches,
        hosts,
        direct,
        local,
    }
}

/// Walks every source toward the end ports `range` (indices into
/// `f.endports()`), setting the dependencies found in `ctx`.
fn walk_range(ctx: &Ctx, range: std::ops::Range<usize>) -> Walked {
    let (cols, sl_cols) = part_columns(ctx.f, ctx.r, range.clone());
    walk_columns(ctx, range, &cols, &sl_cols)
}

/// The LFT and path-SL columns the walks toward end ports `range` read:
/// per destination, one LFT entry per switch, then one SL per path-SL
/// row. A part needs nothing else of those tables.
pub fn part_columns(
    f: &Fabric,
    routing: &Routing,
    range: std::ops::Range<usize>,
) -> (Vec<u8>, Vec<u8>) {
    let dests = &f.endports()[range];
    let cols = routing.lfts.columns(f, dests);
    let sl_cols = routing
        .path_sl
        .as_ref()
        .map(|p| p.columns(&dests.iter().map(|&d| f.lid_of_slot(d)).collect::<Vec<_>>()))
        .unwrap_or_default();
    (cols, sl_cols)
}

/// [`walk_range`] over columns given ([`part_columns`]).
fn walk_columns(ctx: &Ctx, range: std::ops::Range<usize>, cols: &[u8], sl_cols: &[u8]) -> Walked {
    let (f, routing) = (ctx.f, ctx.r);
    let n_slots = f.num_slots();
    let dests = &f.endports()[range.clone()];
    let sls = if routing.path_sl.is_some() {
        NUM_SLS
    } else {
        1
    };
    let nsw = f.switches().len();
    let nr = ctx.sl_rows;
    dests
        .par_iter()
        .enumerate()
        .fold(
            || Scratch {
                sls,
                stamp: vec![0; n_slots * sls],
                info: vec![0; n_slots * sls],
                succ: vec![NO_SUCC; n_slots * sls],
                stack: Vec::new(),
                broken: 0,
                examples: Vec::new(),
                local: false,
                vl_mask: 0,
                sl_mask: 0,
                max_hops: 0,
            },
            |mut st, (di, &d)| {
                let sl_col = sl_cols.get(di * nr..(di + 1) * nr).unwrap_or(&[]);
                // Stamps are unique per destination across ranges too.
                route_to(
                    ctx,
                    &mut st,
                    (range.start + di) as u32 + 1,
                    d,
                    &cols[di * nsw..(di + 1) * nsw],
                    sl_col,
                );
                st
            },
        )
        .map(|st| Walked {
            broken: st.broken,
            examples: st.examples,
            vl_mask: st.vl_mask,
            sl_mask: st.sl_mask,
            max_hops: st.max_hops,
        })
        .reduce(Walked::default, Walked::merge)
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
    let n = ctx.f.endports().len() as u64;
    let routers = ctx.host_router.iter().filter(|&&r| r).count() as u64;
    let report = Report {
        end_ports: n as usize,
        pairs: n * n.saturating_sub(1) - routers * routers.saturating_sub(1),
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

/// One shard of a verification: the walks toward a range of destinations
/// (indices into `f.endports()`), what a worker computes and sends back.
/// [`merge_parts`] of parts that cover every destination once gives the
/// report [`verify`] gives, whatever the ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub start: usize,
    pub end: usize,
    /// The dependencies found, as the verifier's edge bitset.
    pub edges: Vec<u64>,
    pub broken: u64,
    pub examples: Vec<BrokenPair>,
    pub vl_mask: u16,
    pub sl_mask: u16,
    pub max_hops: u32,
}

/// Why parts could not be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("the parts cover destinations {covered:?} of 0..{total}: each must be covered once")]
    Coverage {
        covered: Vec<(usize, usize)>,
        total: usize,
    },
    #[error(
        "part {start}..{end} comes with {lft} LFT and {sl} path-SL column bytes; it needs {want_lft} and {want_sl}"
    )]
    Columns {
        start: usize,
        end: usize,
        lft: usize,
        sl: usize,
        want_lft: usize,
        want_sl: usize,
    },
    #[error("part {start}..{end} carries {got} bitset words, the fabric and tables need {want}")]
    Shape {
        start: usize,
        end: usize,
        got: usize,
        want: usize,
    },
}

/// Verifies the walks toward end ports `range` only: one shard.
pub fn verify_part(f: &Fabric, routing: &Routing, range: std::ops::Range<usize>) -> Part {
    let range = range.start.min(f.endports().len())..range.end.min(f.endports().len());
    let ctx = context(f, routing, false);
    let w = walk_range(&ctx, range.clone());
    part_of(&ctx, range, w)
}

/// A part from the dependencies the walks set in `ctx` and what they found.
fn part_of(ctx: &Ctx, range: std::ops::Range<usize>, w: Walked) -> Part {
    Part {
        start: range.start,
        end: range.end,
        edges: ctx
            .edges
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect(),
        broken: w.broken,
        examples: w.examples,
        vl_mask: w.vl_mask,
        sl_mask: w.sl_mask,
        max_hops: w.max_hops,
    }
}

/// [`verify_part`] from the part's columns ([`part_columns`]) rather than
/// `routing`'s LFTs and path-SL rows, which may then be empty: what a
/// worker holding only the fabric, the SL-to-VL tables and the path-SL
/// row map computes.
pub fn verify_part_columns(
    f: &Fabric,
    routing: &Routing,
    range: std::ops::Range<usize>,
    cols: &[u8],
    sl_cols: &[u8],
) -> Result<Part, MergeError> {
    let n = f.endports().len();
    let nsw = f.switches().len();
    let ctx = context(f, routing, false);
    let k = range.end.saturating_sub(range.start);
    if range.start > range.end
        || range.end > n
        || cols.len() != k * nsw
        || sl_cols.len() != k * ctx.sl_rows
    {
        return Err(MergeError::Columns {
            start: range.start,
            end: range.end,
            lft: cols.len(),
            sl: sl_cols.len(),
            want_lft: k * nsw,
            want_sl: k * ctx.sl_rows,
        });
    }
    let w = walk_columns(&ctx, range.clone(), cols, sl_cols);
    Ok(part_of(&ctx, range, w))
}

/// The report of the whole verification from its parts: dependencies
/// united, counts summed, the cycle searched once in the united graph.
pub fn merge_parts(f: &Fabric, routing: &Routing, parts: &[Part]) -> Result<Report, MergeError> {
    let total = f.endports().len();
    let mut covered: Vec<(usize, usize)> = parts.iter().map(|p| (p.start, p.end)).collect();
    covered.sort_unstable();
    let mut at = 0;
    for &(a, b) in &covered {
        if a != at || b < a {
            return Err(MergeError::Coverage { covered, total });
        }
        at = b;
    }
    if at != total {
        return Err(MergeError::Coverage { covered, total });
    }
    let ctx = context(f, routing, false);
    let want = ctx.edges.len();
    let mut walked = Walked::default();
    for p in parts {
        if p.edges.len() != want {
            return Err(MergeError::Shape {
                start: p.start,
                end: p.end,
                got: p.edges.len(),
                want,
            });
        }
        for (w, &x) in ctx.edges.iter().zip(&p.edges) {
            w.fetch_or(x, Ordering::Relaxed);
        }
        walked = walked.merge(Walked {
            broken: p.broken,
            examples: p.examples.clone(),
            vl_mask: p.vl_mask,
            sl_mask: p.sl_mask,
            max_hops: p.max_hops,
        });
    }
    Ok(finish(&ctx, walked, false).0)
}

/// Outcome of one walk: switch-to-switch hops to the destination, or a fault.
type Walk = Result<u32, PairFault>;

/// Broken pairs a report names: the first ones by (source, destination)
/// LID, whatever order the walks ran in, so that any split of the work
/// names the same ones.
const EXAMPLES: usize = 16;

fn record(st: &mut Scratch, slid: u16, dlid: u16, count: u64, fault: PairFault) {
    st.broken += count;
    let e = BrokenPair {
        src_lid: slid,
        dst_lid: dlid,
        fault,
    };
    if st.examples.len() < EXAMPLES {
        st.examples.push(e);
    } else if let Some((i, last)) = st
        .examples
        .iter()
        .enumerate()
        .max_by_key(|(_, x)| (x.src_lid, x.dst_lid))
    {
        if (slid, dlid) < (last.src_lid, last.dst_lid) {
            st.examples[i] = e;
        }
    }
}

/// The first [`EXAMPLES`] of two example lists, by (source, destination).
fn keep_first(mut a: Vec<BrokenPair>, b: Vec<BrokenPair>) -> Vec<BrokenPair> {
    a.extend(b);
    a.sort_by_key(|e| (e.src_lid, e.dst_lid));
    a.dedup_by_key(|e| (e.src_lid, e.dst_lid));
    a.truncate(EXAMPLES);
    a
}

/// Walks every source toward destination port `d` (stamp `tag`). Sources
/// are taken switch by switch so the first LFT lookup is shared; when the
/// tables carry no SLs and no VLs every host of a switch takes the same
/// route, and one walk stands for all of them.
fn route_to(ctx: &Ctx, st: &mut Scratch, tag: u32, d: Slot, col: &[u8], sl_col: &[u8]) {
    let f = ctx.f;
    let dlid = f.lid_of_slot(d);
    let d_router = f.kind(f.node_of(d)) == NodeKind::Router;
    let sl2vl = ctx.r.sl2vl.as_ref();
    let uniform = sl2vl.is_none() && ctx.r.path_sl.is_none();
    let mut memo: Vec<(u8, u8, Walk)> = Vec::new();
    // When a summary is wanted, the CAs toward a CA go first and alone, so
    // the states they leave behind carry CA-to-CA edges only; the router
    // ports follow. Each pass: (sources that are router ports or not, or
    // all; whether the edges are CA-to-CA ones).
    let passes: &[(Option<bool>, bool)] = if ctx.local.is_some() && !d_router {
        &[(Some(false), true), (Some(true), false)]
    } else {
        &[(None, false)]
    };
    for &(only, local) in passes {
        st.local = local;
        // The router ports' pass visits only the switches they sit on.
        let switches = if only == Some(true) {
            &ctx.router_switches[..]
        } else {
            &ctx.switch_ids[..]
        };
        for &si in switches {
            let hosts = &ctx.hosts
                [ctx.host_off[si as usize] as usize..ctx.host_off[si as usize + 1] as usize];
            if hosts.is_empty() {
                continue;
            }
            let sw = f.switches()[si as usize];
            let base = ctx.host_off[si as usize] as usize;
            // Router-to-router pairs are transit through this subnet, which the
            // inter-subnet check owns; every pair with a CA end is checked here.
            let skip = |k: usize| {
                hosts[k] == d
                    || (d_router && ctx.host_router[base + k])
                    || only.is_some_and(|r| ctx.host_router[base + k] != r)
            };
            let others = (0..hosts.len()).filter(|&k| !skip(k)).count() as u64;
            if others == 0 {
                continue;
            }
            let out = col[si as usize];
            let first = if out == NO_PATH || out == 0 || out > f.num_ports(sw) {
                Err(PairFault::NoRoute {
                    switch: f.desc(sw).to_string(),
                })
            } else if f.remote(f.slot(sw, out)) == NONE {
                Err(PairFault::DeadPort {
                    switch: f.desc(sw).to_string(),
                    port: out,
                })
            } else {
                Ok(f.slot(sw, out))
            };
            let o = match first {
                Ok(o) => o,
                Err(fault) => {
                    let src = (0..hosts.len())
                        .find(|&k| !skip(k))
                        .map_or(0, |k| f.lid_of_slot(hosts[k]));
                    record(st, src, dlid, others, fault);
                    continue;
                }
            };
            memo.clear();
            for k in 0..hosts.len() {
                if skip(k) {
                    continue;
                }
                let (slid, in_port, row) = ctx.host_info[base + k];
                let sl = if row == u32::MAX {
                    0
                } else {
                    sl_col.get(row as usize).copied().unwrap_or(SL_NONE)
                };
                if sl == SL_NONE || sl as usize >= NUM_SLS {
                    record(st, slid, dlid, 1, PairFault::NoSl);
                    continue;
                }
                st.sl_mask |= 1 << sl;
                let vo = match sl2vl {
                    Some(t) => t.switch_vl(si, in_port, out, sl),
                    None => 0,
                };
                // Hosts of one switch that share (SL, first VL) share the walk.
                let res = match memo.iter().find(|m| m.0 == sl && m.1 == vo) {
                    Some(m) => m.2.clone(),
                    None => {
                        let r = walk(ctx, st, tag, d, col, o, vo, sl);
                        memo.push((sl, vo, r.clone()));
                        r
                    }
                };
                let count = if uniform { others } else { 1 };
                match res {
                    Ok(hops) => st.max_hops = st.max_hops.max(hops),
                    Err(fault) => record(st, slid, dlid, count, fault),
                }
                if uniform {
                    break;
                }
            }
        }
    }
    // End ports linked straight to another end port (no switch between).
    for &h in &ctx.direct {
        if h != d && f.remote(h) != d {
            record(
                st,
                f.lid_of_slot(h),
                dlid,
                1,
                PairFault::Misdelivered {
                    at: f.desc(f.node_of(f.remote(h))).to_string(),
                },
            );
        }
    }
}

const NO_SUCC: u16 = u16::MAX;

/// Follows the route from channel `o` (entered on VL `vo`) with SL `sl`.
#[allow(clippy::too_many_arguments)]
fn walk(
    ctx: &Ctx,
    st: &mut Scratch,
    tag: u32,
    d: Slot,
    col: &[u8],
    o: Slot,
    vo: u8,
    sl: u8,
) -> Walk {
    let f = ctx.f;
    let sls = st.sls;
    let mut c = o;
    let mut vc = vo;
    let mut prev_key: Option<usize> = None;
    st.stack.clear();
    let res: Walk = loop {
        let r = f.remote(c);
        if r == d {
            break Ok(0);
        }
        let node = f.node_of(r);
        let Some(swi) = f.switch_index(node) else {
            break Err(PairFault::Misdelivered {
                at: f.desc(node).to_string(),
            });
        };
        let c_s2s = ctx.is_s2s[c as usize];
        if c_s2s {
            st.vl_mask |= 1 << vc.min(15);
            let key = c as usize * sls + if sls == 1 { 0 } else { sl as usize };
            if let Some(pk) = prev_key {
                st.succ[pk] = pack_succ(f.port_of(c), vc);
            }
            if st.stamp[key] == tag {
                // Known state: its continuation is done; only the edge out of
                // this (channel, VL) may be new.
                let s = st.succ[key];
                if s != NO_SUCC {
                    ctx.add_edge(c, (s >> 4) as u8, vc, (s & 15) as u8, st.local);
                }
                break match st.info[key] {
                    IN_PROGRESS | BROKEN_LOOP => Err(PairFault::Loop {
                        switch: f.desc(node).to_string(),
                    }),
                    BROKEN_ROUTE => Err(PairFault::NoRoute {
                        switch: f.desc(node).to_string(),
                    }),
                    h => Ok(h),
                };
            }
            st.stamp[key] = tag;
            st.info[key] = IN_PROGRESS;
            st.succ[key] = NO_SUCC;
            st.stack.push(key);
            prev_key = Some(key);
        } else {
            prev_key = None;
        }
        let inp = f.port_of(r);
        let out = col[swi as usize];
        if out == NO_PATH || out == 0 || out > f.num_ports(node) {
            break Err(PairFault::NoRoute {
                switch: f.desc(node).to_string(),
            });
        }
        let o2 = f.slot(node, out);
        if f.remote(o2) == NONE {
            break Err(PairFault::DeadPort {
                switch: f.desc(node).to_string(),
                port: out,
            });
        }
        let vo2 = ctx.r.switch_vl(swi, inp, out, sl);
        if c_s2s && ctx.is_s2s[o2 as usize] {
            ctx.add_edge(c, out, vc, vo2, st.local);
        }
        c = o2;
        vc = vo2;
    };
    match res {
        Ok(mut h) => {
            while let Some(k) = st.stack.pop() {
                h += 1;
                st.info[k] = h;
            }
            Ok(h)
        }
        Err(fault) => {
            let mark = if matches!(fault, PairFault::Loop { .. }) {
                BROKEN_LOOP
            } else {
                BROKEN_ROUTE
            };
            while let Some(k) = st.stack.pop() {
                st.info[k] = mark;
            }
            Err(fault)
        }
    }
}

#[inline]
fn pack_succ(out_port: u8, vl: u8) -> u16 {
    ((out_port as u16) << 4) | (vl as u16 & 15)
}

/// The CDG of an edge bitset in CSR form: (start, targets, edges,
/// vertices with an edge).
fn csr(ctx: &Ctx, words: &[AtomicU64]) -> (Vec<u32>, Vec<u32>, u64, u64) {
    csr_of(ctx.f, ctx.max_ports, ctx.vls, words)
}

/// [`csr`] for an edge bitset laid out as [`Ctx::edge_bit`] lays it out
/// with `max_ports` and `vls`.
pub(crate) fn csr_of(
    f: &Fabric,
    max_ports: usize,
    v: usize,
    words: &[AtomicU64],
) -> (Vec<u32>, Vec<u32>, u64, u64) {
    let n_vert = f.num_slots() * v;
    // Two passes over the bits: count, then fill.
    let mut deg = vec![0u32; n_vert + 1];
    let decode = |bit: usize| {
        let vo = bit % v;
        let rest = bit / v;
        let vc = rest % v;
        let rest = rest / v;
        let out_port = (rest % max_ports) as u8;
        let c = (rest / max_ports) as Slot;
        let head = f.node_of(f.remote(c));
        let o = f.slot(head, out_port);
        (c as usize * v + vc, o as usize * v + vo)
    };
    let mut total = 0u64;
    for (wi, w) in words.iter().enumerate() {
        let mut x = w.load(Ordering::Relaxed);
        while x != 0 {
            let b = x.trailing_zeros() as usize;
            x &= x - 1;
            let (from, _) = decode(wi * 64 + b);
            deg[from + 1] += 1;
            total += 1;
        }
    }
    for i in 0..n_vert {
        deg[i + 1] += deg[i];
    }
    let mut fill = deg.clone();
    let mut adj = vec![0u32; total as usize];
    let mut has_vertex = vec![false; n_vert];
    for (wi, w) in words.iter().enumerate() {
        let mut x = w.load(Ordering::Relaxed);
        while x != 0 {
            let b = x.trailing_zeros() as usize;
            x &= x - 1;
            let (from, to) = decode(wi * 64 + b);
            adj[fill[from] as usize] = to as u32;
            fill[from] += 1;
            has_vertex[from] = true;
            has_vertex[to] = true;
        }
    }
    let vertices = has_vertex.iter().filter(|&&b| b).count() as u64;
    (deg, adj, total, vertices)
}

/// A cycle of a CDG in CSR form (vertex = slot * `v` + VL), if any.
pub(crate) fn cycle_in(v: usize, deg: &[u32], adj: &[u32]) -> Option<Vec<VirtualChannel>> {
    let n_vert = deg.len() - 1;

    // Iterative DFS with colours; a grey successor closes a cycle.
    let mut color = vec![0u8; n_vert];
    let mut stack: Vec<(u32, u32)> = Vec::new();
    for start in 0..n_vert {
        if color[start] != 0 || deg[start] == deg[start + 1] {
            continue;
        }
        color[start] = 1;
        stack.push((start as u32, deg[start]));
        while let Some(top) = stack.last_mut() {
            let u = top.0 as usize;
            if top.1 < deg[u + 1] {
                let w = adj[top.1 as usize] as usize;
                top.1 += 1;
                match color[w] {
                    0 => {
                        color[w] = 1;
                        stack.push((w as u32, deg[w]));
                    }
                    1 => {
                        let pos = stack.iter().position(|e| e.0 as usize == w).unwrap_or(0);
                        let cyc = stack[pos..]
                            .iter()
                            .map(|e| VirtualChannel {
                                slot: (e.0 as usize / v) as Slot,
                                vl: (e.0 as usize % v) as u8,
                            })
                            .collect();
                        return Some(cyc);
                    }
                    _ => {}
                }
            } else {
                color[u] = 2;
                stack.pop();
            }
        }
    }
    None
}
