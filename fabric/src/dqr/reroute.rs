//! One attempt at rerouting the flows a fault broke ([`super::reroute`]
//! retries it with another destination first), as named steps:
//!
//! 1. [`Scan`]: what the fault cut off, and which destinations it touches
//!    (only those whose column has an entry into a dead port);
//! 2. [`Sources`]: the hosts, by the switch they hang off;
//! 3. side by side on the two cores: [`Search::destination`] reroutes each
//!    affected destination, flow by flow, on the tables in force plus the
//!    entries its own paths set, while [`copy_and_repair`] copies the
//!    tables in force into the new ones and repairs the routes toward
//!    switches;
//! 4. [`Search::into_outcome`]: the entries set go in, the result is
//!    verified, and [`check_update`] checks the update (with a drain stage
//!    when the one-step update admits a cycle).

use super::links::{SwitchLinks, repair_switch_lids};
use super::search::{Entries, Flow, Searcher};
use super::{
    ChannelList, DqrError, ORDER_RETRIES, Options, Outcome, Reach, Stats, admit_transition,
    verify_result,
};
use crate::model::{Fabric, NONE, NodeKind, Slot};
use crate::tables::{NO_PATH, NUM_SLS, PathSl, Routing, SL_NONE};
use crate::verify::transition::Changed;

pub(super) fn reroute_once(
    f: &Fabric,
    old: &Routing,
    list: &mut ChannelList,
    opts: &Options,
    first: &[u16],
) -> Result<Outcome, DqrError> {
    if !list.fits(f.num_slots()) {
        return Err(DqrError::OtherFabric {
            list: list.len(),
            slots: f.num_slots(),
        });
    }
    // Dependencies through a link that is down are gone: withdrawing them
    // frees the turns that close a cycle only through the failed link.
    for s in 0..f.num_slots() as Slot {
        if f.remote(s) == NONE {
            list.isolate(s);
        }
    }
    // The list may carry earlier reroutes: count this one's share.
    let (added0, reorders0) = (list.added(), list.reorders());
    let scan = Scan::new(f, old, opts.reconnect);
    let sources = Sources::new(f);
    // The switches whose route toward each affected destination crossed
    // the fault, found for all of them first, from the tables in force (a
    // destination's column changes only while it is rerouted, below).
    // Every LID of every end port (LMC: a port's LIDs route apart, and
    // only those a fault broke are rerouted).
    let mut affected_dests: Vec<(Slot, u16)> = f
        .end_lids()
        .iter()
        .copied()
        .filter(|&(_, lid)| scan.affected_lid[lid as usize])
        .collect();
    // The destinations an earlier try found no path to go first.
    affected_dests.sort_by_key(|&(_, lid)| !first.contains(&lid));
    let links = SwitchLinks::new(f, opts.reconnect);
    let dlids: Vec<u16> = affected_dests.iter().map(|&(_, l)| l).collect();
    let broken_all = links.broken(f, old, &dlids, &scan.dropped_lid);
    let mut search = Search::new(f, old, list, opts, &sources);
    search.stats.flows = sources.flows(f);
    // The routes toward switches are repaired beside the search: the
    // destinations rerouted there are end ports, so the two touch
    // different columns.
    let (copied, ()) = rayon::join(
        || copy_and_repair(f, &links, old, &scan),
        || {
            for (&d, broken) in affected_dests.iter().zip(broken_all) {
                search.destination(d, broken);
            }
        },
    );
    let mut out = search.into_outcome(copied, added0, reorders0)?;
    let drain = if opts.check_transition {
        let changes = Changes {
            scan: &scan,
            links: &links,
            changed: &out.changed,
            repaired: &out.repaired,
        };
        check_update(f, old, &out.routing, list, &changes, &mut out.stats)?
    } else {
        None
    };
    if out.stats.sls_changed > 0 {
        list.mark_cached_sl_walks();
    }
    Ok(Outcome {
        routing: out.routing,
        drain,
        stats: out.stats,
    })
}

/// What the fault cut off, by LID.
struct Scan {
    /// Ports the fault cut off (a host behind a failed link or switch, a
    /// switch with no link left) are no destination any more: no entry
    /// names them, so the set never routes to a port the fabric lacks.
    dropped_lid: Vec<bool>,
    /// Destinations some switch's entry toward which leads into a link
    /// that is down (or nowhere).
    affected_lid: Vec<bool>,
}

impl Scan {
    /// `reconnect`: a destination some switch has no entry for is
    /// affected too ([`super::Options::reconnect`]).
    fn new(f: &Fabric, old: &Routing, reconnect: bool) -> Self {
        let mut dropped_lid = vec![false; f.max_lid() as usize + 1];
        for lid in 1..=f.max_lid() {
            let Some(s) = f.lid_owner(lid) else { continue };
            let n = f.node_of(s);
            dropped_lid[lid as usize] = match f.kind(n) {
                NodeKind::Switch => f.port_slots(n).all(|p| f.remote(p) == NONE),
                _ => f.remote(s) == NONE,
            };
        }
        // Scanning the rows of the switches with a dead port finds the
        // affected destinations without walking the rest (an unlinked
        // port of the fabric before the fault carries no entry of a
        // connected routing).
        let mut affected_lid = vec![false; f.max_lid() as usize + 1];
        for (si, &sw) in f.switches().iter().enumerate() {
            let dead: Vec<bool> = (0..=f.num_ports(sw))
                .map(|p| p > 0 && f.remote(f.slot(sw, p)) == NONE)
                .collect();
            if !dead.iter().any(|&d| d) {
                continue;
            }
            for (lid, hit) in affected_lid.iter_mut().enumerate() {
                let e = old.lfts.get(si as u32, lid as u16);
                if dead.get(e as usize).copied().unwrap_or(false) {
                    *hit = true;
                }
            }
        }
        if reconnect {
            for si in 0..f.switches().len() as u32 {
                for (lid, hit) in affected_lid.iter_mut().enumerate().skip(1) {
                    if old.lfts.get(si, lid as u16) == NO_PATH
                        && !dropped_lid[lid]
                        && f.lid_owner(lid as u16).is_some()
                    {
                        *hit = true;
                    }
                }
            }
        }
        Self {
            dropped_lid,
            affected_lid,
        }
    }
}

/// The sources of flows: every host, by the switch it hangs off.
struct Sources {
    hosts: Vec<Slot>,
    /// Per position in `hosts`: the index of its switch (NONE for none).
    host_switch: Vec<u32>,
    /// Positions in `hosts` by the switch the host hangs off.
    hosts_at: Vec<Vec<u32>>,
}

impl Sources {
    fn new(f: &Fabric) -> Self {
        let hosts = crate::verify::switch_hosts(f);
        let host_switch: Vec<u32> = hosts
            .iter()
            .map(|&h| f.switch_index(f.node_of(f.remote(h))).unwrap_or(NONE))
            .collect();
        let mut hosts_at: Vec<Vec<u32>> = vec![Vec::new(); f.switches().len()];
        for (k, &si) in host_switch.iter().enumerate() {
            if si != NONE {
                hosts_at[si as usize].push(k as u32);
            }
        }
        Self {
            hosts,
            host_switch,
            hosts_at,
        }
    }

    /// Flows toward every destination LID, counted without walking them:
    /// from every LID of every host but the destination's, and no router
    /// port toward a router port (transit, the inter-subnet check's).
    fn flows(&self, f: &Fabric) -> u64 {
        let lids = |h: Slot| 1u64 << f.lmc(h);
        let n: u64 = self.hosts.iter().map(|&h| lids(h)).sum();
        let routers: u64 = self
            .hosts
            .iter()
            .filter(|&&h| f.kind(f.node_of(h)) == NodeKind::Router)
            .map(|&h| lids(h))
            .sum();
        f.end_lids()
            .iter()
            .map(|&(d, _)| {
                if f.kind(f.node_of(d)) == NodeKind::Router {
                    n - routers
                } else if f.switch_index(f.node_of(f.remote(d))).is_some() {
                    n - lids(d)
                } else {
                    n
                }
            })
            .sum()
    }
}

/// The tables in force copied into the new ones, the entries toward cut
/// off ports dropped, and the routes toward switches repaired.
struct Copied {
    new: Routing,
    dropped: u64,
    /// (switch index, LID) of the repaired entries toward switches.
    repaired: Vec<(u32, u16)>,
}

fn copy_and_repair(f: &Fabric, links: &SwitchLinks, old: &Routing, scan: &Scan) -> Copied {
    let mut new = old.clone();
    let mut dropped = 0u64;
    for (lid, _) in scan.dropped_lid.iter().enumerate().filter(|&(_, &g)| g) {
        for si in 0..f.switches().len() as u32 {
            if new.lfts.get(si, lid as u16) != NO_PATH {
                new.lfts.set(si, lid as u16, NO_PATH);
                dropped += 1;
            }
        }
    }
    let repaired = repair_switch_lids(f, links, &mut new, &scan.affected_lid);
    Copied {
        new,
        dropped,
        repaired,
    }
}

/// The search of every affected destination's broken flows: what they
/// share while the destinations are rerouted one after the other.
struct Search<'a> {
    f: &'a Fabric,
    old: &'a Routing,
    list: &'a mut ChannelList,
    opts: &'a Options,
    src: &'a Sources,
    searcher: Searcher,
    ent: Entries<'a>,
    path_sl: Option<PathSl>,
    state: Vec<Reach>,
    /// The sources of the destination being rerouted, positions in
    /// `src.hosts`, in the order they are routed.
    order: Vec<u32>,
    /// Per destination: (source switch, SL, VL of the first hop) of the
    /// flows rerouted on their own SL. Another host of that switch with
    /// the same SL and first VL follows the same fixed entries from
    /// there, with the same dependencies, all in the list already: its
    /// search would find that path again and add nothing.
    routed_from: Vec<(u32, u8, u8)>,
    /// The SLs (VL layers) the routing uses, read only when some flow's
    /// own SL finds no path: most reroutes never need them.
    layers: Option<Vec<u8>>,
    max_vl: u8,
    stats: Stats,
    unrouted: u64,
    first_unrouted: Option<(u16, u16)>,
    /// The destination LIDs whose flows changed, each with the switches
    /// whose route toward it crossed the fault: the only entries the
    /// reroute may set.
    changed: Vec<((Slot, u16), Vec<u32>)>,
}

/// A flow being rerouted: source `h` (position `k` in the hosts) off
/// switch `si0`, toward `d`.
#[derive(Clone, Copy)]
struct Pair {
    h: Slot,
    si0: u32,
    slid: u16,
    d: Slot,
    dlid: u16,
    sl: u8,
}

/// The search's result, before the update check.
struct Rerouted {
    routing: Routing,
    stats: Stats,
    changed: Vec<((Slot, u16), Vec<u32>)>,
    /// (switch index, LID) of the repaired entries toward switches.
    repaired: Vec<(u32, u16)>,
}

impl<'a> Search<'a> {
    fn new(
        f: &'a Fabric,
        old: &'a Routing,
        list: &'a mut ChannelList,
        opts: &'a Options,
        src: &'a Sources,
    ) -> Self {
        let stats = Stats {
            vls_before: list.vls_used(),
            ..Stats::default()
        };
        Self {
            f,
            old,
            searcher: Searcher::new(f, list.vls()),
            max_vl: list.max_vl_used(),
            list,
            opts,
            src,
            ent: Entries {
                old,
                assigned: vec![NO_PATH; f.switches().len()],
            },
            path_sl: old.path_sl.clone(),
            state: vec![Reach::Unknown; f.switches().len()],
            order: Vec::new(),
            routed_from: Vec::new(),
            layers: None,
            stats,
            unrouted: 0,
            first_unrouted: None,
            changed: Vec::new(),
        }
    }

    fn reset(&mut self, broken: &[u32]) {
        self.state.fill(Reach::Good);
        for &si in broken {
            self.state[si as usize] = Reach::Broken;
        }
    }

    /// Reroutes the flows toward LID `d.1` of port `d.0` whose route
    /// crossed the fault at the switches `broken`. The switches share one entry per destination
    /// across SLs, so the first flow routed fixes the way for the flows
    /// after it, whose layers may not admit it: when some flow finds no
    /// path, the destination is undone (entries, SLs, dependencies,
    /// counts) and tried again with that flow first.
    fn destination(&mut self, d: (Slot, u16), broken: Vec<u32>) {
        self.reset(&broken);
        // Most sources sit on switches the fault left alone: only those of
        // the others, in the order of the hosts.
        self.order.clear();
        for (si, at) in self.src.hosts_at.iter().enumerate() {
            if self.state[si] != Reach::Good {
                self.order.extend_from_slice(at);
            }
        }
        self.order.sort_unstable();
        let (stats0, set0) = (self.stats.clone(), self.searcher.set.len());
        let mut sl_changes: Vec<(u16, u8)> = Vec::new();
        let mark = self.list.journal_len();
        let mut affected = false;
        let mut retried = 0u64;
        for retry in 0..=ORDER_RETRIES {
            let last = retry == ORDER_RETRIES;
            let (failed, hit) = self.route_flows(d, last, &mut sl_changes);
            affected = hit;
            let Some(pos) = failed else { break };
            self.list.undo_to(mark);
            self.searcher.set.truncate(set0);
            let dlid = d.1;
            if let Some(p) = self.path_sl.as_mut() {
                for &(slid, sl) in sl_changes.iter().rev() {
                    p.set_pair(slid, dlid, sl);
                }
            }
            sl_changes.clear();
            self.stats = stats0.clone();
            retried += 1;
            self.reset(&broken);
            let k = self.order.remove(pos);
            self.order.insert(0, k);
        }
        self.stats.order_retries += retried;
        if affected {
            self.stats.destinations_affected += 1;
            self.changed.push((d, broken));
        }
    }

    /// One pass over the flows toward `d` in `order`: the position of the
    /// first flow left without a path (unless `last`: then it is counted
    /// unrouted and the pass goes on), and whether any flow was broken.
    fn route_flows(
        &mut self,
        (d, dlid): (Slot, u16),
        last: bool,
        sl_changes: &mut Vec<(u16, u8)>,
    ) -> (Option<usize>, bool) {
        let f = self.f;
        let d_router = f.kind(f.node_of(d)) == NodeKind::Router;
        let mut affected = false;
        self.routed_from.clear();
        for pos in 0..self.order.len() {
            let k = self.order[pos] as usize;
            let (h, si0) = (self.src.hosts[k], self.src.host_switch[k]);
            if h == d || (d_router && f.kind(f.node_of(h)) == NodeKind::Router) {
                continue;
            }
            // Each LID of the source (LMC) is a flow with its own SL; the
            // route is the destination's, so flows on one SL share it.
            for slid in f.lids_of_slot(h) {
                let sl = self.path_sl.as_ref().map_or(0, |p| p.get(slid, dlid));
                if sl == SL_NONE {
                    // No path before the fault either: not this reroute's.
                    continue;
                }
                self.stats.flows_broken += 1;
                affected = true;
                let pair = Pair {
                    h,
                    si0,
                    slid,
                    d,
                    dlid,
                    sl,
                };
                if self
                    .first_vl(&pair)
                    .is_some_and(|v| self.routed_from.contains(&(si0, sl, v)))
                {
                    self.stats.flows_rerouted += 1;
                    continue;
                }
                if self.route_flow(&pair, sl_changes) {
                    self.stats.flows_rerouted += 1;
                } else if !last {
                    return (Some(pos), affected);
                } else {
                    self.unrouted += 1;
                    self.first_unrouted.get_or_insert((slid, dlid));
                }
            }
        }
        (None, affected)
    }

    /// The VL the source's packets take out of its switch now, when that
    /// switch's entry is fixed.
    fn first_vl(&self, p: &Pair) -> Option<u8> {
        self.state[p.si0 as usize].fixed().then(|| {
            let out = self.ent.get(p.si0, p.dlid, &self.state);
            self.ent
                .vl(p.si0, self.f.port_of(self.f.remote(p.h)), out, p.sl)
        })
    }

    /// Finds a path for one flow: on its own SL first, then on the other
    /// layers the routing uses (the source then gets the new SL).
    fn route_flow(&mut self, p: &Pair, sl_changes: &mut Vec<(u16, u8)>) -> bool {
        for attempt in 0.. {
            let try_sl = if attempt == 0 {
                p.sl
            } else {
                let (old, opts) = (self.old, self.opts);
                let others = self.layers.get_or_insert_with(|| layers_of(old, opts));
                match others
                    .iter()
                    .copied()
                    .filter(|&l| l != p.sl)
                    .nth(attempt - 1)
                {
                    Some(l) => l,
                    None => return false,
                }
            };
            let found = self.searcher.route_flow(
                self.f,
                &mut self.ent,
                self.list,
                &Flow {
                    src: p.h,
                    dst: p.d,
                    dlid: p.dlid,
                    sl: try_sl,
                    cached_sl: p.sl,
                    max_vl: self.max_vl,
                },
                &mut self.state,
                self.opts.turns,
            );
            if !found {
                continue;
            }
            if try_sl == p.sl {
                if let Some(v) = self.first_vl(p) {
                    self.routed_from.push((p.si0, p.sl, v));
                }
            } else {
                if let Some(ps) = self.path_sl.as_mut() {
                    ps.set_pair(p.slid, p.dlid, try_sl);
                    sl_changes.push((p.slid, p.sl));
                }
                self.stats.sls_changed += 1;
            }
            return true;
        }
        false
    }

    /// The new tables: the copy with the entries the paths set, its
    /// counts, verified when asked.
    fn into_outcome(
        self,
        copied: Copied,
        added0: u64,
        reorders0: u64,
    ) -> Result<Rerouted, DqrError> {
        let Copied {
            mut new,
            dropped,
            repaired,
        } = copied;
        let mut stats = self.stats;
        stats.entries_dropped = dropped;
        new.path_sl = self.path_sl;
        for &(si, dlid, port) in &self.searcher.set {
            new.lfts.set(si, dlid, port);
        }
        if let Some((src, dst)) = self.first_unrouted {
            return Err(DqrError::NoPath {
                unrouted: self.unrouted,
                src,
                dst,
            });
        }
        stats.switch_entries_changed = repaired.len() as u64;
        // Only entries a path set can differ (each set once): counting
        // them spares a pass over every switch for every destination.
        stats.entries_changed = self
            .searcher
            .set
            .iter()
            .filter(|&&(si, l, p)| self.old.lfts.get(si, l) != p)
            .count() as u64;
        stats.dependencies_added = self.list.added().saturating_sub(added0);
        stats.reorders = self.list.reorders().saturating_sub(reorders0);
        if self.opts.verify_result {
            verify_result(self.f, &new, self.list, &mut stats)?;
        }
        Ok(Rerouted {
            routing: new,
            stats,
            changed: self.changed,
            repaired,
        })
    }
}

/// The SLs the routing `r` uses, the layers a flow may move to.
fn layers_of(r: &Routing, opts: &Options) -> Vec<u8> {
    match &r.path_sl {
        Some(p) if opts.layers => {
            let seen = p.sls_used();
            (0..NUM_SLS as u8).filter(|&s| seen[s as usize]).collect()
        }
        _ => Vec::new(),
    }
}

/// What a reroute changed, for the update check.
struct Changes<'a> {
    scan: &'a Scan,
    links: &'a SwitchLinks,
    /// The destination LIDs whose flows changed, with their broken switches.
    changed: &'a [((Slot, u16), Vec<u32>)],
    /// The repaired entries toward switches.
    repaired: &'a [(u32, u16)],
}

/// Checks the update from `old` to `new` (every old/new mix toward the
/// destinations that changed). When the one-step update admits a cycle,
/// returns a drain stage: the old tables with the broken switches' entries
/// toward those destinations dropped, and the repaired routes toward
/// switches; old to drain and drain to new are then each checked.
fn check_update(
    f: &Fabric,
    old: &Routing,
    new: &Routing,
    list: &mut ChannelList,
    c: &Changes<'_>,
    stats: &mut Stats,
) -> Result<Option<Routing>, DqrError> {
    let Changes {
        scan,
        links,
        changed,
        repaired,
    } = *c;
    // Which entries toward each destination may differ between the
    // stages: those of its broken switches, unless the fault cut the
    // destination off (every entry dropped) or it is a switch (whose
    // column the repair and the drain stage set too).
    let changes: Vec<((Slot, u16), Changed)> = changed
        .iter()
        .map(|(d, b)| {
            let exact =
                !scan.dropped_lid[d.1 as usize] && f.kind(f.node_of(d.0)) != NodeKind::Switch;
            (
                *d,
                if exact {
                    Changed::Given(b)
                } else {
                    Changed::Compare
                },
            )
        })
        .collect();
    // A refused one-step update leaves the list as it was.
    if let Ok(n) = admit_transition(f, old, new, list, &changes) {
        stats.transition_dependencies = n;
        return Ok(None);
    }
    let mut d = old.clone();
    // The others are classified on the tables in force, their entries all
    // there (a dropped destination's included).
    let compared: Vec<u16> = changes
        .iter()
        .filter(|(_, c)| matches!(c, Changed::Compare))
        .map(|&((_, dlid), _)| dlid)
        .collect();
    let none_dropped = vec![false; scan.dropped_lid.len()];
    let mut compared_broken = links.broken(f, old, &compared, &none_dropped).into_iter();
    for &(dst, c) in &changes {
        let broken = match c {
            Changed::Given(broken) => broken.to_vec(),
            Changed::Compare => compared_broken.next().unwrap_or_default(),
        };
        for si in broken {
            d.lfts.set(si, dst.1, NO_PATH);
        }
    }
    // The repaired routes toward switches, the only switch entries `new`
    // changed (see `switch_columns_from`).
    for &(si, lid) in repaired {
        d.lfts.set(si, lid, new.lfts.get(si, lid));
    }
    stats.transition_dependencies = admit_transition(f, old, &d, list, &changes)?
        + admit_transition(f, &d, new, list, &changes)?;
    Ok(Some(d))
}
