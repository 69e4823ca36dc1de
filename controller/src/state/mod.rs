//! The controller's state and its transitions, without I/O: each
//! transition takes the current state and one input (a registration, a
//! report, a recomputation) and says what the leader must write to the
//! store; the caller ([`crate::Controller`]) writes it and only then
//! applies the change to memory, so a failed write leaves memory and store
//! as they were. The clock comes in as an argument, so every rule here is
//! checked by plain unit tests.
//!
//! The rules: versions only grow and carry the leadership term; a mapping
//! or egress table keeps its version while its content is unchanged; a
//! report that only repeats what is known (a heartbeat) writes nothing and
//! publishes nothing; a report is accepted only from the identity that
//! holds its subnet's session and only when its tables were verified
//! deadlock free; an accepted subnet takes part in the routes only when it
//! vouches for its tables and agrees with the other subnets ([`claims`]),
//! and otherwise is left out, named, without stopping the others.

mod claims;
pub mod compose;
mod held;
mod publish;

pub use held::Held;

pub use publish::*;

use crate::ControlError;
use fabric::intersubnet::{GlobalView, InterSubnetRouting};
use prost::Message;
use proto::v1;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Store key prefix of the accepted subnets, one key per prefix.
pub const SUBNET_KEY: &str = "subnets/";
/// Store key prefix of the published routes: one key per result,
/// `routes/mapping/<prefix>` and `routes/egress/<router GUID>`, each a
/// [`v1::StoredRoute`] (version and digest).
pub const ROUTES_KEY: &str = "routes/";
/// Store key of the leadership term.
pub const TERM_KEY: &str = "term";
/// Buckets a subnet's link-load histogram may have (agents send ten).
pub const MAX_LOAD_BUCKETS: usize = 64;

/// One store write a transition asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub key: String,
    pub value: Vec<u8>,
}

/// Bounds on what clients may make the controller hold. The defaults fit
/// 64 subnets of up to 48k LIDs each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_subnets: usize,
    pub max_end_ports: usize,
    pub max_router_ports: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_subnets: 64,
            max_end_ports: 49_151,
            max_router_ports: 4_096,
        }
    }
}

/// Published results, one immutable snapshot per change. Results are
/// shared between snapshots: a change copies pointers, not tables.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Published {
    pub version: u64,
    pub algorithm: String,
    /// Held encoded ([`Held`]): at the LID limit the decoded results are
    /// gigabytes.
    pub mappings: BTreeMap<u64, Arc<Held<v1::MappingUpdate>>>,
    pub egress: BTreeMap<u64, Arc<Held<v1::EgressTables>>>,
    /// What the store holds of every result published, by store key:
    /// version and digest. A restored snapshot has these and no content
    /// until the first recomputation, which keeps a version wherever the
    /// recomputed content has the same digest.
    pub heads: BTreeMap<String, v1::StoredRoute>,
    /// Restored from the store and not recomputed yet: versions without
    /// content.
    pub restored: bool,
}

/// A new snapshot to publish and the writes that must land before it
/// does (the heads of the results that changed; none when a restored
/// snapshot only got its content back).
#[derive(Debug, Clone, PartialEq)]
pub struct Publication {
    pub published: Published,
    pub writes: Vec<Write>,
}

/// One subnet's agent as the leader knows it.
#[derive(Debug, Clone)]
pub struct SubnetEntry {
    pub agent_id: String,
    /// The identity that may speak for the subnet (see [`crate::Caller`]).
    pub holder: String,
    pub session: String,
    pub query_addr: String,
    pub last_seen: Instant,
    /// The last generation accepted in this session (0: none yet).
    /// Generations order reports within a session only; a new session
    /// starts again.
    pub generation: u64,
    pub report: Option<v1::SubnetReport>,
    /// When the subnet's first report (under its current holder) was
    /// accepted, in acceptance order across leaders: of two conflicting
    /// claims the senior subnet's holds ([`claims`]).
    pub order: u64,
    /// Why the report cannot vouch for routes through the subnet
    /// ([`claims::vouch`]); None when it can.
    pub unvouched: Option<String>,
}

/// A report the state accepted, to apply once its write (if any) landed.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub prefix: u64,
    pub generation: u64,
    /// The write when the subnet's content changed (then recompute too);
    /// None for a heartbeat.
    pub write: Option<Write>,
    report: Option<v1::SubnetReport>,
    order: u64,
    unvouched: Option<String>,
    /// A heartbeat's link load (not content: it comes after the tables are
    /// in force and changes no route), kept in memory only.
    link_load: Option<v1::LinkLoadSummary>,
}

impl Accepted {
    pub fn changed(&self) -> bool {
        self.write.is_some()
    }
}

/// The accepted subnets, by prefix.
#[derive(Debug, Clone, Default)]
pub struct State {
    subnets: BTreeMap<u64, SubnetEntry>,
    /// The subnets left out of the routes and why ([`claims`]), kept in
    /// step with every change of a report.
    left_out: BTreeMap<u64, String>,
    /// The order the next accepted change gets (see
    /// [`SubnetEntry::order`]).
    next_order: u64,
}

fn hex(v: u64) -> String {
    format!("{v:#018x}")
}

/// A report's link-load histogram within [`MAX_LOAD_BUCKETS`], whether the
/// report is new content or a heartbeat.
fn load_bounded(r: &v1::SubnetReport) -> Result<(), ControlError> {
    let buckets = r
        .routing
        .as_ref()
        .and_then(|x| x.link_load.as_ref())
        .map_or(0, |l| l.buckets.len());
    if buckets > MAX_LOAD_BUCKETS {
        return Err(invalid(
            r.subnet_prefix,
            format!("its link-load histogram has more than {MAX_LOAD_BUCKETS} buckets"),
        ));
    }
    Ok(())
}

fn invalid(prefix: u64, why: String) -> ControlError {
    ControlError::Invalid(format!("report for subnet {}: {why}", hex(prefix)))
}

impl State {
    /// The state an earlier leader persisted (`subnets/` keys and values).
    /// Loaded agents count as seen at `now`, which gives them one lease to
    /// find the new leader before another identity may take their prefix;
    /// their sessions are not restored (they register again with the new
    /// leader).
    pub fn restore(stored: Vec<(String, Vec<u8>)>, now: Instant) -> Result<Self, ControlError> {
        let mut st = State::default();
        for (key, v) in stored {
            let s = v1::StoredSubnet::decode(v.as_slice())
                .map_err(|source| ControlError::Undecodable { key, source })?;
            // Stores written before the prefix had its own field name the
            // subnet only in the report.
            let prefix = match (s.subnet_prefix, &s.report) {
                (0, Some(r)) => r.subnet_prefix,
                (p, _) => p,
            };
            let Some(report) = s.report else {
                // A registration that never reported holds nothing worth
                // restoring.
                continue;
            };
            st.next_order = st.next_order.max(s.accepted_order + 1);
            st.subnets.insert(
                prefix,
                SubnetEntry {
                    agent_id: s.agent_id,
                    holder: s.holder,
                    session: String::new(),
                    query_addr: s.query_addr,
                    last_seen: now,
                    generation: 0,
                    unvouched: claims::vouch(&report),
                    report: Some(report),
                    order: s.accepted_order,
                },
            );
        }
        st.refresh();
        Ok(st)
    }

    pub fn len(&self) -> usize {
        self.subnets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.subnets.is_empty()
    }

    /// The prefixes of the subnets that take part in the routes.
    pub fn prefixes(&self) -> impl Iterator<Item = u64> + '_ {
        self.taking_part().map(|(p, _, _)| p)
    }

    pub fn get(&self, prefix: u64) -> Option<&SubnetEntry> {
        self.subnets.get(&prefix)
    }

    /// Why the subnet is left out of the routes; None when it takes part
    /// (or has not reported).
    pub fn left_out(&self, prefix: u64) -> Option<&str> {
        self.left_out.get(&prefix).map(String::as_str)
    }

    fn refresh(&mut self) {
        self.left_out = claims::left_out(self.subnets.iter().map(|(&p, e)| (p, e)));
    }

    /// Drops a subnet: its registration, its report and its claims. True
    /// when there was one.
    pub fn forget(&mut self, prefix: u64) -> bool {
        let had = self.subnets.remove(&prefix).is_some();
        self.refresh();
        had
    }

    /// Gives the prefix a new session for `holder`, unless another
    /// identity holds it and was seen within `lease`. The same holder
    /// registering again (an agent restart) keeps its report. Registrations
    /// live in memory only: the store holds a subnet from its first
    /// accepted report on, and a registration that does not report within
    /// a lease expires.
    #[allow(clippy::too_many_arguments)]
    pub fn register(
        &mut self,
        r: &v1::RegisterRequest,
        holder: &str,
        session: String,
        now: Instant,
        lease: Duration,
        limits: &Limits,
    ) -> Result<(), ControlError> {
        if r.agent_id.trim().is_empty() {
            return Err(ControlError::Invalid("agent_id is empty".into()));
        }
        if r.agent_id.len() > 256 || r.query_addr.len() > 256 {
            return Err(ControlError::Invalid(
                "agent_id and query_addr are limited to 256 bytes".into(),
            ));
        }
        self.expire(now, lease);
        let held = self.subnets.get(&r.subnet_prefix);
        if let Some(e) = held {
            if e.holder != holder && now.saturating_duration_since(e.last_seen) < lease {
                return Err(ControlError::PrefixHeld {
                    prefix: r.subnet_prefix,
                    holder: e.agent_id.clone(),
                });
            }
        } else if self.subnets.len() >= limits.max_subnets {
            return Err(ControlError::Exhausted(format!(
                "{} subnets are registered, the limit is {}",
                self.subnets.len(),
                limits.max_subnets
            )));
        }
        let kept = held.filter(|e| e.holder == holder);
        let report = kept.and_then(|e| e.report.clone());
        let (order, unvouched) = kept.map_or((0, None), |e| (e.order, e.unvouched.clone()));
        let dropped = held.is_some_and(|e| e.holder != holder && e.report.is_some());
        self.subnets.insert(
            r.subnet_prefix,
            SubnetEntry {
                agent_id: r.agent_id.clone(),
                holder: holder.to_string(),
                session,
                query_addr: r.query_addr.clone(),
                last_seen: now,
                generation: 0,
                report,
                order,
                unvouched,
            },
        );
        if dropped {
            self.refresh();
        }
        Ok(())
    }

    /// Drops registrations that never reported and were not seen within
    /// `lease`: they hold a prefix and memory for nothing.
    pub fn expire(&mut self, now: Instant, lease: Duration) {
        self.subnets.retain(|_, e| {
            e.report.is_some() || now.saturating_duration_since(e.last_seen) < lease
        });
    }

    /// Checks a report from `holder` against the session that holds its
    /// prefix and against every other subnet. Changes nothing: the caller
    /// writes [`Accepted::write`] (when the content changed), then
    /// [`State::apply`]s it.
    ///
    /// `holder` is the caller's proven identity; None on a plaintext
    /// transport, where the session alone binds the report.
    pub fn check_report(
        &self,
        r: &v1::SubnetReport,
        holder: Option<&str>,
        limits: &Limits,
    ) -> Result<Accepted, ControlError> {
        let prefix = r.subnet_prefix;
        let e = self
            .subnets
            .get(&prefix)
            .filter(|e| !e.session.is_empty() && e.session == r.session)
            .filter(|e| holder.is_none_or(|h| h == e.holder))
            .ok_or(ControlError::UnknownSession(prefix))?;
        if r.generation < e.generation {
            return Err(ControlError::StaleReport {
                got: r.generation,
                have: e.generation,
            });
        }
        let changed = e.report.as_ref().is_none_or(|old| !same_content(old, r));
        if !changed {
            load_bounded(r)?;
            let link_load = r.routing.as_ref().and_then(|x| x.link_load.clone());
            return Ok(Accepted {
                prefix,
                generation: r.generation,
                write: None,
                report: None,
                order: e.order,
                unvouched: None,
                link_load,
            });
        }
        self.validate(r, limits)?;
        // Seniority: a subnet keeps the place of its first accepted report
        // across changes, so a claim it held first is never lost to a
        // later claimant by reporting a change (a squatter cannot wait for
        // its victim's next report).
        let order = if e.report.is_some() {
            e.order
        } else {
            self.next_order
        };
        let stored = v1::StoredSubnet {
            agent_id: e.agent_id.clone(),
            session: e.session.clone(),
            query_addr: e.query_addr.clone(),
            report: Some(r.clone()),
            subnet_prefix: prefix,
            holder: e.holder.clone(),
            accepted_order: order,
        };
        Ok(Accepted {
            prefix,
            generation: r.generation,
            write: Some(Write {
                key: subnet_key(prefix),
                value: stored.encode_to_vec(),
            }),
            report: Some(r.clone()),
            order,
            unvouched: claims::vouch(r),
            link_load: None,
        })
    }

    /// What a report must be before it may change the global view.
    fn validate(&self, r: &v1::SubnetReport, limits: &Limits) -> Result<(), ControlError> {
        let prefix = r.subnet_prefix;
        let bad = |why: String| Err(invalid(prefix, why));
        match &r.routing {
            None => return bad("it carries no routing result".into()),
            Some(x) if !x.verified => {
                return bad(format!(
                    "engine '{}' tables were not verified (pairs unrouted)",
                    x.engine
                ));
            }
            Some(x) if !x.deadlock_free => {
                return bad(format!(
                    "engine '{}' tables are not deadlock free",
                    x.engine
                ));
            }
            Some(_) => load_bounded(r)?,
        }
        if r.end_ports.len() > limits.max_end_ports {
            return bad(format!(
                "{} end ports, the limit is {}",
                r.end_ports.len(),
                limits.max_end_ports
            ));
        }
        if r.router_ports.len() > limits.max_router_ports {
            return bad(format!(
                "{} router ports, the limit is {}",
                r.router_ports.len(),
                limits.max_router_ports
            ));
        }
        let mut seen: HashMap<u64, ()> = HashMap::with_capacity(r.end_ports.len());
        let mut lids: HashMap<u32, ()> = HashMap::with_capacity(r.end_ports.len());
        // An end port with LMC answers to 2^LMC LIDs from an aligned base:
        // every one of them is the port's alone.
        let ports = r
            .end_ports
            .iter()
            .map(|p| (p.guid, p.lid, p.lmc))
            .chain(r.router_ports.iter().map(|p| (p.port_guid, p.lid, 0)));
        for (guid, lid, lmc) in ports {
            if guid == 0 {
                return bad("a port has GUID 0".into());
            }
            if lmc > 7 || lid % (1 << lmc.min(7)) != 0 {
                return bad(format!(
                    "port {} has LMC {lmc} at LID {lid}: LMC is 0..=7 and the base LID a multiple of 2^LMC",
                    hex(guid)
                ));
            }
            let last = lid.saturating_add((1 << lmc) - 1);
            if lid == 0 || last > 0xbfff {
                return bad(format!(
                    "port {} has LIDs {lid}..={last}, outside the unicast range 1..=49151",
                    hex(guid)
                ));
            }
            if seen.insert(guid, ()).is_some() {
                return bad(format!("GUID {} appears twice", hex(guid)));
            }
            for l in lid..=last {
                if lids.insert(l, ()).is_some() {
                    return bad(format!("LID {l} is given to two ports"));
                }
            }
        }
        let mut routers: HashMap<u64, u32> = HashMap::new();
        let mut router_ports: HashMap<(u64, u32), ()> = HashMap::new();
        for p in &r.router_ports {
            let n = p.router_num_ports;
            if n == 0 || n > 254 || p.port == 0 || p.port > n {
                return bad(format!(
                    "router {} port {} does not exist on a router of {n} ports",
                    hex(p.router_guid),
                    p.port
                ));
            }
            if *routers.entry(p.router_guid).or_insert(n) != n {
                return bad(format!(
                    "router {} is given two port counts",
                    hex(p.router_guid)
                ));
            }
            if router_ports.insert((p.router_guid, p.port), ()).is_some() {
                return bad(format!(
                    "router {} port {} appears twice",
                    hex(p.router_guid),
                    p.port
                ));
            }
        }
        Ok(())
    }

    /// Applies an accepted report (after its write, if any, landed).
    pub fn apply(&mut self, a: Accepted, now: Instant) {
        let Some(e) = self.subnets.get_mut(&a.prefix) else {
            return;
        };
        e.last_seen = now;
        e.generation = e.generation.max(a.generation);
        if let (Some(l), Some(x)) = (
            a.link_load,
            e.report.as_mut().and_then(|r| r.routing.as_mut()),
        ) {
            x.link_load = Some(l);
        }
        if let Some(r) = a.report {
            e.report = Some(r);
            e.order = a.order;
            e.unvouched = a.unvouched;
            self.next_order = self.next_order.max(a.order + 1);
            self.refresh();
        }
    }

    /// The accepted subnets that take part in the routes, with their
    /// reports.
    fn taking_part(&self) -> impl Iterator<Item = (u64, &SubnetEntry, &v1::SubnetReport)> {
        self.subnets.iter().filter_map(|(&p, e)| {
            (!self.left_out.contains_key(&p)).then_some((p, e, e.report.as_ref()?))
        })
    }

    /// The reports of the subnets that take part (those [`State::view`]
    /// is built from).
    pub fn reports(&self) -> Vec<v1::SubnetReport> {
        self.taking_part().map(|(_, _, r)| r.clone()).collect()
    }

    /// The global view from the reports of the subnets that take part.
    pub fn view(&self) -> GlobalView {
        let subnets = self
            .taking_part()
            .map(|(prefix, e, r)| {
                // The subnet is the one it is kept under.
                let mut v = proto::convert::report_to_view(e.agent_id.clone(), r);
                v.prefix = prefix;
                v
            })
            .collect();
        GlobalView { subnets }.normalized()
    }

    /// The subnets and routers part of `Controller.State`; the caller adds
    /// who it is, whether it leads, its algorithm, its term and what the
    /// receivers said they hold.
    pub fn describe(&self, p: &Published, now: Instant, lease: Duration) -> v1::ControllerState {
        v1::ControllerState {
            subnets: self
                .subnets
                .iter()
                .map(|(&prefix, e)| v1::SubnetState {
                    agent_id: e.agent_id.clone(),
                    subnet_prefix: prefix,
                    generation: e.generation,
                    live: now.saturating_duration_since(e.last_seen) < lease,
                    topology: e.report.as_ref().and_then(|r| r.topology),
                    routing: e.report.as_ref().and_then(|r| r.routing.clone()),
                    mapping_version: p.mappings.get(&prefix).map_or(0, |m| m.version()),
                    held_mapping_version: 0,
                    session: e.session.clone(),
                    left_out: self.left_out.get(&prefix).cloned().unwrap_or_default(),
                    router_guids: {
                        let mut g: Vec<u64> = e
                            .report
                            .iter()
                            .flat_map(|r| r.router_ports.iter().map(|p| p.router_guid))
                            .collect();
                        g.sort_unstable();
                        g.dedup();
                        g
                    },
                })
                .collect(),
            routers: p
                .egress
                .iter()
                .map(|(&guid, t)| v1::RouterInfo {
                    router_guid: guid,
                    desc: self
                        .subnets
                        .values()
                        .filter_map(|e| e.report.as_ref())
                        .flat_map(|r| r.router_ports.iter())
                        .find(|rp| rp.router_guid == guid)
                        .map(|rp| rp.router_desc.clone())
                        .unwrap_or_default(),
                    egress_version: t.version(),
                    held_version: 0,
                })
                .collect(),
            ..v1::ControllerState::default()
        }
    }
}

#[cfg(test)]
mod tests;
