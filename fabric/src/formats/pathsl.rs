//! `path-sl.txt`: the SL each source must use per destination (OpenSM has no
//! file for it; it answers PathRecord queries instead).
//!
//! ```text
//! # comments
//! 0x0001 -0102...
//! ```
//! One line per source LID: the LID in hex, then one character per
//! destination LID `0..=max_lid`: a hex digit is the SL, `-` means no path.
//! A missing file means SL 0 for every pair.

use super::{Lines, open_file};
use crate::error::{Error, ParseError};
use crate::model::{Fabric, Slot};
use crate::tables::{PathSl, SL_NONE};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::Path;

const HEX: &[u8; 16] = b"0123456789abcdef";

pub fn write(f: &Fabric, p: &PathSl) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail; the text is ASCII.
    let _ = write_to(f, p, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn write_to(f: &Fabric, p: &PathSl, w: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        w,
        "# ibfabric path SLs: <source LID> <one char per destination LID 0..max: SL hex digit, '-' = no path>"
    )?;
    writeln!(w, "# max_lid {}", f.max_lid())?;
    let mut line = Vec::with_capacity(p.width() + 8);
    for src in p.sources() {
        let Some(row) = p.row_of(src) else { continue };
        line.clear();
        line.extend_from_slice(format!("0x{src:04x} ").as_bytes());
        line.extend(row.iter().map(|&sl| {
            if sl == SL_NONE || sl > 15 {
                b'-'
            } else {
                HEX[sl as usize]
            }
        }));
        line.push(b'\n');
        w.write_all(&line)?;
    }
    Ok(())
}

/// Reads `path-sl.txt`, or the SLs a subnet manager answered in PathRecords
/// as `ibfabric-pathrecord-sl` prints them (`0x<source GUID> 0x<destination
/// GUID> <SLID> <DLID> <SL>` per pair; pairs are placed by GUID).
pub fn parse(f: &Fabric, mut input: impl BufRead, file: &Path) -> Result<PathSl, Error> {
    // Peek without consuming: the first meaningful line tells the form.
    let head = input.fill_buf().map_err(|e| Error::io(file, e))?.to_vec();
    let first = String::from_utf8_lossy(&head)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().count() == 5)
        .unwrap_or(false);
    if first {
        return parse_records(f, input, file);
    }
    parse_rows(f, input, file)
}

fn parse_records(f: &Fabric, input: impl BufRead, file: &Path) -> Result<PathSl, Error> {
    let err = |line: usize, cause: String| Error::Parse(ParseError::new(file, line, cause));
    let guid_index = f.port_guid_index();
    let w = f.max_lid() as usize + 1;
    let mut rows: HashMap<u16, Vec<u8>> = HashMap::new();
    // Per port: which file LID landed on which of its LIDs here. With LMC
    // a record's LIDs move to the same offsets in the topology; two file
    // LIDs of one port landing on one LID mean more LIDs per port than
    // the topology's LMC, and the second would silently win.
    let mut landed: HashMap<Slot, Vec<(u16, u16)>> = HashMap::new();
    let mut lines = Lines::new(input, file);
    while let Some((ln, line)) = lines.next_line()? {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [sg, dg, slid, dlid, sl] = words.as_slice() else {
            return Err(err(
                ln,
                "expected '0x<source GUID> 0x<destination GUID> <SLID> <DLID> <SL>'".into(),
            ));
        };
        let mut lid_of = |g: &str, lid: &str| -> Result<u16, Error> {
            let guid = super::parse_hex_u64(g).ok_or_else(|| err(ln, format!("bad GUID '{g}'")))?;
            let slot = *guid_index.get(&guid).ok_or_else(|| {
                err(
                    ln,
                    format!("port GUID 0x{guid:016x} is not in the topology"),
                )
            })?;
            // The LID's offset within the port's LMC range; the base is
            // the port's LID in the topology.
            let lid: u16 = lid
                .parse()
                .map_err(|_| err(ln, format!("bad LID '{lid}' (expected a decimal number)")))?;
            let here = f.lid_like(slot, lid);
            let seen = landed.entry(slot).or_default();
            match seen.iter().find(|&&(h, _)| h == here) {
                Some(&(_, other)) if other != lid => Err(err(
                    ln,
                    format!(
                        "LIDs {other} and {lid} of port 0x{guid:016x} both land on LID {here}: the records have more LIDs per port than the topology's LMC"
                    ),
                )),
                Some(_) => Ok(here),
                None => {
                    seen.push((here, lid));
                    Ok(here)
                }
            }
        };
        let s = lid_of(sg, slid)?;
        let d = lid_of(dg, dlid)?;
        let sl: u8 = sl
            .parse()
            .ok()
            .filter(|v| *v <= 15)
            .ok_or_else(|| err(ln, format!("bad SL '{sl}'")))?;
        rows.entry(s).or_insert_with(|| vec![SL_NONE; w])[d as usize] = sl;
    }
    let mut p = PathSl::new(f.max_lid());
    let mut srcs: Vec<_> = rows.into_iter().collect();
    srcs.sort_unstable_by_key(|(s, _)| *s);
    for (s, row) in srcs {
        let i = p.push_row(&row);
        p.assign(s, i);
    }
    Ok(p)
}

fn parse_rows(f: &Fabric, input: impl BufRead, file: &Path) -> Result<PathSl, Error> {
    let err = |line: usize, cause: String| Error::Parse(ParseError::new(file, line, cause));
    let mut p = PathSl::new(f.max_lid());
    let w = p.width();
    let mut dedupe: HashMap<Vec<u8>, u32> = HashMap::new();
    let mut row = Vec::with_capacity(w);
    let mut lines = Lines::new(input, file);
    while let Some((ln, line)) = lines.next_line()? {
        let (lid_s, sls) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| err(ln, "expected '0x<source lid> <SL string>'".into()))?;
        let lid = lid_s
            .strip_prefix("0x")
            .and_then(|h| u16::from_str_radix(h, 16).ok())
            .ok_or_else(|| err(ln, format!("bad source LID '{lid_s}' (expected 0x<hex>)")))?;
        if lid > f.max_lid() || f.lid_owner(lid).is_none() {
            return Err(err(
                ln,
                format!("source LID 0x{lid:04x} is not assigned in the topology"),
            ));
        }
        let sls = sls.trim();
        if sls.len() != w {
            return Err(err(
                ln,
                format!(
                    "SL string has {} characters, expected {w} (one per LID 0..={})",
                    sls.len(),
                    f.max_lid()
                ),
            ));
        }
        row.clear();
        for (k, c) in sls.bytes().enumerate() {
            row.push(match c {
                b'-' => SL_NONE,
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => {
                    return Err(err(
                        ln,
                        format!("bad SL character '{}' for destination LID {k}", c as char),
                    ));
                }
            });
        }
        let idx = match dedupe.get(&row) {
            Some(&i) => i,
            None => {
                let i = p.push_row(&row);
                dedupe.insert(row.clone(), i);
                i
            }
        };
        p.assign(lid, idx);
    }
    Ok(p)
}

/// Reads `path`; a missing file is SL 0 for all pairs (`Ok(None)`).
pub fn read_optional(f: &Fabric, path: &Path) -> Result<Option<PathSl>, Error> {
    if !path.exists() {
        return Ok(None);
    }
    parse(f, open_file(path)?, path).map(Some)
}
