//! Multi-subnet fabrics: every subnet of the generated setups routes and
//! verifies with the fat-tree engine (routers on top of the spines), and
//! the inter-subnet algorithms reach every cross-subnet pair.

use fabric::intersubnet::{self, Gid, GlobalView};
use fabric::routing::{self, EngineOptions};
use fabric::verify;

mod common;
use common::paper_subnets;

#[test]
fn paper_subnets_route_with_ftree_on_one_vl() {
    for k in [2, 3, 6] {
        let m = paper_subnets(k);
        for s in &m.subnets {
            let r = routing::by_name("ftree")
                .expect("registered")
                .route(&s.fabric, &EngineOptions::default())
                .unwrap_or_else(|e| panic!("k={k} {}: {e}", s.name));
            let rep = verify::verify(&s.fabric, &r);
            assert!(rep.ok(), "k={k} {}: {:?}", s.name, rep.broken_examples);
            assert_eq!(rep.vls_used, 1);
            assert_eq!(rep.max_hops, 2, "leaf - spine - leaf");
        }
    }
}

#[test]
fn every_algorithm_reaches_every_cross_subnet_pair_of_the_paper_setup() {
    let m = paper_subnets(3);
    let view = GlobalView::from_multi(&m);
    for alg in intersubnet::registry() {
        let routes = alg.route(&view).expect("routes");
        let tracer = intersubnet::Tracer::new(&view, &routes);
        let mut n = 0;
        for s in &view.subnets {
            for d in view.subnets.iter().filter(|d| d.prefix != s.prefix) {
                // A sample of sources and every destination.
                for src in s.end_ports.iter().step_by(17) {
                    for dst in &d.end_ports {
                        let path = tracer
                            .trace(
                                Gid {
                                    prefix: s.prefix,
                                    guid: src.guid,
                                },
                                Gid {
                                    prefix: d.prefix,
                                    guid: dst.guid,
                                },
                            )
                            .unwrap_or_else(|e| panic!("{}: {e}", alg.name()));
                        assert_eq!(path.last().map(|c| c.next_lid), Some(dst.lid));
                        n += 1;
                    }
                }
            }
        }
        assert!(n > 1000, "{}: {n} pairs", alg.name());
    }
}

#[test]
fn isfr_gives_every_destination_a_dedicated_down_port_on_its_primary_router() {
    use std::collections::BTreeMap;
    let m = paper_subnets(3);
    let mut view = GlobalView::from_multi(&m);
    for s in &m.subnets {
        let r = routing::by_name("ftree")
            .expect("registered")
            .route(&s.fabric, &EngineOptions::default())
            .expect("ftree routes");
        view.set_primary(s.prefix, &intersubnet::primary_lids(&s.fabric, &r.lfts));
    }
    // Every CA of every subnet has primary ports, all on one router.
    let mut primary_router: BTreeMap<(u64, u16), u64> = BTreeMap::new();
    for s in &view.subnets {
        for e in &s.end_ports {
            let owners: std::collections::BTreeSet<u64> = s
                .router_ports
                .iter()
                .filter(|p| p.primary_lids.contains(&e.lid))
                .map(|p| p.router_guid)
                .collect();
            assert_eq!(owners.len(), 1, "LID {} of {}", e.lid, s.name);
            primary_router.insert((s.prefix, e.lid), *owners.iter().next().unwrap());
        }
    }
    let isfr = intersubnet::by_name("isfr").expect("registered");
    let routes = isfr.route(&view).expect("routes");
    let tracer = intersubnet::Tracer::new(&view, &routes);
    // Destinations per (router, down port): ftree spreads main paths evenly
    // over the spines, and the router over its parallel links.
    let mut per_port: BTreeMap<(u64, u8), usize> = BTreeMap::new();
    for s in &view.subnets {
        for d in view.subnets.iter().filter(|d| d.prefix != s.prefix) {
            for (k, dst) in d.end_ports.iter().enumerate() {
                let src = &s.end_ports[k % s.end_ports.len()];
                let path = tracer
                    .trace(
                        Gid {
                            prefix: s.prefix,
                            guid: src.guid,
                        },
                        Gid {
                            prefix: d.prefix,
                            guid: dst.guid,
                        },
                    )
                    .expect("reachable");
                assert_eq!(path.len(), 1);
                let c = &path[0];
                assert_eq!(
                    c.router_guid,
                    primary_router[&(d.prefix, dst.lid)],
                    "through the primary router"
                );
                assert_eq!(c.next_lid, dst.lid);
                let down = d
                    .router_ports
                    .iter()
                    .find(|p| p.router_guid == c.router_guid && p.port == c.egress_port)
                    .expect("egress port in the destination subnet");
                assert!(down.primary_lids.contains(&dst.lid), "dedicated down port");
                *per_port.entry((c.router_guid, c.egress_port)).or_default() += 1;
            }
        }
    }
    let max = per_port.values().copied().max().unwrap_or(0);
    let min = per_port.values().copied().min().unwrap_or(0);
    assert!(
        max <= 2 * min.max(1),
        "down ports unevenly used: {min}..{max}"
    );
}
