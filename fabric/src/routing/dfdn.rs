//! DF-DN (Domke, Hoefler, Matsuoka, HPDC'16, section V): keep a minimal
//! base routing and make it deadlock free by raising the VL by one at every
//! switch-to-switch hop. The SL-to-VL table of a switch only sees (in port,
//! out port, SL), so each route gets an SL whose entries along the route are
//! either unset or already hold the VL the route needs there; the route then
//! claims them. VLs used equal the longest route in switch hops (the
//! diameter for minimal routing); the first hop of every route uses VL 0.
//!
//! Work is per (source switch, destination LID): hosts on one switch share
//! every switch-to-switch hop, so they share the SL too (one path-SL row per
//! switch). Routes are walked in parallel, one batch of destinations at a
//! time; the SL choice then runs in a fixed order so the result does not
//! depend on thread timing.

use super::{EngineOptions, RoutingEngine};
use crate::error::{Error, Result};
use crate::model::{Fabric, NodeKind, Slot, NONE};
use crate::tables::{Lfts, PathSl, Routing, Sl2Vl, NO_PATH, SL_NONE};
use rayon::prelude::*;

pub struct DfDn;

fn fail(reason: String) -> Error {
    Error::Routing {
        engine: "dfdn".into(),
        reason,
    }
}

impl RoutingEngine for DfDn {
    fn name(&self) -> &'static str {
        "dfdn"
    }
    fn description(&self) -> &'static str {
        "DF-DN: any minimal routing made deadlock free by raising the VL per hop (VLs = diameter); --base minhop|sssp"
    }
    fn claims_deadlock_free(&self) -> bool {
        true
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        let lfts = opts.base_lfts(f)?;
        let (sl2vl, path_sl) = assign_vls(f, &lfts, opts)?;
        Ok(Routing {
            lfts,
            sl2vl: Some(sl2vl),
            path_sl: Some(path_sl),
        })
    }
}

/// Destinations per batch: large enough to keep both cores busy walking,
/// small enough to keep the constraint buffers in cache.
const BATCH: usize = 128;

/// Computes SL-to-VL tables and path SLs that make `lfts` deadlock free.
pub fn assign_vls(f: &Fabric, lfts: &Lfts, opts: &EngineOptions) -> Result<(Sl2Vl, PathSl)> {
    let nsw = f.switches().len();
    let max_vls = opts.max_vls.clamp(1, 15);
    let max_sls = opts.max_sls.clamp(1, 16);
    let mut sl2vl = Sl2Vl::new(f);
    let mut path_sl = PathSl::new(f.max_lid());

    // Source switches (those with end ports) and their path-SL rows.
    let mut row_of_switch = vec![u32::MAX; nsw];
    let mut sources: Vec<u32> = Vec::new();
    let blank = vec![SL_NONE; path_sl.width()];
    for &e in f.endports() {
        let r = f.remote(e);
        let Some(si) = f.switch_index(f.node_of(r)) else {
            return Err(fail(format!(
                "end port of '{}' is not linked to a switch",
                f.desc(f.node_of(e))
            )));
        };
        if row_of_switch[si as usize] == u32::MAX {
            row_of_switch[si as usize] = path_sl.push_row(&blank);
            sources.push(si);
        }
        path_sl.assign(f.lid_of_slot(e), row_of_switch[si as usize]);
    }
    sources.sort_unstable();
    let dests: Vec<Slot> = f.endports().to_vec();
    let topo = Topo::new(f);

    let mut done = 0u64;
    let total = dests.len() as u64;
    let mut used_vls = 0u8;
    let (mut t_walk, mut t_pick) = (0f64, 0f64);
    let mut picked: Vec<u8> = Vec::new();
    for batch in dests.chunks(BATCH) {
        let t0 = std::time::Instant::now();
        // Parallel: walk every route of the batch and list, per route, the
        // SL-to-VL rows it crosses and the VL it needs in each.
        let cols = lfts.columns(f, batch);
        let walked: Vec<Vec<u64>> = batch
            .par_iter()
            .enumerate()
            .map(|(k, &d)| {
                walk_routes(
                    f,
                    &topo,
                    &sl2vl,
                    &cols[k * nsw..(k + 1) * nsw],
                    d,
                    &sources,
                    max_vls,
                )
            })
            .collect::<Result<_>>()?;
        t_walk += t0.elapsed().as_secs_f64();
        let t0 = std::time::Instant::now();
        // Sequential: choose SLs in a fixed order. SLs go to a
        // destination-major buffer first; the path-SL rows are source-major,
        // and writing them column by column would miss the cache every time.
        let raw = sl2vl.raw_mut();
        let nsrc = sources.len();
        picked.clear();
        picked.resize(batch.len() * nsrc, 0);
        for (k, (&d, routes)) in batch.iter().zip(&walked).enumerate() {
            let mut pos = 0usize;
            for (j, &src) in sources.iter().enumerate() {
                let n = routes[pos] as usize;
                let entries = &routes[pos + 1..pos + 1 + n];
                pos += 1 + n;
                let mut mask: u32 = (1u32 << max_sls) - 1;
                for &e in entries {
                    let off = (e >> 8) as usize;
                    mask &= ok_mask(&raw[off..off + 16], (e & 0xff) as u8);
                }
                if mask == 0 {
                    return Err(fail(format!(
                        "not enough SLs: the route from switch '{}' to LID {} finds none of the {max_sls} SLs free (--max-sls {max_sls})",
                        f.desc(f.switches()[src as usize]),
                        f.lid_of_slot(d)
                    )));
                }
                let sl = mask.trailing_zeros() as usize;
                for &e in entries {
                    let need = (e & 0xff) as u8;
                    raw[(e >> 8) as usize + sl] = need;
                    used_vls = used_vls.max(need + 1);
                }
                picked[k * nsrc + j] = sl as u8;
            }
        }
        let dlids: Vec<usize> = batch.iter().map(|&d| f.lid_of_slot(d) as usize).collect();
        for (j, &src) in sources.iter().enumerate() {
            let row = path_sl.row_mut(row_of_switch[src as usize]);
            for (k, &dl) in dlids.iter().enumerate() {
                row[dl] = picked[k * nsrc + j];
            }
        }
        t_pick += t0.elapsed().as_secs_f64();
        done += batch.len() as u64;
        opts.report(done, total);
    }
    tracing::debug!(
        vls = used_vls.max(1),
        sls = path_sl.distinct_sls(),
        t_walk,
        t_pick,
        "dfdn assigned"
    );
    Ok((sl2vl, path_sl))
}

/// The far end of a channel, packed so one lookup serves a hop.
#[derive(Clone, Copy)]
struct Peer {
    remote: Slot,
    /// Switch index at the far end, `NONE` for an end port or no link.
    sw: u32,
    port: u8,
}

struct Topo {
    peer: Vec<Peer>,
    /// Per switch index: slot of port 0 and port count.
    base: Vec<Slot>,
    nports: Vec<u8>,
}

impl Topo {
    fn new(f: &Fabric) -> Self {
        let peer = (0..f.num_slots() as Slot)
            .map(|s| {
                let r = f.remote(s);
                if r == NONE {
                    return Peer {
                        remote: NONE,
                        sw: NONE,
                        port: 0,
                    };
                }
                let n = f.node_of(r);
                Peer {
                    remote: r,
                    sw: if f.kind(n) == NodeKind::Switch {
                        f.switch_index(n).unwrap_or(NONE)
                    } else {
                        NONE
                    },
                    port: f.port_of(r),
                }
            })
            .collect();
        Self {
            peer,
            base: f.switches().iter().map(|&n| f.slot(n, 0)).collect(),
            nports: f.switches().iter().map(|&n| f.num_ports(n)).collect(),
        }
    }
}

/// SLs (bit per SL) whose entry in a 16-entry row is unset (0) or `need`.
/// Branch-free byte compare on a u128, exact per byte (no borrow between bytes).
#[inline]
fn ok_mask(row: &[u8], need: u8) -> u32 {
    const L7F: u128 = u128::from_le_bytes([0x7f; 16]);
    const L80: u128 = u128::from_le_bytes([0x80; 16]);
    const L01: u128 = u128::from_le_bytes([0x01; 16]);
    let mut b = [0u8; 16];
    b.copy_from_slice(&row[..16]);
    let x = u128::from_le_bytes(b);
    let zero = |v: u128| !(((v & L7F) + L7F) | v) & L80;
    let hits = zero(x) | zero(x ^ (L01 * need as u128));
    // Gather the 16 byte-high bits into 16 mask bits.
    let gather = |h: u64| (((h >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56) as u32;
    gather(hits as u64) | (gather((hits >> 64) as u64) << 8)
}

/// Walks the route from every source switch to end port `d` using its LFT
/// column `col`. Output, per source switch in `sources` order: the count `k`
/// of constrained rows, then `k` entries `(row offset << 8) | VL needed`.
fn walk_routes(
    f: &Fabric,
    topo: &Topo,
    t: &Sl2Vl,
    col: &[u8],
    d: Slot,
    sources: &[u32],
    max_vls: u8,
) -> Result<Vec<u64>> {
    let dlid = f.lid_of_slot(d);
    let mut out = Vec::with_capacity(sources.len() * 3);
    for &src in sources {
        let head_at = out.len();
        out.push(0u64);
        let mut si = src;
        // Switch-to-switch hops taken so far; the next one travels on VL `hops`.
        let mut hops: u8 = 0;
        let mut in_port: u8 = 0;
        loop {
            let port = col[si as usize];
            if port == NO_PATH || port == 0 || port > topo.nports[si as usize] {
                return Err(fail(format!(
                    "the base routing has no route from switch '{}' to LID {dlid}",
                    f.desc(f.switches()[si as usize])
                )));
            }
            let p = topo.peer[(topo.base[si as usize] + port as u32) as usize];
            if p.remote == d {
                break;
            }
            if p.sw == NONE {
                return Err(fail(format!(
                    "the base routing sends LID {dlid} from switch '{}' out of port {port}, which does not lead to it",
                    f.desc(f.switches()[si as usize])
                )));
            }
            if hops >= max_vls {
                return Err(fail(format!(
                    "not enough VLs: a route to LID {dlid} takes more than {max_vls} switch-to-switch hops (--max-vls {max_vls})"
                )));
            }
            if hops > 0 {
                out.push(((t.row_offset(si, in_port, port) as u64) << 8) | hops as u64);
            }
            hops += 1;
            si = p.sw;
            in_port = p.port;
        }
        out[head_at] = (out.len() - head_at - 1) as u64;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::ok_mask;

    #[test]
    fn ok_mask_matches_a_plain_loop() {
        let rows: [[u8; 16]; 4] = [
            [0; 16],
            [1, 2, 0, 3, 1, 1, 0, 2, 15, 14, 0, 1, 2, 3, 4, 5],
            [255, 128, 127, 1, 0, 129, 2, 2, 2, 2, 0, 0, 1, 1, 255, 0],
            [7; 16],
        ];
        for row in rows {
            for need in 0..=15u8 {
                let want: u32 = (0..16)
                    .filter(|&i| row[i] == 0 || row[i] == need)
                    .map(|i| 1 << i)
                    .sum();
                assert_eq!(ok_mask(&row, need), want, "{row:?} need {need}");
            }
        }
    }
}
