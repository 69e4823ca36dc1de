//! The compositional whole-fabric check (`verify::compose`, from the
//! subnets' dependency summaries) agrees with the all-pairs check
//! (`verify::verify_global`) on every fabric here: the same unreachable
//! pairs, a cycle exactly when the all-pairs check finds one.

use fabric::intersubnet::{AlgorithmKind, InterSubnetRoutes, Transit, issr_with_transit};
use fabric::model::{FabricBuilder, NodeKind};
use fabric::multi::{
    Join, MultiFabric, Subnet, TreeSubnets, Wiring, generated_prefix, tree_subnets,
};
use fabric::network::Network;
use fabric::pipeline::{self, Routed};
use fabric::routing::EngineKind;
use fabric::verify::{ComposeReport, DependencySummary, GlobalReport, compose, verify_global};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod common;
use common::paper_subnets;

fn summaries(m: &MultiFabric, routed: &Routed) -> Vec<(u64, DependencySummary)> {
    m.subnets
        .iter()
        .zip(&routed.routings)
        .map(|(s, v)| (s.prefix, v.dependencies().expect("summary").clone()))
        .collect()
}

/// Runs both checks and asserts they agree.
fn agree(
    what: &str,
    m: &MultiFabric,
    routed: &Routed,
    routes: &InterSubnetRoutes,
) -> (GlobalReport, ComposeReport) {
    let net = Network::new(m, routed.tables(), &routed.view, routes).expect("network");
    let g = verify_global(&net);
    let sums = summaries(m, routed);
    let refs: Vec<(u64, &DependencySummary)> = sums.iter().map(|(p, s)| (*p, s)).collect();
    let c = compose(&routed.view, &refs, routes).expect("composes");
    assert_eq!(g.pairs, c.pairs, "{what}");
    assert_eq!(
        g.unreachable, c.unreachable,
        "{what}: {:?} vs {:?}",
        g.first_unreachable, c.first_unreachable
    );
    assert_eq!(
        g.cycle.is_some(),
        c.cycle.is_some(),
        "{what}: all pairs {:?}, composed {:?}",
        g.cycle,
        c.describe_cycle()
    );
    (g, c)
}

/// Every algorithm, and ISSR with shortest transit, on `m` routed by
/// `engines`; returns how many of the combinations closed a cycle.
fn every_algorithm(what: &str, m: &MultiFabric, engines: &[EngineKind]) -> Option<usize> {
    let routed = pipeline::route_each(m, engines).ok()?;
    let mut cycles = 0;
    for alg in AlgorithmKind::ALL {
        let routes = alg.algorithm().route(&routed.view).expect("routes");
        let (g, _) = agree(&format!("{what} {alg}"), m, &routed, &routes);
        cycles += usize::from(g.cycle.is_some());
    }
    let routes = issr_with_transit(&routed.view, Transit::Shortest).expect("routes");
    let (g, _) = agree(&format!("{what} issr/shortest"), m, &routed, &routes);
    Some(cycles + usize::from(g.cycle.is_some()))
}

fn trees(subnets: u32, spines: u32, routers: u32, wiring: Wiring, join: Join) -> MultiFabric {
    tree_subnets(&TreeSubnets {
        subnets,
        leaves: 2,
        spines,
        hosts: 2,
        routers,
        router_links: 1,
        wiring,
        join,
    })
    .expect("generates")
}

const ENGINES: [EngineKind; 5] = [
    EngineKind::Updn,
    EngineKind::Ftree,
    EngineKind::Lash,
    EngineKind::Minhop,
    EngineKind::Dfsssp,
];

#[test]
fn rings_of_subnets_agree_and_shortest_transit_closes_the_cycle() {
    for spines in [1, 2] {
        let m = trees(5, spines, 5, Wiring::All, Join::Ring);
        for engine in ENGINES {
            let routed = pipeline::route_subnets(&m, engine).expect("routes");
            for alg in AlgorithmKind::ALL {
                let routes = alg.algorithm().route(&routed.view).expect("routes");
                let (g, c) = agree(
                    &format!("ring/{spines} {engine} {alg}"),
                    &m,
                    &routed,
                    &routes,
                );
                assert!(c.deadlock_free() && g.deadlock_free());
            }
            let routes = issr_with_transit(&routed.view, Transit::Shortest).expect("routes");
            let (_, c) = agree(
                &format!("ring/{spines} {engine} shortest"),
                &m,
                &routed,
                &routes,
            );
            // Shortest transit closes the cycle on one VL; DF-SSSP's
            // layers break it.
            assert_eq!(c.cycle.is_some(), engine != EngineKind::Dfsssp, "{engine}");
            if let Some(cycle) = &c.cycle {
                // Named by subnet, router port and VL, around the ring.
                let subnets: std::collections::BTreeSet<&str> =
                    cycle.iter().map(|s| s.subnet.as_str()).collect();
                assert_eq!(
                    subnets.len(),
                    5,
                    "{}",
                    c.describe_cycle().unwrap_or_default()
                );
                let text = c.describe_cycle().unwrap_or_default();
                assert!(
                    text.contains("router 0x") && text.contains("VL 0"),
                    "{text}"
                );
            }
        }
    }
}

#[test]
fn chains_of_subnets_agree() {
    for (spines, wiring) in [(1, Wiring::All), (2, Wiring::All), (2, Wiring::Stripe)] {
        let m = trees(4, spines, 4, wiring, Join::Chain);
        for engine in ENGINES {
            if let Some(cycles) = every_algorithm(
                &format!("chain/{spines}/{wiring:?} {engine}"),
                &m,
                &[engine; 4],
            ) {
                // A chain has no cycle of subnets to close.
                assert_eq!(cycles, 0, "{engine}");
            }
        }
    }
}

#[test]
fn striped_transit_through_fat_trees_is_unreachable_in_both() {
    let m = trees(4, 2, 4, Wiring::Stripe, Join::Chain);
    let routed = pipeline::route_subnets(&m, EngineKind::Ftree).expect("routes");
    let routes = AlgorithmKind::Issr
        .algorithm()
        .route(&routed.view)
        .expect("routes");
    let (g, c) = agree("stripe ftree", &m, &routed, &routes);
    assert!(g.unreachable > 0);
    let first = c.first_unreachable.expect("named");
    assert!(first.reason.contains("crossing"), "{first}");
    assert!(first.to_string().contains("from subnet"), "{first}");
}

#[test]
fn the_paper_setups_agree() {
    for k in [2, 3, 6] {
        let m = paper_subnets(k);
        let routed = pipeline::route_subnets(&m, EngineKind::Ftree).expect("routes");
        for alg in AlgorithmKind::ALL {
            let routes = alg.algorithm().route(&routed.view).expect("routes");
            let (g, c) = agree(&format!("paper {k} {alg}"), &m, &routed, &routes);
            assert!(g.ok() && c.ok(), "paper {k} {alg}");
        }
    }
}

#[test]
fn generated_multi_fabrics_agree() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut cycles = 0;
    for case in 0..24 {
        let join = [Join::All, Join::Chain, Join::Ring][rng.gen_range(0..3)];
        let subnets = rng.gen_range(3..=5);
        let t = TreeSubnets {
            subnets,
            leaves: rng.gen_range(1..=3),
            spines: rng.gen_range(1..=3),
            hosts: rng.gen_range(1..=3),
            routers: subnets + rng.gen_range(0..3),
            router_links: rng.gen_range(1..=2),
            wiring: if rng.gen_bool(0.5) {
                Wiring::All
            } else {
                Wiring::Stripe
            },
            join,
        };
        let Ok(m) = tree_subnets(&t) else { continue };
        let engines: Vec<EngineKind> = (0..subnets)
            .map(|_| ENGINES[rng.gen_range(0..ENGINES.len())])
            .collect();
        if let Some(c) = every_algorithm(&format!("case {case} {t:?} {engines:?}"), &m, &engines) {
            cycles += c;
        }
    }
    assert!(cycles > 0, "some generated case closes a cycle");
}

/// A subnet of `switches` switches on a ring with random chords, 1-2 CAs
/// per switch, and ports of the given routers (router index, ports here)
/// on random switches.
fn random_subnet(
    rng: &mut ChaCha8Rng,
    sn: usize,
    switches: usize,
    routers: &[(usize, Vec<u8>)],
    radix: u8,
) -> Subnet {
    let tag = (sn as u64 + 1) << 24;
    let mut b = FabricBuilder::new();
    b.subnet_prefix(generated_prefix(sn));
    let sw: Vec<_> = (0..switches)
        .map(|i| {
            b.add_node(
                NodeKind::Switch,
                0x0002_0000_0000_0000 | tag | i as u64,
                format!("sn{sn}_s{i}"),
                16,
            )
        })
        .collect();
    let mut next = vec![1u8; switches];
    let link = |b: &mut FabricBuilder, x: usize, y: usize, next: &mut Vec<u8>| {
        if next[x] <= 16 && next[y] <= 16 {
            b.connect(sw[x], next[x], sw[y], next[y]).expect("links");
            next[x] += 1;
            next[y] += 1;
        }
    };
    for i in 0..switches {
        if switches > 1 && (i + 1 < switches || switches > 2) {
            link(&mut b, i, (i + 1) % switches, &mut next);
        }
    }
    for _ in 0..rng.gen_range(0..=switches / 2) {
        let (x, y) = (rng.gen_range(0..switches), rng.gen_range(0..switches));
        if x != y {
            link(&mut b, x, y, &mut next);
        }
    }
    for (i, s) in sw.iter().enumerate() {
        for h in 0..rng.gen_range(1..=2u64) {
            let ca = b.add_node(
                NodeKind::Ca,
                0x0001_0000_0000_0000 | tag | (i as u64) << 8 | h << 4,
                format!("sn{sn}_h{i}_{h}"),
                1,
            );
            if next[i] <= 16 {
                b.connect(ca, 1, *s, next[i]).expect("links");
                next[i] += 1;
            }
        }
    }
    for (r, ports) in routers {
        let node = b.add_node(
            NodeKind::Router,
            0x0004_0000_0000_0000 | (*r as u64) << 16,
            format!("router{r}"),
            radix,
        );
        for &p in ports {
            let x = rng.gen_range(0..switches);
            if next[x] <= 16 {
                b.connect(node, p, sw[x], next[x]).expect("links");
                next[x] += 1;
            }
        }
    }
    Subnet {
        name: format!("subnet{sn}"),
        prefix: generated_prefix(sn),
        fabric: b.build().expect("builds"),
    }
}

/// Subnets of random switch graphs joined by routers: each router joins
/// two or three subnets with one or two ports in each, the first ones
/// in a ring so that every subnet is reachable.
fn random_multi(rng: &mut ChaCha8Rng) -> MultiFabric {
    let k = rng.gen_range(3..=5usize);
    let nr = k + rng.gen_range(0..3);
    let mut joins: Vec<Vec<usize>> = Vec::new();
    for r in 0..nr {
        let mut j = if r < k {
            vec![r, (r + 1) % k]
        } else {
            vec![rng.gen_range(0..k), rng.gen_range(0..k)]
        };
        if rng.gen_bool(0.2) {
            j.push(rng.gen_range(0..k));
        }
        j.sort_unstable();
        j.dedup();
        if j.len() < 2 {
            j = vec![0, 1];
        }
        joins.push(j);
    }
    // Router ports: numbered across the subnets a router joins.
    let mut per_subnet: Vec<Vec<(usize, Vec<u8>)>> = vec![Vec::new(); k];
    let mut radix = vec![0u8; nr];
    for (r, j) in joins.iter().enumerate() {
        let mut port = 1u8;
        for &s in j {
            let n = rng.gen_range(1..=2u8);
            per_subnet[s].push((r, (port..port + n).collect()));
            port += n;
        }
        radix[r] = port - 1;
    }
    let radix_max = radix.iter().copied().max().unwrap_or(1);
    let subnets = (0..k)
        .map(|s| {
            let n = rng.gen_range(3..=6);
            random_subnet(rng, s, n, &per_subnet[s], radix_max)
        })
        .collect();
    MultiFabric::from_subnets(subnets).expect("joins")
}

#[test]
fn random_multi_subnet_fabrics_agree() {
    // Engines that give deadlock-free tables on any switch graph.
    let engines = [
        EngineKind::Updn,
        EngineKind::Dnup,
        EngineKind::Lash,
        EngineKind::Dfsssp,
        EngineKind::Nue,
        EngineKind::Dfdn,
    ];
    // IBF_COMPOSE_CASES widens the sweep (400 agreed at the time of writing).
    let cases: usize = std::env::var("IBF_COMPOSE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (mut checked, mut cycles) = (0, 0);
    for case in 0..cases {
        let m = random_multi(&mut rng);
        let picks: Vec<EngineKind> = (0..m.subnets.len())
            .map(|_| engines[rng.gen_range(0..engines.len())])
            .collect();
        if let Some(c) = every_algorithm(&format!("random {case} {picks:?}"), &m, &picks) {
            checked += 1;
            cycles += c;
        }
    }
    assert!(
        checked * 4 >= cases * 3,
        "only {checked} random fabrics routed"
    );
    eprintln!("{checked} random fabrics, {cycles} cycles");
}

#[test]
fn the_composition_refuses_missing_and_duplicate_summaries() {
    use fabric::verify::ComposeError;
    let m = trees(3, 1, 3, Wiring::All, Join::Chain);
    let routed = pipeline::route_subnets(&m, EngineKind::Updn).expect("routes");
    let routes = AlgorithmKind::Issr
        .algorithm()
        .route(&routed.view)
        .expect("routes");
    let sums = summaries(&m, &routed);
    let refs: Vec<(u64, &DependencySummary)> = sums.iter().map(|(p, s)| (*p, s)).collect();
    let e = compose(&routed.view, &refs[1..], &routes).expect_err("one missing");
    assert!(matches!(e, ComposeError::MissingSummary { .. }), "{e}");
    let mut twice = refs.clone();
    twice.push(refs[0]);
    let e = compose(&routed.view, &twice, &routes).expect_err("one twice");
    assert_eq!(e, ComposeError::DuplicateSummary(refs[0].0));
    // A summary that names ports the view does not have.
    let mut wrong = refs.clone();
    wrong[0].1 = refs[1].1;
    let e = compose(&routed.view, &wrong, &routes).expect_err("another subnet's");
    assert!(matches!(e, ComposeError::Inconsistent { .. }), "{e}");
}

#[test]
fn a_subnet_without_router_ports_has_no_summary() {
    let f = common::torus(&[3, 3]);
    let engine = EngineKind::Dfsssp.engine();
    let r = engine
        .route(&f, &fabric::routing::EngineOptions::default())
        .expect("routes");
    let v = fabric::verify::accept(&f, engine.as_ref(), r, fabric::verify::Policy::DeadlockFree)
        .expect("accepted");
    assert_eq!(
        v.dependencies().err(),
        Some(&fabric::verify::SummaryError::NoRouterPorts)
    );
}
