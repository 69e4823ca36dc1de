//! Fault tolerance curves (the DQR paper's figures 3-6): how many
//! successive random link faults a routing survives with DQR.
//!
//! Each run starts from the same routed fabric and fails random
//! switch-to-switch links one after the other (a link whose loss cuts the
//! switches apart is not drawn: the paper counts routing failures, not a
//! cut fabric), rerouting after each, and stops at the first fault DQR
//! cannot reroute. Run `r` draws from ChaCha8 seeded with `seed + r`, so a
//! curve is the same wherever it is computed (`ibfabric dqr-curve`, the
//! `dqr` bench). Every successful reroute is verified inside
//! [`super::reroute_from`].

use super::{ChannelList, DqrError, Fault, Options};
use crate::model::{Fabric, Slot};
use crate::tables::Routing;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};

/// What the channel list becomes after a reroute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum ListAfter {
    /// Pruned to the new tables' dependencies, its order kept, unless a
    /// reroute ever moved flows to other SLs (as the agent does once an
    /// update is in force).
    Pruned,
    /// Ordered afresh from the new tables (after reroutes that moved no
    /// flow to another SL).
    Rebuilt,
    /// Carried with the old routing's and the transition's dependencies.
    Carried,
}

/// One curve's setup.
#[derive(Debug, Clone, Copy)]
pub struct CurveSetup {
    pub runs: usize,
    /// Faults per run at most.
    pub faults: usize,
    /// Run `r` draws from the seed `seed + r`.
    pub seed: u64,
    pub options: Options,
    pub list: ListAfter,
}

/// One curve: per k (1..=faults), the runs that rerouted k faults, and the
/// share of flows the k-th fault broke.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Curve {
    pub runs: usize,
    pub faults: usize,
    pub seed: u64,
    /// `tolerated[k - 1]`: runs that rerouted k faults.
    pub tolerated: Vec<usize>,
    /// `tolerated[k - 1] / runs`, in percent.
    pub percent: Vec<f64>,
    /// Mean share of the flows the k-th fault broke, in percent, over the
    /// runs that rerouted it (None where none did).
    pub flows_rerouted_percent: Vec<Option<f64>>,
    /// Why runs stopped: (k, reason) -> runs.
    pub stopped: Vec<Stop>,
}

/// Runs that stopped at the k-th fault for one reason.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Stop {
    pub k: usize,
    pub reason: &'static str,
    pub runs: usize,
}

fn reason(e: &DqrError) -> &'static str {
    match e {
        DqrError::NoPath { .. } => "no path",
        DqrError::Transition(_) => "transition",
        DqrError::Verify(_) => "verify",
        DqrError::MoreVls { .. } => "more VLs",
        DqrError::OtherFabric { .. } => "other fabric",
    }
}

/// The tolerance curve of `routing` on `f` (with its channel list),
/// `progress(run)` called after each run.
pub fn tolerance(
    f: &Fabric,
    routing: &Routing,
    list: &ChannelList,
    setup: &CurveSetup,
    progress: impl Fn(usize),
) -> Curve {
    let faults = setup.faults;
    let mut tolerated = vec![0usize; faults];
    let mut broken = vec![(0f64, 0usize); faults];
    let mut stopped: BTreeMap<(usize, &'static str), usize> = BTreeMap::new();
    for run in 0..setup.runs {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(setup.seed.wrapping_add(run as u64));
        let (mut f, mut r, mut list) = (f.clone(), routing.clone(), list.clone());
        for k in 1..=faults {
            let cut = bridges(&f);
            let cand: Vec<Slot> = f
                .switch_links()
                .into_iter()
                .filter(|l| !cut.contains(l))
                .collect();
            if cand.is_empty() {
                break;
            }
            let l = cand[rng.gen_range(0..cand.len())];
            let f1 = super::apply_faults(&f, &[Fault::Link(l)]);
            match super::reroute_from(&f, &f1, &r, &mut list, &setup.options) {
                Ok(o) => {
                    tolerated[k - 1] += 1;
                    let s = &o.stats;
                    broken[k - 1].0 += s.flows_broken as f64 / s.flows.max(1) as f64;
                    broken[k - 1].1 += 1;
                    let kept = match setup.list {
                        ListAfter::Pruned => list.prune_to(&f1, &o.routing).map(|_| None),
                        ListAfter::Rebuilt if !list.holds_cached_sl_walks() => {
                            ChannelList::build(&f1, &o.routing).map(|(l, _)| Some(l))
                        }
                        _ => Ok(None),
                    };
                    match kept {
                        Ok(Some(fresh)) => list = fresh,
                        Ok(None) => {}
                        // The reroute's own tables give no list: counted as
                        // a stop, not a panic.
                        Err(_) => {
                            *stopped.entry((k + 1, "channel list")).or_insert(0) += 1;
                            break;
                        }
                    }
                    f = f1;
                    r = o.routing;
                }
                Err(e) => {
                    *stopped.entry((k, reason(&e))).or_insert(0) += 1;
                    break;
                }
            }
        }
        progress(run);
    }
    let runs = setup.runs.max(1) as f64;
    Curve {
        runs: setup.runs,
        faults,
        seed: setup.seed,
        percent: tolerated.iter().map(|&t| 100.0 * t as f64 / runs).collect(),
        tolerated,
        flows_rerouted_percent: broken
            .iter()
            .map(|&(s, n)| (n > 0).then(|| 100.0 * s / n as f64))
            .collect(),
        stopped: stopped
            .into_iter()
            .map(|((k, reason), runs)| Stop { k, reason, runs })
            .collect(),
    }
}

/// The switch-to-switch links whose loss cuts the switches apart
/// (bridges of the switch graph; Tarjan's low-link, iteratively).
pub fn bridges(f: &Fabric) -> HashSet<Slot> {
    let n = f.switches().len();
    let mut adj: Vec<Vec<(usize, Slot)>> = vec![Vec::new(); n];
    for l in f.switch_links() {
        let (Some(a), Some(b)) = (
            f.switch_index(f.node_of(l)),
            f.switch_index(f.node_of(f.remote(l))),
        ) else {
            continue;
        };
        adj[a as usize].push((b as usize, l));
        adj[b as usize].push((a as usize, l));
    }
    let (mut disc, mut low) = (vec![usize::MAX; n], vec![0usize; n]);
    let mut out = HashSet::new();
    let mut time = 0;
    for root in 0..n {
        if disc[root] != usize::MAX {
            continue;
        }
        // (node, the link it was entered by, next neighbour to look at)
        let mut stack: Vec<(usize, Slot, usize)> = vec![(root, Slot::MAX, 0)];
        disc[root] = time;
        low[root] = time;
        time += 1;
        while let Some(&mut (v, via, ref mut i)) = stack.last_mut() {
            if *i < adj[v].len() {
                let (w, l) = adj[v][*i];
                *i += 1;
                if l == via {
                    continue;
                }
                if disc[w] == usize::MAX {
                    disc[w] = time;
                    low[w] = time;
                    time += 1;
                    stack.push((w, l, 0));
                } else {
                    low[v] = low[v].min(disc[w]);
                }
            } else {
                stack.pop();
                if let Some(&(u, _, _)) = stack.last() {
                    low[u] = low[u].min(low[v]);
                    if low[v] > disc[u] {
                        out.insert(via);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};
    use crate::routing::{EngineKind, EngineOptions};

    fn mesh(n: u32) -> Fabric {
        generate(&Topology::Mesh {
            dims: vec![n, n],
            torus: false,
            hosts: 1,
        })
        .expect("mesh")
    }

    #[test]
    fn a_ring_has_no_bridge_and_a_chain_only_bridges() {
        assert!(bridges(&mesh(3)).is_empty(), "a 3x3 mesh has cycles");
        let chain = generate(&Topology::Mesh {
            dims: vec![4],
            torus: false,
            hosts: 1,
        })
        .expect("chain");
        assert_eq!(bridges(&chain).len(), 3, "every link of a chain cuts");
    }

    #[test]
    fn a_curve_is_the_same_for_the_same_seed_and_never_rises() {
        let f = mesh(4);
        let r = EngineKind::Updn
            .engine()
            .route(&f, &EngineOptions::default())
            .expect("routes");
        let (list, _) = ChannelList::build(&f, &r).expect("list");
        let setup = CurveSetup {
            runs: 6,
            faults: 4,
            seed: 3,
            options: Options::default(),
            list: ListAfter::Pruned,
        };
        let a = tolerance(&f, &r, &list, &setup, |_| {});
        let b = tolerance(&f, &r, &list, &setup, |_| {});
        assert_eq!(a, b);
        assert!(a.tolerated.windows(2).all(|w| w[1] <= w[0]), "{a:?}");
        let stops: usize = a.stopped.iter().map(|s| s.runs).sum();
        let all = a.tolerated.last().copied().unwrap_or(0);
        assert_eq!(stops + all, 6, "every run stops or tolerates all: {a:?}");
    }
}
