//! The engines that split into units routed in rounds: Nue's virtual
//! layers ([`super::nue::LayerPlan`]) and SSSP's streams
//! ([`super::sssp_streams::StreamPlan`]). Both hold some units, route a round on
//! the channel loads all units had at its start, answer the load they
//! added, and hand back each unit's columns at the end; the workers and
//! the caller that deals the units ([`super::shard`]) see only this.

use super::nue::LayerCols;
use super::{EngineKind, EngineOptions};
use crate::error::{Error, Result};
use crate::model::Fabric;
use crate::tables::Routing;

pub enum Plan {
    Nue(super::nue::LayerPlan),
    Sssp {
        plan: super::sssp_streams::StreamPlan,
        /// DF-SSSP: the merged LFTs are split over VL layers here.
        layered: bool,
        max_vls: u8,
        max_sls: u8,
    },
}

/// Units of a plan held by one process.
pub enum Held {
    Nue(super::nue::Layers),
    Sssp(super::sssp_streams::Streams),
}

/// How SSSP and DF-SSSP split: in rounds with SSSP streams, else not.
pub fn streams_split(engine: &str, opts: &EngineOptions) -> super::Split {
    if opts.sssp_streams > 0 {
        super::Split::Rounds
    } else {
        super::Split::Whole(format!(
            "{engine} balances each destination on weights every earlier destination raised, so it is computed in one place (SSSP streams split: --sssp-streams N)"
        ))
    }
}

impl Plan {
    /// The plan of `engine` on `f`; the same on every process given the
    /// same fabric, VL budget and stream count.
    pub fn new(engine: EngineKind, f: &Fabric, opts: &EngineOptions) -> Result<Self> {
        match engine {
            EngineKind::Nue => Ok(Plan::Nue(super::nue::LayerPlan::new(f, opts)?)),
            EngineKind::Sssp | EngineKind::Dfsssp if opts.sssp_streams > 0 => Ok(Plan::Sssp {
                plan: super::sssp_streams::StreamPlan::new(f, opts.sssp_streams as usize)?,
                layered: engine == EngineKind::Dfsssp,
                max_vls: opts.max_vls,
                max_sls: opts.max_sls,
            }),
            other => Err(Error::Routing {
                engine: other.name().into(),
                reason: "not routed in rounds (nue is, and sssp and dfsssp with SSSP streams)"
                    .into(),
            }),
        }
    }

    /// "layer" or "stream".
    pub fn unit_name(&self) -> &'static str {
        match self {
            Plan::Nue(_) => "layer",
            Plan::Sssp { .. } => "stream",
        }
    }

    pub fn units(&self) -> usize {
        match self {
            Plan::Nue(p) => p.layers(),
            Plan::Sssp { plan, .. } => plan.streams(),
        }
    }

    pub fn rounds(&self) -> usize {
        match self {
            Plan::Nue(p) => p.rounds(),
            Plan::Sssp { plan, .. } => plan.rounds(),
        }
    }

    /// Length of the load vectors a round reads and returns.
    pub fn channels(&self) -> usize {
        match self {
            Plan::Nue(p) => p.channels(),
            Plan::Sssp { plan, .. } => plan.channels(),
        }
    }

    /// Units `ids`, ready for round 0 (each once).
    pub fn start(&self, ids: &[usize]) -> Result<Held> {
        let mut seen = vec![false; self.units()];
        for &u in ids {
            match seen.get_mut(u) {
                Some(s) if !*s => *s = true,
                Some(_) => {
                    return Err(Error::Invalid(format!(
                        "{} {u} asked twice",
                        self.unit_name()
                    )));
                }
                None => {
                    return Err(Error::Invalid(format!(
                        "no {} {u} in a plan of {}",
                        self.unit_name(),
                        self.units()
                    )));
                }
            }
        }
        match self {
            Plan::Nue(p) => p.start(ids).map(Held::Nue),
            Plan::Sssp { plan, .. } => plan.start(ids).map(Held::Sssp),
        }
    }

    /// The tables from every unit's columns and the loads after the last
    /// round.
    pub fn tables(&self, f: &Fabric, cols: Vec<LayerCols>, loads: &[u64]) -> Result<Routing> {
        match self {
            Plan::Nue(p) => p.tables(f, cols),
            Plan::Sssp {
                plan,
                layered,
                max_vls,
                max_sls,
            } => {
                let lfts = plan.lfts(f, cols, loads)?;
                if *layered {
                    let opts = EngineOptions {
                        max_vls: *max_vls,
                        max_sls: *max_sls,
                        ..Default::default()
                    };
                    super::dfsssp::layered_routing(f, lfts, &opts)
                } else {
                    Ok(Routing::lfts_only(lfts))
                }
            }
        }
    }
}

impl Held {
    pub fn rounds_done(&self) -> usize {
        match self {
            Held::Nue(l) => l.rounds_done(),
            Held::Sssp(s) => s.rounds_done(),
        }
    }

    /// Routes the next round on `global` and returns the load added.
    pub fn round(&mut self, f: &Fabric, plan: &Plan, global: &[u64]) -> Result<Vec<u64>> {
        match (self, plan) {
            (Held::Nue(l), Plan::Nue(p)) => l.round(p, global),
            (Held::Sssp(s), Plan::Sssp { plan, .. }) => s.round(f, plan, global),
            _ => Err(Error::Invalid(
                "units of one engine routed on another's plan".into(),
            )),
        }
    }

    /// Each unit's columns, once every round has run.
    pub fn finish(self) -> Vec<LayerCols> {
        match self {
            Held::Nue(l) => l.finish(),
            Held::Sssp(s) => s.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Topology, generate};
    use crate::routing::RoutingEngine;

    /// Units `groups` held by separate holders, rounds summed as the
    /// coordinator sums them; the merged tables.
    fn split(f: &Fabric, plan: &Plan, groups: &[Vec<usize>]) -> Routing {
        let mut held: Vec<Held> = groups
            .iter()
            .map(|g| plan.start(g).expect("start"))
            .collect();
        let mut global = vec![0u64; plan.channels()];
        for _ in 0..plan.rounds() {
            let mut sum = vec![0u64; plan.channels()];
            for h in &mut held {
                let d = h.round(f, plan, &global).expect("round");
                sum.iter_mut().zip(d).for_each(|(x, y)| *x += y);
            }
            global.iter_mut().zip(sum).for_each(|(x, y)| *x += y);
        }
        let cols = held.into_iter().flat_map(Held::finish).collect();
        plan.tables(f, cols, &global).expect("tables")
    }

    #[test]
    fn dfsssp_streams_split_equal_the_engine_in_one_process() {
        let f = generate(&Topology::Dragonfly { p: 3, hosts: None }).expect("df3");
        let opts = EngineOptions {
            sssp_streams: 5,
            ..Default::default()
        };
        let plan = Plan::new(EngineKind::Dfsssp, &f, &opts).expect("plan");
        assert_eq!((plan.units(), plan.unit_name()), (5, "stream"));
        let merged = split(&f, &plan, &[vec![3, 0], vec![4, 1, 2]]);
        let direct = super::super::dfsssp::DfSssp
            .route(&f, &opts)
            .expect("dfsssp");
        assert!(
            merged.to_bytes() == direct.to_bytes(),
            "the split changed the tables"
        );
        let report = crate::verify::verify(&f, &merged);
        assert!(report.ok(), "{report:?}");
        assert!(
            report.vls_used >= 2,
            "a Dragonfly needs more than one layer"
        );
        // The classic greedy differs: the streams are what the tables
        // depend on, not the number of processes.
        let classic = super::super::dfsssp::DfSssp
            .route(&f, &EngineOptions::default())
            .expect("classic");
        assert!(classic.lfts != merged.lfts);
    }

    #[test]
    fn sssp_streams_do_not_depend_on_who_routes_which_stream() {
        for t in [
            Topology::Dragonfly { p: 3, hosts: None },
            Topology::SlimFly { q: 5, hosts: None },
        ] {
            let f = generate(&t).expect("topology");
            let opts = EngineOptions {
                sssp_streams: 8,
                ..Default::default()
            };
            let plan = Plan::new(EngineKind::Sssp, &f, &opts).expect("plan");
            let one = split(&f, &plan, &[(0..8).collect()]);
            let apart = split(&f, &plan, &[vec![5, 0, 3], vec![7], vec![1, 2, 4, 6]]);
            assert!(
                one.lfts == apart.lfts,
                "{t:?}: the split changed the tables"
            );
            let direct = super::super::sssp::Sssp.route(&f, &opts).expect("sssp");
            assert!(one.lfts == direct.lfts, "{t:?}: not the engine's tables");
            let report = crate::verify::verify(&f, &one);
            assert_eq!(report.broken_pairs, 0, "{t:?}: every HCA pair connected");
            let diameter = crate::graph::SwitchGraph::new(&f)
                .diameter()
                .expect("connected");
            assert!(report.max_hops <= diameter, "{t:?}: a route is not minimal");
        }
    }

    #[test]
    fn only_nue_and_sssp_streams_route_in_rounds() {
        let f = generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("df2");
        let plain = EngineOptions::default();
        let streams = EngineOptions {
            sssp_streams: 2,
            ..Default::default()
        };
        for (e, o, ok) in [
            (EngineKind::Nue, &plain, true),
            (EngineKind::Sssp, &streams, true),
            (EngineKind::Sssp, &plain, false),
            (EngineKind::Dfdn, &streams, false),
        ] {
            assert_eq!(
                e.engine().split(o) == crate::routing::Split::Rounds,
                ok,
                "{e}"
            );
            assert_eq!(Plan::new(e, &f, o).is_ok(), ok, "{e}");
        }
        let nue = Plan::new(EngineKind::Nue, &f, &plain).expect("nue");
        let mut held = Plan::new(EngineKind::Sssp, &f, &streams)
            .expect("sssp")
            .start(&[0])
            .expect("start");
        let err = held.round(&f, &nue, &vec![0; nue.channels()]);
        assert!(err.is_err(), "streams routed on Nue's plan");
        let sssp = Plan::new(EngineKind::Sssp, &f, &streams).expect("sssp");
        assert!(sssp.start(&[1, 0, 1]).is_err(), "a stream asked twice");
        assert!(sssp.start(&[2]).is_err(), "no stream 2 of 2");
        assert!(nue.start(&[0, 0]).is_err(), "a layer asked twice");
    }
}
