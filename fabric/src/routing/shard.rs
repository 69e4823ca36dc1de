//! Routing jobs cut into parts for workers on other hosts: DF-DN by
//! destination switch, MinHop by source switch; Nue by layer and SSSP by
//! stream through [`super::rounds`].
//!
//! What splits: the base routing (the BFS trees, [`super::trees`]: every
//! destination switch's column depends on the trees only) and its link
//! load (exact integer sums, additive over destinations). A part is a
//! range of destination switches; it returns their columns and load sums.
//! The merge concatenates the columns in switch order and adds the sums,
//! so the result does not depend on the cut nor on who computed what.
//!
//! What does not split: DF-DN's SL choice is a greedy colouring in a fixed
//! destination order (each route takes the lowest SL its turns allow, given
//! every route before it); cutting it would change the tables, so it runs
//! where the parts are merged ([`merge_dfdn`]).
//!
//! MinHop balances each switch on that switch's own port counters, so its
//! rows are independent: a part is a range of switches and returns their
//! LFT rows ([`minhop_part`]); the merge stacks them ([`merge_rows`]).
//!
//! Nue splits by virtual layer ([`super::nue::LayerPlan`]): its layers share
//! nothing but the channel loads, which they exchange in rounds (each
//! layer sees the loads of every layer as of the round's start), so a
//! process holding some layers needs the summed loads once per round and
//! returns its layers' columns at the end ([`super::nue::Layers`]).
//!
//! SSSP's classic balancing does not split: each destination's tree reads
//! the link weights every earlier destination raised. Its streamed variant
//! ([`super::sssp_streams`], chosen by `EngineOptions::sssp_streams`) does,
//! as Nue does, in rounds ([`super::rounds`]); DF-SSSP's layering then runs
//! where the streams are merged. DF-DN on the MinHop or SSSP base (its SL
//! choice needs the whole base first) runs in one place.

use super::trees::{TreeParents, lfts_from_next, load_toward};
use super::{Base, EngineOptions, RoutingEngine, Split};
use crate::error::{Error, Result};
use crate::load::LoadSums;
use crate::model::Fabric;
use crate::tables::Routing;
use std::ops::Range;

/// One part of a DF-DN job: destination switches `start..end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutePart {
    pub start: usize,
    pub end: usize,
    /// One column per destination switch, `switches` entries each: the
    /// port toward that switch at every switch.
    pub next: Vec<u8>,
    /// Link-load sums of the routes toward the part's CA ports.
    pub load: LoadSums,
}

/// Computes the part of destination switches `xs`.
pub fn route_part(f: &Fabric, trees: &TreeParents, xs: Range<usize>) -> RoutePart {
    let xs = xs.start.min(trees.switches())..xs.end.min(trees.switches());
    let next = trees.next_toward(xs.clone(), &EngineOptions::default());
    let load = load_toward(f, xs.clone(), &next);
    RoutePart {
        start: xs.start,
        end: xs.end,
        next,
        load,
    }
}

/// One part of a MinHop job: the LFT rows of switches `start..end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowsPart {
    pub start: usize,
    pub end: usize,
    /// `end - start` rows of `max_lid + 1` entries, in switch order.
    pub rows: Vec<u8>,
}

/// What every part of a MinHop job reads: the switch graph and its hop
/// matrix, built once per job where parts are computed.
pub struct MinhopBase {
    graph: crate::graph::SwitchGraph,
    hops: Vec<u8>,
}

impl MinhopBase {
    pub fn new(f: &Fabric) -> Self {
        let graph = crate::graph::SwitchGraph::new(f);
        let hops = graph.hop_matrix();
        Self { graph, hops }
    }
}

/// Computes MinHop's rows of switches `xs`.
pub fn minhop_part(f: &Fabric, base: &MinhopBase, xs: Range<usize>) -> RowsPart {
    let n = base.graph.len();
    let xs = xs.start.min(n)..xs.end.min(n);
    RowsPart {
        start: xs.start,
        end: xs.end,
        rows: super::minhop::minhop_rows(f, &base.graph, &base.hops, xs.clone()),
    }
}

/// Stacks the parts of a MinHop job (any order, any cut that covers every
/// switch once): the tables equal `MinHop.route(f, _)`, byte for byte.
pub fn merge_rows(f: &Fabric, parts: &[RowsPart]) -> Result<Routing> {
    let bad = |reason: String| Error::Routing {
        engine: "minhop".into(),
        reason,
    };
    let width = f.max_lid() as usize + 1;
    let order = tiled(f.switches().len(), parts, |p| (p.start, p.end)).map_err(bad)?;
    let mut lfts = crate::tables::Lfts::for_fabric(f);
    for p in order {
        if p.rows.len() != (p.end - p.start) * width {
            return Err(bad(format!(
                "switches {}..{}: {} row bytes, expected {}",
                p.start,
                p.end,
                p.rows.len(),
                (p.end - p.start) * width
            )));
        }
        for (i, row) in p.rows.chunks_exact(width.max(1)).enumerate() {
            lfts.row_mut((p.start + i) as u32).copy_from_slice(row);
        }
    }
    Ok(Routing::lfts_only(lfts))
}

/// `parts` sorted by their first switch, if their ranges (`range_of`)
/// tile switches `0..n` once; else why not.
fn tiled<P>(
    n: usize,
    parts: &[P],
    range_of: impl Fn(&P) -> (usize, usize),
) -> std::result::Result<Vec<&P>, String> {
    let mut order: Vec<&P> = parts.iter().collect();
    order.sort_by_key(|p| range_of(p).0);
    let mut at = 0;
    for p in &order {
        let (start, end) = range_of(p);
        if start != at || end < start || end > n {
            return Err(format!(
                "parts do not tile the {n} switches: expected one from switch {at}, got {start}..{end}"
            ));
        }
        at = end;
    }
    if at != n {
        return Err(format!("parts cover switches 0..{at} of {n}"));
    }
    Ok(order)
}

fn bad(reason: String) -> Error {
    Error::Routing {
        engine: "dfdn".into(),
        reason,
    }
}

/// Merges the parts of a DF-DN job (any order, any cut that covers every
/// switch once) and finishes it: the base choice, the SL choice. The
/// tables equal `DfDn.route(f, opts)`, byte for byte.
pub fn merge_dfdn(f: &Fabric, parts: &[RoutePart], opts: &EngineOptions) -> Result<Routing> {
    if let Split::Whole(why) = super::dfdn::DfDn.split(opts) {
        return Err(bad(why));
    }
    let n = f.switches().len();
    let order = tiled(n, parts, |p| (p.start, p.end)).map_err(bad)?;
    let mut next = Vec::with_capacity(n * n);
    let mut load = LoadSums::zero(f);
    for p in order {
        if p.next.len() != (p.end - p.start) * n || p.load.per_slot.len() != f.num_slots() {
            return Err(bad(format!(
                "part {}..{} has {} column bytes and {} load slots, expected {} and {}",
                p.start,
                p.end,
                p.next.len(),
                p.load.per_slot.len(),
                (p.end - p.start) * n,
                f.num_slots()
            )));
        }
        next.extend_from_slice(&p.next);
        load.add(&p.load);
    }
    let trees = lfts_from_next(f, &next);
    let lfts = match opts.base {
        Some(Base::Trees) => trees,
        Some(Base::Auto) => {
            opts.keep_trees_or_sssp(f, trees, &crate::load::summarize(f, &load), |_| false)?
        }
        _ => opts.keep_trees_or_sssp(
            f,
            trees,
            &crate::load::summarize(f, &load),
            super::dfdn::trees_enough,
        )?,
    };
    let (sl2vl, path_sl) = super::dfdn::assign_vls(f, &lfts, opts)?;
    Ok(Routing {
        lfts,
        sl2vl: Some(sl2vl),
        path_sl: Some(path_sl),
        vls_needed: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};
    use crate::routing::EngineKind;
    use crate::routing::by_name;

    fn cut(n: usize, k: usize) -> Vec<Range<usize>> {
        (0..k).map(|i| i * n / k..(i + 1) * n / k).collect()
    }

    /// Every cut, every base that splits: the merged tables are the one
    /// process's, byte for byte; and they pass the verifier.
    fn identical(f: &Fabric) {
        let trees = TreeParents::new(f);
        let n = f.switches().len();
        for base in [None, Some(Base::Trees), Some(Base::Auto)] {
            let opts = EngineOptions {
                base,
                ..EngineOptions::default()
            };
            let one = by_name("dfdn").unwrap().route(f, &opts).unwrap();
            assert!(crate::verify::verify(f, &one).ok());
            for k in [1, 2, 3, 7, n] {
                let mut parts: Vec<RoutePart> = cut(n, k)
                    .into_iter()
                    .map(|r| route_part(f, &trees, r))
                    .collect();
                // Arrival order must not matter.
                parts.reverse();
                let merged = merge_dfdn(f, &parts, &opts).unwrap();
                assert_eq!(
                    merged.to_bytes(),
                    one.to_bytes(),
                    "base {base:?}, {k} parts"
                );
            }
        }
    }

    #[test]
    fn minhop_rows_stacked_equal_one_process() {
        for t in [
            Topology::Dragonfly { p: 3, hosts: None },
            Topology::KaryNTree { k: 4, n: 3 },
            Topology::Mesh {
                dims: vec![4, 4],
                torus: true,
                hosts: 2,
            },
        ] {
            let f = generate(&t).unwrap();
            let one = by_name("minhop")
                .unwrap()
                .route(&f, &EngineOptions::default())
                .unwrap();
            let base = MinhopBase::new(&f);
            let n = f.switches().len();
            for k in [1, 2, 5, n] {
                let mut parts: Vec<RowsPart> = cut(n, k)
                    .into_iter()
                    .map(|r| minhop_part(&f, &base, r))
                    .collect();
                parts.reverse();
                let merged = merge_rows(&f, &parts).unwrap();
                assert_eq!(merged.to_bytes(), one.to_bytes(), "{t:?}, {k} parts");
            }
            let mut parts: Vec<RowsPart> = cut(n, 3)
                .into_iter()
                .map(|r| minhop_part(&f, &base, r))
                .collect();
            parts.remove(1);
            assert!(merge_rows(&f, &parts).is_err(), "a gap is refused");
            let mut short = cut(n, 2)
                .into_iter()
                .map(|r| minhop_part(&f, &base, r))
                .collect::<Vec<_>>();
            short[0].rows.pop();
            assert!(merge_rows(&f, &short).is_err(), "a short row is refused");
        }
    }

    #[test]
    fn merged_tables_equal_one_process() {
        identical(&generate(&Topology::Dragonfly { p: 3, hosts: None }).unwrap());
        identical(&generate(&Topology::SlimFly { q: 5, hosts: None }).unwrap());
        // A fat tree: the trees are lopsided there, so the default base
        // switches to SSSP after the merge.
        identical(&generate(&Topology::KaryNTree { k: 4, n: 3 }).unwrap());
    }

    /// Nue with its layers held by `groups` (each group one process),
    /// the rounds' loads summed between them, and one group replaced
    /// midway by a fresh one that replays the rounds from their loads.
    fn nue_split(f: &Fabric, opts: &EngineOptions, groups: &[Vec<usize>]) -> Routing {
        let plan = super::super::nue::LayerPlan::new(f, opts).unwrap();
        let mut held: Vec<_> = groups.iter().map(|g| plan.start(g).unwrap()).collect();
        let mut history: Vec<Vec<u64>> = Vec::new();
        let mut global = vec![0u64; plan.channels()];
        for r in 0..plan.rounds() {
            if r == plan.rounds() / 2 {
                // The first group's holder is lost: a new one catches up.
                let mut fresh = plan.start(&groups[0]).unwrap();
                for g in &history {
                    fresh.round(&plan, g).unwrap();
                }
                assert_eq!(fresh.rounds_done(), r);
                held[0] = fresh;
            }
            history.push(global.clone());
            let mut next = global.clone();
            for h in held.iter_mut().rev() {
                for (n, d) in next.iter_mut().zip(h.round(&plan, &global).unwrap()) {
                    *n += d;
                }
            }
            global = next;
        }
        let mut cols: Vec<_> = held.into_iter().flat_map(|h| h.finish()).collect();
        cols.reverse();
        plan.tables(f, cols).unwrap()
    }

    #[test]
    fn nue_layers_split_over_processes_give_one_process_tables() {
        for (t, vls) in [
            (Topology::Dragonfly { p: 3, hosts: None }, 4u8),
            (Topology::SlimFly { q: 5, hosts: None }, 3),
            (
                Topology::RandomRegular {
                    switches: 40,
                    degree: 4,
                    hosts: 2,
                    seed: 7,
                },
                2,
            ),
        ] {
            let f = generate(&t).unwrap();
            let opts = EngineOptions {
                max_vls: vls,
                ..EngineOptions::default()
            };
            let one = super::super::nue::Nue.route(&f, &opts).unwrap();
            assert!(crate::verify::verify(&f, &one).ok(), "{t:?}");
            let k = vls as usize;
            let layouts: Vec<Vec<Vec<usize>>> = vec![
                (0..k).map(|l| vec![l]).collect(),
                vec![(0..k).step_by(2).collect(), (1..k).step_by(2).collect()],
            ];
            for groups in layouts {
                let split = nue_split(&f, &opts, &groups);
                assert_eq!(split.to_bytes(), one.to_bytes(), "{t:?}, {groups:?}");
            }
            // The loads exchanged matter: layers that never see the
            // others' loads route differently.
            let plan = super::super::nue::LayerPlan::new(&f, &opts).unwrap();
            let mut alone: Vec<_> = (0..k).map(|l| plan.start(&[l]).unwrap()).collect();
            let zero = vec![0u64; plan.channels()];
            for _ in 0..plan.rounds() {
                for a in &mut alone {
                    a.round(&plan, &zero).unwrap();
                }
            }
            let cols = alone.into_iter().flat_map(|a| a.finish()).collect();
            let isolated = plan.tables(&f, cols).unwrap();
            assert_ne!(isolated.lfts, one.lfts, "{t:?}");
        }
    }

    #[test]
    fn nue_tables_refuse_missing_twice_or_short_layers() {
        let f = generate(&Topology::Dragonfly { p: 2, hosts: None }).unwrap();
        let opts = EngineOptions {
            max_vls: 2,
            ..EngineOptions::default()
        };
        let plan = super::super::nue::LayerPlan::new(&f, &opts).unwrap();
        let mut all = plan.start(&[0, 1]).unwrap();
        let mut global = vec![0u64; plan.channels()];
        for _ in 0..plan.rounds() {
            let d = all.round(&plan, &global).unwrap();
            global.iter_mut().zip(d).for_each(|(g, d)| *g += d);
        }
        assert!(all.round(&plan, &[0]).is_err(), "wrong load length");
        let cols = all.finish();
        assert!(plan.tables(&f, cols[..1].to_vec()).is_err(), "missing");
        let twice = vec![cols[0].clone(), cols[0].clone(), cols[1].clone()];
        assert!(plan.tables(&f, twice).is_err(), "twice");
        let mut short = cols.clone();
        short[1].cols.pop();
        assert!(plan.tables(&f, short).is_err(), "short");
        assert!(plan.tables(&f, cols).is_ok());
        assert!(plan.start(&[2]).is_err(), "no such layer");
    }

    #[test]
    fn load_sums_add_up_to_the_whole_index() {
        let f = generate(&Topology::Dragonfly { p: 3, hosts: None }).unwrap();
        let trees = TreeParents::new(&f);
        let n = f.switches().len();
        let mut sum = LoadSums::zero(&f);
        for r in cut(n, 5) {
            sum.add(&route_part(&f, &trees, r).load);
        }
        let lfts = super::super::trees::tree_lfts(&f, &EngineOptions::default());
        assert_eq!(
            crate::load::summarize(&f, &sum),
            crate::load::link_load(&f, &lfts)
        );
    }

    #[test]
    fn gaps_overlaps_and_short_parts_are_refused() {
        let f = generate(&Topology::Dragonfly { p: 2, hosts: None }).unwrap();
        let trees = TreeParents::new(&f);
        let n = f.switches().len();
        let opts = EngineOptions::default();
        let a = route_part(&f, &trees, 0..n / 2);
        let b = route_part(&f, &trees, n / 2..n);
        assert!(
            merge_dfdn(&f, std::slice::from_ref(&a), &opts).is_err(),
            "a gap"
        );
        assert!(
            merge_dfdn(&f, &[a.clone(), a.clone(), b.clone()], &opts).is_err(),
            "overlap"
        );
        let mut short = b.clone();
        short.next.pop();
        assert!(
            merge_dfdn(&f, &[a.clone(), short], &opts).is_err(),
            "short column"
        );
        assert!(merge_dfdn(&f, &[a, b], &opts).is_ok());
        let minhop = EngineOptions {
            base: Some(Base::MinHop),
            ..EngineOptions::default()
        };
        let streams = EngineOptions {
            sssp_streams: 16,
            ..EngineOptions::default()
        };
        let split = |e: EngineKind, o: &EngineOptions| e.engine().split(o);
        assert!(!split(EngineKind::Dfdn, &minhop).splits());
        assert_eq!(split(EngineKind::Nue, &opts), Split::Rounds);
        assert_eq!(split(EngineKind::Dfdn, &opts), Split::DestinationSwitches);
        assert_eq!(split(EngineKind::Minhop, &opts), Split::SourceSwitches);
        assert!(!split(EngineKind::Sssp, &opts).splits());
        assert!(!split(EngineKind::Dfsssp, &opts).splits());
        assert_eq!(split(EngineKind::Sssp, &streams), Split::Rounds);
        assert_eq!(split(EngineKind::Dfsssp, &streams), Split::Rounds);
        assert!(!split(EngineKind::Lash, &streams).splits());
        // Every engine the registry has answers, and only the four split.
        let split_ones: Vec<_> = EngineKind::ALL
            .into_iter()
            .filter(|e| split(*e, &streams).splits())
            .collect();
        assert_eq!(
            split_ones,
            [
                EngineKind::Minhop,
                EngineKind::Sssp,
                EngineKind::Dfdn,
                EngineKind::Dfsssp,
                EngineKind::Nue
            ]
        );
    }
}
