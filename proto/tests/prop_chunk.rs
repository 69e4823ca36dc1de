//! Splitting pushes into parts and assembling them again gives back the
//! same message, and no part is larger than the bound.

use proptest::prelude::*;
use prost::Message;
use proto::chunk::{Assembler, ChunkError, MIN_PART_BYTES, split_egress, split_mapping};
use proto::v1;

fn mapping(entries: usize, defaults: usize) -> v1::MappingUpdate {
    v1::MappingUpdate {
        version: (7 << 32) | 3,
        subnet_prefix: 0xfe80_0000_0000_0001,
        algorithm: "issr".into(),
        entries: (0..entries as u64)
            .map(|i| v1::MappingEntry {
                destination: Some(v1::Gid::new(0xfe80_0000_0000_0002, 0x1000 + i)),
                router_port_guid: 0x2000 + i % 7,
                router_port_lid: 1 + (i % 300) as u32,
            })
            .collect(),
        default_ports: (0..defaults as u64).map(|i| 0x3000 + i).collect(),
        replaces: 0,
        part: 0,
        parts: 0,
    }
}

fn tables(contexts: &[usize]) -> v1::EgressTables {
    v1::EgressTables {
        router_guid: 0xabc,
        version: (9 << 32) | 1,
        algorithm: "isfr".into(),
        contexts: contexts
            .iter()
            .enumerate()
            .map(|(c, &n)| v1::IngressContext {
                ingress_ports: vec![c as u32 + 1, c as u32 + 2],
                rules: (0..n as u64)
                    .map(|i| v1::EgressRule {
                        r#match: Some(v1::egress_rule::Match::Gid(v1::Gid::new(2, i))),
                        next_lid: (i % 1000) as u32 + 1,
                        ports: vec![1, 2, 3],
                        choice: 0,
                    })
                    .collect(),
                continued: false,
            })
            .collect(),
        replaces: 0,
        part: 0,
        parts: 0,
    }
}

fn assemble<T: proto::chunk::Part>(parts: Vec<T>) -> Result<T, ChunkError> {
    let mut a = Assembler::new();
    let n = parts.len();
    for (i, p) in parts.into_iter().enumerate() {
        match a.push(p)? {
            Some(w) => {
                assert_eq!(i + 1, n, "whole before the last part");
                return Ok(w);
            }
            None => assert!(i + 1 < n, "last part did not complete"),
        }
    }
    panic!("no parts")
}

proptest! {
    #[test]
    fn mapping_round_trips(entries in 0usize..3000, defaults in 0usize..20, bound in MIN_PART_BYTES..40_000) {
        let m = mapping(entries, defaults);
        let parts = split_mapping(&m, bound).unwrap();
        for p in &parts {
            prop_assert!(p.encoded_len() <= bound, "{} > {bound}", p.encoded_len());
        }
        prop_assert_eq!(assemble(parts).unwrap(), m);
    }

    #[test]
    fn egress_round_trips(contexts in proptest::collection::vec(0usize..800, 0..6), bound in MIN_PART_BYTES..30_000) {
        let t = tables(&contexts);
        let parts = split_egress(&t, bound).unwrap();
        for p in &parts {
            prop_assert!(p.encoded_len() <= bound, "{} > {bound}", p.encoded_len());
        }
        prop_assert_eq!(assemble(parts).unwrap(), t);
    }
}

#[test]
fn small_messages_are_one_part() {
    let m = mapping(10, 2);
    let parts = split_mapping(&m, 1 << 20).unwrap();
    assert_eq!(parts.len(), 1);
    assert_eq!((parts[0].part, parts[0].parts), (0, 1));
}

#[test]
fn a_missing_part_is_refused_and_nothing_half_is_handed_out() {
    let m = mapping(2000, 3);
    let mut parts = split_mapping(&m, MIN_PART_BYTES).unwrap();
    assert!(parts.len() > 3);
    parts.remove(2);
    let mut a = Assembler::new();
    assert_eq!(a.push(parts[0].clone()), Ok(None));
    assert_eq!(a.push(parts[1].clone()), Ok(None));
    assert!(matches!(
        a.push(parts[2].clone()),
        Err(ChunkError::OutOfOrder {
            got: 3,
            want: 2,
            ..
        })
    ));
    assert!(!a.is_pending());
    // Later parts without a part 0 are refused too.
    assert!(a.push(parts[3].clone()).is_err());
}

#[test]
fn parts_of_two_versions_do_not_mix() {
    let a1 = split_mapping(&mapping(2000, 1), MIN_PART_BYTES).unwrap();
    let mut m2 = mapping(2000, 1);
    m2.version += 1;
    let a2 = split_mapping(&m2, MIN_PART_BYTES).unwrap();
    let mut a = Assembler::new();
    a.push(a1[0].clone()).unwrap();
    assert!(matches!(
        a.push(a2[1].clone()),
        Err(ChunkError::Mismatch {
            what: "version",
            ..
        })
    ));
    // A new part 0 starts afresh and completes.
    let mut whole = None;
    for p in a2 {
        whole = a.push(p).unwrap();
    }
    assert_eq!(whole, Some(m2));
}

#[test]
fn a_context_split_over_parts_is_rejoined() {
    let t = tables(&[3000]);
    let parts = split_egress(&t, MIN_PART_BYTES).unwrap();
    assert!(parts.len() > 2);
    assert!(parts[1].contexts[0].continued);
    assert_eq!(assemble(parts).unwrap(), t);
}

#[test]
fn a_bound_below_the_minimum_is_refused() {
    assert_eq!(
        split_mapping(&mapping(1, 0), 100),
        Err(ChunkError::BoundTooSmall(100))
    );
}
