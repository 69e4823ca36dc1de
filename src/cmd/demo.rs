//! `ibfabric demo`: a generated multi-subnet fabric with controller,
//! agents and routers in one process over loopback gRPC, resolving sample
//! inter-subnet paths through the live services.

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use controller::config::{ControllerConfig, DEFAULT_LEASE_SECONDS, StoreConfig};
use fabric::intersubnet::{AlgorithmKind, EndPortView, Gid, GlobalView, SubnetView};
use fabric::routing::EngineKind;
use proto::v1;
use serde::Serialize;
use settings::ConfigFile;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::controller::start_controller;
use super::runtime::runtime;

#[derive(Args)]
pub struct DemoArgs {
    /// The fabric: every router has one port on every spine of every
    /// subnet it joins.
    #[command(flatten)]
    shape: crate::cmd::generate::TreeShape,
    /// Routing engine of every subnet's agent.
    #[arg(long, default_value = "updn")]
    engine: EngineKind,
    /// Inter-subnet algorithm of the controller.
    #[arg(long, default_value = "prefix")]
    algorithm: AlgorithmKind,
    /// Keep the generated topology files and OpenSM dumps in this directory.
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Machine-readable summary on stdout.
    #[arg(long)]
    json: bool,
}

struct DemoRun {
    /// First failure of a service task, which ends the wait at once.
    failed: Arc<std::sync::Mutex<Option<String>>>,
    ctl_addr: String,
    /// Path query address of each subnet's agent, in subnet order.
    agents: Vec<String>,
    /// Router GUID and RouterFw address.
    routers: Vec<(u64, String)>,
}

pub fn run(a: DemoArgs) -> Result<i32> {
    let t0 = Instant::now();
    let t = &a.shape;
    let join = t.join()?;
    if join != fabric::multi::Join::All && a.algorithm.is_prefix() {
        bail!(
            "--algorithm {} (OpenSM's prefix routes) does not cross transit subnets; \
             use issr or isfr with --join {}",
            a.algorithm,
            t.join
        );
    }
    let m = fabric::multi::tree_subnets(&fabric::multi::TreeSubnets {
        subnets: t.subnets,
        leaves: t.leaves,
        spines: t.spines,
        hosts: t.hosts,
        routers: t.routers,
        router_links: 1,
        wiring: fabric::multi::Wiring::All,
        join,
    })?;
    let tmp;
    let dir = match &a.keep {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            d.clone()
        }
        None => {
            tmp = tempfile::tempdir().context("creating a temporary directory")?;
            tmp.path().to_path_buf()
        }
    };
    for s in &m.subnets {
        fabric::formats::write_file(
            &dir.join(format!("{}.net", s.name)),
            &fabric::formats::ibnetdiscover::write(&s.fabric),
        )?;
    }
    let rt = runtime()?;
    let (stop_tx, stop) = watch::channel(false);
    let result = rt.block_on(async {
        let run = start_demo(&a, &m, &dir, stop.clone()).await?;
        let r = wait_and_report(&a, &m, &run, t0).await;
        let _ = stop_tx.send(true);
        r
    });
    drop(rt);
    result
}

async fn start_demo(
    a: &DemoArgs,
    m: &fabric::multi::MultiFabric,
    dir: &std::path::Path,
    stop: watch::Receiver<bool>,
) -> Result<DemoRun> {
    tracing::info!(
        "demo: controller, agents and routers talk plaintext gRPC on loopback (insecure = true); \
         deployments use mutual TLS (see README, Certificates)"
    );
    let ctl_listener = TcpListener::bind("127.0.0.1:0").await?;
    let ctl_addr = format!("http://{}", ctl_listener.local_addr()?);
    let cfg = ControllerConfig {
        id: "demo-controller".into(),
        listen: ctl_listener.local_addr()?,
        algorithm: a.algorithm,
        lease_seconds: DEFAULT_LEASE_SECONDS,
        store: StoreConfig::default(),
        limits: Default::default(),
        tls: None,
        insecure: true,
        metrics_listen: None,
        status_page: false,
        status_listen: None,
    };
    let ctl = start_controller(&cfg, stop.clone()).await?;
    tokio::spawn(controller::service::serve(
        ctl,
        cfg.limits.bounds(),
        cfg.transport(),
        ctl_listener,
        stop.clone(),
    ));

    let mut routers = Vec::new();
    for r in &m.routers {
        let l = TcpListener::bind("127.0.0.1:0").await?;
        let addr = format!("http://{}", l.local_addr()?);
        let ports = r.ports.iter().map(|p| p.port).max().unwrap_or(0);
        let fw = Arc::new(router_fw::RouterFw::new(r.guid, ports));
        tokio::spawn(router_fw::run(
            fw,
            ibtls::Transport::Insecure,
            l,
            vec![ctl_addr.clone()],
            stop.clone(),
        ));
        routers.push((r.guid, addr));
    }
    let failed = Arc::new(std::sync::Mutex::new(None));
    let mut agents = Vec::new();
    for s in &m.subnets {
        let l = TcpListener::bind("127.0.0.1:0").await?;
        let local = l.local_addr()?;
        // Written out rather than built in memory: with --keep, the
        // operator gets configs that start the same agents by hand.
        let text = format!(
            "agent_id = \"{name}\"\nsubnet_prefix = \"{prefix:#018x}\"\ntopology = \"{name}.net\"\n\
             engine = \"{engine}\"\nout_dir = \"out/{name}\"\ncontrollers = [\"{ctl_addr}\"]\nlisten = \"{local}\"\n\
             # the demo runs every role in one process on loopback, in plaintext\ninsecure = true\n",
            name = s.name,
            prefix = s.prefix,
            engine = a.engine,
        );
        let path = dir.join(format!("{}.agent.toml", s.name));
        fabric::formats::write_file(&path, &text)?;
        let cfg = agent::config::AgentConfig::load(&path)?;
        let ag = agent::Agent::new(cfg);
        let stop = stop.clone();
        let name = s.name.clone();
        let failed = failed.clone();
        tokio::spawn(async move {
            if let Err(e) = agent::run(ag, Some(l), stop).await {
                let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
                f.get_or_insert(format!("agent {name}: {e}"));
            }
        });
        agents.push(format!("http://{local}"));
    }
    Ok(DemoRun {
        failed,
        ctl_addr,
        agents,
        routers,
    })
}

/// `demo --json`: the converged control plane and the sample paths.
#[derive(Serialize)]
struct DemoSummary {
    converged_seconds: f64,
    algorithm: String,
    subnets: Vec<SubnetSummary>,
    routers: Vec<RouterSummary>,
    paths: Vec<PathReport>,
    /// Every subnet's tables verified and deadlock free.
    ok: bool,
}

/// One subnet as the controller reports it; routing fields are null until
/// the agent reported a routing.
#[derive(Serialize)]
struct SubnetSummary {
    agent: String,
    prefix: String,
    switches: u32,
    hcas: u32,
    engine: Option<String>,
    vls: Option<u32>,
    deadlock_free: Option<bool>,
    verified: Option<bool>,
    mapping_version: u64,
}

#[derive(Serialize)]
struct RouterSummary {
    guid: String,
    desc: String,
    egress_version: u64,
}

/// One inter-subnet path resolved through the live services: the source
/// agent's answer, the first router's decision and every router hop.
#[derive(Serialize)]
struct PathReport {
    source: String,
    destination: String,
    slid: u32,
    router_port_lid: u32,
    sl: u32,
    router: String,
    ingress_port: u8,
    /// The last router's decision, the one that delivers.
    egress_port: u32,
    next_lid: u32,
    destination_lid: u16,
    delivered: bool,
    router_hops: Vec<RouterHop>,
    table_version: u64,
}

#[derive(Serialize)]
struct RouterHop {
    router: String,
    ingress_port: u8,
    egress_port: u32,
    next_lid: u32,
}

impl DemoSummary {
    fn new(state: &v1::ControllerState, converged_seconds: f64, paths: Vec<PathReport>) -> Self {
        Self {
            converged_seconds,
            algorithm: state.algorithm.clone(),
            subnets: state.subnets.iter().map(SubnetSummary::new).collect(),
            routers: state
                .routers
                .iter()
                .map(|r| RouterSummary {
                    guid: format!("{:#018x}", r.router_guid),
                    desc: r.desc.clone(),
                    egress_version: r.egress_version,
                })
                .collect(),
            paths,
            ok: state.subnets.iter().all(|s| {
                s.routing
                    .as_ref()
                    .is_some_and(|r| r.verified && r.deadlock_free)
            }),
        }
    }
}

impl SubnetSummary {
    fn new(s: &v1::SubnetState) -> Self {
        let r = s.routing.as_ref();
        Self {
            agent: s.agent_id.clone(),
            prefix: format!("{:#018x}", s.subnet_prefix),
            switches: s.topology.map_or(0, |t| t.switches),
            hcas: s.topology.map_or(0, |t| t.cas),
            engine: r.map(|r| r.engine.clone()),
            vls: r.map(|r| r.vls),
            deadlock_free: r.map(|r| r.deadlock_free),
            verified: r.map(|r| r.verified),
            mapping_version: s.mapping_version,
        }
    }
}

/// Waits until every router holds a table and every agent a mapping, then
/// resolves sample inter-subnet paths hop by hop through the live services.
async fn wait_and_report(
    a: &DemoArgs,
    m: &fabric::multi::MultiFabric,
    run: &DemoRun,
    t0: Instant,
) -> Result<i32> {
    let state = wait_converged(m, run).await?;
    let converged = t0.elapsed().as_secs_f64();
    let paths = sample_paths(m, run).await?;
    let summary = DemoSummary::new(&state, converged, paths);
    if a.json {
        super::print_json("demo", &summary)?;
    } else {
        print_summary(a, m, run, &summary);
    }
    Ok(if summary.ok { 0 } else { 1 })
}

async fn controller_state(addr: &str) -> Option<v1::ControllerState> {
    let mut c = v1::controller_client::ControllerClient::connect(addr.to_string())
        .await
        .ok()?;
    c.state(v1::StateRequest {})
        .await
        .ok()
        .map(|r| r.into_inner())
}

async fn router_state(addr: &str) -> Option<v1::RouterState> {
    let mut c = v1::router_fw_client::RouterFwClient::connect(addr.to_string())
        .await
        .ok()?;
    c.state(v1::RouterStateRequest {})
        .await
        .ok()
        .map(|r| r.into_inner())
}

/// Every subnet mapped and every router holding the table the controller
/// publishes for it now.
async fn converged(st: &v1::ControllerState, subnets: usize, run: &DemoRun) -> bool {
    if !proto::convert::subnets_mapped(st, subnets) {
        return false;
    }
    for (_, addr) in &run.routers {
        let current = router_state(addr)
            .await
            .is_some_and(|rs| proto::convert::router_current(st, &rs));
        if !current {
            return false;
        }
    }
    true
}

/// Polls the controller and the routers until the fabric converged; a
/// failed service or 30 s end the wait with an error.
async fn wait_converged(
    m: &fabric::multi::MultiFabric,
    run: &DemoRun,
) -> Result<v1::ControllerState> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(st) = controller_state(&run.ctl_addr).await {
            if converged(&st, m.subnets.len(), run).await {
                return Ok(st);
            }
        }
        if let Some(e) = run.failed.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            bail!("{e}");
        }
        if Instant::now() > deadline {
            bail!(
                "the demo fabric did not converge within 30 s (run with -v to see the services' logs)"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The first host of subnet 0 to the last host of every other subnet,
/// resolved through the agents' and routers' RPCs.
async fn sample_paths(m: &fabric::multi::MultiFabric, run: &DemoRun) -> Result<Vec<PathReport>> {
    let view = GlobalView::from_multi(m);
    let src_sub = &view.subnets[0];
    let src = src_sub
        .end_ports
        .first()
        .ok_or_else(|| anyhow!("subnet 0 has no hosts"))?;
    let agent_addr = run
        .agents
        .first()
        .ok_or_else(|| anyhow!("no agent for subnet 0"))?;
    let mut paths = Vec::new();
    for dst_sub in view.subnets.iter().skip(1) {
        let dst = dst_sub
            .end_ports
            .last()
            .ok_or_else(|| anyhow!("a subnet has no hosts"))?;
        paths.push(resolve_path(&view, run, agent_addr, (src_sub, src), (dst_sub, dst)).await?);
    }
    Ok(paths)
}

/// Asks the source's agent for the path record, then follows the packet
/// through the routers until it is delivered.
async fn resolve_path(
    view: &GlobalView,
    run: &DemoRun,
    agent_addr: &str,
    (src_sub, src): (&SubnetView, &EndPortView),
    (dst_sub, dst): (&SubnetView, &EndPortView),
) -> Result<PathReport> {
    let sg = Gid {
        prefix: src_sub.prefix,
        guid: src.guid,
    };
    let dg = Gid {
        prefix: dst_sub.prefix,
        guid: dst.guid,
    };
    let mut ac = v1::agent_client::AgentClient::connect(agent_addr.to_string()).await?;
    let pq = ac
        .path_query(v1::PathQueryRequest {
            source: Some(proto::convert::gid_to_wire(sg)),
            destination: Some(proto::convert::gid_to_wire(dg)),
        })
        .await
        .context("path query")?
        .into_inner();
    let rp = src_sub
        .router_ports
        .iter()
        .find(|p| p.port_guid == pq.router_port_guid)
        .ok_or_else(|| {
            anyhow!(
                "agent chose router port {:#018x}, unknown",
                pq.router_port_guid
            )
        })?;
    let (hops, last) =
        follow_routers(view, run, (rp.router_guid, rp.port, pq.slid), dg, dst).await?;
    Ok(PathReport {
        source: sg.to_string(),
        destination: dg.to_string(),
        slid: pq.slid,
        router_port_lid: pq.dlid,
        sl: pq.sl,
        router: format!("{:#018x}", rp.router_guid),
        ingress_port: rp.port,
        egress_port: last.egress_port,
        next_lid: last.next_lid,
        destination_lid: dst.lid,
        delivered: true,
        router_hops: hops,
        table_version: last.table_version,
    })
}

async fn forward(addr: &str, ingress: u8, slid: u32, dest: Gid) -> Result<v1::ForwardDecision> {
    let mut rc = v1::router_fw_client::RouterFwClient::connect(addr.to_string()).await?;
    Ok(rc
        .forward(v1::ForwardQuery {
            ingress_port: ingress as u32,
            slid,
            destination: Some(proto::convert::gid_to_wire(dest)),
        })
        .await
        .context("router forward query")?
        .into_inner())
}

/// Follows a packet router by router from (router, ingress port, source
/// LID): a transit subnet adds a hop. Each router rewrites the source LID
/// to its egress port's LID and the destination LID to the next hop's, as
/// in the paper's relay. Returns the hops and the delivering decision;
/// every other way out is an error.
async fn follow_routers(
    view: &GlobalView,
    run: &DemoRun,
    (mut router, mut ingress, mut slid): (u64, u8, u32),
    dg: Gid,
    dst: &EndPortView,
) -> Result<(Vec<RouterHop>, v1::ForwardDecision)> {
    let routers = view.routers();
    let mut hops = Vec::new();
    loop {
        let raddr = run
            .routers
            .iter()
            .find(|(g, _)| *g == router)
            .map(|(_, a)| a.as_str())
            .ok_or_else(|| anyhow!("no router {router:#018x}"))?;
        let fd = forward(raddr, ingress, slid, dg).await?;
        hops.push(RouterHop {
            router: format!("{router:#018x}"),
            ingress_port: ingress,
            egress_port: fd.egress_port,
            next_lid: fd.next_lid,
        });
        // The subnet the egress port is in: LIDs mean something only
        // there, so delivery is the destination's LID in its own subnet.
        let &(sn, out_port) = routers
            .get(&router)
            .and_then(|ps| ps.iter().find(|(_, p)| p.port as u32 == fd.egress_port))
            .ok_or_else(|| anyhow!("router {router:#018x} has no port {}", fd.egress_port))?;
        let out_subnet = &view.subnets[sn];
        if out_subnet.prefix == dg.prefix && fd.next_lid == dst.lid as u32 {
            return Ok((hops, fd));
        }
        if hops.len() >= view.subnets.len() {
            bail!(
                "{dg} not delivered after {} router hops (a loop through the routers?)",
                hops.len()
            );
        }
        let next = out_subnet
            .router_ports
            .iter()
            .find(|p| p.lid as u32 == fd.next_lid)
            .ok_or_else(|| {
                anyhow!(
                    "router {router:#018x} sends {dg} to LID {} in '{}', which is neither the destination nor a router port",
                    fd.next_lid,
                    out_subnet.name
                )
            })?;
        (router, ingress, slid) = (next.router_guid, next.port, out_port.lid as u32);
    }
}

fn print_summary(a: &DemoArgs, m: &fabric::multi::MultiFabric, run: &DemoRun, s: &DemoSummary) {
    println!(
        "ibfabric demo: {} fat-tree subnets joined by {} routers, controller + {} agents + {} routers over loopback gRPC",
        m.subnets.len(),
        m.routers.len(),
        run.agents.len(),
        run.routers.len()
    );
    println!(
        "converged in {:.2} s; inter-subnet algorithm: {}",
        s.converged_seconds, s.algorithm
    );
    println!();
    println!(
        "{:<10} {:<20} {:>8} {:>5} {:<8} {:>4} {:<14} {:>8}",
        "subnet", "prefix", "switches", "CAs", "engine", "VLs", "deadlock free", "mapping"
    );
    for sub in &s.subnets {
        println!(
            "{:<10} {:<20} {:>8} {:>5} {:<8} {:>4} {:<14} {:>8}",
            sub.agent,
            sub.prefix,
            sub.switches,
            sub.hcas,
            sub.engine.as_deref().unwrap_or(""),
            sub.vls.unwrap_or(0),
            if sub.verified == Some(true) && sub.deadlock_free == Some(true) {
                "yes (verified)"
            } else {
                "NO"
            },
            format!("v{}", proto::version::show(sub.mapping_version))
        );
    }
    println!();
    for r in &s.routers {
        println!(
            "router {} {}: egress table v{}",
            r.desc,
            r.guid,
            proto::version::show(r.egress_version)
        );
    }
    println!();
    println!("sample inter-subnet paths (agent path query, then each router's decision):");
    for p in &s.paths {
        let hops: Vec<String> = p
            .router_hops
            .iter()
            .map(|h| {
                format!(
                    "router {} in port {} -> out port {} -> LID {}",
                    h.router, h.ingress_port, h.egress_port, h.next_lid
                )
            })
            .collect();
        println!(
            "  {} -> {}: SLID {} -> router port LID {} (SL {}), {} {}",
            p.source,
            p.destination,
            p.slid,
            p.router_port_lid,
            p.sl,
            hops.join(", "),
            if p.delivered {
                "(the destination)"
            } else {
                "(WRONG)"
            }
        );
    }
    if let Some(k) = &a.keep {
        println!();
        println!(
            "topology files, agent configs and OpenSM dumps kept in {}",
            k.display()
        );
    }
}
