//! `opensm-sl2vl.dump` as OpenSM's `dump_sl2vl_tbl` writes it: one block per
//! port in port-GUID order; switches list every (in, out) pair for each
//! connected out port, CAs and routers one `0 0` row per port.
//!
//! ```text
//! Switch 0x0002000000000001, base LID 2, "s0_0"
//! #in out : 0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15
//! #--------------------------------------------------------
//! 0   1   : 0  1  0  1  0  1  0  1  4  5  4  5  4  5  4  5
//! ```

use super::{is_end_node, parse_hex_u64, read_file};
use crate::error::{Error, ParseError};
use crate::model::{Fabric, NONE, NodeKind, Slot};
use crate::tables::{NUM_SLS, Sl2Vl};
use std::fmt::Write as _;
use std::path::Path;

const HEADER: &str = "#in out : 0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15";
const SEPARATOR: &str = "#--------------------------------------------------------";

fn row(out: &mut String, inp: u8, outp: u8, vls: &[u8; NUM_SLS]) {
    let _ = write!(out, "{inp:<3} {outp:<3} :");
    for v in vls {
        let _ = write!(out, " {v:<2}");
    }
    out.push('\n');
}

pub fn write(f: &Fabric, t: &Sl2Vl) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = write_to(f, t, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn write_to(f: &Fabric, t: &Sl2Vl, w: &mut impl std::io::Write) -> std::io::Result<()> {
    // (port guid, slot) for every addressable port, in OpenSM's order.
    let mut ports: Vec<(u64, Slot)> = Vec::new();
    for n in 0..f.num_nodes() as u32 {
        if f.kind(n) == NodeKind::Switch {
            ports.push((f.guid(n), f.slot(n, 0)));
        } else {
            ports.extend(
                f.port_slots(n)
                    .filter(|&s| f.remote(s) != NONE)
                    .map(|s| (f.port_guid(s), s)),
            );
        }
    }
    ports.sort_unstable();
    let mut out = String::new();
    for (guid, slot) in ports {
        out.clear();
        let n = f.node_of(slot);
        let _ = writeln!(
            out,
            "{} 0x{guid:016x}, base LID {}, \"{}\"\n{HEADER}\n{SEPARATOR}",
            f.kind(n).opensm_str(),
            f.lid_of_slot(slot),
            f.desc(n)
        );
        if let Some(si) = f.switch_index(n) {
            let np = f.num_ports(n);
            for o in 1..=np {
                if f.remote(f.slot(n, o)) == NONE {
                    continue;
                }
                for i in 0..=np {
                    row(&mut out, i, o, &t.switch_row(si, i, o));
                }
            }
        } else {
            row(&mut out, 0, 0, &t.port_row(slot));
        }
        w.write_all(out.as_bytes())?;
    }
    Ok(())
}

/// Reads `opensm-sl2vl.dump`, or the concatenated output of infiniband-diags'
/// `smpquery sl2vl LID [OUT]` (one `# SL2VL table: Lid N` block per query,
/// rows `ports: in 3, out 1: | 0| 1|...`), which is how the tables a running
/// fabric holds are read back. The LIDs of that form are the fabric's own.
pub fn parse(f: &Fabric, text: &str, file: &Path) -> Result<Sl2Vl, Error> {
    if text.contains("# SL2VL table:") {
        return parse_smpquery(f, text, file);
    }
    let err = |line: usize, cause: String| Error::Parse(ParseError::new(file, line, cause));
    let guid_index = f.port_guid_index();
    let mut t = Sl2Vl::new(f);
    let mut current: Option<Slot> = None;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(p) = line.find(" 0x") {
            let head = &line[..p];
            if matches!(head, "Switch" | "Channel Adapter" | "Router") {
                let g = line[p + 1..]
                    .split(',')
                    .next()
                    .and_then(parse_hex_u64)
                    .ok_or_else(|| err(ln, "cannot parse port GUID".into()))?;
                let slot = *guid_index.get(&g).ok_or_else(|| {
                    err(ln, format!("port GUID 0x{g:016x} is not in the topology"))
                })?;
                current = Some(slot);
                continue;
            }
        }
        let slot = current.ok_or_else(|| err(ln, "SL2VL row before any port header".into()))?;
        let (ports, vls) = line
            .split_once(':')
            .ok_or_else(|| err(ln, format!("expected 'in out : 16 VLs', got '{line}'")))?;
        let mut pw = ports.split_whitespace();
        let mut num = |what: &str| -> Result<u8, Error> {
            let w = pw
                .next()
                .ok_or_else(|| err(ln, format!("missing {what} port")))?;
            w.parse()
                .map_err(|_| err(ln, format!("bad {what} port '{w}'")))
        };
        let inp = num("in")?;
        let outp = num("out")?;
        let mut row = [0u8; NUM_SLS];
        let mut count = 0;
        for (k, w) in vls.split_whitespace().enumerate() {
            if k >= NUM_SLS {
                return Err(err(ln, "more than 16 VLs in a row".into()));
            }
            let v: u8 = w.parse().map_err(|_| err(ln, format!("bad VL '{w}'")))?;
            if v > 15 {
                return Err(err(ln, format!("VL {v} out of range 0..=15")));
            }
            row[k] = v;
            count += 1;
        }
        if count != NUM_SLS {
            return Err(err(ln, format!("expected 16 VLs, found {count}")));
        }
        place(f, &mut t, slot, inp, outp, row).map_err(|c| err(ln, c))?;
    }
    Ok(t)
}

fn parse_smpquery(f: &Fabric, text: &str, file: &Path) -> Result<Sl2Vl, Error> {
    let err = |line: usize, cause: String| Error::Parse(ParseError::new(file, line, cause));
    let mut t = Sl2Vl::new(f);
    let mut current: Option<Slot> = None;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix("# SL2VL table:") {
            // "Lid 2" or "DR path ...": only LIDs name a port without a walk.
            let lid = rest
                .trim()
                .strip_prefix("Lid ")
                .and_then(|l| l.split_whitespace().next())
                .and_then(|l| l.parse::<u16>().ok())
                .ok_or_else(|| err(ln, format!("expected '# SL2VL table: Lid N', got '{line}'")))?;
            let slot = f
                .lid_owner(lid)
                .ok_or_else(|| err(ln, format!("LID {lid} is not assigned in the topology")))?;
            current = Some(slot);
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let rest = line
            .strip_prefix("ports: in")
            .ok_or_else(|| err(ln, format!("unexpected line '{line}'")))?;
        let slot = current.ok_or_else(|| err(ln, "SL2VL row before any table header".into()))?;
        let (ports, vls) = rest
            .split_once(": |")
            .ok_or_else(|| err(ln, "expected 'ports: in I, out O: | v| ...'".into()))?;
        let (inp, outp) = ports
            .split_once(", out")
            .and_then(|(a, b)| Some((a.trim().parse::<u8>().ok()?, b.trim().parse::<u8>().ok()?)))
            .ok_or_else(|| err(ln, format!("bad port pair '{ports}'")))?;
        let mut row = [0u8; NUM_SLS];
        let cells: Vec<&str> = vls
            .split('|')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        if cells.len() != NUM_SLS {
            return Err(err(ln, format!("expected 16 VLs, found {}", cells.len())));
        }
        for (k, c) in cells.iter().enumerate() {
            row[k] = c
                .parse::<u8>()
                .ok()
                .filter(|v| *v <= 15)
                .ok_or_else(|| err(ln, format!("bad VL '{c}'")))?;
        }
        place(f, &mut t, slot, inp, outp, row).map_err(|c| err(ln, c))?;
    }
    Ok(t)
}

/// Puts one row where it belongs: a CA's or router's port table, or a
/// switch's (in, out) pair.
fn place(
    f: &Fabric,
    t: &mut Sl2Vl,
    slot: Slot,
    inp: u8,
    outp: u8,
    row: [u8; NUM_SLS],
) -> Result<(), String> {
    let n = f.node_of(slot);
    if is_end_node(f, n) {
        t.set_port_row(slot, row);
        return Ok(());
    }
    let np = f.num_ports(n);
    if inp > np || outp > np {
        return Err(format!(
            "port pair {inp}/{outp} exceeds the switch's {np} ports"
        ));
    }
    let si = f
        .switch_index(n)
        .ok_or_else(|| "internal: switch without index".to_string())?;
    t.set_switch_row(si, inp, outp, row);
    Ok(())
}

pub fn read(f: &Fabric, path: &Path) -> Result<Sl2Vl, Error> {
    parse(f, &read_file(path)?, path)
}
