//! Property tests: readers never panic on damaged input, and generated
//! fabrics survive a write/read round trip with routes that verify.

use fabric::formats::{ibnetdiscover, lft, pathsl, sl2vl};
use fabric::generate::{Topology, generate};
use fabric::routing::{self, EngineOptions};
use fabric::verify;
use proptest::prelude::*;

mod common;
use common::load;
use std::path::Path;

fn sample() -> (fabric::Fabric, String, String) {
    let f = load("ring4.net");
    let r = routing::by_name("minhop")
        .unwrap()
        .route(&f, &EngineOptions::default())
        .unwrap();
    let topo = ibnetdiscover::write(&f);
    let dump = lft::write(&f, &r.lfts);
    (f, topo, dump)
}

/// Applies (position, byte) edits to `text`.
fn damage(text: &str, edits: &[(usize, u8)]) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    for &(pos, byte) in edits {
        if b.is_empty() {
            break;
        }
        let i = pos % b.len();
        match byte % 3 {
            0 => b[i] = byte,
            1 => {
                b.remove(i);
            }
            _ => b.insert(i, byte),
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn damaged_topologies_fail_cleanly(edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let (_, topo, _) = sample();
        let text = String::from_utf8_lossy(&damage(&topo, &edits)).into_owned();
        if let Err(e) = ibnetdiscover::parse(&text, Path::new("d.net")) {
            prop_assert!(e.to_string().starts_with("d.net"), "{}", e);
        }
    }

    #[test]
    fn damaged_dumps_fail_cleanly(edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let (f, _, dump) = sample();
        let bytes = damage(&dump, &edits);
        if let Err(e) = lft::parse(&f, &bytes[..], Path::new("d.dump")) {
            prop_assert!(e.to_string().starts_with("d.dump"), "{}", e);
        }
        let _ = sl2vl::parse(&f, &String::from_utf8_lossy(&bytes), Path::new("d.sl2vl"));
        let _ = pathsl::parse(&f, &bytes[..], Path::new("d.psl"));
    }

    #[test]
    fn random_fabrics_round_trip_and_route(switches in 4u32..24, degree in 2u32..5, seed in any::<u64>()) {
        prop_assume!(switches * degree % 2 == 0 && degree < switches);
        let Ok(f) = generate(&Topology::RandomRegular { switches, degree, hosts: 2, seed }) else {
            return Ok(());
        };
        let g = ibnetdiscover::parse(&ibnetdiscover::write(&f), Path::new("rt.net")).unwrap();
        prop_assert_eq!(f.num_links(), g.num_links());
        prop_assert_eq!(f.max_lid(), g.max_lid());
        let r = routing::by_name("minhop").unwrap().route(&g, &EngineOptions::default()).unwrap();
        let rep = verify::verify(&g, &r);
        prop_assert!(rep.all_pairs_routed(), "{:?}", rep.broken_examples);
        let diameter = fabric::graph::SwitchGraph::new(&g).diameter().unwrap();
        prop_assert_eq!(rep.max_hops, diameter);
        // The LFT dump reads back to the same tables.
        let back = lft::parse(&g, lft::write(&g, &r.lfts).as_bytes(), Path::new("x")).unwrap();
        prop_assert_eq!(back, r.lfts);
    }
}
