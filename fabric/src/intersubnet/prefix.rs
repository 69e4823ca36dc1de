//! The OpenSM prefix-route baseline.

use super::{
    Choice, Context, Gid, GlobalView, InterSubnetRoutes, InterSubnetRouting, MapEntry, Mapping,
    Match, RouterPortView, RouterTable, Rule,
};
use crate::error::Result;

/// OpenSM's prefix routes: each remote subnet maps to one local router
/// port (`prefix-routes.conf`, one router per prefix; OpenSM's SA answers
/// a path to a remote GID with that router's port), and the remote
/// subnets of a subnet go to different routers where there are enough
/// ("each subnet in the topology uses a different ingress port locally",
/// the inter-subnet paper). Destinations of subnets no router reaches
/// directly fall to the default route, the first router port. No transit.
///
/// What the paper leaves open is a reading of its own:
/// - [`RouterPick`]: which router a subnet's SM names for each remote
///   prefix;
/// - [`Egress`]: how a router that has several ports into the
///   destination subnet forwards into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixBaseline {
    pub pick: RouterPick,
    pub egress: Egress,
}

/// Which router subnet `s` names for remote subnet `t`, among the routers
/// (ascending GUID) with ports in both, entered through its
/// lowest-numbered port in `s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouterPick {
    /// The `j`-th remote subnet of `s` (in subnet order) to the `j`-th
    /// router: every subnet names routers 0, 1, ... so a router's port
    /// into subnet `t` carries the traffic of every source that names it
    /// for `t`.
    Index,
    /// Router `(s + t) mod n` among those joining both: where every pair
    /// of subnets sees the same `n` routers and `n` is at least the number
    /// of subnets (the paper's setups), the remote subnets of a source get
    /// different routers and so do the sources of a destination, so no
    /// router port into a subnet carries two sources.
    Spread,
}

/// How a router forwards into a subnet it has several ports in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Egress {
    /// Always its first port there.
    First,
    /// Per destination LID over its ports there (`LID mod ports`), as a
    /// forwarding table spreads destinations.
    ByLid,
}

impl PrefixBaseline {
    /// The literal reading: [`RouterPick::Index`], [`Egress::First`].
    pub const OPENSM: PrefixBaseline = PrefixBaseline {
        pick: RouterPick::Index,
        egress: Egress::First,
    };

    /// Which of the `n` routers joining `si` and `ti` (the `j`-th remote
    /// subnet of `si`) subnet `si` names.
    fn router_for(&self, n: usize, si: usize, ti: usize, j: usize) -> Option<usize> {
        if n == 0 {
            return None;
        }
        Some(match self.pick {
            RouterPick::Index => j % n,
            RouterPick::Spread => (si + ti) % n,
        })
    }
}

impl InterSubnetRouting for PrefixBaseline {
    fn name(&self) -> &'static str {
        match (self.pick, self.egress) {
            (RouterPick::Index, Egress::First) => "prefix",
            (RouterPick::Index, Egress::ByLid) => "prefix-bylid",
            (RouterPick::Spread, _) => "prefix-spread",
        }
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
                let via: Vec<(u64, u16)> = routers
                    .values()
                    .filter_map(|ports| {
                        let here = ports.iter().find(|(sn, _)| *sn == si)?;
                        ports
                            .iter()
                            .any(|(sn, _)| *sn == ti)
                            .then_some((here.1.port_guid, here.1.lid))
                    })
                    .collect();
                let Some(k) = self.router_for(via.len(), si, ti, j) else {
                    continue;
                };
                let (guid, lid) = via[k];
                entries.extend(t.end_ports.iter().map(|e| MapEntry {
                    dest: Gid {
                        prefix: t.prefix,
                        guid: e.guid,
                    },
                    router_port_guid: guid,
                    router_port_lid: lid,
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
            .map(|(&guid, ports)| RouterTable {
                router_guid: guid,
                contexts: vec![Context {
                    ingress_ports: Vec::new(),
                    rules: self.rules(view, ports),
                }],
            })
            .collect();
        Ok(InterSubnetRoutes {
            algorithm: self.name().to_string(),
            mappings,
            routers: tables,
        })
    }
}

impl PrefixBaseline {
    /// A router's delivery rules: per end port of each subnet it joins,
    /// the port into that subnet [`Egress`] picks.
    fn rules(&self, view: &GlobalView, ports: &[(usize, &RouterPortView)]) -> Vec<Rule> {
        let mut rules = Vec::new();
        let mut seen = Vec::new();
        for &(ti, _) in ports {
            if seen.contains(&ti) {
                continue;
            }
            seen.push(ti);
            let into: Vec<u8> = ports
                .iter()
                .filter(|(sn, _)| *sn == ti)
                .map(|(_, p)| p.port)
                .collect();
            rules.extend(view.subnets[ti].end_ports.iter().map(|e| {
                let port = match self.egress {
                    Egress::First => into[0],
                    Egress::ByLid => into[e.lid as usize % into.len()],
                };
                Rule {
                    matches: Match::Gid(Gid {
                        prefix: view.subnets[ti].prefix,
                        guid: e.guid,
                    }),
                    next_lid: e.lid,
                    ports: vec![port],
                    choice: Choice::First,
                }
            }));
        }
        rules
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
        let r = PrefixBaseline::OPENSM.route(&view).expect("routes");
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

    /// On the paper's 6-subnet setup (12 routers, 6 ports per router into
    /// each subnet): the literal reading enters each subnet through 5
    /// router ports and one port per router; spread names a different
    /// router for every source of a destination subnet; per-LID egress
    /// uses every port a router has into the subnet.
    #[test]
    fn the_readings_spread_sources_over_routers_and_destinations_over_ports() {
        use crate::multi::TreeSubnets;
        let m = crate::multi::tree_subnets(&TreeSubnets::paper_text(6).expect("setup"))
            .expect("generates");
        let view = GlobalView::from_multi(&m);
        let routes = |b: PrefixBaseline| b.route(&view).expect("routes");
        let spread = PrefixBaseline {
            pick: RouterPick::Spread,
            egress: Egress::ByLid,
        };
        for (b, sources_share_a_router) in [(PrefixBaseline::OPENSM, true), (spread, false)] {
            let r = routes(b);
            // Per destination subnet, the router each source names for it.
            for (ti, t) in view.subnets.iter().enumerate() {
                let mut routers = Vec::new();
                for (si, map) in r.mappings.iter().enumerate().filter(|&(si, _)| si != ti) {
                    let port: std::collections::BTreeSet<u64> = map
                        .entries
                        .iter()
                        .filter(|e| e.dest.prefix == t.prefix)
                        .map(|e| e.router_port_guid)
                        .collect();
                    assert_eq!(port.len(), 1, "{}: subnet {si} names one port", b.name());
                    let p = port.into_iter().next().unwrap_or(0);
                    let rp = view.subnets[si]
                        .router_ports
                        .iter()
                        .find(|x| x.port_guid == p);
                    routers.push(rp.map(|x| x.router_guid).unwrap_or(0));
                }
                routers.sort_unstable();
                let n = routers.len();
                routers.dedup();
                assert_eq!(
                    routers.len() < n,
                    sources_share_a_router,
                    "{}: {routers:?}",
                    b.name()
                );
            }
        }
        // Egress: every port a router has into a subnet carries some
        // destinations with per-LID forwarding, only the first without.
        for (b, ports_used) in [(PrefixBaseline::OPENSM, 1), (spread, 6)] {
            let r = routes(b);
            for table in &r.routers {
                let mut by_prefix: std::collections::BTreeMap<u64, std::collections::BTreeSet<u8>> =
                    Default::default();
                for rule in &table.contexts[0].rules {
                    if let Match::Gid(g) = rule.matches {
                        by_prefix.entry(g.prefix).or_default().extend(&rule.ports);
                    }
                }
                assert!(
                    by_prefix.values().all(|p| p.len() == ports_used),
                    "{}",
                    b.name()
                );
            }
        }
    }

    /// A config names an algorithm as the command line and `name()` do.
    #[test]
    fn config_names_are_the_command_line_names() {
        use crate::intersubnet::AlgorithmKind;
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Config {
            algorithm: AlgorithmKind,
        }
        for k in AlgorithmKind::ALL {
            let text = format!("algorithm = \"{}\"\n", k.name());
            let c: Config = toml::from_str(&text).expect("the config reads the name");
            assert_eq!(c.algorithm, k);
            assert_eq!(toml::to_string(&c).ok(), Some(text));
            assert_eq!(k.name().parse::<AlgorithmKind>().ok(), Some(k));
        }
    }
}
