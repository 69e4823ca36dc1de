//! gRPC/protobuf contracts between agent, controller and router firmware
//! (`proto/ibfabric/v1/ibfabric.proto` documents every message).

#![allow(clippy::all, missing_docs)]

pub mod chunk;
pub mod client;
pub mod convert;
pub mod ops;
pub mod version;

/// Version 1 of the contracts; a breaking change gets a new package.
pub mod v1 {
    tonic::include_proto!("ibfabric.v1");
}

impl v1::Gid {
    pub fn new(prefix: u64, guid: u64) -> Self {
        Self { prefix, guid }
    }
}

impl std::fmt::Display for v1::Gid {
    /// The usual GID notation: eight groups of 16 bits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&fabric::formats::mapping::gid_text(convert::gid_from_wire(
            self,
        )))
    }
}
