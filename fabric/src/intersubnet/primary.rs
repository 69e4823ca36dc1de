//! ISFR's primary destinations: which router ports sit on the top switch a
//! destination's fat-tree routes come down through.

use crate::model::NodeKind;
use std::collections::{BTreeMap, HashMap};

/// ISFR's primary destinations as a subnet routed by `engine` reports
/// them: only engines that define primary paths (fat-tree routing) report
/// any; for the others ISFR falls back to ISSR in that subnet.
pub fn reported_primary_lids(
    engine: &dyn crate::routing::RoutingEngine,
    f: &crate::Fabric,
    lfts: &crate::tables::Lfts,
) -> BTreeMap<u64, Vec<u16>> {
    if engine.reports_primary_paths() {
        primary_lids(f, lfts)
    } else {
        BTreeMap::new()
    }
}

/// ISFR's primary destinations per router port of one subnet: for each CA
/// destination, the top switch its routes from the other leaf switches turn
/// at (the highest switch on the way, by hops from the CA switches; the
/// most common one, ties to the lowest switch index), and every router port
/// linked to that switch lists the destination. On a fat tree routed by
/// `ftree` all leaves turn at the switch of the destination's main path.
/// Keys are router port GUIDs.
pub fn primary_lids(f: &crate::Fabric, lfts: &crate::tables::Lfts) -> BTreeMap<u64, Vec<u16>> {
    use crate::model::NONE;
    let g = crate::graph::SwitchGraph::new(f);
    let n = g.len();
    let mut leaf = vec![false; n];
    for &e in f.endports() {
        if f.kind(f.node_of(e)) == NodeKind::Ca {
            if let Some(si) = f.switch_index(f.node_of(f.remote(e))) {
                leaf[si as usize] = true;
            }
        }
    }
    let leaves: Vec<u32> = (0..n as u32).filter(|&i| leaf[i as usize]).collect();
    // Levels: hops from the nearest leaf.
    let mut level = vec![u32::MAX; n];
    let mut queue: std::collections::VecDeque<u32> = leaves.iter().copied().collect();
    for &l in &leaves {
        level[l as usize] = 0;
    }
    while let Some(a) = queue.pop_front() {
        for &(b, _) in g.neighbours(a) {
            if level[b as usize] == u32::MAX {
                level[b as usize] = level[a as usize] + 1;
                queue.push_back(b);
            }
        }
    }
    // Router ports per switch index.
    let mut on_switch: HashMap<u32, Vec<u64>> = HashMap::new();
    for &e in f.endports() {
        if f.kind(f.node_of(e)) == NodeKind::Router {
            if let Some(si) = f.switch_index(f.node_of(f.remote(e))) {
                on_switch.entry(si).or_default().push(f.port_guid(e));
            }
        }
    }
    let mut out: BTreeMap<u64, Vec<u16>> = BTreeMap::new();
    let mut count = vec![0u32; n];
    for &d in f.endports() {
        if f.kind(f.node_of(d)) != NodeKind::Ca {
            continue;
        }
        let dlid = f.lid_of_slot(d);
        let Some(home) = f.switch_index(f.node_of(f.remote(d))) else {
            continue;
        };
        count.iter_mut().for_each(|c| *c = 0);
        for &l in &leaves {
            if l == home {
                continue;
            }
            let (mut cur, mut top) = (l, l);
            for _ in 0..n {
                let port = lfts.get(cur, dlid);
                let sw = f.switches()[cur as usize];
                if port == 0 || port > f.num_ports(sw) {
                    break;
                }
                let r = f.remote(f.slot(sw, port));
                if r == NONE {
                    break;
                }
                let Some(next) = f.switch_index(f.node_of(r)) else {
                    break;
                };
                cur = next;
                if level[cur as usize] > level[top as usize] {
                    top = cur;
                }
            }
            count[top as usize] += 1;
        }
        let best = (0..n).max_by_key(|&i| (count[i], std::cmp::Reverse(i)));
        if let Some(t) = best.filter(|&t| count[t] > 0) {
            for &pg in on_switch.get(&(t as u32)).into_iter().flatten() {
                out.entry(pg).or_default().push(dlid);
            }
        }
    }
    out
}
