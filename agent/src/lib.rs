//! Per-subnet agent (`ibfabric agent --config FILE`).
//!
//! Routes and verifies its subnet ([`subnet::route_subnet`]), writes the
//! OpenSM dumps, registers and reports to the leader controller, follows
//! the controller's mapping pushes, and answers path queries. The routed
//! subnet and the mapping are each one `Arc` snapshot swapped whole, so a
//! query never mixes two versions.

pub mod config;
pub mod follow;
mod list;
pub mod live;
mod load;
mod mcast;
mod session;
pub mod subnet;

pub use session::run;

use arc_swap::ArcSwapOption;
use config::AgentConfig;
use fabric::dqr::ChannelList;
use fabric::intersubnet::{Gid, Mapping};
use proto::v1;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use subnet::RoutedSubnet;
use tokio::sync::{Notify, watch};
use tonic::{Request, Response, Status};

/// The controller's mapping for this subnet, indexed.
pub struct MappingState {
    pub version: u64,
    pub algorithm: String,
    pub mapping: Mapping,
    /// Router ports (GUID, LID) per destination: its route, then backups.
    by_dest: HashMap<Gid, Vec<(u64, u16)>>,
}

impl MappingState {
    fn new(version: u64, algorithm: String, mapping: Mapping) -> Self {
        let mut by_dest: HashMap<Gid, Vec<(u64, u16)>> = HashMap::new();
        for e in &mapping.entries {
            by_dest
                .entry(e.dest)
                .or_default()
                .push((e.router_port_guid, e.router_port_lid));
        }
        Self {
            version,
            algorithm,
            mapping,
            by_dest,
        }
    }
}

pub struct Agent {
    pub cfg: AgentConfig,
    /// The routing options of a config reloaded since the start (SIGHUP);
    /// `cfg` keeps the rest.
    reloaded: ArcSwapOption<AgentConfig>,
    /// A reload is waiting for the next reroute to apply it.
    reconfigured: std::sync::atomic::AtomicBool,
    /// One reroute at a time (file watch, live discovery, reload): each
    /// starts from the tables the one before put in force.
    reroute_lock: tokio::sync::Mutex<()>,
    pub subnet: ArcSwapOption<RoutedSubnet>,
    pub mapping: ArcSwapOption<MappingState>,
    generation: AtomicU64,
    rerouted: Notify,
    /// The channel list of the tables in force, with the routed subnet it
    /// was built for, for DQR.
    list: std::sync::Mutex<Option<(Weak<RoutedSubnet>, ChannelList)>>,
    /// Fires with the mapping version after every accepted push.
    mapping_changed: watch::Sender<u64>,
    /// A sharply shrunken discovery held back: its signature and when it
    /// was first seen; routed once it persists `discovery_hold_ms`.
    shrink_seen: std::sync::Mutex<Option<((usize, usize), std::time::Instant)>>,
    /// The link load of the tables in force, measured after they were put
    /// in force, with the routed subnet it is of; reports carry it.
    load: std::sync::Mutex<Option<(Weak<RoutedSubnet>, v1::LinkLoadSummary)>>,
}

/// The channel list held, when it is the one of `routed`'s tables.
fn held_for<'a>(
    held: &'a Option<(Weak<RoutedSubnet>, ChannelList)>,
    routed: &Arc<RoutedSubnet>,
) -> Option<&'a ChannelList> {
    match held {
        Some((of, list)) if std::ptr::eq(of.as_ptr(), Arc::as_ptr(routed)) => Some(list),
        _ => None,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Route(#[from] subnet::RouteError),
    #[error("routing task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("path query service: {0}")]
    Serve(#[from] tonic::transport::Error),
    #[error("mapping file: {0}")]
    Mapping(fabric::Error),
    #[error("path query service: {0}")]
    Listen(#[from] proto::client::ServeError),
    #[error(transparent)]
    Tls(#[from] ibtls::TlsError),
    #[error("following the fabric: {0}")]
    Follow(#[from] follow::FollowError),
    #[error("the [tls] certificate names {have}, but this agent speaks for {want}")]
    Identity {
        have: ibtls::Identity,
        want: ibtls::Identity,
    },
}

/// Why a pushed mapping was not taken; the mapping in force stays.
#[derive(Debug, thiserror::Error)]
pub enum MappingRefused {
    #[error("mapping for subnet {got:#018x}, this agent holds {held:#018x}")]
    OtherSubnet { got: u64, held: u64 },
    #[error(transparent)]
    Malformed(#[from] proto::convert::Invalid),
    #[error(transparent)]
    Version(proto::version::VersionRefused),
}

/// Why a controller session could not start or ended.
#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error("connect: {0}")]
    Connect(#[from] proto::client::ConnectError),
    #[error("{call}: {}: {}", .status.code(), .status.message())]
    Call { call: &'static str, status: Status },
    #[error("nothing routed to report")]
    NothingRouted,
}

impl SessionError {
    fn call(call: &'static str) -> impl FnOnce(Status) -> Self {
        move |status| SessionError::Call { call, status }
    }
}

/// Where the agent writes the mapping in force, in the paper's format.
pub use fabric::formats::routes_files::MAPPING_FILE;

/// The routing options in force before a reload ([`Agent::reload`]).
pub struct Reverted(Option<Arc<AgentConfig>>);

impl Agent {
    pub fn new(cfg: AgentConfig) -> Arc<Self> {
        Arc::new(Self {
            cfg,
            reloaded: ArcSwapOption::empty(),
            reconfigured: std::sync::atomic::AtomicBool::new(false),
            reroute_lock: tokio::sync::Mutex::new(()),
            subnet: ArcSwapOption::empty(),
            mapping: ArcSwapOption::empty(),
            generation: AtomicU64::new(0),
            rerouted: Notify::new(),
            list: std::sync::Mutex::new(None),
            mapping_changed: watch::channel(0).0,
            shrink_seen: std::sync::Mutex::new(None),
            load: std::sync::Mutex::new(None),
        })
    }

    /// Sets the agent's gauges: the generation, engine, VLs and verdict of
    /// the tables in force, and the mapping version held.
    pub fn record_metrics(&self) {
        use metrics::gauge;
        gauge!("ibfabric_agent_generation").set(self.generation.load(Ordering::SeqCst) as f64);
        gauge!("ibfabric_agent_mapping_version").set(self.mapping_version() as f64);
        if let Some(s) = self.subnet.load_full() {
            if let Some(r) = &s.report.routing {
                gauge!("ibfabric_agent_vls").set(f64::from(r.vls));
                gauge!("ibfabric_agent_deadlock_free").set(if r.deadlock_free && r.verified {
                    1.0
                } else {
                    0.0
                });
            }
        }
    }

    /// The config routing uses: the one started with, with the routing
    /// options of the last reload.
    pub fn routing_config(&self) -> AgentConfig {
        match self.reloaded.load_full() {
            Some(c) => (*c).clone(),
            None => self.cfg.clone(),
        }
    }

    /// Takes the routing options of `new` (engine, base, SSSP streams, VLs,
    /// SLs, root switches, DQR); the next [`Agent::reroute`] recomputes with them,
    /// ordering the update as after any change. Returns the keys that
    /// differ but only change on a restart, and what to hand to
    /// [`Agent::revert_reload`] if the recompute is refused.
    pub fn reload(&self, new: &AgentConfig) -> (Vec<&'static str>, Reverted) {
        let before = Reverted(self.reloaded.load_full());
        let merged = self.cfg.reloadable_part_of(new);
        let mut restart = Vec::new();
        let c = &self.cfg;
        for (key, same) in [
            ("agent_id", c.agent_id == new.agent_id),
            ("subnet_prefix", c.subnet_prefix == new.subnet_prefix),
            ("topology", c.topology == new.topology),
            ("out_dir", c.out_dir == new.out_dir),
            ("mapping_file", c.mapping_file == new.mapping_file),
            ("controllers", c.controllers == new.controllers),
            ("listen", c.listen == new.listen),
            ("metrics_listen", c.metrics_listen == new.metrics_listen),
            ("watch_topology", c.watch_topology == new.watch_topology),
            ("tls", c.tls == new.tls && c.insecure == new.insecure),
            ("fabric", c.fabric == new.fabric),
        ] {
            if !same {
                restart.push(key);
            }
        }
        // A key this list misses still is not applied: say so.
        if restart.is_empty() && &merged != new {
            restart.push("(other keys)");
        }
        if merged != self.routing_config() {
            self.reloaded.store(Some(Arc::new(merged)));
            self.reconfigured.store(true, Ordering::SeqCst);
        }
        (restart, before)
    }

    /// Puts back the routing options in force before a [`Agent::reload`]
    /// whose recompute was refused: later reroutes use what runs.
    pub fn revert_reload(&self, before: Reverted) {
        self.reloaded.store(before.0);
        self.reconfigured.store(false, Ordering::SeqCst);
    }

    pub fn mapping_version(&self) -> u64 {
        self.mapping.load().as_ref().map_or(0, |m| m.version)
    }

    pub fn subscribe_mapping(&self) -> watch::Receiver<u64> {
        self.mapping_changed.subscribe()
    }

    /// Routes (again) on a blocking thread and swaps the result in: the
    /// first time from scratch, then as [`subnet::update_subnet`] decides
    /// (DQR after failures), applying drain stages first, each confirmed
    /// before the next. A failed reroute keeps the tables in force.
    /// Returns whether the tables changed.
    pub async fn reroute(self: &Arc<Self>) -> Result<bool, AgentError> {
        self.reroute_with(None).await
    }

    /// The shrunken discovery seen for at least `discovery_hold_ms`, which
    /// may now be routed.
    fn shrink_confirmed(&self) -> Option<(usize, usize)> {
        let hold = std::time::Duration::from_millis(self.cfg.discovery_hold_ms);
        self.shrink_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .filter(|(_, since)| since.elapsed() >= hold)
            .map(|(sig, _)| sig)
    }

    /// Whether a held shrink is due for another look (the file watch asks
    /// even when the file did not change again).
    pub fn shrink_due(&self) -> bool {
        self.shrink_confirmed().is_some()
    }

    /// Remembers when a shrunken discovery was first seen; any other
    /// outcome forgets it (the discovery came back, or was routed).
    fn note_shrink(&self, r: &Result<subnet::Decision, subnet::RouteError>) {
        use fabric::discovery::DiscoveryRefused;
        let mut seen = self.shrink_seen.lock().unwrap_or_else(|p| p.into_inner());
        match r {
            Err(subnet::RouteError::Discovery {
                refused: refused @ DiscoveryRefused::Shrunk { .. },
                ..
            }) => {
                let sig = refused.signature();
                if seen.is_none_or(|(s, _)| s != sig) {
                    *seen = Some((sig, std::time::Instant::now()));
                }
            }
            // An empty discovery says nothing about the fabric: a shrink
            // seen before it keeps its clock.
            Err(subnet::RouteError::Discovery { .. }) => {}
            _ => *seen = None,
        }
    }

    /// [`Agent::reroute`] for the fabric `found` as discovered, in memory;
    /// None reads the topology file.
    pub async fn reroute_with(
        self: &Arc<Self>,
        found: Option<fabric::Fabric>,
    ) -> Result<bool, AgentError> {
        let _one = self.reroute_lock.lock().await;
        // The flag first, then the config it goes with.
        let reconfigured = self.reconfigured.swap(false, Ordering::SeqCst);
        let cfg = self.routing_config();
        let prev = self.subnet.load_full();
        let list = self.take_list();
        let prev2 = prev.clone();
        let confirmed = self.shrink_confirmed();
        let decided = tokio::task::spawn_blocking(move || {
            subnet::update_subnet(&cfg, found, prev2.as_deref(), list, reconfigured, confirmed)
        })
        .await;
        if let Ok(r) = &decided {
            self.note_shrink(r);
        }
        if reconfigured && !matches!(decided, Ok(Ok(_))) {
            // Not applied: the next reroute tries again.
            self.reconfigured.store(true, Ordering::SeqCst);
        }
        let decided = decided?;
        let update = match decided {
            Ok(subnet::Decision::Unchanged(list)) => {
                self.put_list(list.map(|l| *l), prev.as_ref());
                return Ok(false);
            }
            Ok(subnet::Decision::Update(u)) => *u,
            Err(e) => {
                // A failed DQR attempt may have left dependencies in the
                // list: it is rebuilt from the tables in force.
                if let Some(p) = prev {
                    self.build_list(p);
                }
                return Err(e.into());
            }
        };
        let subnet::Update {
            stages,
            routed,
            list,
        } = update;
        // Shared with the blocking tasks that write the stages and the
        // tables, then put in force as it is.
        let routed = Arc::new(routed);
        for (i, stage) in stages.into_iter().enumerate() {
            if let Err(e) = follow::apply_stage(self, &routed, stage, i + 1).await {
                if let Some(p) = prev {
                    self.build_list(p);
                }
                return Err(e.into());
            }
        }
        {
            let (cfg, r) = (self.cfg.clone(), routed.clone());
            tokio::task::spawn_blocking(move || {
                subnet::write_tables(
                    &cfg,
                    &r.fabric,
                    &r.routing,
                    r.routing.engine().name(),
                    r.mcast.as_ref(),
                )
            })
            .await??;
        }
        if let Some(u) = routed
            .report
            .routing
            .as_ref()
            .and_then(|r| r.update.as_ref())
        {
            tracing::info!(
                method = %u.method,
                reason = %u.reason,
                links_failed = u.links_failed,
                switches_failed = u.switches_failed,
                links_restored = u.links_restored,
                flows_broken = u.flows_broken,
                flows_rerouted = u.flows_rerouted,
                entries_changed = u.entries_changed,
                sls_changed = u.sls_changed,
                drain_stages = u.stages,
                seconds = u.seconds,
                "tables updated after a topology change"
            );
            metrics::counter!("ibfabric_agent_updates_total", "method" => u.method.clone())
                .increment(1);
            metrics::histogram!("ibfabric_agent_update_seconds", "method" => u.method.clone())
                .record(u.seconds);
        }
        // Generations order this agent's reports within one session (the
        // controller starts a new session's count afresh), so a counter
        // serves; no clock is trusted.
        self.generation.fetch_add(1, Ordering::SeqCst);
        // An operator's mapping file serves until the controller sends one
        // (version 1 and up). It is read once, against the first topology:
        // its backup lines are for router ports that later disappear, and a
        // re-read would refuse exactly those.
        if let Some(path) = self
            .cfg
            .mapping_file
            .as_ref()
            .filter(|_| self.mapping.load().is_none())
        {
            let ports = routed.router_port_views();
            let mapping = fabric::formats::mapping::read(path, routed.prefix, &ports)
                .map_err(AgentError::Mapping)?;
            tracing::info!(file = %path.display(), entries = mapping.entries.len(), defaults = mapping.defaults.len(), "mapping file loaded");
            let from_file = Arc::new(MappingState::new(0, "file".into(), mapping));
            // A controller mapping accepted meanwhile wins.
            self.mapping.rcu(|cur| match cur {
                Some(c) if c.version > 0 => Some(Arc::clone(c)),
                _ => Some(Arc::clone(&from_file)),
            });
        }
        // A DQR update hands back the list it extended: the next fault can
        // be rerouted against it at once. It still holds the old tables'
        // dependencies and those of the update's mixes, which no longer
        // run once the update is in force and only narrow the next
        // reroute's choices (on a 10x10 mesh routed by dor, two successive
        // faults are tolerated 78 % of the time on the carried list, 94 %
        // on the pruned one; BENCHMARKS.md). So a copy is pruned to the
        // tables in force in the background (its order kept) and replaces
        // it, unless a reroute ever moved flows to other SLs: their hosts
        // may still send with the SL they cached, whose walks only the
        // carried list holds ([`ChannelList::holds_cached_sl_walks`]).
        self.subnet.store(Some(routed.clone()));
        self.measure_load(routed.clone());
        match list {
            Some(l) => {
                let prune = !l.holds_cached_sl_walks();
                self.put_list(Some(l), Some(&routed));
                if prune {
                    self.prune_list(routed);
                }
            }
            None if self.routing_config().dqr => self.build_list(routed),
            None => {}
        }
        self.rerouted.notify_one();
        Ok(true)
    }

    fn current_report(&self, session: &str) -> Option<v1::SubnetReport> {
        let s = self.subnet.load_full()?;
        let mut r = s.report.clone();
        r.session = session.to_string();
        r.generation = self.generation.load(Ordering::SeqCst);
        let load = self.load.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some((of, l)), Some(x)) = (load.as_ref(), r.routing.as_mut()) {
            if std::ptr::eq(of.as_ptr(), Arc::as_ptr(&s)) {
                x.link_load = Some(l.clone());
            }
        }
        Some(r)
    }

    /// Measures the link load of `routed`'s tables in the background, kept
    /// while they stay in force.
    fn measure_load(self: &Arc<Self>, routed: Arc<RoutedSubnet>) {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let t = std::time::Instant::now();
            let l = load::load_summary(&routed);
            let current = me.subnet.load_full();
            if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &routed)) {
                tracing::debug!(
                    seconds = t.elapsed().as_secs_f64(),
                    max = l.max,
                    "link load measured"
                );
                *me.load.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((Arc::downgrade(&routed), l));
            }
        });
    }

    fn accept_mapping(&self, m: &v1::MappingUpdate, prefix: u64) -> Result<bool, MappingRefused> {
        if m.subnet_prefix != prefix {
            return Err(MappingRefused::OtherSubnet {
                got: m.subnet_prefix,
                held: prefix,
            });
        }
        match proto::version::accept(
            m.version,
            m.replaces,
            self.mapping_version(),
            proto::version::unix_now(),
        ) {
            Ok(()) => {}
            Err(proto::version::VersionRefused::NotNewer { .. }) => return Ok(false),
            Err(e) => return Err(MappingRefused::Version(e)),
        }
        let mapping = proto::convert::mapping_from_wire(m)?;
        let state = Arc::new(MappingState::new(m.version, m.algorithm.clone(), mapping));
        self.mapping.store(Some(state.clone()));
        if let Some(dir) = &self.cfg.out_dir {
            // The mapping is in force either way; a full disk only costs the
            // operator's copy, and the old copy stays whole.
            let sub = self.subnet.load_full();
            let written = fabric::formats::routes_files::stage_mapping(
                dir,
                sub.as_ref().map(|s| &s.fabric),
                Some(&state.mapping),
            )
            .and_then(|staged| staged.commit());
            if let Err(e) = written {
                tracing::warn!(error = %e, "could not write the mapping files");
            }
        }
        self.mapping_changed.send_replace(m.version);
        Ok(true)
    }

    /// Answers a path record query from the tables and mapping in force.
    pub fn path_query(&self, src: Gid, dst: Gid) -> Result<v1::PathQueryReply, Status> {
        let s = self
            .subnet
            .load_full()
            .ok_or_else(|| Status::unavailable("subnet not routed yet"))?;
        if src.prefix != s.prefix {
            return Err(Status::invalid_argument(format!(
                "source {src} is not in this subnet ({:#018x})",
                s.prefix
            )));
        }
        let slid = s.lid_of(src.guid).ok_or_else(|| {
            Status::not_found(format!("no end port with GUID {:#018x} here", src.guid))
        })?;
        if dst.prefix == s.prefix {
            let dlid = s.lid_of(dst.guid).ok_or_else(|| {
                Status::not_found(format!("no end port with GUID {:#018x} here", dst.guid))
            })?;
            return Ok(v1::PathQueryReply {
                slid: slid as u32,
                dlid: dlid as u32,
                sl: s.sl(slid, dlid) as u32,
                remote: false,
                router_port_guid: 0,
                mapping_version: self.mapping_version(),
            });
        }
        let m = self
            .mapping
            .load_full()
            .ok_or_else(|| Status::unavailable("no router-port mapping from the controller yet"))?;
        // The destination's route, else its backups, else the default
        // routes, in order: the first whose router port the subnet still
        // has (a router that left the topology file takes no traffic).
        let (port_guid, lid) = m
            .by_dest
            .get(&dst)
            .into_iter()
            .flatten()
            .map(|&(g, _)| g)
            .chain(m.mapping.defaults.iter().copied())
            .find_map(|g| Some((g, s.router_port_lid(g)?)))
            .ok_or_else(|| {
                Status::not_found(format!(
                    "no route to {dst}: no mapping entry or default route on a router port this subnet has"
                ))
            })?;
        Ok(v1::PathQueryReply {
            slid: slid as u32,
            dlid: lid as u32,
            sl: s.sl(slid, lid) as u32,
            remote: true,
            router_port_guid: port_guid,
            mapping_version: m.version,
        })
    }
}

struct QueryService(Arc<Agent>);

#[tonic::async_trait]
impl v1::agent_server::Agent for QueryService {
    async fn path_query(
        &self,
        req: Request<v1::PathQueryRequest>,
    ) -> Result<Response<v1::PathQueryReply>, Status> {
        // Any identity of the CA may ask for paths.
        self.0.cfg.transport().peer(&req)?;
        let q = req.into_inner();
        let (Some(src), Some(dst)) = (q.source.as_ref(), q.destination.as_ref()) else {
            return Err(Status::invalid_argument(
                "source and destination GIDs are required",
            ));
        };
        self.0
            .path_query(
                proto::convert::gid_from_wire(src),
                proto::convert::gid_from_wire(dst),
            )
            .map(Response::new)
    }
}
