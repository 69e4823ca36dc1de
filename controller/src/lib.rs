//! Super-controller service. Not built yet: the `ibfabric` binary has no
//! `controller` subcommand until this crate holds a real service.
