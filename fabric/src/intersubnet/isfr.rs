//! ISFR: inter-subnet fat-tree routing.

use super::issr::issr_mappings;
use super::transit::router_tables;
use super::{
    Choice, Gid, GlobalView, InterSubnetRoutes, InterSubnetRouting, MapEntry, Mapping, Match,
    RouterPortView, Rule, Transit, subnet_next_hops,
};
use crate::error::Result;
use std::collections::HashMap;

/// ISFR (inter-subnet fat-tree routing, the paper's section 4.2): with
/// fat-tree routing in every subnet and routers on top, each destination's
/// primary route comes down through one top switch; the router ports on
/// that switch ([`RouterPortView::primary_lids`], reported by the agents)
/// are the destination's dedicated down ports. Traffic toward it enters the
/// router that owns them (through its ports in the source subnet, spread
/// over the destination's index) and leaves on its down port: the routes
/// are those of one fat tree with routers in place of its top switches.
/// Destinations without primary ports (a subnet not routed as a fat tree)
/// get ISSR's choices.
pub struct Isfr;

impl InterSubnetRouting for Isfr {
    fn name(&self) -> &'static str {
        "isfr"
    }
    fn description(&self) -> &'static str {
        "ISFR: each destination through the router on its fat-tree primary path, dedicated down port; ISSR where a subnet is not a fat tree"
    }
    fn route(&self, view: &GlobalView) -> Result<InterSubnetRoutes> {
        let routers = view.routers();
        let next = subnet_next_hops(view, Transit::UpDown);
        let issr = issr_mappings(view, &routers, &next);
        // (subnet, destination LID) -> its primary ports (router, port),
        // ascending.
        let mut primary: HashMap<(usize, u16), Vec<(u64, u8)>> = HashMap::new();
        for (ti, t) in view.subnets.iter().enumerate() {
            for p in &t.router_ports {
                for &l in &p.primary_lids {
                    primary
                        .entry((ti, l))
                        .or_default()
                        .push((p.router_guid, p.port));
                }
            }
        }
        for v in primary.values_mut() {
            v.sort_unstable();
        }
        let mut mappings = Vec::with_capacity(view.subnets.len());
        for (si, s) in view.subnets.iter().enumerate() {
            let fallback: HashMap<Gid, &MapEntry> =
                issr[si].entries.iter().map(|e| (e.dest, e)).collect();
            // Each router's ports in this subnet, looked up per destination.
            let here_of: HashMap<u64, Vec<&RouterPortView>> = routers
                .iter()
                .map(|(&g, ps)| {
                    let here = ps.iter().filter(|(sn, _)| *sn == si).map(|(_, p)| *p);
                    (g, here.collect())
                })
                .collect();
            let mut entries = Vec::new();
            for (ti, t) in view.subnets.iter().enumerate() {
                if ti == si {
                    continue;
                }
                // Destinations dealt so far to each router: the next one
                // takes the router's next port, so the destinations of one
                // router spread over all its ports here (an index over all
                // destinations would put a whole leaf's worth on one port
                // when the router count divides the hosts per leaf).
                let mut dealt: HashMap<u64, usize> = HashMap::new();
                for d in &t.end_ports {
                    let dest = Gid {
                        prefix: t.prefix,
                        guid: d.guid,
                    };
                    let via = primary.get(&(ti, d.lid)).and_then(|ps| {
                        let here = here_of.get(&ps[0].0)?;
                        let n = dealt.entry(ps[0].0).or_default();
                        *n += 1;
                        (!here.is_empty()).then(|| here[(*n - 1) % here.len()])
                    });
                    match via {
                        Some(p) => entries.push(MapEntry {
                            dest,
                            router_port_guid: p.port_guid,
                            router_port_lid: p.lid,
                        }),
                        None => {
                            if let Some(e) = fallback.get(&dest) {
                                entries.push((*e).clone());
                            }
                        }
                    }
                }
            }
            mappings.push(Mapping {
                prefix: s.prefix,
                entries,
                defaults: issr[si].defaults.clone(),
            });
        }
        let tables = router_tables(view, &routers, &next, |guid, ti, all| {
            // Same dealing as the mappings: the k-th destination this
            // router owns takes its k-th primary port.
            let mut dealt = 0usize;
            let t = &view.subnets[ti];
            t.end_ports
                .iter()
                .map(|e| {
                    let mine: Vec<u8> = primary
                        .get(&(ti, e.lid))
                        .map(|ps| ps.iter().filter(|p| p.0 == guid).map(|p| p.1).collect())
                        .unwrap_or_default();
                    let matches = Match::Gid(Gid {
                        prefix: t.prefix,
                        guid: e.guid,
                    });
                    if mine.is_empty() {
                        Rule {
                            matches,
                            next_lid: e.lid,
                            ports: all.to_vec(),
                            choice: Choice::Hash,
                        }
                    } else {
                        dealt += 1;
                        Rule {
                            matches,
                            next_lid: e.lid,
                            ports: vec![mine[(dealt - 1) % mine.len()]],
                            choice: Choice::First,
                        }
                    }
                })
                .collect()
        });
        Ok(InterSubnetRoutes {
            algorithm: self.name().to_string(),
            mappings,
            routers: tables,
        })
    }
}
