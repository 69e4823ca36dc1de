//! OpenSM's `prefix-routes.conf` (`prefix_routes_file` in opensm.conf): the
//! local router port that takes each remote subnet prefix, so a stock
//! OpenSM answers off-subnet PathRecords with that port's LID.
//!
//! ```text
//! 0xfec0000000000002 0x0004000000000001
//! * 0x0004000000000001
//! ```
//! OpenSM takes the first line whose prefix matches and fails the query
//! when that line's router is absent (it does not try later lines), so one
//! line per prefix is written: a mapping's backup lines cannot be said here.
//! A mapping that sends two destinations of one prefix to different router
//! ports (ISSR, ISFR) cannot be said either; OpenSM's SA matches the prefix
//! only.
//!
//! OpenSM keeps a router in its table under the one port it discovered the
//! router through first (`ni_rcv_process_new`); a router's other ports in
//! the subnet are known as ports but not as routers. A line naming such a
//! port fails the query ("router not found"), and which port was first is
//! a race of the sweep. [`ambiguous_ports`] names the lines at risk.

use crate::intersubnet::Mapping;
use crate::model::{Fabric, NodeKind};
use std::collections::BTreeMap;

pub const PREFIX_ROUTES_FILE: &str = "prefix-routes.conf";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "prefix {prefix:#018x} goes to router port {first:#018x} for some destinations and \
     {second:#018x} for others: OpenSM's prefix routes choose per prefix, not per GID"
)]
pub struct PerGid {
    pub prefix: u64,
    pub first: u64,
    pub second: u64,
}

/// The file for `m`, or why a prefix-per-line file cannot express it.
pub fn from_mapping(m: &Mapping) -> Result<String, PerGid> {
    let mut primary: BTreeMap<u64, u64> = BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    for e in &m.entries {
        // A destination's first line is its route; later ones back it up.
        if !seen.insert(e.dest) {
            continue;
        }
        match primary.get(&e.dest.prefix) {
            Some(&g) if g != e.router_port_guid => {
                return Err(PerGid {
                    prefix: e.dest.prefix,
                    first: g,
                    second: e.router_port_guid,
                });
            }
            _ => {
                primary.insert(e.dest.prefix, e.router_port_guid);
            }
        }
    }
    let mut s = format!(
        "# OpenSM prefix routes of subnet {:#018x}, from ibfabric's mapping:\n\
         # <remote subnet prefix> <local router port GUID>; first match wins\n",
        m.prefix
    );
    for (p, g) in &primary {
        s.push_str(&format!("{p:#018x} {g:#018x}\n"));
    }
    if let Some(g) = m.defaults.first() {
        s.push_str(&format!("* {g:#018x}\n"));
    }
    Ok(s)
}

/// The router ports `m` names (as routes or defaults) whose router has more
/// than one port in `f`: OpenSM may know that router by another of them.
pub fn ambiguous_ports(f: &Fabric, m: &Mapping) -> Vec<u64> {
    let index = f.port_guid_index();
    let named: std::collections::BTreeSet<u64> = m
        .entries
        .iter()
        .map(|e| e.router_port_guid)
        .chain(m.defaults.iter().copied())
        .collect();
    named
        .into_iter()
        .filter(|g| {
            let Some(&slot) = index.get(g) else {
                return false;
            };
            let node = f.node_of(slot);
            f.kind(node) == NodeKind::Router
                && f.endports()
                    .iter()
                    .filter(|&&s| f.node_of(s) == node)
                    .count()
                    > 1
        })
        .collect()
}

/// A warning naming [`ambiguous_ports`], or `None` when every line is safe.
pub fn ambiguity_warning(f: &Fabric, m: &Mapping) -> Option<String> {
    let ports = ambiguous_ports(f, m);
    if ports.is_empty() {
        return None;
    }
    let list: Vec<String> = ports.iter().map(|g| format!("{g:#018x}")).collect();
    Some(format!(
        "{PREFIX_ROUTES_FILE} names {} of routers with several ports in this subnet: \
         stock OpenSM knows each router by the first port it discovers and answers \
         \"router not found\" for the others (the ibfabric plugin answers from the mapping)",
        list.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intersubnet::{Gid, MapEntry};

    fn entry(prefix: u64, guid: u64, port: u64) -> MapEntry {
        MapEntry {
            dest: Gid { prefix, guid },
            router_port_guid: port,
            router_port_lid: 1,
        }
    }

    #[test]
    fn one_line_per_prefix_backups_dropped_per_gid_refused() {
        let m = Mapping {
            prefix: 1,
            entries: vec![
                entry(2, 10, 0xa),
                entry(2, 11, 0xa),
                entry(2, 10, 0xb), // backup of the first destination
                entry(3, 20, 0xb),
            ],
            defaults: vec![0xa, 0xb],
        };
        let text = from_mapping(&m).expect("per prefix");
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines,
            [
                "0x0000000000000002 0x000000000000000a",
                "0x0000000000000003 0x000000000000000b",
                "* 0x000000000000000a"
            ]
        );
        let mut issr = m.clone();
        issr.entries[1].router_port_guid = 0xb;
        assert_eq!(
            from_mapping(&issr),
            Err(PerGid {
                prefix: 2,
                first: 0xa,
                second: 0xb
            })
        );
    }

    /// Routers on every spine have two ports in each subnet: every port
    /// named is at risk. Striped routers have one each: none is.
    #[test]
    fn ports_of_routers_with_siblings_in_the_subnet_are_named() {
        use crate::multi::{Join, TreeSubnets, Wiring, tree_subnets};
        let shape = |wiring| TreeSubnets {
            subnets: 2,
            leaves: 2,
            spines: 2,
            hosts: 2,
            routers: 2,
            router_links: 1,
            wiring,
            join: Join::All,
        };
        for (wiring, at_risk) in [(Wiring::All, true), (Wiring::Stripe, false)] {
            let mf = tree_subnets(&shape(wiring)).expect("generated");
            let sub = &mf.subnets[0];
            let ports: Vec<u64> = mf
                .routers
                .iter()
                .flat_map(|r| r.ports.iter().filter(|p| p.subnet == 0))
                .map(|p| p.port_guid)
                .collect();
            assert!(!ports.is_empty());
            let m = Mapping {
                prefix: sub.prefix,
                entries: vec![entry(mf.subnets[1].prefix, 10, ports[0])],
                defaults: vec![ports[ports.len() - 1]],
            };
            let got = ambiguous_ports(&sub.fabric, &m);
            let want: Vec<u64> = if at_risk {
                let mut w = vec![ports[0], ports[ports.len() - 1]];
                w.sort();
                w.dedup();
                w
            } else {
                Vec::new()
            };
            assert_eq!(got, want, "{wiring:?}");
        }
    }
}
