//! Versions and what is published: a version is `term << 32 | sequence`;
//! a result keeps its version while its content is unchanged, and the
//! store holds a head (version and digest) per published result.

use super::*;

/// The term of a version (its high 32 bits).
pub fn term_of(version: u64) -> u64 {
    version >> 32
}

/// The first version of `term`.
pub fn first_version(term: u64) -> u64 {
    (term << 32) | 1
}

/// The term a new leader takes: above the stored one, and never below the
/// wall clock's seconds, so that even a store that lost its term (a memory
/// store restarted without its state file) starts above every earlier
/// term that followed the clock.
pub fn next_term(stored: u64, unix_seconds: u64) -> u64 {
    stored
        .saturating_add(1)
        .max(unix_seconds)
        .min(u64::from(u32::MAX))
}

/// The store key of a subnet's published mapping.
pub fn mapping_key(prefix: u64) -> String {
    format!("{ROUTES_KEY}mapping/{prefix:016x}")
}

/// The store key of a router's published egress tables.
pub fn egress_key(router_guid: u64) -> String {
    format!("{ROUTES_KEY}egress/{router_guid:016x}")
}

/// A published result: versioned, with a content that can be compared in
/// place and digested without its version.
pub(super) trait Versioned: Message + Clone {
    fn version(&self) -> u64;
    fn set_version(&mut self, v: u64);
    /// The same content, whatever the versions (compared in place:
    /// results can be megabytes).
    fn same_content(&self, other: &Self) -> bool;
    /// The content alone: version, repair marker and part numbers zeroed.
    fn content(&self) -> Self;

    /// SHA-256 of [`Versioned::content`].
    fn digest(&self) -> Vec<u8> {
        use sha2::{Digest, Sha256};
        Sha256::digest(self.content().encode_to_vec()).to_vec()
    }
}

impl Versioned for v1::MappingUpdate {
    fn version(&self) -> u64 {
        self.version
    }
    fn set_version(&mut self, v: u64) {
        self.version = v;
    }
    fn same_content(&self, b: &Self) -> bool {
        self.subnet_prefix == b.subnet_prefix
            && self.algorithm == b.algorithm
            && self.entries == b.entries
            && self.default_ports == b.default_ports
    }
    fn content(&self) -> Self {
        v1::MappingUpdate {
            version: 0,
            replaces: 0,
            part: 0,
            parts: 0,
            ..self.clone()
        }
    }
}

impl Versioned for v1::EgressTables {
    fn version(&self) -> u64 {
        self.version
    }
    fn set_version(&mut self, v: u64) {
        self.version = v;
    }
    fn same_content(&self, b: &Self) -> bool {
        self.router_guid == b.router_guid
            && self.algorithm == b.algorithm
            && self.contexts == b.contexts
    }
    fn content(&self) -> Self {
        v1::EgressTables {
            version: 0,
            replaces: 0,
            part: 0,
            parts: 0,
            ..self.clone()
        }
    }
}

/// Versions one new result `w` (made at `next_version`) against what was
/// published under `key`: it keeps the old version when its content is
/// unchanged (compared in place with the result in memory, or by digest
/// with a restored head); otherwise the new head goes to `writes` and
/// `heads`.
pub(super) fn place<T: Versioned>(
    w: &mut T,
    old: Option<&Arc<T>>,
    key: String,
    algorithm: &str,
    writes: &mut Vec<Write>,
    heads: &mut BTreeMap<String, v1::StoredRoute>,
) {
    let kept = match (old, heads.get(&key)) {
        (Some(old), _) if old.same_content(w) => Some(old.version()),
        (None, Some(h)) if h.digest == w.digest() => Some(h.version),
        _ => None,
    };
    match kept {
        Some(v) => w.set_version(v),
        None => {
            let head = v1::StoredRoute {
                version: w.version(),
                algorithm: algorithm.to_string(),
                digest: w.digest(),
            };
            writes.push(Write {
                key: key.clone(),
                value: head.encode_to_vec(),
            });
            heads.insert(key, head);
        }
    }
}

impl Published {
    /// This snapshot without the subnet's mapping (an operator forgot the
    /// subnet): its agent gets no mapping from now on.
    pub fn without_mapping(&self, prefix: u64) -> Self {
        let mut p = self.clone();
        p.mappings.remove(&prefix);
        p.heads.remove(&mapping_key(prefix));
        p
    }

    /// What an earlier leader published (the heads under `routes/`), or
    /// nothing published yet under `algorithm`. The content comes back
    /// with the first recomputation ([`Published::next`]).
    pub fn restore(algorithm: &str, stored: Vec<(String, Vec<u8>)>) -> Result<Self, ControlError> {
        let mut p = Published {
            algorithm: algorithm.to_string(),
            restored: true,
            ..Published::default()
        };
        for (key, v) in stored {
            if !key.starts_with(ROUTES_KEY) {
                continue;
            }
            let head = v1::StoredRoute::decode(v.as_slice()).map_err(|source| {
                ControlError::Undecodable {
                    key: key.clone(),
                    source,
                }
            })?;
            p.version = p.version.max(head.version);
            p.heads.insert(key, head);
        }
        Ok(p)
    }

    /// Versions new routes against this snapshot: unchanged results keep
    /// their versions, changed ones get the next version of `term` (or of
    /// this snapshot, when that is higher); None when nothing changed
    /// (nothing to write or publish).
    pub fn next(
        &self,
        routes: &fabric::intersubnet::InterSubnetRoutes,
        term: u64,
    ) -> Option<Publication> {
        let next_version = (self.version + 1).max(first_version(term));
        let mut writes = Vec::new();
        let mut heads = self.heads.clone();
        let mut mappings = BTreeMap::new();
        for m in &routes.mappings {
            let mut w = proto::convert::mapping_to_wire(m, next_version, &routes.algorithm);
            place(
                &mut w,
                self.mappings.get(&m.prefix),
                mapping_key(m.prefix),
                &routes.algorithm,
                &mut writes,
                &mut heads,
            );
            mappings.insert(m.prefix, Arc::new(w));
        }
        let mut egress = BTreeMap::new();
        for t in &routes.routers {
            let mut w = proto::convert::table_to_wire(t, next_version, &routes.algorithm);
            place(
                &mut w,
                self.egress.get(&t.router_guid),
                egress_key(t.router_guid),
                &routes.algorithm,
                &mut writes,
                &mut heads,
            );
            egress.insert(t.router_guid, Arc::new(w));
        }
        if writes.is_empty() && !self.restored {
            return None;
        }
        // A result that vanished (its subnet or router left) is kept: its
        // receivers hold it anyway, and withdrawing routes is a decision an
        // operator makes, not a side effect of a missed report.
        for (k, v) in &self.mappings {
            mappings.entry(*k).or_insert_with(|| v.clone());
        }
        for (k, v) in &self.egress {
            egress.entry(*k).or_insert_with(|| v.clone());
        }
        // A restored head whose result vanished has no content to serve:
        // its receivers hold it, and its version still counts below.
        let published = Published {
            version: if writes.is_empty() {
                self.version
            } else {
                next_version
            },
            algorithm: routes.algorithm.clone(),
            mappings,
            egress,
            heads,
            restored: false,
        };
        Some(Publication { published, writes })
    }
}

/// Runs the inter-subnet algorithm on `view`, checks the routes against
/// the subnets' `reports` (the ones `view` was built from) with the
/// whole-fabric check ([`compose::check_fabric`]), and versions them
/// against `prev` ([`Published::next`]) in `term`. Nothing that closes a
/// dependency cycle across subnets or leaves a pair undelivered gets a
/// version.
pub fn recompute(
    view: &GlobalView,
    reports: &[v1::SubnetReport],
    algo: &dyn InterSubnetRouting,
    prev: &Published,
    term: u64,
) -> Result<Option<Publication>, ControlError> {
    let routes = algo.route(view)?;
    let refs: Vec<&v1::SubnetReport> = reports.iter().collect();
    compose::check_fabric(&refs, &routes)?;
    Ok(prev.next(&routes, term))
}

/// The store key of one subnet.
pub fn subnet_key(prefix: u64) -> String {
    format!("{SUBNET_KEY}{prefix:016x}")
}

/// Reports equal but for session and generation (a heartbeat).
pub(super) fn same_content(a: &v1::SubnetReport, b: &v1::SubnetReport) -> bool {
    let strip = |r: &v1::SubnetReport| v1::SubnetReport {
        session: String::new(),
        generation: 0,
        routing: r.routing.clone().map(|mut x| {
            x.route_seconds = 0.0;
            x
        }),
        ..r.clone()
    };
    strip(a) == strip(b)
}
