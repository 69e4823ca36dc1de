//! Property tests over the wire conversions: valid core values survive
//! core → wire → bytes → wire → core, and arbitrary wire values are either
//! converted within range or refused with the field named, never with a
//! panic.

use fabric::intersubnet::{Choice, Context, Gid, MapEntry, Mapping, Match, RouterTable, Rule};
use proptest::prelude::*;
use prost::Message;
use proto::convert;
use proto::v1;

// ------------------------------------------------------------ valid values

fn gid() -> impl Strategy<Value = Gid> {
    (any::<u64>(), any::<u64>()).prop_map(|(prefix, guid)| Gid { prefix, guid })
}

fn unicast_lid() -> impl Strategy<Value = u16> {
    1u16..=0xBFFF
}

fn rule() -> impl Strategy<Value = Rule> {
    let matches = prop_oneof![
        gid().prop_map(Match::Gid),
        any::<u64>().prop_map(Match::Prefix)
    ];
    let choice = prop_oneof![Just(Choice::Hash), Just(Choice::First)];
    (
        matches,
        unicast_lid(),
        prop::collection::vec(1u8..=254, 1..5),
        choice,
    )
        .prop_map(|(matches, next_lid, ports, choice)| Rule {
            matches,
            next_lid,
            ports,
            choice,
        })
}

fn table() -> impl Strategy<Value = RouterTable> {
    let context = (
        prop::collection::vec(1u8..=254, 0..4),
        prop::collection::vec(rule(), 0..6),
    )
        .prop_map(|(ingress_ports, mut rules)| {
            // One rule per destination within a context.
            let mut seen = std::collections::HashSet::new();
            rules.retain(|r| seen.insert(r.matches));
            Context {
                ingress_ports,
                rules,
            }
        });
    (any::<u64>(), prop::collection::vec(context, 0..4)).prop_map(|(router_guid, contexts)| {
        RouterTable {
            router_guid,
            contexts,
        }
    })
}

fn mapping() -> impl Strategy<Value = Mapping> {
    let entry = (gid(), any::<u64>(), unicast_lid()).prop_map(
        |(dest, router_port_guid, router_port_lid)| MapEntry {
            dest,
            router_port_guid,
            router_port_lid,
        },
    );
    (
        any::<u64>(),
        prop::collection::vec(entry, 0..10),
        prop::collection::vec(any::<u64>(), 0..4),
    )
        .prop_map(|(prefix, entries, defaults)| Mapping {
            prefix,
            entries,
            defaults,
        })
}

/// Encodes and decodes, as the message crosses the network.
fn over_the_wire<T: Message + Default>(m: &T) -> T {
    T::decode(m.encode_to_vec().as_slice()).expect("own encoding decodes")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn tables_round_trip(t in table(), version in any::<u64>()) {
        let w = convert::table_to_wire(&t, version, "issr");
        let w = over_the_wire(&w);
        prop_assert_eq!(w.version, version);
        prop_assert_eq!(convert::table_from_wire(&w), Ok(t));
    }

    #[test]
    fn mappings_round_trip(m in mapping(), version in any::<u64>()) {
        let w = over_the_wire(&convert::mapping_to_wire(&m, version, "isfr"));
        prop_assert_eq!(w.version, version);
        prop_assert_eq!(convert::mapping_from_wire(&w), Ok(m));
    }

    #[test]
    fn gids_round_trip(g in gid()) {
        let w = over_the_wire(&convert::gid_to_wire(g));
        prop_assert_eq!(convert::gid_from_wire(&w), g);
    }
}

// ------------------------------------------------------------ arbitrary wire values

/// Mostly in-range numbers, with the edges and the far outside mixed in.
fn wire_u32(max: u32) -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => 1..=max,
        1 => Just(0u32),
        1 => Just(max + 1),
        1 => any::<u32>(),
    ]
}

fn wire_gid() -> impl Strategy<Value = v1::Gid> {
    (any::<u64>(), any::<u64>()).prop_map(|(p, g)| v1::Gid::new(p, g))
}

fn wire_rule() -> impl Strategy<Value = v1::EgressRule> {
    let m = prop_oneof![
        1 => Just(None),
        3 => wire_gid().prop_map(|g| Some(v1::egress_rule::Match::Gid(g))),
        3 => any::<u64>().prop_map(|p| Some(v1::egress_rule::Match::Prefix(p))),
    ];
    (
        m,
        wire_u32(0xBFFF),
        prop::collection::vec(wire_u32(254), 0..4),
        prop_oneof![4 => 0..2i32, 1 => any::<i32>()],
    )
        .prop_map(|(r#match, next_lid, ports, choice)| v1::EgressRule {
            r#match,
            next_lid,
            ports,
            choice,
        })
}

fn wire_table() -> impl Strategy<Value = v1::EgressTables> {
    let context = (
        prop::collection::vec(wire_u32(254), 0..3),
        prop::collection::vec(wire_rule(), 0..4),
    )
        .prop_map(|(ingress_ports, rules)| v1::IngressContext {
            ingress_ports,
            rules,
            continued: false,
        });
    (
        any::<u64>(),
        any::<u64>(),
        prop::collection::vec(context, 0..3),
    )
        .prop_map(|(router_guid, version, contexts)| v1::EgressTables {
            router_guid,
            version,
            algorithm: "issr".into(),
            contexts,
            replaces: 0,
            part: 0,
            parts: 0,
        })
}

fn wire_mapping() -> impl Strategy<Value = v1::MappingUpdate> {
    let entry = (
        prop::option::weighted(0.9, wire_gid()),
        any::<u64>(),
        wire_u32(0xBFFF),
    )
        .prop_map(
            |(destination, router_port_guid, router_port_lid)| v1::MappingEntry {
                destination,
                router_port_guid,
                router_port_lid,
            },
        );
    (
        any::<u64>(),
        any::<u64>(),
        prop::collection::vec(entry, 0..6),
        prop::collection::vec(any::<u64>(), 0..3),
    )
        .prop_map(
            |(version, subnet_prefix, entries, default_ports)| v1::MappingUpdate {
                version,
                subnet_prefix,
                algorithm: "issr".into(),
                entries,
                default_ports,
                replaces: 0,
                part: 0,
                parts: 0,
            },
        )
}

fn wire_router_port() -> impl Strategy<Value = v1::RouterPort> {
    (
        any::<u64>(),
        wire_u32(254),
        any::<u64>(),
        wire_u32(0xBFFF),
        prop::collection::vec(wire_u32(0xBFFF), 0..5),
        any::<u64>(),
    )
        .prop_map(
            |(router_guid, port, port_guid, lid, primary_lids, switch_guid)| v1::RouterPort {
                router_guid,
                router_desc: "r".into(),
                port,
                port_guid,
                lid,
                primary_lids,
                switch_guid,
                router_num_ports: 254,
            },
        )
}

fn is_lid(v: u32) -> bool {
    (1..=0xBFFF).contains(&v)
}

fn is_port(v: u32) -> bool {
    (1..=254).contains(&v)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn arbitrary_tables_convert_in_range_or_name_the_field(w in wire_table()) {
        match convert::table_from_wire(&w) {
            Ok(t) => {
                for (c, wc) in t.contexts.iter().zip(&w.contexts) {
                    prop_assert!(wc.ingress_ports.iter().all(|&p| is_port(p)));
                    prop_assert_eq!(c.rules.len(), wc.rules.len());
                    for r in &c.rules {
                        prop_assert!(!r.ports.is_empty());
                        prop_assert!(r.ports.iter().all(|&p| (1..=254).contains(&p)));
                        prop_assert!(is_lid(r.next_lid.into()));
                    }
                }
                // Everything accepted goes back to the very same message.
                prop_assert_eq!(convert::table_to_wire(&t, w.version, &w.algorithm), w);
            }
            Err(e) => {
                prop_assert!(e.0.starts_with("context "), "{}", e);
                let bad = w.contexts.iter().any(|c| {
                    c.ingress_ports.iter().any(|&p| !is_port(p))
                        || c.rules.iter().any(|r| {
                            r.r#match.is_none()
                                || r.ports.is_empty()
                                || r.ports.iter().any(|&p| !is_port(p))
                                || !is_lid(r.next_lid)
                                || !(0..2).contains(&r.choice)
                        })
                        || {
                            let mut seen = std::collections::HashSet::new();
                            !c.rules.iter().all(|r| seen.insert(format!("{:?}", r.r#match)))
                        }
                });
                prop_assert!(bad, "refused a valid table: {}", e);
            }
        }
    }

    #[test]
    fn arbitrary_mappings_convert_in_range_or_name_the_entry(w in wire_mapping()) {
        match convert::mapping_from_wire(&w) {
            Ok(m) => {
                prop_assert_eq!(m.entries.len(), w.entries.len());
                prop_assert_eq!(convert::mapping_to_wire(&m, w.version, &w.algorithm), w);
            }
            Err(e) => {
                let i = w
                    .entries
                    .iter()
                    .position(|e| e.destination.is_none() || !is_lid(e.router_port_lid));
                prop_assert!(i.is_some(), "refused a valid mapping: {}", e);
                let want = format!("mapping entry {}:", i.unwrap_or_default());
                prop_assert!(e.0.starts_with(&want), "{}", e);
            }
        }
    }

    #[test]
    fn router_ports_convert_in_range_and_drop_bad_primaries(w in wire_router_port()) {
        match convert::router_port_from_wire(&w) {
            Ok(p) => {
                prop_assert!(is_port(w.port) && is_lid(w.lid));
                prop_assert_eq!((u32::from(p.port), u32::from(p.lid)), (w.port, w.lid));
                let kept: Vec<u32> =
                    w.primary_lids.iter().copied().filter(|&l| is_lid(l)).collect();
                let got: Vec<u32> = p.primary_lids.iter().map(|&l| u32::from(l)).collect();
                prop_assert_eq!(got, kept);
            }
            Err(e) => {
                prop_assert!(!is_port(w.port) || !is_lid(w.lid));
                prop_assert!(e.0.starts_with("router port"), "{}", e);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        which in 0..3u8,
        bytes in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        match which {
            0 => {
                if let Ok(r) = v1::SubnetReport::decode(bytes.as_slice()) {
                    for p in &r.router_ports {
                        let _ = convert::router_port_from_wire(p);
                    }
                    if let Some(d) = &r.dependencies {
                        let _ = convert::summary_from_wire(d, &r);
                    }
                }
            }
            1 => {
                if let Ok(m) = v1::MappingUpdate::decode(bytes.as_slice()) {
                    let _ = convert::mapping_from_wire(&m);
                }
            }
            _ => {
                if let Ok(t) = v1::EgressTables::decode(bytes.as_slice()) {
                    let _ = convert::table_from_wire(&t);
                }
            }
        }
    }
}

// ------------------------------------------------------------ dependency summaries

/// A two-subnet fabric joined by one router (a ring of three for transit),
/// routed, with the inter-subnet routes and the wire summaries and reports
/// of its subnets.
struct Summed {
    view: fabric::intersubnet::GlobalView,
    routes: fabric::intersubnet::InterSubnetRoutes,
    wire: Vec<(v1::DependencySummary, v1::SubnetReport)>,
}

fn summed() -> Summed {
    use fabric::multi::{Join, TreeSubnets, Wiring, tree_subnets};
    let m = tree_subnets(&TreeSubnets {
        subnets: 3,
        leaves: 2,
        spines: 2,
        hosts: 2,
        routers: 3,
        router_links: 1,
        wiring: Wiring::All,
        join: Join::Ring,
    })
    .expect("fabric");
    let routed =
        fabric::pipeline::route_subnets(&m, fabric::routing::EngineKind::Lash).expect("routes");
    let routes = fabric::intersubnet::issr_with_transit(
        &routed.view,
        fabric::intersubnet::Transit::Shortest,
    )
    .expect("inter-subnet routes");
    let wire = m
        .subnets
        .iter()
        .zip(&routed.routings)
        .map(|(s, v)| {
            let sv = routed
                .view
                .subnets
                .iter()
                .find(|x| x.prefix == s.prefix)
                .expect("in the view");
            let report = proto::convert::view_to_report(sv);
            let sum = convert::summary_to_wire(v.dependencies().expect("summary"));
            (sum, report)
        })
        .collect();
    Summed {
        view: routed.view.clone(),
        routes,
        wire,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any number written anywhere into a real summary is converted or
    /// refused, never a panic; and whatever is accepted, the whole-fabric
    /// check runs on without a panic either.
    #[test]
    fn corrupted_summaries_are_refused_or_checked_without_panic(
        subnet in 0..3usize,
        edits in prop::collection::vec((0..10u8, any::<prop::sample::Index>(), any::<u32>()), 1..4),
    ) {
        let s = summed();
        let (mut w, report) = s.wire[subnet].clone();
        for (field, at, v) in edits {
            match field {
                0 if !w.host_lids.is_empty() => *at.get_mut(&mut w.host_lids) = v,
                1 if !w.edge_targets.is_empty() => *at.get_mut(&mut w.edge_targets) = v,
                2 if !w.vertices.is_empty() => at.get_mut(&mut w.vertices).index = v,
                3 if !w.vertices.is_empty() => at.get_mut(&mut w.vertices).vl = v,
                4 if !w.chains.is_empty() => {
                    let c = at.get_mut(&mut w.chains);
                    let n = c.vertices.len();
                    if n > 0 {
                        c.vertices[v as usize % n] = v;
                    }
                }
                5 if !w.legs.is_empty() => {
                    let l = at.get_mut(&mut w.legs);
                    let n = l.vertices.len();
                    if n == 0 {
                        l.vertices.push(v);
                    } else {
                        l.vertices[v as usize % n] = v;
                    }
                }
                6 if !w.ports.is_empty() => {
                    let p = at.get_mut(&mut w.ports);
                    if !p.depart.is_empty() {
                        let n = p.depart.len();
                        p.depart[v as usize % n] = v;
                    }
                }
                7 if !w.ports.is_empty() => at.get_mut(&mut w.ports).lid = v,
                8 if !w.edge_counts.is_empty() => *at.get_mut(&mut w.edge_counts) = v % 4,
                _ => w.edge_targets.push(v),
            }
        }
        // Through the bytes, as a report travels.
        let bytes = w.encode_to_vec();
        let w = v1::DependencySummary::decode(bytes.as_slice()).expect("decodes");
        if let Ok(sum) = convert::summary_from_wire(&w, &report) {
            let mut sums: Vec<(u64, fabric::verify::DependencySummary)> = Vec::new();
            for (i, (ws, r)) in s.wire.iter().enumerate() {
                let d = if i == subnet {
                    sum.clone()
                } else {
                    convert::summary_from_wire(ws, r).expect("an untouched summary converts")
                };
                sums.push((r.subnet_prefix, d));
            }
            let refs: Vec<(u64, &fabric::verify::DependencySummary)> =
                sums.iter().map(|(p, d)| (*p, d)).collect();
            let _ = fabric::verify::compose(&s.view, &refs, &s.routes);
        }
    }
}
