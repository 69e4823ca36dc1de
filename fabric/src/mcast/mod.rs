//! Multicast: groups (an MLID, the SL its packets carry, the member end
//! ports) and the multicast forwarding tables (MFTs) that carry them: per
//! switch and MLID the set of ports a packet leaves by. A switch forwards
//! a multicast packet to every port of the MLID's set except the one it
//! came in on.
//!
//! Multicast packets are forwarded through the same switches and VLs as
//! unicast ones, so their dependencies belong in the same channel
//! dependency graph: [`crate::verify::mcast`] adds them. [`tree`] builds
//! trees that keep each engine's guarantee.

pub mod tree;

use crate::model::{Fabric, Slot};
use std::collections::BTreeMap;

/// Lowest multicast LID (0xC000).
pub const MIN_MLID: u16 = 0xC000;
/// Highest multicast LID a group may use (0xFFFF is the permissive LID).
pub const MAX_MLID: u16 = 0xFFFE;

/// One multicast group: its MLID, its SL and its member end ports (sorted,
/// distinct).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Group {
    pub mlid: u16,
    pub sl: u8,
    pub members: Vec<Slot>,
}

/// A set of switch ports (0..=255).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct PortMask(pub [u64; 4]);

impl PortMask {
    pub fn insert(&mut self, port: u8) {
        self.0[port as usize / 64] |= 1 << (port % 64);
    }
    #[inline]
    pub fn contains(&self, port: u8) -> bool {
        self.0[port as usize / 64] & (1 << (port % 64)) != 0
    }
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
    /// The ports in ascending order (by set bits: a flood reads every
    /// entry of a tree once per member switch).
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &bits)| {
            let mut x = bits;
            std::iter::from_fn(move || {
                (x != 0).then(|| {
                    let b = x.trailing_zeros();
                    x &= x - 1;
                    (w as u32 * 64 + b) as u8
                })
            })
        })
    }
}

/// Multicast forwarding tables: per MLID, the `(switch index, ports)`
/// entries of the switches that forward it, by switch index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mfts {
    pub entries: BTreeMap<u16, Vec<(u32, PortMask)>>,
}

impl Mfts {
    /// The ports switch index `sw` forwards `mlid` to (`None`: no entry).
    pub fn ports(&self, mlid: u16, sw: u32) -> Option<&PortMask> {
        let e = self.entries.get(&mlid)?;
        e.binary_search_by_key(&sw, |&(s, _)| s)
            .ok()
            .map(|i| &e[i].1)
    }

    /// Sets switch `sw`'s ports for `mlid`, replacing an earlier entry.
    pub fn set(&mut self, mlid: u16, sw: u32, ports: PortMask) {
        let e = self.entries.entry(mlid).or_default();
        match e.binary_search_by_key(&sw, |&(s, _)| s) {
            Ok(i) => e[i].1 = ports,
            Err(i) => e.insert(i, (sw, ports)),
        }
    }

    /// Entries over all MLIDs.
    pub fn len(&self) -> usize {
        self.entries.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The spanning tree every group's tree is part of, with the SL and VL
/// reserved for multicast: what the OpenSM plugin builds the trees of the
/// groups members join at run time from, keeping the guarantee.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreePlan {
    pub tree: tree::SpanningTree,
    pub sl: u8,
    pub vl: u8,
}

/// Groups and the MFTs that carry them, and for reserved trees the plan
/// they were built by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Multicast {
    pub groups: Vec<Group>,
    pub mfts: Mfts,
    pub plan: Option<TreePlan>,
}

impl Multicast {
    /// Member end ports over all groups (a port in two groups counts twice).
    pub fn memberships(&self) -> usize {
        self.groups.iter().map(|g| g.members.len()).sum()
    }
}

/// Every CA and router end port linked to a switch: the members of a
/// group that names `all` (IPoIB's broadcast group reaches every port).
pub fn all_members(f: &Fabric) -> Vec<Slot> {
    f.endports()
        .iter()
        .copied()
        .filter(|&e| f.switch_index(f.node_of(f.remote(e))).is_some())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_masks_hold_every_port_number() {
        let mut m = PortMask::default();
        for p in [0u8, 1, 63, 64, 127, 200, 255] {
            m.insert(p);
        }
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            vec![0, 1, 63, 64, 127, 200, 255]
        );
        assert_eq!(m.len(), 7);
        assert!(!m.contains(2));
    }

    #[test]
    fn mft_entries_stay_sorted_and_replace() {
        let mut t = Mfts::default();
        let mut a = PortMask::default();
        a.insert(1);
        let mut b = PortMask::default();
        b.insert(2);
        t.set(0xC000, 5, a);
        t.set(0xC000, 2, b);
        t.set(0xC000, 5, b);
        assert_eq!(t.entries[&0xC000], vec![(2, b), (5, b)]);
        assert_eq!(t.ports(0xC000, 5), Some(&b));
        assert_eq!(t.ports(0xC000, 3), None);
        assert_eq!(t.ports(0xC001, 2), None);
    }
}
