//! The topology reader on `ibnetdiscover` output we did not generate: real
//! fabrics and the tool's documented forms (tests/data/ibnetdiscover/,
//! origins in ORIGIN.md). Each file parses to the counts it states, and the
//! real fabrics route deadlock free with every pair connected.

use fabric::formats::ibnetdiscover;
use fabric::model::NodeKind;
use fabric::routing::{self, EngineOptions};
use fabric::verify;
use std::path::{Path, PathBuf};

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/ibnetdiscover")
        .join(name)
}

fn counts(name: &str) -> (usize, usize, usize) {
    let f = ibnetdiscover::read(&path(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let cas = (0..f.num_nodes() as u32)
        .filter(|&n| f.kind(n) == NodeKind::Ca)
        .count();
    (f.switches().len(), cas, f.num_links())
}

#[test]
fn real_and_documented_outputs_parse_to_their_counts() {
    // (switches, CAs, links) as counted in each file with grep and awk,
    // apart from the reader: `Switch` and `Ca` header lines; switch port
    // lines less half of those naming another switch (these files have no
    // CA-to-CA links).
    assert_eq!(counts("loginoff-sx6036-qdr-fdr10.txt"), (8, 144, 192));
    assert_eq!(counts("topograph-ndr-dgx.txt"), (40, 582, 1114));
    assert_eq!(counts("psmn-x5.txt"), (11, 89, 159));
    assert_eq!(counts("topograph-ndr-single-ca-nolinks.txt"), (0, 1, 0));
    assert_eq!(counts("ibtopotool-2.txt"), (1, 2, 2));
    assert_eq!(counts("ibtopotool-4.txt"), (1, 1, 1));
    assert_eq!(counts("grouped-chassis-handmade.txt"), (3, 2, 4));
}

#[test]
fn grouped_output_keeps_guids_lids_and_external_ports() {
    let f = ibnetdiscover::read(&path("grouped-chassis-handmade.txt")).unwrap();
    let spine = f.find_node_by_guid(0x2c90300001001).expect("spine");
    assert_eq!(f.kind(spine), NodeKind::Switch);
    assert_eq!(f.switch_lid(spine), 1);
    // "[1][ext 1] ... [3][ext 3]": port 1 of the spine is port 3 of line-1.
    let line1 = f.find_node_by_guid(0x2c90300001011).expect("line-1");
    let r = f.remote(f.slot(spine, 1));
    assert_eq!((f.node_of(r), f.port_of(r)), (line1, 3));
    let ports = f.port_guid_index();
    let a = ports[&0x2c90300000102];
    assert_eq!(f.lid_of_slot(a), 4);
}

#[test]
fn real_fabrics_route_deadlock_free_with_every_pair_connected() {
    for name in [
        "loginoff-sx6036-qdr-fdr10.txt",
        "topograph-ndr-dgx.txt",
        "psmn-x5.txt",
    ] {
        let f = ibnetdiscover::read(&path(name)).unwrap();
        for engine in ["updn", "dnup", "dfdn", "dfsssp", "lash", "nue", "minhop"] {
            let r = routing::by_name(engine)
                .unwrap()
                .route(&f, &EngineOptions::default())
                .unwrap_or_else(|e| panic!("{name} {engine}: {e}"));
            let rep = verify::verify(&f, &r);
            assert!(
                rep.all_pairs_routed(),
                "{name} {engine}: {} broken",
                rep.broken_pairs
            );
            let ends = f.endports().len() as u64;
            assert_eq!(rep.pairs, ends * (ends - 1));
            if engine != "minhop" {
                assert!(rep.deadlock_free(), "{name}: {engine} closes a cycle");
            }
        }
    }
}

#[test]
fn what_cannot_be_routed_is_refused_with_its_line() {
    let e = ibnetdiscover::read(&path("ibtopotool-1.txt"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ibtopotool-1.txt:33:") && e.contains("LMC 1"),
        "{e}"
    );
    let e = ibnetdiscover::read(&path("ibtopotool-3.txt"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ibtopotool-3.txt:1:") && e.contains("discovery may be incomplete"),
        "{e}"
    );
}

/// Read for showing (`ibfabric info`), the man page's fabric keeps its
/// LMC: each CA port answers to two LIDs from an even base, and a LID of
/// another port inside a range, or a base not aligned, is refused with
/// its line.
#[test]
fn lmc_ranges_are_kept_for_showing_and_checked() {
    let text = std::fs::read_to_string(path("ibtopotool-1.txt")).expect("data");
    let f = ibnetdiscover::parse_with_lmc(&text, &path("ibtopotool-1.txt")).expect("reads");
    assert_eq!(f.max_lmc(), 1);
    let with_lmc: Vec<_> = f
        .endports()
        .iter()
        .copied()
        .filter(|&e| f.lmc(e) == 1)
        .collect();
    assert_eq!(with_lmc.len(), 5);
    for e in with_lmc {
        let base = f.lid_of_slot(e);
        assert_eq!(base % 2, 0);
        assert_eq!(f.lid_owner(base), Some(e));
        assert_eq!(
            f.lid_owner(base + 1),
            Some(e),
            "the second LID is the port's"
        );
    }
    // Line 33 holds `lid 16 lmc 1`: LID 17 is that port's.
    let clash = text.replacen("lid 12 lmc 1", "lid 17 lmc 0", 1);
    let e = ibnetdiscover::parse_with_lmc(&clash, Path::new("t.net")).unwrap_err();
    assert!(
        e.to_string()
            .contains("LID 17 is assigned twice (first on line 33)"),
        "{e}"
    );
    let odd = text.replacen("lid 16 lmc 1", "lid 15 lmc 1", 1);
    let e = ibnetdiscover::parse_with_lmc(&odd, Path::new("t.net")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("t.net:33: LID 15 with LMC 1 is not a multiple of 2"),
        "{e}"
    );
    let e = ibnetdiscover::parse_with_lmc(&text.replacen("lmc 1", "lmc 8", 1), Path::new("t.net"))
        .unwrap_err();
    assert!(e.to_string().contains("bad LMC"), "{e}");
    // Routing's reader still refuses it.
    assert!(ibnetdiscover::parse(&text, Path::new("t.net")).is_err());
}
