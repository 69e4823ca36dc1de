//! Per-subnet agent service. Not built yet: the `ibfabric` binary has no
//! `agent` subcommand until this crate holds a real service.
