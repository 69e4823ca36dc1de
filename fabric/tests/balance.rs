//! Balance on fabrics whose optimal link load is known: the busiest link
//! of a balanced engine's tables carries no more HCA pairs than the
//! optimum, and the engines that balance reach it.

use fabric::generate::{Topology, generate};
use fabric::load::link_load;
use fabric::routing::{EngineKind, EngineOptions};
use fabric::verify::verify;

fn busiest(t: &Topology, e: EngineKind) -> (u64, f64) {
    let f = generate(t).expect("topology");
    let r = e
        .engine()
        .route(&f, &EngineOptions::default())
        .expect("routes");
    let rep = verify(&f, &r);
    assert!(rep.ok() && rep.all_pairs_routed(), "{e}: {rep:?}");
    let l = link_load(&f, &r.lfts);
    assert_eq!(l.unrouted, 0);
    (l.max, l.mean)
}

/// A 5x5 torus with one HCA per switch is symmetric and every pair's
/// shortest paths are as long as its coordinates say, so the optimum loads
/// every directed link alike: the busiest link carries the mean, 15 pairs.
/// LASH and DF-DN on the BFS-tree base (their defaults here) reach it.
#[test]
fn lash_and_dfdn_load_a_symmetric_torus_evenly() {
    let t = Topology::Mesh {
        dims: vec![5, 5],
        torus: true,
        hosts: 1,
    };
    for e in [EngineKind::Lash, EngineKind::Dfdn] {
        let (max, mean) = busiest(&t, e);
        assert_eq!(mean, 15.0, "{e}");
        assert_eq!(max, 15, "{e}: the busiest link above the mean");
    }
}

/// A 4-ary 3-tree: each leaf's 4 HCAs send to the 60 HCAs outside the leaf
/// over its 4 up links, so some link carries at least 4 x 60 / 4 = 60
/// pairs; ftree, SSSP and DF-DN carry no more on any link.
#[test]
fn fat_tree_engines_meet_the_leaf_uplink_bound() {
    let t = Topology::KaryNTree { k: 4, n: 3 };
    for e in [EngineKind::Ftree, EngineKind::Sssp, EngineKind::Dfdn] {
        let (max, _) = busiest(&t, e);
        assert_eq!(max, 60, "{e}");
    }
}
