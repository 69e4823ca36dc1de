//! Fabrics of several subnets joined by IB routers.
//!
//! Each subnet is an ordinary [`Fabric`] with its own LID space and subnet
//! prefix. A router appears in every subnet it joins as a router node with
//! the same node GUID; in each subnet only its ports that sit there are
//! linked. [`MultiFabric::from_subnets`] finds the routers by those GUIDs,
//! which is all a per-subnet agent can see too.

use crate::error::{Error, Result};
use crate::model::{Fabric, FabricBuilder, NONE, NodeKind};
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
    /// Node GUID of the switch the port links to.
    pub switch_guid: u64,
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
                        switch_guid: f.guid(f.node_of(f.remote(slot))),
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

/// How routers sit on top of the subnets' spines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wiring {
    /// Every router links every spine of every subnet.
    All,
    /// Router `r` links spine `r mod spines` of every subnet: the routers
    /// take the place of a three-level fat tree's top switches, one per
    /// spine position, as in the inter-subnet paper's setups.
    Stripe,
}

/// Which subnets each router joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// Every router joins every subnet: one router hop between any two.
    All,
    /// Router `r` joins subnets `r mod (k-1)` and the next one: a chain,
    /// where traffic between distant subnets crosses transit subnets.
    Chain,
    /// As `Chain`, plus routers joining the last subnet to the first.
    Ring,
}

/// Two-level fat-tree subnets joined by routers on top.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeSubnets {
    pub subnets: u32,
    /// Leaf switches per subnet, each with `hosts` HCAs and one link to
    /// every spine of its subnet.
    pub leaves: u32,
    pub spines: u32,
    pub hosts: u32,
    pub routers: u32,
    /// Parallel links between a router and each spine it joins.
    pub router_links: u32,
    pub wiring: Wiring,
    pub join: Join,
}

impl TreeSubnets {
    /// The inter-subnet paper's setups: the 648-HCA fabric of 36-port
    /// switches (36 leaves of 18 HCAs, 18 switches above each leaf group)
    /// cut into `k` subnets (2, 3 or 6) of `36/k` leaves and 18 spines;
    /// the 18 top switches of the three-level tree are routers, router `r`
    /// linked to spine `r` of every subnet by `36/k` links, so that every
    /// spine has as many links up as down and the whole stays non-blocking.
    pub fn paper(k: u32) -> Result<Self> {
        if k == 0 || 36 % k != 0 {
            return Err(Error::Multi(format!(
                "the 648-HCA setup splits into a number of subnets dividing 36 (2, 3, 6 in the paper), not {k}"
            )));
        }
        Ok(Self {
            subnets: k,
            leaves: 36 / k,
            spines: 18,
            hosts: 18,
            routers: 18,
            router_links: 36 / k,
            wiring: Wiring::Stripe,
            join: Join::All,
        })
    }
}

/// Which reading of the inter-subnet paper's setups to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum PaperLayout {
    /// As the text sizes them: 72 HCAs per subnet (`TreeSubnets::paper_text`).
    Text,
    /// The whole 648-HCA system cut into K subnets (`TreeSubnets::paper`).
    Ports648,
}

impl TreeSubnets {
    /// The paper's setup with `k` subnets in the given reading.
    pub fn paper_setup(layout: PaperLayout, k: u32) -> Result<Self> {
        match layout {
            PaperLayout::Text => Self::paper_text(k),
            PaperLayout::Ports648 => Self::paper(k),
        }
    }

    /// The inter-subnet paper's setups as its text sizes them: "a 144-node
    /// fabric" for 2 subnets, "216-node" for 3, each source reaching "11
    /// [nodes] at the local switch": `k` subnets of 72 HCAs, 6 leaves of 12
    /// HCAs with 12 links up, 12 spines with one link to every leaf; the
    /// top of the three-level tree is 12 routers, router `r` linked to
    /// spine `r` of every subnet by 6 links (as many up as down, so the
    /// whole stays non-blocking; with 6 subnets a router has 36 ports, the
    /// radix of the 648-port system's switches the paper starts from).
    pub fn paper_text(k: u32) -> Result<Self> {
        if k == 0 || k > 6 {
            return Err(Error::Multi(format!(
                "the paper's 72-HCA subnets join through 36-port routers: 1 to 6 subnets, not {k}"
            )));
        }
        Ok(Self {
            subnets: k,
            leaves: 6,
            spines: 12,
            hosts: 12,
            routers: 12,
            router_links: 6,
            wiring: Wiring::Stripe,
            join: Join::All,
        })
    }
}

/// `subnets` two-level fat trees (`leaves` leaves with `hosts` HCAs each,
/// `spines` spines) joined by `routers` routers on top: every router has one
/// port to every spine of every subnet, as in the inter-subnet paper's
/// setups where routers take the place of a three-level fat tree's top
/// switches. See [`tree_subnets`] for other wirings.
pub fn fat_tree_subnets(
    subnets: u32,
    leaves: u32,
    spines: u32,
    hosts: u32,
    routers: u32,
) -> Result<MultiFabric> {
    tree_subnets(&TreeSubnets {
        subnets,
        leaves,
        spines,
        hosts,
        routers,
        router_links: 1,
        wiring: Wiring::All,
        join: Join::All,
    })
}

/// The subnets each router joins: all of them, two neighbours on a
/// chain, or two neighbours on a ring.
fn router_joins(join: Join, subnets: u32, routers: u32) -> Vec<Vec<u32>> {
    (0..routers)
        .map(|r| match join {
            Join::All => (0..subnets).collect(),
            Join::Chain if subnets > 1 => {
                let p = r % (subnets - 1);
                vec![p, p + 1]
            }
            Join::Ring if subnets > 2 => {
                let p = r % subnets;
                let mut v = vec![p, (p + 1) % subnets];
                v.sort_unstable();
                v
            }
            _ => (0..subnets).collect(),
        })
        .collect()
}

/// Builds [`TreeSubnets`]. Port numbering: leaf hosts on `1..=hosts`, then
/// one up-link per spine; spine ports `1..=leaves` go down, then the router
/// links, grouped by router; router ports grouped by subnet, then spine,
/// then parallel link. GUIDs are unique across the whole fabric: the subnet
/// number is bits 24..32 of switch and CA GUIDs.
pub fn tree_subnets(t: &TreeSubnets) -> Result<MultiFabric> {
    let bad = |what: &str| Err(Error::Multi(what.to_string()));
    let &TreeSubnets {
        subnets,
        leaves,
        spines,
        hosts,
        routers,
        router_links,
        wiring,
        join,
    } = t;
    if subnets == 0 || leaves == 0 || spines == 0 || hosts == 0 || router_links == 0 {
        return bad("subnets, leaves, spines, hosts and router links must all be at least 1");
    }
    if subnets > 255 {
        return bad("at most 255 subnets");
    }
    let joins = router_joins(join, subnets, routers);
    if join != Join::All && routers < subnets.saturating_sub(1) + u32::from(join == Join::Ring) {
        return bad("a chain of k subnets needs at least k-1 routers, a ring k");
    }
    // Routers each spine links (in a subnet they join), and spines each
    // router links per subnet.
    let per_spine_in = |sn: u32| -> Vec<Vec<u32>> {
        (0..spines)
            .map(|s| {
                (0..routers)
                    .filter(|&r| joins[r as usize].contains(&sn))
                    .filter(|&r| wiring == Wiring::All || r % spines == s)
                    .collect()
            })
            .collect()
    };
    let per_spine: Vec<Vec<u32>> = (0..subnets)
        .map(per_spine_in)
        .max_by_key(|v| v.iter().map(Vec::len).max().unwrap_or(0))
        .unwrap_or_default();
    let per_router: Vec<Vec<u32>> = (0..routers)
        .map(|r| match wiring {
            Wiring::All => (0..spines).collect(),
            Wiring::Stripe => vec![r % spines],
        })
        .collect();
    let spine_radix = leaves as u64
        + per_spine.iter().map(|v| v.len()).max().unwrap_or(0) as u64 * router_links as u64;
    if hosts as u64 + spines as u64 > 254 || spine_radix > 254 {
        return bad("switch radix above 254: fewer hosts, spines, leaves, routers or router links");
    }
    let router_radix = joins.iter().map(Vec::len).max().unwrap_or(0) as u64
        * per_router.iter().map(|v| v.len()).max().unwrap_or(0) as u64
        * router_links as u64;
    if router_radix > 254 {
        return bad(
            "router radix above 254 (subnets x spines per router x links): fewer subnets, spines or links",
        );
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
                    spine_radix as u8,
                )
            })
            .collect();
        let per_spine = per_spine_in(sn);
        let rt: Vec<_> = (0..routers)
            .filter(|&r| joins[r as usize].contains(&sn))
            .map(|r| {
                let guid = 0x0004_0000_0000_0000 | (r as u64) << 16;
                let node = b.add_node(
                    NodeKind::Router,
                    guid,
                    format!("router{r}"),
                    router_radix as u8,
                );
                (r, node)
            })
            .collect();
        let link = |b: &mut FabricBuilder, a, pa: u32, z, pz: u32| {
            b.connect(a, pa as u8, z, pz as u8)
                .map_err(|e| Error::Multi(e.to_string()))
        };
        for (l, &ln) in leaf.iter().enumerate() {
            for h in 0..hosts {
                let guid = 0x0001_0000_0000_0000 | tag | ((l as u64) << 8 | h as u64) << 4;
                let ca = b.add_node(NodeKind::Ca, guid, format!("sn{sn}_h{l}_{h}"), 1);
                link(&mut b, ca, 1, ln, h + 1)?;
            }
            for (s, &spn) in spine.iter().enumerate() {
                link(&mut b, ln, hosts + 1 + s as u32, spn, l as u32 + 1)?;
            }
        }
        for &(r, rn) in &rt {
            let r = r as usize;
            let mine = &per_router[r];
            // This subnet's place among the router's subnets.
            let place = joins[r].iter().position(|&x| x == sn).unwrap_or(0) as u32;
            for (si, &s) in mine.iter().enumerate() {
                let at = per_spine[s as usize]
                    .iter()
                    .position(|&x| x == r as u32)
                    .unwrap_or(0) as u32;
                for m in 0..router_links {
                    let rport = 1 + (place * mine.len() as u32 + si as u32) * router_links + m;
                    let sport = leaves + 1 + at * router_links + m;
                    link(&mut b, rn, rport, spine[s as usize], sport)?;
                }
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

    /// HCAs in all, routers, ports per router, and linked ports of every
    /// leaf and spine (as many up as down: non-blocking).
    fn assert_shape(
        t: &TreeSubnets,
        hcas: usize,
        routers: usize,
        ports: usize,
        leaf: usize,
        spine: usize,
    ) {
        let m = tree_subnets(t).expect("generates");
        assert_eq!(m.subnets.len(), t.subnets as usize);
        let total: usize = m.subnets.iter().map(|s| s.fabric.num_cas()).sum();
        assert_eq!(total, hcas);
        assert_eq!(m.routers.len(), routers);
        for r in &m.routers {
            assert_eq!(r.ports.len(), ports, "router {}", r.name);
            assert_eq!(r.subnets().len(), t.subnets as usize);
        }
        for s in &m.subnets {
            let f = &s.fabric;
            for &sw in f.switches() {
                let linked = f
                    .port_slots(sw)
                    .filter(|&p| f.remote(p) != crate::model::NONE)
                    .count();
                let want = if f.desc(sw).contains("leaf") {
                    leaf
                } else {
                    spine
                };
                assert_eq!(linked, want, "{}", f.desc(sw));
            }
        }
    }

    #[test]
    fn the_paper_setups_hold_648_hcas_and_stay_non_blocking() {
        for k in [2, 3, 6] {
            // Leaves: 18 HCAs + 18 up; spines: 36/k down + 36/k up; routers:
            // 36/k links to one spine of each of k subnets.
            let t = TreeSubnets::paper(k).expect("valid");
            assert_shape(&t, 648, 18, 36, 36, 2 * 36 / k as usize);
        }
        assert!(TreeSubnets::paper(5).is_err());
    }

    #[test]
    fn the_paper_text_setups_hold_72_hcas_per_subnet_12_per_leaf() {
        for k in [2, 3, 6] {
            // Leaves: 12 HCAs + 12 up; spines: 6 down + 6 up; routers: 6
            // links to one spine of each subnet (36 ports at k = 6).
            let t = TreeSubnets::paper_text(k).expect("valid");
            assert_shape(&t, 72 * k as usize, 12, 6 * k as usize, 24, 12);
        }
        assert!(TreeSubnets::paper_text(7).is_err());
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
