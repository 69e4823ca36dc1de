//! Routing one subnet and describing it for the controller (synchronous;
//! the async side runs it on a blocking thread).

use crate::config::AgentConfig;
use fabric::formats::ibnetdiscover;
use fabric::graph::SwitchGraph;
use fabric::model::{NodeKind, NONE};
use fabric::routing::{self, EngineOptions};
use fabric::tables::Routing;
use fabric::Fabric;
use proto::v1;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error(transparent)]
    Fabric(#[from] fabric::Error),
    #[error("{0}")]
    Config(String),
    #[error("engine '{engine}' produced tables the verifier refuses: {why}")]
    Refused { engine: String, why: String },
}

/// A routed, verified subnet and what the controller needs to know of it.
pub struct RoutedSubnet {
    pub prefix: u64,
    pub fabric: Fabric,
    pub routing: Routing,
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
            .path_sl
            .as_ref()
            .map_or(0, |p| p.get(slid, dlid))
    }
}

/// Reads the topology, routes it with the configured engine, verifies the
/// tables and (when configured) writes the OpenSM dumps. Unverified tables
/// are an error: an agent never hands out routes the verifier refused.
pub fn route_subnet(cfg: &AgentConfig) -> Result<RoutedSubnet, RouteError> {
    let prefix = cfg.subnet_prefix;
    let mut fabric = ibnetdiscover::read(&cfg.topology)?;
    fabric.subnet_prefix = prefix;
    let engine = cfg.engine.engine();
    let opts = EngineOptions {
        max_vls: cfg.max_vls,
        max_sls: cfg.max_sls,
        base: match &cfg.base {
            Some(b) => *b,
            None => routing::Base::default(),
        },
        progress: None,
        ..EngineOptions::default()
    };
    let t = std::time::Instant::now();
    let routing = engine.route(&fabric, &opts)?;
    let route_seconds = t.elapsed().as_secs_f64();
    let rep = fabric::verify::verify(&fabric, &routing);
    if !rep.all_pairs_routed() {
        return Err(RouteError::Refused {
            engine: cfg.engine.to_string(),
            why: format!("{} of {} pairs not routed", rep.broken_pairs, rep.pairs),
        });
    }
    if !rep.deadlock_free() && engine.claims_deadlock_free() {
        return Err(RouteError::Refused {
            engine: cfg.engine.to_string(),
            why: format!(
                "dependency cycle {}",
                rep.describe_cycle(&fabric).unwrap_or_default()
            ),
        });
    }
    if let Some(dir) = &cfg.out_dir {
        fabric::formats::write_routing(&fabric, &routing, dir)?;
    }
    let primary =
        fabric::intersubnet::reported_primary_lids(engine.as_ref(), &fabric, &routing.lfts);
    let mut h = Sha256::new();
    routing.for_each_table_chunk(|c| h.update(c));
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
            engine: cfg.engine.to_string(),
            vls: rep.vls_used,
            sls: rep.sls_used,
            verified: rep.all_pairs_routed(),
            deadlock_free: rep.deadlock_free(),
            max_hops: rep.max_hops,
            table_digest: digest,
            route_seconds,
        }),
    };
    tracing::info!(
        subnet = %format!("{prefix:#018x}"),
        engine = %cfg.engine,
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
