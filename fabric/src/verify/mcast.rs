//! Multicast trees in the channel dependency graph, with the unicast
//! routes.
//!
//! A switch sends a multicast packet that came in on port `p` out of every
//! other port of the MLID's forwarding entry, each copy on the VL its
//! SL-to-VL table gives for `(p, out, group SL)`. A copy can only leave
//! when the buffer it goes to has room, so the channel it came in on
//! depends on every channel it goes out on: the dependencies are those of
//! the states `(channel into a switch, VL)` that a packet of some member
//! reaches. They join the unicast CDG of the same tables, and a cycle of
//! the union is a deadlock one broadcast can start; the cycle names the
//! groups whose dependencies it takes.
//!
//! Delivery is checked by flooding the forwarding entries from each
//! member switch: every member must get a copy, and no switch may get two
//! (two copies mean a cycle in the forwarding entries: packets that
//! circle for ever).

use super::{LocalCdg, Report, VirtualChannel, cycle_in, describe_channels, verify_with_cdg};
use crate::mcast::{Group, Mfts, Multicast, PortMask};
use crate::model::{Fabric, NONE, Slot};
use crate::tables::Routing;
use rayon::prelude::*;
use std::collections::HashSet;

/// Why a group's packets do not reach every member once.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum McastFault {
    /// A packet from `from` never reaches member `to`.
    Unreached { mlid: u16, from: String, to: String },
    /// A packet from `from` reaches `switch` twice: the entries hold a
    /// cycle, and copies circle for ever.
    Loop {
        mlid: u16,
        from: String,
        switch: String,
    },
    /// A member is not linked to a switch.
    Detached { mlid: u16, member: String },
    /// The forwarding tables hold an MLID no group names (its SL unknown).
    NoGroup { mlid: u16 },
    /// A switch's SL-to-VL table sends the group's copies out of `switch`
    /// on VL 15 (management only: the switch drops them) or on a VL the
    /// tables do not otherwise have.
    BadVl { mlid: u16, switch: String, vl: u8 },
}

/// What the multicast check found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct McastReport {
    pub groups: usize,
    pub memberships: u64,
    /// Forwarding entries over all MLIDs.
    pub mft_entries: u64,
    pub broken: u64,
    /// Up to 16 faults.
    pub faults: Vec<McastFault>,
    /// Dependencies multicast adds between switch-to-switch channels
    /// (before removing those unicast has too).
    pub dependencies: u64,
    /// Distinct VLs multicast uses on switch-to-switch channels.
    pub vls_used: u32,
    /// A cycle of unicast and multicast dependencies together.
    pub cycle: Option<Vec<VirtualChannel>>,
    /// The groups with a dependency on that cycle, by MLID.
    pub cycle_mlids: Vec<u16>,
}

impl McastReport {
    pub fn ok(&self) -> bool {
        self.broken == 0 && self.cycle.is_none()
    }

    /// The cycle as one line, as [`Report::describe_cycle`] writes one.
    pub fn describe_cycle(&self, f: &Fabric) -> Option<String> {
        Some(describe_channels(f, self.cycle.as_ref()?))
    }

    /// Why these trees refuse the tables they were checked with, if they
    /// do.
    pub fn refusal(&self) -> Option<String> {
        if self.broken > 0 {
            return Some(format!(
                "{} multicast deliveries broken (first: {:?})",
                self.broken,
                self.faults.first()
            ));
        }
        self.cycle.as_ref().map(|c| {
            format!(
                "unicast and multicast together close a cycle of {} channels (MLIDs {:04X?})",
                c.len(),
                self.cycle_mlids
            )
        })
    }
}

/// Why reserved trees would not be alone on their VL: a unicast route on
/// it (the guarantee for groups joined later rests on that).
pub fn reserved_vl_taken(unicast: &Report, mc: &Multicast) -> Option<String> {
    let plan = mc.plan.as_ref()?;
    (unicast.vls_used > 0 && unicast.max_vl >= plan.vl).then(|| {
        format!(
            "unicast routes use VL {}, and VL {} is reserved for multicast",
            unicast.max_vl, plan.vl
        )
    })
}

const MAX_FAULTS: usize = 16;

/// What one group's check found: its faults (the first few) and their
/// count, its dependencies (sorted) and the VLs its copies take.
struct GroupCheck {
    faults: Vec<McastFault>,
    broken: u64,
    edges: Vec<(u32, u32)>,
    vl_mask: u16,
}

/// Verifies the unicast tables of `routing` and the multicast trees of
/// `mc` together: the unicast report (its cycle: unicast alone) and the
/// multicast one (its cycle: unicast and multicast together).
pub fn verify_with_mcast(f: &Fabric, routing: &Routing, mc: &Multicast) -> (Report, McastReport) {
    let (report, cdg) = verify_with_cdg(f, routing);
    let m = check(f, routing, mc, &cdg);
    (report, m)
}

/// [`verify_with_mcast`] for an update from the trees `old` to `mc`, also
/// returning [`check_mixed`]'s cycle; the unicast routes are walked once.
pub fn verify_update(
    f: &Fabric,
    routing: &Routing,
    mc: &Multicast,
    old: &Multicast,
) -> (Report, McastReport, Option<Vec<VirtualChannel>>) {
    let (report, cdg) = verify_with_cdg(f, routing);
    let m = check(f, routing, mc, &cdg);
    let mixed = mixed_cycle(f, routing, &cdg, old, mc);
    (report, m, mixed)
}

/// A cycle that switches holding a mix of `old` and `new` multicast
/// entries could close during an update to `routing`'s tables (on `f`,
/// the fabric as it is): each switch may forward by either entry, so a
/// copy may enter by any port of the two and leave by any other.
pub fn check_mixed(
    f: &Fabric,
    routing: &Routing,
    old: &Multicast,
    new: &Multicast,
) -> Option<Vec<VirtualChannel>> {
    let (_, cdg) = verify_with_cdg(f, routing);
    mixed_cycle(f, routing, &cdg, old, new)
}

/// [`check_mixed`] against `routing`'s unicast CDG.
fn mixed_cycle(
    f: &Fabric,
    routing: &Routing,
    cdg: &LocalCdg,
    old: &Multicast,
    new: &Multicast,
) -> Option<Vec<VirtualChannel>> {
    let mut mixed = new.clone();
    for (&mlid, entries) in &old.mfts.entries {
        for &(sw, m) in entries {
            let mut u = mixed.mfts.ports(mlid, sw).copied().unwrap_or_default();
            for w in 0..4 {
                u.0[w] |= m.0[w];
            }
            mixed.mfts.set(mlid, sw, u);
        }
    }
    for g in &old.groups {
        match mixed.groups.iter_mut().find(|x| x.mlid == g.mlid) {
            Some(x) => {
                x.members.extend_from_slice(&g.members);
                x.members.sort_unstable();
                x.members.dedup();
            }
            None => mixed.groups.push(g.clone()),
        }
    }
    check(f, routing, &mixed, cdg).cycle
}

/// The multicast check against a unicast CDG of `routing`.
pub fn check(f: &Fabric, routing: &Routing, mc: &Multicast, cdg: &LocalCdg) -> McastReport {
    let vls = cdg.vls;
    let per_group: Vec<GroupCheck> = mc
        .groups
        .iter()
        .map(|g| {
            let masks = dense(f, &mc.mfts, g.mlid);
            let (mut faults, mut broken) = delivery(f, &masks, g);
            let (edges, vl_mask, vl_faults) = dependencies(f, routing, &masks, g, vls);
            broken += vl_faults.len() as u64;
            faults.extend(vl_faults);
            GroupCheck {
                faults,
                broken,
                edges,
                vl_mask,
            }
        })
        .collect();
    let mut faults = Vec::new();
    let mut broken = 0u64;
    let mut all: Vec<(u32, u32)> = Vec::new();
    let mut vl_mask = 0u16;
    for c in &per_group {
        broken += c.broken;
        for x in &c.faults {
            if faults.len() < MAX_FAULTS {
                faults.push(x.clone());
            }
        }
        all.extend_from_slice(&c.edges);
        vl_mask |= c.vl_mask;
    }
    let named: HashSet<u16> = mc.groups.iter().map(|g| g.mlid).collect();
    for &mlid in mc.mfts.entries.keys() {
        if !named.contains(&mlid) {
            broken += 1;
            if faults.len() < MAX_FAULTS {
                faults.push(McastFault::NoGroup { mlid });
            }
        }
    }
    all.sort_unstable();
    all.dedup();
    let dependencies = all.len() as u64;
    let (start, adj) = union(cdg, &all);
    let cycle = cycle_in(vls, &start, &adj);
    let cycle_mlids = cycle
        .as_ref()
        .map(|c| groups_on(c, vls, &mc.groups, &per_group))
        .unwrap_or_default();
    McastReport {
        groups: mc.groups.len(),
        memberships: mc.memberships() as u64,
        mft_entries: mc.mfts.len() as u64,
        broken,
        faults,
        dependencies,
        vls_used: vl_mask.count_ones(),
        cycle,
        cycle_mlids,
    }
}

/// The unicast CDG with `extra` edges (sorted) added, in CSR form.
fn union(cdg: &LocalCdg, extra: &[(u32, u32)]) -> (Vec<u32>, Vec<u32>) {
    let n = cdg.start.len() - 1;
    let mut start = Vec::with_capacity(n + 1);
    let mut adj = Vec::with_capacity(cdg.adj.len() + extra.len());
    start.push(0u32);
    let mut k = 0;
    for v in 0..n {
        let from = cdg.start[v] as usize;
        let to = cdg.start[v + 1] as usize;
        adj.extend_from_slice(&cdg.adj[from..to]);
        while k < extra.len() && extra[k].0 as usize == v {
            adj.push(extra[k].1);
            k += 1;
        }
        start.push(adj.len() as u32);
    }
    (start, adj)
}

/// MLIDs of the groups that have a dependency of `cycle`.
fn groups_on(
    cycle: &[VirtualChannel],
    vls: usize,
    groups: &[Group],
    per_group: &[GroupCheck],
) -> Vec<u16> {
    let v = |c: &VirtualChannel| c.slot * vls as u32 + c.vl as u32;
    let steps: Vec<(u32, u32)> = (0..cycle.len())
        .map(|i| (v(&cycle[i]), v(&cycle[(i + 1) % cycle.len()])))
        .collect();
    let mut out: Vec<u16> = groups
        .iter()
        .zip(per_group)
        .filter(|(_, c)| steps.iter().any(|s| c.edges.binary_search(s).is_ok()))
        .map(|(g, _)| g.mlid)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Member attachments `(switch index, switch port, member)`, and the
/// members that have none as faults.
fn attachments(f: &Fabric, g: &Group) -> (Vec<(u32, u8, Slot)>, Vec<McastFault>) {
    let mut at = Vec::with_capacity(g.members.len());
    let mut faults = Vec::new();
    for &m in &g.members {
        let r = f.remote(m);
        match (r != NONE).then(|| f.switch_index(f.node_of(r))).flatten() {
            Some(sw) => at.push((sw, f.port_of(r), m)),
            None => faults.push(McastFault::Detached {
                mlid: g.mlid,
                member: f.desc(f.node_of(m)).to_string(),
            }),
        }
    }
    at.sort_unstable();
    (at, faults)
}

/// One group's entries by switch index (an empty mask: no entry), so a
/// flood reads an array, not a search.
fn dense(f: &Fabric, mfts: &Mfts, mlid: u16) -> Vec<PortMask> {
    let mut v = vec![PortMask::default(); f.switches().len()];
    for &(sw, m) in mfts.entries.get(&mlid).map(Vec::as_slice).unwrap_or(&[]) {
        if let Some(x) = v.get_mut(sw as usize) {
            *x = m;
        }
    }
    v
}

/// Floods the group's entries once per member switch (a member's copies
/// depend only on where it enters): faults and their count.
fn delivery(f: &Fabric, masks: &[PortMask], g: &Group) -> (Vec<McastFault>, u64) {
    let (at, mut faults) = attachments(f, g);
    let mut broken = faults.len() as u64;
    let mut firsts: Vec<usize> = Vec::new();
    for i in 0..at.len() {
        if i == 0 || at[i].0 != at[i - 1].0 {
            firsts.push(i);
        }
    }
    let n_sw = f.switches().len();
    let found: Vec<(Vec<McastFault>, u64)> = firsts
        .par_iter()
        .map_init(
            || (vec![0u32; n_sw], vec![0u32; f.num_slots()], 0u32),
            |(seen, got, stamp), &i| {
                *stamp += 1;
                flood(f, masks, g, &at, i, seen, got, *stamp)
            },
        )
        .collect();
    for (fs, b) in found {
        broken += b;
        for x in fs {
            if faults.len() < MAX_FAULTS {
                faults.push(x);
            }
        }
    }
    (faults, broken)
}

/// One flood from the member `at[i]`; `seen` (per switch) and `got` (per
/// slot) are marked with `stamp`.
#[allow(clippy::too_many_arguments)]
fn flood(
    f: &Fabric,
    masks: &[PortMask],
    g: &Group,
    at: &[(u32, u8, Slot)],
    i: usize,
    seen: &mut [u32],
    got: &mut [u32],
    stamp: u32,
) -> (Vec<McastFault>, u64) {
    let (x0, p0, src) = at[i];
    let name = |s: Slot| f.desc(f.node_of(s)).to_string();
    let mut faults = Vec::new();
    let mut broken = 0u64;
    let mut queue = vec![(x0, p0)];
    seen[x0 as usize] = stamp;
    let mut head = 0;
    while head < queue.len() {
        let (y, p) = queue[head];
        head += 1;
        let mask = &masks[y as usize];
        let node = f.switches()[y as usize];
        for q in mask.iter().filter(|&q| q != p && q <= f.num_ports(node)) {
            let r = f.remote(f.slot(node, q));
            if r == NONE {
                continue;
            }
            match f.switch_index(f.node_of(r)) {
                Some(z) if seen[z as usize] == stamp => {
                    broken += 1;
                    faults.push(McastFault::Loop {
                        mlid: g.mlid,
                        from: name(src),
                        switch: f.desc(f.switches()[z as usize]).to_string(),
                    });
                    return (faults, broken);
                }
                Some(z) => {
                    seen[z as usize] = stamp;
                    queue.push((z, f.port_of(r)));
                }
                None => got[r as usize] = stamp,
            }
        }
    }
    // The first member's switch-mates get theirs from its entry; the first
    // member gets theirs only if the entry holds its own port too.
    let mate = at.iter().find(|a| a.0 == x0 && a.2 != src).map(|a| a.2);
    let x0_mask = &masks[x0 as usize];
    for &(_, port, m) in at {
        // The first member hears its switch-mates only through its own
        // port in the entry.
        let (ok, from) = if m == src {
            (
                mate.is_none() || x0_mask.contains(port),
                mate.unwrap_or(src),
            )
        } else {
            (got[m as usize] == stamp, src)
        };
        if !ok {
            broken += 1;
            if faults.len() < MAX_FAULTS {
                faults.push(McastFault::Unreached {
                    mlid: g.mlid,
                    from: name(from),
                    to: name(m),
                });
            }
        }
    }
    (faults, broken)
}

/// The group's dependencies between switch-to-switch virtual channels
/// (vertex `slot * vls + VL`, sorted), the VLs its copies take on them,
/// and the hops that drop copies: a search over the states `(channel into
/// a switch, VL)` reached from every port that can inject into the group.
/// Any end port may send to an MLID, member or not, and a switch forwards
/// it by the entry whatever port it came in on, so every non-switch port
/// of a switch with an entry is a source, not only the members'.
fn dependencies(
    f: &Fabric,
    routing: &Routing,
    masks: &[PortMask],
    g: &Group,
    vls: usize,
) -> (Vec<(u32, u32)>, u16, Vec<McastFault>) {
    let mut seen = vec![0u16; f.num_slots()];
    let mut edges = Vec::new();
    let mut faults = Vec::new();
    let mut vl_mask = 0u16;
    // A state: the slot a copy leaves a switch by (NONE for an injection),
    // its VL, the switch it enters and the port it enters on.
    let mut stack: Vec<(Slot, u8, u32, u8)> = Vec::new();
    for (y, m) in masks.iter().enumerate() {
        if m.is_empty() {
            continue;
        }
        let node = f.switches()[y];
        for p in 0..=f.num_ports(node) {
            let r = f.remote(f.slot(node, p));
            if p == 0 || r == NONE || f.switch_index(f.node_of(r)).is_none() {
                stack.push((NONE, 0, y as u32, p));
            }
        }
    }
    while let Some((c, vc, y, p)) = stack.pop() {
        let mask = &masks[y as usize];
        let node = f.switches()[y as usize];
        for q in mask.iter().filter(|&q| q != p && q <= f.num_ports(node)) {
            let o = f.slot(node, q);
            let r = f.remote(o);
            if r == NONE {
                continue;
            }
            let Some(z) = f.switch_index(f.node_of(r)) else {
                continue;
            };
            let vo = routing.switch_vl(y, p, q, g.sl);
            if vo == 15 || vo as usize >= vls {
                if faults.len() < MAX_FAULTS {
                    faults.push(McastFault::BadVl {
                        mlid: g.mlid,
                        switch: f.desc(node).to_string(),
                        vl: vo,
                    });
                }
                continue;
            }
            vl_mask |= 1 << vo;
            if c != NONE {
                edges.push((c * vls as u32 + vc as u32, o * vls as u32 + vo as u32));
            }
            if seen[o as usize] & (1 << vo) == 0 {
                seen[o as usize] |= 1 << vo;
                stack.push((o, vo, z, f.port_of(r)));
            }
        }
    }
    edges.sort_unstable();
    edges.dedup();
    (edges, vl_mask, faults)
}
