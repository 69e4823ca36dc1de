//! Fabrics with LMC above 0: every LID of every end port routed by the
//! engines that say they do, spread over different next hops as OpenSM
//! spreads them, verified LID by LID (the verifier's parts and merge
//! included); the other engines refused by name.

use fabric::Fabric;
use fabric::formats::ibnetdiscover;
use fabric::generate::{Topology, generate, with_lmc};
use fabric::graph::{SwitchGraph, UNREACHABLE};
use fabric::model::{NONE, NodeKind};
use fabric::routing::{self, EngineOptions};
use fabric::tables::{NO_PATH, Routing};
use fabric::verify::{self, merge_parts, verify_part};
use std::collections::HashSet;
use std::path::Path;

const ENGINES: [&str; 8] = [
    "minhop", "sssp", "dfdn", "dfsssp", "lash", "updn", "dnup", "nue",
];

fn topologies() -> Vec<(Topology, &'static str)> {
    vec![
        (Topology::Dragonfly { p: 3, hosts: None }, "dragonfly p=3"),
        (
            Topology::Mesh {
                dims: vec![3, 3],
                torus: true,
                hosts: 2,
            },
            "torus 3x3",
        ),
        (Topology::KaryNTree { k: 3, n: 2 }, "3-ary 2-tree"),
        (
            Topology::RandomRegular {
                switches: 10,
                degree: 4,
                hosts: 2,
                seed: 3,
            },
            "random",
        ),
    ]
}

fn public_file() -> Fabric {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/ibnetdiscover/ibtopotool-1.txt"
    );
    let text = std::fs::read_to_string(p).expect("data");
    ibnetdiscover::parse_with_lmc(&text, Path::new(p)).expect("reads")
}

fn route(f: &Fabric, e: &str) -> Routing {
    let engine = routing::by_name(e).expect("engine");
    routing::check_lmc(engine.as_ref(), f).expect("routes LMC");
    engine.route(f, &EngineOptions::default()).expect("routes")
}

/// (Source LID, destination LID) pairs of two different CA ports.
fn lid_pairs(f: &Fabric) -> u64 {
    let lids: Vec<u64> = f.endports().iter().map(|&e| 1u64 << f.lmc(e)).collect();
    let all: u64 = lids.iter().sum();
    lids.iter().map(|k| k * (all - k)).sum()
}

/// Every switch has an entry toward every LID of every end port, the
/// verifier walks every LID pair and finds them all delivered, and the
/// engines that promise deadlock freedom keep it (DF-DN's VL rule and
/// the layered engines' SLs per destination LID).
#[test]
fn every_lid_is_routed_and_verified() {
    for (t, name) in topologies() {
        for lmc in [1u8, 2] {
            let f = with_lmc(&generate(&t).expect("generates"), lmc).expect("LMC");
            assert_eq!(f.end_lids().len(), f.endports().len() << lmc);
            for e in ENGINES {
                let r = route(&f, e);
                for si in 0..f.switches().len() as u32 {
                    for &(_, lid) in f.end_lids() {
                        assert_ne!(
                            r.lfts.get(si, lid),
                            NO_PATH,
                            "{name} LMC {lmc} {e}: LID {lid}"
                        );
                    }
                }
                let rep = verify::verify(&f, &r);
                assert_eq!(rep.end_lids, f.end_lids().len());
                assert_eq!(rep.pairs, lid_pairs(&f), "{name} LMC {lmc} {e}");
                assert!(rep.all_pairs_routed(), "{name} LMC {lmc} {e}: {rep:?}");
                let engine = routing::by_name(e).expect("engine");
                if engine.claims_deadlock_free() {
                    assert!(rep.deadlock_free(), "{name} LMC {lmc} {e}");
                }
            }
        }
    }
}

/// OpenSM's LMC spreading, checked on MinHop's own candidates: on every
/// switch, a destination's first LIDs go to as many different neighbours
/// as its shortest paths offer (up to its 2^LMC LIDs).
#[test]
fn a_destinations_lids_leave_toward_different_neighbours() {
    for (t, name) in topologies() {
        let f = with_lmc(&generate(&t).expect("generates"), 2).expect("LMC");
        let r = route(&f, "minhop");
        let g = SwitchGraph::new(&f);
        let hops = g.hop_matrix();
        let n = g.len();
        let (mut spread, mut could) = (0u64, 0u64);
        for si in 0..n as u32 {
            let sw = f.switches()[si as usize];
            for &d in f.endports() {
                let Some(dj) = f.switch_index(f.node_of(f.remote(d))) else {
                    continue;
                };
                let h = hops[si as usize * n + dj as usize];
                if dj == si || h == UNREACHABLE {
                    continue;
                }
                let behind = |p: u8| f.node_of(f.remote(f.slot(sw, p)));
                let nodes: HashSet<_> = g
                    .neighbours(si)
                    .iter()
                    .filter(|&&(nb, _)| hops[nb as usize * n + dj as usize] == h - 1)
                    .map(|&(nb, _)| f.switches()[nb as usize])
                    .collect();
                let lids: Vec<u16> = f.lids_of_slot(d).collect();
                let want = nodes.len().min(lids.len());
                let got: HashSet<_> = lids[..want]
                    .iter()
                    .map(|&l| behind(r.lfts.get(si, l)))
                    .collect();
                assert_eq!(got.len(), want, "{name}: switch {si}, LIDs of {lids:?}");
                could += u64::from(nodes.len() > 1);
                spread += u64::from(got.len() > 1);
            }
        }
        assert!(could > 0, "{name}: no destination with two ways");
        assert_eq!(spread, could, "{name}");
    }
}

/// A broken entry toward a port's second LID is a broken pair toward
/// that LID, not toward the port's base LID; and the walks cut into parts
/// over the destination LIDs merge to the report of one walk.
#[test]
fn the_verifier_names_the_lid_and_merges_parts_over_lids() {
    let f = public_file();
    let mut r = route(&f, "minhop");
    let (d, base) = f
        .end_lids()
        .iter()
        .copied()
        .find(|&(d, l)| f.lmc(d) > 0 && l == f.lid_of_slot(d))
        .expect("a port with LMC");
    let si = (0..f.switches().len() as u32)
        .find(|&si| f.switches()[si as usize] != f.node_of(f.remote(d)))
        .expect("another switch");
    let sources_there = f
        .endports()
        .iter()
        .filter(|&&e| f.switch_index(f.node_of(f.remote(e))) == Some(si))
        .count();
    r.lfts.set(si, base + 1, NO_PATH);
    let rep = verify::verify(&f, &r);
    assert!(rep.broken_pairs > 0);
    assert!(
        rep.broken_examples.iter().all(|b| b.dst_lid == base + 1),
        "{rep:?}"
    );
    if sources_there > 0 {
        assert!(rep.broken_pairs >= sources_there as u64);
    }
    let n = f.end_lids().len();
    for cut in [1, 3, n / 2, n - 1] {
        let parts = [verify_part(&f, &r, 0..cut), verify_part(&f, &r, cut..n)];
        assert_eq!(
            merge_parts(&f, &r, &parts).expect("merges"),
            rep,
            "cut {cut}"
        );
    }
}

/// The public LMC file is routed by every engine that routes every LID,
/// and refused by name by the others (no LID left behind silently); a
/// base that sends a port's LIDs one way is refused too.
#[test]
fn the_public_lmc_file_is_routed_or_refused_by_name() {
    let f = public_file();
    assert_eq!(f.max_lmc(), 1);
    for e in routing::registry() {
        if e.name() == "ftree" {
            // It routes every LID of a fat tree; this file is none.
            let err = e
                .route(&f, &EngineOptions::default())
                .expect_err("not a fat tree");
            assert!(err.to_string().contains("not a fat tree"), "{err}");
        } else if e.routes_lmc() {
            let r = route(&f, e.name());
            let rep = verify::verify(&f, &r);
            assert!(rep.ok() || e.name() == "minhop", "{}: {rep:?}", e.name());
            assert!(rep.all_pairs_routed(), "{}", e.name());
            assert_eq!(rep.pairs, lid_pairs(&f));
        } else {
            let err = routing::check_lmc(e.as_ref(), &f)
                .expect_err(e.name())
                .to_string();
            assert!(
                err.contains(&format!("engine {} routes one LID per port", e.name()))
                    && err.contains(
                        "minhop, sssp, dfd2, dfdn, dfsssp, lash, updn, dnup, ftree, nue, dor"
                    ),
                "{err}"
            );
        }
    }
    // A switch's port 0 with LMC (OpenSM's `lmc_esp0`): refused whatever
    // the engine, its other LIDs would be left behind.
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/ibnetdiscover/ibtopotool-1.txt"
    );
    let text = std::fs::read_to_string(p).expect("data");
    let esp0 = text.replace("base port 0 lid 6 lmc 0", "base port 0 lid 6 lmc 1");
    let g = ibnetdiscover::parse_with_lmc(&esp0, Path::new("esp0.net")).expect("reads");
    let e = routing::check_lmc(routing::by_name("updn").expect("updn").as_ref(), &g)
        .expect_err("switch LMC");
    assert!(e.to_string().contains("routes one LID per switch"), "{e}");
    let trees = EngineOptions {
        base: Some(routing::Base::Trees),
        ..EngineOptions::default()
    };
    for e in ["dfdn", "lash"] {
        let err = routing::by_name(e)
            .expect("engine")
            .route(&f, &trees)
            .expect_err(e);
        assert!(
            err.to_string()
                .contains("base trees sends every LID of a port the same way"),
            "{err}"
        );
    }
}

/// LIDs are assigned in aligned ranges when a generator gives none, and
/// the written topology reads back with the same ranges.
#[test]
fn generated_ranges_are_aligned_and_read_back() {
    let f = with_lmc(
        &generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("generates"),
        3,
    )
    .expect("LMC");
    for &e in f.endports() {
        let base = f.lid_of_slot(e);
        assert_eq!(base % 8, 0);
        for l in f.lids_of_slot(e) {
            assert_eq!(f.lid_owner(l), Some(e));
        }
    }
    for &sw in f.switches() {
        assert_eq!(f.lmc(f.slot(sw, 0)), 0);
    }
    let text = ibnetdiscover::write(&f);
    let g = ibnetdiscover::parse_with_lmc(&text, Path::new("t.net")).expect("reads back");
    assert_eq!(g.end_lids(), f.end_lids());
    let refused = ibnetdiscover::parse(&text, Path::new("t.net")).expect_err("one LID per port");
    assert!(refused.to_string().contains("LMC 3"), "{refused}");
    let switches = f
        .end_lids()
        .iter()
        .filter(|&&(s, _)| f.kind(f.node_of(s)) == NodeKind::Switch || f.remote(s) == NONE)
        .count();
    assert_eq!(switches, 0);
}

/// `auto` keeps its choice on a fabric with LMC: every engine it picks
/// routes every LID (DF-DN on a Dragonfly, Nue where the diameter exceeds
/// the VLs, ftree on a fat tree).
#[test]
fn auto_picks_an_engine_that_routes_every_lid() {
    let df = with_lmc(
        &generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("df"),
        1,
    )
    .expect("LMC");
    assert_eq!(routing::auto::choose(&df, 8).engine.name(), "dfdn");
    assert_eq!(routing::auto::choose(&df, 2).engine.name(), "nue");
    let ft = with_lmc(
        &generate(&Topology::KaryNTree { k: 3, n: 2 }).expect("ft"),
        1,
    )
    .expect("LMC");
    assert_eq!(routing::auto::choose(&ft, 8).engine.name(), "ftree");
}

/// A dump or PathRecords with more LIDs per port than the topology's LMC
/// are refused, not folded onto the port's LIDs here (the second LID's
/// entry would silently win).
#[test]
fn more_lids_per_port_than_the_topology_has_are_refused() {
    let df = generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("df");
    let f1 = with_lmc(&df, 1).expect("LMC");
    let r = route(&f1, "minhop");
    let dump = fabric::formats::lft::write(&f1, &r.lfts);
    let e = fabric::formats::lft::parse(&df, dump.as_bytes(), Path::new("d.dump"))
        .expect_err("two LIDs of a port on one");
    assert!(
        e.to_string()
            .contains("more LIDs per port than the topology's LMC"),
        "{e}"
    );
    // The same dump reads back against the fabric it was written for.
    let back =
        fabric::formats::lft::parse(&f1, dump.as_bytes(), Path::new("d.dump")).expect("reads");
    assert_eq!(back, r.lfts);
    let (a, b) = (f1.endports()[0], f1.endports()[5]);
    let (ga, gb) = (f1.port_guid(a), f1.port_guid(b));
    let (la, lb) = (f1.lid_of_slot(a), f1.lid_of_slot(b));
    let records = format!(
        "0x{ga:016x} 0x{gb:016x} {la} {lb} 1\n0x{ga:016x} 0x{gb:016x} {la} {} 2\n",
        lb + 1
    );
    let p = fabric::formats::pathsl::parse(&f1, records.as_bytes(), Path::new("pr.txt"))
        .expect("both LIDs of the port");
    assert_eq!((p.get(la, lb), p.get(la, lb + 1)), (1, 2));
    let e = fabric::formats::pathsl::parse(&df, records.as_bytes(), Path::new("pr.txt"))
        .expect_err("two LIDs of a port on one");
    assert!(
        e.to_string().contains("pr.txt:2:") && e.to_string().contains("LMC"),
        "{e}"
    );
}

/// Nue routes each LID of a port with a Dijkstra of its own, after the
/// first LIDs of the port's switch have loaded their channels: on a torus
/// (many equal ways) a destination's LIDs mostly leave a switch on
/// different first hops, each layer stays acyclic, and every source LID
/// carries the destination LID's layer as its SL.
#[test]
fn nue_spreads_a_ports_lids_and_keeps_its_layers() {
    let t = Topology::Mesh {
        dims: vec![4, 4],
        torus: true,
        hosts: 2,
    };
    let f = with_lmc(&generate(&t).expect("torus"), 1).expect("LMC");
    let opts = EngineOptions {
        max_vls: 2,
        ..EngineOptions::default()
    };
    let r = routing::by_name("nue")
        .expect("nue")
        .route(&f, &opts)
        .expect("routes");
    let rep = verify::verify(&f, &r);
    assert!(rep.ok(), "{rep:?}");
    assert!(rep.vls_used <= 2);
    let spread = fabric::lid_spread::lid_spread(&f, &r.lfts).expect("LMC fabric");
    assert!(
        spread.first_hops_share > 0.5,
        "a port's two LIDs mostly leave on different first hops: {spread:?}"
    );
    let psl = r.path_sl.as_ref().expect("path SLs");
    for &(s, sl) in f.end_lids() {
        for &(d, dl) in f.end_lids() {
            if s != d {
                assert_eq!(psl.get(sl, dl), psl.get(f.lid_of_slot(s), dl));
            }
        }
    }
}

/// The packet model's paths with LMC: on base LIDs every pair walks toward
/// the destination's base LID; spread, toward its LID at the source's
/// index modulo 2^LMC, from the source's LID at the destination's index.
/// Checked on the first switch's choice, which differs between the two
/// for some pairs (the engine sends a port's LIDs different ways).
#[test]
fn spread_traffic_walks_toward_the_lid_at_the_sources_offset() {
    use fabric::sim::{LidChoice, Paths, SubnetPaths};
    let f = public_file();
    let r = route(&f, "dfdn");
    let base = SubnetPaths::new(&f, &r);
    let spread = SubnetPaths::new(&f, &r).with_lids(LidChoice::Spread);
    let hosts = base.hosts().to_vec();
    let mut differ = 0;
    for (i, hs) in hosts.iter().enumerate() {
        let sw = f.node_of(f.remote(hs.slot));
        let si = f.switch_index(sw).expect("a switch");
        for (j, hd) in hosts.iter().enumerate() {
            if i == j {
                continue;
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            base.path_channels(i, j, &mut a).expect("base path");
            spread.path_channels(i, j, &mut b).expect("spread path");
            // The second channel leaves the source's switch.
            let port = |p: &[(u32, u8)]| f.port_of(p[1].0);
            assert_eq!(port(&a), r.lfts.get(si, hd.lid));
            let dlid = hd.lid + (i as u16 % (1 << f.lmc(hd.slot)));
            assert_eq!(port(&b), r.lfts.get(si, dlid), "{i} -> {j}");
            differ += usize::from(port(&a) != port(&b));
        }
    }
    assert!(differ > 0, "some pairs leave on another port when spread");
}

/// SSSP with LMC routes every port's base LID before any second LID, in
/// the LMC 0 order: the base LIDs get the LMC 0 tables, entry for entry
/// (matched by port), and the later LIDs find them in the weights.
#[test]
fn sssp_routes_base_lids_as_at_lmc_0() {
    for (t, name) in topologies() {
        let f0 = generate(&t).expect("generates");
        let f1 = with_lmc(&f0, 1).expect("LMC");
        for e in ["sssp", "dfsssp"] {
            let (r0, r1) = (route(&f0, e), route(&f1, e));
            let mut differ = 0;
            for si in 0..f0.switches().len() as u32 {
                for (&a, &b) in f0.endports().iter().zip(f1.endports()) {
                    differ += usize::from(
                        r0.lfts.get(si, f0.lid_of_slot(a)) != r1.lfts.get(si, f1.lid_of_slot(b)),
                    );
                }
            }
            assert_eq!(differ, 0, "{name} {e}: base-LID entries unlike LMC 0's");
        }
    }
}

/// ftree with LMC: on k-ary n-trees every LID is routed, deadlock free on
/// one VL; the base LIDs get the LMC 0 tables entry for entry; and from
/// every leaf a destination's LIDs on another leaf climb through as many
/// different up-links as the leaf has, up to its 2^LMC LIDs.
#[test]
fn ftree_routes_base_lids_as_at_lmc_0_and_spreads_the_others() {
    for (k, n) in [(4u32, 3u32), (3, 3), (2, 4)] {
        let f0 = generate(&Topology::KaryNTree { k, n }).expect("tree");
        for lmc in [1u8, 2] {
            let f = with_lmc(&f0, lmc).expect("LMC");
            let name = format!("{k}-ary {n}-tree LMC {lmc}");
            let (r0, r) = (route(&f0, "ftree"), route(&f, "ftree"));
            let rep = verify::verify(&f, &r);
            assert!(rep.ok() && rep.vls_used == 1, "{name}: {rep:?}");
            assert_eq!(rep.pairs, lid_pairs(&f), "{name}");
            let g = SwitchGraph::new(&f);
            let (mut spread, mut pairs) = (0, 0);
            for si in 0..f.switches().len() as u32 {
                for (&a, &b) in f0.endports().iter().zip(f.endports()) {
                    assert_eq!(
                        r0.lfts.get(si, f0.lid_of_slot(a)),
                        r.lfts.get(si, f.lid_of_slot(b)),
                        "{name}: base LID of {}",
                        f.desc(f.node_of(b))
                    );
                }
                let sw = f.switches()[si as usize];
                let hosts = f.port_slots(sw).filter(|&s| {
                    let r = f.remote(s);
                    r != NONE && f.kind(f.node_of(r)) == NodeKind::Ca
                });
                if hosts.count() == 0 {
                    continue;
                }
                let ups = g.neighbours(si).len();
                for &d in f.endports() {
                    if f.node_of(f.remote(d)) == sw {
                        continue;
                    }
                    let firsts: HashSet<u8> =
                        f.lids_of_slot(d).map(|l| r.lfts.get(si, l)).collect();
                    pairs += 1;
                    spread += usize::from(firsts.len() == ups.min(1 << lmc));
                }
            }
            assert_eq!(
                spread, pairs,
                "{name}: every LID set spread over the leaf's up-links"
            );
        }
    }
}

/// DF-D2 on a Slim Fly and DOR on a mesh at LMC 1 and 2: every LID pair
/// delivered, deadlock free (DF-D2's two VLs per LID; DOR on a mesh with
/// one VL); DOR keeps every LID of a port on the base LID's dimension-order
/// path (no parallel links to spread over), and a base that sends a
/// port's LIDs one way is refused.
#[test]
fn dfd2_and_dor_route_every_lid() {
    let sf = generate(&Topology::SlimFly { q: 5, hosts: None }).expect("slim fly");
    let mesh = generate(&Topology::Mesh {
        dims: vec![3, 4],
        torus: false,
        hosts: 2,
    })
    .expect("mesh");
    for lmc in [1u8, 2] {
        let f = with_lmc(&sf, lmc).expect("LMC");
        let r = route(&f, "dfd2");
        let rep = verify::verify(&f, &r);
        assert!(rep.ok() && rep.vls_used <= 2, "dfd2 LMC {lmc}: {rep:?}");
        assert_eq!(rep.pairs, lid_pairs(&f));
        let f = with_lmc(&mesh, lmc).expect("LMC");
        let r = route(&f, "dor");
        let rep = verify::verify(&f, &r);
        assert!(rep.ok() && rep.vls_used == 1, "dor LMC {lmc}: {rep:?}");
        assert_eq!(rep.pairs, lid_pairs(&f));
        for si in 0..f.switches().len() as u32 {
            for &e in f.endports() {
                let base = r.lfts.get(si, f.lid_of_slot(e));
                for l in f.lids_of_slot(e) {
                    assert_eq!(r.lfts.get(si, l), base, "dor LMC {lmc}: LID {l}");
                }
            }
        }
    }
    let trees = EngineOptions {
        base: Some(routing::Base::Trees),
        ..EngineOptions::default()
    };
    let f = with_lmc(&sf, 1).expect("LMC");
    let err = routing::by_name("dfd2")
        .expect("dfd2")
        .route(&f, &trees)
        .expect_err("trees with LMC");
    assert!(
        err.to_string().contains("base trees sends every LID"),
        "{err}"
    );
}
