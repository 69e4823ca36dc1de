//! File formats at the edges: ibnetdiscover topologies, OpenSM's
//! `opensm-lfts.dump` and `opensm-sl2vl.dump`, `path-sl.txt`, and GUID
//! lists such as Up*/Down* root switches, the multi-subnet manifest and the
//! inter-subnet mapping file.
//! Every reader reports errors as `file:line: cause`.

pub mod egress;
pub mod guids;
pub mod ibnetdiscover;
pub mod lft;
pub mod manifest;
pub mod mapping;
pub mod pathsl;
pub mod sl2vl;

use crate::error::{Error, ParseError};
use crate::model::{Fabric, NodeId, NodeKind};
use std::path::Path;

/// Writes an engine's tables into `dir` under OpenSM's file names:
/// `opensm-lfts.dump`, plus `opensm-sl2vl.dump` and `path-sl.txt` when the
/// routing sets them. Returns the files written. Only tables the
/// verification gate accepted for this very fabric can be written.
pub fn write_routing(
    f: &Fabric,
    v: &crate::verify::Verified<crate::tables::Routing>,
    dir: &Path,
) -> Result<Vec<std::path::PathBuf>, Error> {
    if !v.is_for(f) {
        return Err(Error::Invalid(format!(
            "{}: the tables were verified against another topology; nothing written",
            dir.display()
        )));
    }
    let r = v.get();
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut out = Vec::new();
    let p = dir.join("opensm-lfts.dump");
    write_with(&p, |w| lft::write_to(f, &r.lfts, w))?;
    out.push(p);
    if let Some(t) = &r.sl2vl {
        let p = dir.join("opensm-sl2vl.dump");
        write_with(&p, |w| sl2vl::write_to(f, t, w))?;
        out.push(p);
    }
    if let Some(t) = &r.path_sl {
        let p = dir.join("path-sl.txt");
        write_with(&p, |w| pathsl::write_to(f, t, w))?;
        out.push(p);
    }
    Ok(out)
}

/// Writes `text` to `path`, mapping the error to one that names the file.
pub fn write_file(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|e| Error::io(path, e))
}

pub(crate) fn read_file(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

/// Buffered reader for files too large to hold as text (LFT and path-SL
/// dumps of big subnets run to gigabytes).
pub(crate) fn open_file(path: &Path) -> Result<std::io::BufReader<std::fs::File>, Error> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    Ok(std::io::BufReader::with_capacity(1 << 20, f))
}

/// Reads a text format line by line, skipping blank lines and `#`
/// comments, and counting lines for error messages.
pub(crate) struct Lines<R> {
    input: R,
    file: std::path::PathBuf,
    buf: String,
    line: usize,
}

impl<R: std::io::BufRead> Lines<R> {
    pub(crate) fn new(input: R, file: &Path) -> Self {
        Self {
            input,
            file: file.to_path_buf(),
            buf: String::new(),
            line: 0,
        }
    }

    /// The next meaningful line, trimmed, with its 1-based number.
    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &str)>, Error> {
        loop {
            self.buf.clear();
            let read = self
                .input
                .read_line(&mut self.buf)
                .map_err(|e| not_text(&self.file, self.line + 1, e))?;
            if read == 0 {
                return Ok(None);
            }
            self.line += 1;
            let t = self.buf.trim();
            if !t.is_empty() && !t.starts_with('#') {
                // Re-borrow after the checks so the returned slice lives in `buf`.
                let t = self.buf.trim();
                return Ok(Some((self.line, t)));
            }
        }
    }
}

/// A read error at `line`: bytes that are not UTF-8 are the input's fault
/// and get its line, like any other malformed input; the rest stay I/O
/// errors of the file.
pub(crate) fn not_text(file: &Path, line: usize, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::InvalidData {
        ParseError::new(file, line, "not UTF-8 text").into()
    } else {
        Error::io(file, e)
    }
}

/// Creates `path` and streams `write` into it through a large buffer.
pub fn write_with(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<(), Error> {
    use std::io::Write as _;
    let f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    write(&mut w)
        .and_then(|_| w.flush())
        .map_err(|e| Error::io(path, e))
}

/// Switch node ids sorted by GUID: the order OpenSM's dumps use.
pub(crate) fn switches_by_guid(f: &Fabric) -> Vec<NodeId> {
    let mut v = f.switches().to_vec();
    v.sort_by_key(|&n| f.guid(n));
    v
}

/// A GUID or prefix in hex, with or without `0x`.
pub fn parse_hex_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u64::from_str_radix(s, 16).ok()
}

/// `true` for nodes that inject and consume traffic.
pub(crate) fn is_end_node(f: &Fabric, n: NodeId) -> bool {
    f.kind(n) != NodeKind::Switch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_not_utf8_are_refused_at_their_line() {
        let mut lines = Lines::new(&b"# comment\nfirst\n\xff\xfe\n"[..], Path::new("x.dump"));
        assert_eq!(lines.next_line().expect("reads").map(|(n, _)| n), Some(2));
        let e = lines.next_line().expect_err("not UTF-8").to_string();
        assert_eq!(e, "x.dump:3: not UTF-8 text");
    }
}
