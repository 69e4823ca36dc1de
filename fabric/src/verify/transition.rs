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

use super::{
    csr_of, cycle_in, edge_bit, set_bit, switch_hosts, switch_link_flags, widest_switch,
    VirtualChannel,
};
use crate::model::{Fabric, NodeKind, Slot, NONE};
use crate::tables::{Routing, NO_PATH, NUM_SLS, SL_NONE};
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
    /// Distinct (channel, VL, SL) states the mixed walks reached.
    pub states: u64,
    pub cdg_vertices: u64,
    pub cdg_edges: u64,
    /// A dependency cycle some mix of old and new tables allows.
    pub cycle: Option<Vec<VirtualChannel>>,
}

impl TransitionReport {
    pub fn deadlock_free(&self) -> bool {
        self.cycle.is_none()
    }
    /// Human-readable cycle, as [`super::Report::describe_cycle`].
    pub fn describe_cycle(&self, f: &Fabric) -> Option<String> {
        let c = self.cycle.as_ref()?;
        Some(
            c.iter()
                .map(|vc| super::describe_channel(f, *vc))
                .collect::<Vec<_>>()
                .join(" -> "),
        )
    }
}

/// Tables of one side of the update, read for one destination.
struct Side<'a> {
    r: &'a Routing,
    /// LFT column of the destination, one entry per switch index.
    col: Vec<u8>,
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
}

/// Per-thread scratch of [`Mix::walks_to`] and what it counted.
#[derive(Default)]
pub(crate) struct MixScratch {
    stamp: Vec<u32>,
    tag: u32,
    stack: Vec<(Slot, u8, u8)>,
    pub states: u64,
    pub dests_changed: u64,
    pub entries_changed: u64,
    pub sls_changed: u64,
}

impl<'a> Mix<'a> {
    /// `vls`: the VLs a dependency may name (above: VL 15 or unused, no
    /// buffer held).
    pub(crate) fn new(f: &'a Fabric, old: &'a Routing, new: &'a Routing, vls: usize) -> Self {
        Self {
            f,
            old,
            new,
            is_s2s: switch_link_flags(f),
            vls,
            hosts: switch_hosts(f),
        }
    }

    pub(crate) fn scratch(&self) -> MixScratch {
        MixScratch {
            stamp: vec![0; self.f.num_slots() * self.vls * NUM_SLS],
            ..MixScratch::default()
        }
    }

    fn vl(r: &Routing, si: u32, inp: u8, out: u8, sl: u8) -> u8 {
        r.sl2vl
            .as_ref()
            .map_or(0, |t| t.switch_vl(si, inp, out, sl))
    }

    /// Every mixed walk from every source toward `d`; calls `on_edge(c,
    /// vc, o, vo)` for each switch-to-switch dependency (`c` on VL `vc`
    /// into `o` on VL `vo`), more than once for some.
    pub(crate) fn walks_to(
        &self,
        st: &mut MixScratch,
        d: Slot,
        on_edge: &mut dyn FnMut(Slot, u8, Slot, u8),
    ) {
        let f = self.f;
        let dlid = f.lid_of_slot(d);
        let d_router = f.kind(f.node_of(d)) == NodeKind::Router;
        let sides = [
            Side {
                r: self.old,
                col: column(f, self.old, dlid),
            },
            Side {
                r: self.new,
                col: column(f, self.new, dlid),
            },
        ];
        let entries = sides[0]
            .col
            .iter()
            .zip(&sides[1].col)
            .filter(|(a, b)| a != b)
            .count() as u64;
        st.entries_changed += entries;
        let mut sls_changed = 0u64;
        // A fresh tag per destination: walks toward `d` share their states.
        if st.tag == u32::MAX {
            st.stamp.fill(0);
            st.tag = 0;
        }
        st.tag += 1;
        let tag = st.tag;
        let vls = self.vls;
        let key =
            |c: Slot, vl: u8, sl: u8| (c as usize * vls + vl as usize) * NUM_SLS + sl as usize;
        for &h in &self.hosts {
            if h == d || (d_router && f.kind(f.node_of(h)) == NodeKind::Router) {
                continue;
            }
            let slid = f.lid_of_slot(h);
            let (a, b) = (path_sl(self.old, slid, dlid), path_sl(self.new, slid, dlid));
            if a != b {
                sls_changed += 1;
            }
            for sl in [a, b] {
                if sl == SL_NONE || sl as usize >= NUM_SLS {
                    continue;
                }
                // The host link carries no dependency: its VL is irrelevant.
                let k = key(h, 0, sl);
                if st.stamp[k] != tag {
                    st.stamp[k] = tag;
                    st.stack.push((h, 0, sl));
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
                let mut outs = [sides[0].col[si as usize], sides[1].col[si as usize]];
                if outs[0] == outs[1] {
                    outs[1] = NO_PATH;
                }
                for out in outs {
                    if out == NO_PATH || out == 0 || out > f.num_ports(node) {
                        continue;
                    }
                    let o = f.slot(node, out);
                    if f.remote(o) == NONE {
                        continue;
                    }
                    let mut vos = [
                        Self::vl(sides[0].r, si, inp, out, sl),
                        Self::vl(sides[1].r, si, inp, out, sl),
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
    let dests: Vec<Slot> = f.endports().to_vec();
    let totals = dests
        .par_iter()
        .fold(
            || mix.scratch(),
            |mut st, &d| {
                mix.walks_to(&mut st, d, &mut |c, vc, o, vo| {
                    set_bit(&words, edge_bit(max_ports, vls, c, f.port_of(o), vc, vo));
                });
                st
            },
        )
        .reduce(MixScratch::default, |mut a, b| {
            a.states += b.states;
            a.dests_changed += b.dests_changed;
            a.entries_changed += b.entries_changed;
            a.sls_changed += b.sls_changed;
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

fn column(f: &Fabric, r: &Routing, dlid: u16) -> Vec<u8> {
    (0..f.switches().len() as u32)
        .map(|si| r.lfts.get(si, dlid))
        .collect()
}

fn path_sl(r: &Routing, slid: u16, dlid: u16) -> u8 {
    r.path_sl.as_ref().map_or(0, |p| p.get(slid, dlid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{generate, Topology};
    use crate::routing::{EngineKind, EngineOptions};

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
