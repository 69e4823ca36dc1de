//! Fixtures for the tests of this crate's callers (feature `testing`):
//! an engine that claims deadlock freedom and is wrong, so every caller of
//! the verification gate can show that it refuses such tables.

use crate::error::Result;
use crate::generate::{Topology, generate};
use crate::model::Fabric;
use crate::routing::{EngineKind, EngineOptions, RoutingEngine, minhop::MinHop};
use crate::tables::Routing;

/// Routes with MinHop but claims deadlock freedom under DF-DN's name. On a
/// torus MinHop's tables have channel dependency cycles, which the gate
/// must refuse as an engine fault.
pub struct MislabelledEngine;

impl RoutingEngine for MislabelledEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Dfdn
    }
    fn description(&self) -> &'static str {
        "MinHop tables under a deadlock-free engine's name (tests only)"
    }
    fn claims_deadlock_free(&self) -> bool {
        true
    }
    fn route(&self, fabric: &Fabric, opts: &EngineOptions) -> Result<Routing> {
        MinHop.route(fabric, opts)
    }
}

/// A 4x4 torus with one host per switch: MinHop closes dependency cycles
/// around its rings.
pub fn cyclic_torus() -> Result<Fabric> {
    generate(&Topology::Mesh {
        dims: vec![4, 4],
        torus: true,
        hosts: 1,
    })
}
