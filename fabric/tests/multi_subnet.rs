//! Multi-subnet fabrics: every subnet of the generated setups routes and
//! verifies with the fat-tree engine (routers on top of the spines), and
//! the inter-subnet algorithms reach every cross-subnet pair.

use fabric::intersubnet::{self, Gid, GlobalView};
use fabric::multi::{tree_subnets, TreeSubnets};
use fabric::routing::{self, EngineOptions};
use fabric::verify;

#[test]
fn paper_subnets_route_with_ftree_on_one_vl() {
    for k in [2, 3, 6] {
        let m = tree_subnets(&TreeSubnets::paper(k).expect("valid")).expect("generates");
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
    let m = tree_subnets(&TreeSubnets::paper(3).expect("valid")).expect("generates");
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
