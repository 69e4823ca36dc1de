//! Does a running fabric hold the tables we wrote? Compares a routing as
//! written (against the topology it was computed for) with the tables read
//! back from the switches and the subnet manager (against the topology
//! `ibnetdiscover` printed). Everything is matched by GUID and port number,
//! never by LID: the subnet manager may have assigned other LIDs than the
//! files carry. With LMC a port's LIDs are matched by their offset from the
//! port's base LID, which the subnet manager keeps (its ranges are aligned).

use crate::model::{Fabric, NONE, NodeKind};
use crate::tables::{NUM_SLS, PathSl, Routing, SL_NONE};
use serde::Serialize;

/// One table entry that differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "table", rename_all = "snake_case")]
pub enum Difference {
    /// A switch or port of the written tables that the live fabric lacks.
    Missing { what: String },
    Lft {
        switch: u64,
        destination: u64,
        /// The destination LID's offset from its port's base LID (LMC).
        #[serde(skip_serializing_if = "is_zero")]
        offset: u16,
        written: u8,
        live: u8,
    },
    Sl2Vl {
        guid: u64,
        in_port: u8,
        out_port: u8,
        written: [u8; NUM_SLS],
        live: [u8; NUM_SLS],
    },
    PathSl {
        source: u64,
        destination: u64,
        /// The LIDs' offsets from their ports' base LIDs (LMC).
        #[serde(skip_serializing_if = "is_zero")]
        source_offset: u16,
        #[serde(skip_serializing_if = "is_zero")]
        destination_offset: u16,
        written: u8,
        live: u8,
    },
}

fn is_zero(x: &u16) -> bool {
    *x == 0
}

/// A written LID: its port's GUID and its offset from the port's base LID.
#[derive(Clone, Copy)]
struct LidAt {
    guid: u64,
    offset: u16,
    lid: u16,
}

impl LidAt {
    /// `lid`, one of the LIDs of port `s` of `f`.
    fn of(f: &Fabric, s: crate::model::Slot, lid: u16) -> Self {
        Self {
            guid: f.port_guid(s),
            offset: lid - f.lid_of_slot(s),
            lid,
        }
    }
}

/// The live LID of (port GUID, offset); None when the live fabric lacks
/// the port or gives it fewer LIDs.
fn live_lid_of(
    lf: &Fabric,
    ports: &std::collections::HashMap<u64, crate::model::Slot>,
    at: LidAt,
) -> Option<u16> {
    let &s = ports.get(&at.guid)?;
    (at.offset < 1u16 << lf.lmc(s)).then(|| lf.lid_of_slot(s) + at.offset)
}

/// Every LID of the written fabric with its port and offset.
fn written_lids(wf: &Fabric) -> Vec<LidAt> {
    (1..=wf.max_lid())
        .filter_map(|lid| Some(LidAt::of(wf, wf.lid_owner(lid)?, lid)))
        .collect()
}

fn missing(at: LidAt) -> Difference {
    let what = if at.offset == 0 {
        format!("port 0x{:016x}", at.guid)
    } else {
        format!("LID offset {} of port 0x{:016x}", at.offset, at.guid)
    };
    Difference::Missing { what }
}

/// What was compared, and what differed (at most `limit` entries kept).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Comparison {
    pub lft_entries: u64,
    pub sl2vl_rows: u64,
    pub path_sls: u64,
    pub differences: u64,
    pub first: Vec<Difference>,
}

impl Comparison {
    pub fn matches(&self) -> bool {
        self.differences == 0
    }

    fn differ(&mut self, d: Difference, limit: usize) {
        self.differences += 1;
        if self.first.len() < limit {
            self.first.push(d);
        }
    }
}

/// Compares `written` (for fabric `wf`) with `live` (for fabric `lf`).
/// SL-to-VL tables and path SLs are compared when `written` has them;
/// without written path SLs every pair must live on SL 0. With
/// `sampled_paths`, pairs the live side has no SL for (not asked) are
/// skipped instead of counted as differences.
pub fn compare(
    wf: &Fabric,
    written: &Routing,
    lf: &Fabric,
    live: &Routing,
    sampled_paths: bool,
    limit: usize,
) -> Comparison {
    let mut c = Comparison::default();
    let live_ports = lf.port_guid_index();
    let live_lid = |at: LidAt| live_lid_of(lf, &live_ports, at);
    // Destinations: every LID of every addressable port of the written
    // fabric.
    let dests = written_lids(wf);
    for &sw in wf.switches() {
        let g = wf.guid(sw);
        let Some(lsw) = lf
            .find_node_by_guid(g)
            .filter(|&n| lf.kind(n) == NodeKind::Switch)
        else {
            c.differ(
                Difference::Missing {
                    what: format!("switch 0x{g:016x} ('{}')", wf.desc(sw)),
                },
                limit,
            );
            continue;
        };
        let (Some(wsi), Some(lsi)) = (wf.switch_index(sw), lf.switch_index(lsw)) else {
            continue;
        };
        let at = Switches {
            guid: g,
            written: (wf, sw, wsi),
            live: lsi,
        };
        compare_lfts(&mut c, &at, &dests, written, live, &live_lid, limit);
        if let (Some(wt), Some(lt)) = (&written.sl2vl, &live.sl2vl) {
            compare_switch_sl2vl(&mut c, &at, wt, lt, limit);
        }
    }
    if let (Some(wt), Some(lt)) = (&written.sl2vl, &live.sl2vl) {
        for &s in wf.endports() {
            let g = wf.port_guid(s);
            let Some(&ls) = live_ports.get(&g) else {
                continue;
            };
            c.sl2vl_rows += 1;
            let (w, l) = (wt.port_row(s), lt.port_row(ls));
            if w != l {
                c.differ(
                    Difference::Sl2Vl {
                        guid: g,
                        in_port: 0,
                        out_port: 0,
                        written: w,
                        live: l,
                    },
                    limit,
                );
            }
        }
    }
    compare_path_sls(&mut c, wf, written, live, &live_lid, sampled_paths, limit);
    c
}

/// One switch on both sides: its GUID, the written fabric with the
/// switch's index there, and the live switch's node and index.
struct Switches<'a> {
    guid: u64,
    written: (&'a Fabric, crate::model::NodeId, u32),
    live: u32,
}

/// A switch's LFT entry for every written destination, written against
/// live (destinations matched by port GUID).
fn compare_lfts(
    c: &mut Comparison,
    at: &Switches<'_>,
    dests: &[LidAt],
    written: &Routing,
    live: &Routing,
    live_lid: &dyn Fn(LidAt) -> Option<u16>,
    limit: usize,
) {
    let (wsi, lsi) = (at.written.2, at.live);
    for &d in dests {
        c.lft_entries += 1;
        let w = written.lfts.get(wsi, d.lid);
        let Some(ll) = live_lid(d) else {
            c.differ(missing(d), limit);
            continue;
        };
        let l = live.lfts.get(lsi, ll);
        if w != l {
            let d = Difference::Lft {
                switch: at.guid,
                destination: d.guid,
                offset: d.offset,
                written: w,
                live: l,
            };
            c.differ(d, limit);
        }
    }
}

/// A switch's SL-to-VL row for every (input, linked output) port pair.
fn compare_switch_sl2vl(
    c: &mut Comparison,
    at: &Switches<'_>,
    wt: &crate::tables::Sl2Vl,
    lt: &crate::tables::Sl2Vl,
    limit: usize,
) {
    let (wf, sw, wsi) = at.written;
    let lsi = at.live;
    let np = wf.num_ports(sw);
    for out in 1..=np {
        if wf.remote(wf.slot(sw, out)) == NONE {
            continue;
        }
        for inp in 0..=np {
            c.sl2vl_rows += 1;
            let (w, l) = (wt.switch_row(wsi, inp, out), lt.switch_row(lsi, inp, out));
            if w != l {
                let d = Difference::Sl2Vl {
                    guid: at.guid,
                    in_port: inp,
                    out_port: out,
                    written: w,
                    live: l,
                };
                c.differ(d, limit);
            }
        }
    }
}

/// The path SL of every pair of CA LIDs, written against live (end ports
/// matched by GUID, their LIDs by offset).
fn compare_path_sls(
    c: &mut Comparison,
    wf: &Fabric,
    written: &Routing,
    live: &Routing,
    live_lid: &dyn Fn(LidAt) -> Option<u16>,
    sampled_paths: bool,
    limit: usize,
) {
    let sl = |r: &Routing, s: u16, d: u16| match &r.path_sl {
        Some(p) => p.get(s, d),
        None => 0,
    };
    // (written, live LID) of every CA LID the live fabric has.
    let cas: Vec<(LidAt, u16)> = wf
        .end_lids()
        .iter()
        .filter(|&&(s, _)| wf.kind(wf.node_of(s)) == NodeKind::Ca)
        .filter_map(|&(s, lid)| {
            let at = LidAt::of(wf, s, lid);
            Some((at, live_lid(at)?))
        })
        .collect();
    for &(a, la) in &cas {
        for &(b, lb) in &cas {
            if a.guid == b.guid {
                continue;
            }
            let w = sl(written, a.lid, b.lid);
            let l = sl(live, la, lb);
            if sampled_paths && l == SL_NONE {
                continue;
            }
            c.path_sls += 1;
            if w != l {
                c.differ(
                    Difference::PathSl {
                        source: a.guid,
                        destination: b.guid,
                        source_offset: a.offset,
                        destination_offset: b.offset,
                        written: w,
                        live: l,
                    },
                    limit,
                );
            }
        }
    }
}

/// The written path SLs placed at the live fabric's LIDs (end ports
/// matched by GUID): for verifying switches' tables read back whole with
/// path SLs that were only sampled from the subnet manager (and found equal
/// to these).
pub fn path_sl_at(wf: &Fabric, written: &PathSl, lf: &Fabric) -> PathSl {
    let wports = wf.port_guid_index();
    // The written LID at the same offset of the same port, if any.
    let wlid = |s: crate::model::Slot, lid: u16| live_lid_of(wf, &wports, LidAt::of(lf, s, lid));
    let mut out = PathSl::new(lf.max_lid());
    let ends: Vec<(u16, Option<u16>)> = lf
        .end_lids()
        .iter()
        .map(|&(s, lid)| (lid, wlid(s, lid)))
        .collect();
    let mut row = vec![SL_NONE; out.width()];
    for &(lsrc, wsrc) in &ends {
        let Some(wsrc) = wsrc else { continue };
        row.fill(SL_NONE);
        for &(ldst, wdst) in &ends {
            if let Some(wdst) = wdst {
                row[ldst as usize] = written.get(wsrc, wdst);
            }
        }
        let i = out.push_row(&row);
        out.assign(lsrc, i);
    }
    out
}

/// The live tables to verify: as read back, except that path SLs the
/// read-back only sampled (`sampled_paths`) are the written ones placed at
/// the live LIDs ([`path_sl_at`]), which [`compare`] found equal where
/// asked.
pub fn verifiable(
    wf: &Fabric,
    written: &Routing,
    lf: &Fabric,
    live: &Routing,
    sampled_paths: bool,
) -> Routing {
    let mut r = live.clone();
    if let (true, Some(w)) = (sampled_paths, &written.path_sl) {
        r.path_sl = Some(path_sl_at(wf, w, lf));
    }
    r
}
