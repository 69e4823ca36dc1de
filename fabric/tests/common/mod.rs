//! Fixtures the test files share: reference nets, generated fabrics, a
//! hand-built ring and the inter-subnet paper's setups.

// Each test binary compiles this module and uses only some of it.
#![allow(dead_code)]

use fabric::Fabric;
use fabric::formats::ibnetdiscover;
use fabric::generate::{Topology, generate};
use fabric::model::{FabricBuilder, NodeKind};
use fabric::multi::{MultiFabric, TreeSubnets, tree_subnets};
use std::path::{Path, PathBuf};

/// A file in `tests/data` (the reference nets the OpenSM comparison uses).
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A reference net from `tests/data`.
pub fn load(name: &str) -> Fabric {
    ibnetdiscover::read(&data(name)).expect("reference net parses")
}

pub fn make(t: Topology) -> Fabric {
    generate(&t).expect("valid generator parameters")
}

/// A torus with one CA per switch.
pub fn torus(dims: &[u32]) -> Fabric {
    make(Topology::Mesh {
        dims: dims.to_vec(),
        torus: true,
        hosts: 1,
    })
}

/// A ring of `n` switches with one CA each: switch i port 1 -> i+1 port 2.
pub fn ring(n: u32) -> Fabric {
    let mut b = FabricBuilder::new();
    let sw: Vec<_> = (0..n)
        .map(|i| b.add_node(NodeKind::Switch, 0x2000 + i as u64, format!("s{i}"), 3))
        .collect();
    for i in 0..n as usize {
        b.connect(sw[i], 1, sw[(i + 1) % n as usize], 2).unwrap();
        let h = b.add_node(NodeKind::Ca, 0x1000 + 16 * i as u64, format!("h{i}"), 1);
        b.connect(h, 1, sw[i], 3).unwrap();
    }
    b.build().unwrap()
}

/// The inter-subnet paper's setup with `k` subnets.
pub fn paper_subnets(k: u32) -> MultiFabric {
    tree_subnets(&TreeSubnets::paper(k).expect("valid")).expect("generates")
}

/// After each of the first `take` switch-to-switch link faults of `f`
/// (routed by `engine` as `r`), the fabric and `engine`'s full recompute of
/// it whose update from `r` the transition check refuses (a mix of old and
/// new tables closes a dependency cycle).
pub fn unsafe_recomputes(
    f: &Fabric,
    r: &fabric::tables::Routing,
    engine: fabric::routing::EngineKind,
    take: usize,
) -> Vec<(Fabric, fabric::tables::Routing)> {
    use fabric::dqr::{Fault, apply_faults};
    let mut out = Vec::new();
    for &l in f.switch_links().iter().take(take) {
        let f1 = apply_faults(f, &[Fault::Link(l)]);
        let Ok(full) = engine
            .engine()
            .route(&f1, &fabric::routing::EngineOptions::default())
        else {
            continue;
        };
        assert!(fabric::verify::verify(&f1, &full).ok());
        if !fabric::verify::check_transition(&f1, r, &full).deadlock_free() {
            out.push((f1, full));
        }
    }
    out
}

/// Every host sends 2 KB messages back to back for 3,000 packet times, to
/// uniformly drawn hosts or (a share `mcast_share`) to its groups: the
/// packet simulator's saturating load.
pub fn saturating(
    seed: u64,
    skip_unroutable: bool,
    mcast_share: f64,
) -> fabric::sim::workload::Saturate {
    fabric::sim::workload::Saturate {
        traffic: fabric::sim::Uniform {
            isp: 0.0,
            hot_spot: 0.0,
            samples: 1,
            seed,
        },
        message: 2048,
        min_packet: 2048,
        warmup: 0,
        window: 3000 * 2048,
        skip_unroutable,
        mcast_share,
    }
}

/// IPoIB's broadcast group over `all` as MLID 0xC000 and a group of
/// `some` as 0xC001, both on SL 0.
pub fn two_groups(
    all: Vec<fabric::model::Slot>,
    some: Vec<fabric::model::Slot>,
) -> Vec<fabric::mcast::Group> {
    vec![
        fabric::mcast::Group {
            mlid: 0xC000,
            sl: 0,
            members: all,
        },
        fabric::mcast::Group {
            mlid: 0xC001,
            sl: 0,
            members: some,
        },
    ]
}

/// Routes `f` with `kind` and builds the trees of `groups` by `mode`;
/// reserved trees take SL 15 and VL 7, so the engine routes with one SL
/// and one VL fewer.
pub fn route_with_trees(
    f: &Fabric,
    kind: fabric::routing::EngineKind,
    mode: fabric::mcast::tree::TreeMode,
    mut groups: Vec<fabric::mcast::Group>,
) -> (fabric::tables::Routing, fabric::mcast::Multicast) {
    let reserved = mode == fabric::mcast::tree::TreeMode::Reserved;
    let opts = fabric::routing::EngineOptions {
        max_vls: if reserved { 7 } else { 8 },
        max_sls: if reserved { 15 } else { 16 },
        ..Default::default()
    };
    let mut r = kind.engine().route(f, &opts).expect("routes");
    let (mfts, plan) =
        fabric::mcast::tree::build(f, &mut r, &mut groups, mode, reserved.then_some((15, 7)))
            .expect("trees");
    (r, fabric::mcast::Multicast { groups, mfts, plan })
}
