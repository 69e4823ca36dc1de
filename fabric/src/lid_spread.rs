//! How far a routing spreads the LIDs of a port with LMC above 0: per
//! (switch, destination port) pair, the share of the port's LIDs that
//! leave the switch on a port of their own, what LMC is for (several
//! paths per destination).

use crate::model::{Fabric, NONE};
use crate::tables::{Lfts, NO_PATH};
use rayon::prelude::*;

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct LidSpread {
    /// (Switch, destination port) pairs counted: ports with LMC above 0,
    /// from every switch but the one they hang on.
    pub pairs: u64,
    /// Mean over the pairs of distinct out ports / the port's LIDs (1:
    /// every LID on its own first hop; 1/2^LMC: all on one).
    pub first_hops_share: f64,
    /// Share of the pairs whose LIDs all leave on different ports.
    pub all_apart: f64,
    /// Share of the pairs whose LIDs all leave on one port.
    pub all_together: f64,
}

/// The spread of `lfts` over the end ports of `f` with LMC above 0
/// (`None` when there is none).
pub fn lid_spread(f: &Fabric, lfts: &Lfts) -> Option<LidSpread> {
    let dests: Vec<(u32, std::ops::Range<u16>)> = f
        .endports()
        .iter()
        .filter(|&&e| f.lmc(e) > 0)
        .filter_map(|&e| match f.remote(e) {
            NONE => None,
            r => Some((f.switch_index(f.node_of(r))?, f.lids_of_slot(e))),
        })
        .collect();
    if dests.is_empty() {
        return None;
    }
    let (pairs, share, apart, together) = (0..f.switches().len() as u32)
        .into_par_iter()
        .map(|si| {
            let mut acc = (0u64, 0f64, 0u64, 0u64);
            let mut ports: Vec<u8> = Vec::new();
            for (at, lids) in &dests {
                if *at == si {
                    continue;
                }
                ports.clear();
                ports.extend(
                    lids.clone()
                        .map(|l| lfts.get(si, l))
                        .filter(|&p| p != NO_PATH),
                );
                let n = lids.len();
                ports.sort_unstable();
                ports.dedup();
                acc.0 += 1;
                acc.1 += ports.len() as f64 / n as f64;
                acc.2 += u64::from(ports.len() == n);
                acc.3 += u64::from(ports.len() <= 1);
            }
            acc
        })
        .reduce(
            || (0, 0.0, 0, 0),
            |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2, a.3 + b.3),
        );
    let per = |x: f64| if pairs == 0 { 0.0 } else { x / pairs as f64 };
    Some(LidSpread {
        pairs,
        first_hops_share: per(share),
        all_apart: per(apart as f64),
        all_together: per(together as f64),
    })
}
