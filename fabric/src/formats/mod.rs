//! File formats at the edges: ibnetdiscover topologies, OpenSM's
//! `opensm-lfts.dump` and `opensm-sl2vl.dump`, `path-sl.txt`, and GUID
//! lists such as Up*/Down* root switches, the multi-subnet manifest and the
//! inter-subnet mapping file.
//! Every reader reports errors as `file:line: cause`.

mod bytes;
pub mod compact;
pub mod egress;
pub mod fabric_bin;
pub mod guids;
pub mod ibnetdiscover;
pub mod lft;
pub mod manifest;
pub mod mapping;
pub mod mcast;
pub mod pathsl;
pub mod prefix_routes;
pub mod routes_files;
pub mod sl2vl;
pub mod tableset;

use crate::error::{Error, ParseError};
use crate::model::{Fabric, NodeId, NodeKind};
use std::io::{BufRead as _, Read as _};
use std::path::Path;

/// The text files of a routing, under OpenSM's names: an export for stock
/// OpenSM's `-R file` loader and external checkers.
pub const LFTS_FILE: &str = "opensm-lfts.dump";
pub const SL2VL_FILE: &str = "opensm-sl2vl.dump";
pub const PATH_SL_FILE: &str = "path-sl.txt";
/// A set's multicast groups and their forwarding tables ([`mcast`]).
pub const MCAST_GROUPS_FILE: &str = "ibfabric-mcast-groups.txt";
pub const MFTS_FILE: &str = "ibfabric-mfts.txt";
/// The plan reserved trees follow, which the OpenSM plugin builds from.
pub const MCAST_TREE_FILE: &str = "ibfabric-mcast-tree.txt";
/// Every file a set may hold: the compact ones, the text export, then
/// multicast.
pub const ROUTING_FILES: [&str; 9] = [
    compact::LFTS_FILE,
    compact::SL2VL_FILE,
    compact::PATH_SL_FILE,
    LFTS_FILE,
    SL2VL_FILE,
    PATH_SL_FILE,
    MCAST_GROUPS_FILE,
    MFTS_FILE,
    MCAST_TREE_FILE,
];

/// Which forms of the tables a set holds besides the compact files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Export {
    /// OpenSM's text dumps too (`opensm-lfts.dump`, `opensm-sl2vl.dump`,
    /// `path-sl.txt`).
    pub opensm_dump: bool,
}

/// What [`write_routing`] changed in its directory.
#[derive(Debug, Default)]
pub struct RoutingFiles {
    /// The routing's files, in place.
    pub written: Vec<std::path::PathBuf>,
    /// Files of an earlier routing that this one does not have (an
    /// SL-to-VL dump or path SLs left by another engine).
    pub removed: Vec<std::path::PathBuf>,
}

/// A routing written to temporary files beside its targets, complete and
/// on disk, replacing nothing yet ([`StagedRouting::commit`] does).
#[must_use = "a staged routing replaces nothing until it is committed"]
pub struct StagedRouting {
    dir: std::path::PathBuf,
    files: Vec<crate::fsio::Staged>,
    manifest: tableset::TableSet,
}

/// Writes an engine's tables into `dir` as the compact set
/// (`ibfabric-lfts.bin`, plus `ibfabric-sl2vl.bin` and
/// `ibfabric-pathsl.bin` when the routing sets them; OpenSM's text dumps
/// too when `export` asks), and removes the table files an earlier
/// routing left there that this one does not write. Only tables the verification gate accepted for
/// this very fabric can be written.
///
/// Every file is complete on disk before the first one replaces its old
/// version, so an error while writing (a full disk) leaves the previous
/// routing whole, and a crash leaves each file old or new, never truncated.
pub fn write_routing(
    f: &Fabric,
    v: &crate::verify::Verified<crate::tables::Routing>,
    dir: &Path,
    export: Export,
) -> Result<RoutingFiles, Error> {
    stage_routing(f, v, dir, export)?.commit()
}

/// The first half of [`write_routing`]: for callers that write several
/// routings (one per subnet) and replace none before all are staged.
pub fn stage_routing(
    f: &Fabric,
    v: &crate::verify::Verified<crate::tables::Routing>,
    dir: &Path,
    export: Export,
) -> Result<StagedRouting, Error> {
    if !v.is_for(f) {
        return Err(Error::Invalid(format!(
            "{}: the tables were verified against another topology; nothing written",
            dir.display()
        )));
    }
    let drain = v.step() == crate::verify::Step::Drain;
    stage_tables(f, v.get(), v.engine(), drain, dir, export)
}

/// A routing staged before its verification ended
/// ([`crate::verify::gate::accept_while`]): complete on disk under
/// temporary names, replacing nothing, and unable to until
/// [`Candidate::confirm`] is shown the gate's acceptance of these very
/// tables. Dropped unconfirmed, it removes its files (and the directory,
/// when it made it and it is empty).
#[must_use = "a candidate routing replaces nothing until it is confirmed and committed"]
pub struct Candidate {
    /// Taken by [`Candidate::confirm`].
    staged: Option<StagedRouting>,
    dir: std::path::PathBuf,
    engine: crate::routing::EngineKind,
    /// The LFTs' storage: it moves with the routing into the gate's
    /// acceptance, so equal addresses mean the tables staged are the
    /// tables accepted.
    lfts_at: usize,
    made_dir: bool,
}

/// Writes `r` (made by `engine` for `f`) into `dir` as [`stage_routing`]
/// would, before the verification gate has ruled on it.
pub fn stage_candidate(
    f: &Fabric,
    r: &crate::tables::Routing,
    engine: crate::routing::EngineKind,
    dir: &Path,
    export: Export,
) -> Result<Candidate, Error> {
    let made_dir = !dir.exists();
    let staged = stage_tables(f, r, engine, false, dir, export).inspect_err(|_| {
        if made_dir {
            let _ = std::fs::remove_dir(dir);
        }
    })?;
    Ok(Candidate {
        staged: Some(staged),
        dir: dir.to_path_buf(),
        engine,
        lfts_at: r.lfts.storage_id(),
        made_dir,
    })
}

impl Candidate {
    /// The staged set, ready to commit, once `v` shows the gate accepted
    /// the tables staged, as final tables, for `f`.
    pub fn confirm(
        mut self,
        f: &Fabric,
        v: &crate::verify::Verified<crate::tables::Routing>,
    ) -> Result<StagedRouting, Error> {
        let same = v.is_for(f)
            && v.engine() == self.engine
            && v.step() == crate::verify::Step::Final
            && v.get().lfts.storage_id() == self.lfts_at;
        let staged = self.staged.take().filter(|_| same).ok_or_else(|| {
            Error::Invalid(format!(
                "{}: the tables accepted are not the tables staged; nothing written",
                self.dir.display()
            ))
        })?;
        self.made_dir = false;
        Ok(staged)
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        // The staged files go first (their own guards), then the directory
        // a refused routing should not leave behind.
        drop(self.staged.take());
        if self.made_dir {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// The tables of `r` staged in `dir`, the manifest naming `engine`.
fn stage_tables(
    f: &Fabric,
    r: &crate::tables::Routing,
    engine: crate::routing::EngineKind,
    drain: bool,
    dir: &Path,
    export: Export,
) -> Result<StagedRouting, Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    // Leftovers of a writer killed mid-set, also of files this routing
    // does not write (another engine's SL-to-VL dump).
    for name in ROUTING_FILES.iter().chain([&tableset::MANIFEST_FILE]) {
        crate::fsio::remove_dead_temps(dir, name);
    }
    let opts = crate::fsio::Options::default();
    let mut entries = Vec::new();
    // Each file is digested as it is written, for the manifest the plugin
    // checks the set against.
    let mut stage = |name: &str,
                     write: &dyn Fn(
        &mut tableset::Digesting<&mut std::io::BufWriter<std::fs::File>>,
    ) -> std::io::Result<()>|
     -> Result<crate::fsio::Staged, Error> {
        let mut sd = (0, 0);
        let staged = crate::fsio::stage(&dir.join(name), opts, |w| {
            let mut d = tableset::Digesting::new(w);
            write(&mut d)?;
            sd = d.size_and_digest();
            Ok(())
        })?;
        entries.push(tableset::Entry {
            name: name.to_string(),
            size: sd.0,
            digest: sd.1,
        });
        Ok(staged)
    };
    let mut files = vec![stage(compact::LFTS_FILE, &|w| {
        compact::lft::write_to(f, &r.lfts, drain, w)
    })?];
    if let Some(t) = &r.sl2vl {
        files.push(stage(compact::SL2VL_FILE, &|w| {
            compact::sl2vl::write_to(f, t, w)
        })?);
    }
    if let Some(t) = &r.path_sl {
        files.push(stage(compact::PATH_SL_FILE, &|w| {
            compact::pathsl::write_to(t, w)
        })?);
    }
    if export.opensm_dump {
        files.push(stage(LFTS_FILE, &|w| lft::write_to(f, &r.lfts, drain, w))?);
        if let Some(t) = &r.sl2vl {
            files.push(stage(SL2VL_FILE, &|w| sl2vl::write_to(f, t, w))?);
        }
        if let Some(t) = &r.path_sl {
            files.push(stage(PATH_SL_FILE, &|w| pathsl::write_to(f, t, w))?);
        }
    }
    let generation = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    Ok(StagedRouting {
        dir: dir.to_path_buf(),
        files,
        manifest: tableset::TableSet {
            engine: engine.to_string(),
            generation,
            files: entries,
        },
    })
}

impl StagedRouting {
    /// Stages the multicast groups and their forwarding tables too; they
    /// join the manifest like the unicast tables. `mc` must be the
    /// multicast that was verified with this routing.
    pub fn with_multicast(
        mut self,
        f: &Fabric,
        mc: &crate::mcast::Multicast,
    ) -> Result<Self, Error> {
        let mut files = vec![
            (MCAST_GROUPS_FILE, mcast::write_groups(f, &mc.groups)),
            (MFTS_FILE, mcast::write_mfts(f, &mc.mfts)),
        ];
        if let Some(p) = &mc.plan {
            files.push((MCAST_TREE_FILE, mcast::write_tree(f, p)));
        }
        for (name, text) in files {
            let mut sd = (0, 0);
            let staged =
                crate::fsio::stage(&self.dir.join(name), crate::fsio::Options::default(), |w| {
                    let mut d = tableset::Digesting::new(w);
                    std::io::Write::write_all(&mut d, text.as_bytes())?;
                    sd = d.size_and_digest();
                    Ok(())
                })?;
            self.manifest.files.push(tableset::Entry {
                name: name.to_string(),
                size: sd.0,
                digest: sd.1,
            });
            self.files.push(staged);
        }
        Ok(self)
    }

    /// Puts the staged files in place, then removes the routing files of
    /// an earlier engine that this routing does not have: a reader (OpenSM,
    /// `ibfabric verify`) takes every table file it finds in the directory.
    pub fn commit(self) -> Result<RoutingFiles, Error> {
        let mut out = RoutingFiles::default();
        // Without a manifest the directory holds no set a reader may apply:
        // between here and the new manifest, the files change one by one.
        let manifest = self.dir.join(tableset::MANIFEST_FILE);
        crate::fsio::remove(&manifest)?;
        for s in self.files {
            out.written.push(s.commit()?);
        }
        for name in ROUTING_FILES {
            let p = self.dir.join(name);
            if !out.written.contains(&p) && crate::fsio::remove(&p)? {
                out.removed.push(p);
            }
        }
        write_file(&manifest, &tableset::write(&self.manifest))?;
        out.written.push(manifest);
        Ok(out)
    }
}

/// Writes `text` to `path` crash-safely ([`crate::fsio`]).
pub fn write_file(path: &Path, text: &str) -> Result<(), Error> {
    crate::fsio::write_bytes(path, text.as_bytes(), crate::fsio::Options::default())
        .map_err(Error::from)
}

/// The longest line a text format may have. Real lines are a few hundred
/// bytes; a file without line breaks (`/dev/zero`, a binary file given by
/// mistake) is refused once a line passes this, instead of being read
/// into memory without end.
pub const MAX_LINE: usize = 1 << 20;

/// A whole text file, every line at most [`MAX_LINE`] bytes.
pub(crate) fn read_file(path: &Path) -> Result<String, Error> {
    read_text(open_file(path)?, path)
}

/// The text of `r` (named `path` in errors), line by line under the same
/// limits as [`read_file`].
pub(crate) fn read_text(mut r: impl std::io::BufRead, path: &Path) -> Result<String, Error> {
    let mut text = String::new();
    let mut line = 0usize;
    while read_line(&mut r, &mut text, path, line + 1)? > 0 {
        line += 1;
    }
    Ok(text)
}

/// Appends line `line` of `input` to `buf`: the bytes read (0 at the
/// end), or the line's error when it is longer than [`MAX_LINE`] or not
/// UTF-8. Reads at most a line's worth, whatever the input.
fn read_line(
    input: &mut impl std::io::BufRead,
    buf: &mut String,
    file: &Path,
    line: usize,
) -> Result<usize, Error> {
    let before = buf.len();
    let n = input
        .take(MAX_LINE as u64 + 1)
        .read_line(buf)
        .map_err(|e| not_text(file, line, e))?;
    if n > MAX_LINE && !buf[before..].ends_with('\n') {
        return Err(ParseError::new(
            file,
            line,
            format!("a line longer than {MAX_LINE} bytes: not a text file of this format"),
        )
        .into());
    }
    Ok(n)
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

    /// Lines read so far, blank and comment lines included.
    pub(crate) fn lines_read(&self) -> usize {
        self.line
    }

    /// The next meaningful line, trimmed, with its 1-based number.
    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &str)>, Error> {
        loop {
            self.buf.clear();
            if read_line(&mut self.input, &mut self.buf, &self.file, self.line + 1)? == 0 {
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

/// Streams `write` into `path` crash-safely ([`crate::fsio`]) through a
/// large buffer.
pub fn write_with(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<(), Error> {
    crate::fsio::write_atomic(path, write).map_err(Error::from)
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

    /// Every reader refuses a file without line breaks at its first line,
    /// after reading at most a line's worth: a long line in a file, and
    /// `/dev/zero`, which never ends.
    #[test]
    fn a_file_without_line_breaks_is_refused_not_read_without_end() {
        let f =
            crate::generate::generate(&crate::generate::Topology::Dragonfly { p: 2, hosts: None })
                .expect("df2");
        let d = tempfile::tempdir().expect("tmp");
        let long = d.path().join("long");
        std::fs::write(&long, vec![b'x'; MAX_LINE + 10]).expect("write");
        let mut inputs = vec![long];
        if Path::new("/dev/zero").exists() {
            inputs.push("/dev/zero".into());
        }
        for p in &inputs {
            let errors = [
                ibnetdiscover::read(p).map(|_| ()),
                lft::read(&f, p).map(|_| ()),
                sl2vl::read(&f, p).map(|_| ()),
                pathsl::read_optional(&f, p).map(|_| ()),
                guids::read(p).map(|_| ()),
                mapping::read(p, f.subnet_prefix, &[]).map(|_| ()),
                manifest::read(p).map(|_| ()),
            ];
            for (i, e) in errors.into_iter().enumerate() {
                let e = e.expect_err("refused").to_string();
                assert!(
                    e.contains(":1:") && (e.contains("longer than") || e.contains("not UTF-8")),
                    "reader {i} on {}: {e}",
                    p.display()
                );
            }
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused_at_their_line() {
        let mut lines = Lines::new(&b"# comment\nfirst\n\xff\xfe\n"[..], Path::new("x.dump"));
        assert_eq!(lines.next_line().expect("reads").map(|(n, _)| n), Some(2));
        let e = lines.next_line().expect_err("not UTF-8").to_string();
        assert_eq!(e, "x.dump:3: not UTF-8 text");
    }
}
