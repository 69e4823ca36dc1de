//! Which accepted subnets take part in the published routes.
//!
//! A report is kept once it is valid in itself; whether it counts is
//! decided over all kept reports at once, so that reports converge in any
//! arrival order (re-cabling moves GUIDs and router ports between subnets
//! and changes router port counts, and the agents report one by one), and
//! so that no single report can stop the routes of the others:
//!
//! - a subnet that cannot vouch for its tables (no dependency summary, or
//!   one that does not decode) is left out: routes through it are
//!   withheld, the others published;
//! - of two reports claiming one GUID or one router port, or giving one
//!   router two port counts, the senior subnet's holds the claim (the
//!   subnet whose first report was accepted first; a change does not
//!   make a subnet junior, so a squatter cannot wait for its victim's
//!   next report) and the junior is left out until the two agree (the
//!   other agent reports its change, or an operator forgets a subnet);
//! - of groups of subnets that no router joins, the largest takes part
//!   (ties: the group holding the earliest report); the others are left
//!   out, since no pair between groups could be delivered.
//!
//! Pure: the reports in, the subnets left out with the reason out.

use super::SubnetEntry;
use proto::v1;
use std::collections::{BTreeMap, HashMap};

fn hex(v: u64) -> String {
    format!("{v:#018x}")
}

/// Why a report cannot vouch for routes through its subnet; None when its
/// dependency summary is there and decodes against the report.
pub fn vouch(r: &v1::SubnetReport) -> Option<String> {
    match &r.dependencies {
        None => Some(
            "it reported no dependency summary (an agent of an older release, or tables \
             that gave none): nothing vouches for routes through it"
                .into(),
        ),
        Some(w) => proto::convert::summary_from_wire(w, r)
            .err()
            .map(|e| format!("its dependency summary is refused: {}", e.0)),
    }
}

/// What the subnets kept so far claim.
#[derive(Default)]
struct Claims {
    guid: HashMap<u64, u64>,
    router_port: HashMap<(u64, u32), u64>,
    /// Router GUID -> (port count, the subnet that gave it first).
    router: HashMap<u64, (u32, u64)>,
}

impl Claims {
    /// The first claim of `r` that an earlier subnet holds, worded for
    /// the status.
    fn conflict(&self, prefix: u64, r: &v1::SubnetReport) -> Option<String> {
        let guids = r
            .end_ports
            .iter()
            .map(|p| p.guid)
            .chain(r.router_ports.iter().map(|p| p.port_guid));
        for g in guids {
            if let Some(&o) = self.guid.get(&g).filter(|&&o| o != prefix) {
                return Some(format!(
                    "GUID {} is claimed by subnet {}, whose first report came first",
                    hex(g),
                    hex(o)
                ));
            }
        }
        for p in &r.router_ports {
            if let Some(&(n, o)) = self.router.get(&p.router_guid) {
                if n != p.router_num_ports && o != prefix {
                    return Some(format!(
                        "router {} has {n} ports in the report of subnet {}, whose first \
                         report came first, and {} in this one (waiting for the two to agree)",
                        hex(p.router_guid),
                        hex(o),
                        p.router_num_ports
                    ));
                }
            }
            if let Some(&o) = self
                .router_port
                .get(&(p.router_guid, p.port))
                .filter(|&&o| o != prefix)
            {
                return Some(format!(
                    "router {} port {} is claimed by subnet {}, whose first report came first",
                    hex(p.router_guid),
                    p.port,
                    hex(o)
                ));
            }
        }
        None
    }

    fn claim(&mut self, prefix: u64, r: &v1::SubnetReport) {
        for p in &r.end_ports {
            self.guid.insert(p.guid, prefix);
        }
        for p in &r.router_ports {
            self.guid.insert(p.port_guid, prefix);
            self.router_port.insert((p.router_guid, p.port), prefix);
            self.router
                .entry(p.router_guid)
                .or_insert((p.router_num_ports, prefix));
        }
    }
}

/// The subnets of `entries` left out of the routes, with the reason.
/// Entries without a report take no part and are not named.
pub fn left_out<'a>(
    entries: impl Iterator<Item = (u64, &'a SubnetEntry)>,
) -> BTreeMap<u64, String> {
    let mut reported: Vec<(u64, &SubnetEntry, &v1::SubnetReport)> = entries
        .filter_map(|(p, e)| Some((p, e, e.report.as_ref()?)))
        .collect();
    reported.sort_by_key(|(p, e, _)| (e.order, *p));
    let mut out = BTreeMap::new();
    let mut claims = Claims::default();
    let mut kept = Vec::with_capacity(reported.len());
    for (prefix, e, r) in reported {
        if let Some(why) = &e.unvouched {
            out.insert(prefix, why.clone());
        } else if let Some(why) = claims.conflict(prefix, r) {
            out.insert(prefix, why);
        } else {
            claims.claim(prefix, r);
            kept.push((prefix, r));
        }
    }
    out.extend(unjoined(&kept));
    out
}

/// The subnets of `kept` (earliest first) outside the largest group that
/// routers join.
fn unjoined(kept: &[(u64, &v1::SubnetReport)]) -> Vec<(u64, String)> {
    if kept.len() < 2 {
        return Vec::new();
    }
    let mut parent: Vec<usize> = (0..kept.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut first_on_router: HashMap<u64, usize> = HashMap::new();
    for (i, (_, r)) in kept.iter().enumerate() {
        for p in &r.router_ports {
            let j = *first_on_router.entry(p.router_guid).or_insert(i);
            let (a, b) = (root(&mut parent, i), root(&mut parent, j));
            // The earlier subnet stays the root, so a group's root is
            // its earliest report.
            parent[a.max(b)] = a.min(b);
        }
    }
    let mut size = vec![0usize; kept.len()];
    for i in 0..kept.len() {
        let r = root(&mut parent, i);
        size[r] += 1;
    }
    // Largest group, then the earliest root.
    let best = (0..kept.len())
        .max_by_key(|&i| (size[i], std::cmp::Reverse(i)))
        .unwrap_or(0);
    let members: Vec<String> = (0..kept.len())
        .filter(|&i| root(&mut parent, i) == best)
        .take(4)
        .map(|i| hex(kept[i].0))
        .collect();
    (0..kept.len())
        .filter(|&i| root(&mut parent, i) != best)
        .map(|i| {
            (
                kept[i].0,
                format!(
                    "no router joins it to the rest of the fabric (subnets {}{})",
                    members.join(", "),
                    if size[best] > members.len() {
                        ", ..."
                    } else {
                        ""
                    }
                ),
            )
        })
        .collect()
}
