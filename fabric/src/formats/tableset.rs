//! `ibfabric-tables.txt`: the manifest of one routing's files, written
//! after every table file is in place. OpenSM's ibfabric plugin
//! (`opensm-plugin/`) applies a directory's tables only when each file the
//! manifest names has the stated size and digest, so a set caught half
//! replaced, truncated, or mixed with another routing's files is refused
//! whole and the tables in force stay.
//!
//! ```text
//! ibfabric-tables 1
//! engine dfdn
//! generation 1764107000123
//! file opensm-lfts.dump 48213 9f3c2a01d4e5b6c7
//! file path-sl.txt 5330 0123456789abcdef
//! end
//! ```
//! The digest is 64-bit FNV-1a: it detects accidents, not forgery (who may
//! write the directory is the file system's business).

use crate::error::{Error, ParseError};
use std::io::Write;
use std::path::Path;

pub const MANIFEST_FILE: &str = "ibfabric-tables.txt";

/// 64-bit FNV-1a, as the plugin computes it.
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn finish(self) -> u64 {
        self.0
    }
}

/// One table file of the set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub size: u64,
    pub digest: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSet {
    pub engine: String,
    pub generation: u64,
    pub files: Vec<Entry>,
}

/// Passes writes through and records their size and digest.
pub struct Digesting<W> {
    inner: W,
    hash: Fnv1a,
    size: u64,
}

impl<W: Write> Digesting<W> {
    pub fn new(inner: W) -> Self {
        Digesting {
            inner,
            hash: Fnv1a::default(),
            size: 0,
        }
    }

    pub fn size_and_digest(&self) -> (u64, u64) {
        (self.size, self.hash.finish())
    }
}

impl<W: Write> Write for Digesting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

pub fn write(t: &TableSet) -> String {
    let mut s = String::from(
        "# ibfabric table set: written after its files; OpenSM's ibfabric plugin applies\n\
         # the files only when each matches its size and FNV-1a digest below\n\
         ibfabric-tables 1\n",
    );
    s.push_str(&format!(
        "engine {}\ngeneration {}\n",
        t.engine, t.generation
    ));
    for e in &t.files {
        s.push_str(&format!("file {} {} {:016x}\n", e.name, e.size, e.digest));
    }
    s.push_str("end\n");
    s
}

pub fn parse(text: &str, file: &Path) -> Result<TableSet, Error> {
    let err = |line: usize, cause: String| Error::Parse(ParseError::new(file, line, cause));
    let mut header = false;
    let mut end = false;
    let mut t = TableSet {
        engine: String::new(),
        generation: 0,
        files: Vec::new(),
    };
    let mut last = 0;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        last = ln;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if end {
            return Err(err(ln, "text after 'end'".into()));
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        match (header, w.as_slice()) {
            (false, ["ibfabric-tables", "1"]) => header = true,
            (false, _) => return Err(err(ln, "expected 'ibfabric-tables 1'".into())),
            (true, ["engine", e]) => t.engine = (*e).to_string(),
            (true, ["generation", g]) => {
                t.generation = g
                    .parse()
                    .map_err(|_| err(ln, format!("bad generation '{g}'")))?
            }
            (true, ["file", name, size, digest]) => {
                if !super::ROUTING_FILES.contains(name) {
                    return Err(err(ln, format!("unknown table file '{name}'")));
                }
                if t.files.iter().any(|e| e.name == *name) {
                    return Err(err(ln, format!("'{name}' listed twice")));
                }
                let size = size
                    .parse()
                    .map_err(|_| err(ln, format!("bad size '{size}'")))?;
                let digest = u64::from_str_radix(digest, 16)
                    .map_err(|_| err(ln, format!("bad digest '{digest}'")))?;
                t.files.push(Entry {
                    name: (*name).to_string(),
                    size,
                    digest,
                });
            }
            (true, ["end"]) => end = true,
            (true, _) => return Err(err(ln, format!("unexpected line '{line}'"))),
        }
    }
    if !end {
        return Err(err(last, "no 'end' line: the manifest is truncated".into()));
    }
    if !t
        .files
        .iter()
        .any(|e| e.name == super::LFTS_FILE || e.name == super::compact::LFTS_FILE)
    {
        return Err(err(
            last,
            format!(
                "the set lists no {} or {}",
                super::compact::LFTS_FILE,
                super::LFTS_FILE
            ),
        ));
    }
    Ok(t)
}

/// Checks the files in `dir` against the manifest there, as the plugin
/// does: each listed file must exist with the stated size and digest, and
/// no routing file may lie beside them unlisted.
pub fn check_dir(dir: &Path) -> Result<TableSet, Error> {
    let (mpath, t) = manifest_of(dir)?;
    for e in &t.files {
        checked_bytes(dir, e, &mpath)?;
    }
    check_unlisted(dir, &t, &mpath)?;
    Ok(t)
}

fn manifest_of(dir: &Path) -> Result<(std::path::PathBuf, TableSet), Error> {
    let mpath = dir.join(MANIFEST_FILE);
    let t = parse(&super::read_file(&mpath)?, &mpath)?;
    Ok((mpath, t))
}

/// The bytes of the listed file `e`, refused unless they have the size
/// and digest the manifest at `mpath` states.
fn checked_bytes(dir: &Path, e: &Entry, mpath: &Path) -> Result<Vec<u8>, Error> {
    let p = dir.join(&e.name);
    let bytes = std::fs::read(&p).map_err(|x| Error::io(&p, x))?;
    let mut h = Fnv1a::default();
    h.update(&bytes);
    if bytes.len() as u64 != e.size || h.finish() != e.digest {
        return Err(Error::Invalid(format!(
            "{}: {} bytes, digest {:016x}; {} says {} bytes, {:016x}: the set is partial or mixed",
            p.display(),
            bytes.len(),
            h.finish(),
            mpath.display(),
            e.size,
            e.digest
        )));
    }
    Ok(bytes)
}

/// No routing file may lie beside a set unlisted.
fn check_unlisted(dir: &Path, t: &TableSet, mpath: &Path) -> Result<(), Error> {
    for name in super::ROUTING_FILES {
        if dir.join(name).is_file() && !t.files.iter().any(|e| e.name == name) {
            return Err(Error::Invalid(format!(
                "{}: not in {}: left from another routing",
                dir.join(name).display(),
                mpath.display()
            )));
        }
    }
    Ok(())
}

/// The compact tables of a set, parsed from the bytes that were checked.
#[derive(Default)]
struct Parsed {
    lfts: Option<crate::tables::Lfts>,
    sl2vl: Option<crate::tables::Sl2Vl>,
    path_sl: Option<crate::tables::PathSl>,
}

/// The routing a checked set holds, read against `f`, the topology it was
/// computed for: the files its manifest lists, nothing else. Each file is
/// read once: its digest is checked and its compact tables parsed from
/// the same bytes, one file in memory at a time.
pub fn read_set(f: &crate::model::Fabric, dir: &Path) -> Result<crate::tables::Routing, Error> {
    read_set_with_manifest(f, dir).map(|(_, r)| r)
}

/// [`read_set`] with the set's manifest.
pub fn read_set_with_manifest(
    f: &crate::model::Fabric,
    dir: &Path,
) -> Result<(TableSet, crate::tables::Routing), Error> {
    use super::compact;
    let (mpath, t) = manifest_of(dir)?;
    let has = |name: &str| t.files.iter().any(|e| e.name == name);
    let mut parsed = Parsed::default();
    for e in &t.files {
        let bytes = checked_bytes(dir, e, &mpath)?;
        let p = dir.join(&e.name);
        match e.name.as_str() {
            compact::LFTS_FILE => parsed.lfts = Some(compact::lft::parse(f, &bytes, &p)?),
            compact::SL2VL_FILE => parsed.sl2vl = Some(compact::sl2vl::parse(f, &bytes, &p)?),
            compact::PATH_SL_FILE => parsed.path_sl = Some(compact::pathsl::parse(f, &bytes, &p)?),
            // A set of an earlier release holds the text files only: they
            // are parsed from the bytes just checked, not read again.
            super::LFTS_FILE if !has(compact::LFTS_FILE) => {
                parsed.lfts = Some(super::lft::parse(f, &bytes[..], &p)?)
            }
            super::SL2VL_FILE if !has(compact::SL2VL_FILE) => {
                let text = super::read_text(&bytes[..], &p)?;
                parsed.sl2vl = Some(super::sl2vl::parse(f, &text, &p)?)
            }
            super::PATH_SL_FILE if !has(compact::PATH_SL_FILE) => {
                parsed.path_sl = Some(super::pathsl::parse(f, &bytes[..], &p)?)
            }
            _ => {}
        }
    }
    check_unlisted(dir, &t, &mpath)?;
    let r = assemble(f, dir, &t, parsed)?;
    Ok((t, r))
}

/// The multicast groups and forwarding tables a checked set holds
/// (`None`: the set has none), read against `f`.
pub fn read_multicast(
    f: &crate::model::Fabric,
    dir: &Path,
) -> Result<Option<crate::mcast::Multicast>, Error> {
    let (mpath, t) = manifest_of(dir)?;
    let entry = |name: &str| t.files.iter().find(|e| e.name == name);
    let (Some(g), Some(m)) = (entry(super::MCAST_GROUPS_FILE), entry(super::MFTS_FILE)) else {
        return Ok(None);
    };
    let text = |e: &Entry| -> Result<String, Error> {
        let bytes = checked_bytes(dir, e, &mpath)?;
        super::read_text(&bytes[..], &dir.join(&e.name))
    };
    let groups = super::mcast::parse_groups(f, &text(g)?, &dir.join(&g.name))?;
    let mfts = super::mcast::parse_mfts(f, &text(m)?, &dir.join(&m.name))?;
    let plan = match entry(super::MCAST_TREE_FILE) {
        Some(t) => Some(super::mcast::parse_tree(f, &text(t)?, &dir.join(&t.name))?),
        None => None,
    };
    Ok(Some(crate::mcast::Multicast { groups, mfts, plan }))
}

/// The routing of the table files `dir` holds, with no manifest to check
/// them against (a set written by hand or by an older release): the
/// compact files where present, else OpenSM's text files.
pub fn read_as_found(
    f: &crate::model::Fabric,
    dir: &Path,
) -> Result<crate::tables::Routing, Error> {
    let as_found = TableSet {
        engine: String::new(),
        generation: 0,
        files: super::ROUTING_FILES
            .iter()
            .filter(|n| dir.join(n).is_file())
            .map(|n| Entry {
                name: n.to_string(),
                size: 0,
                digest: 0,
            })
            .collect(),
    };
    read_checked(f, dir, &as_found)
}

/// [`read_set`] for a set [`check_dir`] already checked (for callers that
/// also want its manifest, without digesting the files twice).
pub fn read_checked(
    f: &crate::model::Fabric,
    dir: &Path,
    set: &TableSet,
) -> Result<crate::tables::Routing, Error> {
    assemble(f, dir, set, Parsed::default())
}

/// The routing of `set`: the tables already `parsed`, the rest read from
/// `dir`. The compact files when the set has them; a set of an earlier
/// release has the text ones only.
fn assemble(
    f: &crate::model::Fabric,
    dir: &Path,
    set: &TableSet,
    parsed: Parsed,
) -> Result<crate::tables::Routing, Error> {
    use super::compact;
    let has = |name: &str| set.files.iter().any(|e| e.name == name);
    let lfts = match parsed.lfts {
        Some(l) => l,
        None if has(compact::LFTS_FILE) => compact::lft::read(f, &dir.join(compact::LFTS_FILE))?,
        None => super::lft::read(f, &dir.join(super::LFTS_FILE))?,
    };
    let sl2vl = if parsed.sl2vl.is_some() {
        parsed.sl2vl
    } else if has(compact::SL2VL_FILE) {
        Some(compact::sl2vl::read(f, &dir.join(compact::SL2VL_FILE))?)
    } else if has(super::SL2VL_FILE) {
        Some(super::sl2vl::read(f, &dir.join(super::SL2VL_FILE))?)
    } else {
        None
    };
    let path_sl = if parsed.path_sl.is_some() {
        parsed.path_sl
    } else if has(compact::PATH_SL_FILE) {
        Some(compact::pathsl::read(f, &dir.join(compact::PATH_SL_FILE))?)
    } else if has(super::PATH_SL_FILE) {
        super::pathsl::read_optional(f, &dir.join(super::PATH_SL_FILE))?
    } else {
        None
    };
    Ok(crate::tables::Routing {
        lfts,
        sl2vl,
        path_sl,
        vls_needed: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_known_answers() {
        // Published FNV-1a 64 test vectors.
        let h = |s: &str| {
            let mut f = Fnv1a::default();
            f.update(s.as_bytes());
            f.finish()
        };
        assert_eq!(h(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(h("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(h("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn round_trip_and_refusals() {
        let t = TableSet {
            engine: "dfdn".into(),
            generation: 42,
            files: vec![Entry {
                name: super::super::LFTS_FILE.into(),
                size: 10,
                digest: 0xabc,
            }],
        };
        let text = write(&t);
        let p = Path::new("m");
        assert_eq!(parse(&text, p).unwrap(), t);
        let truncated = text.replace("end\n", "");
        assert!(
            parse(&truncated, p)
                .unwrap_err()
                .to_string()
                .contains("truncated")
        );
        let foreign = text.replace("opensm-lfts.dump", "other.txt");
        assert!(
            parse(&foreign, p)
                .unwrap_err()
                .to_string()
                .contains("m:6: unknown table file")
        );
    }
}
