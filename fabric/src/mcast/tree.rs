//! Multicast trees that cannot close a cycle, and OpenSM's kind for
//! comparison.
//!
//! Every group's tree is the part of one fabric-wide spanning tree that
//! joins its members' switches. A packet on a tree never turns back, so
//! its dependencies follow paths of that one tree: on a VL that only
//! multicast uses, the dependencies of all groups together are acyclic
//! (a non-backtracking walk on a tree never comes back). Trees of
//! different spanning trees on one VL could close a cycle between them,
//! which is why all groups share one.
//!
//! [`TreeMode::Reserved`] puts every group on an SL and a VL no unicast
//! route uses (the engines route with one VL and one SL fewer), which
//! makes the guarantee hold whatever the engine. [`TreeMode::Shared`]
//! keeps each group's own SL, on the unicast VLs: the verifier then
//! decides, and a cycle refuses the tables. [`TreeMode::MinHop`] builds
//! trees as OpenSM's default multicast manager does (a root with the
//! fewest hops to the members, shortest paths from it, per group and
//! without regard to the unicast layers), to show what that costs.

use super::{Group, Mfts, PortMask, TreePlan};
use crate::error::{Error, Result};
use crate::graph::SwitchGraph;
use crate::model::{Fabric, NONE, Slot};
use crate::tables::{NUM_SLS, Routing, Sl2Vl};

/// How a group's tree is chosen and which SL it travels on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum TreeMode {
    /// One spanning tree, an SL and a VL reserved for multicast.
    Reserved,
    /// One spanning tree, each group's own SL, verified with unicast.
    Shared,
    /// OpenSM's default: a min-hop tree per group on its own SL.
    MinHop,
}

/// A BFS spanning tree of the switches: per switch index its parent
/// (`NONE`: the root or unreached) and the parent's slot down to it, and
/// the switches in BFS order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanningTree {
    pub root: u32,
    pub parent: Vec<u32>,
    pub down: Vec<Slot>,
    pub order: Vec<u32>,
}

impl SpanningTree {
    /// BFS from `root`, neighbours in port order.
    pub fn bfs(g: &SwitchGraph, root: u32) -> Self {
        let n = g.len();
        let mut parent = vec![NONE; n];
        let mut down = vec![NONE; n];
        let mut seen = vec![false; n];
        let mut order = Vec::with_capacity(n);
        if (root as usize) < n {
            seen[root as usize] = true;
            order.push(root);
        }
        let mut head = 0;
        while head < order.len() {
            let x = order[head];
            head += 1;
            for &(y, s) in g.neighbours(x) {
                if !seen[y as usize] {
                    seen[y as usize] = true;
                    parent[y as usize] = x;
                    down[y as usize] = s;
                    order.push(y);
                }
            }
        }
        Self {
            root,
            parent,
            down,
            order,
        }
    }

    pub fn reaches(&self, sw: u32) -> bool {
        sw == self.root || self.parent[sw as usize] != NONE
    }
}

/// A central switch: the middle of a longest BFS path found by two sweeps
/// (exact on trees, close on the regular topologies a fabric has), so that
/// the trees are shallow.
pub fn center(g: &SwitchGraph) -> u32 {
    if g.is_empty() {
        return 0;
    }
    let far = |src: u32| {
        let t = SpanningTree::bfs(g, src);
        (t.order.last().copied().unwrap_or(src), t)
    };
    let (a, _) = far(0);
    let (b, t) = far(a);
    let mut path = vec![b];
    let mut v = b;
    while t.parent[v as usize] != NONE {
        v = t.parent[v as usize];
        path.push(v);
    }
    path[path.len() / 2]
}

/// Where a member end port is attached: its switch index and the switch
/// port.
fn attachment(f: &Fabric, m: Slot) -> Result<(u32, u8)> {
    let r = f.remote(m);
    let sw = (r != NONE)
        .then(|| f.switch_index(f.node_of(r)))
        .flatten()
        .ok_or_else(|| {
            Error::Invalid(format!(
                "multicast member '{}' port {} is not linked to a switch",
                f.desc(f.node_of(m)),
                f.port_of(m)
            ))
        })?;
    Ok((sw, f.port_of(r)))
}

/// The part of `t` that joins the switches of `members`, with the member
/// ports: per switch index, the ports the group's packets leave by.
pub fn group_tree(f: &Fabric, t: &SpanningTree, mlid: u16, members: &[Slot]) -> Result<Mfts> {
    let n = t.parent.len();
    let mut mask = vec![PortMask::default(); n];
    let mut count = vec![0u32; n];
    let mut total = 0u32;
    for &m in members {
        let (sw, port) = attachment(f, m)?;
        if !t.reaches(sw) {
            return Err(Error::Invalid(format!(
                "multicast group 0x{mlid:04X}: member '{}' is on a switch the others cannot reach",
                f.desc(f.node_of(m))
            )));
        }
        if mask[sw as usize].is_empty() {
            count[sw as usize] = 1;
            total += 1;
        }
        mask[sw as usize].insert(port);
    }
    // Children before parents: count[v] becomes the member switches below v.
    for &v in t.order.iter().rev() {
        let p = t.parent[v as usize];
        if p == NONE {
            continue;
        }
        let c = count[v as usize];
        // The link to the parent carries the group when members are on
        // both sides of it.
        if c > 0 && c < total {
            let s = t.down[v as usize];
            let back = f.remote(s);
            mask[v as usize].insert(f.port_of(back));
            mask[p as usize].insert(f.port_of(s));
        }
        count[p as usize] += c;
    }
    let mut out = Mfts::default();
    for (sw, m) in mask.into_iter().enumerate() {
        if !m.is_empty() {
            out.set(mlid, sw as u32, m);
        }
    }
    Ok(out)
}

/// OpenSM's root choice: the switch with the fewest hops summed over the
/// member ports (first by index on a tie).
pub fn min_hop_root(f: &Fabric, g: &SwitchGraph, members: &[Slot]) -> Result<u32> {
    let n = g.len();
    let mut per_switch = vec![0u64; n];
    for &m in members {
        per_switch[attachment(f, m)?.0 as usize] += 1;
    }
    let mut sum = vec![0u64; n];
    let mut dist = vec![0u8; n];
    let mut queue = Vec::new();
    for (s, &k) in per_switch.iter().enumerate() {
        if k == 0 {
            continue;
        }
        g.bfs_into(s as u32, &mut dist, &mut queue);
        for (x, &d) in dist.iter().enumerate() {
            sum[x] += k * d as u64;
        }
    }
    Ok((0..n).min_by_key(|&x| (sum[x], x)).map_or(0, |x| x as u32))
}

/// The trees of `groups` by `mode`. For [`TreeMode::Reserved`], every
/// group is moved to `reserved.0` (an SL), that SL is sent to VL
/// `reserved.1` on every port of `routing`'s SL-to-VL tables, and the
/// plan is returned with the trees.
pub fn build(
    f: &Fabric,
    routing: &mut Routing,
    groups: &mut [Group],
    mode: TreeMode,
    reserved: Option<(u8, u8)>,
) -> Result<(Mfts, Option<TreePlan>)> {
    let g = SwitchGraph::new(f);
    let mut out = Mfts::default();
    let mut shared = None;
    match mode {
        TreeMode::Reserved | TreeMode::Shared => {
            let t = SpanningTree::bfs(&g, center(&g));
            for gr in groups.iter() {
                merge(&mut out, group_tree(f, &t, gr.mlid, &gr.members)?);
            }
            shared = Some(t);
        }
        TreeMode::MinHop => {
            for gr in groups.iter() {
                let t = SpanningTree::bfs(&g, min_hop_root(f, &g, &gr.members)?);
                merge(&mut out, group_tree(f, &t, gr.mlid, &gr.members)?);
            }
        }
    }
    let mut plan = None;
    if mode == TreeMode::Reserved {
        let (sl, vl) = reserved.ok_or_else(|| {
            Error::Invalid("reserved multicast trees need an SL and a VL to reserve".into())
        })?;
        reserve(f, routing, sl, vl)?;
        for gr in groups.iter_mut() {
            gr.sl = sl;
        }
        plan = shared.map(|tree| TreePlan { tree, sl, vl });
    }
    Ok((out, plan))
}

/// Trees for `groups` on `f`, the fabric after a fault, from the plan's
/// spanning tree with its failed links replaced: the tree's links that
/// remain are kept and each part cut off is attached again by one link.
/// The old and the new tree together then hold no cycle among the links
/// that remain, so switches that hold a mix of old and new entries during
/// the update cannot close one either ([`crate::verify::mcast::check_mixed`]
/// checks it). The plan's SL and VL stay (the tables keep reserving them).
/// Members whose link is gone leave their groups; groups left without
/// members are dropped.
pub fn rebuild(
    f: &Fabric,
    old: &TreePlan,
    groups: &[Group],
) -> Result<(Vec<Group>, Mfts, TreePlan)> {
    let g = SwitchGraph::new(f);
    let t = repaired(f, &g, &old.tree);
    let mut kept = Vec::with_capacity(groups.len());
    let mut out = Mfts::default();
    for gr in groups {
        let members: Vec<Slot> = gr
            .members
            .iter()
            .copied()
            .filter(|&m| {
                let r = f.remote(m);
                r != NONE && f.switch_index(f.node_of(r)).is_some_and(|sw| t.reaches(sw))
            })
            .collect();
        if members.is_empty() {
            continue;
        }
        merge(&mut out, group_tree(f, &t, gr.mlid, &members)?);
        kept.push(Group {
            mlid: gr.mlid,
            sl: old.sl,
            members,
        });
    }
    let plan = TreePlan {
        tree: t,
        sl: old.sl,
        vl: old.vl,
    };
    Ok((kept, out, plan))
}

/// `old` on the switch graph `g` of the fabric after a fault: a search
/// from the root that takes the old tree's remaining links first (at no
/// cost) and any other link at cost 1, settling each switch once, so a
/// part cut off is entered by one link and then walked along its own.
fn repaired(f: &Fabric, g: &SwitchGraph, old: &SpanningTree) -> SpanningTree {
    let n = g.len();
    let is_tree_link = |x: u32, y: u32, s: Slot| {
        (old.parent.get(y as usize) == Some(&x) && old.down[y as usize] == s)
            || (old.parent.get(x as usize) == Some(&y) && f.remote(old.down[x as usize]) == s)
    };
    let mut parent = vec![NONE; n];
    let mut down = vec![NONE; n];
    let mut dist = vec![u32::MAX; n];
    let mut settled = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut dq = std::collections::VecDeque::new();
    // A failed root is left alone in the graph: start from the first
    // switch of the old order that still has a link, so the root's parts
    // are each attached once.
    let linked = |x: u32| (x as usize) < n && !g.neighbours(x).is_empty();
    let root = std::iter::once(old.root)
        .chain(old.order.iter().copied())
        .find(|&x| linked(x))
        .unwrap_or_else(|| center(g));
    if n > 0 {
        dist[root as usize] = 0;
        dq.push_back(root);
    }
    while let Some(x) = dq.pop_front() {
        if settled[x as usize] {
            continue;
        }
        settled[x as usize] = true;
        order.push(x);
        let dx = dist[x as usize];
        for &(y, s) in g.neighbours(x) {
            if settled[y as usize] {
                continue;
            }
            let free = is_tree_link(x, y, s);
            let d = dx + u32::from(!free);
            // A tree link wins a tie: the part it leads into is walked
            // along its own links.
            if d < dist[y as usize] || (free && d == dist[y as usize]) {
                dist[y as usize] = d;
                parent[y as usize] = x;
                down[y as usize] = s;
                if free {
                    dq.push_front(y);
                } else {
                    dq.push_back(y);
                }
            }
        }
    }
    SpanningTree {
        root,
        parent,
        down,
        order,
    }
}

fn merge(into: &mut Mfts, from: Mfts) {
    for (mlid, e) in from.entries {
        into.entries.insert(mlid, e);
    }
}

/// Sends `sl` to `vl` on every switch port pair and end port, after
/// checking that no unicast route uses `sl` (the path SLs).
pub fn reserve(f: &Fabric, routing: &mut Routing, sl: u8, vl: u8) -> Result<()> {
    if sl as usize >= NUM_SLS || vl > 14 {
        return Err(Error::Invalid(format!(
            "cannot reserve SL {sl} and VL {vl} for multicast (SL 0-15, data VL 0-14)"
        )));
    }
    if let Some(p) = &routing.path_sl {
        if p.sls_used()[sl as usize] {
            return Err(Error::Invalid(format!(
                "SL {sl} is used by unicast routes: it cannot be reserved for multicast"
            )));
        }
    }
    let t = routing.sl2vl.get_or_insert_with(|| Sl2Vl::new(f));
    for (si, &sw) in f.switches().iter().enumerate() {
        let np = f.num_ports(sw);
        for o in 0..=np {
            for i in 0..=np {
                let mut row = t.switch_row(si as u32, i, o);
                row[sl as usize] = vl;
                t.set_switch_row(si as u32, i, o, row);
            }
        }
    }
    for &e in f.endports() {
        let mut row = t.port_row(e);
        row[sl as usize] = vl;
        t.set_port_row(e, row);
    }
    Ok(())
}
