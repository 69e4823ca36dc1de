//! Follows a packet through the mapping files and router tables, naming
//! where a path breaks.

use super::{Gid, GlobalView, InterSubnetRoutes, Match, Rule};
use crate::error::{Error, Result};
use std::collections::HashMap;

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
