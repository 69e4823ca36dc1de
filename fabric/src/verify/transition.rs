//! The deadlock check of a table update in progress.
//!
//! Switches take new tables one by one and in no particular order, and
//! hosts keep the path SLs they cached until they ask again. While an
//! update from `old` to `new` is applied, every switch may forward toward a
//! destination with its old or its new LFT entry and pick a VL with its old
//! or its new SL-to-VL row, and every source may still send with its old or
//! its new SL, in any combination and changing over time. The check walks
//! every route any such mix allows, on the fabric as it is now (a failed
//! link carries nothing, so entries that point at it end the walk), and
//! collects the channel dependency graph of all of them together: the
//! update is deadlock free when that graph is acyclic. Comparing the old
//! and the new graphs side by side is not enough: a packet routed by an
//! old entry and then a new one adds dependencies neither graph has.
//!
//! Walks toward one destination read only that destination's entries, so
//! the mixes of different destinations are independent and the union is
//! taken destination by destination.

use super::transition_alike::Counts;
use super::{
    VirtualChannel, csr_of, cycle_in, edge_bit, set_bit, switch_hosts, switch_link_flags,
    widest_switch,
};
use crate::model::{Fabric, NONE, NodeKind, Slot};
use crate::tables::{NO_PATH, NUM_SLS, Routing, SL_NONE};
use rayon::prelude::*;
use std::sync::atomic::AtomicU64;

/// What a transition check found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TransitionReport {
    /// Destinations whose LFT entries or path SLs differ between the two
    /// routings.
    pub destinations_changed: u64,
    /// LFT entries (switch, destination LID of an end port) that differ.
    pub entries_changed: u64,
    /// (source, destination) pairs whose path SL differs.
    pub sls_changed: u64,
    /// Switch SL-to-VL rows (switch, in port, out port) that differ.
    pub sl2vl_rows_changed: u64,
    /// Distinct (channel, VL, SL) states the mixed walks reached, per
    /// destination walked; a destination walked as its switch's first alike
    /// host counts that host's (the pair between the two may add a few).
    pub states: u64,
    pub cdg_vertices: u64,
    pub cdg_edges: u64,
    /// A dependency cycle some mix of old and new tables allows. Slots
    /// mean nothing outside the process: reports name the channels with
    /// [`super::channel_ref`].
    #[serde(skip)]
    pub cycle: Option<Vec<VirtualChannel>>,
}

impl TransitionReport {
    pub fn deadlock_free(&self) -> bool {
        self.cycle.is_none()
    }
    /// Human-readable cycle, as [`super::Report::describe_cycle`].
    pub fn describe_cycle(&self, f: &Fabric) -> Option<String> {
        Some(super::describe_channels(f, self.cycle.as_ref()?))
    }
}

/// The mixed walks of an update from `old` to `new` on `f`, destination
/// by destination.
pub(crate) struct Mix<'a> {
    f: &'a Fabric,
    old: &'a Routing,
    new: &'a Routing,
    is_s2s: Vec<bool>,
    vls: usize,
    hosts: Vec<Slot>,
    /// The two sides map SLs to VLs the same everywhere: a walk that meets
    /// no changed entry and keeps its SL is a walk of the old side.
    sl2vl_same: bool,
    /// Sources by the switch they hang off (switch index).
    hosts_at: Vec<Vec<Slot>>,
    /// Per destination LID, the sources whose path SL toward it changes.
    sl_changed_to: Vec<Vec<Slot>>,
    /// Per host slot: the first host of its switch that both sides treat
    /// alike (the same path-SL rows, kind, and SL-to-VL rows of its in
    /// port): their walks are the same, so they start from its state.
    alike: Vec<Slot>,
    /// The switch links, searched backwards from changed entries.
    graph: crate::graph::SwitchGraph,
}

/// The switches whose entry toward a destination may differ between the
/// two sides of an update: found by comparing the LFT columns, or given by
/// a caller that knows which entries it set.
#[derive(Clone, Copy)]
pub(crate) enum Changed<'c> {
    Compare,
    /// Every switch index whose entry differs (more is harmless).
    Given(&'c [u32]),
}

/// Per-thread scratch of [`Mix::walks_to`] and what it counted.
#[derive(Default)]
pub(crate) struct MixScratch {
    stamp: Vec<u32>,
    tag: u32,
    /// Per representative host ([`Mix::alike`]), toward the destination
    /// of tag `.0`: its old and new SL.
    sls: Vec<(u32, u8, u8)>,
    stack: Vec<(Slot, u8, u8)>,
    /// Per switch: its route toward the destination may meet a changed
    /// entry (see [`Mix::walks_through`]), and the queue of the
    /// search that finds them.
    relevant: Vec<bool>,
    queue: Vec<u32>,
    sources: Vec<Slot>,
    pub states: u64,
    pub dests_changed: u64,
    pub entries_changed: u64,
    pub sls_changed: u64,
}

impl<'a> Mix<'a> {
    /// `vls`: the VLs a dependency may name (above: VL 15 or unused, no
    /// buffer held).
    pub(crate) fn new(f: &'a Fabric, old: &'a Routing, new: &'a Routing, vls: usize) -> Self {
        let hosts = switch_hosts(f);
        let mut hosts_at = vec![Vec::new(); f.switches().len()];
        for &h in &hosts {
            if let Some(si) = f.switch_index(f.node_of(f.remote(h))) {
                hosts_at[si as usize].push(h);
            }
        }
        let sl_changed_to = sl_changed_to(f, old, new, &hosts);
        let sl2vl_same = old.sl2vl == new.sl2vl;
        let alike = alike_hosts(f, old, new, sl2vl_same, &hosts_at);
        Self {
            f,
            old,
            new,
            alike,
            graph: crate::graph::SwitchGraph::new(f),
            is_s2s: switch_link_flags(f),
            vls,
            hosts,
            sl2vl_same,
            hosts_at,
            sl_changed_to,
        }
    }

    pub(crate) fn scratch(&self) -> MixScratch {
        MixScratch {
            stamp: vec![0; self.f.num_slots() * self.vls * NUM_SLS],
            sls: vec![(0, 0, 0); self.f.num_slots()],
            ..MixScratch::default()
        }
    }

    /// Every mixed walk from every source toward LID `d.1` of port `d.0`;
    /// calls `on_edge(c, vc, o, vo)` for each switch-to-switch dependency
    /// (`c` on VL `vc` into `o` on VL `vo`), more than once for some.
    pub(crate) fn walks_to(
        &self,
        st: &mut MixScratch,
        d: (Slot, u16),
        on_edge: &mut dyn FnMut(Slot, u8, Slot, u8),
    ) {
        self.walks(st, d, None, on_edge);
    }

    /// The mixed walks toward `d` that differ from the old side's: those
    /// from a source whose SL changes, or that may meet a switch whose
    /// entry changes (`changed` finds those switches or names them). The
    /// others are walks of the old tables, whose dependencies a caller
    /// holding the old graph has already. All walks when the SL-to-VL
    /// tables change.
    pub(crate) fn walks_through(
        &self,
        st: &mut MixScratch,
        d: (Slot, u16),
        changed: Changed,
        on_edge: &mut dyn FnMut(Slot, u8, Slot, u8),
    ) {
        let only = self.sl2vl_same.then_some(changed);
        self.walks(st, d, only, on_edge);
    }

    /// Marks in `st.relevant` the switches whose old or new entry toward
    /// `dlid` leads, in any number of hops, to a switch whose entry
    /// changes (`st.queue` holds those on entry): a search backwards from
    /// them over the links whose far end forwards into them, so the cost
    /// is that of the switches found, not of the fabric.
    fn mark_relevant(&self, st: &mut MixScratch, dlid: u16) {
        st.relevant.clear();
        st.relevant.resize(self.f.switches().len(), false);
        for &si in &st.queue {
            st.relevant[si as usize] = true;
        }
        while let Some(t) = st.queue.pop() {
            for &(p, out) in self.graph.neighbours(t) {
                if st.relevant[p as usize] {
                    continue;
                }
                // The neighbour's port back toward `t`.
                let port = self.f.port_of(self.f.remote(out));
                if self.old.lfts.get(p, dlid) == port || self.new.lfts.get(p, dlid) == port {
                    st.relevant[p as usize] = true;
                    st.queue.push(p);
                }
            }
        }
    }

    /// `only`: walk only from the sources whose walks may differ from the
    /// old side's, the switches whose entry changes found as it says.
    fn walks(
        &self,
        st: &mut MixScratch,
        (d, dlid): (Slot, u16),
        only: Option<Changed>,
        on_edge: &mut dyn FnMut(Slot, u8, Slot, u8),
    ) {
        let f = self.f;
        let d_router = f.kind(f.node_of(d)) == NodeKind::Router;
        let sides = [self.old, self.new];
        st.queue.clear();
        match only {
            Some(Changed::Given(sws)) => st.queue.extend(
                sws.iter()
                    .copied()
                    .filter(|&si| self.old.lfts.get(si, dlid) != self.new.lfts.get(si, dlid)),
            ),
            _ => st.queue.extend(
                (0..f.switches().len() as u32)
                    .filter(|&si| self.old.lfts.get(si, dlid) != self.new.lfts.get(si, dlid)),
            ),
        }
        let entries = st.queue.len() as u64;
        st.entries_changed += entries;
        let only_changes = only.is_some();
        let mut sls_changed = 0u64;
        // A fresh tag per destination: walks toward `d` share their states.
        if st.tag == u32::MAX {
            st.stamp.fill(0);
            st.sls.fill((0, 0, 0));
            st.tag = 0;
        }
        st.tag += 1;
        let tag = st.tag;
        if only_changes {
            self.mark_relevant(st, dlid);
        }
        let vls = self.vls;
        let key =
            |c: Slot, vl: u8, sl: u8| (c as usize * vls + vl as usize) * NUM_SLS + sl as usize;
        // The sources to walk from: every one, or those whose walks may
        // differ from the old side's (see `walks_through`).
        let mut sources = std::mem::take(&mut st.sources);
        sources.clear();
        if only_changes {
            for (si, at) in self.hosts_at.iter().enumerate() {
                if st.relevant[si] {
                    sources.extend_from_slice(at);
                }
            }
            sources.extend_from_slice(&self.sl_changed_to[dlid as usize]);
        } else {
            sources.extend_from_slice(&self.hosts);
        }
        for &h in &sources {
            if h == d || (d_router && f.kind(f.node_of(h)) == NodeKind::Router) {
                continue;
            }
            let h0 = self.alike[h as usize];
            // Each LID of the source (LMC) sends on its own SLs; a host
            // with one LID keeps its pair for the destination.
            for slid in f.lids_of_slot(h0) {
                let (a, b) = match st.sls[h0 as usize] {
                    (t, a, b) if t == tag && f.lmc(h0) == 0 => (a, b),
                    _ => {
                        let ab = (path_sl(self.old, slid, dlid), path_sl(self.new, slid, dlid));
                        st.sls[h0 as usize] = (tag, ab.0, ab.1);
                        ab
                    }
                };
                if a != b {
                    sls_changed += 1;
                }
                for sl in [a, b] {
                    if sl == SL_NONE || sl as usize >= NUM_SLS {
                        continue;
                    }
                    // The host link carries no dependency: its VL is irrelevant.
                    let k = key(h0, 0, sl);
                    if st.stamp[k] != tag {
                        st.stamp[k] = tag;
                        st.stack.push((h0, 0, sl));
                    }
                }
            }
            while let Some((c, vc, sl)) = st.stack.pop() {
                st.states += 1;
                let r = f.remote(c);
                if r == d || r == NONE {
                    continue;
                }
                let node = f.node_of(r);
                let Some(si) = f.switch_index(node) else {
                    continue;
                };
                let inp = f.port_of(r);
                let mut outs = [sides[0].lfts.get(si, dlid), sides[1].lfts.get(si, dlid)];
                if outs[0] == outs[1] {
                    outs[1] = NO_PATH;
                }
                for out in outs {
                    let Some(o) = f.linked_port(node, out) else {
                        continue;
                    };
                    let mut vos = [
                        sides[0].switch_vl(si, inp, out, sl),
                        sides[1].switch_vl(si, inp, out, sl),
                    ];
                    if vos[0] == vos[1] {
                        vos[1] = u8::MAX;
                    }
                    for vo in vos {
                        if vo as usize >= vls {
                            continue;
                        }
                        if self.is_s2s[c as usize] && self.is_s2s[o as usize] {
                            on_edge(c, vc, o, vo);
                        }
                        let k = key(o, vo, sl);
                        if st.stamp[k] != tag {
                            st.stamp[k] = tag;
                            st.stack.push((o, vo, sl));
                        }
                    }
                }
            }
        }
        st.sources = sources;
        st.sls_changed += sls_changed;
        if entries > 0 || sls_changed > 0 {
            st.dests_changed += 1;
        }
    }
}

/// Checks the update from `old` to `new`, both tables for `f` (the fabric
/// as it is while the update is applied). Never panics on inconsistent
/// tables: an entry that leads nowhere ends its walk.
pub fn check_transition(f: &Fabric, old: &Routing, new: &Routing) -> TransitionReport {
    let max_ports = widest_switch(f);
    let vl_of = |r: &Routing| r.sl2vl.as_ref().map_or(1, |t| t.max_vl() as usize + 1);
    let vls = vl_of(old).max(vl_of(new)).min(16);
    let mix = Mix::new(f, old, new, vls);
    let bits = f.num_slots() * max_ports * vls * vls;
    let words: Vec<AtomicU64> = (0..bits.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
    let sl2vl_rows_changed = sl2vl_rows_changed(f, old, new);
    // Every LID of every end port is a destination (LMC).
    let dests: Vec<(Slot, u16)> = f.end_lids().to_vec();
    let groups = super::transition_alike::groups(f, old, new, &dests);
    let firsts: Vec<usize> = (0..dests.len()).filter(|&i| groups[i].0 == i).collect();
    // The first host of each group walked, with what its walks counted.
    let walked: Vec<(usize, Counts)> = firsts
        .par_iter()
        .fold(
            || (mix.scratch(), Vec::new()),
            |(mut st, mut out), &i| {
                let before = (st.states, st.entries_changed, st.sls_changed);
                mix.walks_to(&mut st, dests[i], &mut |c, vc, o, vo| {
                    set_bit(&words, edge_bit(max_ports, vls, c, f.port_of(o), vc, vo));
                });
                out.push((
                    i,
                    Counts {
                        states: st.states - before.0,
                        entries: st.entries_changed - before.1,
                        sls: st.sls_changed - before.2,
                    },
                ));
                (st, out)
            },
        )
        .map(|(_, out)| out)
        .reduce(Vec::new, |mut a, b| {
            a.extend(b);
            a
        });
    let mut counts = vec![Counts::default(); dests.len()];
    for (i, c) in walked {
        counts[i] = c;
    }
    for (i, &(j, si)) in groups.iter().enumerate() {
        if j != i {
            counts[i] = counts[j].of_member(f, old, new, si, dests[j], dests[i]);
        }
    }
    let totals = counts.iter().fold(MixScratch::default(), |mut a, c| {
        a.states += c.states;
        a.entries_changed += c.entries;
        a.sls_changed += c.sls;
        a.dests_changed += u64::from(c.entries > 0 || c.sls > 0);
        a
    });
    let (deg, adj, edges, vertices) = csr_of(f, max_ports, vls, &words);
    TransitionReport {
        destinations_changed: totals.dests_changed,
        entries_changed: totals.entries_changed,
        sls_changed: totals.sls_changed,
        sl2vl_rows_changed,
        states: totals.states,
        cdg_vertices: vertices,
        cdg_edges: edges,
        cycle: cycle_in(vls, &deg, &adj),
    }
}

fn sl2vl_rows_changed(f: &Fabric, old: &Routing, new: &Routing) -> u64 {
    // A side without tables puts everything on VL 0: all-zero rows.
    let row = |r: &Routing, si: u32, i: u8, o: u8| {
        r.sl2vl
            .as_ref()
            .map_or([0; NUM_SLS], |t| t.switch_row(si, i, o))
    };
    let mut n = 0;
    for (si, &sw) in f.switches().iter().enumerate() {
        let np = f.num_ports(sw);
        for i in 0..=np {
            for o in 0..=np {
                if row(old, si as u32, i, o) != row(new, si as u32, i, o) {
                    n += 1;
                }
            }
        }
    }
    n
}

/// [`Mix::alike`]: per host slot, the first host of its switch with the
/// same path-SL row on each side, the same kind, and the same SL-to-VL
/// rows of its in port on each side (other slots map to themselves).
/// `sl2vl_same`: the two sides' SL-to-VL tables are equal, so one side's
/// rows tell (a reroute keeps the tables in force).
fn alike_hosts(
    f: &Fabric,
    old: &Routing,
    new: &Routing,
    sl2vl_same: bool,
    hosts_at: &[Vec<Slot>],
) -> Vec<Slot> {
    type Key = (Option<u32>, Option<u32>, bool, Vec<u8>, Vec<u8>);
    let row = |r: &Routing, lid| r.path_sl.as_ref().and_then(|p| p.row_index(lid));
    let mut alike: Vec<Slot> = (0..f.num_slots() as Slot).collect();
    for (si, at) in hosts_at.iter().enumerate() {
        let mut firsts: Vec<(Key, Slot)> = Vec::new();
        for &h in at {
            // A host with several LIDs (LMC) may take other rows per LID:
            // it stands for itself alone.
            if f.lmc(h) > 0 {
                continue;
            }
            let (lid, inp) = (f.lid_of_slot(h), f.port_of(f.remote(h)));
            let key = (
                row(old, lid),
                row(new, lid),
                f.kind(f.node_of(h)) == NodeKind::Router,
                super::classes::vl_rows(f, old, si as u32, inp),
                if sl2vl_same {
                    Vec::new()
                } else {
                    super::classes::vl_rows(f, new, si as u32, inp)
                },
            );
            match firsts.iter().find(|(k, _)| *k == key) {
                Some(&(_, first)) => alike[h as usize] = first,
                None => firsts.push((key, h)),
            }
        }
    }
    alike
}

/// Per destination LID: the ports of `sources` that send toward it on
/// another path SL in `new` than in `old`, each once
/// ([`for_each_sl_change`]).
fn sl_changed_to(f: &Fabric, old: &Routing, new: &Routing, sources: &[Slot]) -> Vec<Vec<Slot>> {
    let mut to: Vec<Vec<Slot>> = vec![Vec::new(); f.max_lid() as usize + 1];
    for_each_sl_change(f, old, new, sources, |dlid, h| {
        let to = &mut to[dlid as usize];
        if to.last() != Some(&h) {
            to.push(h);
        }
    });
    to
}

/// Calls `on(dlid, h)` for each source port `h` of `sources` and LID
/// `dlid` such that some LID of `h` (LMC) has another path SL toward
/// `dlid` in `new` than in `old`; sources in order, so the calls of one
/// source are adjacent per LID.
pub(crate) fn for_each_sl_change(
    f: &Fabric,
    old: &Routing,
    new: &Routing,
    sources: &[Slot],
    mut on: impl FnMut(u16, Slot),
) {
    // Tables cloned and left alone (a reroute that moved no flow to
    // another SL): no row to compare.
    let sls_same = match (&old.path_sl, &new.path_sl) {
        (Some(a), Some(b)) => a.same_rows_as(b),
        (None, None) => true,
        _ => false,
    };
    if sls_same {
        return;
    }
    fn row(r: &Routing, slid: u16) -> Option<&[u8]> {
        r.path_sl.as_ref().and_then(|p| p.row_of(slid))
    }
    for &h in sources {
        // Every LID of the source (LMC): each may have rows of its own.
        for slid in f.lids_of_slot(h) {
            // Rows compare whole first: a reroute changes few of them.
            if let (Some(a), Some(b)) = (row(old, slid), row(new, slid)) {
                if a == b {
                    continue;
                }
            }
            for dlid in 0..=f.max_lid() {
                if path_sl(old, slid, dlid) != path_sl(new, slid, dlid) {
                    on(dlid, h);
                }
            }
        }
    }
}

pub(super) fn path_sl(r: &Routing, slid: u16, dlid: u16) -> u8 {
    r.path_sl.as_ref().map_or(0, |p| p.get(slid, dlid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};
    use crate::routing::{EngineKind, EngineOptions};
    use std::collections::HashSet;

    type Edges = HashSet<(Slot, u8, Slot, u8)>;

    fn edges(mix: &Mix, f: &Fabric, only_changes: bool) -> Edges {
        let mut st = mix.scratch();
        let mut e = Edges::new();
        for &d in f.end_lids() {
            let mut add = |c, vc, o, vo| {
                e.insert((c, vc, o, vo));
            };
            if only_changes {
                mix.walks_through(&mut st, d, Changed::Compare, &mut add);
            } else {
                mix.walks_to(&mut st, d, &mut add);
            }
        }
        e
    }

    #[test]
    fn the_walks_through_changes_and_the_old_walks_cover_every_mix() {
        // A full recompute after a fault changes many entries and SLs.
        for (t, engine) in [
            (
                Topology::Mesh {
                    dims: vec![4, 4],
                    torus: true,
                    hosts: 1,
                },
                EngineKind::Lash,
            ),
            (
                Topology::Dragonfly { p: 2, hosts: None },
                EngineKind::Dfsssp,
            ),
        ] {
            let f = generate(&t).expect("topology");
            let opts = EngineOptions::default();
            let old = engine.engine().route(&f, &opts).expect("routes");
            for &l in f.switch_links().iter().take(6) {
                let f1 = f.without_links(&[l]);
                let Ok(new) = engine.engine().route(&f1, &opts) else {
                    continue;
                };
                let vls = 8;
                let full = edges(&Mix::new(&f1, &old, &new, vls), &f1, false);
                let mut covered = edges(&Mix::new(&f1, &old, &new, vls), &f1, true);
                covered.extend(edges(&Mix::new(&f1, &old, &old, vls), &f1, false));
                assert!(full.is_subset(&covered), "{engine} {t:?}");
                // Named changes give the walks the comparison finds.
                let mix = Mix::new(&f1, &old, &new, vls);
                let mut st = mix.scratch();
                let (mut given, mut compared) = (Edges::new(), Edges::new());
                for &d in f1.end_lids() {
                    let dlid = d.1;
                    let sws: Vec<u32> = (0..f1.switches().len() as u32)
                        .filter(|&si| old.lfts.get(si, dlid) != new.lfts.get(si, dlid))
                        .collect();
                    mix.walks_through(&mut st, d, Changed::Given(&sws), &mut |c, vc, o, vo| {
                        given.insert((c, vc, o, vo));
                    });
                    mix.walks_through(&mut st, d, Changed::Compare, &mut |c, vc, o, vo| {
                        compared.insert((c, vc, o, vo));
                    });
                }
                assert_eq!(given, compared, "{engine} {t:?}");
            }
        }
    }

    /// Hosts walked from their switch's first alike host give the very
    /// walks each host's own would: the same dependencies and counts, with
    /// path SLs changed for some sources only (rows split within a switch).
    #[test]
    fn alike_hosts_walk_as_each_host_would() {
        let f = generate(&Topology::Dragonfly { p: 3, hosts: None }).expect("dragonfly");
        let opts = EngineOptions::default();
        let old = EngineKind::Dfsssp
            .engine()
            .route(&f, &opts)
            .expect("routes");
        let mut new = EngineKind::Dfdn.engine().route(&f, &opts).expect("routes");
        if let Some(p) = new.path_sl.as_mut() {
            let lids: Vec<u16> = f.endports().iter().map(|&e| f.lid_of_slot(e)).collect();
            for (k, &s) in lids.iter().enumerate().step_by(5) {
                p.set_pair(s, lids[(k * 7 + 1) % lids.len()], 1);
            }
        }
        for (a, b) in [(&old, &new), (&new, &old)] {
            let mix = Mix::new(&f, a, b, 8);
            let mut each = Mix::new(&f, a, b, 8);
            each.alike = (0..f.num_slots() as Slot).collect();
            assert!(mix.alike.iter().enumerate().any(|(i, &r)| i as Slot != r));
            assert_eq!(edges(&mix, &f, false), edges(&each, &f, false));
            assert_eq!(edges(&mix, &f, true), edges(&each, &f, true));
            let (mut x, mut y) = (mix.scratch(), each.scratch());
            for &d in f.end_lids() {
                mix.walks_to(&mut x, d, &mut |_, _, _, _| {});
                each.walks_to(&mut y, d, &mut |_, _, _, _| {});
            }
            assert_eq!(
                (x.sls_changed, x.entries_changed, x.dests_changed),
                (y.sls_changed, y.entries_changed, y.dests_changed)
            );
        }
    }

    /// The report walks one host of each group of alike destinations: it
    /// equals the walks toward every destination, one by one; with LMC,
    /// toward every LID of every port.
    #[test]
    fn the_report_is_that_of_every_destination_walked() {
        let df3 = generate(&Topology::Dragonfly { p: 3, hosts: None }).expect("dragonfly");
        let df2 = generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("dragonfly");
        for f in [df3, crate::generate::with_lmc(&df2, 1).expect("LMC")] {
            report_equals_every_walk(&f);
        }
    }

    fn report_equals_every_walk(f: &Fabric) {
        let f = f.clone();
        let opts = EngineOptions::default();
        let dfdn = EngineKind::Dfdn.engine().route(&f, &opts).expect("routes");
        let dfsssp = EngineKind::Dfsssp
            .engine()
            .route(&f, &opts)
            .expect("routes");
        let mut moved = dfdn.clone();
        if let Some(p) = moved.path_sl.as_mut() {
            let lids: Vec<u16> = f.endports().iter().map(|&e| f.lid_of_slot(e)).collect();
            for (k, &s) in lids.iter().enumerate().step_by(3) {
                p.set_pair(s, lids[(k + 1) % lids.len()], 2);
            }
        }
        // One host's own entry sent to another switch on the new side.
        let mut own = dfdn.clone();
        let d = f.endports()[4];
        let si = f.switch_index(f.node_of(f.remote(d))).expect("on a switch");
        let sw = f.node_of(f.remote(d));
        let up = (1..=f.num_ports(sw))
            .find(|&p| {
                let r = f.remote(f.slot(sw, p));
                r != NONE && f.kind(f.node_of(r)) == NodeKind::Switch
            })
            .expect("a switch link");
        own.lfts.set(si, f.lid_of_slot(d), up);
        for (a, b) in [
            (&dfdn, &dfsssp),
            (&dfsssp, &dfdn),
            (&dfdn, &moved),
            (&moved, &dfdn),
            (&dfdn, &own),
        ] {
            let t = check_transition(&f, a, b);
            let mix = Mix::new(&f, a, b, 8);
            let mut st = mix.scratch();
            let mut e = Edges::new();
            for &d in f.end_lids() {
                mix.walks_to(&mut st, d, &mut |c, vc, o, vo| {
                    e.insert((c, vc, o, vo));
                });
            }
            assert_eq!(t.cdg_edges, e.len() as u64);
            assert_eq!(
                (t.entries_changed, t.sls_changed, t.destinations_changed),
                (st.entries_changed, st.sls_changed, st.dests_changed)
            );
            // A grouped host counts its first host's states: the pair
            // within their switch may differ by a few.
            assert!(
                t.states.abs_diff(st.states) * 100 <= st.states,
                "{} {}",
                t.states,
                st.states
            );
        }
    }

    /// With LMC, a cycle that only the ports' second LIDs close (new
    /// tables that send those LIDs clockwise round a ring) is found: the
    /// check walks every LID, not only the base ones.
    #[test]
    fn a_cycle_of_the_second_lids_alone_is_found() {
        let ring = generate(&Topology::Mesh {
            dims: vec![4],
            torus: true,
            hosts: 1,
        })
        .expect("ring");
        let f = crate::generate::with_lmc(&ring, 1).expect("LMC");
        let old = EngineKind::Updn
            .engine()
            .route(&f, &EngineOptions::default())
            .expect("routes");
        let mut new = old.clone();
        let n = f.switches().len() as u32;
        for si in 0..n {
            let sw = f.switches()[si as usize];
            let next = f.port_slots(sw).find(|&s| {
                let r = f.remote(s);
                r != NONE && f.switch_index(f.node_of(r)) == Some((si + 1) % n)
            });
            let next = next.expect("a clockwise link");
            for &(d, lid) in f.end_lids() {
                let on = f.switch_index(f.node_of(f.remote(d)));
                if lid != f.lid_of_slot(d) && on != Some(si) {
                    new.lfts.set(si, lid, f.port_of(next));
                }
            }
        }
        assert!(check_transition(&f, &old, &old).deadlock_free());
        let t = check_transition(&f, &old, &new);
        assert!(t.cycle.is_some(), "{t:?}");
        assert!(t.entries_changed > 0);
    }

    #[test]
    fn an_update_to_itself_is_the_routing_itself() {
        let f = generate(&Topology::Mesh {
            dims: vec![4, 4],
            torus: false,
            hosts: 1,
        })
        .expect("mesh");
        let r = EngineKind::Updn
            .engine()
            .route(&f, &EngineOptions::default())
            .expect("updn routes a mesh");
        let t = check_transition(&f, &r, &r);
        assert!(t.deadlock_free());
        assert_eq!(t.entries_changed, 0);
        assert_eq!(t.destinations_changed, 0);
        assert_eq!(t.cdg_edges, crate::verify::verify(&f, &r).cdg_edges);
    }
}
