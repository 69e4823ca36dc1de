//! The verifier against a reference that walks every ordered pair on its
//! own, hop by hop, with nothing shared between pairs: on generator
//! families and a fabric with router ports, with the engines' tables and
//! with randomly damaged ones (LFT entries that drop, loop or point at a
//! dead port, path SLs that say "no path", SL-to-VL rows changed). The
//! dependencies, the broken pairs and their first examples, the VLs and
//! SLs used and the longest route must agree.

use fabric::generate::{Topology, generate};
use fabric::model::{NONE, NodeKind, Slot};
use fabric::routing::{self, EngineOptions};
use fabric::tables::{NO_PATH, NUM_SLS, Routing, SL_NONE};
use fabric::verify::verify_with_cdg;
use fabric::{Fabric, formats::ibnetdiscover};
use proptest::prelude::*;
use std::collections::{BTreeSet, HashSet};
use std::path::Path;

#[derive(Debug, Default, PartialEq)]
struct Reference {
    edges: BTreeSet<(u32, u32)>,
    broken: u64,
    first: Vec<(u16, u16)>,
    vl_mask: u16,
    sl_mask: u16,
    max_hops: u32,
    pairs: u64,
}

fn is_switch(f: &Fabric, s: Slot) -> bool {
    f.kind(f.node_of(s)) == NodeKind::Switch
}

fn s2s(f: &Fabric, s: Slot) -> bool {
    f.remote(s) != NONE && is_switch(f, s) && is_switch(f, f.remote(s))
}

/// One pair: `Some(hops)` when delivered, `None` when broken.
fn walk_pair(
    f: &Fabric,
    r: &Routing,
    vls: u32,
    (src, slid): (Slot, u16),
    (d, dlid): (Slot, u16),
    out: &mut Reference,
) -> Option<u32> {
    let sw0 = f.node_of(f.remote(src));
    let Some(si0) = f.switch_index(sw0) else {
        return (f.remote(src) == d).then_some(0);
    };
    let hop = |node, si: u32| {
        let p = r.lfts.get(si, dlid);
        (p != NO_PATH && p != 0 && p <= f.num_ports(node) && f.remote(f.slot(node, p)) != NONE)
            .then(|| (p, f.slot(node, p)))
    };
    let (p0, mut c) = hop(sw0, si0)?;
    let sl = r.path_sl.as_ref().map_or(0, |t| t.get(slid, dlid));
    if sl == SL_NONE || sl as usize >= NUM_SLS {
        return None;
    }
    out.sl_mask |= 1 << sl;
    let mut vc = r.switch_vl(si0, f.port_of(f.remote(src)), p0, sl);
    let mut seen = HashSet::new();
    let mut hops = 0;
    loop {
        let rem = f.remote(c);
        if rem == d {
            return Some(hops);
        }
        let node = f.node_of(rem);
        let si = f.switch_index(node)?;
        if s2s(f, c) {
            out.vl_mask |= 1 << vc;
            if !seen.insert(c) {
                return None;
            }
            hops += 1;
        }
        let (p, o2) = hop(node, si)?;
        let vo2 = r.switch_vl(si, f.port_of(rem), p, sl);
        if s2s(f, c) && s2s(f, o2) {
            out.edges
                .insert((c * vls + vc as u32, o2 * vls + vo2 as u32));
        }
        (c, vc) = (o2, vo2);
    }
}

fn reference(f: &Fabric, r: &Routing) -> Reference {
    let vls = r.sl2vl.as_ref().map_or(1, |t| t.max_vl() as u32 + 1);
    let mut out = Reference::default();
    let router = |s: Slot| f.kind(f.node_of(s)) == NodeKind::Router;
    let mut broken = Vec::new();
    // Every LID of a port toward every LID of another (LMC: 2^LMC each).
    for &(d, dlid) in f.end_lids() {
        for &(s, slid) in f.end_lids() {
            if s == d || (router(s) && router(d)) {
                continue;
            }
            out.pairs += 1;
            match walk_pair(f, r, vls, (s, slid), (d, dlid), &mut out) {
                Some(h) => out.max_hops = out.max_hops.max(h),
                None => broken.push((slid, dlid)),
            }
        }
    }
    broken.sort_unstable();
    out.broken = broken.len() as u64;
    out.first = broken.into_iter().take(16).collect();
    out
}

fn fast(f: &Fabric, r: &Routing) -> (Reference, fabric::verify::Report) {
    let (rep, cdg) = verify_with_cdg(f, r);
    let mut edges = BTreeSet::new();
    for v in 0..cdg.start.len().saturating_sub(1) {
        for &w in &cdg.adj[cdg.start[v] as usize..cdg.start[v + 1] as usize] {
            edges.insert((v as u32, w));
        }
    }
    let got = Reference {
        edges,
        broken: rep.broken_pairs,
        first: rep
            .broken_examples
            .iter()
            .map(|e| (e.src_lid, e.dst_lid))
            .collect(),
        vl_mask: 0,
        sl_mask: 0,
        max_hops: rep.max_hops,
        pairs: rep.pairs,
    };
    (got, rep)
}

fn check(f: &Fabric, r: &Routing, what: &str) {
    let want = reference(f, r);
    let (got, rep) = fast(f, r);
    assert_eq!(got.pairs, want.pairs, "{what}: pairs");
    assert_eq!(got.broken, want.broken, "{what}: broken pairs");
    assert_eq!(got.first, want.first, "{what}: the first broken pairs");
    assert_eq!(got.edges, want.edges, "{what}: dependencies");
    assert_eq!(rep.vls_used, want.vl_mask.count_ones(), "{what}: VLs used");
    assert_eq!(rep.sls_used, want.sl_mask.count_ones(), "{what}: SLs used");
    if want.broken == 0 {
        assert_eq!(got.max_hops, want.max_hops, "{what}: longest route");
    }
}

fn fabrics() -> Vec<(Fabric, &'static str)> {
    let mut v: Vec<(Fabric, &str)> = [
        (Topology::KaryNTree { k: 3, n: 2 }, "updn"),
        (Topology::Dragonfly { p: 2, hosts: None }, "dfdn"),
        (
            Topology::SlimFly {
                q: 5,
                hosts: Some(1),
            },
            "dfsssp",
        ),
        (
            Topology::Mesh {
                dims: vec![3, 3],
                torus: true,
                hosts: 2,
            },
            "lash",
        ),
        (
            Topology::Mesh {
                dims: vec![4],
                torus: true,
                hosts: 2,
            },
            "nue",
        ),
        (
            Topology::RandomRegular {
                switches: 8,
                degree: 3,
                hosts: 2,
                seed: 7,
            },
            "minhop",
        ),
    ]
    .into_iter()
    .map(|(t, e)| (generate(&t).expect("generates"), e))
    .collect();
    let text = "switchguid=0x10\nSwitch 4 \"s\" # \"s\" lid 1\n[1] \"h\"[1](0x21)\n[2] \"r\"[2]\n[3] \"t\"[1]\n[4] \"k\"[1](0x41)\n\n\
                switchguid=0x50\nSwitch 3 \"t\" # \"t\" lid 2\n[1] \"s\"[3]\n[2] \"g\"[1](0x61)\n[3] \"r\"[1]\n\n\
                caguid=0x20\nCa 1 \"h\" # \"h\"\n[1](0x21) \"s\"[1] # lid 7\n\n\
                caguid=0x40\nCa 1 \"k\" # \"k\"\n[1](0x41) \"s\"[4] # lid 8\n\n\
                caguid=0x60\nCa 1 \"g\" # \"g\"\n[1](0x61) \"t\"[2] # lid 9\n\n\
                rtguid=0x30\nRt 2 \"r\"\n[1](0x31) \"t\"[3] # lid 10\n[2](0x32) \"s\"[2] # lid 11\n";
    v.push((
        ibnetdiscover::parse(text, Path::new("r.net")).expect("parses"),
        "minhop",
    ));
    // With LMC: every LID of a port is a destination, and a source's LIDs
    // may take different path-SL rows.
    let lmc = |t: Topology, lmc: u8| {
        fabric::generate::with_lmc(&generate(&t).expect("generates"), lmc).expect("LMC")
    };
    v.push((lmc(Topology::KaryNTree { k: 3, n: 2 }, 2), "updn"));
    v.push((
        lmc(
            Topology::RandomRegular {
                switches: 8,
                degree: 3,
                hosts: 2,
                seed: 7,
            },
            1,
        ),
        "minhop+sl",
    ));
    v.push((lmc(Topology::Dragonfly { p: 2, hosts: None }, 1), "dfdn"));
    v.push((
        lmc(
            Topology::Mesh {
                dims: vec![3, 3],
                torus: true,
                hosts: 1,
            },
            2,
        ),
        "dfsssp",
    ));
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/ibnetdiscover/ibtopotool-1.txt"
    );
    let text = std::fs::read_to_string(data).expect("data");
    v.push((
        ibnetdiscover::parse_with_lmc(&text, Path::new(data)).expect("parses"),
        "dnup",
    ));
    v
}

fn route(f: &Fabric, e: &str) -> Routing {
    let (name, sls) = match e.strip_suffix("+sl") {
        Some(n) => (n, true),
        None => (e, false),
    };
    let mut r = routing::by_name(name)
        .expect("engine")
        .route(f, &EngineOptions::default())
        .expect("routes");
    if sls {
        // A path-SL row per source LID, the LIDs of a port on rows of
        // their own (SL 0 everywhere until damaged).
        let mut p = fabric::tables::PathSl::new(f.max_lid());
        let row = vec![0u8; p.width()];
        for &(_, lid) in f.end_lids() {
            let i = p.push_row(&row);
            p.assign(lid, i);
        }
        r.path_sl = Some(p);
    }
    r
}

#[test]
fn the_engines_tables_agree_with_the_pair_walker() {
    for (f, e) in fabrics() {
        check(&f, &route(&f, e), e);
    }
}

/// A damage: which table, where, what value (all reduced modulo sizes).
type Edit = (u8, u32, u32, u8);

fn damage(f: &Fabric, r: &mut Routing, edits: &[Edit]) {
    let nsw = f.switches().len() as u32;
    let lids = f.max_lid() as u32 + 1;
    for &(which, a, b, v) in edits {
        match which % 3 {
            0 => {
                let si = a % nsw;
                let np = f.num_ports(f.switches()[si as usize]);
                let port = match v % 4 {
                    0 => NO_PATH,
                    1 => 0,
                    _ => v % (np + 1),
                };
                r.lfts.set(si, (b % lids) as u16, port);
            }
            1 => {
                if let Some(p) = r.path_sl.as_mut() {
                    let sl = if v % 5 == 0 { SL_NONE } else { v % 4 };
                    p.set_pair((a % lids) as u16, (b % lids) as u16, sl);
                }
            }
            _ => {
                if let Some(t) = r.sl2vl.as_mut() {
                    let si = a % nsw;
                    let np = f.num_ports(f.switches()[si as usize]) as u32;
                    let mut row = t.switch_row(si, (b % (np + 1)) as u8, (b / 7 % (np + 1)) as u8);
                    row[(v % 16) as usize] = v % 4;
                    t.set_switch_row(si, (b % (np + 1)) as u8, (b / 7 % (np + 1)) as u8, row);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn damaged_tables_agree_with_the_pair_walker(
        which in 0..12usize,
        edits in prop::collection::vec((0..3u8, any::<u32>(), any::<u32>(), any::<u8>()), 1..24),
    ) {
        let (f, e) = fabrics().swap_remove(which);
        let mut r = route(&f, e);
        damage(&f, &mut r, &edits);
        check(&f, &r, e);
    }
}

/// The pairs within one switch, where destinations walked alike differ:
/// no SL from one host to its neighbour, and a neighbour's own entry sent
/// elsewhere.
#[test]
fn pairs_within_one_switch_are_checked_as_every_other_pair() {
    for (f, e) in fabrics() {
        let r = route(&f, e);
        let Some(pair) = f.endports().iter().find_map(|&a| {
            let sw = f.node_of(f.remote(a));
            f.endports()
                .iter()
                .copied()
                .find(|&b| b != a && f.node_of(f.remote(b)) == sw)
                .map(|b| (a, b, sw))
        }) else {
            continue;
        };
        let (a, b, sw) = pair;
        let (la, lb) = (f.lid_of_slot(a), f.lid_of_slot(b));
        if let Some(p) = r.path_sl.as_ref() {
            for (s, d) in [(la, lb), (lb, la)] {
                let mut damaged = r.clone();
                let mut q = p.clone();
                q.set_pair(s, d, SL_NONE);
                // Its entry toward itself (no pair) alike: the columns of
                // the two destinations then agree.
                q.set_pair(s, s, SL_NONE);
                damaged.path_sl = Some(q);
                check(&f, &damaged, e);
            }
        }
        let Some(si) = f.switch_index(sw) else {
            continue;
        };
        for port in [NO_PATH, f.port_of(f.remote(a))] {
            let mut damaged = r.clone();
            damaged.lfts.set(si, lb, port);
            check(&f, &damaged, e);
        }
    }
}
