//! Routing one subnet and describing it for the controller (synchronous;
//! the async side runs it on a blocking thread).

use crate::config::AgentConfig;
use fabric::formats::ibnetdiscover;
use fabric::graph::SwitchGraph;
use fabric::model::{NodeKind, NONE};
use fabric::routing::{EngineOptions, RoutingEngine};
use fabric::tables::Routing;
use fabric::verify::{Policy, Verified};
use fabric::Fabric;
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
    let engine = cfg.engine.engine();
    route_subnet_with(cfg, engine.as_ref())
}

/// [`route_subnet`] with the engine given rather than named by the config.
pub fn route_subnet_with(
    cfg: &AgentConfig,
    engine: &dyn RoutingEngine,
) -> Result<RoutedSubnet, RouteError> {
    let prefix = cfg.subnet_prefix;
    let mut fabric = ibnetdiscover::read(&cfg.topology)?;
    fabric.subnet_prefix = prefix;
    let opts = EngineOptions {
        max_vls: cfg.max_vls,
        max_sls: cfg.max_sls,
        base: cfg.base.unwrap_or_default(),
        progress: None,
        ..EngineOptions::default()
    };
    let t = std::time::Instant::now();
    let routing = engine.route(&fabric, &opts)?;
    let route_seconds = t.elapsed().as_secs_f64();
    let routing =
        fabric::verify::accept(&fabric, engine, routing, Policy::DeadlockFree).map_err(|r| {
            RouteError::Refused {
                engine: engine.name().to_string(),
                refusal: r.refusal,
            }
        })?;
    if let Some(dir) = &cfg.out_dir {
        // Crash-safe, and the tables of an earlier engine this one does
        // not set (SL-to-VL, path SLs) go: OpenSM would load them too.
        let files = fabric::formats::write_routing(&fabric, &routing, dir)?;
        for p in &files.removed {
            tracing::info!(file = %p.display(), engine = engine.name(), "removed a table file this engine does not set");
        }
    }
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
            }),
        }
    }
    let rep = routing.report();
    let g = SwitchGraph::new(&fabric);
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
            diameter: g.diameter().unwrap_or(0),
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
    Ok(RoutedSubnet {
        prefix,
        fabric,
        routing,
        report,
        lid_by_guid,
        router_port_lid,
    })
}
