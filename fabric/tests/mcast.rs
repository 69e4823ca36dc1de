//! Multicast trees checked with the unicast routes: reserved trees keep
//! every engine deadlock free on every family; OpenSM-like min-hop trees
//! on the unicast SL close cycles the check names by MLID; broken
//! forwarding entries are found; the files round-trip and refuse bad
//! input with file and line.

mod common;

use common::make;
use fabric::Fabric;
use fabric::formats::mcast::{
    parse_groups, parse_mfts, parse_tree, write_groups, write_mfts, write_tree,
};
use fabric::generate::Topology;
use fabric::mcast::tree::{TreeMode, build};
use fabric::mcast::{Group, Multicast, PortMask, all_members};
use fabric::routing::{EngineKind, EngineOptions};
use fabric::verify::mcast::{McastFault, verify_with_mcast};
use proptest::prelude::*;
use std::path::Path;

fn groups(f: &Fabric, seed: u64) -> Vec<Group> {
    let all = {
        let mut a = all_members(f);
        a.sort_unstable();
        a
    };
    // A few members spread over the fabric, picked by the seed.
    let mut some: Vec<u32> = (0..5)
        .map(|i| all[((seed.wrapping_mul(2654435761) + i * 7919) % all.len() as u64) as usize])
        .collect();
    some.sort_unstable();
    some.dedup();
    common::two_groups(all, some)
}

/// Routes `f` with `kind`, builds trees by `mode`, checks both together.
fn route_with_trees(
    f: &Fabric,
    kind: EngineKind,
    mode: TreeMode,
    seed: u64,
) -> (
    fabric::verify::Report,
    fabric::verify::mcast::McastReport,
    Multicast,
) {
    let (r, mc) = common::route_with_trees(f, kind, mode, groups(f, seed));
    let (u, m) = verify_with_mcast(f, &r, &mc);
    (u, m, mc)
}

fn families() -> Vec<(&'static str, Topology)> {
    vec![
        ("dragonfly p=2", Topology::Dragonfly { p: 2, hosts: None }),
        (
            "torus 4x4",
            Topology::Mesh {
                dims: vec![4, 4],
                torus: true,
                hosts: 1,
            },
        ),
        ("slim fly q=5", Topology::SlimFly { q: 5, hosts: None }),
        ("3-ary 2-tree", Topology::KaryNTree { k: 3, n: 2 }),
        ("OFT k=3", Topology::Oft { k: 3, hosts: None }),
        (
            "random 12x4",
            Topology::RandomRegular {
                switches: 12,
                degree: 4,
                hosts: 2,
                seed: 3,
            },
        ),
    ]
}

#[test]
fn reserved_trees_keep_every_deadlock_free_engine_deadlock_free_on_every_family() {
    let engines = [
        EngineKind::Dfdn,
        EngineKind::Dfsssp,
        EngineKind::Lash,
        EngineKind::Nue,
        EngineKind::Updn,
        EngineKind::Dnup,
    ];
    for (name, t) in families() {
        let f = make(t);
        for kind in engines {
            let (u, m, mc) = route_with_trees(&f, kind, TreeMode::Reserved, 1);
            assert!(u.ok(), "{name} {kind:?}: unicast {u:?}");
            assert!(m.ok(), "{name} {kind:?}: multicast {m:?}");
            assert_eq!(m.groups, 2);
            assert!(
                m.dependencies > 0,
                "{name} {kind:?}: the trees cross switches"
            );
            // One VL for multicast, and no unicast route on it.
            assert_eq!(m.vls_used, 1, "{name} {kind:?}");
            assert!(u.max_vl < 7, "{name} {kind:?}: unicast on VL {}", u.max_vl);
            assert!(mc.groups.iter().all(|g| g.sl == 15));
        }
    }
}

#[test]
fn min_hop_trees_on_the_unicast_sl_close_a_cycle_named_by_its_mlid() {
    // Dragonfly p=2, LASH: OpenSM's kind of tree for the broadcast group
    // on SL 0 shares VL 0 with LASH's first layer and closes a cycle.
    let f = make(Topology::Dragonfly { p: 2, hosts: None });
    let (u, m, mc) = route_with_trees(&f, EngineKind::Lash, TreeMode::MinHop, 1);
    assert!(u.ok(), "unicast alone is deadlock free");
    let cycle = m
        .cycle
        .as_ref()
        .expect("unicast and multicast close a cycle");
    assert!(cycle.len() >= 2);
    // A witness, step by step: each dependency of the cycle is one a
    // unicast route has, or a turn of a tree on the VL the tables give.
    let r = EngineKind::Lash
        .engine()
        .route(&f, &EngineOptions::default())
        .expect("routes");
    let (_, cdg) = fabric::verify::verify_with_cdg(&f, &r);
    let mut tree_steps = 0;
    for i in 0..cycle.len() {
        let (a, b) = (cycle[i], cycle[(i + 1) % cycle.len()]);
        let va = a.slot as usize * cdg.vls + a.vl as usize;
        let vb = b.slot * cdg.vls as u32 + b.vl as u32;
        let unicast = cdg.adj[cdg.start[va] as usize..cdg.start[va + 1] as usize].contains(&vb);
        let into = f.remote(a.slot);
        let x = f.node_of(into);
        assert_eq!(
            f.node_of(b.slot),
            x,
            "step {i}: consecutive channels meet at a switch"
        );
        let si = f.switch_index(x).expect("a switch");
        let (p, q) = (f.port_of(into), f.port_of(b.slot));
        let tree = mc.groups.iter().any(|g| {
            mc.mfts
                .ports(g.mlid, si)
                .is_some_and(|k| k.contains(p) && k.contains(q))
                && r.switch_vl(si, p, q, g.sl) == b.vl
        });
        assert!(unicast || tree, "step {i} is no dependency");
        tree_steps += usize::from(tree && !unicast);
    }
    assert!(tree_steps > 0, "the cycle takes a multicast turn");
    assert!(m.cycle_mlids.contains(&0xC000), "{:?}", m.cycle_mlids);
    // Every group named takes a dependency of the cycle.
    assert!(m.cycle_mlids.iter().all(|g| [0xC000, 0xC001].contains(g)));
    assert_eq!(m.broken, 0, "the trees themselves deliver");
    // The same groups on reserved trees: no cycle.
    let (_, m, _) = route_with_trees(&f, EngineKind::Lash, TreeMode::Reserved, 1);
    assert!(m.ok(), "{m:?}");
}

#[test]
fn shared_trees_are_refused_where_they_close_a_cycle_and_kept_where_not() {
    let f = make(Topology::Dragonfly { p: 2, hosts: None });
    // Up*/Down* orders the fabric from its own root; a tree from the
    // centre turns down then up somewhere.
    let (_, m, _) = route_with_trees(&f, EngineKind::Updn, TreeMode::Shared, 1);
    assert!(
        m.cycle.is_some() && m.cycle_mlids.contains(&0xC000),
        "{m:?}"
    );
    // DF-DN raises the VL at every turn that could close a cycle, for
    // multicast too: the shared trees stay deadlock free.
    let (_, m, _) = route_with_trees(&f, EngineKind::Dfdn, TreeMode::Shared, 1);
    assert!(m.ok(), "{m:?}");
    assert!(m.vls_used > 1, "multicast climbs VLs with DF-DN");
}

/// LASH with the top SL and VL left to multicast, and sent there.
fn lash_reserved(f: &Fabric) -> fabric::tables::Routing {
    let opts = EngineOptions {
        max_vls: 7,
        max_sls: 15,
        ..Default::default()
    };
    let mut r = EngineKind::Lash.engine().route(f, &opts).expect("routes");
    fabric::mcast::tree::reserve(f, &mut r, 15, 7).expect("reserve");
    r
}

/// Expects a fault matching `pred` in the multicast check of `mc`.
fn faulted(
    f: &Fabric,
    r: &fabric::tables::Routing,
    mc: &Multicast,
    pred: impl Fn(&McastFault) -> bool,
) {
    let rep = verify_with_mcast(f, r, mc).1;
    assert!(rep.broken > 0, "{rep:?}");
    assert!(rep.faults.iter().any(pred), "{rep:?}");
}

fn one_group(f: &Fabric) -> (fabric::tables::Routing, Multicast) {
    let mut r = EngineKind::Updn
        .engine()
        .route(f, &EngineOptions::default())
        .expect("routes");
    let mut gs = vec![Group {
        mlid: 0xC000,
        sl: 0,
        members: {
            let mut a = all_members(f);
            a.sort_unstable();
            a
        },
    }];
    let (mfts, plan) = build(f, &mut r, &mut gs, TreeMode::Reserved, Some((15, 1))).expect("trees");
    (
        r,
        Multicast {
            groups: gs,
            mfts,
            plan,
        },
    )
}

#[test]
fn broken_forwarding_entries_are_found() {
    let f = make(Topology::Mesh {
        dims: vec![3, 3],
        torus: false,
        hosts: 1,
    });
    let (r, mc) = one_group(&f);
    assert!(verify_with_mcast(&f, &r, &mc).1.ok());

    // A switch that drops a tree port: its far side never hears the near.
    let mut cut = mc.clone();
    let e = &mut cut.mfts.entries.get_mut(&0xC000).expect("entries")[0];
    let dropped = e.1.iter().find(|&p| {
        let s = f.slot(f.switches()[e.0 as usize], p);
        f.switch_index(f.node_of(f.remote(s))).is_some()
    });
    let dropped = dropped.expect("a switch port in the tree");
    let mut m2 = PortMask::default();
    for p in e.1.iter().filter(|&p| p != dropped) {
        m2.insert(p);
    }
    e.1 = m2;
    faulted(&f, &r, &cut, |x| {
        matches!(x, McastFault::Unreached { mlid: 0xC000, .. })
    });

    // Every switch forwarding on every switch link: copies circle.
    let mut flood = mc.clone();
    for (si, &sw) in f.switches().iter().enumerate() {
        let mut m = PortMask::default();
        for p in 1..=f.num_ports(sw) {
            if f.remote(f.slot(sw, p)) != fabric::model::NONE {
                m.insert(p);
            }
        }
        flood.mfts.set(0xC000, si as u32, m);
    }
    faulted(&f, &r, &flood, |x| {
        matches!(x, McastFault::Loop { mlid: 0xC000, .. })
    });

    // Entries for an MLID no group names.
    let mut extra = mc.clone();
    extra.mfts.set(0xC005, 0, PortMask([2, 0, 0, 0]));
    faulted(&f, &r, &extra, |x| {
        *x == McastFault::NoGroup { mlid: 0xC005 }
    });
}

#[test]
fn files_round_trip_and_refuse_bad_lines_with_file_and_line() {
    let f = make(Topology::Dragonfly { p: 2, hosts: None });
    let (_, _, mc) = route_with_trees(&f, EngineKind::Dfdn, TreeMode::Reserved, 4);
    let g = write_groups(&f, &mc.groups);
    assert!(g.contains("0xC000 sl=15 all"), "{g}");
    assert_eq!(
        parse_groups(&f, &g, Path::new("g")).expect("groups"),
        mc.groups
    );
    let m = write_mfts(&f, &mc.mfts);
    assert_eq!(parse_mfts(&f, &m, Path::new("m")).expect("mfts"), mc.mfts);
    let plan = mc.plan.as_ref().expect("reserved trees have a plan");
    let t = write_tree(&f, plan);
    assert_eq!(&parse_tree(&f, &t, Path::new("t")).expect("tree"), plan);
    assert_eq!(
        plan.tree.order.len(),
        f.switches().len(),
        "the plan spans the fabric"
    );
    // Cut anywhere before its end, the plan is refused with a line.
    let cut = &t[..t.rfind("end").expect("end")];
    let e = parse_tree(&f, cut, Path::new("t.txt")).expect_err("truncated");
    assert!(e.to_string().contains("truncated"), "{e}");
    let bad_trees = [
        (t.replacen("end", "switch 0x1 root\nend", 1), "not a switch"),
        (t.replacen(" root", "", 1), "expected 'root'"),
        (t.replacen(" up ", " up 9", 1), "no link"),
        (t.replacen("sl 15", "sl 16", 1), "bad SL"),
        (
            t.replacen("ibfabric-mcast-tree 1", "ibfabric-mcast-tree 2", 1),
            "expected",
        ),
        (format!("{t}switch 0x1 root\n"), "after 'end'"),
    ];
    for (text, want) in bad_trees {
        let e = parse_tree(&f, &text, Path::new("t.txt")).expect_err(want);
        assert!(e.to_string().starts_with("t.txt:"), "{e}");
        assert!(e.to_string().contains(want), "{want}: {e}");
    }

    let sw_guid = f.guid(f.switches()[0]);
    let bad_groups = [
        ("0xB000 sl=0 all", "outside the multicast range"),
        ("0xC000 sl=16 all", "sl=N"),
        ("0xC000 sl=0", "no members"),
        ("0xC000 sl=0 0x123", "not in the topology"),
        ("0xC000 sl=0 all\n0xC000 sl=0 all", "listed twice"),
        (&format!("0xC000 sl=0 {sw_guid:#x}"), "switch"),
    ];
    for (text, want) in bad_groups {
        let e = parse_groups(&f, text, Path::new("groups.txt")).expect_err(text);
        let s = e.to_string();
        assert!(s.starts_with("groups.txt:"), "{s}");
        assert!(s.contains(want), "{text}: {s}");
    }
    let bad_mfts = [
        ("0xC000 : 0x001", "before any 'Switch'"),
        ("Switch 0x99\n0xC000 : 0x001", "not a switch"),
        (&format!("Switch {sw_guid:#x}\n0xC000 : 0x0FF"), "bad port"),
        (&format!("Switch {sw_guid:#x}\n0xC000 :"), "no port"),
        (
            &format!("Switch {sw_guid:#x}\n0xC000 0x001"),
            "MLID : ports",
        ),
        (
            &format!("Switch {sw_guid:#x}\n0xC000 : 0x001\n0xC000 : 0x002"),
            "listed twice",
        ),
    ];
    for (text, want) in bad_mfts {
        let e = parse_mfts(&f, text, Path::new("mfts.txt")).expect_err(text);
        let s = e.to_string();
        assert!(s.starts_with("mfts.txt:"), "{s}");
        assert!(s.contains(want), "{text}: {s}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random regular fabrics and random groups: reserved trees always
    /// deliver to every member once and keep the routes deadlock free.
    #[test]
    fn reserved_trees_on_random_fabrics(
        switches in 6u32..20,
        seed in 0u64..1000,
        kind in prop::sample::select(vec![EngineKind::Dfsssp, EngineKind::Lash, EngineKind::Nue, EngineKind::Updn]),
    ) {
        let degree = if switches % 2 == 0 { 3 } else { 4 };
        let f = make(Topology::RandomRegular { switches, degree, hosts: 2, seed });
        let (u, m, _) = route_with_trees(&f, kind, TreeMode::Reserved, seed);
        prop_assert!(u.ok());
        prop_assert!(m.ok(), "{:?}", m);
    }
}

fn fixed() -> Fabric {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let text = std::fs::read_to_string(root.join("fixed.net")).expect("fixed.net");
    fabric::formats::ibnetdiscover::parse(&text, Path::new("fixed.net")).expect("parses")
}

fn seed(target: &str, name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target)
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The fuzz targets' seeds are valid files of the fixed subnet.
#[test]
fn the_fuzz_seeds_read_against_the_fixed_subnet() {
    let f = fixed();
    let g =
        parse_groups(&f, &seed("mcast_groups", "two.txt"), Path::new("two.txt")).expect("groups");
    assert_eq!(g.len(), 2);
    assert_eq!(g[1].sl, 3);
    let m = parse_mfts(&f, &seed("mfts", "two.mcfdbs"), Path::new("two.mcfdbs")).expect("mfts");
    assert_eq!(m.len(), 3);
    let t = parse_tree(&f, &seed("mcast_tree", "two.txt"), Path::new("two.txt")).expect("tree");
    assert_eq!((t.sl, t.vl, t.tree.order.len()), (15, 7, 2));
}

/// `file:line: cause`, the line inside the text.
fn located(e: &fabric::Error, file: &str, text: &str) {
    match e {
        fabric::Error::Parse(p) => {
            assert_eq!(p.file, Path::new(file));
            assert!(
                (1..=text.split('\n').count().max(1)).contains(&p.line),
                "{e}"
            );
            assert!(!p.cause.is_empty());
        }
        other => panic!("an error without a line: {other}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Seeds with bytes changed, cut or inserted: never a panic; a
    /// refusal has file and line; what parses is written back the same.
    #[test]
    fn mutated_multicast_files_parse_or_refuse_with_a_line(
        which in 0usize..3,
        edits in prop::collection::vec((0usize..400, 0u8..128, 0u8..3), 1..6),
    ) {
        let f = fixed();
        let mut b = match which {
            0 => seed("mcast_groups", "two.txt"),
            1 => seed("mfts", "two.mcfdbs"),
            _ => seed("mcast_tree", "two.txt"),
        }
        .into_bytes();
        for (at, byte, op) in edits {
            let at = at % (b.len() + 1);
            match op {
                0 if at < b.len() => b[at] = byte,
                1 => b.insert(at, byte),
                _ => b.truncate(at),
            }
        }
        let Ok(text) = String::from_utf8(b) else { return Ok(()) };
        if which == 0 {
            match parse_groups(&f, &text, Path::new("g.txt")) {
                Ok(g) => prop_assert_eq!(parse_groups(&f, &write_groups(&f, &g), Path::new("w")).expect("back"), g),
                Err(e) => located(&e, "g.txt", &text),
            }
        } else if which == 1 {
            match parse_mfts(&f, &text, Path::new("m.txt")) {
                Ok(m) => prop_assert_eq!(parse_mfts(&f, &write_mfts(&f, &m), Path::new("w")).expect("back"), m),
                Err(e) => located(&e, "m.txt", &text),
            }
        } else {
            match parse_tree(&f, &text, Path::new("t.txt")) {
                Ok(t) => prop_assert_eq!(parse_tree(&f, &write_tree(&f, &t), Path::new("w")).expect("back"), t),
                Err(e) => located(&e, "t.txt", &text),
            }
        }
    }
}

/// A link of the plan's tree fails: the rebuilt tree keeps every link of
/// the old one that remains, so old and new entries mixed on the switches
/// close no cycle; two unrelated spanning trees mixed do.
#[test]
fn a_rebuilt_tree_keeps_the_old_links_and_mixes_safely_with_the_old_one() {
    use fabric::mcast::tree::{SpanningTree, rebuild};
    use fabric::verify::mcast::check_mixed;
    for (name, t) in families() {
        let f0 = make(t);
        let (_, _, mc0) = route_with_trees(&f0, EngineKind::Lash, TreeMode::Reserved, 2);
        let plan = mc0.plan.clone().expect("plan");
        // Fail the tree link to the last switch of the BFS order.
        let v = *plan.tree.order.last().expect("switches");
        let s = plan.tree.down[v as usize];
        let f1 = f0.without_links(&[s]);
        let (groups, mfts, plan1) = rebuild(&f1, &plan, &mc0.groups).expect("rebuilt");
        let mc1 = Multicast {
            groups,
            mfts,
            plan: Some(plan1.clone()),
        };
        let r1 = lash_reserved(&f1);
        let (u, m) = verify_with_mcast(&f1, &r1, &mc1);
        assert!(u.ok() && m.ok(), "{name}: {m:?}");
        let kept = (0..f0.switches().len())
            .filter(|&x| plan.tree.parent[x] != fabric::model::NONE && plan.tree.down[x] != s)
            .filter(|&x| {
                plan1.tree.parent[x] == plan.tree.parent[x]
                    && plan1.tree.down[x] == plan.tree.down[x]
                    || plan1.tree.parent[plan.tree.parent[x] as usize] == x as u32
            })
            .count();
        let old_links = plan.tree.order.len() - 2; // minus the root and the failed link
        assert_eq!(kept, old_links, "{name}: every remaining tree link is kept");
        assert_eq!(check_mixed(&f1, &r1, &mc0, &mc1), None, "{name}");
    }
    // Two spanning trees from different roots on a torus: mixed, the
    // switches can send copies around a ring.
    let f = make(Topology::Mesh {
        dims: vec![4, 4],
        torus: true,
        hosts: 1,
    });
    let (_, _, mc0) = route_with_trees(&f, EngineKind::Lash, TreeMode::Reserved, 2);
    let plan = mc0.plan.clone().expect("plan");
    let g = fabric::graph::SwitchGraph::new(&f);
    let other = SpanningTree::bfs(&g, (plan.tree.root + 5) % 16);
    let members = mc0.groups[0].members.clone();
    let mfts = fabric::mcast::tree::group_tree(&f, &other, 0xC000, &members).expect("tree");
    let mc1 = Multicast {
        groups: vec![mc0.groups[0].clone()],
        mfts,
        plan: None,
    };
    let r = lash_reserved(&f);
    assert!(
        verify_with_mcast(&f, &r, &mc1).1.ok(),
        "the other tree alone is fine"
    );
    assert!(
        check_mixed(&f, &r, &mc0, &mc1).is_some(),
        "mixed, it is not"
    );
}

/// The plan's root switch fails: the tree is rebuilt from another switch,
/// each of the root's parts attached once, the root's own hosts leave their
/// groups, and old and new entries mixed close no cycle.
#[test]
fn a_failed_root_switch_is_rebuilt_around() {
    use fabric::dqr::{Fault, apply_faults};
    use fabric::mcast::tree::rebuild;
    use fabric::verify::mcast::check_mixed;
    let f0 = make(Topology::Dragonfly { p: 2, hosts: None });
    let (_, _, mc0) = route_with_trees(&f0, EngineKind::Lash, TreeMode::Reserved, 3);
    let plan = mc0.plan.clone().expect("plan");
    let root = f0.switches()[plan.tree.root as usize];
    let f1 = apply_faults(&f0, &[Fault::Switch(root)]);
    let (groups, mfts, plan1) = rebuild(&f1, &plan, &mc0.groups).expect("rebuilt");
    assert_ne!(plan1.tree.root, plan.tree.root);
    assert_eq!(
        plan1.tree.order.len(),
        f0.switches().len() - 1,
        "every other switch"
    );
    let gone = |m: &u32| f0.remote(*m) != fabric::model::NONE && f0.node_of(f0.remote(*m)) == root;
    assert!(
        groups[0].members.iter().all(|m| !gone(m)),
        "the root's hosts left"
    );
    assert_eq!(groups[0].members.len(), mc0.groups[0].members.len() - 2);
    let mc1 = Multicast {
        groups,
        mfts,
        plan: Some(plan1),
    };
    let r1 = lash_reserved(&f1);
    let (_, m) = verify_with_mcast(&f1, &r1, &mc1);
    assert!(m.ok(), "{m:?}");
    assert_eq!(check_mixed(&f1, &r1, &mc0, &mc1), None);
}

/// A hop whose SL-to-VL entry sends the group to VL 15 drops its copies:
/// a fault, not a delivery.
#[test]
fn copies_sent_to_vl_15_are_a_fault() {
    let f = make(Topology::Mesh {
        dims: vec![3, 3],
        torus: false,
        hosts: 1,
    });
    let (mut r, mc) = one_group(&f);
    let t = r.sl2vl.as_mut().expect("tables");
    for (si, &sw) in f.switches().iter().enumerate() {
        for o in 0..=f.num_ports(sw) {
            for i in 0..=f.num_ports(sw) {
                let mut row = t.switch_row(si as u32, i, o);
                row[15] = 15;
                t.set_switch_row(si as u32, i, o, row);
            }
        }
    }
    let rep = verify_with_mcast(&f, &r, &mc).1;
    assert!(rep.broken > 0);
    assert!(
        rep.faults
            .iter()
            .any(|x| matches!(x, McastFault::BadVl { vl: 15, .. })),
        "{rep:?}"
    );
}
