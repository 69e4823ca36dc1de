//! Routing engines: one trait, one file per engine, one registry.

pub mod dfd2;
pub mod dfdn;
pub mod dfsssp;
pub mod dnup;
pub mod ftree;
pub mod lash;
pub mod minhop;
pub mod nue;
pub(crate) mod paths;
pub mod sssp;
pub mod updn;

use crate::error::{Error, Result};
use crate::model::Fabric;
use crate::tables::Routing;

/// The minimal routing that DF-D2 and DF-DN make deadlock free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Base {
    #[default]
    MinHop,
    Sssp,
}

impl std::str::FromStr for Base {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "minhop" => Ok(Base::MinHop),
            "sssp" => Ok(Base::Sssp),
            _ => Err(format!("unknown base routing '{s}' (known: minhop, sssp)")),
        }
    }
}

/// Knobs shared by all engines.
#[derive(Clone, Copy)]
pub struct EngineOptions<'a> {
    /// Data VLs the hardware offers (IB: 1, 2, 4, 8 or 15).
    pub max_vls: u8,
    /// Service levels the engine may hand out (IB: 16).
    pub max_sls: u8,
    /// Base routing for engines that build on one.
    pub base: Base,
    /// Called with (work done, total work) on long runs.
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
    /// Root switches (node GUIDs) for engines that rank switches from roots
    /// (Up*/Down*); `None` lets the engine choose.
    pub roots: Option<&'a [u64]>,
}

impl Default for EngineOptions<'_> {
    fn default() -> Self {
        Self {
            max_vls: 8,
            max_sls: 16,
            base: Base::MinHop,
            progress: None,
            roots: None,
        }
    }
}

impl EngineOptions<'_> {
    /// LFTs of the selected base routing.
    pub(crate) fn base_lfts(&self, f: &Fabric) -> Result<crate::tables::Lfts> {
        match self.base {
            Base::MinHop => {
                let g = crate::graph::SwitchGraph::new(f);
                let hops = g.hop_matrix();
                Ok(minhop::minhop_lfts(f, &g, &hops, self))
            }
            Base::Sssp => Ok(sssp::sssp_lfts(f, self)),
        }
    }

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
    /// Whether the engine honours [`EngineOptions::roots`]; callers refuse
    /// root switches for the others instead of silently ignoring them.
    fn uses_roots(&self) -> bool {
        false
    }
    fn route(&self, fabric: &Fabric, opts: &EngineOptions) -> Result<Routing>;
}

/// Every engine the product ships, in the order listings show them.
pub fn registry() -> Vec<Box<dyn RoutingEngine>> {
    vec![
        Box::new(minhop::MinHop),
        Box::new(sssp::Sssp),
        Box::new(dfd2::DfD2),
        Box::new(dfdn::DfDn),
        Box::new(dfsssp::DfSssp),
        Box::new(lash::Lash),
        Box::new(updn::UpDn),
        Box::new(dnup::DnUp),
        Box::new(ftree::FTree),
        Box::new(nue::Nue),
    ]
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
