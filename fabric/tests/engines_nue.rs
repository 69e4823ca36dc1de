//! Nue on generated topologies: every pair routed, no channel dependency
//! cycle, and no more VLs than the budget, for budgets from one VL up. The
//! verifier rebuilds the CDG from the emitted tables alone.

use fabric::Fabric;
use fabric::formats::{lft, pathsl, sl2vl};
use fabric::generate::{Topology, generate};
use fabric::graph::SwitchGraph;
use fabric::model::{FabricBuilder, NodeKind};
use fabric::routing::{self, EngineOptions};
use fabric::tables::{NO_PATH, Routing, SL_NONE};
use fabric::verify::{self, Report};
use proptest::prelude::*;
use std::path::Path;

mod common;
use common::{make, ring};

fn nue(f: &Fabric, max_vls: u8) -> fabric::Result<Routing> {
    let opts = EngineOptions {
        max_vls,
        ..EngineOptions::default()
    };
    routing::by_name("nue")
        .expect("nue is registered")
        .route(f, &opts)
}

/// Routes with `max_vls`, verifies, and checks the properties every Nue
/// routing must have; returns the report.
fn check(name: &str, f: &Fabric, max_vls: u8) -> Report {
    let r = nue(f, max_vls).unwrap_or_else(|e| panic!("{name} vls={max_vls}: {e}"));
    let rep = verify::verify(f, &r);
    assert!(
        rep.all_pairs_routed(),
        "{name} vls={max_vls}: {:?}",
        rep.broken_examples
    );
    assert!(
        rep.deadlock_free(),
        "{name} vls={max_vls}: cycle {:?}",
        rep.describe_cycle(f)
    );
    assert!(
        rep.vls_used <= max_vls as u32 && rep.max_vl < max_vls,
        "{name} vls={max_vls}: uses {} VLs, highest VL {}",
        rep.vls_used,
        rep.max_vl
    );
    // One SL per layer, SL i on VL i everywhere, HCA ports included.
    let sl2vl = r.sl2vl.as_ref().expect("nue writes SL-to-VL tables");
    assert!(sl2vl.max_vl() < max_vls);
    for &e in f.endports() {
        for sl in 0..max_vls.min(16) {
            assert_eq!(sl2vl.port_vl(e, sl), sl, "{name}: HCA SL {sl}");
        }
    }
    let psl = r.path_sl.as_ref().expect("nue writes path SLs");
    assert!(rep.sls_used <= max_vls as u32);
    // The SL of a pair depends only on the destination: one shared row.
    assert!(psl.num_rows() <= 1);
    // Switch LIDs are routed too, on their layer's trees.
    for (si, &sw) in f.switches().iter().enumerate() {
        let lid = f.switch_lid(sw);
        assert_eq!(r.lfts.get(si as u32, lid), 0, "{name}: own LID");
        for sj in 0..f.switches().len() as u32 {
            assert_ne!(r.lfts.get(sj, lid), NO_PATH, "{name}: switch LID {lid}");
        }
        if let Some(&e) = f.endports().first() {
            let sl = psl.get(f.lid_of_slot(e), lid);
            assert!(sl != SL_NONE && sl < max_vls);
        }
    }
    rep
}

fn diameter(f: &Fabric) -> u32 {
    SwitchGraph::new(f).diameter().expect("connected")
}

/// Every budget on one topology; returns (budget, VLs used, max hops).
fn sweep(name: &str, f: &Fabric, budgets: &[u8]) -> Vec<(u8, u32, u32)> {
    let d = diameter(f);
    budgets
        .iter()
        .map(|&k| {
            let rep = check(name, f, k);
            println!(
                "{name}: budget {k}: {} VLs, max hops {} (diameter {d})",
                rep.vls_used, rep.max_hops
            );
            assert!(rep.max_hops >= d);
            // Loose sanity bound for every budget; tighter ones per topology.
            assert!(
                rep.max_hops <= 3 * d,
                "{name} budget {k}: {} hops",
                rep.max_hops
            );
            (k, rep.vls_used, rep.max_hops)
        })
        .collect()
}

#[test]
fn registered_and_claims_deadlock_freedom() {
    assert!(routing::names().contains(&"nue"));
    assert!(routing::by_name("nue").unwrap().claims_deadlock_free());
}

#[test]
fn torus_4x4x4() {
    let f = make(Topology::Mesh {
        dims: vec![4, 4, 4],
        torus: true,
        hosts: 1,
    });
    let res = sweep("torus-4x4x4", &f, &[1, 2, 4, 8]);
    // Destinations spread over all layers once there are enough of them.
    for &(k, used, hops) in &res {
        assert_eq!(used, k as u32, "torus budget {k}");
        assert!(hops <= diameter(&f) + 2, "torus budget {k}: {hops} hops");
    }
}

#[test]
fn dragonfly_p2() {
    let f = make(Topology::Dragonfly { p: 2, hosts: None });
    let res = sweep("dragonfly-p2", &f, &[1, 2, 4, 8]);
    for &(k, _, hops) in &res {
        if k >= 2 {
            assert!(hops <= diameter(&f) + 2, "budget {k}: {hops} hops");
        }
    }
    // The tables survive the dump formats and verify again from text.
    let r = nue(&f, 4).unwrap();
    let back = Routing {
        lfts: lft::parse(&f, lft::write(&f, &r.lfts).as_bytes(), Path::new("l")).unwrap(),
        sl2vl: Some(
            sl2vl::parse(
                &f,
                &sl2vl::write(&f, r.sl2vl.as_ref().unwrap()),
                Path::new("s"),
            )
            .unwrap(),
        ),
        path_sl: Some(
            pathsl::parse(
                &f,
                pathsl::write(&f, r.path_sl.as_ref().unwrap()).as_bytes(),
                Path::new("p"),
            )
            .unwrap(),
        ),
        vls_needed: None,
    };
    let rep = verify::verify(&f, &back);
    assert!(rep.ok() && rep.vls_used <= 4);
}

#[test]
fn dragonfly_p4() {
    let f = make(Topology::Dragonfly { p: 4, hosts: None });
    let res = sweep("dragonfly-p4", &f, &[1, 2, 4, 8]);
    for &(k, _, hops) in &res {
        if k >= 4 {
            assert!(hops <= diameter(&f) + 2, "budget {k}: {hops} hops");
        }
    }
}

#[test]
fn slim_fly_q5() {
    let f = make(Topology::SlimFly { q: 5, hosts: None });
    let res = sweep("slimfly-q5", &f, &[1, 2, 4, 8]);
    for &(k, _, hops) in &res {
        if k >= 2 {
            assert!(hops <= diameter(&f) + 2, "budget {k}: {hops} hops");
        }
    }
}

#[test]
fn kary_n_tree() {
    let f = make(Topology::KaryNTree { k: 4, n: 3 });
    let res = sweep("kary-4-3", &f, &[1, 2, 4, 8]);
    for &(k, _, hops) in &res {
        assert!(hops <= diameter(&f) + 2, "budget {k}: {hops} hops");
    }
}

#[test]
fn rings() {
    for n in [3, 4, 5, 8, 11] {
        let f = ring(n);
        for &(k, _, hops) in &sweep(&format!("ring{n}"), &f, &[1, 2, 4]) {
            // A ring with one VL must break one link for some pairs:
            // routes may go the long way around, never further.
            assert!(hops < n, "ring{n} budget {k}: {hops} hops");
        }
    }
}

#[test]
fn random_regular_graphs() {
    for (switches, degree, seed) in [(16, 2, 0), (32, 4, 1), (64, 6, 2), (100, 8, 3)] {
        let f = make(Topology::RandomRegular {
            switches,
            degree,
            hosts: 2,
            seed,
        });
        let res = sweep(
            &format!("random-{switches}-d{degree}-s{seed}"),
            &f,
            &[1, 2, 4, 8],
        );
        for &(k, _, hops) in &res {
            if k >= 4 {
                assert!(hops <= diameter(&f) + 2, "budget {k}: {hops} hops");
            }
        }
    }
}

#[test]
fn budgets_beyond_the_switch_count_leave_layers_empty() {
    let f = ring(3);
    let rep = check("ring3", &f, 15);
    assert!(rep.vls_used <= 3);
}

#[test]
fn fewer_sls_than_vls_limit_the_layers() {
    let f = make(Topology::Dragonfly { p: 2, hosts: None });
    let opts = EngineOptions {
        max_vls: 8,
        max_sls: 2,
        ..EngineOptions::default()
    };
    let r = routing::by_name("nue").unwrap().route(&f, &opts).unwrap();
    let rep = verify::verify(&f, &r);
    assert!(rep.ok());
    assert!(rep.sls_used <= 2 && rep.vls_used <= 2);
}

#[test]
fn result_does_not_depend_on_thread_timing() {
    let f = make(Topology::Dragonfly { p: 3, hosts: None });
    let a = nue(&f, 4).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let b = pool.install(|| nue(&f, 4).unwrap());
    assert_eq!(a.lfts, b.lfts);
    assert_eq!(a.path_sl, b.path_sl);
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    // Two switches without a link between them.
    let mut b = FabricBuilder::new();
    let s0 = b.add_node(NodeKind::Switch, 0x20, "s0", 2);
    let s1 = b.add_node(NodeKind::Switch, 0x21, "s1", 2);
    let h0 = b.add_node(NodeKind::Ca, 0x10, "h0", 1);
    let h1 = b.add_node(NodeKind::Ca, 0x30, "h1", 1);
    b.connect(h0, 1, s0, 1).unwrap();
    b.connect(h1, 1, s1, 1).unwrap();
    let f = b.build().unwrap();
    let e = nue(&f, 4).unwrap_err().to_string();
    assert!(e.contains("nue") && e.contains("not connected"), "{e}");

    // Two CAs cabled to each other, no switch.
    let mut b = FabricBuilder::new();
    let h0 = b.add_node(NodeKind::Ca, 0x10, "h0", 1);
    let h1 = b.add_node(NodeKind::Ca, 0x30, "h1", 1);
    b.connect(h0, 1, h1, 1).unwrap();
    let f = b.build().unwrap();
    let e = nue(&f, 1).unwrap_err().to_string();
    assert!(e.contains("not linked to a switch"), "{e}");

    // A single switch: nothing to route between switches, budget 0 is 1.
    let mut b = FabricBuilder::new();
    let s0 = b.add_node(NodeKind::Switch, 0x20, "s0", 3);
    for i in 0..3u8 {
        let h = b.add_node(NodeKind::Ca, 0x100 + 16 * i as u64, format!("h{i}"), 1);
        b.connect(h, 1, s0, i + 1).unwrap();
    }
    let f = b.build().unwrap();
    let r = nue(&f, 0).unwrap();
    assert!(verify::verify(&f, &r).ok());
    assert!(
        f.endports()
            .iter()
            .all(|&e| r.lfts.get(0, f.lid_of_slot(e)) == f.port_of(f.remote(e)))
    );
}

/// A connected fabric from a random tree plus `extra` random links
/// (parallel links and loops back into the same switch included) and
/// `hosts[i] % 3` CAs on switch `i`.
fn arbitrary_fabric(parents: &[usize], extra: &[(usize, usize)], hosts: &[u8]) -> Fabric {
    let n = parents.len() + 1;
    let mut links: Vec<(usize, usize)> = parents
        .iter()
        .enumerate()
        .map(|(i, &p)| (i + 1, p % (i + 1)))
        .collect();
    links.extend(extra.iter().map(|&(a, b)| (a % n, b % n)));
    let mut deg = vec![0u8; n];
    for &(a, b) in &links {
        deg[a] += 1;
        deg[b] += 1;
    }
    let nh: Vec<u8> = (0..n)
        .map(|i| hosts.get(i).copied().unwrap_or(1) % 3)
        .collect();
    let mut b = FabricBuilder::new();
    let sw: Vec<_> = (0..n)
        .map(|i| {
            b.add_node(
                NodeKind::Switch,
                0x2000 + i as u64,
                format!("s{i}"),
                deg[i] + nh[i],
            )
        })
        .collect();
    let mut next = nh.iter().map(|&h| h + 1).collect::<Vec<u8>>();
    for &(x, y) in &links {
        let (px, py) = (next[x], next[y] + u8::from(x == y));
        next[x] += 1;
        next[y] += 1;
        b.connect(sw[x], px, sw[y], py).unwrap();
    }
    let mut guid = 0x1000u64;
    for i in 0..n {
        for j in 0..nh[i] {
            guid += 16;
            let h = b.add_node(NodeKind::Ca, guid, format!("h{i}_{j}"), 1);
            b.connect(h, 1, sw[i], j + 1).unwrap();
        }
    }
    b.build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn random_graphs_any_budget(half in 3u32..14, degree in 2u32..6, seed in any::<u64>(), vls in 1u8..=8) {
        // An even switch count makes every degree feasible.
        let switches = 2 * half;
        let Ok(f) = generate(&Topology::RandomRegular { switches, degree, hosts: 2, seed }) else {
            return Ok(());
        };
        let r = nue(&f, vls).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let rep = verify::verify(&f, &r);
        prop_assert!(rep.all_pairs_routed(), "{:?}", rep.broken_examples);
        prop_assert!(rep.deadlock_free(), "{:?}", rep.describe_cycle(&f));
        prop_assert!(rep.vls_used <= vls as u32 && rep.max_vl < vls);
    }

    #[test]
    fn arbitrary_connected_fabrics_any_budget(
        parents in prop::collection::vec(any::<usize>(), 1..24),
        extra in prop::collection::vec((any::<usize>(), any::<usize>()), 0..30),
        hosts in prop::collection::vec(any::<u8>(), 0..25),
        vls in 1u8..=8,
    ) {
        let f = arbitrary_fabric(&parents, &extra, &hosts);
        let r = nue(&f, vls).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let rep = verify::verify(&f, &r);
        prop_assert!(rep.all_pairs_routed(), "{:?}", rep.broken_examples);
        prop_assert!(rep.deadlock_free(), "{:?}", rep.describe_cycle(&f));
        prop_assert!(rep.vls_used <= vls as u32 && rep.max_vl < vls);
        // Every switch LID is reachable from every switch.
        for &sw in f.switches() {
            let lid = f.switch_lid(sw);
            for si in 0..f.switches().len() as u32 {
                prop_assert_ne!(r.lfts.get(si, lid), NO_PATH);
            }
        }
    }
}
