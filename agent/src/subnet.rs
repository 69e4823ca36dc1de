//! Routing one subnet and describing it for the controller (synchronous;
//! the async side runs it on a blocking thread).

use crate::config::AgentConfig;
use fabric::Fabric;
use fabric::dqr::{self, Change, ChannelList, Fault};
use fabric::formats::ibnetdiscover;
use fabric::graph::SwitchGraph;
use fabric::model::{NONE, NodeKind};
use fabric::routing::{EngineOptions, RoutingEngine, Split};
use fabric::tables::Routing;
use fabric::verify::{Policy, Step, Verified};
use proto::v1;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error(transparent)]
    Fabric(#[from] fabric::Error),
    #[error("engine '{engine}' produced tables the verifier refuses: {refusal}")]
    Refused {
        engine: String,
        refusal: fabric::verify::Refusal,
    },
    #[error(
        "{0}; keeping the tables in force (to apply a recompute in one step, drain the subnet and restart the agent)"
    )]
    Unsafe(#[from] dqr::OrderError),
    #[error(transparent)]
    Dqr(#[from] dqr::DqrError),
    /// Multicast trees the check refuses with these tables.
    #[error("multicast: {0}; keeping the tables in force")]
    Multicast(String),
    /// The discovery is not routed now (`fabric::discovery`): the tables
    /// in force stay.
    #[error("{file}: {refused}; keeping the tables in force{}", if matches!(.refused, fabric::discovery::DiscoveryRefused::Shrunk { .. }) { " until the change persists" } else { "" })]
    Discovery {
        file: std::path::PathBuf,
        refused: fabric::discovery::DiscoveryRefused,
    },
}

/// A routed, verified subnet and what the controller needs to know of it.
pub struct RoutedSubnet {
    pub prefix: u64,
    pub fabric: Fabric,
    /// The tables, accepted by the verification gate.
    pub routing: Verified<Routing>,
    /// Topology, end ports, router ports and routing result; the session
    /// and generation are filled in when it is sent.
    pub report: v1::SubnetReport,
    /// The reserved multicast trees of the config's groups, checked with
    /// `routing`.
    pub mcast: Option<fabric::mcast::Multicast>,
    lid_by_guid: HashMap<u64, u16>,
    router_port_lid: HashMap<u64, u16>,
}

impl RoutedSubnet {
    /// LID of an end port (CA or router port) by port GUID.
    pub fn lid_of(&self, guid: u64) -> Option<u16> {
        self.lid_by_guid.get(&guid).copied()
    }

    /// The router ports as the inter-subnet code sees them.
    pub fn router_port_views(&self) -> Vec<fabric::intersubnet::RouterPortView> {
        self.report
            .router_ports
            .iter()
            .filter_map(|p| proto::convert::router_port_from_wire(p).ok())
            .collect()
    }

    /// LID of one of this subnet's router ports by port GUID.
    pub fn router_port_lid(&self, guid: u64) -> Option<u16> {
        self.router_port_lid.get(&guid).copied()
    }

    /// SL for a pair of LIDs (0 when the engine sets no path SLs).
    pub fn sl(&self, slid: u16, dlid: u16) -> u8 {
        self.routing
            .get()
            .path_sl
            .as_ref()
            .map_or(0, |p| p.get(slid, dlid))
    }
}

/// The dependency summary for the controller's whole-fabric check, from
/// the tables the gate accepted; none for a subnet without router ports.
fn summary(routing: &Verified<Routing>) -> Option<v1::DependencySummary> {
    match routing.dependencies() {
        Ok(s) => Some(proto::convert::summary_to_wire(s)),
        Err(fabric::verify::SummaryError::NoRouterPorts) => None,
        Err(e) => {
            tracing::warn!(error = %e, "no dependency summary: the controller's whole-fabric check will refuse routes through this subnet");
            None
        }
    }
}

/// Reads the topology, routes it with the configured engine, passes the
/// tables through the verification gate and (when configured) writes the
/// OpenSM dumps. An agent never hands out routes the gate refused, and it
/// accepts no dependency cycle, whatever the engine: its tables feed a live
/// fabric and the controller's inter-subnet routes.
pub fn route_subnet(cfg: &AgentConfig) -> Result<RoutedSubnet, RouteError> {
    let fabric = read_topology(cfg)?;
    let engine = engine_for(cfg, &fabric).engine();
    route_read(cfg, fabric, engine.as_ref())
}

/// The configured engine, or the one [`fabric::routing::auto`] picks for
/// `fabric` (logged with the reason).
pub fn engine_for(cfg: &AgentConfig, fabric: &Fabric) -> fabric::routing::EngineKind {
    cfg.engine.unwrap_or_else(|| {
        let c = fabric::routing::auto::choose(fabric, cfg.max_vls);
        tracing::info!(engine = c.engine.name(), reason = %c.reason, "engine chosen");
        c.engine
    })
}

/// [`route_subnet`] with the engine given rather than named by the config.
pub fn route_subnet_with(
    cfg: &AgentConfig,
    engine: &dyn RoutingEngine,
) -> Result<RoutedSubnet, RouteError> {
    route_read(cfg, read_topology(cfg)?, engine)
}

fn route_read(
    cfg: &AgentConfig,
    fabric: Fabric,
    engine: &dyn RoutingEngine,
) -> Result<RoutedSubnet, RouteError> {
    fabric::discovery::check(None, &fabric).map_err(|refused| RouteError::Discovery {
        file: cfg.topology.clone(),
        refused,
    })?;
    let (routing, route_seconds, mc) = compute(cfg, engine, &fabric, None)?;
    write_tables(cfg, &fabric, &routing, engine.name(), mc.as_ref())?;
    Ok(describe(
        cfg,
        fabric,
        (routing, mc),
        engine,
        route_seconds,
        None,
    ))
}

fn read_topology(cfg: &AgentConfig) -> Result<Fabric, RouteError> {
    // Every LID of a port with LMC is routed, verified and written, and
    // a fault reroutes the broken LIDs; a subnet with routers is refused
    // by the dependency summary.
    let mut fabric = ibnetdiscover::read_with_lmc(&cfg.topology)?;
    fabric::routing::check_switch_lmc(&fabric)?;
    fabric.subnet_prefix = cfg.subnet_prefix;
    Ok(fabric)
}

/// Routes `fabric` and passes the tables through the gate, with the
/// multicast trees of the config's groups (repairing `prev`'s tree).
fn compute(
    cfg: &AgentConfig,
    engine: &dyn RoutingEngine,
    fabric: &Fabric,
    prev: Option<&fabric::mcast::Multicast>,
) -> Result<Computed, RouteError> {
    let roots = match &cfg.root_guids {
        Some(p) if engine.uses_roots() => {
            Some(fabric::formats::guids::read_switch_guids(fabric, p)?)
        }
        _ => None,
    };
    let opts = crate::mcast::engine_options(
        cfg,
        EngineOptions {
            max_vls: cfg.max_vls,
            max_sls: cfg.max_sls,
            base: cfg.base,
            progress: None,
            roots: roots.as_deref(),
            sssp_streams: cfg.sssp_streams,
        },
    );
    let t = std::time::Instant::now();
    let mut routing = route(cfg, engine, fabric, &opts)?;
    let mc = crate::mcast::plan(cfg, fabric, &mut routing, prev)?;
    let route_seconds = t.elapsed().as_secs_f64();
    metrics::histogram!("ibfabric_agent_route_seconds", "engine" => engine.name())
        .record(route_seconds);
    let t = std::time::Instant::now();
    let accepted = fabric::verify::accept(fabric, engine, routing, Policy::DeadlockFree);
    metrics::histogram!("ibfabric_agent_verify_seconds").record(t.elapsed().as_secs_f64());
    let routing = accepted.map_err(|r| {
        metrics::counter!("ibfabric_agent_tables_refused_total").increment(1);
        RouteError::Refused {
            engine: engine.name().to_string(),
            refusal: r.refusal,
        }
    })?;
    if let Some(m) = &mc {
        crate::mcast::check(fabric, &routing, &[], m, None)?;
    }
    Ok((routing, route_seconds, mc))
}

/// Tables through the gate, the seconds the engine took, their trees.
type Computed = (Verified<Routing>, f64, Option<fabric::mcast::Multicast>);

/// The routing of `f`: on the configured workers when there are some and
/// the engine splits, here otherwise ([`worker::exec`]). A store that
/// cannot be listed leaves the routing here.
fn route(
    cfg: &AgentConfig,
    engine: &dyn RoutingEngine,
    f: &Fabric,
    opts: &EngineOptions,
) -> Result<Routing, RouteError> {
    // An engine that routes one LID per port is refused on a fabric with
    // LMC, here as on workers.
    fabric::routing::check_lmc(engine, f)?;
    let exec = cfg.executor();
    if !exec.wants_workers() {
        return Ok(engine.route(f, opts)?);
    }
    if let Split::Whole(why) = engine.split(opts) {
        tracing::info!("routing here: {why}");
        return Ok(engine.route(f, opts)?);
    }
    let job = async {
        let placed = exec.place(f).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "routing here");
            None
        });
        worker::exec::route(placed.as_ref(), engine, f, opts).await
    };
    // Called from blocking threads of the agent's runtime, or from
    // none (one-shot use): either way this thread may block.
    let done = match tokio::runtime::Handle::try_current() {
        Ok(h) => h.block_on(job),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fabric::Error::Routing {
                engine: engine.name().into(),
                reason: format!("no runtime for the workers: {e}"),
            })?
            .block_on(job),
    };
    let (routing, run) = done.map_err(|e| match e {
        worker::coordinator::CoordError::Route(e) => RouteError::Fabric(e),
        e => RouteError::Fabric(fabric::Error::Routing {
            engine: engine.name().into(),
            reason: format!("on workers: {e}"),
        }),
    })?;
    if let Some(run) = run {
        let lost = run.workers.iter().filter(|w| w.lost.is_some()).count();
        tracing::info!(
            job = %run.job,
            parts = run.parts,
            workers = run.workers.len(),
            lost,
            local_parts = run.local_parts,
            secs = run.seconds,
            "routed on workers"
        );
    }
    Ok(routing)
}

/// Writes a table set where OpenSM (or its plugin) reads it, when the
/// config names a directory.
pub fn write_tables(
    cfg: &AgentConfig,
    fabric: &Fabric,
    routing: &Verified<Routing>,
    engine: &str,
    mcast: Option<&fabric::mcast::Multicast>,
) -> Result<(), RouteError> {
    if let Some(dir) = &cfg.out_dir {
        // Crash-safe, and the tables of an earlier engine this one does
        // not set (SL-to-VL, path SLs) go: OpenSM would load them too.
        let mut staged = fabric::formats::stage_routing(fabric, routing, dir, cfg.export())?;
        if let Some(m) = mcast {
            staged = staged.with_multicast(fabric, m)?;
        }
        let files = staged.commit()?;
        for p in &files.removed {
            tracing::info!(file = %p.display(), engine, "removed a table file this engine does not set");
        }
    }
    Ok(())
}

/// What a topology change leads to.
pub enum Decision {
    /// The same nodes, links and LIDs: the tables in force stay (and so
    /// does their channel list, handed back).
    Unchanged(Option<Box<ChannelList>>),
    Update(Box<Update>),
}

impl Decision {
    fn update(
        routed: RoutedSubnet,
        stages: Vec<Verified<Routing>>,
        list: Option<ChannelList>,
    ) -> Self {
        Decision::Update(Box::new(Update {
            stages,
            routed,
            list,
        }))
    }
}

/// New tables, and the stages to apply before them.
pub struct Update {
    /// Drain stages, in order: each must be in every switch before the
    /// next stage or the new tables are applied.
    pub stages: Vec<Verified<Routing>>,
    /// The new tables (not written yet: the stages go first).
    pub routed: RoutedSubnet,
    /// The channel list of the new tables when DQR kept it; otherwise it
    /// is built again from them.
    pub list: Option<ChannelList>,
}

/// Re-reads the topology and decides how to move to tables for it from
/// `prev` (the tables in force): DQR when links or switches failed and the
/// channel list of `prev` is at hand; a recompute whose update is ordered
/// through drain stages and checked step by step when DQR finds no path or
/// links came back; a recompute applied in one step (said so) after any
/// other change. `found`: the fabric as discovered, or None to read the
/// topology file. An empty discovery is refused, and a sharply shrunken
/// one unless it is the one `confirmed_shrink` names (its
/// [`fabric::discovery::DiscoveryRefused::signature`], seen long enough).
/// Writes nothing.
pub fn update_subnet(
    cfg: &AgentConfig,
    found: Option<Fabric>,
    prev: Option<&RoutedSubnet>,
    list: Option<ChannelList>,
    reconfigured: bool,
    confirmed_shrink: Option<(usize, usize)>,
) -> Result<Decision, RouteError> {
    let found = match found {
        Some(f) => f,
        None => read_topology(cfg)?,
    };
    match fabric::discovery::check(prev.map(|p| &p.fabric), &found) {
        Err(refused)
            if Some(refused.signature()) != confirmed_shrink
                || matches!(refused, fabric::discovery::DiscoveryRefused::Empty { .. }) =>
        {
            return Err(RouteError::Discovery {
                file: cfg.topology.clone(),
                refused,
            });
        }
        _ => {}
    }
    let Some(prev) = prev else {
        let engine = engine_for(cfg, &found).engine();
        let engine = engine.as_ref();
        let (routing, secs, mc) = compute(cfg, engine, &found, None)?;
        let routed = describe(cfg, found, (routing, mc), engine, secs, None);
        return Ok(Decision::update(routed, Vec::new(), None));
    };
    let t0 = std::time::Instant::now();
    let (failed, restored) = match dqr::change_between(&prev.fabric, &found) {
        Change::Same if !reconfigured => return Ok(Decision::Unchanged(list.map(Box::new))),
        // The routing options changed (a reloaded config): a recompute on
        // the fabric as it is, ordered and checked like any other.
        Change::Same => (Vec::new(), Vec::new()),
        Change::Other(why) => {
            let engine = engine_for(cfg, &found).engine();
            let engine = engine.as_ref();
            tracing::warn!(
                change = %why,
                "the fabric changed beyond links going down or up: routing it from scratch, applied in one step (the update is not checked)"
            );
            let (routing, secs, mc) = compute(cfg, engine, &found, prev.mcast.as_ref())?;
            let update = v1::TableUpdate {
                method: "unchecked".into(),
                reason: why,
                seconds: t0.elapsed().as_secs_f64(),
                ..Default::default()
            };
            let routed = describe(cfg, found, (routing, mc), engine, secs, Some(update));
            return Ok(Decision::update(routed, Vec::new(), None));
        }
        Change::Links { failed, restored } => (failed, restored),
    };
    let update = v1::TableUpdate {
        links_failed: failed
            .iter()
            .filter(|f| matches!(f, Fault::Link(_)))
            .count() as u32,
        switches_failed: failed
            .iter()
            .filter(|f| matches!(f, Fault::Switch(_)))
            .count() as u32,
        links_restored: restored.len() as u32,
        ..Default::default()
    };
    let after = dqr::apply_change(&prev.fabric, &failed, &restored).map_err(|source| {
        fabric::Error::Model {
            file: cfg.topology.clone(),
            source,
        }
    })?;
    let why_not = match list {
        _ if reconfigured => Some("the routing options changed (config reloaded)"),
        _ if !restored.is_empty() => Some("links came back up: a recompute puts traffic on them"),
        _ if !cfg.dqr => Some("dqr is off in the config"),
        None => Some("the channel list of the tables in force is not built yet"),
        Some(_) => None,
    };
    let (reason, after) = match (why_not, list) {
        (None, Some(list)) => match try_dqr(cfg, prev, after, list, &update, t0)? {
            Ok(d) => return Ok(d),
            Err(back) => back,
        },
        (why, _) => (why.unwrap_or_default().to_string(), after),
    };
    recompute(cfg, prev, after, failed.is_empty(), reason, update, t0)
}

/// The tables in force rerouted around the failures by DQR, both stages
/// through the gate; `Err(why not)` when DQR found no way (the caller
/// recomputes, and gets the fabric back).
fn try_dqr(
    cfg: &AgentConfig,
    prev: &RoutedSubnet,
    after: Fabric,
    mut list: ChannelList,
    update: &v1::TableUpdate,
    t0: std::time::Instant,
) -> Result<Result<Decision, (String, Fabric)>, RouteError> {
    // DQR patches the tables in force: their engine. A recompute routes
    // with the engine the (reloaded) config names or the topology gets.
    let prev_kind = prev.routing.engine();
    let opts = dqr::Options {
        // The gate below verifies the new tables in full.
        verify_result: false,
        detours: cfg
            .dqr_detours
            .unwrap_or(dqr::Detours::default_for(prev_kind)),
        ..dqr::Options::default()
    };
    let t = std::time::Instant::now();
    match dqr::reroute_from(&prev.fabric, &after, prev.routing.get(), &mut list, &opts) {
        Ok(mut out) => {
            let secs = t.elapsed().as_secs_f64();
            let mc = crate::mcast::plan(cfg, &after, &mut out.routing, prev.mcast.as_ref())?;
            let stages = out
                .drain
                .map(|d| fabric::verify::accept_step(&after, prev_kind, d, Step::Drain))
                .transpose()
                .map_err(refused(prev_kind))?
                .into_iter()
                .collect::<Vec<_>>();
            let routing = fabric::verify::accept_step(&after, prev_kind, out.routing, Step::Final)
                .map_err(refused(prev_kind))?;
            let before = prev.routing.report();
            dqr::within_vls(routing.report(), before.max_vl, before.vls_used)?;
            if let Some(m) = &mc {
                crate::mcast::check(&after, &routing, &stages, m, prev.mcast.as_ref())?;
            }
            let s = out.stats;
            let mut update = update.clone();
            update.method = "dqr".into();
            update.flows_broken = s.flows_broken;
            update.flows_rerouted = s.flows_rerouted;
            update.entries_changed = s.entries_changed;
            update.sls_changed = s.sls_changed;
            update.stages = stages.len() as u32;
            update.seconds = t0.elapsed().as_secs_f64();
            let engine = prev_kind.engine();
            let routed = describe(
                cfg,
                after,
                (routing, mc),
                engine.as_ref(),
                secs,
                Some(update),
            );
            Ok(Ok(Decision::update(routed, stages, Some(list))))
        }
        Err(e) => Ok(Err((e.to_string(), after))),
    }
}

/// A recompute for `after`, its update ordered through drain stages and
/// each stage checked; when only links came back and no order is safe,
/// the tables in force stay.
fn recompute(
    cfg: &AgentConfig,
    prev: &RoutedSubnet,
    after: Fabric,
    none_failed: bool,
    reason: String,
    mut update: v1::TableUpdate,
    t0: std::time::Instant,
) -> Result<Decision, RouteError> {
    let prev_kind = prev.routing.engine();
    tracing::warn!(%reason, "recomputing the subnet; the update will be ordered and checked");
    let engine = engine_for(cfg, &after).engine();
    let engine = engine.as_ref();
    let kind = engine.kind();
    let (routing, secs, mc) = compute(cfg, engine, &after, prev.mcast.as_ref())?;
    let plan = match dqr::order_update(&after, prev.routing.get(), routing.get()) {
        Ok(p) => p,
        Err(e) if none_failed => {
            // Only links came back: the tables in force still connect
            // every pair without them, and deadlock free (a new link adds
            // no walk). They stay, bound to the fabric as it is now.
            // The tables in force are the previous engine's (a reloaded
            // config may name another).
            let kept = fabric::verify::accept_step(
                &after,
                prev_kind,
                prev.routing.get().clone(),
                Step::Final,
            )
            .map_err(refused(prev_kind))?;
            tracing::warn!(%reason, "the recompute cannot be applied safely ({e}); the tables in force stay (they connect every pair, deadlock free)");
            update.method = "kept".into();
            update.reason = format!("{reason}; but {e}");
            update.seconds = t0.elapsed().as_secs_f64();
            let routed = describe(
                cfg,
                after,
                (kept, prev.mcast.clone()),
                prev_kind.engine().as_ref(),
                0.0,
                Some(update),
            );
            return Ok(Decision::update(routed, Vec::new(), None));
        }
        Err(e) => return Err(e.into()),
    };
    let stages = plan
        .stages
        .into_iter()
        .map(|d| fabric::verify::accept_step(&after, kind, d, Step::Drain))
        .collect::<Result<Vec<_>, _>>()
        .map_err(refused(kind))?;
    if let Some(m) = &mc {
        crate::mcast::check(&after, &routing, &stages, m, prev.mcast.as_ref())?;
    }
    let t = fabric::audit::compare(
        &prev.fabric,
        prev.routing.get(),
        &after,
        routing.get(),
        false,
        0,
    );
    update.method = "recompute".into();
    update.reason = reason;
    update.entries_changed = t.differences;
    update.stages = stages.len() as u32;
    update.seconds = t0.elapsed().as_secs_f64();
    let routed = describe(cfg, after, (routing, mc), engine, secs, Some(update));
    Ok(Decision::update(routed, stages, None))
}

/// A refusal of the gate, named with the engine.
fn refused(kind: fabric::routing::EngineKind) -> impl Fn(fabric::verify::Refused) -> RouteError {
    move |r: fabric::verify::Refused| RouteError::Refused {
        engine: kind.name().to_string(),
        refusal: r.refusal,
    }
}

/// Describes routed tables for the controller and the path queries.
fn describe(
    cfg: &AgentConfig,
    fabric: Fabric,
    (routing, mcast): (Verified<Routing>, Option<fabric::mcast::Multicast>),
    engine: &dyn RoutingEngine,
    route_seconds: f64,
    update: Option<v1::TableUpdate>,
) -> RoutedSubnet {
    let prefix = cfg.subnet_prefix;
    let primary = fabric::intersubnet::reported_primary_lids(engine, &fabric, &routing.get().lfts);
    let mut h = Sha256::new();
    routing.get().for_each_table_chunk(|c| h.update(c));
    let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();

    let mut lid_by_guid = HashMap::new();
    let mut router_port_lid = HashMap::new();
    let mut end_ports = Vec::new();
    let mut router_ports = Vec::new();
    for &e in fabric.endports() {
        let n = fabric.node_of(e);
        let guid = fabric.port_guid(e);
        let lid = fabric.lid_of_slot(e);
        lid_by_guid.insert(guid, lid);
        match fabric.kind(n) {
            NodeKind::Router => {
                router_port_lid.insert(guid, lid);
                router_ports.push(v1::RouterPort {
                    router_guid: fabric.guid(n),
                    router_desc: fabric.desc(n).to_string(),
                    port: fabric.port_of(e) as u32,
                    router_num_ports: fabric.num_ports(n) as u32,
                    port_guid: guid,
                    lid: lid as u32,
                    switch_guid: match fabric.remote(e) {
                        NONE => 0,
                        r => fabric.guid(fabric.node_of(r)),
                    },
                    primary_lids: primary
                        .get(&guid)
                        .map(|v| v.iter().map(|&l| l as u32).collect())
                        .unwrap_or_default(),
                });
            }
            _ => end_ports.push(v1::EndPort {
                guid,
                lid: lid as u32,
                desc: fabric.desc(n).to_string(),
                lmc: u32::from(fabric.lmc(e)),
            }),
        }
    }
    let rep = routing.report();
    let diameter = SwitchGraph::new(&fabric).diameter().unwrap_or(0);
    let links = (0..fabric.num_slots() as u32)
        .filter(|&s| fabric.remote(s) != NONE)
        .count()
        / 2;
    let report = v1::SubnetReport {
        session: String::new(),
        subnet_prefix: prefix,
        generation: 0,
        topology: Some(v1::TopologySummary {
            switches: fabric.switches().len() as u32,
            cas: fabric.num_cas() as u32,
            routers: fabric.num_routers() as u32,
            links: links as u32,
            diameter,
            max_lid: fabric.max_lid() as u32,
        }),
        end_ports,
        router_ports,
        routing: Some(v1::RoutingResult {
            engine: engine.name().to_string(),
            vls: rep.vls_used,
            sls: rep.sls_used,
            verified: rep.all_pairs_routed(),
            deadlock_free: rep.deadlock_free(),
            max_hops: rep.max_hops,
            table_digest: digest,
            route_seconds,
            update,
            // Measured after the tables are in force (`load::load_summary`).
            link_load: None,
        }),
        dependencies: summary(&routing),
    };
    tracing::info!(
        subnet = %format!("{prefix:#018x}"),
        engine = engine.name(),
        switches = fabric.switches().len(),
        cas = fabric.num_cas(),
        vls = rep.vls_used,
        deadlock_free = rep.deadlock_free(),
        route_seconds,
        "subnet routed and verified"
    );
    RoutedSubnet {
        prefix,
        fabric,
        routing,
        report,
        mcast,
        lid_by_guid,
        router_port_lid,
    }
}
