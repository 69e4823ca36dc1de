//! Hosts of a switch that every walk treats alike: the same path-SL row,
//! the same kind (CA or router port), and an in port whose SL-to-VL rows
//! agree for every out port and SL. Such hosts take the same route with
//! the same VLs toward every destination, so the walks go once per class
//! instead of once per host: with path SLs kept per source switch (the
//! layered engines), once per switch.

use crate::model::{Fabric, Slot};
use crate::tables::{NUM_SLS, Routing};

pub(super) struct Class {
    /// Members: `Classes::members[first..first + len]`, by LID.
    pub first: u32,
    pub len: u32,
    /// Path-SL row (`u32::MAX`: none, SL 0).
    pub row: u32,
    /// The in port of the first member (all members' give the same VLs).
    pub in_port: u8,
    pub router: bool,
}

pub(super) struct Classes {
    /// Per switch index: its classes are `class[off[si]..off[si + 1]]`.
    pub off: Vec<u32>,
    pub class: Vec<Class>,
    /// Indices into the context's hosts.
    pub members: Vec<u32>,
}

impl Classes {
    pub fn of_switch(&self, si: u32) -> &[Class] {
        &self.class[self.off[si as usize] as usize..self.off[si as usize + 1] as usize]
    }
    pub fn members(&self, c: &Class) -> &[u32] {
        &self.members[c.first as usize..(c.first + c.len) as usize]
    }
}

/// What makes two hosts of a switch alike: path-SL row, kind, and the
/// VLs their in port gives.
type Key = (u32, bool, Vec<u8>);

/// The VLs an in port gives, per out port and SL.
pub(super) fn vl_rows(f: &Fabric, r: &Routing, si: u32, in_port: u8) -> Vec<u8> {
    let Some(t) = r.sl2vl.as_ref() else {
        return Vec::new();
    };
    let np = f.num_ports(f.switches()[si as usize]);
    (0..=np)
        .flat_map(|o| (0..NUM_SLS as u8).map(move |sl| t.switch_vl(si, in_port, o, sl)))
        .collect()
}

/// Classes of `hosts` (grouped per switch by `host_off`), from each
/// host's (LID, in port, path-SL row) and kind.
pub(super) fn build(
    f: &Fabric,
    r: &Routing,
    hosts: &[Slot],
    host_off: &[u32],
    host_info: &[(u16, u8, u32)],
    host_router: &[bool],
) -> Classes {
    let mut out = Classes {
        off: vec![0],
        class: Vec::new(),
        members: Vec::with_capacity(hosts.len()),
    };
    for si in 0..host_off.len().saturating_sub(1) {
        let (a, b) = (host_off[si] as usize, host_off[si + 1] as usize);
        // (row, router, VL rows) and members, per class of this switch.
        let mut groups: Vec<(Key, Vec<u32>)> = Vec::new();
        for k in a..b {
            let (_, in_port, row) = host_info[k];
            let key = (row, host_router[k], vl_rows(f, r, si as u32, in_port));
            match groups.iter_mut().find(|g| g.0 == key) {
                Some(g) => g.1.push(k as u32),
                None => groups.push((key, vec![k as u32])),
            }
        }
        for ((row, router, _), mut members) in groups {
            members.sort_unstable_by_key(|&k| host_info[k as usize].0);
            out.class.push(Class {
                first: out.members.len() as u32,
                len: members.len() as u32,
                row,
                in_port: host_info[members[0] as usize].1,
                router,
            });
            out.members.extend(members);
        }
        out.off.push(out.class.len() as u32);
    }
    out
}
