//! Inter-subnet routing: which local router port a host uses for a remote
//! destination (the mapping file of the ISSR paper), and how each router
//! relays (egress tables). Pure: it works on what the controller learns
//! from the agents' reports ([`GlobalView`]), not on live fabrics.
//!
//! Algorithms sit behind [`InterSubnetRouting`]; the OpenSM prefix-route
//! baseline is [`PrefixBaseline`], then [`Issr`] and [`Isfr`], each in a
//! file of its own. The reported view, the emitted tables, transit over the
//! subnet graph, the path tracer and ISFR's primary destinations have one
//! file each as well.

mod gid;
mod isfr;
mod issr;
mod prefix;
mod primary;
mod tables;
mod tracer;
mod transit;
mod view;

pub use gid::Gid;
pub use isfr::Isfr;
pub use issr::{Issr, issr_with_transit};
pub use prefix::{Egress, PrefixBaseline, RouterPick};
pub use primary::{primary_lids, reported_primary_lids};
pub use tables::{Choice, Context, InterSubnetRoutes, MapEntry, Mapping, Match, RouterTable, Rule};
pub use tracer::{Crossing, Tracer, trace};
pub use transit::{Transit, subnet_next_hops};
pub use view::{EndPortView, GlobalView, RouterPortView, SubnetView};

use crate::error::{Error, Result};

pub trait InterSubnetRouting: Send + Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    fn route(&self, view: &GlobalView) -> Result<InterSubnetRoutes>;
}

/// The inter-subnet algorithms the product ships: a closed set, so configs
/// and the command line refuse unknown names when they are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum AlgorithmKind {
    Prefix,
    /// The prefix baseline with routers forwarding into a subnet per
    /// destination LID over their ports there (a reading of the paper).
    PrefixBylid,
    /// The prefix baseline with each (source, destination) subnet pair on
    /// its own router where there are enough, and per-LID forwarding.
    PrefixSpread,
    Issr,
    Isfr,
}

impl AlgorithmKind {
    pub const ALL: [AlgorithmKind; 5] = [
        AlgorithmKind::Prefix,
        AlgorithmKind::PrefixBylid,
        AlgorithmKind::PrefixSpread,
        AlgorithmKind::Issr,
        AlgorithmKind::Isfr,
    ];

    pub fn algorithm(self) -> Box<dyn InterSubnetRouting> {
        match self {
            AlgorithmKind::Prefix => Box::new(PrefixBaseline::OPENSM),
            AlgorithmKind::PrefixBylid => Box::new(PrefixBaseline {
                egress: Egress::ByLid,
                ..PrefixBaseline::OPENSM
            }),
            AlgorithmKind::PrefixSpread => Box::new(PrefixBaseline {
                pick: RouterPick::Spread,
                egress: Egress::ByLid,
            }),
            AlgorithmKind::Issr => Box::new(Issr),
            AlgorithmKind::Isfr => Box::new(Isfr),
        }
    }

    /// One of the readings of OpenSM's prefix routes (no transit).
    pub fn is_prefix(self) -> bool {
        matches!(
            self,
            AlgorithmKind::Prefix | AlgorithmKind::PrefixBylid | AlgorithmKind::PrefixSpread
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            AlgorithmKind::Prefix => "prefix",
            AlgorithmKind::PrefixBylid => "prefix-bylid",
            AlgorithmKind::PrefixSpread => "prefix-spread",
            AlgorithmKind::Issr => "issr",
            AlgorithmKind::Isfr => "isfr",
        }
    }
}

impl std::fmt::Display for AlgorithmKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for AlgorithmKind {
    type Err = Error;
    fn from_str(name: &str) -> Result<Self> {
        AlgorithmKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = AlgorithmKind::ALL.iter().map(|k| k.name()).collect();
                Error::InterSubnet {
                    algorithm: name.to_string(),
                    reason: format!("unknown algorithm (known: {})", known.join(", ")),
                }
            })
    }
}

/// Every inter-subnet algorithm the product ships.
pub fn registry() -> Vec<Box<dyn InterSubnetRouting>> {
    AlgorithmKind::ALL
        .into_iter()
        .map(AlgorithmKind::algorithm)
        .collect()
}

pub fn by_name(name: &str) -> Result<Box<dyn InterSubnetRouting>> {
    name.parse::<AlgorithmKind>().map(AlgorithmKind::algorithm)
}
