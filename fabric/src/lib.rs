//! ibfabric core library: synchronous and free of I/O in its algorithms.
//!
//! Data flow: a topology (parsed from ibnetdiscover output or generated)
//! becomes a [`model::Fabric`]; a [`routing::RoutingEngine`] turns it into
//! [`tables::Routing`] (LFTs, SL-to-VL tables, path SLs); [`verify`]
//! rebuilds the channel dependency graph from those tables alone; the
//! [`formats`] module reads and writes the files OpenSM and ibsim use.

pub mod audit;
pub mod discovery;
pub mod dqr;
pub mod error;
pub mod formats;
pub mod fsio;
pub mod generate;
pub mod graph;
pub mod intersubnet;
pub mod lid_spread;
pub mod load;
pub mod mcast;
pub mod model;
pub mod multi;
pub mod network;
pub mod pipeline;
pub mod routing;
pub mod sim;
pub mod tables;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod verify;

pub use error::{Error, Result};
pub use model::{Fabric, FabricBuilder, NodeId, NodeKind, Slot};
