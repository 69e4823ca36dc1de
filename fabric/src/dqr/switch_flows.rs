//! Switch-to-switch flows as data traffic, for the DQR paper's fat-tree
//! experiment: "we have first treated the switch to switch paths as
//! disconnected and used DQR to reconnect them", which needs U-turns at
//! leaf switches that the fat-tree routing never makes.
//!
//! The verifier, the channel list and the reroute take end ports as the
//! sources and destinations of flows, and a switch's own LID as management
//! traffic outside the dependency graph (VL 15). Here each switch gets a
//! management endpoint instead: an end port on a port of its own added to
//! the switch, with a LID of its own. The channel dependency graph is the
//! one switch-sourced flows would give: the link between a switch and its
//! endpoint is an end link, which no cycle can use (an end port never
//! forwards), so a flow from the endpoint depends on exactly the switch
//! channels a flow leaving the switch itself does, and a flow toward it on
//! the channels that reach the switch. Traffic from the endpoint takes the
//! VLs and SLs of a host on the same switch (the switch's port 0 rows where
//! it has none), so it adds no dependency the routing did not have.

use crate::error::ModelError;
use crate::model::{Fabric, FabricBuilder, MAX_UNICAST_LID, NONE, NodeKind, Slot};
use crate::tables::{Lfts, NUM_SLS, PathSl, Routing, SL_NONE, Sl2Vl};
use std::collections::HashSet;

/// A fabric with a management endpoint per switch, and a routing of it.
#[derive(Debug, Clone)]
pub struct SwitchFlows {
    pub fabric: Fabric,
    /// The routing given: every entry as it was, and toward each endpoint
    /// only its own switch's (the flows toward switches disconnected).
    pub routing: Routing,
    /// Per switch index, its endpoint's (end) port.
    pub endpoints: Vec<Slot>,
}

/// Why the endpoints could not be added.
#[derive(Debug, thiserror::Error)]
pub enum SwitchFlowsError {
    #[error("switch {0} has 255 ports: none is left for its management endpoint")]
    NoPort(String),
    #[error(
        "{needed} LIDs are needed for the switches' management endpoints above LID {max}, \
         past the last unicast LID {MAX_UNICAST_LID:#x}"
    )]
    NoLids { needed: usize, max: u16 },
    #[error("the routing is for another fabric ({0})")]
    OtherRouting(String),
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// The fabric `f` with a management endpoint per switch, and `r` (a
/// routing of `f`) with the flows toward the endpoints disconnected.
pub fn disconnected(f: &Fabric, r: &Routing) -> Result<SwitchFlows, SwitchFlowsError> {
    if r.lfts.num_switches() != f.switches().len() || r.lfts.width() != f.max_lid() as usize + 1 {
        return Err(SwitchFlowsError::OtherRouting(format!(
            "{} switches and LIDs up to {} in the tables, {} and {} in the fabric",
            r.lfts.num_switches(),
            r.lfts.width().saturating_sub(1),
            f.switches().len(),
            f.max_lid()
        )));
    }
    let g = with_endpoints(f)?;
    let endpoints: Vec<Slot> = f
        .switches()
        .iter()
        .map(|&sw| g.remote(g.slot(sw, f.num_ports(sw) + 1)))
        .collect();
    let routing = Routing {
        lfts: lfts(f, &g, r, &endpoints),
        sl2vl: r.sl2vl.as_ref().map(|t| sl2vl(f, &g, t, &endpoints)),
        path_sl: r.path_sl.as_ref().map(|t| path_sl(f, &g, t, &endpoints)),
        vls_needed: r.vls_needed,
    };
    Ok(SwitchFlows {
        fabric: g,
        routing,
        endpoints,
    })
}

/// `f`, node for node (same ids, ports, GUIDs and LIDs), each switch with
/// one port more, linked to a new one-port CA: its endpoint.
fn with_endpoints(f: &Fabric) -> Result<Fabric, SwitchFlowsError> {
    let nsw = f.switches().len();
    if f.max_lid() as usize + nsw > MAX_UNICAST_LID as usize {
        return Err(SwitchFlowsError::NoLids {
            needed: nsw,
            max: f.max_lid(),
        });
    }
    let mut b = FabricBuilder::new();
    b.subnet_prefix(f.subnet_prefix);
    for n in 0..f.num_nodes() as u32 {
        let kind = f.kind(n);
        let extra = u8::from(kind == NodeKind::Switch);
        let ports = f
            .num_ports(n)
            .checked_add(extra)
            .ok_or_else(|| SwitchFlowsError::NoPort(f.desc(n).to_string()))?;
        b.add_node(kind, f.guid(n), f.desc(n), ports);
        if kind == NodeKind::Switch {
            if f.switch_lid(n) != 0 {
                b.set_lid(n, 0, f.switch_lid(n))?;
            }
            continue;
        }
        for p in 1..=f.num_ports(n) {
            let s = f.slot(n, p);
            b.set_port_guid(n, p, f.port_guid(s))?;
            if f.lid_of_slot(s) != 0 {
                b.set_lid(n, p, f.lid_of_slot(s))?;
                // With LMC the port keeps its LID range; the endpoints
                // take LIDs past the last one.
                b.set_lmc(n, p, f.lmc(s))?;
            }
        }
    }
    for s in 0..f.num_slots() as Slot {
        let t = f.remote(s);
        if t != NONE && s < t {
            b.connect(f.node_of(s), f.port_of(s), f.node_of(t), f.port_of(t))?;
        }
    }
    let mut taken: HashSet<u64> = (0..f.num_slots() as Slot).map(|s| f.port_guid(s)).collect();
    taken.extend((0..f.num_nodes() as u32).map(|n| f.guid(n)));
    for (i, &sw) in f.switches().iter().enumerate() {
        // A GUID near the switch's, with its own port GUID (node + 1) free.
        let mut guid = f.guid(sw) ^ (1 << 57);
        while taken.contains(&guid) || taken.contains(&guid.wrapping_add(1)) {
            guid = guid.wrapping_add(2);
        }
        taken.extend([guid, guid.wrapping_add(1)]);
        let ep = b.add_node(NodeKind::Ca, guid, format!("{} management", f.desc(sw)), 1);
        b.connect(sw, f.num_ports(sw) + 1, ep, 1)?;
        b.set_lid(ep, 1, f.max_lid() + 1 + i as u16)?;
    }
    Ok(b.build()?)
}

fn lfts(f: &Fabric, g: &Fabric, r: &Routing, endpoints: &[Slot]) -> Lfts {
    let mut l = Lfts::for_fabric(g);
    let old = r.lfts.width();
    for (si, &sw) in f.switches().iter().enumerate() {
        let si = si as u32;
        l.row_mut(si)[..old].copy_from_slice(r.lfts.row(si));
        l.set(
            si,
            g.lid_of_slot(endpoints[si as usize]),
            f.num_ports(sw) + 1,
        );
    }
    l
}

/// A host port on switch `sw` of `f`, if it has one: its endpoint's
/// traffic takes that host's VLs and SLs.
fn host_of(f: &Fabric, sw: u32) -> Option<Slot> {
    (1..=f.num_ports(sw)).find_map(|p| {
        let t = f.remote(f.slot(sw, p));
        (t != NONE && f.kind(f.node_of(t)) != NodeKind::Switch).then_some(t)
    })
}

fn sl2vl(f: &Fabric, g: &Fabric, t: &Sl2Vl, endpoints: &[Slot]) -> Sl2Vl {
    let mut u = Sl2Vl::new(g);
    for (si, &sw) in f.switches().iter().enumerate() {
        let si32 = si as u32;
        let np = f.num_ports(sw);
        let q = np + 1;
        let host = host_of(f, sw);
        let from = host.map_or(0, |h| f.port_of(f.remote(h)));
        for out in 0..=np {
            for inp in 0..=np {
                u.set_switch_row(si32, inp, out, t.switch_row(si32, inp, out));
            }
            u.set_switch_row(si32, q, out, t.switch_row(si32, from, out));
        }
        for inp in 0..=q {
            let like = if inp == q { from } else { inp };
            u.set_switch_row(si32, inp, q, t.switch_row(si32, like, 0));
        }
        let inject = host.map_or([0; NUM_SLS], |h| t.port_row(h));
        u.set_port_row(endpoints[si], inject);
    }
    for &s in f.endports() {
        u.set_port_row(g.slot(f.node_of(s), f.port_of(s)), t.port_row(s));
    }
    u
}

fn path_sl(f: &Fabric, g: &Fabric, t: &PathSl, endpoints: &[Slot]) -> PathSl {
    let mut u = PathSl::new(g.max_lid());
    let old = t.width();
    // Toward an endpoint, the SL its switch's LID had in the row.
    let ep_sl = |row: &[u8], sw: u32| match row.get(f.switch_lid(sw) as usize) {
        Some(&sl) if sl != SL_NONE => sl,
        _ => 0,
    };
    // Rows stay shared as they were: old row index to new.
    let mut moved = vec![u32::MAX; t.num_rows()];
    for lid in 0..old as u16 {
        let (Some(i), Some(row)) = (t.row_index(lid), t.row_of(lid)) else {
            continue;
        };
        if moved[i as usize] == u32::MAX {
            let mut new_row = vec![0u8; u.width()];
            new_row[..old].copy_from_slice(row);
            for (si, &sw) in f.switches().iter().enumerate() {
                new_row[g.lid_of_slot(endpoints[si]) as usize] = ep_sl(row, sw);
            }
            moved[i as usize] = u.push_row(&new_row);
        }
        u.assign(lid, moved[i as usize]);
    }
    for (si, &sw) in f.switches().iter().enumerate() {
        let lid = g.lid_of_slot(endpoints[si]);
        match host_of(f, sw).and_then(|h| t.row_index(f.lid_of_slot(h))) {
            Some(i) => u.assign(lid, moved[i as usize]),
            None => {
                let i = u.push_row(&vec![0u8; u.width()]);
                u.assign(lid, i);
            }
        }
    }
    u
}
