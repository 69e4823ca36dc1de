//! Routing engines: one trait, one file per engine, one registry.

pub mod auto;
pub mod dfd2;
pub mod dfdn;
pub mod dfsssp;
pub mod dnup;
pub mod dor;
pub mod ecube;
pub mod ftree;
pub mod lash;
pub mod minhop;
pub mod nue;
pub(crate) mod paths;
pub mod rounds;
pub mod shard;
pub mod sssp;
pub mod sssp_opensm;
pub mod sssp_streams;
pub mod trees;
pub mod updn;

use crate::error::{Error, Result};
use crate::model::Fabric;
use crate::tables::Routing;

/// The minimal routing that DF-D2 and DF-DN make deadlock free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Base {
    #[default]
    #[cfg_attr(feature = "clap", value(name = "minhop"))]
    MinHop,
    Sssp,
    /// OpenSM LASH's BFS-tree routes (the `trees` module).
    Trees,
    /// Whichever of the BFS trees and SSSP loads its busiest link less
    /// (HCA pairs per directed switch link, the `load` module); ties go to the
    /// trees. Neither wins everywhere: the trees spread best on Dragonflies
    /// and Slim Flies, SSSP on tori, fat trees and random graphs.
    Auto,
}

impl Base {
    pub fn name(self) -> &'static str {
        match self {
            Base::MinHop => "minhop",
            Base::Sssp => "sssp",
            Base::Trees => "trees",
            Base::Auto => "auto",
        }
    }
}

impl std::fmt::Display for Base {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Base {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "minhop" => Ok(Base::MinHop),
            "sssp" => Ok(Base::Sssp),
            "trees" => Ok(Base::Trees),
            "auto" => Ok(Base::Auto),
            _ => Err(Error::Invalid(format!(
                "unknown base routing '{s}' (known: minhop, sssp, trees, auto)"
            ))),
        }
    }
}

/// The routing engines the product ships: a closed set, so configs and the
/// command line refuse unknown names when they are read and `--help` can
/// list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum EngineKind {
    Minhop,
    Sssp,
    Dfd2,
    Dfdn,
    Dfsssp,
    Lash,
    Updn,
    Dnup,
    Ftree,
    Nue,
    Dor,
    Ecube,
}

impl EngineKind {
    /// Every engine, in the order listings show them.
    pub const ALL: [EngineKind; 12] = [
        EngineKind::Minhop,
        EngineKind::Sssp,
        EngineKind::Dfd2,
        EngineKind::Dfdn,
        EngineKind::Dfsssp,
        EngineKind::Lash,
        EngineKind::Updn,
        EngineKind::Dnup,
        EngineKind::Ftree,
        EngineKind::Nue,
        EngineKind::Dor,
        EngineKind::Ecube,
    ];

    pub fn engine(self) -> Box<dyn RoutingEngine> {
        match self {
            EngineKind::Minhop => Box::new(minhop::MinHop),
            EngineKind::Sssp => Box::new(sssp::Sssp),
            EngineKind::Dfd2 => Box::new(dfd2::DfD2),
            EngineKind::Dfdn => Box::new(dfdn::DfDn),
            EngineKind::Dfsssp => Box::new(dfsssp::DfSssp),
            EngineKind::Lash => Box::new(lash::Lash),
            EngineKind::Updn => Box::new(updn::UpDn),
            EngineKind::Dnup => Box::new(dnup::DnUp),
            EngineKind::Ftree => Box::new(ftree::FTree),
            EngineKind::Nue => Box::new(nue::Nue),
            EngineKind::Dor => Box::new(dor::Dor),
            EngineKind::Ecube => Box::new(ecube::Ecube),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Minhop => "minhop",
            EngineKind::Sssp => "sssp",
            EngineKind::Dfd2 => "dfd2",
            EngineKind::Dfdn => "dfdn",
            EngineKind::Dfsssp => "dfsssp",
            EngineKind::Lash => "lash",
            EngineKind::Updn => "updn",
            EngineKind::Dnup => "dnup",
            EngineKind::Ftree => "ftree",
            EngineKind::Nue => "nue",
            EngineKind::Dor => "dor",
            EngineKind::Ecube => "ecube",
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for EngineKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        EngineKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| Error::UnknownEngine(s.to_string(), names().join(", ")))
    }
}

/// Knobs shared by all engines.
#[derive(Clone, Copy)]
pub struct EngineOptions<'a> {
    /// Data VLs the hardware offers (IB: 1, 2, 4, 8 or 15).
    pub max_vls: u8,
    /// Service levels the engine may hand out (IB: 16).
    pub max_sls: u8,
    /// Base routing for engines that build on one; `None`: the engine's
    /// own default (LASH: [`Base::Auto`], for balance; DF-DN: the BFS trees,
    /// weighed against SSSP only when they load a link more than twice the
    /// mean; DF-D2: MinHop).
    pub base: Option<Base>,
    /// Called with (work done, total work) on long runs.
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
    /// Root switches (node GUIDs) for engines that rank switches from roots
    /// (Up*/Down*); `None` lets the engine choose.
    pub roots: Option<&'a [u64]>,
    /// SSSP's balancing (engines sssp and dfsssp, and the sssp base) in
    /// this many fixed streams that exchange link loads in rounds
    /// ([`sssp_streams`]): the streams can run on several workers and give
    /// the same tables. 0: the classic sequential greedy.
    pub sssp_streams: u16,
}

impl Default for EngineOptions<'_> {
    fn default() -> Self {
        Self {
            max_vls: 8,
            max_sls: 16,
            base: None,
            progress: None,
            roots: None,
            sssp_streams: 0,
        }
    }
}

impl EngineOptions<'_> {
    /// The base an engine builds on with LMC above 0: MinHop (a
    /// destination's LIDs toward different neighbours, as OpenSM spreads
    /// them) or SSSP (each LID its own tree over the weights the earlier
    /// ones raised), SSSP when none is named. The BFS trees, and so
    /// `auto`, send every LID of a port one way: refused by name.
    pub(crate) fn lmc_base(&self, engine: &str) -> Result<Base> {
        match self.base {
            None => Ok(Base::Sssp),
            Some(b @ (Base::MinHop | Base::Sssp)) => Ok(b),
            Some(b) => Err(Error::Routing {
                engine: engine.into(),
                reason: format!(
                    "base {b} sends every LID of a port the same way; with LMC above 0 use --base minhop or sssp, which spread them"
                ),
            }),
        }
    }

    /// LFTs of the selected base routing (`default` when none is).
    pub(crate) fn base_lfts(&self, f: &Fabric, default: Base) -> Result<crate::tables::Lfts> {
        match self.base.unwrap_or(default) {
            Base::MinHop => {
                let g = crate::graph::SwitchGraph::new(f);
                let hops = g.hop_matrix();
                Ok(minhop::minhop_lfts(f, &g, &hops, self))
            }
            Base::Sssp => sssp::sssp_lfts(f, self),
            Base::Trees => Ok(trees::tree_lfts(f, self)),
            Base::Auto => self.trees_or_sssp(f, |_| false),
        }
    }

    /// The BFS trees, kept as they are when `enough` accepts their link
    /// load; otherwise weighed against SSSP, and SSSP taken when it loads
    /// its busiest link less.
    pub(crate) fn trees_or_sssp(
        &self,
        f: &Fabric,
        enough: impl Fn(&crate::load::LinkLoad) -> bool,
    ) -> Result<crate::tables::Lfts> {
        let trees = trees::tree_lfts(f, self);
        let load = crate::load::link_load(f, &trees);
        self.keep_trees_or_sssp(f, trees, &load, enough)
    }

    /// [`Self::trees_or_sssp`] once the trees and their load are known
    /// (computed here or merged from a job's parts).
    pub(crate) fn keep_trees_or_sssp(
        &self,
        f: &Fabric,
        trees: crate::tables::Lfts,
        load: &crate::load::LinkLoad,
        enough: impl Fn(&crate::load::LinkLoad) -> bool,
    ) -> Result<crate::tables::Lfts> {
        if enough(load) {
            return Ok(trees);
        }
        let sssp = sssp::sssp_lfts(f, self)?;
        let sssp_max = crate::load::link_load(f, &sssp).max;
        tracing::debug!(trees = load.max, sssp = sssp_max, "busiest link per base");
        Ok(if sssp_max < load.max { sssp } else { trees })
    }

    pub fn report(&self, done: u64, total: u64) {
        if let Some(p) = self.progress {
            p(done, total);
        }
    }
}

/// A routing engine turns a subnet into tables. Engines are pure: no I/O,
/// no global state; the caller verifies and writes the result.
pub trait RoutingEngine: Send + Sync {
    fn kind(&self) -> EngineKind;
    fn name(&self) -> &'static str {
        self.kind().name()
    }
    /// One line for `--help` and listings.
    fn description(&self) -> &'static str;
    /// Whether the engine promises deadlock freedom (the verifier checks it anyway).
    fn claims_deadlock_free(&self) -> bool;
    /// Whether the engine honours [`EngineOptions::roots`]; callers refuse
    /// root switches for the others instead of silently ignoring them.
    fn uses_roots(&self) -> bool {
        false
    }
    /// Whether the engine defines primary paths per destination (fat-tree
    /// routing): a subnet routed by such an engine reports ISFR's primary
    /// destinations per router port; the others report none and ISFR falls
    /// back to ISSR there.
    fn reports_primary_paths(&self) -> bool {
        false
    }
    /// Whether the engine routes every LID of a port with LMC above 0,
    /// spreading a destination's LIDs over different next hops; the
    /// others are refused on such a fabric ([`check_lmc`]).
    fn routes_lmc(&self) -> bool {
        false
    }
    /// How a job of this engine with `opts` is cut across workers
    /// ([`shard`], [`rounds`]), or why it is computed in one place.
    fn split(&self, _opts: &EngineOptions) -> Split {
        Split::Whole(format!(
            "{} is not cut across workers (dfdn, minhop and nue are, and sssp and dfsssp with SSSP streams)",
            self.name()
        ))
    }
    fn route(&self, fabric: &Fabric, opts: &EngineOptions) -> Result<Routing>;
}

/// How an engine's job is cut across workers. Every cut gives the tables
/// one process gives, byte for byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Split {
    /// LFT rows by source switch: each row balances on its own switch's
    /// counters alone (MinHop; [`shard::minhop_part`]).
    SourceSwitches,
    /// Base-routing columns and link-load sums by destination switch
    /// (DF-DN on the BFS trees; [`shard::route_part`]).
    DestinationSwitches,
    /// Units that exchange their channel loads once per round (Nue's
    /// virtual layers, SSSP's streams; [`rounds::Plan`]).
    Rounds,
    /// Computed in one place, for the reason given.
    Whole(String),
}

impl Split {
    /// Whether the job can go to workers at all.
    pub fn splits(&self) -> bool {
        !matches!(self, Split::Whole(_))
    }
}

/// Refuses a fabric with LMC above 0 for an engine that would route one
/// LID per port: the other LIDs would be left without a route.
pub fn check_lmc(engine: &dyn RoutingEngine, f: &Fabric) -> Result<()> {
    check_switch_lmc(f)?;
    if f.max_lmc() == 0 || engine.routes_lmc() {
        return Ok(());
    }
    let port = f
        .endports()
        .iter()
        .copied()
        .find(|&e| f.lmc(e) > 0)
        .map(|e| {
            format!(
                " ({} port {} has LMC {})",
                f.desc(f.node_of(e)),
                f.port_of(e),
                f.lmc(e)
            )
        })
        .unwrap_or_default();
    let able: Vec<&str> = registry()
        .iter()
        .filter(|e| e.routes_lmc())
        .map(|e| e.name())
        .collect();
    Err(Error::Invalid(format!(
        "engine {} routes one LID per port and the fabric has LMC up to {}{port}; engines that route every LID: {}",
        engine.name(),
        f.max_lmc(),
        able.join(", ")
    )))
}

/// Refuses a switch whose port 0 has LMC above 0 (OpenSM's `lmc_esp0`):
/// engines, DQR and the verifier take one LID per switch, and its other
/// LIDs would be left behind; end ports may have LMC.
pub fn check_switch_lmc(f: &Fabric) -> Result<()> {
    match f.switches().iter().find(|&&sw| f.lmc(f.slot(sw, 0)) > 0) {
        Some(&sw) => Err(Error::Invalid(format!(
            "switch {} has LMC {} on its port 0: ibfabric routes one LID per switch (end ports may have LMC)",
            f.desc(sw),
            f.lmc(f.slot(sw, 0))
        ))),
        None => Ok(()),
    }
}

/// Every engine the product ships, in the order listings show them.
pub fn registry() -> Vec<Box<dyn RoutingEngine>> {
    EngineKind::ALL
        .into_iter()
        .map(EngineKind::engine)
        .collect()
}

pub fn names() -> Vec<&'static str> {
    EngineKind::ALL.into_iter().map(EngineKind::name).collect()
}

pub fn by_name(name: &str) -> Result<Box<dyn RoutingEngine>> {
    name.parse::<EngineKind>().map(EngineKind::engine)
}
