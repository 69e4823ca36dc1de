//! Destinations whose mixed walks are another's, for the transition
//! check: hosts of one switch whose LFT columns agree on both sides but
//! at that switch, whose own entries deliver to them on both sides, and
//! whose path-SL columns agree on both sides. Every mixed walk toward such
//! a host takes the same channels with the same VLs as toward the first
//! one and ends at the switch, so only the first is walked; the counts of
//! the others differ from its own by the entries and the pair within
//! their switch, which [`Counts::of_member`] adds.

use crate::model::{Fabric, NodeKind, Slot};
use crate::tables::Routing;

/// What the mixed walks toward one destination counted.
#[derive(Clone, Copy, Default)]
pub(super) struct Counts {
    pub states: u64,
    pub entries: u64,
    pub sls: u64,
}

impl Counts {
    /// The counts of `d` from those of `j`, the first host of its group,
    /// on switch index `si`.
    pub fn of_member(
        self,
        f: &Fabric,
        old: &Routing,
        new: &Routing,
        si: u32,
        (_, lj): (Slot, u16),
        (d, ld): (Slot, u16),
    ) -> Counts {
        let changed = |lid| u64::from(old.lfts.get(si, lid) != new.lfts.get(si, lid));
        let diff = |s, t| {
            u64::from(
                super::transition::path_sl(old, s, t) != super::transition::path_sl(new, s, t),
            )
        };
        let router = f.kind(f.node_of(d)) == NodeKind::Router;
        // The pairs between the two are skipped alike when both are routers.
        let (out, inn) = if router {
            (0, 0)
        } else {
            (diff(ld, lj), diff(lj, ld))
        };
        Counts {
            states: self.states,
            entries: self.entries - changed(lj) + changed(ld),
            sls: self.sls - out + inn,
        }
    }
}

/// Per destination LID (index into `dests`, a port and one of its LIDs):
/// the index of the first host of its group, itself when none; and its
/// switch index.
pub(super) fn groups(
    f: &Fabric,
    old: &Routing,
    new: &Routing,
    dests: &[(Slot, u16)],
) -> Vec<(usize, u32)> {
    let nsw = f.switches().len() as u32;
    let delivers = |r: &Routing, si: u32, (d, dlid): (Slot, u16)| {
        let sw = f.switches()[si as usize];
        f.linked_port(sw, r.lfts.get(si, dlid))
            .is_some_and(|o| f.remote(o) == d)
    };
    // Row by row, every row (also one no source uses): more than needed.
    let same_sls = |r: &Routing, a: u16, b: u16| match &r.path_sl {
        None => true,
        Some(p) => {
            let (rows, w) = (p.raw_rows(), p.width());
            (0..p.num_rows()).all(|k| rows.get(k * w + a as usize) == rows.get(k * w + b as usize))
        }
    };
    // Ports with LMC stand for themselves: the pairs between two members
    // would be over several LIDs each.
    let alike = |si: u32, (a, la): (Slot, u16), (b, lb): (Slot, u16)| {
        f.lmc(a) == 0
            && f.lmc(b) == 0
            && f.kind(f.node_of(a)) == f.kind(f.node_of(b))
            && (0..nsw).all(|x| {
                x == si
                    || (old.lfts.get(x, la) == old.lfts.get(x, lb)
                        && new.lfts.get(x, la) == new.lfts.get(x, lb))
            })
            && same_sls(old, la, lb)
            && same_sls(new, la, lb)
    };
    let mut firsts: Vec<Vec<usize>> = vec![Vec::new(); nsw as usize];
    let mut out = Vec::with_capacity(dests.len());
    for (i, &d) in dests.iter().enumerate() {
        let Some(si) = f.switch_index(f.node_of(f.remote(d.0))) else {
            out.push((i, u32::MAX));
            continue;
        };
        if !delivers(old, si, d) || !delivers(new, si, d) {
            out.push((i, si));
            continue;
        }
        match firsts[si as usize]
            .iter()
            .copied()
            .find(|&j| alike(si, dests[j], d))
        {
            Some(j) => out.push((j, si)),
            None => {
                firsts[si as usize].push(i);
                out.push((i, si));
            }
        }
    }
    out
}
