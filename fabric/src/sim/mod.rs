//! Traffic simulation over routed fabrics: `flow` the flow-level model
//! (max-min fair rates), `packet` the packet-level one (credit-based flow
//! control, virtual cut-through, deadlock detection), `traffic` the
//! patterns both run.

pub mod flow;
pub mod packet;
pub mod traffic;
pub mod workload;

pub use crate::network::{Host, LidChoice, Network, Paths, SubnetPaths};
pub use flow::{RingStats, max_min, rates, ring, rings, uniform};
pub use traffic::{Destinations, Uniform, ring_order};

use crate::error::Error;

fn sim_err(reason: String) -> Error {
    Error::Invalid(format!("simulation: {reason}"))
}
