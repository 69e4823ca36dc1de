//! The OpenSM prefix-route baseline.

use super::{
    Choice, Context, Gid, GlobalView, InterSubnetRoutes, InterSubnetRouting, MapEntry, Mapping,
    Match, RouterTable, Rule,
};
use crate::error::Result;

/// OpenSM's prefix routes: each remote subnet maps to one local router
/// port, and, as in the inter-subnet paper's setups ("each subnet in the
/// topology uses a different ingress port locally"), the remote subnets of
/// a subnet go to different routers where there are enough: the `j`-th
/// remote subnet (in subnet order) to the `j`-th router (ascending GUID,
/// cyclically) among those that reach it directly, through that router's
/// lowest-numbered port here. Destinations of subnets no router reaches
/// directly fall to the default route, the first router port. Routers
/// deliver into the subnets they join through their first port there. No
/// transit.
pub struct PrefixBaseline;

impl InterSubnetRouting for PrefixBaseline {
    fn name(&self) -> &'static str {
        "prefix"
    }
    fn description(&self) -> &'static str {
        "OpenSM baseline: one router port per remote subnet prefix"
    }
    fn route(&self, view: &GlobalView) -> Result<InterSubnetRoutes> {
        let routers = view.routers();
        let mut mappings = Vec::with_capacity(view.subnets.len());
        for (si, s) in view.subnets.iter().enumerate() {
            let mut entries = Vec::new();
            for (j, (ti, t)) in view
                .subnets
                .iter()
                .enumerate()
                .filter(|&(ti, _)| ti != si)
                .enumerate()
            {
                // Routers (ascending GUID) with ports in both subnets.
                let via: Vec<_> = routers
                    .values()
                    .filter_map(|ports| {
                        let here = ports.iter().find(|(sn, _)| *sn == si)?;
                        ports.iter().any(|(sn, _)| *sn == ti).then_some(here.1)
                    })
                    .collect();
                let Some(p) = via.get(j % via.len().max(1)).copied() else {
                    continue;
                };
                entries.extend(t.end_ports.iter().map(|e| MapEntry {
                    dest: Gid {
                        prefix: t.prefix,
                        guid: e.guid,
                    },
                    router_port_guid: p.port_guid,
                    router_port_lid: p.lid,
                }));
            }
            let defaults = s
                .router_ports
                .first()
                .map(|p| vec![p.port_guid])
                .unwrap_or_default();
            mappings.push(Mapping {
                prefix: s.prefix,
                entries,
                defaults,
            });
        }
        let tables = routers
            .iter()
            .map(|(&guid, ports)| {
                let mut rules = Vec::new();
                let mut seen = Vec::new();
                for &(ti, p) in ports {
                    if seen.contains(&ti) {
                        continue;
                    }
                    seen.push(ti);
                    rules.extend(view.subnets[ti].end_ports.iter().map(|e| Rule {
                        matches: Match::Gid(Gid {
                            prefix: view.subnets[ti].prefix,
                            guid: e.guid,
                        }),
                        next_lid: e.lid,
                        ports: vec![p.port],
                        choice: Choice::First,
                    }));
                }
                RouterTable {
                    router_guid: guid,
                    contexts: vec![Context {
                        ingress_ports: Vec::new(),
                        rules,
                    }],
                }
            })
            .collect();
        Ok(InterSubnetRoutes {
            algorithm: self.name().to_string(),
            mappings,
            routers: tables,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intersubnet::trace;
    use crate::multi::fat_tree_subnets;

    #[test]
    fn prefix_baseline_reaches_every_remote_end_port_through_one_port_per_remote_subnet() {
        let m = fat_tree_subnets(3, 2, 2, 2, 2).expect("generates");
        let view = GlobalView::from_multi(&m);
        let r = PrefixBaseline.route(&view).expect("routes");
        assert_eq!(r.mappings.len(), 3);
        assert_eq!(r.routers.len(), 2);
        for (si, s) in view.subnets.iter().enumerate() {
            // 2 remote subnets x 4 end ports; each remote subnet through
            // one router port, the two through different routers.
            let map = &r.mappings[si];
            assert_eq!(map.entries.len(), 8);
            let mut per_prefix = std::collections::BTreeMap::new();
            for e in &map.entries {
                per_prefix
                    .entry(e.dest.prefix)
                    .or_insert_with(std::collections::BTreeSet::new)
                    .insert(e.router_port_guid);
            }
            assert_eq!(per_prefix.len(), 2);
            assert!(per_prefix.values().all(|p| p.len() == 1), "{per_prefix:?}");
            let ports: std::collections::BTreeSet<u64> =
                map.entries.iter().map(|e| e.router_port_guid).collect();
            assert_eq!(ports.len(), 2, "one router per remote subnet");
            for src in &s.end_ports {
                for (di, d) in view.subnets.iter().enumerate() {
                    for dst in &d.end_ports {
                        let sg = Gid {
                            prefix: s.prefix,
                            guid: src.guid,
                        };
                        let dg = Gid {
                            prefix: d.prefix,
                            guid: dst.guid,
                        };
                        let path = trace(&view, &r, sg, dg).expect("reachable");
                        assert_eq!(path.len(), usize::from(si != di));
                        if let Some(c) = path.first() {
                            assert_eq!(c.to_subnet, di);
                            assert_eq!(c.next_lid, dst.lid);
                        }
                    }
                }
            }
        }
    }
}
