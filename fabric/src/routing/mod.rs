//! Routing engines: one trait, one file per engine, one registry.

pub mod minhop;

use crate::error::{Error, Result};
use crate::model::Fabric;
use crate::tables::Routing;

/// Knobs shared by all engines.
#[derive(Clone, Copy)]
pub struct EngineOptions<'a> {
    /// Data VLs the hardware offers (IB: 1, 2, 4, 8 or 15).
    pub max_vls: u8,
    /// Called with (work done, total work) on long runs.
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
}

impl Default for EngineOptions<'_> {
    fn default() -> Self {
        Self {
            max_vls: 8,
            progress: None,
        }
    }
}

impl EngineOptions<'_> {
    pub(crate) fn report(&self, done: u64, total: u64) {
        if let Some(p) = self.progress {
            p(done, total);
        }
    }
}

/// A routing engine turns a subnet into tables. Engines are pure: no I/O,
/// no global state; the caller verifies and writes the result.
pub trait RoutingEngine: Send + Sync {
    fn name(&self) -> &'static str;
    /// One line for `--help` and listings.
    fn description(&self) -> &'static str;
    /// Whether the engine promises deadlock freedom (the verifier checks it anyway).
    fn claims_deadlock_free(&self) -> bool;
    fn route(&self, fabric: &Fabric, opts: &EngineOptions) -> Result<Routing>;
}

/// Every engine the product ships, in the order listings show them.
pub fn registry() -> Vec<Box<dyn RoutingEngine>> {
    vec![Box::new(minhop::MinHop)]
}

pub fn names() -> Vec<&'static str> {
    registry().iter().map(|e| e.name()).collect()
}

pub fn by_name(name: &str) -> Result<Box<dyn RoutingEngine>> {
    registry()
        .into_iter()
        .find(|e| e.name() == name)
        .ok_or_else(|| Error::UnknownEngine(name.to_string(), names().join(", ")))
}
