//! The verifier split into parts (what workers compute, one range of
//! destinations each) and merged gives the report of one run, whatever the
//! ranges: on deadlock-free and cyclic tables, with and without VLs and
//! SLs, and with broken pairs.

use fabric::Fabric;
use fabric::generate::{Topology, generate};
use fabric::routing::{EngineKind, EngineOptions};
use fabric::tables::Routing;
use fabric::verify::{
    MergeError, merge_parts, part_columns, verify, verify_part, verify_part_columns,
};

fn routed(t: Topology, e: EngineKind) -> (Fabric, Routing) {
    let f = generate(&t).expect("generated");
    let r = e
        .engine()
        .route(&f, &EngineOptions::default())
        .expect("routed");
    (f, r)
}

/// Cuts 0..n at the given fractions (sorted, deduplicated).
fn layout(n: usize, cuts: &[f64]) -> Vec<(usize, usize)> {
    let mut at: Vec<usize> = cuts.iter().map(|c| (c * n as f64) as usize).collect();
    at.push(0);
    at.push(n);
    at.sort_unstable();
    at.dedup();
    at.windows(2).map(|w| (w[0], w[1])).collect()
}

fn check(f: &Fabric, r: &Routing) {
    let whole = verify(f, r);
    let n = f.endports().len();
    for cuts in [
        &[][..],
        &[0.5][..],
        &[0.1, 0.2, 0.9][..],
        &[0.13, 0.31, 0.47, 0.5, 0.77, 0.8, 0.95][..],
    ] {
        let parts: Vec<_> = layout(n, cuts)
            .into_iter()
            .map(|(a, b)| verify_part(f, r, a..b))
            .collect();
        // Merged in another order than computed: order does not matter.
        let mut shuffled = parts.clone();
        shuffled.reverse();
        let merged = merge_parts(f, r, &shuffled).expect("covering parts merge");
        assert_eq!(merged, whole, "{} parts", parts.len());
        // A worker holding only the tables' base and each part's columns
        // computes the same parts.
        let base = Routing::from_bytes(f, &r.to_bytes_base()).expect("base");
        for p in &parts {
            let (cols, sl_cols) = part_columns(f, r, p.start..p.end);
            let q = verify_part_columns(f, &base, p.start..p.end, &cols, &sl_cols)
                .expect("columns fit");
            assert_eq!(&q, p, "{}..{}", p.start, p.end);
        }
    }
}

#[test]
fn merged_parts_equal_one_run_on_several_fabrics_and_engines() {
    let cases = [
        (Topology::Dragonfly { p: 3, hosts: None }, EngineKind::Dfdn),
        (Topology::Dragonfly { p: 2, hosts: None }, EngineKind::Lash),
        (
            Topology::Mesh {
                dims: vec![4, 4, 4],
                torus: true,
                hosts: 1,
            },
            // Cyclic: the cycle is found in the united graph.
            EngineKind::Minhop,
        ),
        (Topology::SlimFly { q: 5, hosts: None }, EngineKind::Nue),
        (Topology::KaryNTree { k: 4, n: 3 }, EngineKind::Ftree),
    ];
    for (t, e) in cases {
        let (f, r) = routed(t.clone(), e);
        check(&f, &r);
        if e == EngineKind::Minhop {
            assert!(
                !verify(&f, &r).deadlock_free(),
                "{t:?}: the test needs a cycle"
            );
        }
    }
}

#[test]
fn merged_parts_name_the_same_broken_pairs() {
    let (f, mut r) = routed(Topology::Dragonfly { p: 3, hosts: None }, EngineKind::Dfdn);
    // Drop many entries: more broken pairs than a report names.
    for sw in 0..f.switches().len() as u32 {
        for &d in f.endports().iter().step_by(7) {
            r.lfts.set(sw, f.lid_of_slot(d), fabric::tables::NO_PATH);
        }
    }
    let whole = verify(&f, &r);
    assert!(whole.broken_pairs > 16, "{}", whole.broken_pairs);
    check(&f, &r);
}

#[test]
fn parts_that_miss_or_repeat_destinations_are_refused() {
    let (f, r) = routed(Topology::Dragonfly { p: 2, hosts: None }, EngineKind::Dfdn);
    let n = f.endports().len();
    let a = verify_part(&f, &r, 0..n / 2);
    let b = verify_part(&f, &r, n / 2 + 1..n);
    assert!(matches!(
        merge_parts(&f, &r, &[a.clone(), b]),
        Err(MergeError::Coverage { .. })
    ));
    let twice = verify_part(&f, &r, 0..n / 2);
    let rest = verify_part(&f, &r, n / 2..n);
    assert!(matches!(
        merge_parts(&f, &r, &[a, twice, rest.clone()]),
        Err(MergeError::Coverage { .. })
    ));
    let mut short = rest;
    short.edges.pop();
    let first = verify_part(&f, &r, 0..n / 2);
    assert!(matches!(
        merge_parts(&f, &r, &[first, short]),
        Err(MergeError::Shape { .. })
    ));
}

#[test]
fn columns_of_the_wrong_size_are_refused() {
    let (f, r) = routed(Topology::Dragonfly { p: 2, hosts: None }, EngineKind::Dfdn);
    let (mut cols, sl_cols) = part_columns(&f, &r, 0..5);
    cols.pop();
    assert!(matches!(
        verify_part_columns(&f, &r, 0..5, &cols, &sl_cols),
        Err(MergeError::Columns { .. })
    ));
    let n = f.endports().len();
    assert!(matches!(
        verify_part_columns(&f, &r, n..n + 1, &[], &[]),
        Err(MergeError::Columns { .. })
    ));
}
