//! Inter-subnet routing: which local router port a host uses for a remote
//! destination (the mapping file of the ISSR paper), and how each router
//! relays (egress tables). Pure: it works on what the controller learns
//! from the agents' reports ([`GlobalView`]), not on live fabrics.
//!
//! Algorithms sit behind [`InterSubnetRouting`]; the OpenSM prefix-route
//! baseline is [`PrefixBaseline`].

use crate::error::{Error, Result};
use crate::model::NodeKind;
use crate::multi::MultiFabric;
use std::collections::{BTreeMap, HashMap};

/// A port GID: subnet prefix and port GUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gid {
    pub prefix: u64,
    pub guid: u64,
}

impl std::fmt::Display for Gid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#018x}:{:#018x}", self.prefix, self.guid)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndPortView {
    pub guid: u64,
    pub lid: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterPortView {
    pub router_guid: u64,
    pub port: u8,
    pub port_guid: u64,
    pub lid: u16,
    /// Node GUID of the switch the port links to (0 when not reported).
    pub switch_guid: u64,
    /// Destination LIDs whose primary fat-tree route comes down through
    /// the switch behind this port (ISFR); empty when unknown.
    pub primary_lids: Vec<u16>,
}

/// One subnet as its agent reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetView {
    pub name: String,
    pub prefix: u64,
    /// CA ports (the destinations of inter-subnet traffic).
    pub end_ports: Vec<EndPortView>,
    pub router_ports: Vec<RouterPortView>,
}

/// Everything the controller knows: the subnets, in ascending prefix order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlobalView {
    pub subnets: Vec<SubnetView>,
}

impl GlobalView {
    /// Sorts subnets by prefix and their ports by GUID / (router, port), so
    /// the same reports in any arrival order give the same routes.
    pub fn normalized(mut self) -> Self {
        self.subnets.sort_by_key(|s| s.prefix);
        for s in &mut self.subnets {
            s.end_ports.sort_by_key(|e| e.guid);
            s.router_ports.sort_by_key(|r| (r.router_guid, r.port));
        }
        self
    }

    /// The view of a generated or parsed multi-subnet fabric, as its agents
    /// would report it.
    pub fn from_multi(m: &MultiFabric) -> Self {
        let subnets = m
            .subnets
            .iter()
            .enumerate()
            .map(|(si, s)| {
                let f = &s.fabric;
                let end_ports = f
                    .endports()
                    .iter()
                    .filter(|&&e| f.kind(f.node_of(e)) == NodeKind::Ca)
                    .map(|&e| EndPortView {
                        guid: f.port_guid(e),
                        lid: f.lid_of_slot(e),
                    })
                    .collect();
                let router_ports = m
                    .routers
                    .iter()
                    .flat_map(|r| {
                        r.ports
                            .iter()
                            .filter(move |p| p.subnet == si)
                            .map(move |p| RouterPortView {
                                router_guid: r.guid,
                                port: p.port,
                                port_guid: p.port_guid,
                                lid: p.lid,
                                switch_guid: p.switch_guid,
                                primary_lids: Vec::new(),
                            })
                    })
                    .collect();
                SubnetView {
                    name: s.name.clone(),
                    prefix: s.prefix,
                    end_ports,
                    router_ports,
                }
            })
            .collect();
        GlobalView { subnets }.normalized()
    }

    /// Records ISFR's primary destinations of one subnet's router ports
    /// (as [`primary_lids`] computes them), by router port GUID.
    pub fn set_primary(&mut self, prefix: u64, primary: &BTreeMap<u64, Vec<u16>>) {
        if let Some(s) = self.subnets.iter_mut().find(|s| s.prefix == prefix) {
            for p in &mut s.router_ports {
                p.primary_lids = primary.get(&p.port_guid).cloned().unwrap_or_default();
            }
        }
    }

    /// Routers seen in any subnet, with their ports per subnet index.
    pub fn routers(&self) -> BTreeMap<u64, Vec<(usize, &RouterPortView)>> {
        let mut m: BTreeMap<u64, Vec<(usize, &RouterPortView)>> = BTreeMap::new();
        for (si, s) in self.subnets.iter().enumerate() {
            for p in &s.router_ports {
                m.entry(p.router_guid).or_default().push((si, p));
            }
        }
        for v in m.values_mut() {
            v.sort_by_key(|(_, p)| p.port);
        }
        m
    }
}

/// The router-port choice per remote destination for one subnet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    pub dest: Gid,
    pub router_port_guid: u64,
    pub router_port_lid: u16,
}

/// The mapping file of one subnet (ISSR paper, Code 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub prefix: u64,
    pub entries: Vec<MapEntry>,
    /// Router port GUIDs for destinations without an entry ('*' lines).
    pub defaults: Vec<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Match {
    Gid(Gid),
    Prefix(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// ISSR: a deterministic hash of (source LID, next LID) over the ports.
    Hash,
    /// ISFR and the prefix baseline: the first (only) port.
    First,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub matches: Match,
    pub next_lid: u16,
    pub ports: Vec<u8>,
    pub choice: Choice,
}

impl Rule {
    /// The relay decision for a packet from `slid` (ISSR paper, Algorithm 1,
    /// with a fixed mixing hash in place of `srand`/`rand`: the same pair
    /// always takes the same port, so packets stay in order).
    pub fn egress_port(&self, slid: u16) -> Option<u8> {
        if self.ports.is_empty() {
            return None;
        }
        Some(match self.choice {
            Choice::First => self.ports[0],
            Choice::Hash => {
                let h = mix((slid as u64) << 16 | self.next_lid as u64);
                self.ports[(h % self.ports.len() as u64) as usize]
            }
        })
    }
}

/// SplitMix64 finalizer: cheap, and spreads consecutive LIDs evenly.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Rules for packets entering on `ingress_ports` (empty = any port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub ingress_ports: Vec<u8>,
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterTable {
    pub router_guid: u64,
    pub contexts: Vec<Context>,
}

impl RouterTable {
    /// The rule for a destination: a full-GID rule first, then a prefix
    /// rule, in the first context that accepts the ingress port.
    pub fn lookup(&self, ingress_port: u8, dest: Gid) -> Option<&Rule> {
        let ctx = self
            .contexts
            .iter()
            .find(|c| c.ingress_ports.is_empty() || c.ingress_ports.contains(&ingress_port))?;
        ctx.rules
            .iter()
            .find(|r| r.matches == Match::Gid(dest))
            .or_else(|| {
                ctx.rules
                    .iter()
                    .find(|r| r.matches == Match::Prefix(dest.prefix))
            })
    }
}

/// What an inter-subnet algorithm produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterSubnetRoutes {
    pub algorithm: String,
    /// One per subnet, in the view's order.
    pub mappings: Vec<Mapping>,
    /// One per router, ascending GUID.
    pub routers: Vec<RouterTable>,
}

pub trait InterSubnetRouting: Send + Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    fn route(&self, view: &GlobalView) -> Result<InterSubnetRoutes>;
}

/// The inter-subnet algorithms the product ships: a closed set, so configs
/// and the command line refuse unknown names when they are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum AlgorithmKind {
    Prefix,
    Issr,
    Isfr,
}

impl AlgorithmKind {
    pub const ALL: [AlgorithmKind; 3] = [
        AlgorithmKind::Prefix,
        AlgorithmKind::Issr,
        AlgorithmKind::Isfr,
    ];

    pub fn algorithm(self) -> Box<dyn InterSubnetRouting> {
        match self {
            AlgorithmKind::Prefix => Box::new(PrefixBaseline),
            AlgorithmKind::Issr => Box::new(Issr),
            AlgorithmKind::Isfr => Box::new(Isfr),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AlgorithmKind::Prefix => "prefix",
            AlgorithmKind::Issr => "issr",
            AlgorithmKind::Isfr => "isfr",
        }
    }
}

impl std::fmt::Display for AlgorithmKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for AlgorithmKind {
    type Err = Error;
    fn from_str(name: &str) -> Result<Self> {
        AlgorithmKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = AlgorithmKind::ALL.iter().map(|k| k.name()).collect();
                Error::InterSubnet {
                    algorithm: name.to_string(),
                    reason: format!("unknown algorithm (known: {})", known.join(", ")),
                }
            })
    }
}

/// Every inter-subnet algorithm the product ships.
pub fn registry() -> Vec<Box<dyn InterSubnetRouting>> {
    AlgorithmKind::ALL
        .into_iter()
        .map(AlgorithmKind::algorithm)
        .collect()
}

pub fn by_name(name: &str) -> Result<Box<dyn InterSubnetRouting>> {
    name.parse::<AlgorithmKind>().map(AlgorithmKind::algorithm)
}

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
    // Rank: (hops from the first subnet of each component, index).
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
    let down = |a: usize, b: usize| (level[b], b) > (level[a], a);
    let mut next = vec![vec![None; n]; n];
    for d in 0..n {
        // (next subnet, distance, whole route moves down only)
        let mut route: Vec<Option<(usize, usize, bool)>> = vec![None; n];
        route[d] = Some((d, 0, true));
        match policy {
            Transit::Shortest => {
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
            }
            Transit::UpDown => {
                // Neighbours of d go straight there, whatever the direction.
                for &x in &adj[d] {
                    route[x] = Some((d, 1, down(x, d)));
                }
                // Down-only routes, grown backwards from d through subnets
                // whose own route is down-only.
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
            }
        }
        for x in 0..n {
            if x != d {
                next[x][d] = route[x].map(|r| r.0);
            }
        }
    }
    next
}

/// Router ports in subnet `si` of routers that also join subnet `y`, in
/// ISSR's dealing order: rank within the router first, so that
/// consecutive destinations alternate routers.
fn ports_toward<'v>(
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
fn router_tables(
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
                    let cand = ports_toward(routers, y, z);
                    if cand.is_empty() {
                        continue;
                    }
                    let gid = |e: &EndPortView| {
                        Match::Gid(Gid {
                            prefix: t.prefix,
                            guid: e.guid,
                        })
                    };
                    // Hand the packet to a next router's port on the switch
                    // it enters through, so it crosses `y` without a turn
                    // there: between two top switches an up*/down* engine
                    // has no route, and a down-up turn inside `y` chains
                    // local traffic into the transit path, which can close a
                    // cycle across subnets. Destinations are dealt over the
                    // egress ports that have such a partner.
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
                        let out = ports_in(y);
                        // Another router's port where there is one: handing
                        // the packet to this router's own port only brings
                        // it back here.
                        let others: Vec<&RouterPortView> = cand
                            .iter()
                            .copied()
                            .filter(|c| c.router_guid != guid)
                            .collect();
                        let cand = if others.is_empty() { &cand } else { &others };
                        transit.extend(t.end_ports.iter().enumerate().map(|(k, e)| Rule {
                            matches: gid(e),
                            next_lid: cand[k % cand.len()].lid,
                            ports: out.clone(),
                            choice: Choice::Hash,
                        }));
                    } else {
                        transit.extend(t.end_ports.iter().enumerate().map(|(k, e)| {
                            let (port, lids) = &partners[k % partners.len()];
                            Rule {
                                matches: gid(e),
                                next_lid: lids[(k / partners.len()) % lids.len()],
                                ports: vec![*port],
                                choice: Choice::First,
                            }
                        }));
                    }
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

/// OpenSM's prefix routes: each remote subnet maps to one local router
/// port (the lowest-numbered port of the lowest-GUID router that reaches it
/// directly); destinations of subnets no router reaches directly fall to
/// the default route, the first router port. Routers deliver into the
/// subnets they join through their first port there. No transit.
pub struct PrefixBaseline;

impl InterSubnetRouting for PrefixBaseline {
    fn name(&self) -> &'static str {
        "prefix"
    }
    fn description(&self) -> &'static str {
        "OpenSM baseline: one router port per remote subnet prefix"
    }
    fn route(&self, view: &GlobalView) -> Result<InterSubnetRoutes> {
        let routers = view.routers();
        let mut mappings = Vec::with_capacity(view.subnets.len());
        for (si, s) in view.subnets.iter().enumerate() {
            let mut entries = Vec::new();
            for (ti, t) in view.subnets.iter().enumerate() {
                if ti == si {
                    continue;
                }
                // First router (ascending GUID) with ports in both subnets.
                let via = routers.values().find_map(|ports| {
                    let here = ports.iter().find(|(sn, _)| *sn == si)?;
                    ports.iter().any(|(sn, _)| *sn == ti).then_some(here.1)
                });
                let Some(p) = via else { continue };
                entries.extend(t.end_ports.iter().map(|e| MapEntry {
                    dest: Gid {
                        prefix: t.prefix,
                        guid: e.guid,
                    },
                    router_port_guid: p.port_guid,
                    router_port_lid: p.lid,
                }));
            }
            let defaults = s
                .router_ports
                .first()
                .map(|p| vec![p.port_guid])
                .unwrap_or_default();
            mappings.push(Mapping {
                prefix: s.prefix,
                entries,
                defaults,
            });
        }
        let tables = routers
            .iter()
            .map(|(&guid, ports)| {
                let mut rules = Vec::new();
                let mut seen = Vec::new();
                for &(ti, p) in ports {
                    if seen.contains(&ti) {
                        continue;
                    }
                    seen.push(ti);
                    rules.extend(view.subnets[ti].end_ports.iter().map(|e| Rule {
                        matches: Match::Gid(Gid {
                            prefix: view.subnets[ti].prefix,
                            guid: e.guid,
                        }),
                        next_lid: e.lid,
                        ports: vec![p.port],
                        choice: Choice::First,
                    }));
                }
                RouterTable {
                    router_guid: guid,
                    contexts: vec![Context {
                        ingress_ports: Vec::new(),
                        rules,
                    }],
                }
            })
            .collect();
        Ok(InterSubnetRoutes {
            algorithm: self.name().to_string(),
            mappings,
            routers: tables,
        })
    }
}

/// ISSR (inter-subnet source routing, the paper's section 4.1): the mapping
/// file names a full destination GID, and the destinations of each remote
/// subnet are dealt round robin over every local router port that reaches
/// it directly, alternating routers first (router A port 1, router B port
/// 1, router A port 2, ...). Routers relay by a hash of (source LID, next
/// LID) over all their ports toward the destination's subnet. The default
/// route ('*') lists the first port of every router.
pub struct Issr;

impl InterSubnetRouting for Issr {
    fn name(&self) -> &'static str {
        "issr"
    }
    fn description(&self) -> &'static str {
        "ISSR: per-GID router ports round robin, routers hash (source, destination) over their ports"
    }
    fn route(&self, view: &GlobalView) -> Result<InterSubnetRoutes> {
        issr_with_transit(view, Transit::UpDown)
    }
}

/// ISSR with a chosen transit policy ([`Issr`] uses [`Transit::UpDown`]).
pub fn issr_with_transit(view: &GlobalView, transit: Transit) -> Result<InterSubnetRoutes> {
    let routers = view.routers();
    let next = subnet_next_hops(view, transit);
    let mappings = issr_mappings(view, &routers, &next);
    let tables = router_tables(view, &routers, &next, |_, ti, out| {
        let t = &view.subnets[ti];
        t.end_ports
            .iter()
            .map(|e| Rule {
                matches: Match::Gid(Gid {
                    prefix: t.prefix,
                    guid: e.guid,
                }),
                next_lid: e.lid,
                ports: out.to_vec(),
                choice: Choice::Hash,
            })
            .collect()
    });
    Ok(InterSubnetRoutes {
        algorithm: "issr".to_string(),
        mappings,
        routers: tables,
    })
}

/// ISSR's mapping files: each remote subnet's destinations dealt round
/// robin over the local router ports toward its next subnet; one default
/// port per router.
fn issr_mappings(
    view: &GlobalView,
    routers: &BTreeMap<u64, Vec<(usize, &RouterPortView)>>,
    next: &[Vec<Option<usize>>],
) -> Vec<Mapping> {
    let mut mappings = Vec::with_capacity(view.subnets.len());
    for (si, s) in view.subnets.iter().enumerate() {
        let mut entries = Vec::new();
        for (ti, t) in view.subnets.iter().enumerate() {
            let Some(y) = next[si][ti] else { continue };
            let cand = ports_toward(routers, si, y);
            if cand.is_empty() {
                continue;
            }
            entries.extend(t.end_ports.iter().enumerate().map(|(k, e)| {
                let p = cand[k % cand.len()];
                MapEntry {
                    dest: Gid {
                        prefix: t.prefix,
                        guid: e.guid,
                    },
                    router_port_guid: p.port_guid,
                    router_port_lid: p.lid,
                }
            }));
        }
        let mut defaults = Vec::new();
        let mut seen = Vec::new();
        for p in &s.router_ports {
            if !seen.contains(&p.router_guid) {
                seen.push(p.router_guid);
                defaults.push(p.port_guid);
            }
        }
        mappings.push(Mapping {
            prefix: s.prefix,
            entries,
            defaults,
        });
    }
    mappings
}

/// ISFR (inter-subnet fat-tree routing, the paper's section 4.2): with
/// fat-tree routing in every subnet and routers on top, each destination's
/// primary route comes down through one top switch; the router ports on
/// that switch ([`RouterPortView::primary_lids`], reported by the agents)
/// are the destination's dedicated down ports. Traffic toward it enters the
/// router that owns them (through its ports in the source subnet, spread
/// over the destination's index) and leaves on its down port: the routes
/// are those of one fat tree with routers in place of its top switches.
/// Destinations without primary ports (a subnet not routed as a fat tree)
/// get ISSR's choices.
pub struct Isfr;

impl InterSubnetRouting for Isfr {
    fn name(&self) -> &'static str {
        "isfr"
    }
    fn description(&self) -> &'static str {
        "ISFR: each destination through the router on its fat-tree primary path, dedicated down port; ISSR where a subnet is not a fat tree"
    }
    fn route(&self, view: &GlobalView) -> Result<InterSubnetRoutes> {
        let routers = view.routers();
        let next = subnet_next_hops(view, Transit::UpDown);
        let issr = issr_mappings(view, &routers, &next);
        // (subnet, destination LID) -> its primary ports (router, port),
        // ascending.
        let mut primary: HashMap<(usize, u16), Vec<(u64, u8)>> = HashMap::new();
        for (ti, t) in view.subnets.iter().enumerate() {
            for p in &t.router_ports {
                for &l in &p.primary_lids {
                    primary
                        .entry((ti, l))
                        .or_default()
                        .push((p.router_guid, p.port));
                }
            }
        }
        for v in primary.values_mut() {
            v.sort_unstable();
        }
        let mut mappings = Vec::with_capacity(view.subnets.len());
        for (si, s) in view.subnets.iter().enumerate() {
            let fallback: HashMap<Gid, &MapEntry> =
                issr[si].entries.iter().map(|e| (e.dest, e)).collect();
            // Each router's ports in this subnet, looked up per destination.
            let here_of: HashMap<u64, Vec<&RouterPortView>> = routers
                .iter()
                .map(|(&g, ps)| {
                    let here = ps.iter().filter(|(sn, _)| *sn == si).map(|(_, p)| *p);
                    (g, here.collect())
                })
                .collect();
            let mut entries = Vec::new();
            for (ti, t) in view.subnets.iter().enumerate() {
                if ti == si {
                    continue;
                }
                // Destinations dealt so far to each router: the next one
                // takes the router's next port, so the destinations of one
                // router spread over all its ports here (an index over all
                // destinations would put a whole leaf's worth on one port
                // when the router count divides the hosts per leaf).
                let mut dealt: HashMap<u64, usize> = HashMap::new();
                for d in &t.end_ports {
                    let dest = Gid {
                        prefix: t.prefix,
                        guid: d.guid,
                    };
                    let via = primary.get(&(ti, d.lid)).and_then(|ps| {
                        let here = here_of.get(&ps[0].0)?;
                        let n = dealt.entry(ps[0].0).or_default();
                        *n += 1;
                        (!here.is_empty()).then(|| here[(*n - 1) % here.len()])
                    });
                    match via {
                        Some(p) => entries.push(MapEntry {
                            dest,
                            router_port_guid: p.port_guid,
                            router_port_lid: p.lid,
                        }),
                        None => {
                            if let Some(e) = fallback.get(&dest) {
                                entries.push((*e).clone());
                            }
                        }
                    }
                }
            }
            mappings.push(Mapping {
                prefix: s.prefix,
                entries,
                defaults: issr[si].defaults.clone(),
            });
        }
        let tables = router_tables(view, &routers, &next, |guid, ti, all| {
            // Same dealing as the mappings: the k-th destination this
            // router owns takes its k-th primary port.
            let mut dealt = 0usize;
            let t = &view.subnets[ti];
            t.end_ports
                .iter()
                .map(|e| {
                    let mine: Vec<u8> = primary
                        .get(&(ti, e.lid))
                        .map(|ps| ps.iter().filter(|p| p.0 == guid).map(|p| p.1).collect())
                        .unwrap_or_default();
                    let matches = Match::Gid(Gid {
                        prefix: t.prefix,
                        guid: e.guid,
                    });
                    if mine.is_empty() {
                        Rule {
                            matches,
                            next_lid: e.lid,
                            ports: all.to_vec(),
                            choice: Choice::Hash,
                        }
                    } else {
                        dealt += 1;
                        Rule {
                            matches,
                            next_lid: e.lid,
                            ports: vec![mine[(dealt - 1) % mine.len()]],
                            choice: Choice::First,
                        }
                    }
                })
                .collect()
        });
        Ok(InterSubnetRoutes {
            algorithm: self.name().to_string(),
            mappings,
            routers: tables,
        })
    }
}

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

/// One router crossing of an inter-subnet path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crossing {
    pub router_guid: u64,
    /// Subnet index and router port where the packet enters the router.
    pub from_subnet: usize,
    pub ingress_port: u8,
    /// Router port it leaves on, the subnet that port is in, and the LID
    /// the packet is sent to there.
    pub egress_port: u8,
    pub to_subnet: usize,
    pub next_lid: u16,
}

/// Follows a packet from `src` (an end port GID) to `dst` through the
/// mappings and router tables. Errors name where the path breaks. For many
/// pairs build a [`Tracer`] once instead.
pub fn trace(
    view: &GlobalView,
    routes: &InterSubnetRoutes,
    src: Gid,
    dst: Gid,
) -> Result<Vec<Crossing>> {
    Tracer::new(view, routes).trace(src, dst)
}

/// Indexed mappings and router tables, for tracing many pairs.
pub struct Tracer<'a> {
    view: &'a GlobalView,
    routes: &'a InterSubnetRoutes,
    subnet: HashMap<u64, usize>,
    lid: HashMap<(usize, u64), u16>,
    mapping: Vec<HashMap<Gid, u64>>,
    /// Router port GUID -> (subnet, router GUID, port).
    port: HashMap<u64, (usize, u64, u8)>,
    /// (router GUID, port) -> (subnet, LID of the port).
    router_port: HashMap<(u64, u8), (usize, u16)>,
    /// (subnet, LID) -> (router GUID, port): router ports by address.
    by_lid: HashMap<(usize, u16), (u64, u8)>,
    /// Router GUID -> (table index, per context rule indices).
    tables: HashMap<u64, (usize, Vec<RuleIndex>)>,
}

/// Rule indices of one context: by full GID and by prefix.
type RuleIndex = (HashMap<Gid, usize>, HashMap<u64, usize>);

impl<'a> Tracer<'a> {
    pub fn new(view: &'a GlobalView, routes: &'a InterSubnetRoutes) -> Self {
        let mut t = Self {
            view,
            routes,
            subnet: HashMap::new(),
            lid: HashMap::new(),
            mapping: Vec::new(),
            port: HashMap::new(),
            router_port: HashMap::new(),
            by_lid: HashMap::new(),
            tables: HashMap::new(),
        };
        for (si, s) in view.subnets.iter().enumerate() {
            t.subnet.insert(s.prefix, si);
            for e in &s.end_ports {
                t.lid.insert((si, e.guid), e.lid);
            }
            for p in &s.router_ports {
                t.port.insert(p.port_guid, (si, p.router_guid, p.port));
                t.router_port.insert((p.router_guid, p.port), (si, p.lid));
                t.by_lid.insert((si, p.lid), (p.router_guid, p.port));
            }
        }
        t.mapping = routes
            .mappings
            .iter()
            .map(|m| {
                // A destination listed again is a backup: every router port
                // is alive here, so the first line rules.
                let mut by_dest = HashMap::with_capacity(m.entries.len());
                for e in &m.entries {
                    by_dest.entry(e.dest).or_insert(e.router_port_guid);
                }
                by_dest
            })
            .collect();
        for (ti, table) in routes.routers.iter().enumerate() {
            let ctx = table
                .contexts
                .iter()
                .map(|c| {
                    let mut g = HashMap::new();
                    let mut p = HashMap::new();
                    for (i, r) in c.rules.iter().enumerate() {
                        match r.matches {
                            Match::Gid(x) => {
                                g.entry(x).or_insert(i);
                            }
                            Match::Prefix(x) => {
                                p.entry(x).or_insert(i);
                            }
                        }
                    }
                    (g, p)
                })
                .collect();
            t.tables.insert(table.router_guid, (ti, ctx));
        }
        t
    }

    fn fail(&self, reason: String) -> Error {
        Error::InterSubnet {
            algorithm: self.routes.algorithm.clone(),
            reason,
        }
    }

    /// The rule a router applies to `dst` arriving on `port`.
    fn rule(&self, router: u64, port: u8, dst: Gid) -> Option<&'a Rule> {
        let (ti, ctxs) = self.tables.get(&router)?;
        let table = &self.routes.routers[*ti];
        let ci = table
            .contexts
            .iter()
            .position(|c| c.ingress_ports.is_empty() || c.ingress_ports.contains(&port))?;
        let (g, p) = &ctxs[ci];
        let i = g.get(&dst).or_else(|| p.get(&dst.prefix))?;
        Some(&table.contexts[ci].rules[*i])
    }

    /// See [`trace`].
    pub fn trace(&self, src: Gid, dst: Gid) -> Result<Vec<Crossing>> {
        let si = *self
            .subnet
            .get(&src.prefix)
            .ok_or_else(|| self.fail(format!("no subnet holds source {src}")))?;
        let di = *self
            .subnet
            .get(&dst.prefix)
            .ok_or_else(|| self.fail(format!("no subnet holds destination {dst}")))?;
        let slid = *self
            .lid
            .get(&(si, src.guid))
            .ok_or_else(|| self.fail(format!("source {src} is not an end port")))?;
        let dlid = *self
            .lid
            .get(&(di, dst.guid))
            .ok_or_else(|| self.fail(format!("destination {dst} is not an end port")))?;
        if si == di {
            return Ok(Vec::new());
        }
        let port_guid = self.mapping[si]
            .get(&dst)
            .copied()
            .or_else(|| self.routes.mappings[si].defaults.first().copied())
            .ok_or_else(|| {
                self.fail(format!(
                    "subnet '{}' has no router port for {dst}",
                    self.view.subnets[si].name
                ))
            })?;
        let &(mut cur_subnet, mut router, mut in_port) =
            self.port.get(&port_guid).ok_or_else(|| {
                self.fail(format!(
                    "mapping names unknown router port {port_guid:#018x}"
                ))
            })?;
        let mut cur_slid = slid;
        let mut out = Vec::new();
        for _ in 0..self.view.subnets.len() {
            let rule = self
                .rule(router, in_port, dst)
                .ok_or_else(|| self.fail(format!("router {router:#018x} has no rule for {dst}")))?;
            let egress = rule.egress_port(cur_slid).ok_or_else(|| {
                self.fail(format!("router {router:#018x}: rule for {dst} has no port"))
            })?;
            let &(to, egress_lid) = self.router_port.get(&(router, egress)).ok_or_else(|| {
                self.fail(format!(
                    "router {router:#018x} has no port {egress} in any subnet"
                ))
            })?;
            out.push(Crossing {
                router_guid: router,
                from_subnet: cur_subnet,
                ingress_port: in_port,
                egress_port: egress,
                to_subnet: to,
                next_lid: rule.next_lid,
            });
            if to == di {
                if rule.next_lid != dlid {
                    return Err(self.fail(format!(
                        "router {router:#018x} sends {dst} to LID {} instead of its LID {dlid}",
                        rule.next_lid
                    )));
                }
                return Ok(out);
            }
            // Transit: the next router port is the one with that LID there.
            let &(next_router, next_port) =
                self.by_lid.get(&(to, rule.next_lid)).ok_or_else(|| {
                    self.fail(format!(
                        "next LID {} in '{}' is no router port",
                        rule.next_lid, self.view.subnets[to].name
                    ))
                })?;
            cur_slid = egress_lid;
            cur_subnet = to;
            router = next_router;
            in_port = next_port;
        }
        Err(self.fail(format!(
            "the path to {dst} crosses more routers than there are subnets (a loop)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multi::fat_tree_subnets;

    #[test]
    fn prefix_baseline_reaches_every_remote_end_port_through_one_port_per_subnet() {
        let m = fat_tree_subnets(3, 2, 2, 2, 2).expect("generates");
        let view = GlobalView::from_multi(&m);
        let r = PrefixBaseline.route(&view).expect("routes");
        assert_eq!(r.mappings.len(), 3);
        assert_eq!(r.routers.len(), 2);
        for (si, s) in view.subnets.iter().enumerate() {
            // 2 remote subnets x 4 end ports, all through one router port.
            let map = &r.mappings[si];
            assert_eq!(map.entries.len(), 8);
            let ports: std::collections::BTreeSet<u64> =
                map.entries.iter().map(|e| e.router_port_guid).collect();
            assert_eq!(ports.len(), 1, "prefix routes use one port for everything");
            for src in &s.end_ports {
                for (di, d) in view.subnets.iter().enumerate() {
                    for dst in &d.end_ports {
                        let sg = Gid {
                            prefix: s.prefix,
                            guid: src.guid,
                        };
                        let dg = Gid {
                            prefix: d.prefix,
                            guid: dst.guid,
                        };
                        let path = trace(&view, &r, sg, dg).expect("reachable");
                        assert_eq!(path.len(), usize::from(si != di));
                        if let Some(c) = path.first() {
                            assert_eq!(c.to_subnet, di);
                            assert_eq!(c.next_lid, dst.lid);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn issr_spreads_destinations_over_every_router_port_and_reaches_all_pairs() {
        let m = fat_tree_subnets(3, 2, 2, 4, 2).expect("generates");
        let view = GlobalView::from_multi(&m);
        let r = Issr.route(&view).expect("routes");
        for (si, s) in view.subnets.iter().enumerate() {
            // 2 routers x 2 ports here, 16 remote hosts: 4 each.
            let mut per: BTreeMap<u64, usize> = BTreeMap::new();
            for e in &r.mappings[si].entries {
                *per.entry(e.router_port_guid).or_default() += 1;
            }
            assert_eq!(per.len(), 4, "every local router port carries traffic");
            assert!(per.values().all(|&n| n == 4), "{per:?}");
            assert_eq!(r.mappings[si].defaults.len(), 2, "one default per router");
            for src in &s.end_ports {
                for d in view.subnets.iter().filter(|d| d.prefix != s.prefix) {
                    for dst in &d.end_ports {
                        let sg = Gid {
                            prefix: s.prefix,
                            guid: src.guid,
                        };
                        let dg = Gid {
                            prefix: d.prefix,
                            guid: dst.guid,
                        };
                        let path = trace(&view, &r, sg, dg).expect("reachable");
                        assert_eq!(path.len(), 1);
                        assert_eq!(path[0].next_lid, dst.lid);
                    }
                }
            }
        }
        // Routers use both of their ports into a subnet.
        let t = &r.routers[0];
        assert!(t.contexts[0]
            .rules
            .iter()
            .all(|r| r.ports.len() == 2 && r.choice == Choice::Hash));
    }

    #[test]
    fn hash_choice_is_deterministic_and_spreads() {
        let rule = Rule {
            matches: Match::Prefix(1),
            next_lid: 7,
            ports: vec![1, 2, 3, 4],
            choice: Choice::Hash,
        };
        let mut used = [0u32; 5];
        for slid in 1..=400u16 {
            let p = rule.egress_port(slid).expect("port");
            assert_eq!(Some(p), rule.egress_port(slid));
            used[p as usize] += 1;
        }
        for &n in &used[1..] {
            assert!((60..=140).contains(&n), "uneven spread {used:?}");
        }
    }
}
