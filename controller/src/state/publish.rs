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

/// A published result: versioned, with a content that is digested without
/// its version.
pub trait Versioned: Message + Default {
    fn version(&self) -> u64;
    fn set_version(&mut self, v: u64);
    /// Zeroes the version, repair marker and part numbers: the content
    /// alone.
    fn strip(&mut self);
}

impl Versioned for v1::MappingUpdate {
    fn version(&self) -> u64 {
        self.version
    }
    fn set_version(&mut self, v: u64) {
        self.version = v;
    }
    fn strip(&mut self) {
        (self.version, self.replaces, self.part, self.parts) = (0, 0, 0, 0);
    }
}

impl Versioned for v1::EgressTables {
    fn version(&self) -> u64 {
        self.version
    }
    fn set_version(&mut self, v: u64) {
        self.version = v;
    }
    fn strip(&mut self) {
        (self.version, self.replaces, self.part, self.parts) = (0, 0, 0, 0);
    }
}

/// Versions one new result `w` (made at `next_version`) against what was
/// published under `key`: an unchanged content (the same digest as the
/// result in memory, or as a restored head) keeps the old version, and the
/// result in memory itself; otherwise the new head goes to `writes` and
/// `heads`.
pub(super) fn place<T: Versioned>(
    w: T,
    old: Option<&Arc<Held<T>>>,
    key: String,
    algorithm: &str,
    writes: &mut Vec<Write>,
    heads: &mut BTreeMap<String, v1::StoredRoute>,
) -> Arc<Held<T>> {
    let mut held = Held::of(w);
    match (old, heads.get(&key)) {
        (Some(old), _) if old.digest() == held.digest() => return old.clone(),
        (None, Some(h)) if h.digest == held.digest() => held.set_version(h.version),
        _ => {
            let head = v1::StoredRoute {
                version: held.version(),
                algorithm: algorithm.to_string(),
                digest: held.digest().to_vec(),
            };
            writes.push(Write {
                key: key.clone(),
                value: head.encode_to_vec(),
            });
            heads.insert(key, head);
        }
    }
    Arc::new(held)
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
    /// (nothing to write or publish). Takes the routes by value: each
    /// result is dropped once its wire form is built, so at the LID limit
    /// the two forms of all routers' tables are never held at once.
    pub fn next(
        &self,
        routes: fabric::intersubnet::InterSubnetRoutes,
        term: u64,
    ) -> Option<Publication> {
        let next_version = (self.version + 1).max(first_version(term));
        let mut writes = Vec::new();
        let mut heads = self.heads.clone();
        let mut mappings = BTreeMap::new();
        for m in routes.mappings {
            let w = proto::convert::mapping_to_wire(&m, next_version, &routes.algorithm);
            let prefix = m.prefix;
            drop(m);
            let held = place(
                w,
                self.mappings.get(&prefix),
                mapping_key(prefix),
                &routes.algorithm,
                &mut writes,
                &mut heads,
            );
            mappings.insert(prefix, held);
        }
        let mut egress = BTreeMap::new();
        for t in routes.routers {
            let w = proto::convert::table_to_wire(&t, next_version, &routes.algorithm);
            let guid = t.router_guid;
            drop(t);
            let held = place(
                w,
                self.egress.get(&guid),
                egress_key(guid),
                &routes.algorithm,
                &mut writes,
                &mut heads,
            );
            egress.insert(guid, held);
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
    Ok(prev.next(routes, term))
}

/// The store key of one subnet.
pub fn subnet_key(prefix: u64) -> String {
    format!("{SUBNET_KEY}{prefix:016x}")
}

/// Reports equal but for session, generation, route seconds and link
/// load (a heartbeat).
pub(super) fn same_content(a: &v1::SubnetReport, b: &v1::SubnetReport) -> bool {
    let strip = |r: &v1::SubnetReport| v1::SubnetReport {
        session: String::new(),
        generation: 0,
        routing: r.routing.clone().map(|mut x| {
            x.route_seconds = 0.0;
            // Measured after the tables are in force: no route depends on it.
            x.link_load = None;
            x
        }),
        ..r.clone()
    };
    strip(a) == strip(b)
}
