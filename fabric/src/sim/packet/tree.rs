//! Multicast copies as the simulator sends them: where a group's
//! forwarding entries copy a packet that came in over a link, on the VLs
//! the SL-to-VL tables give the group's SL.
//!
//! A switch's copies depend only on the link a packet came in over (the
//! entry minus its port, the VL of each turn), not on who sent it, so the
//! simulator keeps one list of copies per group and link however many
//! hosts send: at the LID limit a tree per sender would be gigabytes.

use super::Channel;
use crate::error::Result;
use crate::mcast::{Multicast, PortMask};
use crate::model::{Fabric, NONE, NodeKind, Slot};
use crate::network::Host;
use crate::sim::sim_err;
use crate::tables::Routing;

/// Multicast groups a simulation can send to.
pub trait McastPaths: Sync {
    fn num_groups(&self) -> usize;
    /// Whether host `host` is a member of group `group` (members send to
    /// their groups; others' copies may reach no one).
    fn is_member(&self, group: usize, host: usize) -> bool;
    /// The channel host `src`'s packets to `group` start on, and how many
    /// hosts receive a copy. Refuses entries that loop (a switch reached
    /// twice) or drop copies on VL 15 on the way from `src`.
    fn first(&self, group: usize, src: usize) -> Result<(Channel, u32)>;
    /// Appends the copies the switch at the far end of `link` makes of a
    /// group's packet that came in over it: each channel, and whether a
    /// host is at its far end. None when a host is at the far end of
    /// `link`.
    fn copies(&self, group: usize, link: u32, out: &mut Vec<(Channel, bool)>);
}

/// The multicast groups of one routed subnet; hosts and link ids as
/// [`crate::network::SubnetPaths`] numbers them (hosts its linked CA
/// ports, links the sending slots).
pub struct SubnetMcast<'a> {
    f: &'a Fabric,
    r: &'a Routing,
    mc: &'a Multicast,
    hosts: Vec<Slot>,
    /// Per group, its entries by switch index (an empty mask: none).
    masks: Vec<Vec<PortMask>>,
    /// Per group, its members, sorted.
    members: Vec<Vec<Slot>>,
}

impl<'a> SubnetMcast<'a> {
    pub fn new(f: &'a Fabric, r: &'a Routing, mc: &'a Multicast, hosts: &[Host]) -> Self {
        let masks = mc
            .groups
            .iter()
            .map(|g| {
                let mut v = vec![PortMask::default(); f.switches().len()];
                for &(sw, m) in mc
                    .mfts
                    .entries
                    .get(&g.mlid)
                    .map(Vec::as_slice)
                    .unwrap_or(&[])
                {
                    if let Some(x) = v.get_mut(sw as usize) {
                        *x = m;
                    }
                }
                v
            })
            .collect();
        let members = mc
            .groups
            .iter()
            .map(|g| {
                let mut m = g.members.clone();
                m.sort_unstable();
                m
            })
            .collect();
        Self {
            f,
            r,
            mc,
            hosts: hosts.iter().map(|h| h.slot).collect(),
            masks,
            members,
        }
    }

    /// The group's MLID, for reports.
    pub fn mlid(&self, group: usize) -> Option<u16> {
        self.mc.groups.get(group).map(|g| g.mlid)
    }

    /// The copies of `copies` with the switch index they enter (None: a
    /// host), for the flood check.
    fn each_copy(&self, group: usize, link: u32, mut visit: impl FnMut(Slot, u8, Option<u32>)) {
        let f = self.f;
        let r = f.remote(link);
        if r == NONE {
            return;
        }
        let Some(y) = f.switch_index(f.node_of(r)) else {
            return;
        };
        let (node, p) = (f.node_of(r), f.port_of(r));
        let sl = self.mc.groups[group].sl;
        for q in self.masks[group][y as usize].iter() {
            if q == p || q == 0 || q > f.num_ports(node) {
                continue;
            }
            let next = f.slot(node, q);
            let far = f.remote(next);
            if far == NONE {
                continue;
            }
            let z = f.switch_index(f.node_of(far));
            visit(next, self.r.switch_vl(y, p, q, sl), z);
        }
    }
}

impl McastPaths for SubnetMcast<'_> {
    fn num_groups(&self) -> usize {
        self.mc.groups.len()
    }

    fn is_member(&self, group: usize, host: usize) -> bool {
        match (self.members.get(group), self.hosts.get(host)) {
            (Some(m), Some(h)) => m.binary_search(h).is_ok(),
            _ => false,
        }
    }

    fn first(&self, group: usize, src: usize) -> Result<(Channel, u32)> {
        let (Some(g), Some(&start)) = (self.mc.groups.get(group), self.hosts.get(src)) else {
            return Err(sim_err(format!("no group {group} or host {src}")));
        };
        let f = self.f;
        let name = |s: Slot| f.desc(f.node_of(s)).to_string();
        // The flood from `src`, switch by switch: a switch reached twice
        // would have the simulator copy forever.
        let mut seen = vec![false; f.switches().len()];
        let entry = f.remote(start);
        if let Some(y) = (entry != NONE)
            .then(|| f.switch_index(f.node_of(entry)))
            .flatten()
        {
            seen[y as usize] = true;
        }
        let mut links = vec![start];
        let mut receivers = 0u32;
        let mut fault = None;
        while let Some(l) = links.pop() {
            self.each_copy(group, l, |next, vl, z| {
                if fault.is_some() {
                    return;
                }
                if vl == 15 {
                    fault = Some(format!("switch {} drops them on VL 15", name(next)));
                    return;
                }
                match z {
                    None => receivers += 1,
                    Some(z) if std::mem::replace(&mut seen[z as usize], true) => {
                        fault = Some(format!(
                            "they reach switch {} twice (the entries loop)",
                            name(f.remote(next))
                        ));
                    }
                    Some(_) => links.push(next),
                }
            });
            if let Some(why) = fault {
                return Err(sim_err(format!(
                    "group {:#06x}, copies from {}: {why}",
                    g.mlid,
                    name(start)
                )));
            }
        }
        Ok(((start, self.r.port_vl(start, g.sl)), receivers))
    }

    fn copies(&self, group: usize, link: u32, out: &mut Vec<(Channel, bool)>) {
        let f = self.f;
        self.each_copy(group, link, |next, vl, z| {
            let to_host = z.is_none() && f.kind(f.node_of(f.remote(next))) != NodeKind::Switch;
            out.push(((next, vl), to_host));
        });
    }
}
