//! `opensm-lfts.dump`, byte for byte as OpenSM's `dump_ucast_lfts` writes it
//! and as `opensm -R file -U FILE` reads it:
//!
//! ```text
//! Unicast lids [0-18] of switch Lid 2 guid 0x0002000000000001 ('s0_0'):
//! 0x0001 005 # Channel Adapter portguid 0x0001000000000011: 'h0_0_0'
//! 18 lids dumped
//! ```
//! Switches appear in GUID order; LIDs without a route are omitted.

use super::{Lines, open_file, parse_hex_u64, switches_by_guid};
use crate::error::{Error, ParseError};
use crate::model::Fabric;
use crate::tables::{Lfts, NO_PATH};
use rayon::prelude::*;
use std::io::{BufRead, Write};
use std::path::Path;

/// Renders the dump into memory (small fabrics, tests).
pub fn write(f: &Fabric, lfts: &Lfts) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail, and every byte is ASCII or comes from
    // UTF-8 descriptions.
    let _ = write_to(f, lfts, false, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Streams the dump. A Dragonfly with 16k HCAs gives a 2.5 GB file, so
/// switches are rendered in parallel batches and written in GUID order
/// without holding the whole text.
///
/// `explicit_drops`: write the entries that drop traffic for a connected
/// end port as `255` (OpenSM's no-path value) instead of leaving the row
/// out, so the OpenSM plugin tells a reroute's drain stage from a set
/// computed for another fabric. OpenSM's own file loader refuses port 255,
/// so only drain stages carry them.
pub(crate) fn write_to(
    f: &Fabric,
    lfts: &Lfts,
    explicit_drops: bool,
    w: &mut impl Write,
) -> std::io::Result<()> {
    let max_lid = f.max_lid();
    // Row text is the same for every switch but for the port: "0x%04x " and
    // " # <label>\n" are built once per LID.
    let rows: Vec<(Vec<u8>, Vec<u8>)> = (0..=max_lid)
        .map(|lid| {
            let label = match f.lid_owner(lid) {
                Some(s) => {
                    let n = f.node_of(s);
                    format!(
                        " # {} portguid 0x{:016x}: '{}'\n",
                        f.kind(n).opensm_str(),
                        f.port_guid(s),
                        f.desc(n)
                    )
                }
                None => " # unknown node and type\n".to_string(),
            };
            (format!("0x{lid:04x} ").into_bytes(), label.into_bytes())
        })
        .collect();
    let explicit_drop: Vec<bool> = (0..=max_lid)
        .map(|lid| {
            explicit_drops
                && f.lid_owner(lid).is_some_and(|s| {
                    f.kind(f.node_of(s)) != crate::model::NodeKind::Switch
                        && f.remote(s) != crate::model::NONE
                })
        })
        .collect();
    let order = switches_by_guid(f);
    for batch in order.chunks(64) {
        let texts: Vec<Vec<u8>> = batch
            .par_iter()
            .map(|&sw| {
                let mut out = Vec::with_capacity(rows.len() * 64);
                let Some(si) = f.switch_index(sw) else {
                    return out;
                };
                out.extend_from_slice(
                    format!(
                        "Unicast lids [0-{max_lid}] of switch Lid {} guid 0x{:016x} ('{}'):\n",
                        f.switch_lid(sw),
                        f.guid(sw),
                        f.desc(sw)
                    )
                    .as_bytes(),
                );
                let nports = f.num_ports(sw);
                for ((port, (prefix, label)), &drop) in
                    lfts.row(si).iter().zip(&rows).zip(&explicit_drop)
                {
                    let port = *port;
                    if (port == NO_PATH && !drop) || (port > nports && port != NO_PATH) {
                        continue;
                    }
                    out.extend_from_slice(prefix);
                    out.extend_from_slice(&[
                        b'0' + port / 100,
                        b'0' + port / 10 % 10,
                        b'0' + port % 10,
                    ]);
                    out.extend_from_slice(label);
                }
                out.extend_from_slice(format!("{max_lid} lids dumped\n").as_bytes());
                out
            })
            .collect();
        for t in texts {
            w.write_all(&t)?;
        }
    }
    Ok(())
}

/// Reads an LFT dump against the fabric: OpenSM's `opensm-lfts.dump`, or
/// what infiniband-diags' `dump_lfts` (`dump_fts`, `ibroute`) read from the
/// switches (`0x0001 003 : (Switch portguid 0x...: 'desc')`), so the tables a
/// running fabric holds can be verified. As OpenSM's file loader does, a row
/// whose comment names a known `portguid` is remapped to that port's LID in
/// the fabric, so dumps taken under another LID assignment still apply.
/// Switches missing from the file keep empty tables.
pub fn parse(f: &Fabric, input: impl BufRead, file: &Path) -> Result<Lfts, Error> {
    let err = |line: usize, cause: String| Error::Parse(ParseError::new(file, line, cause));
    let guid_index = f.port_guid_index();
    let mut lfts = Lfts::for_fabric(f);
    let mut current: Option<(u32, u8)> = None;
    // Where each switch's block began: a second block for one switch
    // (two dumps concatenated, an edit gone wrong) would silently win.
    let mut seen: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    // Per LID of this block: the file LID that set it, stamped by block.
    // With LMC a port's file LIDs move to the same offsets here; a dump
    // with more LIDs per port than the topology's LMC would land two on
    // one LID, and the second would silently win.
    let mut set_by: Vec<(u32, u16)> = vec![(0, 0); lfts.width()];
    let mut block = 0u32;
    let mut lines = Lines::new(input, file);
    while let Some((ln, line)) = lines.next_line()? {
        if line.starts_with("Unicast lids") {
            let g = line
                .find(" guid 0x")
                .map(|p| &line[p + 8..])
                .and_then(|r| r.split_whitespace().next())
                .and_then(parse_hex_u64)
                .ok_or_else(|| {
                    err(
                        ln,
                        "cannot parse switch GUID in 'Unicast lids' header".into(),
                    )
                })?;
            let node = f
                .find_node_by_guid(g)
                .ok_or_else(|| err(ln, format!("switch GUID 0x{g:016x} is not in the topology")))?;
            let si = f.switch_index(node).ok_or_else(|| {
                err(
                    ln,
                    format!("GUID 0x{g:016x} is not a switch in the topology"),
                )
            })?;
            if let Some(first) = seen.insert(si, ln) {
                return Err(err(
                    ln,
                    format!(
                        "a second block for switch 0x{g:016x} (the first began at line {first})"
                    ),
                ));
            }
            current = Some((si, f.num_ports(node)));
            block += 1;
            continue;
        }
        if line.starts_with("Multicast mlids") {
            return Err(err(
                ln,
                "this is a multicast dump, not a unicast LFT dump".into(),
            ));
        }
        // infiniband-diags' dump_lfts/dump_fts/ibroute: column titles,
        // "N valid lids dumped", and the script's deprecation notice.
        if line.ends_with("lids dumped")
            || line.starts_with("Lid  Out")
            || line.starts_with("Port     Info")
            || line.starts_with("*** WARNING ***")
        {
            continue;
        }
        if let Some(rest) = line.strip_prefix("0x") {
            let (si, nports) =
                current.ok_or_else(|| err(ln, "LFT row before any switch header".into()))?;
            let mut words = rest.split_whitespace();
            let lid_s = words.next().unwrap_or("");
            let mut lid = u16::from_str_radix(lid_s, 16)
                .map_err(|_| err(ln, format!("bad LID '0x{lid_s}'")))?;
            let port_s = words
                .next()
                .ok_or_else(|| err(ln, "missing out port".into()))?;
            let port: u8 = port_s
                .parse()
                .map_err(|_| err(ln, format!("bad out port '{port_s}'")))?;
            if port > nports && port != NO_PATH {
                return Err(err(
                    ln,
                    format!("out port {port} exceeds the switch's {nports} ports"),
                ));
            }
            let file_lid = lid;
            if let Some(p) = line.find("portguid 0x") {
                let g = line[p + 11..]
                    .split(|c: char| !c.is_ascii_hexdigit())
                    .next()
                    .and_then(parse_hex_u64);
                if let Some(&slot) = g.and_then(|g| guid_index.get(&g)) {
                    lid = f.lid_like(slot, lid);
                }
            }
            if lid as usize >= lfts.width() {
                return Err(err(
                    ln,
                    format!(
                        "LID {lid} is above the topology's highest LID {}",
                        f.max_lid()
                    ),
                ));
            }
            land(&mut set_by, block, lid, file_lid).map_err(|e| err(ln, e))?;
            lfts.set(si, lid, port);
            continue;
        }
        return Err(err(ln, format!("unexpected line '{line}'")));
    }
    Ok(lfts)
}

/// Records that file LID `file_lid` lands on `lid` in switch block
/// `block`; a different file LID already there is refused.
fn land(set_by: &mut [(u32, u16)], block: u32, lid: u16, file_lid: u16) -> Result<(), String> {
    match set_by[lid as usize] {
        (b, other) if b == block && other != file_lid => Err(format!(
            "LIDs {other} and {file_lid} of one port both land on LID {lid}: the dump has more LIDs per port than the topology's LMC"
        )),
        _ => {
            set_by[lid as usize] = (block, file_lid);
            Ok(())
        }
    }
}

pub fn read(f: &Fabric, path: &Path) -> Result<Lfts, Error> {
    parse(f, open_file(path)?, path)
}
