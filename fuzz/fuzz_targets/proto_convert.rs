//! Wire messages the services receive, decoded from arbitrary bytes and
//! run through the checked conversions: never a panic; what converts
//! converts back to the same message. The first byte picks the message.

#![no_main]

use fabric::intersubnet::Gid;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use proto::convert;
use proto::v1;

fn mapping(w: &v1::MappingUpdate) {
    if let Ok(m) = convert::mapping_from_wire(w) {
        let back = convert::mapping_to_wire(&m, w.version, &w.algorithm);
        assert_eq!(&back, w);
        assert_eq!(convert::mapping_from_wire(&back), Ok(m));
    }
}

fn table(w: &v1::EgressTables) {
    if let Ok(t) = convert::table_from_wire(w) {
        let back = convert::table_to_wire(&t, w.version, &w.algorithm);
        assert_eq!(&back, w);
        assert_eq!(convert::table_from_wire(&back).as_ref(), Ok(&t));
        // What a router does with a table it accepted.
        for c in &w.contexts {
            for r in &c.rules {
                let dest = match &r.r#match {
                    Some(v1::egress_rule::Match::Gid(g)) => convert::gid_from_wire(g),
                    Some(v1::egress_rule::Match::Prefix(p)) => Gid {
                        prefix: *p,
                        guid: 0,
                    },
                    None => continue,
                };
                for &ingress in c.ingress_ports.iter().take(4) {
                    if let Some(rule) = t.lookup(ingress as u8, dest) {
                        let port = rule.egress_port(r.next_lid as u16);
                        assert!(port.is_some_and(|p| rule.ports.contains(&p)));
                    }
                }
            }
        }
    }
}

fn report(r: &v1::SubnetReport) {
    for p in &r.router_ports {
        if let Ok(v) = convert::router_port_from_wire(p) {
            assert_eq!(u32::from(v.port), p.port);
            assert_eq!(u32::from(v.lid), p.lid);
            assert!(v.primary_lids.len() <= p.primary_lids.len());
        }
    }
    for e in &r.end_ports {
        if let Ok(l) = convert::lid(e.lid, "end port LID") {
            assert_eq!(u32::from(l), e.lid);
        }
    }
}

/// Decodes `T`; a message that decodes encodes to bytes that decode to it.
/// Compared as bytes: a NaN in a double field is never equal to itself.
fn decode<T: Message + Default>(bytes: &[u8]) -> Option<T> {
    let m = T::decode(bytes).ok()?;
    let encoded = m.encode_to_vec();
    let again = T::decode(encoded.as_slice()).expect("re-encoded message decodes");
    assert_eq!(
        again.encode_to_vec(),
        encoded,
        "re-encoding changed the message"
    );
    Some(m)
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    match which % 7 {
        0 => {
            if let Some(r) = decode::<v1::SubnetReport>(bytes) {
                report(&r);
            }
        }
        1 => {
            if let Some(m) = decode::<v1::MappingUpdate>(bytes) {
                mapping(&m);
            }
        }
        2 => {
            if let Some(t) = decode::<v1::EgressTables>(bytes) {
                table(&t);
            }
        }
        3 => {
            // A follower taking over reads what the leader stored: value
            // heads (inline or in parts) and the published routes' heads.
            let _ = decode::<v1::StoredValue>(bytes);
            let _ = decode::<v1::StoredRoute>(bytes);
        }
        4 => {
            if let Some(s) = decode::<v1::StoredSubnet>(bytes) {
                if let Some(r) = &s.report {
                    report(r);
                }
            }
        }
        5 => {
            if let Some(q) = decode::<v1::ForwardQuery>(bytes) {
                let _ = convert::port(q.ingress_port, "ingress_port");
                let _ = convert::lid(q.slid, "slid");
                if let Some(g) = &q.destination {
                    let gid = convert::gid_from_wire(g);
                    assert_eq!(&convert::gid_to_wire(gid), g);
                }
            }
        }
        _ => {
            // Readiness checks over a controller's and a router's state.
            let (a, b) = bytes.split_at(bytes.len() / 2);
            if let (Some(st), Some(rs)) = (
                decode::<v1::ControllerState>(a),
                decode::<v1::RouterState>(b),
            ) {
                let _ = convert::subnets_mapped(&st, st.subnets.len());
                let _ = convert::router_current(&st, &rs);
            }
        }
    }
});
