//! Flow simulation over the inter-subnet paper's setups: the ordering of
//! the algorithms the paper reports must hold on the routed tables.

use fabric::intersubnet;
use fabric::intersubnet::InterSubnetRoutes;
use fabric::multi::{TreeSubnets, tree_subnets};
use fabric::network::Network;
use fabric::pipeline::{self, Routed};
use fabric::routing::EngineKind;
use fabric::sim::{self, Uniform};
use fabric::verify::verify_global;

mod common;
use common::paper_subnets;

fn routes_of(routed: &Routed, algorithm: &str) -> InterSubnetRoutes {
    intersubnet::by_name(algorithm)
        .expect("known")
        .route(&routed.view)
        .unwrap_or_else(|e| panic!("{algorithm}: {e}"))
}

#[test]
fn random_rings_rank_prefix_below_issr_below_isfr() {
    for k in [2, 3, 6] {
        let m = paper_subnets(k);
        let routed = pipeline::route_subnets(&m, EngineKind::Ftree).expect("routes");
        let mut avg = Vec::new();
        for name in ["prefix", "issr", "isfr"] {
            let routes = routes_of(&routed, name);
            let net = Network::new(&m, routed.tables(), &routed.view, &routes).expect("network");
            assert_eq!(net.hosts().len(), 648);
            let r = sim::rings(&net, 8, 1).expect("simulates");
            // Shift permutations on a fat tree are non-blocking.
            assert!(
                (r.nor - 1.0).abs() < 1e-9 || name == "prefix",
                "k={k} {name}: NOR {}",
                r.nor
            );
            assert!(r.ror_min <= r.ror_avg && r.ror_avg <= r.ror_max);
            eprintln!("k={k} {name}: {r:?}");
            avg.push(r.ror_avg);
        }
        assert!(avg[0] < avg[1] && avg[1] < avg[2], "k={k}: {avg:?}");
    }
}

#[test]
fn local_uniform_traffic_does_not_depend_on_the_inter_subnet_algorithm() {
    let m = paper_subnets(2);
    let routed = pipeline::route_subnets(&m, EngineKind::Ftree).expect("routes");
    let u = Uniform {
        isp: 0.0,
        hot_spot: 0.0,
        samples: 2,
        seed: 3,
    };
    let mut seen = Vec::new();
    for name in ["prefix", "isfr"] {
        let routes = routes_of(&routed, name);
        let net = Network::new(&m, routed.tables(), &routed.view, &routes).expect("network");
        seen.push(sim::uniform(&net, &u).expect("simulates"));
    }
    assert_eq!(seen[0], seen[1]);
    assert!(seen[0] > 0.3 && seen[0] <= 1.0, "{seen:?}");
}

fn ring_of_subnets(k: u32, spines: u32) -> fabric::multi::MultiFabric {
    use fabric::multi::{Join, Wiring};
    tree_subnets(&TreeSubnets {
        subnets: k,
        leaves: 2,
        spines,
        hosts: 2,
        routers: k,
        router_links: 1,
        wiring: Wiring::All,
        join: Join::Ring,
    })
    .expect("generates")
}

#[test]
fn the_paper_setups_are_deadlock_free_across_subnets_with_every_algorithm() {
    let m = paper_subnets(3);
    let routed = pipeline::route_subnets(&m, EngineKind::Ftree).expect("routes");
    for name in ["prefix", "issr", "isfr"] {
        let routes = routes_of(&routed, name);
        let net = Network::new(&m, routed.tables(), &routed.view, &routes).expect("network");
        let g = verify_global(&net);
        assert!(g.ok(), "{name}: {g:?}");
        assert_eq!(g.pairs, 648 * 647);
        assert_eq!(g.vls_used, 1);
    }
}

#[test]
fn shortest_transit_on_a_ring_of_subnets_deadlocks_and_up_down_does_not() {
    use fabric::intersubnet::{Transit, issr_with_transit};
    // With two spines every router sits on both top switches of a subnet:
    // crossing one must not turn between them (no up*/down* route there,
    // and a cycle through local traffic with engines that have one).
    for (spines, engine) in [
        (1, EngineKind::Updn),
        (1, EngineKind::Ftree),
        (2, EngineKind::Ftree),
        (2, EngineKind::Lash),
    ] {
        let m = ring_of_subnets(5, spines);
        assert_eq!(m.routers.len(), 5);
        for r in &m.routers {
            assert_eq!(r.subnets().len(), 2, "each router joins two neighbours");
        }
        let routed = pipeline::route_subnets(&m, engine).expect("routes");
        // Subnets two apart share no router: their traffic crosses one.
        let naive = issr_with_transit(&routed.view, Transit::Shortest).expect("routes");
        let net = Network::new(&m, routed.tables(), &routed.view, &naive).expect("network");
        let g = verify_global(&net);
        assert_eq!(g.unreachable, 0, "{engine}: {g:?}");
        let cycle = g.cycle.expect("the clockwise transit routes close a cycle");
        assert!(cycle.iter().any(|c| c.contains("router")), "{cycle:?}");
        let ours = issr_with_transit(&routed.view, Transit::UpDown).expect("routes");
        let net = Network::new(&m, routed.tables(), &routed.view, &ours).expect("network");
        let g = verify_global(&net);
        assert!(g.ok(), "{engine}: {g:?}");
        // Router hops add no VL: the fabric needs what its subnets do.
        let subnet_vls = routed.routings.iter().map(|r| r.report().vls_used).max();
        assert_eq!(Some(g.vls_used as u32), subnet_vls, "{engine}");
        // The registered algorithms use the same transit policy.
        for name in ["issr", "isfr"] {
            let routes = routes_of(&routed, name);
            let net = Network::new(&m, routed.tables(), &routed.view, &routes).expect("network");
            let g = verify_global(&net);
            assert!(g.ok(), "{engine} {name}: {g:?}");
        }
    }
}

#[test]
fn packet_level_rings_on_the_paper_text_setup_rank_prefix_below_issr_below_isfr() {
    use fabric::sim::packet::Config;
    use fabric::sim::workload;
    let m = tree_subnets(&TreeSubnets::paper_text(2).expect("valid")).expect("generates");
    let routed = pipeline::route_subnets(&m, EngineKind::Ftree).expect("routes");
    let mut avg = Vec::new();
    for name in ["prefix", "issr", "isfr"] {
        let routes = routes_of(&routed, name);
        let net = Network::new(&m, routed.tables(), &routed.view, &routes).expect("network");
        let r = workload::rings(&net, Config::default(), 6, 1, 64 * 1024).expect("simulates");
        assert_eq!(r.deadlock, None, "{name}");
        // Shifts are non-blocking on a fat tree: the natural ring runs at
        // nearly the line rate, whatever the algorithm.
        assert!(r.stats.nor > 0.95, "{name}: NOR {}", r.stats.nor);
        avg.push(r.stats.ror_avg);
    }
    assert!(avg[0] < avg[1] && avg[1] < avg[2], "{avg:?}");
}

#[test]
fn multi_subnet_routes_never_deadlock_under_saturating_uniform_traffic() {
    use fabric::sim::packet::Config;
    use fabric::sim::workload::{Saturate, saturate};
    let m = tree_subnets(&TreeSubnets::paper_text(3).expect("valid")).expect("generates");
    let routed = pipeline::route_subnets(&m, EngineKind::Ftree).expect("routes");
    for name in ["prefix", "issr", "isfr"] {
        let routes = routes_of(&routed, name);
        let net = Network::new(&m, routed.tables(), &routed.view, &routes).expect("network");
        let load = Saturate {
            traffic: Uniform {
                isp: 0.5,
                hot_spot: 0.05,
                samples: 1,
                seed: 3,
            },
            message: 2048,
            min_packet: 84,
            warmup: 0,
            window: 1000 * 2048,
            skip_unroutable: false,
            mcast_share: 0.0,
        };
        let tight = Config {
            buffer: 2048,
            ..Config::default()
        };
        let got = saturate(&net, tight, &load).expect("simulates");
        assert_eq!(got.deadlock, None, "{name}");
        assert!(got.throughput > 0.0, "{name}");
    }
}
