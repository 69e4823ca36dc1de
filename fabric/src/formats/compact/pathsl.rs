//! `ibfabric-pathsl.bin`: the engine's path-SL rows, each once (one per
//! source switch for the layered engines), and the row of each source LID.

use super::Bin;
use crate::error::Error;
use crate::model::Fabric;
use crate::tables::{PathSl, SL_NONE};
use std::io::Write;
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"IBFPSL01";

/// The file's bytes in memory (tests, fuzzing; sets are streamed).
pub fn write(p: &PathSl) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    write_to(p, &mut out)?;
    Ok(out)
}

pub(crate) fn write_to(p: &PathSl, w: &mut impl Write) -> std::io::Result<()> {
    let width = p.width();
    let max_lid = u16::try_from(width.saturating_sub(1))
        .map_err(|_| std::io::Error::other("path SLs wider than the LID space"))?;
    w.write_all(MAGIC)?;
    w.write_all(&max_lid.to_le_bytes())?;
    w.write_all(&[0, 0])?;
    w.write_all(&(p.num_rows() as u32).to_le_bytes())?;
    let sources: Vec<(u16, u32)> = p
        .sources()
        .filter_map(|s| Some((s, p.row_index(s)?)))
        .collect();
    w.write_all(&(sources.len() as u32).to_le_bytes())?;
    let mut buf = Vec::with_capacity(sources.len() * 8);
    for (s, row) in sources {
        buf.extend_from_slice(&s.to_le_bytes());
        buf.extend_from_slice(&[0, 0]);
        buf.extend_from_slice(&row.to_le_bytes());
    }
    w.write_all(&buf)?;
    w.write_all(p.raw_rows())
}

/// The path SLs in `b`, read against `f`: one SL per LID of `f`, every
/// source LID assigned in `f` (as `path-sl.txt` requires).
pub fn parse(f: &Fabric, b: &[u8], file: &Path) -> Result<PathSl, Error> {
    let mut r = Bin::open(b, file, MAGIC)?;
    let at = r.at();
    let max_lid = r.u16("the highest LID")?;
    if max_lid != f.max_lid() {
        return Err(r.bad(
            at,
            format!(
                "rows for LIDs 0..={max_lid}; the topology's highest LID is {}",
                f.max_lid()
            ),
        ));
    }
    r.zero(2, "the bytes after the highest LID")?;
    let width = max_lid as usize + 1;
    let at_rows = r.at();
    let n_rows = r.u32("the row count")? as usize;
    let n_src = r.count(8, "the source count")?;
    let mut row_of = vec![u32::MAX; width];
    let mut last = None;
    for _ in 0..n_src {
        let at = r.at();
        let s = r.u16("a source LID")?;
        r.zero(2, "the bytes after a source LID")?;
        let row = r.u32("a row index")?;
        if last.is_some_and(|l| l >= s) {
            return Err(r.bad(at, format!("source LID {s} out of order or twice")));
        }
        last = Some(s);
        if s > max_lid || f.lid_owner(s).is_none() {
            return Err(r.bad(
                at,
                format!("source LID 0x{s:04x} is not assigned in the topology"),
            ));
        }
        if row as usize >= n_rows {
            return Err(r.bad(at + 4, format!("row {row} of {n_rows}")));
        }
        row_of[s as usize] = row;
    }
    let size = n_rows
        .checked_mul(width)
        .ok_or_else(|| r.bad(at_rows, format!("{n_rows} rows of {width} bytes overflow")))?;
    let at = r.at();
    let rows = r.take(size, "the rows")?;
    if let Some(k) = rows.iter().position(|&v| v > 15 && v != SL_NONE) {
        return Err(r.bad(
            at + k,
            format!(
                "row {}, LID {}: SL {} (0..15 or 255)",
                k / width,
                k % width,
                rows[k]
            ),
        ));
    }
    let rows = rows.to_vec();
    r.end()?;
    Ok(PathSl::from_raw(width, row_of, rows))
}

pub fn read(f: &Fabric, path: &Path) -> Result<PathSl, Error> {
    parse(f, &super::read_bytes(path)?, path)
}
