//! Down*/Up* (OpenSM `dnup`): switches are ranked by BFS distance from the
//! switches that have end ports (rank 0); a channel goes *down* when it
//! leads to a higher rank, or to the same rank and a higher node GUID.
//! Legal routes descend zero or more down channels, then climb zero or more
//! up channels: on a tree, packets leave the leaf switches toward the spines
//! ("down" in this naming) and come back. It is Up*/Down* with the order
//! reversed, so it shares that engine's route computation and is deadlock
//! free with one VL.
//!
//! OpenSM's dnup treats links between equal ranks as unrestricted, so on
//! fabrics where every switch has end ports (tori, Dragonflies, Slim Flies:
//! all rank 0) it degenerates to unrestricted shortest paths and can
//! deadlock. Here the GUID breaks such ties instead, and when the ranking
//! leaves two switches with end ports without a legal route (typically when
//! every switch has end ports), ranks are measured from the graph centre
//! (minimum eccentricity, lowest GUID): down* runs toward the centre and up*
//! away from it, the centre being where every pair can turn.

use super::updn::{Mode, fail, fill, plan};
use super::{EngineOptions, RoutingEngine};
use crate::error::Result;
use crate::graph::SwitchGraph;
use crate::model::Fabric;
use crate::tables::Routing;

pub struct DnUp;

impl RoutingEngine for DnUp {
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Dnup
    }
    fn description(&self) -> &'static str {
        "Down*/Up* (OpenSM dnup): ranks from the HCA switches, deadlock free with 1 VL on any connected fabric"
    }
    fn routes_lmc(&self) -> bool {
        true
    }
    fn claims_deadlock_free(&self) -> bool {
        true
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        if opts.roots.is_some() {
            return Err(fail(
                "dnup",
                "dnup ranks switches from the HCA switches and takes no root switches",
            ));
        }
        let g = SwitchGraph::new(f);
        let p = plan(f, &g, Mode::DownUp, None).map_err(|r| fail("dnup", r))?;
        Ok(Routing::lfts_only(fill(f, &g, &p, opts)))
    }
}
