//! The port GID that names a destination across subnets.

/// A port GID: subnet prefix and port GUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gid {
    pub prefix: u64,
    pub guid: u64,
}

impl std::fmt::Display for Gid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#018x}:{:#018x}", self.prefix, self.guid)
    }
}
