//! `ibfabric-sl2vl.bin`: each distinct SL-to-VL table once, then per
//! switch a table index per (in, out) pair and per linked CA or router
//! port its index.

use super::Bin;
use crate::error::Error;
use crate::model::{Fabric, NONE, NodeKind, Slot};
use crate::tables::{NUM_SLS, Sl2Vl};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"IBFSL201";

/// Tables in order of first use, each with its index.
#[derive(Default)]
struct Dictionary {
    tables: Vec<[u8; NUM_SLS]>,
    index: HashMap<[u8; NUM_SLS], u16>,
}

impl Dictionary {
    fn add(&mut self, t: [u8; NUM_SLS]) -> std::io::Result<u16> {
        if let Some(&i) = self.index.get(&t) {
            return Ok(i);
        }
        let i = u16::try_from(self.tables.len())
            .map_err(|_| std::io::Error::other("more than 65,536 distinct SL-to-VL tables"))?;
        self.tables.push(t);
        self.index.insert(t, i);
        Ok(i)
    }
}

/// Linked CA and router ports by port GUID.
fn end_ports(f: &Fabric) -> Vec<(u64, Slot)> {
    let mut v: Vec<(u64, Slot)> = (0..f.num_nodes() as u32)
        .filter(|&n| f.kind(n) != NodeKind::Switch)
        .flat_map(|n| f.port_slots(n))
        .filter(|&s| f.remote(s) != NONE)
        .map(|s| (f.port_guid(s), s))
        .collect();
    v.sort_unstable();
    v
}

/// The file's bytes in memory (tests, fuzzing; sets are streamed).
pub fn write(f: &Fabric, t: &Sl2Vl) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    write_to(f, t, &mut out)?;
    Ok(out)
}

pub(crate) fn write_to(f: &Fabric, t: &Sl2Vl, w: &mut impl Write) -> std::io::Result<()> {
    let mut dict = Dictionary::default();
    let sws = super::super::switches_by_guid(f);
    let mut body = Vec::new();
    for &n in &sws {
        let Some(si) = f.switch_index(n) else {
            continue;
        };
        let np = f.num_ports(n);
        body.extend_from_slice(&f.guid(n).to_le_bytes());
        body.extend_from_slice(&[np, 0]);
        let mut bits = vec![0u8; (np as usize + 1).div_ceil(8)];
        for o in 1..=np {
            if f.remote(f.slot(n, o)) != NONE {
                bits[o as usize / 8] |= 1 << (o % 8);
            }
        }
        body.extend_from_slice(&bits);
        for i in 0..=np {
            for o in 0..=np {
                let k = dict.add(t.switch_row(si, i, o))?;
                body.extend_from_slice(&k.to_le_bytes());
            }
        }
    }
    let ports = end_ports(f);
    let mut tail = Vec::with_capacity(4 + ports.len() * 12);
    tail.extend_from_slice(&(ports.len() as u32).to_le_bytes());
    for (g, s) in ports {
        let k = dict.add(t.port_row(s))?;
        tail.extend_from_slice(&g.to_le_bytes());
        tail.extend_from_slice(&k.to_le_bytes());
        tail.extend_from_slice(&[0, 0]);
    }
    w.write_all(MAGIC)?;
    w.write_all(&(dict.tables.len() as u32).to_le_bytes())?;
    for t in &dict.tables {
        w.write_all(t)?;
    }
    w.write_all(&(sws.len() as u32).to_le_bytes())?;
    w.write_all(&body)?;
    w.write_all(&tail)
}

pub fn parse(f: &Fabric, b: &[u8], file: &Path) -> Result<Sl2Vl, Error> {
    let mut r = Bin::open(b, file, MAGIC)?;
    let n = r.count(NUM_SLS, "the table count")?;
    let mut tables = Vec::with_capacity(n);
    for _ in 0..n {
        let at = r.at();
        let row = r.take(NUM_SLS, "a table")?;
        if let Some(k) = row.iter().position(|&v| v > 15) {
            return Err(r.bad(at + k, format!("SL {k}: VL {} above 15", row[k])));
        }
        let mut t = [0; NUM_SLS];
        t.copy_from_slice(row);
        tables.push(t);
    }
    let table = |r: &mut Bin, what: &'static str| -> Result<[u8; NUM_SLS], Error> {
        let at = r.at();
        let k = r.u16(what)? as usize;
        tables
            .get(k)
            .copied()
            .ok_or_else(|| r.bad(at, format!("table {k} of {}", tables.len())))
    };
    let switches = super::Switches::of(f);
    let mut out = Sl2Vl::new(f);
    let nsw = r.count(10, "the switch count")?;
    let mut last = None;
    for _ in 0..nsw {
        let si = r.next_switch(&switches, &mut last)?;
        let at_np = r.at();
        let np = r.u8("a port count")?;
        let want = f.num_ports(f.switches()[si as usize]);
        if np != want {
            return Err(r.bad(
                at_np,
                format!("{np} ports; the topology's switch has {want}"),
            ));
        }
        r.zero(1, "the byte after the port count")?;
        // Which out ports are linked is the topology's to say; the bitmap
        // is for readers without one (the plugin).
        r.take((np as usize + 1).div_ceil(8), "the linked ports")?;
        for i in 0..=np {
            for o in 0..=np {
                let t = table(&mut r, "a table index")?;
                out.set_switch_row(si, i, o, t);
            }
        }
    }
    let index = f.port_guid_index();
    let np = r.count(12, "the port count")?;
    let mut last = None;
    for _ in 0..np {
        let (at, g) = r.next_guid(&mut last, "port GUID")?;
        let t = table(&mut r, "a table index")?;
        r.zero(2, "the bytes after a table index")?;
        match index.get(&g) {
            Some(&s) if f.kind(f.node_of(s)) != NodeKind::Switch => out.set_port_row(s, t),
            _ => {
                return Err(r.bad(
                    at,
                    format!(
                        "port GUID 0x{g:016x} is not a linked CA or router port of the topology"
                    ),
                ));
            }
        }
    }
    r.end()?;
    Ok(out)
}

pub fn read(f: &Fabric, path: &Path) -> Result<Sl2Vl, Error> {
    parse(f, &super::read_bytes(path)?, path)
}
