//! The switch-to-switch links of a fabric after a fault, as a reroute reads
//! them: which switches forward into which, the switches whose route
//! toward a destination crossed the fault (found backwards from the
//! entries into dead ports), and the repair of the routes toward switches.

use crate::model::{Fabric, NONE, Slot};
use crate::tables::Routing;

/// Gives every switch whose route toward another switch's LID crossed the
/// fault an entry that arrives again; routes that still arrive stay. The
/// repair grows outward from the switches whose route arrives: a broken
/// switch next to one forwards to it, the others to a switch repaired
/// before them, so every repaired chain ends on a route that arrives, and
/// such a route passes no repaired switch (it would not have arrived):
/// no loop forms. A repaired route may be longer than the shortest; these
/// routes carry management packets (VL 15, outside the dependency graph).
/// Returns the entries changed (switch index, LID).
pub(super) fn repair_switch_lids(
    f: &Fabric,
    links: &SwitchLinks,
    r: &mut Routing,
    affected_lid: &[bool],
) -> Vec<(u32, u16)> {
    let n = f.switches().len();
    // The destination switches with a link left, by a slot of theirs (any
    // slot of a switch addresses its LID; port 0's entry is 0, so routes
    // end there).
    let dests: Vec<Slot> = f
        .switches()
        .iter()
        .enumerate()
        .filter(|&(di, &dsw)| {
            let dlid = f.switch_lid(dsw);
            dlid != 0
                && affected_lid.get(dlid as usize).copied().unwrap_or(false)
                && links.has_link(di as u32)
        })
        .map(|(_, &dsw)| f.slot(dsw, 0))
        .collect();
    let none = vec![false; affected_lid.len()];
    let dlids: Vec<u16> = dests.iter().map(|&d| f.lid_of_slot(d)).collect();
    let broken_all = links.broken(f, r, &dlids, &none);
    let mut changed = Vec::new();
    let mut broken = vec![false; n];
    let mut queue = std::collections::VecDeque::new();
    for (&d, b) in dests.iter().zip(broken_all) {
        if b.is_empty() {
            continue;
        }
        let dlid = f.lid_of_slot(d);
        for &si in &b {
            broken[si as usize] = true;
        }
        // Outward from the switches whose route arrives: a broken switch
        // next to one forwards to it, and the others to a switch repaired
        // before them, so every repaired route ends on one that arrives.
        for &si in &b {
            if let Some(p) = links
                .out_of(f, si)
                .find_map(|(p, y)| (!broken[y as usize]).then_some(p))
            {
                r.lfts.set(si, dlid, p);
                changed.push((si, dlid));
                broken[si as usize] = false;
                queue.push_back(si);
            }
        }
        while let Some(x) = queue.pop_front() {
            for &(y, py) in links.links_into(x) {
                if broken[y as usize] {
                    r.lfts.set(y, dlid, py);
                    changed.push((y, dlid));
                    broken[y as usize] = false;
                    queue.push_back(y);
                }
            }
        }
        // Those left have no way to the destination on the fabric now.
        for &si in &b {
            broken[si as usize] = false;
        }
    }
    changed
}

/// The switch-to-switch links of a fabric as the backward searches want
/// them: per switch its dead ports, and the links into it.
pub(super) struct SwitchLinks {
    /// Switches with a port whose link is down, and those ports
    /// ([`crate::tables::NO_PATH`] among them when a switch with no entry
    /// counts as broken: [`super::Options::reconnect`]).
    dead: Vec<(u32, Vec<u8>)>,
    /// Per switch `x`, `into[into_off[x]..into_off[x + 1]]`: the links
    /// into it as (switch at the far end, that switch's port).
    into_off: Vec<u32>,
    into: Vec<(u32, u8)>,
}

impl SwitchLinks {
    pub(super) fn new(f: &Fabric, no_entry_is_dead: bool) -> Self {
        let n = f.switches().len();
        let mut dead = Vec::new();
        let mut by_target: Vec<Vec<(u32, u8)>> = vec![Vec::new(); n];
        for (si, &sw) in f.switches().iter().enumerate() {
            let mut d = Vec::new();
            for p in 1..=f.num_ports(sw) {
                let rem = f.remote(f.slot(sw, p));
                if rem == NONE {
                    d.push(p);
                } else if let Some(x) = f.switch_index(f.node_of(rem)) {
                    by_target[x as usize].push((si as u32, p));
                }
            }
            if no_entry_is_dead {
                d.push(crate::tables::NO_PATH);
            }
            if !d.is_empty() {
                dead.push((si as u32, d));
            }
        }
        let mut into_off = vec![0u32; n + 1];
        let mut into = Vec::new();
        for (x, v) in by_target.into_iter().enumerate() {
            into.extend(v);
            into_off[x + 1] = into.len() as u32;
        }
        Self {
            dead,
            into_off,
            into,
        }
    }

    fn links_into(&self, x: u32) -> &[(u32, u8)] {
        &self.into[self.into_off[x as usize] as usize..self.into_off[x as usize + 1] as usize]
    }

    fn has_link(&self, x: u32) -> bool {
        !self.links_into(x).is_empty()
    }

    /// The linked ports of switch `si` toward other switches, as (port,
    /// switch index).
    fn out_of<'a>(&self, f: &'a Fabric, si: u32) -> impl Iterator<Item = (u8, u32)> + use<'a> {
        let sw = f.switches()[si as usize];
        (1..=f.num_ports(sw)).filter_map(move |p| {
            let rem = f.remote(f.slot(sw, p));
            (rem != NONE)
                .then(|| f.switch_index(f.node_of(rem)))
                .flatten()
                .map(|y| (p, y))
        })
    }

    /// Per destination of `dests`, the switches whose route toward it
    /// crosses a link that is down, in switch order: found backwards from
    /// the switches whose entry points into a dead port, along the links
    /// whose far switch forwards into them (a few switches and their links
    /// per destination, where a forward walk would follow every switch's
    /// route). A destination the fault cut off (`dropped_lid`) has every
    /// switch. Exact when every route of `r` reached its destination before
    /// the fault (tables the gate let through); a switch whose entry led
    /// nowhere before keeps it, as it carried no flow.
    pub(super) fn broken(
        &self,
        f: &Fabric,
        r: &Routing,
        dlids: &[u16],
        dropped_lid: &[bool],
    ) -> Vec<Vec<u32>> {
        use rayon::prelude::*;
        let n = f.switches().len();
        dlids
            .par_chunks(64)
            .flat_map_iter(|chunk| {
                let mut scratch = (vec![false; n], Vec::new());
                chunk
                    .iter()
                    .map(|&dlid| self.broken_toward(r, dlid, dropped_lid, &mut scratch))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// [`Self::broken`] for the destination `dlid`, with the scratch
    /// (switches seen, stack) of the caller's chunk, left clean.
    fn broken_toward(
        &self,
        r: &Routing,
        dlid: u16,
        dropped_lid: &[bool],
        (seen, stack): &mut (Vec<bool>, Vec<u32>),
    ) -> Vec<u32> {
        if dropped_lid[dlid as usize] {
            // Every entry dropped: no route reaches it.
            return (0..seen.len() as u32).collect();
        }
        for (si, ports) in &self.dead {
            let e = r.lfts.get(*si, dlid);
            if ports.contains(&e) && !seen[*si as usize] {
                seen[*si as usize] = true;
                stack.push(*si);
            }
        }
        let mut out = Vec::new();
        while let Some(x) = stack.pop() {
            out.push(x);
            for &(y, py) in self.links_into(x) {
                if !seen[y as usize] && r.lfts.get(y, dlid) == py {
                    seen[y as usize] = true;
                    stack.push(y);
                }
            }
        }
        for &x in &out {
            seen[x as usize] = false;
        }
        out.sort_unstable();
        out
    }
}
