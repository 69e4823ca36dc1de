//! The OpenSM prefix-route baseline.

use super::{
    Choice, Context, Gid, GlobalView, InterSubnetRoutes, InterSubnetRouting, MapEntry, Mapping,
    Match, RouterTable, Rule,
};
use crate::error::Result;

/// OpenSM's prefix routes: each remote subnet maps to one local router
/// port (the lowest-numbered port of the lowest-GUID router that reaches it
/// directly); destinations of subnets no router reaches directly fall to
/// the default route, the first router port. Routers deliver into the
/// subnets they join through their first port there. No transit.
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
            for (ti, t) in view.subnets.iter().enumerate() {
                if ti == si {
                    continue;
                }
                // First router (ascending GUID) with ports in both subnets.
                let via = routers.values().find_map(|ports| {
                    let here = ports.iter().find(|(sn, _)| *sn == si)?;
                    ports.iter().any(|(sn, _)| *sn == ti).then_some(here.1)
                });
                let Some(p) = via else { continue };
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
    fn prefix_baseline_reaches_every_remote_end_port_through_one_port_per_subnet() {
        let m = fat_tree_subnets(3, 2, 2, 2, 2).expect("generates");
        let view = GlobalView::from_multi(&m);
        let r = PrefixBaseline.route(&view).expect("routes");
        assert_eq!(r.mappings.len(), 3);
        assert_eq!(r.routers.len(), 2);
        for (si, s) in view.subnets.iter().enumerate() {
            // 2 remote subnets x 4 end ports, all through one router port.
            let map = &r.mappings[si];
            assert_eq!(map.entries.len(), 8);
            let ports: std::collections::BTreeSet<u64> =
                map.entries.iter().map(|e| e.router_port_guid).collect();
            assert_eq!(ports.len(), 1, "prefix routes use one port for everything");
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
