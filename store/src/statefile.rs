//! The memory store's state file: a snapshot of every key, then a journal
//! of the writes since, one line per transaction, appended and synced as
//! it commits. A write costs the bytes it changes, not the whole state (a
//! controller holding eight subnets at the LID limit has a state of tens of
//! megabytes); the file is rewritten whole (atomically) only when the
//! journal outgrows the snapshot.
//!
//! ```text
//! ibfabric-memory-store 2
//! revision 41
//! <hex key> <hex value> <revision>        (snapshot: one line per key)
//! T 42 p:<hex key>:<hex value> d:<hex key>   (journal: one line per write)
//! ```
//!
//! A journal line is complete only with its line break: a crash while
//! appending leaves a last line without one, which is not a write that
//! committed (its caller never got an answer) and is dropped. Any other
//! damage is refused with the line. Version 1 files (a snapshot alone)
//! are read as they are.

use crate::{Revision, StoreError};
use std::collections::BTreeMap;
use std::path::Path;

const HEADER_V1: &str = "ibfabric-memory-store 1";
const HEADER_V2: &str = "ibfabric-memory-store 2";

/// What a state file holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    pub revision: Revision,
    pub keys: BTreeMap<String, (Vec<u8>, Revision)>,
    /// Journal lines read (the file is worth compacting when any).
    pub journal_lines: usize,
    /// A last line without its line break was dropped.
    pub torn_tail: bool,
}

/// One change of a transaction: a put (with its value) or a delete.
pub type Change<'a> = (&'a str, Option<&'a [u8]>);

fn hex(b: &[u8]) -> String {
    // A table, not `format!` per byte: a report at the LID limit is 3 MB,
    // and every accepted one is appended to the journal.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push(DIGITS[usize::from(x >> 4)] as char);
        s.push(DIGITS[usize::from(x & 15)] as char);
    }
    s
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A whole file: the header, the revision and every key.
pub fn snapshot<'a>(
    revision: Revision,
    keys: impl Iterator<Item = (&'a String, &'a (Vec<u8>, Revision))>,
) -> String {
    let mut text = format!("{HEADER_V2}\nrevision {revision}\n");
    for (k, (v, r)) in keys {
        text += &format!("{} {} {r}\n", hex(k.as_bytes()), hex(v));
    }
    text
}

/// The journal line of one transaction at `revision`.
pub fn journal_line(revision: Revision, changes: &[Change<'_>]) -> String {
    let mut line = format!("T {revision}");
    for (k, v) in changes {
        match v {
            Some(v) => line += &format!(" p:{}:{}", hex(k.as_bytes()), hex(v)),
            None => line += &format!(" d:{}", hex(k.as_bytes())),
        }
    }
    line.push('\n');
    line
}

/// Reads a state file's text; `path` names it in errors.
pub fn parse(text: &str, path: &Path) -> Result<Loaded, StoreError> {
    let bad = |line: usize, why: &str| {
        StoreError::Config(format!("state file {}:{line}: {why}", path.display()))
    };
    let mut out = Loaded::default();
    // A last line without its line break is a write that never committed.
    let body = match text.rfind('\n') {
        Some(end) if end + 1 < text.len() => {
            out.torn_tail = true;
            &text[..=end]
        }
        None if !text.is_empty() => {
            out.torn_tail = true;
            ""
        }
        _ => text,
    };
    let mut lines = body.lines().enumerate();
    let journaled = match lines.next() {
        Some((_, HEADER_V1)) => false,
        Some((_, HEADER_V2)) => true,
        _ => return Err(bad(1, "not an ibfabric memory store file")),
    };
    let mut in_journal = false;
    for (i, line) in lines {
        let n = i + 1;
        if let Some(rest) = line.strip_prefix("T ") {
            if !journaled {
                return Err(bad(n, "a journal line in a version 1 file"));
            }
            in_journal = true;
            out.journal_lines += 1;
            apply_line(&mut out, rest).map_err(|why| bad(n, &why))?;
            continue;
        }
        if in_journal {
            return Err(bad(n, "a snapshot line after the journal began"));
        }
        let f: Vec<&str> = line.split(' ').collect();
        match f.as_slice() {
            ["revision", r] => {
                out.revision = r.parse().map_err(|_| bad(n, "bad revision"))?;
            }
            [k, v, r] => {
                let key = unhex(k)
                    .and_then(|k| String::from_utf8(k).ok())
                    .ok_or_else(|| bad(n, "bad key"))?;
                let value = unhex(v).ok_or_else(|| bad(n, "bad value"))?;
                let rev: Revision = r.parse().map_err(|_| bad(n, "bad revision"))?;
                if rev > out.revision {
                    return Err(bad(n, "a key is newer than the store's revision"));
                }
                out.keys.insert(key, (value, rev));
            }
            _ => {
                return Err(bad(
                    n,
                    "expected 'revision N', 'KEY VALUE REVISION' or 'T ...'",
                ));
            }
        }
    }
    Ok(out)
}

/// One journal line (after `T `) applied to `out`.
fn apply_line(out: &mut Loaded, rest: &str) -> Result<(), String> {
    let mut words = rest.split(' ');
    let rev: Revision = words
        .next()
        .and_then(|r| r.parse().ok())
        .ok_or("bad revision")?;
    if rev <= out.revision {
        return Err(format!(
            "revision {rev} is not above the store's {}",
            out.revision
        ));
    }
    out.revision = rev;
    for w in words {
        let key_of = |h: &str| {
            unhex(h)
                .and_then(|k| String::from_utf8(k).ok())
                .ok_or_else(|| format!("bad key in '{w}'"))
        };
        if let Some(p) = w.strip_prefix("p:") {
            let (k, v) = p.split_once(':').ok_or_else(|| format!("bad put '{w}'"))?;
            let value = unhex(v).ok_or_else(|| format!("bad value in '{w}'"))?;
            out.keys.insert(key_of(k)?, (value, rev));
        } else if let Some(k) = w.strip_prefix("d:") {
            out.keys.remove(&key_of(k)?);
        } else {
            return Err(format!("'{w}' is neither p:KEY:VALUE nor d:KEY"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(v: &[(&str, &[u8], Revision)]) -> BTreeMap<String, (Vec<u8>, Revision)> {
        v.iter()
            .map(|(k, v, r)| (k.to_string(), (v.to_vec(), *r)))
            .collect()
    }

    #[test]
    fn a_snapshot_and_its_journal_read_back_and_a_torn_tail_is_dropped() {
        let p = Path::new("s");
        let k = keys(&[("a", b"1", 3), ("b", b"", 5)]);
        let mut text = snapshot(5, k.iter());
        text += &journal_line(6, &[("c", Some(b"xy")), ("a", None)]);
        text += &journal_line(7, &[]);
        let back = parse(&text, p).expect("reads");
        assert_eq!(back.revision, 7);
        assert_eq!(back.keys, keys(&[("b", b"", 5), ("c", b"xy", 6)]));
        assert_eq!(back.journal_lines, 2);
        assert!(!back.torn_tail);
        // A write cut short: dropped, the rest kept.
        let torn = format!("{text}T 8 p:61:");
        let back = parse(&torn, p).expect("reads");
        assert!(back.torn_tail);
        assert_eq!(back.revision, 7);
        // Damage elsewhere is refused at its line.
        let e = parse(&text.replace("T 7", "T 6"), p).expect_err("refused");
        assert!(e.to_string().contains("s:6:"), "{e}");
        let e = parse(&text.replace("p:63", "q:63"), p).expect_err("refused");
        assert!(e.to_string().contains("s:5:"), "{e}");
        let e = parse("ibfabric-memory-store 1\nT 1\n", p).expect_err("refused");
        assert!(e.to_string().contains("version 1"), "{e}");
        assert!(parse("junk\n", p).is_err());
        // Version 1: a snapshot alone.
        let v1 = "ibfabric-memory-store 1\nrevision 2\n61 31 2\n";
        assert_eq!(parse(v1, p).expect("reads").keys, keys(&[("a", b"1", 2)]));
    }

    /// Every cut and every one-byte change of a file: never a panic, and a
    /// refusal names a line of the input.
    #[test]
    fn cut_or_changed_files_are_read_or_refused_at_a_line() {
        let p = Path::new("s");
        let k = keys(&[("a", b"1", 3), ("b", b"22", 5)]);
        let mut text = snapshot(5, k.iter());
        text += &journal_line(6, &[("c", Some(b"xy")), ("a", None)]);
        let located = |t: &str| match parse(t, p) {
            Ok(_) => {}
            Err(e) => {
                let msg = e.to_string();
                let n: usize = msg
                    .split("state file s:")
                    .nth(1)
                    .and_then(|r| r.split(':').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("no line: {msg}"));
                assert!((1..=t.split('\n').count()).contains(&n), "{msg}");
            }
        };
        for cut in 0..=text.len() {
            located(&text[..cut]);
        }
        let bytes = text.as_bytes();
        for i in 0..bytes.len() {
            for b in [b' ', b'x', b'\n', b'0', b':'] {
                let mut v = bytes.to_vec();
                v[i] = b;
                if let Ok(t) = std::str::from_utf8(&v) {
                    located(t);
                }
            }
        }
    }
}
