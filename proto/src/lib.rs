//! gRPC/protobuf contracts between agent, controller and router firmware.
//!
//! The contracts are defined by the control-plane work; this crate holds no
//! messages yet and exports nothing, so no caller can mistake it for a
//! working transport.
