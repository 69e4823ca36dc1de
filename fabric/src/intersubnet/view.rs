//! What the controller learns from the agents' reports: each subnet's end
//! ports and router ports, gathered into one [`GlobalView`].

use crate::model::NodeKind;
use crate::multi::MultiFabric;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndPortView {
    pub guid: u64,
    pub lid: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterPortView {
    pub router_guid: u64,
    pub port: u8,
    pub port_guid: u64,
    pub lid: u16,
    /// Node GUID of the switch the port links to (0 when not reported).
    pub switch_guid: u64,
    /// Destination LIDs whose primary fat-tree route comes down through
    /// the switch behind this port (ISFR); empty when unknown.
    pub primary_lids: Vec<u16>,
}

/// One subnet as its agent reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetView {
    pub name: String,
    pub prefix: u64,
    /// CA ports (the destinations of inter-subnet traffic).
    pub end_ports: Vec<EndPortView>,
    pub router_ports: Vec<RouterPortView>,
}

/// Everything the controller knows: the subnets, in ascending prefix order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlobalView {
    pub subnets: Vec<SubnetView>,
}

impl GlobalView {
    /// Sorts subnets by prefix and their ports by GUID / (router, port), so
    /// the same reports in any arrival order give the same routes. A port
    /// GUID reported twice in one subnet keeps only its lowest LID: a GID
    /// names one port, and two rules for one GID make a router refuse the
    /// whole table.
    pub fn normalized(mut self) -> Self {
        self.subnets.sort_by_key(|s| s.prefix);
        for s in &mut self.subnets {
            s.end_ports.sort_by_key(|e| (e.guid, e.lid));
            s.end_ports.dedup_by_key(|e| e.guid);
            s.router_ports.sort_by_key(|r| (r.router_guid, r.port));
        }
        self
    }

    /// The view of a generated or parsed multi-subnet fabric, as its agents
    /// would report it.
    pub fn from_multi(m: &MultiFabric) -> Self {
        let subnets = m
            .subnets
            .iter()
            .enumerate()
            .map(|(si, s)| {
                let f = &s.fabric;
                let end_ports = f
                    .endports()
                    .iter()
                    .filter(|&&e| f.kind(f.node_of(e)) == NodeKind::Ca)
                    .map(|&e| EndPortView {
                        guid: f.port_guid(e),
                        lid: f.lid_of_slot(e),
                    })
                    .collect();
                let router_ports = m
                    .routers
                    .iter()
                    .flat_map(|r| {
                        r.ports
                            .iter()
                            .filter(move |p| p.subnet == si)
                            .map(move |p| RouterPortView {
                                router_guid: r.guid,
                                port: p.port,
                                port_guid: p.port_guid,
                                lid: p.lid,
                                switch_guid: p.switch_guid,
                                primary_lids: Vec::new(),
                            })
                    })
                    .collect();
                SubnetView {
                    name: s.name.clone(),
                    prefix: s.prefix,
                    end_ports,
                    router_ports,
                }
            })
            .collect();
        GlobalView { subnets }.normalized()
    }

    /// Records ISFR's primary destinations of one subnet's router ports
    /// (as [`super::primary_lids`] computes them), by router port GUID.
    pub fn set_primary(&mut self, prefix: u64, primary: &BTreeMap<u64, Vec<u16>>) {
        if let Some(s) = self.subnets.iter_mut().find(|s| s.prefix == prefix) {
            for p in &mut s.router_ports {
                p.primary_lids = primary.get(&p.port_guid).cloned().unwrap_or_default();
            }
        }
    }

    /// Routers seen in any subnet, with their ports per subnet index.
    pub fn routers(&self) -> BTreeMap<u64, Vec<(usize, &RouterPortView)>> {
        let mut m: BTreeMap<u64, Vec<(usize, &RouterPortView)>> = BTreeMap::new();
        for (si, s) in self.subnets.iter().enumerate() {
            for p in &s.router_ports {
                m.entry(p.router_guid).or_default().push((si, p));
            }
        }
        for v in m.values_mut() {
            v.sort_by_key(|(_, p)| p.port);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intersubnet::{Match, registry};
    use crate::multi::fat_tree_subnets;
    use std::collections::HashSet;

    #[test]
    fn a_port_guid_reported_twice_gives_one_rule_per_gid() {
        let m = fat_tree_subnets(2, 1, 1, 2, 1).expect("generates");
        let mut view = GlobalView::from_multi(&m);
        // Subnet 1 reports its first port GUID a second time, under a
        // higher LID.
        let dup = view.subnets[1].end_ports[0].clone();
        view.subnets[1].end_ports.push(EndPortView {
            guid: dup.guid,
            lid: dup.lid + 100,
        });
        let view = view.normalized();
        let guids: Vec<u64> = view.subnets[1].end_ports.iter().map(|e| e.guid).collect();
        assert_eq!(guids.len(), 2);
        assert_ne!(guids[0], guids[1]);
        let kept = view.subnets[1]
            .end_ports
            .iter()
            .find(|e| e.guid == dup.guid);
        assert_eq!(kept.map(|e| e.lid), Some(dup.lid), "the lowest LID stays");
        for algo in registry() {
            let routes = algo.route(&view).expect("routes");
            for t in &routes.routers {
                for c in &t.contexts {
                    let mut seen: HashSet<Match> = HashSet::new();
                    assert!(
                        c.rules.iter().all(|r| seen.insert(r.matches)),
                        "{}: two rules for one destination",
                        algo.name()
                    );
                }
            }
        }
    }
}
