//! Routing output: linear forwarding tables, SL-to-VL tables and path SLs,
//! in dense arrays indexed by switch index, LID and port.

use crate::model::{Fabric, NodeKind, Slot};

/// LFT entry meaning "no route" (OpenSM's OSM_NO_PATH).
pub const NO_PATH: u8 = 0xFF;
/// IB SLs and VLs per table row.
pub const NUM_SLS: usize = 16;

/// One LFT per switch, `width = max_lid + 1` bytes each, row = switch index.
#[derive(Debug, PartialEq, Eq)]
pub struct Lfts {
    width: usize,
    data: Vec<u8>,
}

impl Clone for Lfts {
    /// Copies large tables on the idle threads of the pool too: a subnet
    /// near the LID limit holds tens of megabytes of LFTs, and a fresh
    /// allocation that size costs a page fault per 4 KiB, which a single
    /// copy pays one after the other.
    fn clone(&self) -> Self {
        use rayon::prelude::*;
        const CHUNK: usize = 1 << 20;
        if self.data.len() < 4 * CHUNK {
            return Self {
                width: self.width,
                data: self.data.clone(),
            };
        }
        let mut data = vec![0u8; self.data.len()];
        data.par_chunks_mut(CHUNK)
            .zip(self.data.par_chunks(CHUNK))
            .for_each(|(d, s)| d.copy_from_slice(s));
        Self {
            width: self.width,
            data,
        }
    }
}

impl Lfts {
    pub fn new(num_switches: usize, max_lid: u16) -> Self {
        let width = max_lid as usize + 1;
        Self {
            width,
            data: vec![NO_PATH; num_switches * width],
        }
    }
    pub fn for_fabric(f: &Fabric) -> Self {
        Self::new(f.switches().len(), f.max_lid())
    }
    pub fn width(&self) -> usize {
        self.width
    }
    pub fn num_switches(&self) -> usize {
        self.data.len().checked_div(self.width).unwrap_or(0)
    }
    /// Out port of switch index `sw` toward `lid`, [`NO_PATH`] if none.
    #[inline]
    pub fn get(&self, sw: u32, lid: u16) -> u8 {
        self.data
            .get(sw as usize * self.width + lid as usize)
            .copied()
            .unwrap_or(NO_PATH)
    }
    #[inline]
    pub fn set(&mut self, sw: u32, lid: u16, port: u8) {
        self.data[sw as usize * self.width + lid as usize] = port;
    }
    pub fn row(&self, sw: u32) -> &[u8] {
        &self.data[sw as usize * self.width..(sw as usize + 1) * self.width]
    }
    pub fn row_mut(&mut self, sw: u32) -> &mut [u8] {
        &mut self.data[sw as usize * self.width..(sw as usize + 1) * self.width]
    }
    /// [`Self::lid_columns`] of destination LIDs (a port and one of its
    /// LIDs, as `Fabric::end_lids` lists them).
    pub fn columns(&self, dests: &[(Slot, u16)]) -> Vec<u8> {
        let lids: Vec<u16> = dests.iter().map(|&(_, l)| l).collect();
        self.lid_columns(&lids)
    }
    /// LFT columns of the LIDs `lids`: for each, a contiguous run of one
    /// entry per switch index. Walks toward one destination then read a
    /// few KB instead of one cache line per switch.
    pub fn lid_columns(&self, lids: &[u16]) -> Vec<u8> {
        use rayon::prelude::*;
        let nsw = self.num_switches();
        let mut cols = vec![NO_PATH; lids.len() * nsw];
        // Blocks of 64 destinations: each row is read once per block.
        cols.par_chunks_mut((64 * nsw).max(1))
            .enumerate()
            .for_each(|(bi, block)| {
                let lids = &lids[bi * 64..(bi * 64 + 64).min(lids.len())];
                for si in 0..nsw {
                    let row = self.row(si as u32);
                    for (k, &lid) in lids.iter().enumerate() {
                        block[k * nsw + si] = row.get(lid as usize).copied().unwrap_or(NO_PATH);
                    }
                }
            });
        cols
    }
    /// Where the entries are stored: it stays with the tables when they
    /// move, so two equal ids (of non-empty tables) are one set of tables.
    pub fn storage_id(&self) -> usize {
        self.data.as_ptr() as usize
    }
    /// Mutable rows for parallel fill (one per switch index).
    pub fn par_rows_mut(&mut self) -> rayon::slice::ChunksMut<'_, u8> {
        use rayon::slice::ParallelSliceMut;
        let w = self.width.max(1);
        self.data.par_chunks_mut(w)
    }
}

/// SL-to-VL tables: per switch a `(ports+1) x (ports+1) x 16` cube
/// (in port, out port, SL), and one 16-entry row per CA/router port (what
/// the port uses to inject). All entries start at VL 0.
///
/// The rows are shared between clones until one changes (copy on write):
/// a reroute keeps the SL-to-VL tables in force, and a subnet near the LID
/// limit holds tens of megabytes of them, which each of its new tables
/// (and a drain stage) would otherwise copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sl2Vl {
    sw_off: Vec<usize>,
    sw_dim: Vec<u16>,
    sw: std::sync::Arc<Vec<u8>>,
    port: std::sync::Arc<Vec<[u8; NUM_SLS]>>,
}

impl Sl2Vl {
    pub fn new(f: &Fabric) -> Self {
        let mut sw_off = Vec::with_capacity(f.switches().len() + 1);
        let mut sw_dim = Vec::with_capacity(f.switches().len());
        let mut total = 0usize;
        for &s in f.switches() {
            let dim = f.num_ports(s) as usize + 1;
            sw_off.push(total);
            sw_dim.push(dim as u16);
            total += dim * dim * NUM_SLS;
        }
        sw_off.push(total);
        Self {
            sw_off,
            sw_dim,
            sw: std::sync::Arc::new(vec![0; total]),
            port: std::sync::Arc::new(vec![[0; NUM_SLS]; f.num_slots()]),
        }
    }
    #[inline]
    fn idx(&self, sw: u32, inp: u8, out: u8, sl: u8) -> usize {
        let d = self.sw_dim[sw as usize] as usize;
        // Rows sharing an out port sit together: a destination uses one out
        // port per switch, so its routes touch one block per switch.
        self.sw_off[sw as usize] + ((out as usize * d + inp as usize) * NUM_SLS) + sl as usize
    }
    /// VL a packet with `sl` gets on `out` of switch index `sw` after entering on `inp`.
    #[inline]
    pub fn switch_vl(&self, sw: u32, inp: u8, out: u8, sl: u8) -> u8 {
        self.sw[self.idx(sw, inp, out, sl)]
    }
    pub fn set_switch_row(&mut self, sw: u32, inp: u8, out: u8, vls: [u8; NUM_SLS]) {
        let i = self.idx(sw, inp, out, 0);
        std::sync::Arc::make_mut(&mut self.sw)[i..i + NUM_SLS].copy_from_slice(&vls);
    }
    pub fn switch_row(&self, sw: u32, inp: u8, out: u8) -> [u8; NUM_SLS] {
        let i = self.idx(sw, inp, out, 0);
        let mut r = [0; NUM_SLS];
        r.copy_from_slice(&self.sw[i..i + NUM_SLS]);
        r
    }
    /// Offset of the 16-entry row (sw, inp, out) in [`Sl2Vl::raw_mut`].
    #[inline]
    pub fn row_offset(&self, sw: u32, inp: u8, out: u8) -> usize {
        self.idx(sw, inp, out, 0)
    }
    /// All switch rows, for engines that fill tables entry by entry.
    pub fn raw_mut(&mut self) -> &mut [u8] {
        std::sync::Arc::make_mut(&mut self.sw).as_mut_slice()
    }
    /// Injection VL of a CA/router port for `sl`.
    #[inline]
    pub fn port_vl(&self, slot: Slot, sl: u8) -> u8 {
        self.port[slot as usize][sl as usize]
    }
    pub fn set_port_row(&mut self, slot: Slot, vls: [u8; NUM_SLS]) {
        std::sync::Arc::make_mut(&mut self.port)[slot as usize] = vls;
    }
    pub fn port_row(&self, slot: Slot) -> [u8; NUM_SLS] {
        self.port[slot as usize]
    }
    /// Highest VL in any row that can carry traffic.
    pub fn max_vl(&self) -> u8 {
        let a = self.sw.iter().copied().max().unwrap_or(0);
        let b = self
            .port
            .iter()
            .flat_map(|r| r.iter().copied())
            .max()
            .unwrap_or(0);
        a.max(b)
    }
}

/// SL per (source LID, destination LID). Rows are deduplicated: sources
/// whose SLs agree for every destination (typically hosts on one switch)
/// share a row, which keeps large subnets in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSl {
    width: usize,
    /// Row index per source LID; `u32::MAX` = no row (SL 0 everywhere).
    row_of: Vec<u32>,
    /// Shared between clones until one changes (copy on write): a reroute
    /// clones the tables in force and changes few SLs, often none, and
    /// a subnet near the LID limit holds tens of megabytes of rows.
    rows: std::sync::Arc<Vec<u8>>,
}

/// Marker for "this source has no path to that destination" in a row.
pub const SL_NONE: u8 = 0xFF;

impl PathSl {
    pub fn new(max_lid: u16) -> Self {
        let width = max_lid as usize + 1;
        Self {
            width,
            row_of: vec![u32::MAX; width],
            rows: Default::default(),
        }
    }
    pub fn width(&self) -> usize {
        self.width
    }
    /// Adds a row (one SL per destination LID, [`SL_NONE`] for no path) and
    /// returns its index; give the same index to several sources to share it.
    pub fn push_row(&mut self, row: &[u8]) -> u32 {
        debug_assert_eq!(row.len(), self.width);
        let i = (self.rows.len() / self.width.max(1)) as u32;
        std::sync::Arc::make_mut(&mut self.rows).extend_from_slice(row);
        i
    }
    pub fn row_mut(&mut self, row: u32) -> &mut [u8] {
        let s = row as usize * self.width;
        &mut std::sync::Arc::make_mut(&mut self.rows)[s..s + self.width]
    }
    pub fn assign(&mut self, src_lid: u16, row: u32) {
        self.row_of[src_lid as usize] = row;
    }
    pub fn row_of(&self, src_lid: u16) -> Option<&[u8]> {
        match self.row_of.get(src_lid as usize) {
            Some(&r) if r != u32::MAX => {
                let s = r as usize * self.width;
                Some(&self.rows[s..s + self.width])
            }
            _ => None,
        }
    }
    /// SL for a pair: the row's value, 0 when the source has no row.
    #[inline]
    pub fn get(&self, src: u16, dst: u16) -> u8 {
        match self.row_of(src) {
            Some(r) => r.get(dst as usize).copied().unwrap_or(SL_NONE),
            None => 0,
        }
    }
    /// Sets one pair's SL; a row other sources share is copied first, so
    /// only this source changes. A source without a row gets one (SL 0
    /// elsewhere, as before).
    pub fn set_pair(&mut self, src: u16, dst: u16, sl: u8) {
        if src as usize >= self.row_of.len() || dst as usize >= self.width {
            return;
        }
        let r = self.row_of[src as usize];
        let shared = r == u32::MAX
            || self
                .row_of
                .iter()
                .enumerate()
                .any(|(l, &x)| x == r && l != src as usize);
        let r = if shared {
            let row = match self.row_of(src) {
                Some(row) => row.to_vec(),
                None => vec![0; self.width],
            };
            let i = self.push_row(&row);
            self.assign(src, i);
            i
        } else {
            r
        };
        self.row_mut(r)[dst as usize] = sl;
    }
    pub fn num_rows(&self) -> usize {
        self.rows.len().checked_div(self.width).unwrap_or(0)
    }
    /// Every row, one after the other (the compact file's body).
    pub(crate) fn raw_rows(&self) -> &[u8] {
        &self.rows
    }
    /// The table from its parts as [`PathSl::raw_rows`] and the row map
    /// give them; the caller has checked that each row index is in range.
    pub(crate) fn from_raw(width: usize, row_of: Vec<u32>, rows: Vec<u8>) -> Self {
        Self {
            width,
            row_of,
            rows: std::sync::Arc::new(rows),
        }
    }
    /// Row index of a source LID, `None` when it has no row (SL 0).
    pub fn row_index(&self, src_lid: u16) -> Option<u32> {
        self.row_of
            .get(src_lid as usize)
            .copied()
            .filter(|&r| r != u32::MAX)
    }
    /// Destination-major copy: for each LID of `dlids`, one SL per row.
    pub fn columns(&self, dlids: &[u16]) -> Vec<u8> {
        use rayon::prelude::*;
        let nr = self.num_rows();
        let mut cols = vec![SL_NONE; dlids.len() * nr];
        cols.par_chunks_mut((64 * nr).max(1))
            .enumerate()
            .for_each(|(bi, block)| {
                let lids = &dlids[bi * 64..(bi * 64 + 64).min(dlids.len())];
                for r in 0..nr {
                    let row = &self.rows[r * self.width..(r + 1) * self.width];
                    for (k, &lid) in lids.iter().enumerate() {
                        block[k * nr + r] = row.get(lid as usize).copied().unwrap_or(SL_NONE);
                    }
                }
            });
        cols
    }
    pub fn sources(&self) -> impl Iterator<Item = u16> + '_ {
        self.row_of
            .iter()
            .enumerate()
            .filter(|&(_, &r)| r != u32::MAX)
            .map(|(l, _)| l as u16)
    }
    /// Whether `other` holds the very same SLs because neither changed
    /// since one was cloned from the other: a check in constant time
    /// (besides the row map) where comparing rows reads megabytes.
    pub fn same_rows_as(&self, other: &PathSl) -> bool {
        std::sync::Arc::ptr_eq(&self.rows, &other.rows) && self.row_of == other.row_of
    }
    /// Which SLs some source's row uses, each row read once however many
    /// sources share it.
    pub fn sls_used(&self) -> [bool; NUM_SLS] {
        let mut read = vec![false; self.num_rows()];
        let mut seen = [false; 256];
        for &r in &self.row_of {
            if let Some(done) = read.get_mut(r as usize).filter(|d| !**d) {
                *done = true;
                let s = r as usize * self.width;
                for &b in &self.rows[s..s + self.width] {
                    seen[b as usize] = true;
                }
            }
        }
        std::array::from_fn(|i| seen[i])
    }
    pub fn distinct_sls(&self) -> usize {
        let mut seen = [false; 256];
        for &b in self.rows.iter() {
            seen[b as usize] = true;
        }
        seen[..NUM_SLS].iter().filter(|&&x| x).count()
    }
}

/// Everything an engine emits for one subnet.
#[derive(Debug, Clone)]
pub struct Routing {
    pub lfts: Lfts,
    /// `None`: the engine leaves SL-to-VL alone (all traffic on VL 0).
    pub sl2vl: Option<Sl2Vl>,
    /// `None`: every pair uses SL 0 (no `path-sl.txt` is written).
    pub path_sl: Option<PathSl>,
    /// VLs deadlock freedom needs, when the engine then spreads routes over
    /// more (DF-SSSP balances its layers over every VL it may use).
    pub vls_needed: Option<u8>,
}

impl Routing {
    /// Every table byte in a fixed order (LFT rows, SL-to-VL cubes and
    /// injection rows, path-SL row map and rows), for digests that tell
    /// whether two routings are identical.
    pub fn for_each_table_chunk(&self, mut f: impl FnMut(&[u8])) {
        f(&self.lfts.data);
        if let Some(t) = &self.sl2vl {
            f(&t.sw);
            for r in t.port.iter() {
                f(r);
            }
        }
        if let Some(p) = &self.path_sl {
            for r in &p.row_of {
                f(&r.to_le_bytes());
            }
            f(&p.rows);
        }
    }

    /// VL of a hop by these tables' SL-to-VL cubes: a packet with `sl`
    /// leaving switch index `si` on `out` after entering on `inp` (VL 0
    /// everywhere when the engine left SL-to-VL alone).
    #[inline]
    pub fn switch_vl(&self, si: u32, inp: u8, out: u8, sl: u8) -> u8 {
        self.sl2vl
            .as_ref()
            .map_or(0, |t| t.switch_vl(si, inp, out, sl))
    }

    /// Injection VL of a CA/router port for `sl` (VL 0 without SL-to-VL
    /// tables).
    #[inline]
    pub fn port_vl(&self, slot: Slot, sl: u8) -> u8 {
        self.sl2vl.as_ref().map_or(0, |t| t.port_vl(slot, sl))
    }

    pub fn lfts_only(lfts: Lfts) -> Self {
        Self {
            lfts,
            sl2vl: None,
            path_sl: None,
            vls_needed: None,
        }
    }
}

/// True when a slot is an end port (CA or router) that traffic starts or ends at.
pub fn is_end_port(f: &Fabric, s: Slot) -> bool {
    f.kind(f.node_of(s)) != NodeKind::Switch
}

/// Why bytes are not a routing of the fabric at hand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("not an ibfabric table blob (bad magic)")]
    Magic,
    #[error("the table blob ends early (at byte {0})")]
    Short(usize),
    #[error("the table blob is for another fabric: {0}")]
    Shape(String),
}

const WIRE_MAGIC: &[u8; 8] = b"IBFTBL03";

impl Routing {
    /// The tables as bytes, for a worker that verifies or routes a part of
    /// them: raw rows, no text. [`Routing::from_bytes`] reads them back on
    /// the same fabric (it checks every dimension against it).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode(true)
    }

    /// [`Routing::to_bytes`] without the LFTs and the path-SL rows (their
    /// shapes kept): what a worker needs besides the columns of its parts
    /// (`verify::part_columns`). The tables read back have no LFT entry
    /// and SL 0 rows.
    pub fn to_bytes_base(&self) -> Vec<u8> {
        self.encode(false)
    }

    fn encode(&self, columns: bool) -> Vec<u8> {
        fn put(out: &mut Vec<u8>, b: &[u8]) {
            out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
        }
        let mut out = Vec::with_capacity(
            self.lfts.data.len() + self.path_sl.as_ref().map_or(0, |p| p.rows.len()) + 64,
        );
        out.extend_from_slice(WIRE_MAGIC);
        out.extend_from_slice(&(self.lfts.width as u64).to_le_bytes());
        out.push(u8::from(columns));
        if columns {
            put(&mut out, &self.lfts.data);
        }
        match &self.sl2vl {
            None => out.push(0),
            Some(t) => {
                out.push(1);
                // Most (in, out) rows carry no VL (3 in 4 under DF-DN on a
                // Dragonfly): only the others travel, with their index.
                let rows: Vec<(u32, &[u8])> =
                    t.sw.chunks_exact(NUM_SLS)
                        .enumerate()
                        .filter(|(_, r)| r.iter().any(|&v| v != 0))
                        .map(|(i, r)| (i as u32, r))
                        .collect();
                out.extend_from_slice(&(rows.len() as u64).to_le_bytes());
                for (i, r) in rows {
                    out.extend_from_slice(&i.to_le_bytes());
                    out.extend_from_slice(r);
                }
                let ports: Vec<u8> = t.port.iter().flatten().copied().collect();
                put(&mut out, &ports);
            }
        }
        match &self.path_sl {
            None => out.push(0),
            Some(p) => {
                out.push(1);
                out.extend_from_slice(&(p.width as u64).to_le_bytes());
                let rows: Vec<u8> = p.row_of.iter().flat_map(|r| r.to_le_bytes()).collect();
                put(&mut out, &rows);
                out.extend_from_slice(&(p.num_rows() as u64).to_le_bytes());
                out.push(u8::from(columns));
                if columns {
                    put(&mut out, &p.rows);
                }
            }
        }
        out.push(self.vls_needed.unwrap_or(0));
        out
    }

    /// Reads [`Routing::to_bytes`] for `f`, refusing bytes whose shapes do
    /// not fit it.
    pub fn from_bytes(f: &Fabric, b: &[u8]) -> Result<Routing, WireError> {
        let mut at = 0usize;
        let take = |at: &mut usize, n: usize| -> Result<&[u8], WireError> {
            let end = at.checked_add(n).ok_or(WireError::Short(*at))?;
            let s = b.get(*at..end).ok_or(WireError::Short(*at))?;
            *at = end;
            Ok(s)
        };
        let u64_at = |at: &mut usize| -> Result<u64, WireError> {
            let s = take(at, 8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            Ok(u64::from_le_bytes(a))
        };
        let blob = |at: &mut usize| -> Result<Vec<u8>, WireError> {
            let n = u64_at(at)? as usize;
            Ok(take(at, n)?.to_vec())
        };
        if take(&mut at, 8)? != WIRE_MAGIC {
            return Err(WireError::Magic);
        }
        let shape = |what: &str, got: usize, want: usize| {
            if got == want {
                Ok(())
            } else {
                Err(WireError::Shape(format!(
                    "{what}: {got}, the fabric needs {want}"
                )))
            }
        };
        let mut lfts = Lfts::for_fabric(f);
        let width = u64_at(&mut at)? as usize;
        shape("LFT width", width, lfts.width)?;
        if take(&mut at, 1)?[0] != 0 {
            let data = blob(&mut at)?;
            shape("LFT bytes", data.len(), lfts.data.len())?;
            lfts.data = data;
        }
        let sl2vl = match take(&mut at, 1)?[0] {
            0 => None,
            _ => {
                let mut t = Sl2Vl::new(f);
                let n_rows = t.sw.len() / NUM_SLS;
                let count = u64_at(&mut at)? as usize;
                if count > n_rows {
                    return Err(WireError::Shape(format!(
                        "{count} SL-to-VL rows, the fabric has {n_rows}"
                    )));
                }
                let mut sw = vec![0u8; t.sw.len()];
                for _ in 0..count {
                    let i = take(&mut at, 4)?;
                    let i = u32::from_le_bytes([i[0], i[1], i[2], i[3]]) as usize;
                    if i >= n_rows {
                        return Err(WireError::Shape(format!("SL-to-VL row {i} of {n_rows}")));
                    }
                    sw[i * NUM_SLS..(i + 1) * NUM_SLS].copy_from_slice(take(&mut at, NUM_SLS)?);
                }
                let ports = blob(&mut at)?;
                shape("SL-to-VL port bytes", ports.len(), t.port.len() * NUM_SLS)?;
                t.sw = std::sync::Arc::new(sw);
                for (row, chunk) in std::sync::Arc::make_mut(&mut t.port)
                    .iter_mut()
                    .zip(ports.chunks_exact(NUM_SLS))
                {
                    row.copy_from_slice(chunk);
                }
                Some(t)
            }
        };
        let path_sl = match take(&mut at, 1)?[0] {
            0 => None,
            _ => {
                let mut p = PathSl::new(f.max_lid());
                let w = u64_at(&mut at)? as usize;
                shape("path-SL width", w, p.width)?;
                let row_of = blob(&mut at)?;
                shape("path-SL sources", row_of.len(), p.row_of.len() * 4)?;
                let n_rows = u64_at(&mut at)? as usize;
                let rows = if take(&mut at, 1)?[0] != 0 {
                    blob(&mut at)?
                } else {
                    // Bounded by what the sources can name: one row each.
                    if n_rows > p.row_of.len() {
                        return Err(WireError::Shape(format!(
                            "path-SL: {n_rows} rows for {} sources",
                            p.row_of.len()
                        )));
                    }
                    vec![0; n_rows * w]
                };
                shape("path-SL rows", rows.len(), n_rows * w)?;
                if !rows.len().is_multiple_of(w.max(1)) {
                    return Err(WireError::Shape(format!(
                        "path-SL rows: {} bytes is not a multiple of {w}",
                        rows.len()
                    )));
                }
                for (i, c) in row_of.chunks_exact(4).enumerate() {
                    let r = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    if r != u32::MAX && r as usize >= n_rows {
                        return Err(WireError::Shape(format!(
                            "path-SL source LID {i} names row {r} of {n_rows}"
                        )));
                    }
                    p.row_of[i] = r;
                }
                p.rows = std::sync::Arc::new(rows);
                Some(p)
            }
        };
        let vls_needed = match take(&mut at, 1)?[0] {
            0 => None,
            v => Some(v),
        };
        if at != b.len() {
            return Err(WireError::Shape(format!(
                "{} bytes after the tables",
                b.len() - at
            )));
        }
        Ok(Routing {
            lfts,
            sl2vl,
            path_sl,
            vls_needed,
        })
    }
}

#[cfg(test)]
mod wire_tests {
    use super::*;
    use crate::generate::{Topology, generate};
    use crate::routing::{EngineKind, EngineOptions};

    #[test]
    fn tables_round_trip_and_foreign_bytes_are_refused() {
        let f = generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("df");
        for e in [EngineKind::Dfdn, EngineKind::Minhop, EngineKind::Nue] {
            let r = e
                .engine()
                .route(&f, &EngineOptions::default())
                .expect("routed");
            let b = r.to_bytes();
            let back = Routing::from_bytes(&f, &b).expect("reads back");
            assert_eq!(back.lfts, r.lfts, "{e}");
            assert_eq!(back.path_sl, r.path_sl, "{e}");
            assert_eq!(back.vls_needed, r.vls_needed, "{e}");
            assert_eq!(back.sl2vl, r.sl2vl, "{e}");
            assert!(matches!(
                Routing::from_bytes(&f, &b[..b.len() - 3]),
                Err(WireError::Short(_))
            ));
        }
        let other = generate(&Topology::Dragonfly { p: 3, hosts: None }).expect("df3");
        let r = EngineKind::Dfdn
            .engine()
            .route(&f, &EngineOptions::default())
            .expect("routed");
        assert!(matches!(
            Routing::from_bytes(&other, &r.to_bytes()),
            Err(WireError::Shape(_))
        ));
        assert_eq!(
            Routing::from_bytes(&f, b"nonsense").err(),
            Some(WireError::Magic)
        );
        // The base: shapes and SL-to-VL kept, no LFT entry, SL 0 rows.
        let base = Routing::from_bytes(&f, &r.to_bytes_base()).expect("base reads back");
        assert_eq!(base.lfts, Lfts::for_fabric(&f));
        assert_eq!(base.sl2vl, r.sl2vl);
        let (p, q) = (
            base.path_sl.expect("rows"),
            r.path_sl.as_ref().expect("rows"),
        );
        assert_eq!(p.num_rows(), q.num_rows());
        assert!(r.to_bytes_base().len() < r.to_bytes().len());
    }
}
