//! DF-D2 (Schneider, Bibartiu, Hoefler, "Ensuring Deadlock-Freedom in
//! Low-Diameter InfiniBand Networks", HOTI'16, section IV): on a switch
//! graph of diameter two with minimal routes, VL 0 up to the second switch
//! and VL 1 after it make the channel dependency graph acyclic. The
//! SL-to-VL tables decide it from the input port alone, so every pair uses
//! SL 0 and no path-SL table is needed.

use super::{EngineOptions, RoutingEngine};
use crate::error::{Error, Result};
use crate::graph::SwitchGraph;
use crate::model::{Fabric, NONE, NodeKind};
use crate::tables::{Routing, Sl2Vl};

pub struct DfD2;

fn fail(reason: String) -> Error {
    Error::Routing {
        engine: "dfd2".into(),
        reason,
    }
}

impl RoutingEngine for DfD2 {
    fn kind(&self) -> super::EngineKind {
        super::EngineKind::Dfd2
    }
    fn description(&self) -> &'static str {
        "DF-D2: deadlock free with 2 VLs on diameter-2 fabrics (Slim Fly), SL 0 for all pairs; --base minhop (default)|sssp|trees|auto"
    }
    fn claims_deadlock_free(&self) -> bool {
        true
    }
    fn routes_lmc(&self) -> bool {
        true
    }
    fn route(&self, f: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        match SwitchGraph::new(f).diameter() {
            None => return Err(fail("the switch graph is disconnected".into())),
            Some(d) if d > 2 => {
                return Err(fail(format!(
                    "DF-D2 needs a switch graph of diameter at most 2, this one has diameter {d}; use dfdn"
                )));
            }
            Some(_) => {}
        }
        if opts.max_vls < 2 {
            return Err(fail(format!(
                "not enough VLs: DF-D2 needs 2, --max-vls is {}",
                opts.max_vls
            )));
        }
        // With LMC a named base must spread a port's LIDs (MinHop, the
        // default, or SSSP); the VL rule holds per LID as per port.
        let lfts = if f.max_lmc() > 0 && opts.base.is_some() {
            opts.base_lfts(f, opts.lmc_base("dfd2")?)?
        } else {
            opts.base_lfts(f, super::Base::MinHop)?
        };
        let mut t = Sl2Vl::new(f);
        for &sw in f.switches() {
            let Some(si) = f.switch_index(sw) else {
                continue;
            };
            for inp in 1..=f.num_ports(sw) {
                let r = f.remote(f.slot(sw, inp));
                if r == NONE || f.kind(f.node_of(r)) != NodeKind::Switch {
                    continue;
                }
                for out in 1..=f.num_ports(sw) {
                    if out != inp {
                        t.set_switch_row(si, inp, out, [1; 16]);
                    }
                }
            }
        }
        Ok(Routing {
            lfts,
            sl2vl: Some(t),
            path_sl: None,
            vls_needed: None,
        })
    }
}
