//! Formats, MinHop and the verifier on real topologies (the reference nets
//! in tests/data are the ones the OpenSM comparison runs use).

use fabric::Fabric;
use fabric::formats::{ibnetdiscover, lft, pathsl, sl2vl};
use fabric::model::{NONE, NodeKind};
use fabric::routing::{self, EngineOptions};
use fabric::tables::{NO_PATH, PathSl, Routing, SL_NONE, Sl2Vl};
use fabric::verify::{self, PairFault};
use std::path::Path;

mod common;
use common::{load, ring};

fn minhop(f: &Fabric) -> Routing {
    routing::by_name("minhop")
        .expect("registered")
        .route(f, &EngineOptions::default())
        .expect("minhop routes")
}

#[test]
fn reference_nets_parse_with_expected_counts() {
    for (name, sw, cas, links) in [
        ("ring4.net", 4, 4, 8),
        ("ft2_4l2s.net", 6, 8, 16),
        ("torus3x3.net", 9, 9, 27),
        ("kary2_3.net", 12, 8, 24),
        ("df_p2.net", 36, 72, 72 + 36 * 3 / 2 + 36),
        ("sf_q5.net", 50, 200, 200 + 50 * 7 / 2),
    ] {
        let f = load(name);
        assert_eq!(f.switches().len(), sw, "{name} switches");
        assert_eq!(f.num_cas(), cas, "{name} CAs");
        assert_eq!(f.num_links(), links, "{name} links");
        assert_eq!(f.endports().len(), cas, "{name} end ports");
        // Every addressable port got a unique LID.
        assert_eq!(f.max_lid() as usize, sw + cas, "{name} max LID");
    }
}

#[test]
fn topology_round_trips_through_the_writer() {
    for name in ["df_p2.net", "sf_q5.net", "kary2_3.net"] {
        let a = load(name);
        let text = ibnetdiscover::write(&a);
        let b = ibnetdiscover::parse(&text, Path::new("rt.net")).expect("written file parses");
        assert_eq!(a.num_nodes(), b.num_nodes());
        assert_eq!(a.num_links(), b.num_links());
        for n in 0..a.num_nodes() as u32 {
            assert_eq!(a.guid(n), b.guid(n));
            assert_eq!(a.desc(n), b.desc(n));
            assert_eq!(a.kind(n), b.kind(n));
            for s in a.port_slots(n) {
                assert_eq!(
                    a.remote(s),
                    b.remote(s),
                    "{name} link of {} port {}",
                    a.desc(n),
                    a.port_of(s)
                );
                assert_eq!(a.port_guid(s), b.port_guid(s));
                assert_eq!(
                    a.lid_of_slot(s),
                    b.lid_of_slot(s),
                    "LIDs survive the round trip"
                );
            }
        }
        // Writing again gives the same bytes.
        assert_eq!(text, ibnetdiscover::write(&b));
    }
}

#[test]
fn ibnetdiscover_output_with_lids_and_port_guids_parses() {
    let text = "\
vendid=0x0
devid=0x0
sysimgguid=0x2000000000009
switchguid=0x2000000000009(2000000000009)
Switch\t2 \"S-0002000000000009\"\t\t# \"s2_2\" base port 0 lid 10 lmc 0
[1]\t\"H-0001000000000090\"[1](1000000000091) \t\t# \"h2_2_0\" lid 18 4xQDR
[2]\t\"S-0002000000000003\"[1]\t\t# \"s0_2\" enhanced port 0 lid 4 4xQDR

switchguid=0x2000000000003(2000000000003)
Switch\t1 \"S-0002000000000003\"\t\t# \"s0_2\" enhanced port 0 lid 4 lmc 0
[1]\t\"S-0002000000000009\"[2]\t\t# \"s2_2\" lid 10 4xQDR

caguid=0x1000000000090
Ca\t1 \"H-0001000000000090\"\t\t# \"h2_2_0\"
[1](1000000000091) \t\"S-0002000000000009\"[1]\t\t# lid 18 lmc 0 \"s2_2\" lid 10 4xQDR
";
    let f = ibnetdiscover::parse(text, Path::new("live.net")).unwrap();
    let sw = f.find_node_by_guid(0x2000000000009).unwrap();
    assert_eq!(f.desc(sw), "s2_2");
    assert_eq!(f.switch_lid(sw), 10);
    assert_eq!(
        f.switch_lid(f.find_node_by_guid(0x2000000000003).unwrap()),
        4
    );
    let ca = f.find_node_by_guid(0x1000000000090).unwrap();
    let port = f.slot(ca, 1);
    assert_eq!(f.port_guid(port), 0x1000000000091);
    assert_eq!(f.lid_of_slot(port), 18);
    assert_eq!(f.max_lid(), 18);
}

#[test]
fn parse_errors_name_file_line_and_cause() {
    let cases = [
        ("Switch 2 \"a\"\n[1] \"b\"[1]\n", ":2:", "undefined node"),
        ("Switch 2 \"a\"\n[3] \"a\"[1]\n", ":2:", "out of range"),
        ("Switch 2 \"a\"\nSwitch 2 \"a\"\n", ":2:", "defined twice"),
        ("[1] \"a\"[1]\n", ":1:", "before any node"),
        ("switchguid=0xZZ\n", ":1:", "bad GUID"),
        ("Bridge 2 \"a\"\n", ":1:", "unknown line"),
        (
            "Switch 2 \"a\"\n[1] \"b\"[1]\nSwitch 2 \"b\"\n[1] \"a\"[2]\n",
            ":4:",
            "already linked",
        ),
        (
            "Switch 2 \"a\"\t# \"x\" base port 0 lid 50000 lmc 0\n",
            ":1:",
            "unicast range",
        ),
    ];
    for (text, line, cause) in cases {
        let e = ibnetdiscover::parse(text, Path::new("bad.net"))
            .expect_err(text)
            .to_string();
        assert!(e.starts_with("bad.net"), "{e}");
        assert!(e.contains(line), "{e} should name line {line}");
        assert!(e.contains(cause), "{e} should say {cause}");
    }
}

#[test]
fn the_model_refuses_two_addressable_ports_with_one_guid() {
    // Generators and readers other than ibnetdiscover build through the
    // same checks.
    let build = |second_port_guid: u64, connect_second: bool| {
        let mut b = fabric::FabricBuilder::new();
        let s = b.add_node(NodeKind::Switch, 0x20, "s", 2);
        let h0 = b.add_node(NodeKind::Ca, 0x10, "h0", 1);
        let h1 = b.add_node(NodeKind::Ca, 0x30, "h1", 1);
        b.connect(s, 1, h0, 1).expect("links");
        if connect_second {
            b.connect(s, 2, h1, 1).expect("links");
        }
        b.set_port_guid(h1, 1, second_port_guid).expect("port");
        b.build()
    };
    let e = build(0x11, true).expect_err("refused").to_string();
    assert_eq!(
        e,
        "port GUID 0x0000000000000011 is used by both 'h0' port 1 and 'h1' port 1"
    );
    let e = build(0x20, true).expect_err("refused").to_string();
    assert!(e.contains("switch 's'"), "{e}");
    // An unconnected port has no LID and no tables: nothing to confuse.
    let f = build(0x11, false).expect("builds");
    assert_eq!(f.port_guid_index().get(&0x11), Some(&f.slot(1, 1)));
}

#[test]
fn minhop_routes_all_pairs_with_shortest_paths() {
    for name in [
        "kary2_3.net",
        "df_p2.net",
        "sf_q5.net",
        "torus3x3.net",
        "ft2_4l2s.net",
    ] {
        let f = load(name);
        let r = minhop(&f);
        let rep = verify::verify(&f, &r);
        assert!(rep.all_pairs_routed(), "{name}: {:?}", rep.broken_examples);
        let diameter = fabric::graph::SwitchGraph::new(&f).diameter().unwrap();
        assert_eq!(
            rep.max_hops, diameter,
            "{name}: minimal routes reach exactly the diameter"
        );
        assert_eq!(rep.vls_used, 1);
        let n = f.endports().len() as u64;
        assert_eq!(rep.pairs, n * (n - 1));
    }
}

#[test]
fn minhop_balances_destinations_over_equal_ports() {
    // 2-ary 3-tree leaf switches have two up ports; minhop spreads remote
    // destinations evenly over them.
    let f = load("kary2_3.net");
    let r = minhop(&f);
    for &sw in f.switches() {
        let si = f.switch_index(sw).unwrap();
        let mut load = vec![0u32; f.num_ports(sw) as usize + 1];
        for &e in f.endports() {
            let p = r.lfts.get(si, f.lid_of_slot(e));
            assert_ne!(p, NO_PATH);
            load[p as usize] += 1;
        }
        let hosts_here = f
            .port_slots(sw)
            .filter(|&s| f.remote(s) != NONE && f.kind(f.node_of(f.remote(s))) == NodeKind::Ca)
            .count();
        if hosts_here == 2 {
            // Leaf: 2 local hosts + 6 remote spread 3/3 over the 2 up ports.
            let mut ups: Vec<u32> = load.iter().copied().filter(|&l| l > 1).collect();
            ups.sort();
            assert_eq!(ups, vec![3, 3], "switch {}", f.desc(sw));
        }
    }
}

#[test]
fn minhop_on_a_ring_is_reported_with_a_real_cycle() {
    let f = ring(5);
    let r = minhop(&f);
    let rep = verify::verify(&f, &r);
    assert!(rep.all_pairs_routed());
    let cyc = rep
        .cycle
        .clone()
        .expect("a 5-ring with 2-hop minimal routes has a CDG cycle");
    // The witness is a closed walk of switch-to-switch channels: each
    // channel's head switch is the next channel's tail switch.
    assert!(cyc.len() >= 2);
    for i in 0..cyc.len() {
        let a = cyc[i].slot;
        let b = cyc[(i + 1) % cyc.len()].slot;
        assert_eq!(
            f.node_of(f.remote(a)),
            f.node_of(b),
            "witness is a closed walk"
        );
    }
    assert!(rep.describe_cycle(&f).unwrap().contains("=>"));
}

#[test]
fn minhop_on_tree_topologies_is_deadlock_free() {
    for name in ["kary2_3.net", "ft2_4l2s.net"] {
        let f = load(name);
        let rep = verify::verify(&f, &minhop(&f));
        assert!(
            rep.ok(),
            "{name}: up/down-only shortest paths cannot form a cycle"
        );
    }
}

/// Dateline SL2VL on a ring: VL 1 once a packet crossed the link s(n-1)<->s0.
fn dateline(f: &Fabric) -> Sl2Vl {
    let mut t = Sl2Vl::new(f);
    let n = f.switches().len() as u32;
    let crosses = |a: u32, b: u32| (a == n - 1 && b == 0) || (a == 0 && b == n - 1);
    let sw_of = |s: u32| {
        if s == NONE {
            None
        } else {
            f.switch_index(f.node_of(s))
        }
    };
    for &sw in f.switches() {
        let si = f.switch_index(sw).unwrap();
        for inp in 0..=f.num_ports(sw) {
            for out in 1..=f.num_ports(sw) {
                let in_crossed = match sw_of(f.remote(f.slot(sw, inp))) {
                    Some(prev) if inp != 0 => crosses(prev, si),
                    _ => false,
                };
                let out_crosses = match sw_of(f.remote(f.slot(sw, out))) {
                    Some(next) => crosses(si, next),
                    None => false,
                };
                let vl = u8::from(in_crossed || out_crosses);
                t.set_switch_row(si, inp, out, [vl; 16]);
            }
        }
    }
    t
}

#[test]
fn dateline_vls_make_the_ring_deadlock_free_and_survive_the_dump() {
    let f = ring(5);
    let mut r = minhop(&f);
    r.sl2vl = Some(dateline(&f));
    let rep = verify::verify(&f, &r);
    assert!(rep.ok(), "cycle: {:?}", rep.describe_cycle(&f));
    assert_eq!(rep.vls_used, 2);
    assert_eq!(rep.max_vl, 1);

    // The dump round trip keeps every row.
    let text = sl2vl::write(&f, r.sl2vl.as_ref().unwrap());
    assert!(text.starts_with("Channel Adapter 0x"));
    assert!(text.contains("#in out : 0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15\n"));
    let back = sl2vl::parse(&f, &text, Path::new("sl2vl.dump")).unwrap();
    assert_eq!(&back, r.sl2vl.as_ref().unwrap());
    // And verifying from the re-read tables gives the same answer.
    r.sl2vl = Some(back);
    assert!(verify::verify(&f, &r).ok());
}

#[test]
fn lft_dump_round_trips_and_matches_opensm_layout() {
    let f = load("df_p2.net");
    let r = minhop(&f);
    let text = lft::write(&f, &r.lfts);
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("Unicast lids [0-{}] of switch Lid ", f.max_lid())),
        "{first}"
    );
    assert!(first.ends_with("'):"));
    assert!(text.contains(" # Channel Adapter portguid 0x"));
    let trailer = format!("{} lids dumped", f.max_lid());
    assert_eq!(
        text.lines().filter(|l| *l == trailer).count(),
        f.switches().len()
    );
    let back = lft::parse(&f, text.as_bytes(), Path::new("x.dump")).unwrap();
    assert_eq!(back, r.lfts);
}

#[test]
fn lft_reader_remaps_lids_by_port_guid() {
    let f = load("ring4.net");
    let r = minhop(&f);
    // Shift every LID by 0x100 in the text: the port GUIDs still identify the
    // destinations, as with OpenSM's file loader.
    let text: String = lft::write(&f, &r.lfts)
        .lines()
        .map(|l| match l.strip_prefix("0x") {
            Some(rest) if l.contains("portguid") => {
                let lid = u16::from_str_radix(&rest[..4], 16).unwrap();
                format!("0x{:04x}{}\n", lid + 0x100, &rest[4..])
            }
            _ => format!("{l}\n"),
        })
        .collect();
    let back = lft::parse(&f, text.as_bytes(), Path::new("x.dump")).unwrap();
    assert_eq!(back, r.lfts);
}

#[test]
fn lft_reader_errors_are_located() {
    let f = load("ring4.net");
    let e = lft::parse(
        &f,
        &b"Unicast lids [0-8] of switch Lid 2 guid 0x00000000deadbeef ('x'):\n"[..],
        Path::new("l.dump"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("l.dump:1:") && e.contains("not in the topology"),
        "{e}"
    );
    let sw = f.guid(f.switches()[0]);
    let text =
        format!("Unicast lids [0-8] of switch Lid 2 guid 0x{sw:016x} ('s0'):\n0x0001 009 # x\n");
    let e = lft::parse(&f, text.as_bytes(), Path::new("l.dump"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("l.dump:2:") && e.contains("exceeds"), "{e}");
    // The same switch twice (two dumps concatenated): refused at the
    // second block, not silently taken from it.
    let text = format!(
        "Unicast lids [0-8] of switch Lid 2 guid 0x{sw:016x} ('s0'):\n0x0001 001 # x\n\
         Unicast lids [0-8] of switch Lid 2 guid 0x{sw:016x} ('s0'):\n0x0001 002 # x\n"
    );
    let e = lft::parse(&f, text.as_bytes(), Path::new("l.dump"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("l.dump:3:") && e.contains("second block") && e.contains("line 1"),
        "{e}"
    );
}

#[test]
fn verifier_reports_missing_routes_and_loops() {
    let f = load("ring4.net");
    let mut r = minhop(&f);
    let dst = f.lid_of_slot(f.endports()[2]);
    // Switch 0 loses its route to the destination.
    r.lfts.set(0, dst, NO_PATH);
    let rep = verify::verify(&f, &r);
    assert!(!rep.all_pairs_routed());
    assert!(
        rep.broken_examples
            .iter()
            .any(|b| b.dst_lid == dst && matches!(b.fault, PairFault::NoRoute { .. }))
    );

    // Two neighbouring switches bounce the destination between them.
    let mut r = minhop(&f);
    let (a, b) = (f.switches()[0], f.switches()[1]);
    let (ai, bi) = (f.switch_index(a).unwrap(), f.switch_index(b).unwrap());
    let a_to_b = f
        .port_slots(a)
        .find(|&s| f.node_of(f.remote(s)) == b)
        .map(|s| f.port_of(s))
        .unwrap();
    let b_to_a = f
        .port_slots(b)
        .find(|&s| f.node_of(f.remote(s)) == a)
        .map(|s| f.port_of(s))
        .unwrap();
    let far = f.lid_of_slot(f.endports()[3]);
    r.lfts.set(ai, far, a_to_b);
    r.lfts.set(bi, far, b_to_a);
    let rep = verify::verify(&f, &r);
    assert!(
        rep.broken_examples
            .iter()
            .any(|b| b.dst_lid == far && matches!(b.fault, PairFault::Loop { .. }))
    );
}

#[test]
fn path_sl_round_trip_and_no_path_marker() {
    let f = load("ring4.net");
    let mut p = PathSl::new(f.max_lid());
    let mut row = vec![3u8; p.width()];
    row[0] = SL_NONE;
    let shared = p.push_row(&row);
    for &e in f.endports() {
        p.assign(f.lid_of_slot(e), shared);
    }
    let text = pathsl::write(&f, &p);
    assert!(text.lines().any(|l| l.starts_with("0x0001 -3")), "{text}");
    let back = pathsl::parse(&f, text.as_bytes(), Path::new("p.txt")).unwrap();
    for &a in f.endports() {
        for &b in f.endports() {
            assert_eq!(
                back.get(f.lid_of_slot(a), f.lid_of_slot(b)),
                p.get(f.lid_of_slot(a), f.lid_of_slot(b))
            );
        }
    }
    // Identical rows are shared after reading.
    assert_eq!(back.distinct_sls(), 1);
    let e = pathsl::parse(&f, &b"0x0001 12\n"[..], Path::new("p.txt"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("p.txt:1:") && e.contains("characters"), "{e}");
    assert!(
        pathsl::read_optional(&f, Path::new("/nonexistent/path-sl.txt"))
            .unwrap()
            .is_none()
    );
}

#[test]
fn path_sls_drive_vls_through_the_verifier() {
    // SL 1 everywhere with an SL2VL table that maps SL 1 to VL 1 on every
    // switch: the ring's cycle moves to VL 1 but stays a cycle.
    let f = ring(5);
    let mut r = minhop(&f);
    let mut t = Sl2Vl::new(&f);
    let mut row = [0u8; 16];
    row[1] = 1;
    for &sw in f.switches() {
        let si = f.switch_index(sw).unwrap();
        for i in 0..=f.num_ports(sw) {
            for o in 1..=f.num_ports(sw) {
                t.set_switch_row(si, i, o, row);
            }
        }
    }
    r.sl2vl = Some(t);
    let mut p = PathSl::new(f.max_lid());
    let idx = p.push_row(&vec![1u8; p.width()]);
    for &e in f.endports() {
        p.assign(f.lid_of_slot(e), idx);
    }
    r.path_sl = Some(p);
    let rep = verify::verify(&f, &r);
    assert_eq!(rep.sls_used, 1);
    assert_eq!(rep.max_vl, 1);
    assert!(rep.cycle.as_ref().unwrap().iter().all(|vc| vc.vl == 1));
}

/// VL 0 for traffic that entered from an end port, VL 1 after the first
/// switch-to-switch hop: the DF-D2 scheme.
fn vl_by_input(f: &Fabric) -> Sl2Vl {
    let mut t = Sl2Vl::new(f);
    for &sw in f.switches() {
        let si = f.switch_index(sw).unwrap();
        for inp in 1..=f.num_ports(sw) {
            let from_switch = f.kind(f.node_of(f.remote(f.slot(sw, inp)))) == NodeKind::Switch;
            for out in 1..=f.num_ports(sw) {
                t.set_switch_row(si, inp, out, [u8::from(from_switch); 16]);
            }
        }
    }
    t
}

#[test]
fn vl_increment_after_first_hop_is_deadlock_free_on_diameter_two() {
    // A 5-ring has diameter 2: VL 0 then VL 1 breaks every cycle.
    let f = ring(5);
    let mut r = minhop(&f);
    r.sl2vl = Some(vl_by_input(&f));
    let rep = verify::verify(&f, &r);
    assert!(rep.ok(), "{:?}", rep.describe_cycle(&f));
    assert_eq!(rep.vls_used, 2);
}

#[test]
fn cycle_reached_only_on_a_second_vl_is_found() {
    // A 7-ring has 3-hop routes: hops 2 and 3 both use VL 1, so VL 1 holds a
    // cycle. Channels are first reached on VL 0 by nearer sources, so the
    // verifier must add the VL 1 edges of already expanded states.
    let f = ring(7);
    let mut r = minhop(&f);
    r.sl2vl = Some(vl_by_input(&f));
    let rep = verify::verify(&f, &r);
    let cyc = rep
        .cycle
        .expect("VL 1 layer of a 7-ring with 3-hop routes is cyclic");
    assert!(cyc.iter().all(|vc| vc.vl == 1), "{cyc:?}");
}

fn route_with(name: &str, f: &Fabric, max_vls: u8) -> fabric::Result<Routing> {
    let opts = EngineOptions {
        max_vls,
        ..EngineOptions::default()
    };
    routing::by_name(name).unwrap().route(f, &opts)
}

#[test]
fn dfd2_on_slim_fly_uses_two_vls_and_one_sl() {
    let f = load("sf_q5.net");
    let r = route_with("dfd2", &f, 8).unwrap();
    assert!(r.path_sl.is_none(), "DF-D2 needs no path SLs");
    let rep = verify::verify(&f, &r);
    assert!(rep.ok(), "{:?}", rep.describe_cycle(&f));
    assert_eq!(rep.vls_used, 2);
    assert_eq!(rep.sls_used, 1);
    // MinHop alone on the same Slim Fly is not deadlock free.
    assert!(!verify::verify(&f, &minhop(&f)).deadlock_free());
}

#[test]
fn dfd2_refuses_larger_diameters_and_too_few_vls() {
    let e = route_with("dfd2", &load("df_p2.net"), 8)
        .unwrap_err()
        .to_string();
    assert!(e.contains("diameter 3") && e.contains("dfdn"), "{e}");
    let e = route_with("dfd2", &load("sf_q5.net"), 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not enough VLs"), "{e}");
}

#[test]
fn dfdn_needs_diameter_vls_on_real_topologies() {
    for (name, vls) in [
        ("df_p2.net", 3),
        ("sf_q5.net", 2),
        ("torus3x3.net", 2),
        ("kary2_3.net", 4),
    ] {
        let f = load(name);
        let r = route_with("dfdn", &f, 8).unwrap();
        let rep = verify::verify(&f, &r);
        assert!(
            rep.ok(),
            "{name}: {:?} {:?}",
            rep.broken_examples,
            rep.describe_cycle(&f)
        );
        assert_eq!(rep.vls_used, vls, "{name}");
        assert!(rep.sls_used >= 1 && rep.sls_used <= 16);
        // The tables survive the dump formats and verify again from text.
        let lfts = lft::parse(&f, lft::write(&f, &r.lfts).as_bytes(), Path::new("l")).unwrap();
        let t = sl2vl::parse(
            &f,
            &sl2vl::write(&f, r.sl2vl.as_ref().unwrap()),
            Path::new("s"),
        )
        .unwrap();
        let p = pathsl::parse(
            &f,
            pathsl::write(&f, r.path_sl.as_ref().unwrap()).as_bytes(),
            Path::new("p"),
        )
        .unwrap();
        let back = Routing {
            lfts,
            sl2vl: Some(t),
            path_sl: Some(p),
            vls_needed: None,
        };
        let rep2 = verify::verify(&f, &back);
        assert!(rep2.ok());
        assert_eq!(rep2.vls_used, vls);
    }
}

#[test]
fn dfdn_reports_missing_vls_with_numbers() {
    let e = route_with("dfdn", &load("df_p2.net"), 2)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not enough VLs") && e.contains("--max-vls 2"),
        "{e}"
    );
}

#[test]
fn sssp_routes_minimally_and_balances_links_better_than_minhop() {
    for name in ["df_p2.net", "sf_q5.net", "torus3x3.net", "kary2_3.net"] {
        let f = load(name);
        let r = route_with("sssp", &f, 8).unwrap();
        let rep = verify::verify(&f, &r);
        assert!(rep.all_pairs_routed(), "{name}");
        let diameter = fabric::graph::SwitchGraph::new(&f).diameter().unwrap();
        assert_eq!(rep.max_hops, diameter, "{name}: SSSP keeps routes minimal");
    }
    // Global balance: the most loaded switch-to-switch channel carries no
    // more routes under SSSP than under MinHop on the Dragonfly.
    let f = load("df_p2.net");
    let max_load = |r: &Routing| {
        let mut load = vec![0u32; f.num_slots()];
        for &s in f.endports() {
            for &d in f.endports() {
                if s == d {
                    continue;
                }
                let dl = f.lid_of_slot(d);
                let mut at = f.remote(s);
                while f.node_of(at) != f.node_of(d) {
                    let sw = f.node_of(at);
                    let p = r.lfts.get(f.switch_index(sw).unwrap(), dl);
                    let o = f.slot(sw, p);
                    load[o as usize] += 1;
                    at = f.remote(o);
                }
            }
        }
        f.switches()
            .iter()
            .flat_map(|&sw| f.port_slots(sw))
            .filter(|&s| f.remote(s) != NONE && f.kind(f.node_of(f.remote(s))) == NodeKind::Switch)
            .map(|s| load[s as usize])
            .max()
            .unwrap()
    };
    let sssp = max_load(&route_with("sssp", &f, 8).unwrap());
    let mh = max_load(&minhop(&f));
    assert!(sssp <= mh, "SSSP max channel load {sssp} > MinHop {mh}");
}

#[test]
fn dfdn_on_sssp_is_deadlock_free_with_diameter_vls() {
    let f = load("df_p2.net");
    let opts = EngineOptions {
        base: Some(routing::Base::Sssp),
        ..EngineOptions::default()
    };
    let r = routing::by_name("dfdn").unwrap().route(&f, &opts).unwrap();
    let rep = verify::verify(&f, &r);
    assert!(rep.ok());
    assert_eq!(rep.vls_used, 3);
}

/// A node found by GUID is the node with that GUID, for every node of a
/// fabric and its hosts; a GUID the fabric lacks finds nothing.
#[test]
fn every_node_is_found_by_its_guid_and_no_other() {
    let f =
        fabric::generate::generate(&fabric::generate::Topology::Dragonfly { p: 3, hosts: None })
            .expect("df3");
    for n in 0..f.num_nodes() as u32 {
        assert_eq!(f.find_node_by_guid(f.guid(n)), Some(n));
    }
    let max = (0..f.num_nodes() as u32)
        .map(|n| f.guid(n))
        .max()
        .unwrap_or(0);
    assert_eq!(f.find_node_by_guid(max + 1), None);
    assert_eq!(f.find_node_by_guid(0), None);
    // Links cut keep the index: the nodes are the same.
    let cut = f.without_links(&f.switch_links()[..1]);
    assert_eq!(cut.find_node_by_guid(f.guid(5)), Some(5));
}
