//! The routes indexed for the walks: per destination, each subnet's
//! mapping entry and each router's rule, found once.

use super::*;

/// Where a source subnet's mapping sends a destination.
pub(super) enum Ingress {
    /// (subnet, router port index there, its GUID).
    Port(u32, u32, u64),
    /// No entry and no default.
    None,
    /// A port GUID no summary holds.
    Unknown(u64),
}

/// Where a rule sits: (router table, context, rule).
pub(super) type RuleAt = (u32, u32, u32);

/// The mappings and router tables indexed by destination: lookups by
/// number where the all-pairs tracer hashes GIDs, with its rules (a
/// destination's first mapping line rules, its default the first default
/// port; a router takes the first context that accepts the ingress port,
/// there a GID rule before a prefix rule, the first of each).
pub(super) struct RouteIndex<'a> {
    routes: &'a InterSubnetRoutes,
    /// Per subnet of the view: its mapping.
    mapping: Vec<Option<&'a Mapping>>,
    /// Per source subnet (the view's order, as the mappings are): per
    /// destination index, `NO` or 1 + the mapping entry that rules.
    entry: Vec<Vec<u32>>,
    /// Router port (subnet, index) by port GUID.
    by_guid: &'a FastMap<u64, (u32, u32)>,
    /// Per subnet, per router port: the slot of the context its router's
    /// table selects for packets entering there (`NO`: none).
    context: Vec<Vec<u32>>,
    /// Per slot: (table, context) and its rules by destination index.
    slots: Vec<(u32, u32, Vec<u32>)>,
    /// Prefix rules by (slot, prefix).
    by_prefix: FastMap<(u32, u64), u32>,
}

const NO: u32 = u32::MAX;

/// Per destination, the first GID rule of context `c` naming it (or
/// [`NO`]).
fn rule_column(c: &crate::intersubnet::Context, dest_of: &FastMap<Gid, u32>, n: usize) -> Vec<u32> {
    let mut col = vec![NO; n];
    for (ri, r) in c.rules.iter().enumerate() {
        let Match::Gid(g) = r.matches else {
            continue;
        };
        if let Some(&k) = dest_of.get(&g) {
            if col[k as usize] == NO {
                col[k as usize] = ri as u32;
            }
        }
    }
    col
}

/// Per destination, the first entry of `mapping` naming it (or [`NO`]).
fn entry_column(mapping: Option<&Mapping>, dest_of: &FastMap<Gid, u32>, n: usize) -> Vec<u32> {
    let mut col = vec![NO; n];
    let Some(m) = mapping else {
        return col;
    };
    for (i, e) in m.entries.iter().enumerate() {
        if let Some(&k) = dest_of.get(&e.dest) {
            if col[k as usize] == NO {
                col[k as usize] = i as u32;
            }
        }
    }
    col
}

impl<'a> RouteIndex<'a> {
    pub(super) fn new(
        view: &GlobalView,
        routes: &'a InterSubnetRoutes,
        dests: &[(u32, u32)],
        parts: &[&DependencySummary],
        by_guid: &'a FastMap<u64, (u32, u32)>,
    ) -> Self {
        let mut dest_of: FastMap<Gid, u32> = FastMap::default();
        for (k, &(d, e)) in dests.iter().enumerate() {
            let sv = &view.subnets[d as usize];
            let gid = Gid {
                prefix: sv.prefix,
                guid: sv.end_ports[e as usize].guid,
            };
            dest_of.entry(gid).or_insert(k as u32);
        }
        let n = dests.len();
        // By prefix, not by place: the caller's subnets need not be in
        // the order the routes were computed in.
        let mapping: Vec<Option<&'a Mapping>> = view
            .subnets
            .iter()
            .map(|sv| routes.mappings.iter().find(|m| m.prefix == sv.prefix))
            .collect();
        let entry = (0..view.subnets.len())
            .into_par_iter()
            .map(|si| entry_column(mapping[si], &dest_of, n))
            .collect();
        // A router GUID listed twice: the last table rules, as in the
        // all-pairs tracer.
        let mut table: FastMap<u64, u32> = FastMap::default();
        for (ti, t) in routes.routers.iter().enumerate() {
            table.insert(t.router_guid, ti as u32);
        }
        let mut which: FastMap<(u32, u32), u32> = FastMap::default();
        let mut used: Vec<(u32, u32)> = Vec::new();
        // Per summary port, the (table, context) it enters by, numbered in
        // the order first met.
        let mut slot_of = |router_guid: u64, port: u8| -> u32 {
            let Some(&ti) = table.get(&router_guid) else {
                return NO;
            };
            let t = &routes.routers[ti as usize];
            let Some(ci) = t
                .contexts
                .iter()
                .position(|c| c.ingress_ports.is_empty() || c.ingress_ports.contains(&port))
            else {
                return NO;
            };
            *which.entry((ti, ci as u32)).or_insert_with(|| {
                used.push((ti, ci as u32));
                (used.len() - 1) as u32
            })
        };
        let context: Vec<Vec<u32>> = parts
            .iter()
            .map(|sum| {
                sum.ports
                    .iter()
                    .map(|p| slot_of(p.router_guid, p.port))
                    .collect()
            })
            .collect();
        let slots: Vec<(u32, u32, Vec<u32>)> = used
            .par_iter()
            .map(|&(ti, ci)| {
                let c = &routes.routers[ti as usize].contexts[ci as usize];
                (ti, ci, rule_column(c, &dest_of, n))
            })
            .collect();
        let mut by_prefix: FastMap<(u32, u64), u32> = FastMap::default();
        for (slot, &(ti, ci)) in used.iter().enumerate() {
            let c = &routes.routers[ti as usize].contexts[ci as usize];
            for (ri, r) in c.rules.iter().enumerate() {
                if let Match::Prefix(p) = r.matches {
                    by_prefix.entry((slot as u32, p)).or_insert(ri as u32);
                }
            }
        }
        Self {
            routes,
            mapping,
            entry,
            by_guid,
            context,
            slots,
            by_prefix,
        }
    }

    pub(super) fn ingress(&self, a: usize, k: u32) -> Ingress {
        let Some(m) = self.mapping[a] else {
            return Ingress::None;
        };
        let i = self.entry[a][k as usize];
        let guid = if i == NO {
            match m.defaults.first() {
                Some(&g) => g,
                None => return Ingress::None,
            }
        } else {
            m.entries[i as usize].router_port_guid
        };
        match self.by_guid.get(&guid) {
            Some(&(s, p)) => Ingress::Port(s, p, guid),
            None => Ingress::Unknown(guid),
        }
    }

    /// The rule router port `i` of subnet `s` applies to destination
    /// `k` (prefix `prefix`) arriving there.
    pub(super) fn rule(&self, s: u32, i: u32, k: u32, prefix: u64) -> Option<&'a Rule> {
        let slot = *self.context.get(s as usize)?.get(i as usize)?;
        let (ti, ci, col) = self.slots.get(slot as usize)?;
        let at: RuleAt = match col.get(k as usize) {
            Some(&ri) if ri != NO => (*ti, *ci, ri),
            _ => (*ti, *ci, *self.by_prefix.get(&(slot, prefix))?),
        };
        self.routes
            .routers
            .get(at.0 as usize)?
            .contexts
            .get(at.1 as usize)?
            .rules
            .get(at.2 as usize)
    }
}
