//! The super-controller (`ibfabric controller --config FILE`).
//!
//! Agents register their subnet and report it; the leader keeps the global
//! GID -> (subnet, LID) and router-port picture ([`GlobalView`]), runs the
//! configured inter-subnet algorithm on every change, and pushes the
//! results: a mapping per subnet to its agent, egress tables per router to
//! its firmware. A result keeps its version while its content is unchanged,
//! so receivers only see real changes; versions only grow.
//!
//! Only the leader serves registrations, reports and pushes; the others
//! answer UNAVAILABLE naming the leader, which sends clients on to the next
//! address. What the leader accepts is persisted first, so a follower that
//! takes over serves the same versions.

pub mod config;
pub mod service;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;

use fabric::intersubnet::{GlobalView, InterSubnetRouting, SubnetView};
use prost::Message;
use proto::v1;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Where the leader keeps what it accepted (the store: memory or etcd).
#[tonic::async_trait]
pub trait Persist: Send + Sync {
    async fn save(&self, key: &str, value: Vec<u8>) -> Result<(), String>;
    /// Every key under `prefix` with its value.
    async fn load(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, String>;
}

/// Published results, one immutable snapshot per change.
#[derive(Debug, Clone, Default)]
pub struct Published {
    pub version: u64,
    pub algorithm: String,
    pub mappings: BTreeMap<u64, v1::MappingUpdate>,
    pub egress: BTreeMap<u64, v1::EgressTables>,
}

#[derive(Debug, Clone)]
struct SubnetEntry {
    agent_id: String,
    session: String,
    query_addr: String,
    last_seen: Instant,
    report: Option<v1::SubnetReport>,
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("not the leader (leader: {0})")]
    NotLeader(String),
    #[error("subnet prefix {prefix:#018x} is held by live agent '{holder}'")]
    PrefixHeld { prefix: u64, holder: String },
    #[error("unknown session for subnet {0:#018x}: register again")]
    UnknownSession(u64),
    #[error("report generation {got} is older than generation {have} already accepted")]
    StaleReport { got: u64, have: u64 },
    #[error("{0}")]
    Invalid(String),
    #[error("store: {0}")]
    Store(String),
    #[error(transparent)]
    Routing(#[from] fabric::Error),
}

pub struct Controller {
    pub id: String,
    pub lease: Duration,
    algo: Box<dyn InterSubnetRouting>,
    persist: Arc<dyn Persist>,
    subnets: Mutex<BTreeMap<u64, SubnetEntry>>,
    /// Serializes recomputations so versions are handed out in order.
    recompute: tokio::sync::Mutex<()>,
    published: watch::Sender<Arc<Published>>,
    leader: watch::Receiver<Option<String>>,
    sessions: std::sync::atomic::AtomicU64,
}

const SUBNET_KEY: &str = "subnets/";
const ROUTES_KEY: &str = "routes";

impl Controller {
    /// `leader` holds the current leader's id (None while unknown); this
    /// controller serves when it holds its own id.
    pub fn new(
        id: String,
        lease: Duration,
        algo: Box<dyn InterSubnetRouting>,
        persist: Arc<dyn Persist>,
        leader: watch::Receiver<Option<String>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            id,
            lease,
            algo,
            persist,
            subnets: Mutex::new(BTreeMap::new()),
            recompute: tokio::sync::Mutex::new(()),
            published: watch::channel(Arc::new(Published::default())).0,
            leader,
            sessions: std::sync::atomic::AtomicU64::new(0),
        })
    }

    pub fn is_leader(&self) -> bool {
        self.leader.borrow().as_deref() == Some(self.id.as_str())
    }

    fn check_leader(&self) -> Result<(), ControlError> {
        if self.is_leader() {
            Ok(())
        } else {
            Err(ControlError::NotLeader(
                self.leader
                    .borrow()
                    .clone()
                    .unwrap_or_else(|| "unknown".into()),
            ))
        }
    }

    pub fn published(&self) -> Arc<Published> {
        self.published.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<Published>> {
        self.published.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, SubnetEntry>> {
        self.subnets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Loads what an earlier leader persisted; called when this controller
    /// becomes leader. Loaded agents count as live for one lease from now,
    /// which gives them time to find the new leader.
    pub async fn take_over(&self) -> Result<(), ControlError> {
        let subnets = self
            .persist
            .load(SUBNET_KEY)
            .await
            .map_err(ControlError::Store)?;
        let mut map = BTreeMap::new();
        for (k, v) in subnets {
            let s = v1::StoredSubnet::decode(v.as_slice())
                .map_err(|e| ControlError::Store(format!("{k}: undecodable: {e}")))?;
            let prefix = s.report.as_ref().map_or(0, |r| r.subnet_prefix);
            map.insert(
                prefix,
                SubnetEntry {
                    agent_id: s.agent_id,
                    session: s.session,
                    query_addr: s.query_addr,
                    last_seen: Instant::now(),
                    report: s.report,
                },
            );
        }
        let routes = self
            .persist
            .load(ROUTES_KEY)
            .await
            .map_err(ControlError::Store)?;
        let mut pubd = Published {
            algorithm: self.algo.name().to_string(),
            ..Published::default()
        };
        if let Some((_, v)) = routes.into_iter().find(|(k, _)| k == ROUTES_KEY) {
            let r = v1::StoredRoutes::decode(v.as_slice())
                .map_err(|e| ControlError::Store(format!("{ROUTES_KEY}: undecodable: {e}")))?;
            pubd.version = r.version;
            pubd.mappings = r
                .mappings
                .into_iter()
                .map(|m| (m.subnet_prefix, m))
                .collect();
            pubd.egress = r.egress.into_iter().map(|e| (e.router_guid, e)).collect();
        }
        tracing::info!(
            id = %self.id,
            subnets = map.len(),
            version = pubd.version,
            "took over as leader"
        );
        *self.lock() = map;
        self.published.send_replace(Arc::new(pubd));
        Ok(())
    }

    pub async fn register(
        &self,
        r: &v1::RegisterRequest,
    ) -> Result<v1::RegisterReply, ControlError> {
        self.check_leader()?;
        if r.agent_id.trim().is_empty() {
            return Err(ControlError::Invalid("agent_id is empty".into()));
        }
        let n = self
            .sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let session = format!("{}-{}-{n}", self.id, std::process::id());
        let stored = {
            let mut subnets = self.lock();
            if let Some(e) = subnets.get(&r.subnet_prefix) {
                if e.agent_id != r.agent_id && e.last_seen.elapsed() < self.lease {
                    return Err(ControlError::PrefixHeld {
                        prefix: r.subnet_prefix,
                        holder: e.agent_id.clone(),
                    });
                }
            }
            let report = subnets
                .get(&r.subnet_prefix)
                .filter(|e| e.agent_id == r.agent_id)
                .and_then(|e| e.report.clone());
            let e = SubnetEntry {
                agent_id: r.agent_id.clone(),
                session: session.clone(),
                query_addr: r.query_addr.clone(),
                last_seen: Instant::now(),
                report,
            };
            subnets.insert(r.subnet_prefix, e.clone());
            stored(&e)
        };
        self.persist
            .save(&subnet_key(r.subnet_prefix), stored.encode_to_vec())
            .await
            .map_err(ControlError::Store)?;
        tracing::info!(agent = %r.agent_id, subnet = %format!("{:#018x}", r.subnet_prefix), "agent registered");
        Ok(v1::RegisterReply {
            session,
            controller_id: self.id.clone(),
            lease_seconds: self.lease.as_secs().max(1) as u32,
        })
    }

    /// Accepts a report; recomputes and publishes when the subnet changed.
    pub async fn report(&self, r: v1::SubnetReport) -> Result<v1::ReportAck, ControlError> {
        self.check_leader()?;
        let prefix = r.subnet_prefix;
        let changed = {
            let mut subnets = self.lock();
            let e = subnets
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
            e.last_seen = Instant::now();
            let changed = e.report.as_ref().is_none_or(|old| !same_content(old, &r));
            if changed
                || e.report
                    .as_ref()
                    .is_none_or(|o| o.generation != r.generation)
            {
                e.report = Some(r.clone());
            }
            changed.then(|| stored(e))
        };
        if let Some(s) = changed {
            self.persist
                .save(&subnet_key(prefix), s.encode_to_vec())
                .await
                .map_err(ControlError::Store)?;
            tracing::info!(subnet = %format!("{prefix:#018x}"), generation = r.generation, "subnet report accepted");
            self.recompute().await?;
        }
        let p = self.published();
        Ok(v1::ReportAck {
            generation: r.generation,
            mapping_version: p.mappings.get(&prefix).map_or(0, |m| m.version),
        })
    }

    /// The global view from the accepted reports.
    pub fn view(&self) -> GlobalView {
        let subnets = self.lock();
        let subnets = subnets
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
                            Some(fabric::intersubnet::EndPortView {
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

    /// Runs the inter-subnet algorithm on the current view and publishes:
    /// unchanged results keep their versions, changed ones get the next.
    pub async fn recompute(&self) -> Result<(), ControlError> {
        let _g = self.recompute.lock().await;
        let view = self.view();
        let routes = self.algo.route(&view)?;
        let prev = self.published();
        let next_version = prev.version + 1;
        let mut changed = false;
        let mut mappings = BTreeMap::new();
        for m in &routes.mappings {
            let mut w = proto::convert::mapping_to_wire(m, next_version, &routes.algorithm);
            match prev.mappings.get(&m.prefix) {
                Some(old) if same_mapping(old, &w) => w.version = old.version,
                _ => changed = true,
            }
            mappings.insert(m.prefix, w);
        }
        let mut egress = BTreeMap::new();
        for t in &routes.routers {
            let mut w = proto::convert::table_to_wire(t, next_version, &routes.algorithm);
            match prev.egress.get(&t.router_guid) {
                Some(old) if same_table(old, &w) => w.version = old.version,
                _ => changed = true,
            }
            egress.insert(t.router_guid, w);
        }
        // A result that vanished (its subnet or router left) is kept: its
        // receivers hold it anyway, and withdrawing routes is a decision an
        // operator makes, not a side effect of a missed report.
        for (k, v) in &prev.mappings {
            mappings.entry(*k).or_insert_with(|| v.clone());
        }
        for (k, v) in &prev.egress {
            egress.entry(*k).or_insert_with(|| v.clone());
        }
        if !changed {
            return Ok(());
        }
        let p = Published {
            version: next_version,
            algorithm: routes.algorithm.clone(),
            mappings,
            egress,
        };
        let stored = v1::StoredRoutes {
            version: p.version,
            algorithm: p.algorithm.clone(),
            mappings: p.mappings.values().cloned().collect(),
            egress: p.egress.values().cloned().collect(),
        };
        self.persist
            .save(ROUTES_KEY, stored.encode_to_vec())
            .await
            .map_err(ControlError::Store)?;
        tracing::info!(
            version = p.version,
            subnets = p.mappings.len(),
            routers = p.egress.len(),
            algorithm = %p.algorithm,
            "inter-subnet routes published"
        );
        self.published.send_replace(Arc::new(p));
        Ok(())
    }

    pub fn state(&self) -> v1::ControllerState {
        let p = self.published();
        let subnets = self.lock();
        v1::ControllerState {
            controller_id: self.id.clone(),
            leader: self.is_leader(),
            algorithm: self.algo.name().to_string(),
            subnets: subnets
                .iter()
                .map(|(&prefix, e)| v1::SubnetState {
                    agent_id: e.agent_id.clone(),
                    subnet_prefix: prefix,
                    generation: e.report.as_ref().map_or(0, |r| r.generation),
                    live: e.last_seen.elapsed() < self.lease,
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
                    desc: subnets
                        .values()
                        .filter_map(|e| e.report.as_ref())
                        .flat_map(|r| r.router_ports.iter())
                        .find(|rp| rp.router_guid == t.router_guid)
                        .map(|rp| rp.router_desc.clone())
                        .unwrap_or_default(),
                    egress_version: t.version,
                })
                .collect(),
        }
    }

    /// The query address an agent registered for a subnet.
    pub fn query_addr(&self, prefix: u64) -> Option<String> {
        self.lock().get(&prefix).map(|e| e.query_addr.clone())
    }
}

fn subnet_key(prefix: u64) -> String {
    format!("{SUBNET_KEY}{prefix:016x}")
}

fn stored(e: &SubnetEntry) -> v1::StoredSubnet {
    v1::StoredSubnet {
        agent_id: e.agent_id.clone(),
        session: e.session.clone(),
        query_addr: e.query_addr.clone(),
        report: e.report.clone(),
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

/// The election all controllers of one store namespace run.
pub const ELECTION: &str = "controller";

/// Builds a controller from its config (store, algorithm) and starts its
/// leadership loop: campaign; on winning, load what the previous leader
/// persisted ([`Controller::take_over`]) and only then serve; on losing the
/// lease, stop serving and campaign again. Followers name the leader they
/// observe in their refusals. On shutdown a leader resigns, so a follower
/// takes over at once instead of after the lease.
pub async fn start(
    cfg: &config::ControllerConfig,
    shutdown: watch::Receiver<bool>,
) -> Result<Arc<Controller>, ControlError> {
    let algo = fabric::intersubnet::by_name(&cfg.algorithm)?;
    let st = store::open(&cfg.store)
        .await
        .map_err(|e| ControlError::Store(e.to_string()))?;
    let (tx, rx) = watch::channel(None);
    let persist = Arc::new(store::StorePersist::new(st.clone()));
    let ctl = Controller::new(
        cfg.id.clone(),
        Duration::from_secs(cfg.lease_seconds),
        algo,
        persist.clone(),
        rx,
    );
    let observed = store::observe_leader(st.clone(), ELECTION, Duration::from_millis(500))
        .await
        .map_err(|e| ControlError::Store(e.to_string()))?;
    let ttl = Duration::from_secs(cfg.store.election_ttl_seconds.max(1));
    let leading = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Followers' view of the leader, for their error messages; never
    // overrides this controller's own leadership, which only the campaign
    // below grants (after take_over).
    {
        let (tx, leading, id, mut observed, mut sd) = (
            tx.clone(),
            leading.clone(),
            cfg.id.clone(),
            observed,
            shutdown.clone(),
        );
        tokio::spawn(async move {
            loop {
                let v = observed.borrow_and_update().clone();
                if !leading.load(std::sync::atomic::Ordering::SeqCst)
                    && v.as_deref() != Some(id.as_str())
                {
                    tx.send_replace(v);
                }
                tokio::select! {
                    r = observed.changed() => if r.is_err() { return },
                    _ = sd.wait_for(|s| *s) => return,
                }
            }
        });
    }
    let c = ctl.clone();
    let mut sd = shutdown;
    tokio::spawn(async move {
        loop {
            let guard = tokio::select! {
                g = st.campaign(ELECTION, &c.id, ttl) => g,
                _ = sd.wait_for(|s| *s) => return,
            };
            let guard = match guard {
                Ok(g) => g,
                Err(e) => {
                    tracing::warn!(id = %c.id, "campaign failed: {e}");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            // Before anything is written in this term: a save that lands
            // after the term ends must not land at all.
            persist.fence(ELECTION, guard.revision());
            if let Err(e) = c.take_over().await {
                tracing::error!(id = %c.id, "cannot load the previous leader's state, stepping down: {e}");
                let _ = guard.resign().await;
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            leading.store(true, std::sync::atomic::Ordering::SeqCst);
            tx.send_replace(Some(c.id.clone()));
            tracing::info!(id = %c.id, store = %st.describe(), "leading");
            let stop = tokio::select! {
                _ = guard.lost() => false,
                _ = sd.wait_for(|s| *s) => true,
            };
            leading.store(false, std::sync::atomic::Ordering::SeqCst);
            tx.send_replace(None);
            if stop {
                let _ = guard.resign().await;
                return;
            }
            tracing::warn!(id = %c.id, "leadership lost; campaigning again");
        }
    });
    Ok(ctl)
}
