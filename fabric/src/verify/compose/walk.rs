//! One destination's walk through the routes: from each other subnet the
//! router port its mapping names, then each router's rule, egress port
//! and next LID, and the transit legs between, until the destination's
//! subnet; what it uses is marked for the summary graph.

use super::*;

/// One destination's walk over router states, memoized: a state's
/// continuation does not depend on how the packet got there.
struct Walk<'c, 'a> {
    ctx: &'c Ctx<'a>,
    /// The destination's index.
    k: u32,
    d: usize,
    gid: Gid,
    lid: u16,
    host: usize,
    memo: &'c mut FastMap<State, Result<Hop, String>>,
    collected: &'c mut FastSet<State>,
}

impl Ctx<'_> {
    /// Destination `k`: end port `e` of subnet `d`.
    pub(super) fn destination(
        &self,
        k: usize,
        d: usize,
        e: usize,
        acc: &mut Acc,
        scratch: &mut Scratch,
    ) {
        let pd = &self.parts[d];
        let (lid, host) = pd.hosts[e];
        let sv = &self.view.subnets[d];
        let gid = Gid {
            prefix: sv.prefix,
            guid: sv.end_ports[e].guid,
        };
        let mut w = Walk {
            ctx: self,
            k: k as u32,
            d,
            gid,
            lid,
            host: host as usize,
            memo: &mut scratch.memo,
            collected: &mut scratch.collected,
        };
        w.memo.clear();
        w.collected.clear();
        for a in 0..self.parts.len() {
            if a == d || self.parts[a].hosts.is_empty() {
                continue;
            }
            if let Some((hosts, reason)) = w.sources_in(a, acc) {
                acc.unreachable += hosts;
                if acc.first.as_ref().is_none_or(|f| f.0 > k) {
                    acc.first = Some((k, w.fault(a, hosts, reason)));
                }
            }
        }
    }

    /// Names a global vertex for a cycle report.
    pub(super) fn name(&self, x: usize) -> CycleStep {
        let s = self
            .parts
            .partition_point(|p| p.offset as usize <= x)
            .saturating_sub(1);
        let p = &self.parts[s];
        let v = p.sum.vertices[x - p.offset as usize];
        let port = |i: u32| {
            let sp = &p.sum.ports[i as usize];
            format!(
                "router {:#018x} port {} (LID {})",
                sp.router_guid, sp.port, sp.lid
            )
        };
        let channel = match v {
            Vertex::Enter { port: i, .. } => format!("{} into the subnet", port(i)),
            Vertex::Leave { port: i, .. } => format!("the subnet onto {}", port(i)),
            Vertex::Inner { channel, .. } => p
                .sum
                .channels
                .get(channel as usize)
                .cloned()
                .unwrap_or_default(),
        };
        CycleStep {
            subnet: p.name.to_string(),
            channel,
            vl: v.vl(),
        }
    }
}

impl Walk<'_, '_> {
    fn fault(&self, a: usize, hosts: u64, reason: String) -> Undeliverable {
        let c = self.ctx;
        Undeliverable {
            source_subnet: c.parts[a].name.to_string(),
            hosts,
            destination_subnet: c.parts[self.d].name.to_string(),
            destination: self.gid.to_string(),
            destination_lid: self.lid,
            reason,
        }
    }

    /// Traffic from every host of subnet `a` to this destination: the
    /// hops and legs it uses go to `out`; the hosts it does not deliver
    /// and why come back.
    fn sources_in(&mut self, a: usize, acc: &mut Acc) -> Option<(u64, String)> {
        let c = self.ctx;
        let pa = &c.parts[a];
        let all = pa.hosts.len() as u64;
        let dst = self.gid;
        let (s, i, guid) = match c.index.ingress(a, self.k) {
            Ingress::Port(s, i, guid) => (s, i, guid),
            Ingress::None => {
                return Some((
                    all,
                    format!("subnet '{}' has no router port for {dst}", pa.name),
                ));
            }
            Ingress::Unknown(guid) => {
                return Some((
                    all,
                    format!("the mapping names router port {guid:#018x}, which no summary holds"),
                ));
            }
        };
        if s as usize != a {
            return Some((
                all,
                format!(
                    "the mapping names router port {guid:#018x} of subnet '{}'",
                    c.parts[s as usize].name
                ),
            ));
        }
        let sp = &pa.sum.ports[i as usize];
        let Some(rule) = c.index.rule(a as u32, i, self.k, dst.prefix) else {
            return Some((
                all,
                format!("router {:#018x} has no rule for {dst}", sp.router_guid),
            ));
        };
        if rule.ports.is_empty() {
            return Some((
                all,
                format!(
                    "router {:#018x}: rule for {dst} has no port",
                    sp.router_guid
                ),
            ));
        }
        // (arrival vertex, egress port) pairs the hosts of `a` make.
        let combos = self.first_crossings(a, i as usize, rule);
        let mut egress: Vec<u8> = combos.iter().map(|&(_, e)| e).collect();
        egress.sort_unstable();
        egress.dedup();
        let limit = c.parts.len() as u32;
        let mut bad: Vec<(u8, String)> = Vec::new();
        let mut good: Vec<(u8, u32)> = Vec::new();
        for &e in &egress {
            let st = (sp.router_guid, e, rule.next_lid);
            match self.chain(st) {
                Ok(h) if h.depth <= limit => {
                    good.push((e, h.enter));
                    self.collect(st, acc);
                }
                Ok(_) => bad.push((
                    e,
                    format!(
                        "the path to {dst} crosses more routers than there are subnets (a loop)"
                    ),
                )),
                Err(why) => bad.push((e, why)),
            }
        }
        if !good.is_empty() {
            mark(&c.ingress[a], i);
        }
        for &(leave, e) in &combos {
            if let Some(&(_, enter)) = good.iter().find(|g| g.0 == e) {
                acc.hops
                    .insert(u64::from(leave + pa.offset) << 32 | u64::from(enter));
            }
        }
        let (_, why) = bad.first()?;
        let hosts = match rule.choice {
            Choice::First => all,
            Choice::Hash => pa
                .hosts
                .iter()
                .filter(|&&(lid, _)| {
                    rule.egress_port(lid)
                        .is_some_and(|e| bad.iter().any(|b| b.0 == e))
                })
                .count() as u64,
        };
        Some((hosts, why.clone()))
    }

    /// The (arrival vertex, egress port) pairs of the first crossing from
    /// the hosts of subnet `a` through its router port `i`. A hash choice
    /// looks at the hosts one by one and stops once every pair has been
    /// seen.
    fn first_crossings(&self, a: usize, i: usize, rule: &Rule) -> Vec<(u32, u8)> {
        let pa = &self.ctx.parts[a];
        let leaves = &pa.arrive_leaves[i];
        match rule.choice {
            Choice::First => leaves.iter().map(|&w| (w, rule.ports[0])).collect(),
            Choice::Hash => {
                let mut distinct = [0u64; 4];
                for &e in &rule.ports {
                    distinct[e as usize / 64] |= 1u64 << (e % 64);
                }
                let ports: u32 = distinct.iter().map(|w| w.count_ones()).sum();
                let all = leaves.len() * ports as usize;
                // Per arrival vertex (by its place in `leaves`), the egress
                // ports seen, as a 256-bit set.
                let mut seen = vec![[0u64; 4]; leaves.len()];
                let mut count = 0;
                let one = leaves.len() == 1;
                for &(lid, h) in &pa.hosts {
                    let Some(e) = rule.egress_port(lid) else {
                        continue;
                    };
                    let wi = if one {
                        0
                    } else {
                        let w = pa
                            .sum
                            .chains
                            .get(pa.arrive[i].get(h as usize) as usize)
                            .and_then(|c| c.last())
                            .copied()
                            .unwrap_or(NO_VERTEX);
                        match leaves.binary_search(&w) {
                            Ok(wi) => wi,
                            Err(_) => continue,
                        }
                    };
                    let (word, bit) = (e as usize / 64, 1u64 << (e % 64));
                    if seen[wi][word] & bit == 0 {
                        seen[wi][word] |= bit;
                        count += 1;
                        if count == all {
                            break;
                        }
                    }
                }
                let mut out = Vec::with_capacity(count);
                for (wi, set) in seen.iter().enumerate() {
                    for (word, &bits) in set.iter().enumerate() {
                        let mut x = bits;
                        while x != 0 {
                            out.push((leaves[wi], (word * 64) as u8 + x.trailing_zeros() as u8));
                            x &= x - 1;
                        }
                    }
                }
                out
            }
        }
    }

    /// One router step from `st`.
    fn step(&self, st: State) -> Result<Step, String> {
        let c = self.ctx;
        let (router, port, next_lid) = st;
        let dst = self.gid;
        let &(to, q) = c
            .port_at
            .get(&(router, port))
            .ok_or_else(|| format!("router {router:#018x} has no port {port} in any subnet"))?;
        let pt = &c.parts[to as usize];
        if to as usize == self.d {
            if next_lid != self.lid {
                return Err(format!(
                    "router {router:#018x} sends {dst} to LID {next_lid} instead of its LID {}",
                    self.lid
                ));
            }
            let chain = pt.depart[q as usize].get(self.host);
            let enter = pt
                .sum
                .chains
                .get(chain as usize)
                .and_then(|c| c.first())
                .copied()
                .ok_or_else(|| format!("the summary of '{}' lacks chain {chain}", pt.name))?;
            return Ok(Step::Deliver(enter + pt.offset, to, chain));
        }
        let &nq = pt
            .by_lid
            .get(&next_lid)
            .ok_or_else(|| format!("next LID {next_lid} in '{}' is no router port", pt.name))?;
        let li = q as usize * pt.sum.ports.len() + nq as usize;
        let leg = pt
            .sum
            .legs
            .get(li)
            .ok_or_else(|| format!("the summary of '{}' lacks a transit leg", pt.name))?;
        let path = leg.path.as_ref().map_err(|why| {
            format!(
                "crossing '{}' from router {router:#018x} port {port} to LID {next_lid}: {why}",
                pt.name
            )
        })?;
        let (Some(&first), Some(&last)) = (path.first(), path.last()) else {
            return Err(format!(
                "the summary of '{}' has an empty transit leg",
                pt.name
            ));
        };
        let at = &pt.sum.ports[nq as usize];
        let rule = c
            .index
            .rule(to, nq, self.k, dst.prefix)
            .ok_or_else(|| format!("router {:#018x} has no rule for {dst}", at.router_guid))?;
        // Past the first router the source LID a hash sees is the last
        // egress port's.
        let egress = rule
            .egress_port(pt.sum.ports[q as usize].lid)
            .ok_or_else(|| {
                format!(
                    "router {:#018x}: rule for {dst} has no port",
                    at.router_guid
                )
            })?;
        Ok(Step::Transit(
            first + pt.offset,
            to,
            li as u32,
            (at.router_guid, egress, rule.next_lid),
            last + pt.offset,
        ))
    }

    /// Follows the states from `st` to delivery, a fault or a repeat (a
    /// loop), and memoizes every state on the way.
    fn chain(&mut self, st: State) -> Result<Hop, String> {
        let limit = self.ctx.parts.len() + 1;
        // Per state on the way: the hop it makes when the rest delivers.
        let mut path: Vec<(State, Option<Hop>)> = Vec::new();
        let mut cur = st;
        let end: Result<Hop, String> = loop {
            if let Some(m) = self.memo.get(&cur) {
                break m.clone();
            }
            if path.iter().any(|(s, _)| *s == cur) || path.len() > limit {
                // A repeat never delivers; a chain longer than the subnets
                // fails the same way at its first crossing.
                let why = format!(
                    "the path to {} crosses more routers than there are subnets (a loop)",
                    self.gid
                );
                if path.len() > limit {
                    return Err(why);
                }
                break Err(why);
            }
            match self.step(cur) {
                Ok(Step::Deliver(enter, s, chain)) => {
                    let hop = Hop {
                        enter,
                        walk: Used::Chain(s, chain),
                        depth: 1,
                        next: None,
                    };
                    path.push((cur, None));
                    break Ok(hop);
                }
                Ok(Step::Transit(enter, s, leg, next, leave)) => {
                    path.push((
                        cur,
                        Some(Hop {
                            enter,
                            walk: Used::Leg(s, leg),
                            depth: 0,
                            next: Some((next, leave)),
                        }),
                    ));
                    cur = next;
                }
                Err(why) => {
                    path.push((cur, None));
                    break Err(why);
                }
            }
        };
        // Back along the path: each state delivers one crossing before
        // the next, or fails as the end does.
        let mut res = end;
        for (s, hop) in path.into_iter().rev() {
            res = match (res, hop) {
                (Ok(next), Some(mut h)) => {
                    h.depth = next.depth + 1;
                    Ok(h)
                }
                (r, _) => r,
            };
            self.memo.insert(s, res.clone());
        }
        res
    }

    fn memo(&self, st: State) -> Option<&Hop> {
        match self.memo.get(&st) {
            Some(Ok(h)) => Some(h),
            _ => None,
        }
    }

    /// Marks the walks and adds the hops of the delivered chain of states
    /// from `st`.
    fn collect(&mut self, st: State, acc: &mut Acc) {
        let c = self.ctx;
        let mut cur = st;
        while self.collected.insert(cur) {
            let Some(h) = self.memo(cur) else { return };
            match h.walk {
                Used::Chain(s, ch) => mark(&c.chains[s as usize], ch),
                Used::Leg(s, l) => mark(&c.legs[s as usize], l),
            }
            let Some((next, leave)) = h.next else { return };
            let Some(n) = self.memo(next) else { return };
            acc.hops.insert(u64::from(leave) << 32 | u64::from(n.enter));
            cur = next;
        }
    }
}
