//! Router firmware table holder. Not built yet: the `ibfabric` binary has no
//! `router` subcommand until this crate holds a real service.
