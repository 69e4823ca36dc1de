//! The compact table set (`docs/table-set-format.md`): LFTs as the
//! switches hold them, each distinct SL-to-VL table once, path SLs in the
//! engine's rows. Dragonfly p=8 fits in about 80 MB where OpenSM's text
//! dumps take 3 GB; the text stays an export (`route --opensm-dump`).
//!
//! Every reader is exact (what a writer wrote reads back as the same
//! tables) and refuses bad bytes with the file, the offset and the cause.

pub mod lft;
pub mod pathsl;
pub mod sl2vl;

use super::bytes::{Reader, Short};
use crate::error::{BinaryError, Error};
use std::path::Path;

pub const LFTS_FILE: &str = "ibfabric-lfts.bin";
pub const SL2VL_FILE: &str = "ibfabric-sl2vl.bin";
pub const PATH_SL_FILE: &str = "ibfabric-pathsl.bin";

/// A reader over one file's bytes whose errors name the file.
pub(crate) struct Bin<'a> {
    r: Reader<'a>,
    file: &'a Path,
}

impl<'a> Bin<'a> {
    /// Checks the magic and positions the reader after it.
    pub(crate) fn open(b: &'a [u8], file: &'a Path, magic: &[u8; 8]) -> Result<Self, Error> {
        let mut bin = Bin {
            r: Reader::new(b, 0),
            file,
        };
        let m = bin.take(8, "the magic")?;
        if m != magic {
            return Err(bin.bad(
                0,
                format!(
                    "not {}: the first bytes are {:?}, not {:?}",
                    file.file_name()
                        .map_or("a table file".into(), |n| n.to_string_lossy()),
                    String::from_utf8_lossy(m),
                    String::from_utf8_lossy(magic)
                ),
            ));
        }
        Ok(bin)
    }

    fn short(&self, s: Short) -> Error {
        let left = self.r.b.len().saturating_sub(s.at);
        self.bad(
            s.at,
            format!(
                "truncated: {} does not fit in the {left} bytes left",
                s.what
            ),
        )
    }

    pub(crate) fn bad(&self, at: usize, cause: impl Into<String>) -> Error {
        Error::Binary(BinaryError {
            file: self.file.to_path_buf(),
            offset: at as u64,
            cause: cause.into(),
        })
    }

    pub(crate) fn at(&self) -> usize {
        self.r.at
    }

    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Error> {
        self.r.take(n, what).map_err(|s| self.short(s))
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, Error> {
        self.r.u8(what).map_err(|s| self.short(s))
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, Error> {
        self.r.u16(what).map_err(|s| self.short(s))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, Error> {
        self.r.u32(what).map_err(|s| self.short(s))
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, Error> {
        self.r.u64(what).map_err(|s| self.short(s))
    }

    /// `n` bytes that must be zero (reserved for later versions).
    pub(crate) fn zero(&mut self, n: usize, what: &'static str) -> Result<(), Error> {
        let at = self.at();
        if self.take(n, what)?.iter().any(|&b| b != 0) {
            return Err(self.bad(at, format!("{what} is not zero")));
        }
        Ok(())
    }

    /// A count of records of `size` bytes each that must fit in the bytes
    /// left, so that a corrupted count is refused before anything is
    /// allocated for it.
    pub(crate) fn count(&mut self, size: usize, what: &'static str) -> Result<usize, Error> {
        let at = self.at();
        let n = self.u32(what)? as usize;
        if n.checked_mul(size).is_none_or(|b| b > self.r.left()) {
            return Err(self.bad(
                at,
                format!(
                    "{what} {n} of {size} bytes each does not fit in the {} bytes left",
                    self.r.left()
                ),
            ));
        }
        Ok(n)
    }

    /// A GUID that must come after `last` (records sorted by GUID, each
    /// once); returns it with its offset.
    pub(crate) fn next_guid(
        &mut self,
        last: &mut Option<u64>,
        what: &'static str,
    ) -> Result<(usize, u64), Error> {
        let at = self.at();
        let g = self.u64(what)?;
        if last.is_some_and(|l| l >= g) {
            return Err(self.bad(at, format!("{what} 0x{g:016x} out of order or twice")));
        }
        *last = Some(g);
        Ok((at, g))
    }

    /// The next switch record's GUID, as a switch index of the topology.
    pub(crate) fn next_switch(
        &mut self,
        switches: &Switches,
        last: &mut Option<u64>,
    ) -> Result<u32, Error> {
        let (at, g) = self.next_guid(last, "switch GUID")?;
        switches.0.get(&g).copied().ok_or_else(|| {
            self.bad(
                at,
                format!("switch GUID 0x{g:016x} is not a switch of the topology"),
            )
        })
    }

    /// The file must end here.
    pub(crate) fn end(&self) -> Result<(), Error> {
        match self.r.left() {
            0 => Ok(()),
            n => Err(self.bad(self.at(), format!("{n} bytes after the last section"))),
        }
    }
}

/// The topology's switches by node GUID.
pub(crate) struct Switches(std::collections::HashMap<u64, u32>);

impl Switches {
    pub(crate) fn of(f: &crate::model::Fabric) -> Self {
        Switches(
            f.switches()
                .iter()
                .filter_map(|&s| Some((f.guid(s), f.switch_index(s)?)))
                .collect(),
        )
    }
}

/// Whether the file at `path` begins with `magic` (a compact file, as
/// opposed to OpenSM's text); false when it cannot be read.
pub fn has_magic(path: &Path, magic: &[u8; 8]) -> bool {
    use std::io::Read;
    let mut head = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == magic)
}

/// Reads a whole table file (the set's manifest has checked its size and
/// digest, or the caller reads it on purpose without).
pub(crate) fn read_bytes(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::io(path, e))
}
