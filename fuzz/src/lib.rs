//! What the fuzz targets share: the fixed subnet that dumps are read
//! against, a model comparison for round trips, and the check that a
//! refused input is reported as `file:line: cause`.

use fabric::formats::ibnetdiscover;
use fabric::model::{NodeId, NodeKind};
use fabric::{Error, Fabric};
use std::path::Path;
use std::sync::OnceLock;

/// Topology of [`fixed`].
pub const FIXED_NET: &str = include_str!("../fixed.net");

/// The subnet the LFT, SL2VL and path-SL targets read dumps against.
pub fn fixed() -> &'static Fabric {
    static F: OnceLock<Fabric> = OnceLock::new();
    F.get_or_init(|| {
        ibnetdiscover::parse(FIXED_NET, Path::new("fixed.net"))
            .unwrap_or_else(|e| panic!("the fixed topology must parse: {e}"))
    })
}

/// Asserts that `e` names `file` and a line of `text` (1 for an empty
/// input), in the `file:line: cause` form operators rely on.
pub fn assert_located(e: &Error, file: &str, text: &[u8]) {
    let lines = text.split(|&b| b == b'\n').count().max(1);
    match e {
        Error::Parse(p) => {
            assert_eq!(p.file, Path::new(file), "{e}");
            assert!(
                (1..=lines).contains(&p.line),
                "line {} outside 1..={lines}: {e}",
                p.line
            );
            assert!(!p.cause.is_empty(), "{e}");
            assert!(
                e.to_string().starts_with(&format!("{file}:{}: ", p.line)),
                "{e}"
            );
        }
        other => panic!("an input error without a line: {other:?} ({other})"),
    }
}

/// Asserts that `e` names `file` and an offset inside `bytes`, in the
/// `file: offset N: cause` form of the binary formats.
pub fn assert_offset(e: &Error, file: &str, bytes: &[u8]) {
    match e {
        Error::Binary(b) => {
            assert_eq!(b.file, Path::new(file), "{e}");
            assert!(b.offset <= bytes.len() as u64, "{e}");
            assert!(!b.cause.is_empty(), "{e}");
            assert!(e.to_string().starts_with(&format!("{file}: offset ")), "{e}");
        }
        other => panic!("a binary input error without an offset: {other:?} ({other})"),
    }
}

/// Panics with the first difference between two fabrics in what the model
/// exposes and the topology format carries. Switch ports other than 0 are
/// addressed by the node GUID, so their own port GUIDs are not compared.
pub fn assert_same_fabric(a: &Fabric, b: &Fabric) {
    assert_eq!(a.num_nodes(), b.num_nodes(), "node count");
    assert_eq!(a.num_slots(), b.num_slots(), "slot count");
    assert_eq!(a.max_lid(), b.max_lid(), "max LID");
    assert_eq!(a.subnet_prefix, b.subnet_prefix, "subnet prefix");
    for n in 0..a.num_nodes() as NodeId {
        assert_eq!(a.kind(n), b.kind(n), "kind of node {n}");
        assert_eq!(a.guid(n), b.guid(n), "GUID of node {n}");
        assert_eq!(a.desc(n), b.desc(n), "description of node {n}");
        assert_eq!(a.num_ports(n), b.num_ports(n), "ports of node {n}");
        for p in 0..=a.num_ports(n) {
            let (sa, sb) = (a.slot(n, p), b.slot(n, p));
            assert_eq!(a.remote(sa), b.remote(sb), "link of node {n} port {p}");
            assert_eq!(
                a.lid_of_slot(sa),
                b.lid_of_slot(sb),
                "LID of node {n} port {p}"
            );
            if a.kind(n) != NodeKind::Switch {
                assert_eq!(
                    a.port_guid(sa),
                    b.port_guid(sb),
                    "GUID of node {n} port {p}"
                );
            }
        }
    }
}
