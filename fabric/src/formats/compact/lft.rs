//! `ibfabric-lfts.bin`: the LID map, then per switch (by GUID) its LFT as
//! the switch holds it, a port byte per LID in 64-LID blocks.

use super::Bin;
use crate::error::Error;
use crate::model::{Fabric, NodeKind, Slot};
use crate::tables::{Lfts, NO_PATH};
use std::io::Write;
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"IBFLFT01";
/// Flag bit: a drain stage, whose 255 entries are drops on purpose.
pub const FLAG_DRAIN: u8 = 1;
const BLOCK: usize = 64;

/// The GUID a port is named by in the LID map and the readers' index: a
/// switch by its node GUID (its port 0), an end port by its port GUID.
fn named_guid(f: &Fabric, s: Slot) -> u64 {
    let n = f.node_of(s);
    if f.kind(n) == NodeKind::Switch {
        f.guid(n)
    } else {
        f.port_guid(s)
    }
}

/// Every (port GUID, base LID, LMC) of `f`, sorted by GUID.
fn lid_map(f: &Fabric) -> Vec<(u64, u16, u8)> {
    let mut m: Vec<(u64, u16, u8)> = (1..=f.max_lid())
        .filter_map(|lid| f.lid_owner(lid).map(|s| (s, lid)))
        .filter(|&(s, lid)| f.lid_of_slot(s) == lid)
        .map(|(s, lid)| (named_guid(f, s), lid, f.lmc(s)))
        .collect();
    m.sort_unstable();
    m
}

/// The file's bytes in memory (tests, fuzzing; sets are streamed).
pub fn write(f: &Fabric, lfts: &Lfts, drain: bool) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = write_to(f, lfts, drain, &mut out);
    out
}

pub(crate) fn write_to(
    f: &Fabric,
    lfts: &Lfts,
    drain: bool,
    w: &mut impl Write,
) -> std::io::Result<()> {
    let max_lid = f.max_lid();
    let width = max_lid as usize + 1;
    let blocks = width.div_ceil(BLOCK);
    w.write_all(MAGIC)?;
    w.write_all(&[if drain { FLAG_DRAIN } else { 0 }, 0, 0, 0])?;
    w.write_all(&max_lid.to_le_bytes())?;
    w.write_all(&[0, 0])?;
    let map = lid_map(f);
    w.write_all(&(map.len() as u32).to_le_bytes())?;
    for (g, lid, lmc) in map {
        w.write_all(&g.to_le_bytes())?;
        w.write_all(&lid.to_le_bytes())?;
        w.write_all(&[lmc, 0])?;
    }
    let sws = super::super::switches_by_guid(f);
    w.write_all(&(sws.len() as u32).to_le_bytes())?;
    let mut row = vec![NO_PATH; blocks * BLOCK];
    for n in sws {
        let Some(si) = f.switch_index(n) else {
            continue;
        };
        w.write_all(&f.guid(n).to_le_bytes())?;
        w.write_all(&(blocks as u16).to_le_bytes())?;
        w.write_all(&[0, 0])?;
        let src = lfts.row(si);
        let k = src.len().min(width);
        row[..k].copy_from_slice(&src[..k]);
        row[k..].fill(NO_PATH);
        w.write_all(&row)?;
    }
    Ok(())
}

/// The LFTs in `b` (the bytes of `file`), read against `f`. Like
/// OpenSM's file loader, a LID the LID map names is moved to that port's
/// LID in `f`, so that a set taken under another LID assignment applies;
/// switches the file does not hold keep empty tables.
pub fn parse(f: &Fabric, b: &[u8], file: &Path) -> Result<Lfts, Error> {
    let mut r = Bin::open(b, file, MAGIC)?;
    let at = r.at();
    let flags = r.u8("the flags")?;
    if flags & !FLAG_DRAIN != 0 {
        return Err(r.bad(at, format!("unknown flags {flags:#04x}")));
    }
    r.zero(3, "the bytes after the flags")?;
    let max_lid = r.u16("the highest LID")?;
    r.zero(2, "the bytes after the highest LID")?;
    let remap = read_lid_map(f, &mut r, max_lid)?;
    let width = max_lid as usize + 1;
    let blocks = width.div_ceil(BLOCK);
    let n = r.count(12 + blocks * BLOCK, "the switch count")?;
    let switches = super::Switches::of(f);
    let mut lfts = Lfts::for_fabric(f);
    let identity = remap.iter().enumerate().all(|(l, &t)| l == t as usize) && lfts.width() == width;
    let mut last = None;
    for _ in 0..n {
        let si = r.next_switch(&switches, &mut last)?;
        let at_b = r.at();
        let nb = r.u16("a switch's block count")? as usize;
        if nb != blocks {
            return Err(r.bad(
                at_b,
                format!("{nb} blocks, the highest LID {max_lid} needs {blocks}"),
            ));
        }
        r.zero(2, "the bytes after the block count")?;
        let at_row = r.at();
        let row = &r.take(blocks * BLOCK, "a switch's LFT")?[..width];
        let nports = f.num_ports(f.switches()[si as usize]);
        if let Some(k) = row.iter().position(|&p| p > nports && p != NO_PATH) {
            return Err(r.bad(
                at_row + k,
                format!(
                    "LID {k}: out port {} exceeds the switch's {nports} ports",
                    row[k]
                ),
            ));
        }
        if identity {
            lfts.row_mut(si).copy_from_slice(row);
            continue;
        }
        for (lid, &p) in row.iter().enumerate().filter(|(_, p)| **p != NO_PATH) {
            let to = remap[lid] as usize;
            if to >= lfts.width() {
                return Err(r.bad(
                    at_row + lid,
                    format!(
                        "LID {to} is above the topology's highest LID {}",
                        f.max_lid()
                    ),
                ));
            }
            lfts.set(si, to as u16, p);
        }
    }
    r.end()?;
    Ok(lfts)
}

/// The LID map, as where each file LID lands in `f`.
fn read_lid_map(f: &Fabric, r: &mut Bin, max_lid: u16) -> Result<Vec<u16>, Error> {
    let n = r.count(12, "the LID map's count")?;
    let index = f.port_guid_index();
    let mut remap: Vec<u16> = (0..=max_lid).collect();
    let mut named = vec![false; max_lid as usize + 1];
    let mut last = None;
    for _ in 0..n {
        let (at, g) = r.next_guid(&mut last, "port GUID")?;
        let lid = r.u16("a LID")?;
        let lmc_at = r.at();
        let lmc = r.u8("the LMC")?;
        r.zero(1, "the byte after the LMC")?;
        if lmc > 7 || !lid.is_multiple_of(1 << lmc) {
            return Err(r.bad(
                lmc_at,
                format!("LMC {lmc} of LID {lid}: above 7, or the LID is not aligned to 2^LMC"),
            ));
        }
        // The port's 2^LMC LIDs, each moved to the LID at its offset in
        // the port's range in `f`.
        let end = lid as usize + (1usize << lmc) - 1;
        if lid == 0 || end > max_lid as usize || named[lid as usize..=end].iter().any(|&x| x) {
            return Err(r.bad(
                at + 8,
                format!("LID {lid} (LMC {lmc}): 0, above {max_lid} or named twice"),
            ));
        }
        named[lid as usize..=end].fill(true);
        if let Some(&s) = index.get(&g) {
            if f.lmc(s) != lmc {
                return Err(r.bad(
                    lmc_at,
                    format!(
                        "port {g:#018x} has LMC {lmc} here and {} in the topology",
                        f.lmc(s)
                    ),
                ));
            }
            for l in lid..=end as u16 {
                remap[l as usize] = f.lid_like(s, l);
            }
        }
    }
    Ok(remap)
}

pub fn read(f: &Fabric, path: &Path) -> Result<Lfts, Error> {
    parse(f, &super::read_bytes(path)?, path)
}
