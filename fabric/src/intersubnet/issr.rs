//! ISSR: inter-subnet source routing.

use super::transit::{ports_toward, router_tables};
use super::{
    Choice, Gid, GlobalView, InterSubnetRoutes, InterSubnetRouting, MapEntry, Mapping, Match,
    RouterPortView, Rule, Transit, subnet_next_hops,
};
use crate::error::Result;
use std::collections::BTreeMap;

/// ISSR (inter-subnet source routing, the paper's section 4.1): the mapping
/// file names a full destination GID, and the destinations of each remote
/// subnet are dealt round robin over every local router port that reaches
/// it directly, alternating routers first (router A port 1, router B port
/// 1, router A port 2, ...). Routers relay by a hash of (source LID, next
/// LID) over all their ports toward the destination's subnet. The default
/// route ('*') lists the first port of every router.
pub struct Issr;

impl InterSubnetRouting for Issr {
    fn name(&self) -> &'static str {
        "issr"
    }
    fn description(&self) -> &'static str {
        "ISSR: per-GID router ports round robin, routers hash (source, destination) over their ports"
    }
    fn route(&self, view: &GlobalView) -> Result<InterSubnetRoutes> {
        issr_with_transit(view, Transit::UpDown)
    }
}

/// ISSR with a chosen transit policy ([`Issr`] uses [`Transit::UpDown`]).
pub fn issr_with_transit(view: &GlobalView, transit: Transit) -> Result<InterSubnetRoutes> {
    let routers = view.routers();
    let next = subnet_next_hops(view, transit);
    let mappings = issr_mappings(view, &routers, &next);
    let tables = router_tables(view, &routers, &next, |_, ti, out| {
        let t = &view.subnets[ti];
        t.end_ports
            .iter()
            .map(|e| Rule {
                matches: Match::Gid(Gid {
                    prefix: t.prefix,
                    guid: e.guid,
                }),
                next_lid: e.lid,
                ports: out.to_vec(),
                choice: Choice::Hash,
            })
            .collect()
    });
    Ok(InterSubnetRoutes {
        algorithm: "issr".to_string(),
        mappings,
        routers: tables,
    })
}

/// ISSR's mapping files: each remote subnet's destinations dealt round
/// robin over the local router ports toward its next subnet; one default
/// port per router.
pub(super) fn issr_mappings(
    view: &GlobalView,
    routers: &BTreeMap<u64, Vec<(usize, &RouterPortView)>>,
    next: &[Vec<Option<usize>>],
) -> Vec<Mapping> {
    let mut mappings = Vec::with_capacity(view.subnets.len());
    for (si, s) in view.subnets.iter().enumerate() {
        let mut entries = Vec::new();
        for (ti, t) in view.subnets.iter().enumerate() {
            let Some(y) = next[si][ti] else { continue };
            let cand = ports_toward(routers, si, y);
            if cand.is_empty() {
                continue;
            }
            entries.extend(t.end_ports.iter().enumerate().map(|(k, e)| {
                let p = cand[k % cand.len()];
                MapEntry {
                    dest: Gid {
                        prefix: t.prefix,
                        guid: e.guid,
                    },
                    router_port_guid: p.port_guid,
                    router_port_lid: p.lid,
                }
            }));
        }
        let mut defaults = Vec::new();
        let mut seen = Vec::new();
        for p in &s.router_ports {
            if !seen.contains(&p.router_guid) {
                seen.push(p.router_guid);
                defaults.push(p.port_guid);
            }
        }
        mappings.push(Mapping {
            prefix: s.prefix,
            entries,
            defaults,
        });
    }
    mappings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intersubnet::trace;
    use crate::multi::fat_tree_subnets;

    #[test]
    fn issr_spreads_destinations_over_every_router_port_and_reaches_all_pairs() {
        let m = fat_tree_subnets(3, 2, 2, 4, 2).expect("generates");
        let view = GlobalView::from_multi(&m);
        let r = Issr.route(&view).expect("routes");
        for (si, s) in view.subnets.iter().enumerate() {
            // 2 routers x 2 ports here, 16 remote hosts: 4 each.
            let mut per: BTreeMap<u64, usize> = BTreeMap::new();
            for e in &r.mappings[si].entries {
                *per.entry(e.router_port_guid).or_default() += 1;
            }
            assert_eq!(per.len(), 4, "every local router port carries traffic");
            assert!(per.values().all(|&n| n == 4), "{per:?}");
            assert_eq!(r.mappings[si].defaults.len(), 2, "one default per router");
            for src in &s.end_ports {
                for d in view.subnets.iter().filter(|d| d.prefix != s.prefix) {
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
                        assert_eq!(path.len(), 1);
                        assert_eq!(path[0].next_lid, dst.lid);
                    }
                }
            }
        }
        // Routers use both of their ports into a subnet.
        let t = &r.routers[0];
        assert!(
            t.contexts[0]
                .rules
                .iter()
                .all(|r| r.ports.len() == 2 && r.choice == Choice::Hash)
        );
    }
}
