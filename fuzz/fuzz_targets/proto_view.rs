//! The controller's path from reports to routes: length-delimited
//! `SubnetReport`s, converted the way the controller builds its global
//! view, then routed by every inter-subnet algorithm. Never a panic.

#![no_main]

use fabric::intersubnet::{registry, EndPortView, GlobalView, SubnetView};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use proto::{convert, v1};
use std::collections::BTreeMap;

fuzz_target!(|data: &[u8]| {
    let mut buf = data;
    // One report per subnet prefix, the latest winning, as the controller
    // keeps them.
    let mut reports: BTreeMap<u64, v1::SubnetReport> = BTreeMap::new();
    while !buf.is_empty() && reports.len() < 8 {
        let Ok(r) = v1::SubnetReport::decode_length_delimited(&mut buf) else {
            break;
        };
        reports.insert(r.subnet_prefix, r);
    }
    let subnets = reports
        .iter()
        .map(|(&prefix, r)| SubnetView {
            name: format!("s{prefix:x}"),
            prefix,
            end_ports: r
                .end_ports
                .iter()
                .filter_map(|p| {
                    Some(EndPortView {
                        guid: p.guid,
                        lid: convert::lid(p.lid, "end port LID").ok()?,
                    })
                })
                .collect(),
            router_ports: r
                .router_ports
                .iter()
                .filter_map(|p| convert::router_port_from_wire(p).ok())
                .collect(),
        })
        .collect();
    let view = GlobalView { subnets }.normalized();
    for algo in registry() {
        if let Ok(routes) = algo.route(&view) {
            for m in &routes.mappings {
                let w = convert::mapping_to_wire(m, 1, algo.name());
                assert_eq!(convert::mapping_from_wire(&w).as_ref(), Ok(m));
            }
            for t in &routes.routers {
                let w = convert::table_to_wire(t, 1, algo.name());
                assert_eq!(convert::table_from_wire(&w).as_ref(), Ok(t));
            }
        }
    }
});
