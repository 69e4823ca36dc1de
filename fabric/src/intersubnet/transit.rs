//! Transit over the subnet graph: which subnet a packet moves to next on
//! its way to a subnet no local router joins, and the router rules that
//! carry it there.

use super::{
    Choice, Context, EndPortView, Gid, GlobalView, Match, RouterPortView, RouterTable, Rule,
};
use std::collections::BTreeMap;

/// How traffic crosses subnets that share no router with its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transit {
    /// Up*/Down* over the subnet graph: subnets ranked by hops from the
    /// lowest prefix, and no route moves to a higher-ranked subnet and then
    /// back to a lower one. Router hops then cannot close a channel
    /// dependency cycle across subnets.
    UpDown,
    /// Plain shortest subnet paths (ties to the lowest subnet index). On a
    /// ring of subnets this closes a dependency cycle through the routers;
    /// kept to show that cycle, not for use.
    Shortest,
}

/// Subnet adjacency through routers, by subnet index.
fn subnet_graph(view: &GlobalView) -> Vec<Vec<usize>> {
    let n = view.subnets.len();
    let mut adj = vec![Vec::new(); n];
    for ports in view.routers().values() {
        let mut sn: Vec<usize> = ports.iter().map(|(s, _)| *s).collect();
        sn.sort_unstable();
        sn.dedup();
        for &a in &sn {
            for &b in &sn {
                if a != b && !adj[a].contains(&b) {
                    adj[a].push(b);
                }
            }
        }
    }
    for v in &mut adj {
        v.sort_unstable();
    }
    adj
}

/// `next[x][d]`: the subnet a packet in subnet `x` moves to next on its way
/// to subnet `d` (`None` when `x == d` or `d` is unreachable). Destination
/// based, as the router tables are: a packet's next move depends only on
/// where it is and where it goes.
pub fn subnet_next_hops(view: &GlobalView, policy: Transit) -> Vec<Vec<Option<usize>>> {
    let adj = subnet_graph(view);
    let n = adj.len();
    let level = levels(&adj);
    let down = |a: usize, b: usize| (level[b], b) > (level[a], a);
    let mut next = vec![vec![None; n]; n];
    for d in 0..n {
        let route = match policy {
            Transit::Shortest => shortest_routes(&adj, d),
            Transit::UpDown => updown_routes(&adj, d, &down),
        };
        for (x, (row, r)) in next.iter_mut().zip(&route).enumerate() {
            if x != d {
                row[d] = r.map(|r| r.0);
            }
        }
    }
    next
}

/// Rank of each subnet: hops from the first subnet of its component.
fn levels(adj: &[Vec<usize>]) -> Vec<usize> {
    let n = adj.len();
    let mut level = vec![usize::MAX; n];
    for root in 0..n {
        if level[root] != usize::MAX {
            continue;
        }
        level[root] = 0;
        let mut q = std::collections::VecDeque::from([root]);
        while let Some(a) = q.pop_front() {
            for &b in &adj[a] {
                if level[b] == usize::MAX {
                    level[b] = level[a] + 1;
                    q.push_back(b);
                }
            }
        }
    }
    level
}

/// Per subnet toward `d`: (next subnet, distance, whole route moves down
/// only), None where `d` is unreachable.
type SubnetRoutes = Vec<Option<(usize, usize, bool)>>;

/// Shortest subnet paths to `d`, breadth first.
fn shortest_routes(adj: &[Vec<usize>], d: usize) -> SubnetRoutes {
    let mut route: SubnetRoutes = vec![None; adj.len()];
    route[d] = Some((d, 0, true));
    let mut q = std::collections::VecDeque::from([d]);
    while let Some(y) = q.pop_front() {
        let dist = route[y].map_or(0, |r| r.1);
        for &x in &adj[y] {
            if route[x].is_none() {
                route[x] = Some((y, dist + 1, false));
                q.push_back(x);
            }
        }
    }
    route
}

/// Up*/down* subnet routes to `d`: down-only where one exists, else up
/// first to the nearest routed subnet.
fn updown_routes(
    adj: &[Vec<usize>],
    d: usize,
    down: &dyn Fn(usize, usize) -> bool,
) -> SubnetRoutes {
    let n = adj.len();
    let mut route: SubnetRoutes = vec![None; n];
    route[d] = Some((d, 0, true));
    // Neighbours of d go straight there, whatever the direction.
    for &x in &adj[d] {
        route[x] = Some((d, 1, down(x, d)));
    }
    // Down-only routes, grown backwards from d through subnets whose own
    // route is down-only.
    let mut q: std::collections::VecDeque<usize> = std::iter::once(d)
        .chain(adj[d].iter().copied().filter(|&x| down(x, d)))
        .collect();
    while let Some(y) = q.pop_front() {
        let (_, dist, _) = route[y].unwrap_or((y, 0, true));
        for &x in &adj[y] {
            if route[x].is_none() && down(x, y) {
                route[x] = Some((y, dist + 1, true));
                q.push_back(x);
            }
        }
    }
    // The rest first move up to a routed subnet: nearest first.
    loop {
        let best = (0..n)
            .filter(|&x| route[x].is_none())
            .flat_map(|x| {
                let route = &route;
                adj[x]
                    .iter()
                    .filter(move |&&y| !down(x, y))
                    .filter_map(move |&y| route[y].map(|r| (r.1 + 1, x, y)))
            })
            .min();
        let Some((dist, x, y)) = best else { break };
        route[x] = Some((y, dist, false));
    }
    route
}

/// Router ports in subnet `si` of routers that also join subnet `y`, in
/// ISSR's dealing order: rank within the router first, so that
/// consecutive destinations alternate routers.
pub(super) fn ports_toward<'v>(
    routers: &BTreeMap<u64, Vec<(usize, &'v RouterPortView)>>,
    si: usize,
    y: usize,
) -> Vec<&'v RouterPortView> {
    let mut cand: Vec<(usize, u64, &RouterPortView)> = Vec::new();
    for (&g, ports) in routers {
        if !ports.iter().any(|(sn, _)| *sn == y) {
            continue;
        }
        for (rank, (_, p)) in ports.iter().filter(|(sn, _)| *sn == si).enumerate() {
            cand.push((rank, g, p));
        }
    }
    cand.sort_by_key(|&(rank, g, p)| (rank, g, p.port));
    cand.into_iter().map(|c| c.2).collect()
}

/// Router tables: `deliver` gives the rules for the destinations of a
/// subnet the router joins; transit rules send the rest toward the next
/// router on the subnet route ([`subnet_next_hops`]), in contexts per
/// ingress subnet since the next move depends on where a packet came from.
pub(super) fn router_tables(
    view: &GlobalView,
    routers: &BTreeMap<u64, Vec<(usize, &RouterPortView)>>,
    next: &[Vec<Option<usize>>],
    mut deliver: impl FnMut(u64, usize, &[u8]) -> Vec<Rule>,
) -> Vec<RouterTable> {
    routers
        .iter()
        .map(|(&guid, ports)| {
            let mut joined: Vec<usize> = ports.iter().map(|(sn, _)| *sn).collect();
            joined.sort_unstable();
            joined.dedup();
            let ports_in = |sn: usize| -> Vec<u8> {
                ports
                    .iter()
                    .filter(|(s, _)| *s == sn)
                    .map(|(_, p)| p.port)
                    .collect()
            };
            let mut delivery = Vec::new();
            for &ti in &joined {
                delivery.extend(deliver(guid, ti, &ports_in(ti)));
            }
            let mut contexts = Vec::new();
            for &x in &joined {
                let mut transit = Vec::new();
                for (ti, t) in view.subnets.iter().enumerate() {
                    if joined.contains(&ti) {
                        continue;
                    }
                    let Some(y) = next[x][ti].filter(|y| *y != x && joined.contains(y)) else {
                        continue;
                    };
                    let Some(z) = next[y][ti] else { continue };
                    transit.extend(transit_rules(routers, guid, ports, t, y, z));
                }
                if !transit.is_empty() {
                    let mut rules = delivery.clone();
                    rules.extend(transit);
                    contexts.push(Context {
                        ingress_ports: ports_in(x),
                        rules,
                    });
                }
            }
            contexts.push(Context {
                ingress_ports: Vec::new(),
                rules: delivery,
            });
            RouterTable {
                router_guid: guid,
                contexts,
            }
        })
        .collect()
}

/// The transit rules of router `guid` for the end ports of subnet `t`,
/// whose packets cross subnet `y` toward subnet `z` next.
fn transit_rules(
    routers: &BTreeMap<u64, Vec<(usize, &RouterPortView)>>,
    guid: u64,
    ports: &[(usize, &RouterPortView)],
    t: &super::SubnetView,
    y: usize,
    z: usize,
) -> Vec<Rule> {
    let cand = ports_toward(routers, y, z);
    if cand.is_empty() {
        return Vec::new();
    }
    let gid = |e: &EndPortView| {
        Match::Gid(Gid {
            prefix: t.prefix,
            guid: e.guid,
        })
    };
    // Hand the packet to a next router's port on the switch it enters
    // through, so it crosses `y` without a turn there: between two top
    // switches an up*/down* engine has no route, and a down-up turn inside
    // `y` chains local traffic into the transit path, which can close a
    // cycle across subnets. Destinations are dealt over the egress ports
    // that have such a partner.
    let out: Vec<&RouterPortView> = ports
        .iter()
        .filter(|(s, _)| *s == y)
        .map(|(_, p)| *p)
        .collect();
    let partners: Vec<(u8, Vec<u16>)> = out
        .iter()
        .filter(|o| o.switch_guid != 0)
        .map(|o| {
            let lids = cand
                .iter()
                .filter(|c| c.router_guid != guid && c.switch_guid == o.switch_guid)
                .map(|c| c.lid)
                .collect::<Vec<u16>>();
            (o.port, lids)
        })
        .filter(|(_, lids)| !lids.is_empty())
        .collect();
    if partners.is_empty() {
        let out: Vec<u8> = out.iter().map(|p| p.port).collect();
        // Another router's port where there is one: handing the packet to
        // this router's own port only brings it back here.
        let others: Vec<&RouterPortView> = cand
            .iter()
            .copied()
            .filter(|c| c.router_guid != guid)
            .collect();
        let cand = if others.is_empty() { &cand } else { &others };
        return t
            .end_ports
            .iter()
            .enumerate()
            .map(|(k, e)| Rule {
                matches: gid(e),
                next_lid: cand[k % cand.len()].lid,
                ports: out.clone(),
                choice: Choice::Hash,
            })
            .collect();
    }
    t.end_ports
        .iter()
        .enumerate()
        .map(|(k, e)| {
            let (port, lids) = &partners[k % partners.len()];
            Rule {
                matches: gid(e),
                next_lid: lids[(k / partners.len()) % lids.len()],
                ports: vec![*port],
                choice: Choice::First,
            }
        })
        .collect()
}
