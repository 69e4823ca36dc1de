//! Fabrics of several subnets joined by IB routers.
//!
//! Each subnet is an ordinary [`Fabric`] with its own LID space and subnet
//! prefix. A router appears in every subnet it joins as a router node with
//! the same node GUID; in each subnet only its ports that sit there are
//! linked. [`MultiFabric::from_subnets`] finds the routers by those GUIDs,
//! which is all a per-subnet agent can see too.

use crate::error::{Error, Result};
use crate::model::{Fabric, FabricBuilder, NodeKind, NONE};
use std::collections::BTreeMap;

/// One subnet of a multi-subnet fabric.
#[derive(Debug, Clone)]
pub struct Subnet {
    pub name: String,
    pub prefix: u64,
    pub fabric: Fabric,
}

/// A router port and the subnet it sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterPortRef {
    pub port: u8,
    pub subnet: usize,
    pub port_guid: u64,
    /// LID of the port in its subnet.
    pub lid: u16,
}

#[derive(Debug, Clone)]
pub struct Router {
    pub name: String,
    pub guid: u64,
    /// Ports in ascending port number.
    pub ports: Vec<RouterPortRef>,
}

impl Router {
    /// Subnets this router joins, ascending, without repeats.
    pub fn subnets(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.ports.iter().map(|p| p.subnet).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[derive(Debug, Clone)]
pub struct MultiFabric {
    pub subnets: Vec<Subnet>,
    pub routers: Vec<Router>,
}

impl MultiFabric {
    /// Joins subnets by their router nodes' GUIDs. Errors: two subnets with
    /// one prefix, a router port linked in two subnets, a router node that
    /// disagrees on its port count between subnets.
    pub fn from_subnets(subnets: Vec<Subnet>) -> Result<Self> {
        let mut prefixes = BTreeMap::new();
        for (i, s) in subnets.iter().enumerate() {
            if let Some(prev) = prefixes.insert(s.prefix, i) {
                return Err(Error::Multi(format!(
                    "subnets '{}' and '{}' share the prefix {:#018x}",
                    subnets[prev].name, s.name, s.prefix
                )));
            }
        }
        // Router GUID -> (name, port count, ports).
        let mut found: BTreeMap<u64, (String, u8, Vec<RouterPortRef>)> = BTreeMap::new();
        for (si, s) in subnets.iter().enumerate() {
            let f = &s.fabric;
            for n in 0..f.num_nodes() as u32 {
                if f.kind(n) != NodeKind::Router {
                    continue;
                }
                let e = found
                    .entry(f.guid(n))
                    .or_insert_with(|| (f.desc(n).to_string(), f.num_ports(n), Vec::new()));
                if e.1 != f.num_ports(n) {
                    return Err(Error::Multi(format!(
                        "router {:#018x} ('{}') has {} ports in subnet '{}' but {} elsewhere",
                        f.guid(n),
                        f.desc(n),
                        f.num_ports(n),
                        s.name,
                        e.1
                    )));
                }
                for slot in f.port_slots(n) {
                    if f.remote(slot) == NONE {
                        continue;
                    }
                    let port = f.port_of(slot);
                    if let Some(other) = e.2.iter().find(|p| p.port == port) {
                        return Err(Error::Multi(format!(
                            "port {port} of router '{}' is linked in subnets '{}' and '{}'",
                            e.0, subnets[other.subnet].name, s.name
                        )));
                    }
                    e.2.push(RouterPortRef {
                        port,
                        subnet: si,
                        port_guid: f.port_guid(slot),
                        lid: f.lid_of_slot(slot),
                    });
                }
            }
        }
        let routers = found
            .into_iter()
            .map(|(guid, (name, _, mut ports))| {
                ports.sort_by_key(|p| p.port);
                Router { name, guid, ports }
            })
            .collect();
        Ok(Self { subnets, routers })
    }

    pub fn subnet_by_prefix(&self, prefix: u64) -> Option<usize> {
        self.subnets.iter().position(|s| s.prefix == prefix)
    }
}

/// Subnet prefix of the `i`-th generated subnet: site-local fec0::/10
/// prefixes numbered from 1, so none collides with the default fe80:: one.
pub fn generated_prefix(i: usize) -> u64 {
    0xfec0_0000_0000_0000 | (i as u64 + 1)
}

/// `subnets` two-level fat trees (`leaves` leaves with `hosts` HCAs each,
/// `spines` spines) joined by `routers` routers on top: every router has one
/// port to every spine of every subnet, as in the inter-subnet paper's
/// setups where routers take the place of a three-level fat tree's top
/// switches.
///
/// Router `r`'s port `1 + subnet * spines + spine` links spine `spine` of
/// `subnet`, on the spine's port `leaves + 1 + r`. GUIDs are unique across
/// the whole fabric: the subnet number is bits 24..32 of switch and CA GUIDs.
pub fn fat_tree_subnets(
    subnets: u32,
    leaves: u32,
    spines: u32,
    hosts: u32,
    routers: u32,
) -> Result<MultiFabric> {
    let bad = |what: &str| Err(Error::Multi(what.to_string()));
    if subnets == 0 || leaves == 0 || spines == 0 || hosts == 0 {
        return bad("subnets, leaves, spines and hosts must all be at least 1");
    }
    if subnets > 255 {
        return bad("at most 255 subnets");
    }
    if hosts + spines > 254 || leaves + routers > 254 {
        return bad("switch radix above 254: fewer hosts, spines, leaves or routers");
    }
    let router_ports = subnets as u64 * spines as u64;
    if router_ports > 254 {
        return bad("router radix above 254 (subnets x spines): fewer subnets or spines");
    }
    let mut out = Vec::with_capacity(subnets as usize);
    for sn in 0..subnets {
        let tag = (sn as u64 + 1) << 24;
        let mut b = FabricBuilder::new();
        b.subnet_prefix(generated_prefix(sn as usize));
        let leaf: Vec<_> = (0..leaves)
            .map(|l| {
                b.add_node(
                    NodeKind::Switch,
                    0x0002_0000_0000_0000 | tag | l as u64,
                    format!("sn{sn}_leaf{l}"),
                    (hosts + spines) as u8,
                )
            })
            .collect();
        let spine: Vec<_> = (0..spines)
            .map(|s| {
                b.add_node(
                    NodeKind::Switch,
                    0x0002_0000_0000_0000 | tag | 0x8000 | s as u64,
                    format!("sn{sn}_spine{s}"),
                    (leaves + routers) as u8,
                )
            })
            .collect();
        let rt: Vec<_> = (0..routers)
            .map(|r| {
                let guid = 0x0004_0000_0000_0000 | (r as u64) << 16;
                b.add_node(
                    NodeKind::Router,
                    guid,
                    format!("router{r}"),
                    router_ports as u8,
                )
            })
            .collect();
        for (l, &ln) in leaf.iter().enumerate() {
            for h in 0..hosts {
                let guid = 0x0001_0000_0000_0000 | tag | ((l as u64) << 8 | h as u64) << 4;
                let ca = b.add_node(NodeKind::Ca, guid, format!("sn{sn}_h{l}_{h}"), 1);
                b.connect(ca, 1, ln, (h + 1) as u8)
                    .map_err(|e| Error::Multi(e.to_string()))?;
            }
            for (s, &spn) in spine.iter().enumerate() {
                b.connect(ln, (hosts + 1 + s as u32) as u8, spn, (l + 1) as u8)
                    .map_err(|e| Error::Multi(e.to_string()))?;
            }
        }
        for (r, &rn) in rt.iter().enumerate() {
            for (s, &spn) in spine.iter().enumerate() {
                let port = (1 + sn * spines + s as u32) as u8;
                b.connect(rn, port, spn, (leaves + 1 + r as u32) as u8)
                    .map_err(|e| Error::Multi(e.to_string()))?;
            }
        }
        let fabric = b.build().map_err(|e| Error::Multi(e.to_string()))?;
        out.push(Subnet {
            name: format!("subnet{sn}"),
            prefix: generated_prefix(sn as usize),
            fabric,
        });
    }
    MultiFabric::from_subnets(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routers_join_every_subnet_through_every_spine() {
        let m = fat_tree_subnets(3, 4, 2, 3, 2).expect("generates");
        assert_eq!(m.subnets.len(), 3);
        assert_eq!(m.routers.len(), 2);
        for r in &m.routers {
            assert_eq!(r.ports.len(), 6);
            assert_eq!(r.subnets(), vec![0, 1, 2]);
            for p in &r.ports {
                assert!(p.lid > 0, "router port has a LID in its subnet");
            }
        }
        for s in &m.subnets {
            assert_eq!(s.fabric.num_cas(), 12);
            assert_eq!(s.fabric.num_routers(), 2);
            // 12 CAs + 2 routers x 2 linked ports each.
            assert_eq!(s.fabric.endports().len(), 16);
            assert_eq!(s.fabric.subnet_prefix, s.prefix);
        }
        let prefixes: Vec<u64> = m.subnets.iter().map(|s| s.prefix).collect();
        assert_eq!(m.subnet_by_prefix(prefixes[2]), Some(2));
    }

    #[test]
    fn a_router_port_linked_twice_is_refused() {
        let m = fat_tree_subnets(2, 2, 1, 1, 1).expect("generates");
        let mut subnets = m.subnets.clone();
        // The same subnet twice under another prefix: every router port is
        // now linked in two subnets.
        let mut dup = subnets[0].clone();
        dup.prefix = 0xfec0_0000_0000_00ff;
        dup.name = "dup".into();
        subnets.push(dup);
        let e = MultiFabric::from_subnets(subnets).expect_err("refused");
        assert!(e.to_string().contains("linked in subnets"), "{e}");
        let mut same = m.subnets.clone();
        same[1].prefix = same[0].prefix;
        let e = MultiFabric::from_subnets(same).expect_err("refused");
        assert!(e.to_string().contains("share the prefix"), "{e}");
    }
}
