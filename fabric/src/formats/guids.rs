//! GUID list files, such as the root switches of Up*/Down* (the format of
//! OpenSM's `root_guid_file`): one GUID per line, `0x` prefix optional,
//! blank lines and `#` comments (whole-line or trailing) ignored.

use super::{open_file, parse_hex_u64};
use crate::error::{Error, ParseError};
use crate::model::{Fabric, NodeKind};
use std::io::BufRead;
use std::path::Path;

/// One GUID and the line it came from, so later checks can point at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuidLine {
    pub line: usize,
    pub guid: u64,
}

/// Parses a GUID list. Errors name the file, the line and the cause: a
/// token that is not a hexadecimal GUID, two tokens on one line, a GUID
/// listed twice, or a file without any GUID.
pub fn parse(input: impl BufRead, file: &Path) -> Result<Vec<GuidLine>, Error> {
    let mut out: Vec<GuidLine> = Vec::new();
    let mut lines = super::Lines::new(input, file);
    while let Some((ln, line)) = lines.next_line()? {
        let text = line.split('#').next().unwrap_or("").trim();
        if text.is_empty() {
            continue;
        }
        let mut tokens = text.split_whitespace();
        let tok = tokens.next().unwrap_or("");
        if let Some(extra) = tokens.next() {
            return Err(ParseError::new(
                file,
                ln,
                format!("one GUID per line expected, found '{tok}' followed by '{extra}'"),
            )
            .into());
        }
        let guid = parse_hex_u64(tok).filter(|&g| g != 0).ok_or_else(|| {
            ParseError::new(
                file,
                ln,
                format!("bad GUID '{tok}' (expected a nonzero hex number like 0x0002c90200001234)"),
            )
        })?;
        if let Some(prev) = out.iter().find(|g| g.guid == guid) {
            return Err(ParseError::new(
                file,
                ln,
                format!(
                    "GUID 0x{guid:016x} is listed twice (first on line {})",
                    prev.line
                ),
            )
            .into());
        }
        out.push(GuidLine { line: ln, guid });
    }
    if out.is_empty() {
        return Err(
            ParseError::new(file, lines.lines_read().max(1), "the file lists no GUID").into(),
        );
    }
    Ok(out)
}

pub fn read(path: &Path) -> Result<Vec<GuidLine>, Error> {
    parse(open_file(path)?, path)
}

/// Reads a GUID list whose every entry must be the node GUID of a switch of
/// `f`; an unknown GUID or one of a CA or router is an error at its line.
pub fn read_switch_guids(f: &Fabric, path: &Path) -> Result<Vec<u64>, Error> {
    let lines = read(path)?;
    check_switch_guids(f, &lines, path)
}

/// The GUIDs of `lines`, after checking each is a switch of `f`.
pub fn check_switch_guids(f: &Fabric, lines: &[GuidLine], file: &Path) -> Result<Vec<u64>, Error> {
    lines
        .iter()
        .map(|g| match f.find_node_by_guid(g.guid) {
            Some(n) if f.kind(n) == NodeKind::Switch => Ok(g.guid),
            Some(n) => Err(ParseError::new(
                file,
                g.line,
                format!(
                    "GUID 0x{:016x} is {} '{}', not a switch",
                    g.guid,
                    match f.kind(n) {
                        NodeKind::Ca => "the CA",
                        _ => "the router",
                    },
                    f.desc(n)
                ),
            )
            .into()),
            None => Err(ParseError::new(
                file,
                g.line,
                format!("GUID 0x{:016x} is not a node of this fabric", g.guid),
            )
            .into()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_not_utf8_are_refused_at_their_line() {
        let e = parse(&b"0x1\n\xc3\n"[..], Path::new("roots.txt"))
            .expect_err("not UTF-8")
            .to_string();
        assert_eq!(e, "roots.txt:2: not UTF-8 text");
    }
}
