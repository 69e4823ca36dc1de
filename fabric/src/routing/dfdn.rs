//! DF-DN (Schneider, Bibartiu, Hoefler, "Ensuring Deadlock-Freedom in
//! Low-Diameter InfiniBand Networks", HOTI'16, section V): keep a minimal
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

use super::paths::{BROKEN, DELIVER, Step, Topo, fill_steps};
use super::{Base, EngineOptions, RoutingEngine};
use crate::error::{Error, Result};
use crate::model::{Fabric, Slot};
use crate::tables::{Lfts, PathSl, Routing, Sl2Vl};
use rayon::prelude::*;

pub struct DfDn;

fn fail(reason: String) -> Error {
    Error::Routing {
        engine: "dfdn".into(),
        reason,
    }
}

impl RoutingEngine for DfDn {
    fn split(&self, opts: &EngineOptions) -> super::Split {
        match opts.base {
            None | Some(Base::Trees) | Some(Base::Auto) => super::Split::DestinationSwitches,
            Some(b) => super::Split::Whole(format!(
                "base {b} balances each destination on counters every earlier destination set, so it is computed in one place"
            )),
        }
    }
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Dfdn
    }
    fn description(&self) -> &'static str {
        "DF-DN: any minimal routing made deadlock free by raising the VL per hop (VLs = diameter); --base trees|auto|sssp|minhop (default: trees, or auto when they load a link over 2x the mean)"
    }
    fn routes_lmc(&self) -> bool {
        true
    }
    fn claims_deadlock_free(&self) -> bool {
        true
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        let lfts = match opts.base {
            // Any minimal base keeps the VL rule, so LMC needs only a base
            // that spreads a port's LIDs.
            _ if f.max_lmc() > 0 => opts.base_lfts(f, opts.lmc_base("dfdn")?)?,
            Some(b) => opts.base_lfts(f, b)?,
            // The trees spread best on Dragonflies and Slim Flies (busiest
            // link 1.1-1.5x the mean) and cost less than MinHop; on fat
            // trees and random graphs they funnel traffic (2.5-95x), where
            // SSSP does far better. SSSP costs more than the rest of DF-DN,
            // so it is only weighed when the trees are lopsided.
            None => opts.trees_or_sssp(f, trees_enough)?,
        };
        let (sl2vl, path_sl) = assign_vls(f, &lfts, opts)?;
        Ok(Routing {
            lfts,
            sl2vl: Some(sl2vl),
            path_sl: Some(path_sl),
            vls_needed: None,
        })
    }
}

/// DF-DN's default base keeps the trees when their busiest link carries
/// at most twice the mean.
pub(crate) fn trees_enough(load: &crate::load::LinkLoad) -> bool {
    load.max as f64 <= 2.0 * load.mean
}

/// Destinations per batch: large enough to keep both cores busy walking,
/// small enough to keep the constraint buffers in cache.
const BATCH: usize = 128;

/// Computes SL-to-VL tables and path SLs that make `lfts` deadlock free.
pub fn assign_vls(f: &Fabric, lfts: &Lfts, opts: &EngineOptions) -> Result<(Sl2Vl, PathSl)> {
    let t_start = std::time::Instant::now();
    let nsw = f.switches().len();
    let max_vls = opts.max_vls.clamp(1, 15);
    let max_sls = opts.max_sls.clamp(1, 16);
    let mut sl2vl = Sl2Vl::new(f);
    let mut path_sl = PathSl::new(f.max_lid());

    let src = super::paths::sources(f, "dfdn", &mut path_sl)?;
    let (sources, row_of_switch) = (src.switches, src.row_of_switch);
    // Every LID of every end port (LMC: 2^LMC per port) is a destination.
    let dests: Vec<(Slot, u16)> = f.end_lids().to_vec();
    let topo = Topo::new(f);
    if topo.cube_rows >= 1 << 28 {
        return Err(fail(format!(
            "{} switch turns are more than DF-DN's route encoding holds (2^28)",
            topo.cube_rows
        )));
    }

    let t_setup = t_start.elapsed().as_secs_f64();
    let total = dests.len() as u64;
    let mut picker = Picker {
        cube: vec![0u8; topo.cube_rows * 16],
        picked: Vec::new(),
        used_vls: 0,
        max_sls,
    };
    let walk = |batch: &[(Slot, u16)]| -> Result<Vec<Vec<u32>>> {
        let cols = lfts.columns(batch);
        batch
            .par_iter()
            .enumerate()
            .map_init(Vec::new, |steps, (k, &d)| {
                walk_routes(
                    f,
                    &topo,
                    steps,
                    &cols[k * nsw..(k + 1) * nsw],
                    d,
                    &sources,
                    max_vls,
                )
            })
            .collect()
    };
    // Pipeline: while one batch's SLs are picked (sequential, fixed order),
    // the next batch's routes are walked on the other core.
    let batches: Vec<&[(Slot, u16)]> = dests.chunks(BATCH).collect();
    let mut next = match batches.first() {
        Some(b) => walk(b)?,
        None => Vec::new(),
    };
    for (i, batch) in batches.iter().enumerate() {
        let walked = std::mem::take(&mut next);
        let (picked, walked_next) = rayon::join(
            || picker.pick(f, batch, &walked, &sources, &row_of_switch, &mut path_sl),
            || batches.get(i + 1).map(|b| walk(b)).transpose(),
        );
        picked?;
        next = walked_next?.unwrap_or_default();
        opts.report(((i + 1) * BATCH).min(dests.len()) as u64, total);
    }
    let t_pipeline = t_start.elapsed().as_secs_f64() - t_setup;
    let cube = picker.cube;
    let used_vls = picker.used_vls;
    // Unconstrained entries stay VL 0: they are never used by a route, or
    // they are the first hop (from an end port) or the last (to one).
    for (si, &sw) in f.switches().iter().enumerate() {
        let si = si as u32;
        let ports: Vec<u8> = f
            .port_slots(sw)
            .filter(|&s| topo.s2s_idx[s as usize] != u16::MAX)
            .map(|s| f.port_of(s))
            .collect();
        for &i in &ports {
            for &o in &ports {
                let off = topo.row(si, i, o) * 16;
                let mut row = [0u8; 16];
                row.copy_from_slice(&cube[off..off + 16]);
                if row != [0; 16] {
                    sl2vl.set_switch_row(si, i, o, row);
                }
            }
        }
    }
    tracing::debug!(
        vls = used_vls.max(1),
        sls = path_sl.distinct_sls(),
        t_setup,
        t_pipeline,
        t_total = t_start.elapsed().as_secs_f64(),
        "dfdn assigned"
    );
    Ok((sl2vl, path_sl))
}

/// The sequential half of DF-DN: SL choice over the working cube.
struct Picker {
    /// Rows of (switch, out, in) over 16 SLs: 0 = unset, else the VL.
    cube: Vec<u8>,
    /// SLs of one batch, destination-major.
    picked: Vec<u8>,
    used_vls: u8,
    max_sls: u8,
}

impl Picker {
    /// Chooses an SL per route of `batch` (walked: one route list per
    /// destination) and records it in the path-SL rows. Kept out of line:
    /// inlined into the pipeline's join closure its loop compiles to
    /// markedly slower code (measured: DF-DN on Dragonfly p=8 0.5 s -> 0.8 s).
    #[inline(never)]
    fn pick(
        &mut self,
        f: &Fabric,
        batch: &[(Slot, u16)],
        walked: &[Vec<u32>],
        sources: &[u32],
        row_of_switch: &[u32],
        path_sl: &mut PathSl,
    ) -> Result<()> {
        let raw = &mut self.cube[..];
        let max_sls = self.max_sls;
        let nsrc = sources.len();
        self.picked.clear();
        self.picked.resize(batch.len() * nsrc, 0);
        for (k, (&(_, dlid), routes)) in batch.iter().zip(walked).enumerate() {
            let mut pos = 0usize;
            for (j, &src) in sources.iter().enumerate() {
                let n = routes[pos] as usize;
                let entries = &routes[pos + 1..pos + 1 + n];
                pos += 1 + n;
                // Lowest SL whose entries are unset or already right: most
                // routes settle on one of the first few SLs, so trying SLs in
                // order beats computing the whole 16-SL mask.
                let fits = |sl: usize| {
                    entries.iter().all(|&e| {
                        let v = raw[(e >> 4) as usize * 16 + sl];
                        v == 0 || v == (e & 0xf) as u8
                    })
                };
                let Some(sl) = (0..max_sls as usize).find(|&sl| fits(sl)) else {
                    return Err(fail(format!(
                        "not enough SLs: the route from switch '{}' to LID {dlid} finds none of the {max_sls} SLs free (--max-sls {max_sls})",
                        f.desc(f.switches()[src as usize]),
                    )));
                };
                for &e in entries {
                    let need = (e & 0xf) as u8;
                    raw[(e >> 4) as usize * 16 + sl] = need;
                    self.used_vls = self.used_vls.max(need + 1);
                }
                self.picked[k * nsrc + j] = sl as u8;
            }
        }
        // Path-SL rows are source-major; the batch's LIDs are adjacent, so
        // each row takes one short contiguous write.
        for (j, &src) in sources.iter().enumerate() {
            let row = path_sl.row_mut(row_of_switch[src as usize]);
            for (k, &(_, dlid)) in batch.iter().enumerate() {
                row[dlid as usize] = self.picked[k * nsrc + j];
            }
        }
        Ok(())
    }
}

/// Walks the route from every source switch to end port `d` using its LFT
/// column `col`. Output, per source switch in `sources` order: the count `k`
/// of constrained rows, then `k` entries `(turn row << 4) | VL needed`
/// (VLs stay below 16; the layout keeps a batch small enough for the cache).
///
/// One pass over the switches first resolves each switch's next hop toward
/// `d`; the walks then read only that small array.
fn walk_routes(
    f: &Fabric,
    topo: &Topo,
    steps: &mut Vec<Step>,
    col: &[u8],
    (d, dlid): (Slot, u16),
    sources: &[u32],
    max_vls: u8,
) -> Result<Vec<u32>> {
    fill_steps(topo, col, d, steps);
    let mut out = Vec::with_capacity(sources.len() * 3);
    for &src in sources {
        let head_at = out.len();
        out.push(0u32);
        let mut si = src;
        // Switch-to-switch hops taken so far; the next one travels on VL `hops`.
        let mut hops: u8 = 0;
        let mut in_idx: u16 = 0;
        loop {
            let st = steps[si as usize];
            match st.next {
                DELIVER => break,
                BROKEN => {
                    return Err(fail(format!(
                        "the base routing has no usable route from switch '{}' to LID {dlid}",
                        f.desc(f.switches()[si as usize])
                    )));
                }
                _ => {}
            }
            if hops >= max_vls {
                return Err(fail(format!(
                    "not enough VLs: a route to LID {dlid} takes more than {max_vls} switch-to-switch hops (--max-vls {max_vls})"
                )));
            }
            if hops > 0 {
                out.push(((st.row_base + in_idx as u32) << 4) | hops as u32);
            }
            hops += 1;
            in_idx = st.next_in;
            si = st.next;
        }
        out[head_at] = (out.len() - head_at - 1) as u32;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::generate::{Topology, generate};
    use crate::load::link_load;
    use crate::routing::{Base, EngineOptions, by_name};
    use crate::verify;

    fn dfdn_max(f: &crate::model::Fabric, base: Option<Base>) -> u64 {
        let opts = EngineOptions {
            base,
            ..EngineOptions::default()
        };
        let r = by_name("dfdn").unwrap().route(f, &opts).unwrap();
        let rep = verify::verify(f, &r);
        assert!(rep.ok(), "dfdn on {base:?}: all pairs, no cycle");
        link_load(f, &r.lfts).max
    }

    #[test]
    fn dfdn_keeps_the_trees_on_a_dragonfly_and_leaves_them_on_a_fat_tree() {
        let df = generate(&Topology::Dragonfly { p: 3, hosts: None }).unwrap();
        assert_eq!(dfdn_max(&df, None), dfdn_max(&df, Some(Base::Trees)));
        assert!(dfdn_max(&df, None) < dfdn_max(&df, Some(Base::MinHop)));

        // The trees send all of a leaf's traffic up one link; SSSP spreads it.
        let ft = generate(&Topology::KaryNTree { k: 4, n: 3 }).unwrap();
        let (default, trees, sssp) = (
            dfdn_max(&ft, None),
            dfdn_max(&ft, Some(Base::Trees)),
            dfdn_max(&ft, Some(Base::Sssp)),
        );
        assert_eq!(default, sssp);
        assert!(sssp * 2 < trees, "sssp {sssp}, trees {trees}");
    }
}
