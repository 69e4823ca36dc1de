//! Per-subnet agent (`ibfabric agent --config FILE`).
//!
//! Routes and verifies its subnet ([`subnet::route_subnet`]), writes the
//! OpenSM dumps, registers and reports to the leader controller, follows
//! the controller's mapping pushes, and answers path queries. The routed
//! subnet and the mapping are each one `Arc` snapshot swapped whole, so a
//! query never mixes two versions.

pub mod config;
pub mod follow;
pub mod live;
pub mod subnet;

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
        let _one = self.reroute_lock.lock().await;
        // The flag first, then the config it goes with.
        let reconfigured = self.reconfigured.swap(false, Ordering::SeqCst);
        let cfg = self.routing_config();
        let prev = self.subnet.load_full();
        let list = self.take_list();
        let prev2 = prev.clone();
        let decided = tokio::task::spawn_blocking(move || {
            subnet::update_subnet(&cfg, prev2.as_deref(), list, reconfigured)
        })
        .await;
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
                subnet::write_tables(&cfg, &r.fabric, &r.routing, r.routing.engine().name())
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

    fn take_list(&self) -> Option<ChannelList> {
        self.list
            .lock()
            .ok()
            .and_then(|mut l| l.take())
            .map(|(_, l)| l)
    }

    /// Keeps `list` as the channel list of `of` (when `of` is still the
    /// subnet in force).
    fn put_list(&self, list: Option<ChannelList>, of: Option<&Arc<RoutedSubnet>>) {
        let (Some(list), Some(of)) = (list, of) else {
            return;
        };
        if let Ok(mut l) = self.list.lock() {
            *l = Some((Arc::downgrade(of), list));
        }
    }

    /// Builds the channel list of `routed` in the background; it is kept
    /// only if `routed` is still in force when it is ready.
    fn build_list(self: &Arc<Self>, routed: Arc<RoutedSubnet>) {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let t = std::time::Instant::now();
            match ChannelList::build(&routed.fabric, routed.routing.get()) {
                Ok((list, _)) => {
                    let current = me.subnet.load_full();
                    if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &routed)) {
                        tracing::debug!(
                            seconds = t.elapsed().as_secs_f64(),
                            dependencies = list.num_edges(),
                            "channel list built: failures will be rerouted by DQR"
                        );
                        me.put_list(Some(list), Some(&routed));
                    }
                }
                Err(e) => tracing::warn!("no channel list, failures will be recomputed: {e}"),
            }
        });
    }

    /// Prunes a copy of the channel list DQR extended for `routed` to the
    /// dependencies of its tables, in the background; the copy replaces
    /// the carried list only if `routed` is still in force and no reroute
    /// took the list meanwhile.
    fn prune_list(self: &Arc<Self>, routed: Arc<RoutedSubnet>) {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let t = std::time::Instant::now();
            let copy = me
                .list
                .lock()
                .ok()
                .and_then(|l| held_for(&l, &routed).cloned());
            let Some(mut list) = copy else { return };
            match list.prune_to(&routed.fabric, routed.routing.get()) {
                Ok(false) => {}
                Ok(true) => {
                    let current = me.subnet.load_full();
                    let in_force = current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &routed));
                    if let Ok(mut l) = me.list.lock() {
                        if in_force && held_for(&l, &routed).is_some() {
                            tracing::debug!(
                                seconds = t.elapsed().as_secs_f64(),
                                dependencies = list.num_edges(),
                                "channel list pruned to the tables in force"
                            );
                            *l = Some((Arc::downgrade(&routed), list));
                        }
                    }
                }
                Err(e) => tracing::warn!("channel list kept unpruned: {e}"),
            }
        });
    }

    /// Dependencies in the channel list of the tables in force (`None`
    /// until it is built): after a DQR update they fall to the new tables'
    /// own once the list is pruned.
    pub fn channel_list_dependencies(&self) -> Option<usize> {
        let cur = self.subnet.load_full()?;
        let l = self.list.lock().ok()?;
        held_for(&l, &cur).map(ChannelList::num_edges)
    }

    /// Whether the channel list of the tables in force is ready (DQR can
    /// reroute the next failure).
    pub fn dqr_ready(&self) -> bool {
        let Some(cur) = self.subnet.load_full() else {
            return false;
        };
        self.list
            .lock()
            .ok()
            .is_some_and(|l| held_for(&l, &cur).is_some())
    }

    fn current_report(&self, session: &str) -> Option<v1::SubnetReport> {
        let s = self.subnet.load_full()?;
        let mut r = s.report.clone();
        r.session = session.to_string();
        r.generation = self.generation.load(Ordering::SeqCst);
        Some(r)
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

/// Runs the agent until `shutdown` turns true: first route (an error here
/// is returned: the agent does not start on tables it cannot verify), then
/// the query service, the topology watch and the controller session.
pub async fn run(
    agent: Arc<Agent>,
    listener: Option<tokio::net::TcpListener>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), AgentError> {
    let transport = agent.cfg.transport();
    // The agent speaks for its prefix only with a certificate that names
    // it: refuse to start with another one rather than be refused later.
    if let ibtls::Transport::Tls(s) = &transport {
        let id = s.identity()?;
        let want = ibtls::Identity::Agent {
            prefix: agent.cfg.subnet_prefix,
        };
        if id != want {
            return Err(AgentError::Identity { have: id, want });
        }
    }
    let server = match listener {
        Some(_) => Some(proto::client::server(
            &transport,
            proto::client::UNARY_TIMEOUT,
            64,
        )?),
        None => None,
    };
    follow::initial_discovery(&agent).await?;
    agent.reroute().await?;
    let mut tasks = Vec::new();
    if agent.cfg.fabric.is_some() {
        let a = agent.clone();
        let sd = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            follow::apply_and_confirm(&a, std::time::Instant::now()).await;
            follow::follow_fabric(a, sd).await;
        }));
    } else if agent.cfg.watch_topology {
        tasks.push(tokio::spawn(watch_topology(
            agent.clone(),
            shutdown.clone(),
        )));
    }
    tasks.push(tokio::spawn(controller_session(
        agent.clone(),
        shutdown.clone(),
    )));
    let r = match (listener, server) {
        (Some(l), Some(mut server)) => {
            let (_health, routes) = proto::ops::routes(&mut server, "ibfabric.v1.Agent").await?;
            let svc = v1::agent_server::AgentServer::new(QueryService(agent.clone()))
                .max_decoding_message_size(proto::client::MAX_MESSAGE_BYTES)
                .max_encoding_message_size(proto::client::MAX_MESSAGE_BYTES);
            proto::ops::serve(routes.add_service(svc), l, shutdown.clone())
                .await
                .map_err(AgentError::from)
        }
        _ => {
            let mut sd = shutdown.clone();
            let _ = sd.wait_for(|s| *s).await;
            Ok(())
        }
    };
    for t in tasks {
        t.abort();
    }
    r
}

/// Re-routes when the topology file changes (polled: works on every file
/// system, and a subnet file changes at human pace).
async fn watch_topology(agent: Arc<Agent>, mut shutdown: watch::Receiver<bool>) {
    let path = agent.cfg.topology.clone();
    let stamp = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let mut last = stamp(&path);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = shutdown.changed() => return,
        }
        let now = stamp(&path);
        if now.is_some() && now != last {
            last = now;
            tracing::info!(topology = %path.display(), "topology changed; rerouting");
            if let Err(e) = agent.reroute().await {
                tracing::error!("reroute failed, keeping the tables in force: {e}");
            }
        }
    }
}

/// Before the first heartbeat says otherwise, the silence after which the
/// mapping stream is left.
const SILENCE_FALLBACK: Duration = Duration::from_secs(5);

/// Register, report, follow the mapping, with whichever controller leads
/// ([`proto::client::follow_leader`]). A session ends when the leader
/// stops sending (three heartbeats of silence: frozen, partitioned,
/// deposed), and the next round finds the current leader.
async fn controller_session(agent: Arc<Agent>, shutdown: watch::Receiver<bool>) {
    let ctrls = agent.cfg.controllers.clone();
    if ctrls.is_empty() {
        tracing::warn!("no controller configured: local routing only");
        return;
    }
    let prefix = agent.cfg.subnet_prefix;
    let transport = agent.cfg.transport();
    proto::client::follow_leader(&ctrls, &transport, shutdown, "controller session", |addr| {
        let (agent, transport) = (agent.clone(), transport.clone());
        async move { one_session(&agent, &transport, &addr, prefix).await }
    })
    .await
}

type Client = v1::controller_client::ControllerClient<tonic::transport::Channel>;

/// Sends the current report on `c`.
async fn send_report(
    agent: Arc<Agent>,
    mut c: Client,
    session: String,
) -> Result<v1::ReportAck, SessionError> {
    let Some(r) = agent.current_report(&session) else {
        return Err(SessionError::NothingRouted);
    };
    c.report(proto::client::unary(r))
        .await
        .map(|a| a.into_inner())
        .map_err(SessionError::call("report"))
}

/// One session with one controller: Ok when it was established and later
/// ended, Err when it could not be established.
async fn one_session(
    agent: &Arc<Agent>,
    transport: &ibtls::Transport,
    addr: &str,
    prefix: u64,
) -> Result<(), SessionError> {
    let mut client = proto::client::controller(addr, transport).await?;
    let reg = client
        .register(proto::client::unary(v1::RegisterRequest {
            agent_id: agent.cfg.agent_id.clone(),
            subnet_prefix: prefix,
            query_addr: agent.cfg.listen.map(|a| a.to_string()).unwrap_or_default(),
        }))
        .await
        .map_err(SessionError::call("register"))?
        .into_inner();
    let lease = Duration::from_secs(reg.lease_seconds.max(1) as u64);
    tracing::info!(controller = %addr, leader = %reg.controller_id, "registered");
    send_report(agent.clone(), client.clone(), reg.session.clone()).await?;
    let req = v1::WatchMappingRequest {
        subnet_prefix: prefix,
        have_version: agent.mapping_version(),
        max_message_bytes: proto::client::MAX_MESSAGE_BYTES as u32,
    };
    // Only the opening has a deadline (a gRPC deadline would end the
    // stream too): the stream itself lives on heartbeats.
    let mut stream = tokio::time::timeout(proto::client::PROBE_TIMEOUT, client.follow_mapping(req))
        .await
        .map_err(|_| SessionError::Call {
            call: "follow mapping",
            status: Status::deadline_exceeded("the controller did not open the stream in time"),
        })?
        .map_err(SessionError::call("follow mapping"))?
        .into_inner();
    // Reports double as the liveness heartbeat: well inside the lease.
    let mut beat = tokio::time::interval(lease / 3);
    beat.tick().await;
    let mut parts = proto::chunk::Assembler::<v1::MappingUpdate>::new();
    let held = proto::client::HeldReporter::spawn(
        client.clone(),
        v1::held_request::Holder::SubnetPrefix(prefix),
    );
    let mut interval = None;
    // At most one report in flight, run aside so a silent leader is
    // noticed by the stream even while a report waits for its answer.
    let mut in_flight: Option<tokio::task::JoinHandle<Result<v1::ReportAck, SessionError>>> = None;
    let mut due = false;
    let mut heard = tokio::time::Instant::now();
    let ended = loop {
        if due && in_flight.is_none() {
            due = false;
            in_flight = Some(tokio::spawn(send_report(
                agent.clone(),
                client.clone(),
                reg.session.clone(),
            )));
        }
        let silence = proto::client::silence_bound(interval, SILENCE_FALLBACK);
        tokio::select! {
            // Counted from the last message, whatever else wakes the loop.
            _ = tokio::time::sleep_until(heard + silence) => {
                tracing::warn!(controller = %addr, ?silence, "no heartbeat from the controller; looking for the leader");
                break Ok(());
            }
            m = stream.message() => {
                heard = tokio::time::Instant::now();
                let push = match m {
                    Ok(Some(p)) => p,
                    Ok(None) => break Ok(()),
                    Err(s) => {
                        tracing::info!(controller = %addr, "mapping watch ended: {}", s.message());
                        break Ok(());
                    }
                };
                let part = match push.kind {
                    Some(v1::mapping_push::Kind::Heartbeat(h)) => {
                        interval = Some(h.interval_ms);
                        continue;
                    }
                    Some(v1::mapping_push::Kind::Part(p)) => p,
                    None => continue,
                };
                let m = match parts.push(part) {
                    Ok(Some(m)) => m,
                    Ok(None) => continue,
                    Err(e) => {
                        // Nothing half is applied: the mapping in force
                        // stays, a new stream starts the version again.
                        tracing::warn!(controller = %addr, "pushed parts refused: {e}");
                        break Ok(());
                    }
                };
                match agent.accept_mapping(&m, prefix) {
                    Ok(true) => {
                        tracing::info!(version = m.version, entries = m.entries.len(), "mapping applied");
                        // What the agent holds, for the controller's status.
                        held.held(m.version);
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!("mapping refused: {e}"),
                }
            }
            r = async { match in_flight.as_mut() { Some(h) => h.await, None => std::future::pending().await } } => {
                in_flight = None;
                match r {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => break Err(e),
                    Err(e) => tracing::warn!("report task: {e}"),
                }
            }
            _ = agent.rerouted.notified() => due = true,
            _ = beat.tick() => due = true,
        }
    };
    if let Some(h) = in_flight {
        h.abort();
    }
    // A report refused after the session was established ends it as an
    // error: the next round registers again, after the backoff.
    ended
}
