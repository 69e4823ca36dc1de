//! The controller's state and its transitions, without I/O: each
//! transition takes the current state and one input (a registration, a
//! report, a recomputation) and returns what the leader must write to the
//! store before it answers or publishes. The caller ([`crate::Controller`])
//! does the writing, the publishing and the locking; the clock comes in as
//! an argument, so every rule here is checked by plain unit tests.
//!
//! The rules: versions only grow; a mapping or egress table keeps its
//! version while its content is unchanged; a report that only repeats
//! what is known (a heartbeat) writes nothing and publishes nothing.

use crate::ControlError;
use fabric::intersubnet::{EndPortView, GlobalView, InterSubnetRouting, SubnetView};
use prost::Message;
use proto::v1;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Store key prefix of the accepted subnets, one key per prefix.
pub const SUBNET_KEY: &str = "subnets/";
/// Store key of the published routes.
pub const ROUTES_KEY: &str = "routes";

/// One store write a transition asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub key: String,
    pub value: Vec<u8>,
}

/// Published results, one immutable snapshot per change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Published {
    pub version: u64,
    pub algorithm: String,
    pub mappings: BTreeMap<u64, v1::MappingUpdate>,
    pub egress: BTreeMap<u64, v1::EgressTables>,
}

/// A new snapshot to publish and the write that must land before it does.
#[derive(Debug, Clone, PartialEq)]
pub struct Publication {
    pub published: Published,
    pub write: Write,
}

/// One subnet's agent as the leader knows it.
#[derive(Debug, Clone)]
pub struct SubnetEntry {
    pub agent_id: String,
    pub session: String,
    pub query_addr: String,
    pub last_seen: Instant,
    pub report: Option<v1::SubnetReport>,
}

/// The accepted subnets, by prefix.
#[derive(Debug, Clone, Default)]
pub struct State {
    subnets: BTreeMap<u64, SubnetEntry>,
}

impl State {
    /// The state an earlier leader persisted (`subnets/` keys and values).
    /// Loaded agents count as seen at `now`, which gives them one lease to
    /// find the new leader before another agent may take their prefix.
    pub fn restore(stored: Vec<(String, Vec<u8>)>, now: Instant) -> Result<Self, ControlError> {
        let mut subnets = BTreeMap::new();
        for (key, v) in stored {
            let s = v1::StoredSubnet::decode(v.as_slice())
                .map_err(|source| ControlError::Undecodable { key, source })?;
            let prefix = s.report.as_ref().map_or(0, |r| r.subnet_prefix);
            subnets.insert(
                prefix,
                SubnetEntry {
                    agent_id: s.agent_id,
                    session: s.session,
                    query_addr: s.query_addr,
                    last_seen: now,
                    report: s.report,
                },
            );
        }
        Ok(Self { subnets })
    }

    pub fn len(&self) -> usize {
        self.subnets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.subnets.is_empty()
    }

    pub fn get(&self, prefix: u64) -> Option<&SubnetEntry> {
        self.subnets.get(&prefix)
    }

    /// Gives the prefix to the registering agent under `session`, unless
    /// another agent still holds it (seen within `lease`). The same agent
    /// registering again keeps its report.
    pub fn register(
        &mut self,
        r: &v1::RegisterRequest,
        session: String,
        now: Instant,
        lease: Duration,
    ) -> Result<Write, ControlError> {
        if r.agent_id.trim().is_empty() {
            return Err(ControlError::Invalid("agent_id is empty".into()));
        }
        let held = self.subnets.get(&r.subnet_prefix);
        if let Some(e) = held {
            if e.agent_id != r.agent_id && now.saturating_duration_since(e.last_seen) < lease {
                return Err(ControlError::PrefixHeld {
                    prefix: r.subnet_prefix,
                    holder: e.agent_id.clone(),
                });
            }
        }
        let report = held
            .filter(|e| e.agent_id == r.agent_id)
            .and_then(|e| e.report.clone());
        let e = SubnetEntry {
            agent_id: r.agent_id.clone(),
            session,
            query_addr: r.query_addr.clone(),
            last_seen: now,
            report,
        };
        let write = subnet_write(r.subnet_prefix, &e);
        self.subnets.insert(r.subnet_prefix, e);
        Ok(write)
    }

    /// Takes a report from the session that holds its prefix. Returns the
    /// write when the subnet's content changed (the caller then persists
    /// and recomputes); a heartbeat only refreshes liveness and generation.
    pub fn report(
        &mut self,
        r: &v1::SubnetReport,
        now: Instant,
    ) -> Result<Option<Write>, ControlError> {
        let prefix = r.subnet_prefix;
        let e = self
            .subnets
            .get_mut(&prefix)
            .filter(|e| e.session == r.session)
            .ok_or(ControlError::UnknownSession(prefix))?;
        if let Some(old) = &e.report {
            if r.generation < old.generation {
                return Err(ControlError::StaleReport {
                    got: r.generation,
                    have: old.generation,
                });
            }
        }
        e.last_seen = now;
        let changed = e.report.as_ref().is_none_or(|old| !same_content(old, r));
        if changed
            || e.report
                .as_ref()
                .is_none_or(|o| o.generation != r.generation)
        {
            e.report = Some(r.clone());
        }
        Ok(changed.then(|| subnet_write(prefix, e)))
    }

    /// The global view from the accepted reports.
    pub fn view(&self) -> GlobalView {
        let subnets = self
            .subnets
            .iter()
            .filter_map(|(&prefix, e)| {
                let r = e.report.as_ref()?;
                Some(SubnetView {
                    name: e.agent_id.clone(),
                    prefix,
                    end_ports: r
                        .end_ports
                        .iter()
                        .filter_map(|p| {
                            Some(EndPortView {
                                guid: p.guid,
                                lid: proto::convert::lid(p.lid, "end port LID").ok()?,
                            })
                        })
                        .collect(),
                    router_ports: r
                        .router_ports
                        .iter()
                        .filter_map(|p| proto::convert::router_port_from_wire(p).ok())
                        .collect(),
                })
            })
            .collect();
        GlobalView { subnets }.normalized()
    }

    /// The subnets and routers part of `Controller.State`; the caller adds
    /// who it is, whether it leads and its algorithm.
    pub fn describe(&self, p: &Published, now: Instant, lease: Duration) -> v1::ControllerState {
        v1::ControllerState {
            subnets: self
                .subnets
                .iter()
                .map(|(&prefix, e)| v1::SubnetState {
                    agent_id: e.agent_id.clone(),
                    subnet_prefix: prefix,
                    generation: e.report.as_ref().map_or(0, |r| r.generation),
                    live: now.saturating_duration_since(e.last_seen) < lease,
                    topology: e.report.as_ref().and_then(|r| r.topology),
                    routing: e.report.as_ref().and_then(|r| r.routing.clone()),
                    mapping_version: p.mappings.get(&prefix).map_or(0, |m| m.version),
                })
                .collect(),
            routers: p
                .egress
                .values()
                .map(|t| v1::RouterInfo {
                    router_guid: t.router_guid,
                    desc: self
                        .subnets
                        .values()
                        .filter_map(|e| e.report.as_ref())
                        .flat_map(|r| r.router_ports.iter())
                        .find(|rp| rp.router_guid == t.router_guid)
                        .map(|rp| rp.router_desc.clone())
                        .unwrap_or_default(),
                    egress_version: t.version,
                })
                .collect(),
            ..v1::ControllerState::default()
        }
    }
}

impl Published {
    /// What an earlier leader published (the `routes` key, when present),
    /// or nothing published yet under `algorithm`.
    pub fn restore(algorithm: &str, stored: Vec<(String, Vec<u8>)>) -> Result<Self, ControlError> {
        let mut p = Published {
            algorithm: algorithm.to_string(),
            ..Published::default()
        };
        if let Some((key, v)) = stored.into_iter().find(|(k, _)| k == ROUTES_KEY) {
            let r = v1::StoredRoutes::decode(v.as_slice())
                .map_err(|source| ControlError::Undecodable { key, source })?;
            p.version = r.version;
            p.mappings = r
                .mappings
                .into_iter()
                .map(|m| (m.subnet_prefix, m))
                .collect();
            p.egress = r.egress.into_iter().map(|e| (e.router_guid, e)).collect();
        }
        Ok(p)
    }

    /// Versions new routes against this snapshot: unchanged results keep
    /// their versions, changed ones get the next; None when nothing
    /// changed (nothing to write or publish).
    pub fn next(&self, routes: &fabric::intersubnet::InterSubnetRoutes) -> Option<Publication> {
        let next_version = self.version + 1;
        let mut changed = false;
        let mut mappings = BTreeMap::new();
        for m in &routes.mappings {
            let mut w = proto::convert::mapping_to_wire(m, next_version, &routes.algorithm);
            match self.mappings.get(&m.prefix) {
                Some(old) if same_mapping(old, &w) => w.version = old.version,
                _ => changed = true,
            }
            mappings.insert(m.prefix, w);
        }
        let mut egress = BTreeMap::new();
        for t in &routes.routers {
            let mut w = proto::convert::table_to_wire(t, next_version, &routes.algorithm);
            match self.egress.get(&t.router_guid) {
                Some(old) if same_table(old, &w) => w.version = old.version,
                _ => changed = true,
            }
            egress.insert(t.router_guid, w);
        }
        if !changed {
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
        let published = Published {
            version: next_version,
            algorithm: routes.algorithm.clone(),
            mappings,
            egress,
        };
        let stored = v1::StoredRoutes {
            version: published.version,
            algorithm: published.algorithm.clone(),
            mappings: published.mappings.values().cloned().collect(),
            egress: published.egress.values().cloned().collect(),
        };
        Some(Publication {
            published,
            write: Write {
                key: ROUTES_KEY.to_string(),
                value: stored.encode_to_vec(),
            },
        })
    }
}

/// Runs the inter-subnet algorithm on `view` and versions the result
/// against `prev` ([`Published::next`]).
pub fn recompute(
    view: &GlobalView,
    algo: &dyn InterSubnetRouting,
    prev: &Published,
) -> Result<Option<Publication>, ControlError> {
    Ok(prev.next(&algo.route(view)?))
}

/// The store key of one subnet.
pub fn subnet_key(prefix: u64) -> String {
    format!("{SUBNET_KEY}{prefix:016x}")
}

fn subnet_write(prefix: u64, e: &SubnetEntry) -> Write {
    let stored = v1::StoredSubnet {
        agent_id: e.agent_id.clone(),
        session: e.session.clone(),
        query_addr: e.query_addr.clone(),
        report: e.report.clone(),
    };
    Write {
        key: subnet_key(prefix),
        value: stored.encode_to_vec(),
    }
}

/// Reports equal but for session and generation (a heartbeat).
fn same_content(a: &v1::SubnetReport, b: &v1::SubnetReport) -> bool {
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

fn same_mapping(a: &v1::MappingUpdate, b: &v1::MappingUpdate) -> bool {
    v1::MappingUpdate {
        version: 0,
        ..a.clone()
    } == v1::MappingUpdate {
        version: 0,
        ..b.clone()
    }
}

fn same_table(a: &v1::EgressTables, b: &v1::EgressTables) -> bool {
    v1::EgressTables {
        version: 0,
        ..a.clone()
    } == v1::EgressTables {
        version: 0,
        ..b.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric::intersubnet::AlgorithmKind;

    const LEASE: Duration = Duration::from_secs(10);

    /// What the agents of a two-subnet fabric joined by one router report.
    fn reports() -> Vec<v1::SubnetReport> {
        let m = fabric::multi::fat_tree_subnets(2, 2, 2, 2, 1).expect("fabric");
        GlobalView::from_multi(&m)
            .subnets
            .iter()
            .map(|s| v1::SubnetReport {
                subnet_prefix: s.prefix,
                generation: 1,
                end_ports: s
                    .end_ports
                    .iter()
                    .map(|p| v1::EndPort {
                        guid: p.guid,
                        lid: p.lid as u32,
                        desc: String::new(),
                    })
                    .collect(),
                router_ports: s
                    .router_ports
                    .iter()
                    .map(|p| v1::RouterPort {
                        router_guid: p.router_guid,
                        router_desc: "r0".into(),
                        port: p.port as u32,
                        port_guid: p.port_guid,
                        lid: p.lid as u32,
                        switch_guid: p.switch_guid,
                        primary_lids: Vec::new(),
                    })
                    .collect(),
                ..v1::SubnetReport::default()
            })
            .collect()
    }

    fn register(st: &mut State, agent: &str, prefix: u64, session: &str, now: Instant) -> Write {
        st.register(
            &v1::RegisterRequest {
                agent_id: agent.into(),
                subnet_prefix: prefix,
                query_addr: format!("{agent}:7200"),
            },
            session.into(),
            now,
            LEASE,
        )
        .expect("registers")
    }

    /// Registers and reports every subnet of [`reports`]; returns them as
    /// sent (with their sessions).
    fn reported(st: &mut State, now: Instant) -> Vec<v1::SubnetReport> {
        let mut sent = Vec::new();
        for (i, mut r) in reports().into_iter().enumerate() {
            let session = format!("s{i}");
            register(st, &format!("a{i}"), r.subnet_prefix, &session, now);
            r.session = session;
            assert!(st.report(&r, now).expect("accepted").is_some());
            sent.push(r);
        }
        sent
    }

    fn decode_subnet(w: &Write) -> v1::StoredSubnet {
        v1::StoredSubnet::decode(w.value.as_slice()).expect("decodes")
    }

    #[test]
    fn register_writes_the_entry_and_guards_a_live_prefix() {
        let t0 = Instant::now();
        let mut st = State::default();
        let w = register(&mut st, "a", 0xfec0, "s1", t0);
        assert_eq!(w.key, "subnets/000000000000fec0");
        let stored = decode_subnet(&w);
        assert_eq!(
            (stored.agent_id.as_str(), stored.session.as_str()),
            ("a", "s1")
        );
        assert_eq!(stored.query_addr, "a:7200");
        // Another agent for a prefix whose holder is live: refused, nothing
        // changes.
        let other = v1::RegisterRequest {
            agent_id: "b".into(),
            subnet_prefix: 0xfec0,
            query_addr: String::new(),
        };
        let e = st
            .register(&other, "s2".into(), t0 + LEASE / 2, LEASE)
            .expect_err("held");
        assert!(matches!(e, ControlError::PrefixHeld { ref holder, .. } if holder == "a"));
        assert_eq!(st.get(0xfec0).map(|e| e.session.as_str()), Some("s1"));
        // Once the holder's lease ran out, the prefix is free.
        let w = st
            .register(&other, "s2".into(), t0 + LEASE, LEASE)
            .expect("lease over");
        assert_eq!(decode_subnet(&w).agent_id, "b");
        let empty = v1::RegisterRequest {
            agent_id: " ".into(),
            ..other
        };
        assert!(matches!(
            st.register(&empty, "s3".into(), t0, LEASE),
            Err(ControlError::Invalid(_))
        ));
    }

    #[test]
    fn a_re_registering_agent_keeps_its_report() {
        let t0 = Instant::now();
        let mut st = State::default();
        let sent = reported(&mut st, t0);
        let w = register(&mut st, "a0", sent[0].subnet_prefix, "s9", t0);
        assert_eq!(decode_subnet(&w).report.as_ref(), Some(&sent[0]));
        // The old session is gone with the new registration.
        assert!(matches!(
            st.report(&sent[0], t0),
            Err(ControlError::UnknownSession(_))
        ));
    }

    #[test]
    fn a_changed_report_is_written_then_published_under_a_new_version() {
        let t0 = Instant::now();
        let mut st = State::default();
        let algo = AlgorithmKind::Prefix.algorithm();
        let sent = reported(&mut st, t0);
        let first = recompute(&st.view(), algo.as_ref(), &Published::default())
            .expect("routes")
            .expect("a first publication");
        assert_eq!(first.published.version, 1);
        assert_eq!(first.write.key, ROUTES_KEY);
        assert_eq!(first.published.mappings.len(), 2);
        assert!(first.published.mappings.values().all(|m| m.version == 1));
        assert_eq!(first.published.egress.len(), 1);

        // Subnet 0 loses a host: its report is written, and the mapping of
        // subnet 1 (which routes to that host) and the router's table change.
        let mut changed = sent[0].clone();
        changed.generation = 2;
        changed.end_ports.pop();
        let w = st.report(&changed, t0).expect("accepted").expect("a write");
        assert_eq!(decode_subnet(&w).report, Some(changed.clone()));
        let next = recompute(&st.view(), algo.as_ref(), &first.published)
            .expect("routes")
            .expect("a new publication");
        let p = &next.published;
        assert_eq!(p.version, 2);
        let v = |prefix: u64| p.mappings[&prefix].version;
        assert_eq!(v(sent[1].subnet_prefix), 2, "routes to the lost host went");
        assert_eq!(
            v(sent[0].subnet_prefix),
            1,
            "unchanged content keeps its version"
        );
        assert!(p.egress.values().all(|t| t.version == 2));
        // The write is the snapshot a new leader restores.
        let restored =
            Published::restore("prefix", vec![(next.write.key.clone(), next.write.value)])
                .expect("decodes");
        assert_eq!(&restored, p);
    }

    #[test]
    fn an_identical_report_writes_and_publishes_nothing() {
        let t0 = Instant::now();
        let mut st = State::default();
        let algo = AlgorithmKind::Issr.algorithm();
        let sent = reported(&mut st, t0);
        let first = recompute(&st.view(), algo.as_ref(), &Published::default())
            .expect("routes")
            .expect("published");
        // A heartbeat: same content, a later generation and routing time.
        let mut beat = sent[0].clone();
        beat.generation = 5;
        beat.routing = Some(v1::RoutingResult {
            route_seconds: 0.5,
            ..Default::default()
        });
        let mut with_routing = sent[0].clone();
        with_routing.routing = Some(v1::RoutingResult::default());
        with_routing.generation = 4;
        assert!(st.report(&with_routing, t0).expect("accepted").is_some());
        assert_eq!(st.report(&beat, t0 + LEASE).expect("accepted"), None);
        assert_eq!(
            st.get(sent[0].subnet_prefix)
                .and_then(|e| e.report.as_ref())
                .map(|r| r.generation),
            Some(5),
            "the generation still advances"
        );
        assert_eq!(
            recompute(&st.view(), algo.as_ref(), &first.published).expect("routes"),
            None,
            "nothing to publish"
        );
        // Liveness follows the heartbeat.
        let d = st.describe(&first.published, t0 + LEASE + LEASE / 2, LEASE);
        let live = |prefix: u64| {
            d.subnets
                .iter()
                .find(|s| s.subnet_prefix == prefix)
                .map(|s| s.live)
        };
        assert_eq!(live(sent[0].subnet_prefix), Some(true));
        assert_eq!(live(sent[1].subnet_prefix), Some(false));
        // An older generation is refused and changes nothing.
        let mut stale = sent[0].clone();
        stale.generation = 3;
        stale.end_ports.clear();
        assert!(matches!(
            st.report(&stale, t0),
            Err(ControlError::StaleReport { got: 3, have: 5 })
        ));
    }

    #[test]
    fn recompute_keeps_versions_of_unchanged_and_vanished_results() {
        let t0 = Instant::now();
        let mut st = State::default();
        let algo = AlgorithmKind::Prefix.algorithm();
        reported(&mut st, t0);
        let first = recompute(&st.view(), algo.as_ref(), &Published::default())
            .expect("routes")
            .expect("published");
        // The same view again: nothing changed, nothing to publish.
        assert_eq!(
            recompute(&st.view(), algo.as_ref(), &first.published).expect("routes"),
            None
        );
        // Results for a subnet that no longer appears stay published.
        let mut prev = first.published.clone();
        let gone = v1::MappingUpdate {
            subnet_prefix: 0xdead,
            version: 1,
            ..Default::default()
        };
        prev.mappings.insert(0xdead, gone.clone());
        prev.version = 7;
        // Only subnet 0 is known now (a new leader that heard from one
        // agent so far): its mapping loses the remote subnet.
        let mut alone = State::default();
        let mut r = reports().remove(0);
        register(&mut alone, "a0", r.subnet_prefix, "s", t0);
        r.session = "s".into();
        alone.report(&r, t0).expect("accepted");
        let next = recompute(&alone.view(), algo.as_ref(), &prev)
            .expect("routes")
            .expect("a subnet lost its peer");
        assert_eq!(next.published.version, 8, "versions only grow");
        assert_eq!(next.published.mappings.get(&0xdead), Some(&gone));
        assert_eq!(
            next.published.egress.len(),
            first.published.egress.len(),
            "the router's table is kept"
        );
    }

    #[test]
    fn restore_reads_what_the_writes_hold() {
        let t0 = Instant::now();
        let mut st = State::default();
        register(&mut st, "a", 0xfec0, "s1", t0);
        let mut r = reports().remove(0);
        r.subnet_prefix = 0xfec0;
        r.session = "s1".into();
        let w = st.report(&r, t0).expect("accepted").expect("a write");
        let back = State::restore(vec![(w.key.clone(), w.value)], t0).expect("decodes");
        assert_eq!(back.len(), 1);
        let e = back.get(0xfec0).expect("restored");
        assert_eq!((e.agent_id.as_str(), e.report.as_ref()), ("a", Some(&r)));
        assert!(matches!(
            State::restore(vec![("subnets/x".into(), vec![0xff])], t0),
            Err(ControlError::Undecodable { .. })
        ));
    }
}
