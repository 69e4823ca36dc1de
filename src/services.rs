//! The service subcommands: `agent`, `controller`, `router`, and the
//! embedded `demo` that runs them all in one process over loopback gRPC.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use controller::config::ControllerConfig;
use fabric::intersubnet::{self, Gid, GlobalView};
use proto::v1;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;

#[derive(Args)]
pub struct ConfigArgs {
    /// TOML configuration file (see the crate docs or README for the keys).
    #[arg(long, short)]
    pub config: PathBuf,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Turns Ctrl-C / SIGTERM into the shutdown signal the services watch.
fn shutdown_on_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            if let Ok(mut term) = signal(SignalKind::terminate()) {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            } else {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
        let _ = tx.send(true);
    });
    rx
}

pub fn cmd_agent(a: ConfigArgs) -> Result<i32> {
    let cfg = agent::config::AgentConfig::load(&a.config)?;
    runtime()?.block_on(async move {
        let listener = match cfg.listen {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding the path query service to {addr}"))?,
            ),
            None => None,
        };
        let ag = agent::Agent::new(cfg);
        agent::run(ag, listener, shutdown_on_signal()).await?;
        Ok(0)
    })
}

pub fn cmd_router(a: ConfigArgs) -> Result<i32> {
    let cfg = router_fw::config::RouterConfig::load(&a.config)?;
    let guid = cfg
        .guid()
        .map_err(|e| anyhow!("{}: {e}", a.config.display()))?;
    runtime()?.block_on(async move {
        let listener = TcpListener::bind(cfg.listen)
            .await
            .with_context(|| format!("binding the router service to {}", cfg.listen))?;
        let fw = Arc::new(router_fw::RouterFw::new(guid, cfg.ports));
        tracing::info!(router = %format!("{guid:#018x}"), listen = %cfg.listen, "router firmware service up");
        router_fw::run(fw, listener, cfg.controllers, shutdown_on_signal()).await?;
        Ok(0)
    })
}

pub fn cmd_controller(a: ConfigArgs) -> Result<i32> {
    let cfg = ControllerConfig::load(&a.config)?;
    runtime()?.block_on(async move {
        let listener = TcpListener::bind(cfg.listen)
            .await
            .with_context(|| format!("binding the controller service to {}", cfg.listen))?;
        let shutdown = shutdown_on_signal();
        let ctl = controller::start(&cfg, shutdown.clone()).await?;
        tracing::info!(id = %cfg.id, listen = %cfg.listen, store = %cfg.store.kind, "controller up");
        controller::service::serve(ctl, listener, shutdown).await?;
        Ok(0)
    })
}

/// Builds a controller and waits (up to the election TTL plus a margin)
/// until it leads or names another leader, so callers see a settled role.
async fn start_controller(
    cfg: &ControllerConfig,
    shutdown: watch::Receiver<bool>,
) -> Result<Arc<controller::Controller>> {
    let ctl = controller::start(cfg, shutdown).await?;
    let end = Instant::now() + Duration::from_secs(cfg.store.election_ttl_seconds + 3);
    while !ctl.is_leader() && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::info!(id = %cfg.id, leader = ctl.is_leader(), "controller started");
    Ok(ctl)
}

#[derive(Args)]
pub struct DemoArgs {
    /// The fabric: every router has one port on every spine of every
    /// subnet it joins.
    #[command(flatten)]
    shape: crate::cmd::gen::TreeShape,
    /// Routing engine of every subnet's agent.
    #[arg(long, default_value = "updn")]
    engine: String,
    /// Inter-subnet algorithm of the controller.
    #[arg(long, default_value = "prefix")]
    algorithm: String,
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
    agents: Vec<(String, u64, String)>,
    routers: Vec<(u64, String)>,
}

pub fn cmd_demo(a: DemoArgs) -> Result<i32> {
    let t0 = Instant::now();
    let t = &a.shape;
    let join = t.join()?;
    if join != fabric::multi::Join::All && a.algorithm == "prefix" {
        bail!(
            "--algorithm prefix (OpenSM's prefix routes) does not cross transit subnets; \
             use issr or isfr with --join {}",
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
    fabric::routing::by_name(&a.engine)?;
    intersubnet::by_name(&a.algorithm)?;
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
    let ctl_listener = TcpListener::bind("127.0.0.1:0").await?;
    let ctl_addr = format!("http://{}", ctl_listener.local_addr()?);
    let cfg = ControllerConfig::parse(
        &format!(
            "id = \"demo-controller\"\nlisten = \"{}\"\nalgorithm = \"{}\"\n",
            ctl_listener.local_addr()?,
            a.algorithm
        ),
        "demo controller config",
    )?;
    let ctl = start_controller(&cfg, stop.clone()).await?;
    tokio::spawn(controller::service::serve(ctl, ctl_listener, stop.clone()));

    let mut routers = Vec::new();
    for r in &m.routers {
        let l = TcpListener::bind("127.0.0.1:0").await?;
        let addr = format!("http://{}", l.local_addr()?);
        let ports = r.ports.iter().map(|p| p.port).max().unwrap_or(0);
        let fw = Arc::new(router_fw::RouterFw::new(r.guid, ports));
        tokio::spawn(router_fw::run(fw, l, vec![ctl_addr.clone()], stop.clone()));
        routers.push((r.guid, addr));
    }
    let failed = Arc::new(std::sync::Mutex::new(None));
    let mut agents = Vec::new();
    for s in &m.subnets {
        let l = TcpListener::bind("127.0.0.1:0").await?;
        let local = l.local_addr()?;
        let text = format!(
            "agent_id = \"{name}\"\nsubnet_prefix = \"{prefix:#018x}\"\ntopology = \"{name}.net\"\n\
             engine = \"{engine}\"\nout_dir = \"out/{name}\"\ncontrollers = [\"{ctl_addr}\"]\nlisten = \"{local}\"\n",
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
        agents.push((s.name.clone(), s.prefix, format!("http://{local}")));
    }
    Ok(DemoRun {
        failed,
        ctl_addr,
        agents,
        routers,
    })
}

/// Waits until every router holds a table and every agent a mapping, then
/// resolves sample inter-subnet paths hop by hop through the live services.
async fn wait_and_report(
    a: &DemoArgs,
    m: &fabric::multi::MultiFabric,
    run: &DemoRun,
    t0: Instant,
) -> Result<i32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let state = loop {
        let st = async {
            let mut c = v1::controller_client::ControllerClient::connect(run.ctl_addr.clone())
                .await
                .ok()?;
            c.state(v1::StateRequest {})
                .await
                .ok()
                .map(|r| r.into_inner())
        }
        .await;
        let mut ready = false;
        if let Some(st) = &st {
            let all_reported = proto::convert::subnets_mapped(st, m.subnets.len());
            let mut routers_ready = true;
            for (_, addr) in &run.routers {
                let v = async {
                    let mut c = v1::router_fw_client::RouterFwClient::connect(addr.clone())
                        .await
                        .ok()?;
                    c.state(v1::RouterStateRequest {})
                        .await
                        .ok()
                        .map(|r| r.into_inner())
                }
                .await;
                routers_ready &= v.is_some_and(|rs| proto::convert::router_current(st, &rs));
            }
            ready = all_reported && routers_ready;
        }
        if ready {
            if let Some(st) = st {
                break st;
            }
        }
        if let Some(e) = run.failed.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            bail!("{e}");
        }
        if Instant::now() > deadline {
            bail!("the demo fabric did not converge within 30 s (run with -v to see the services' logs)");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let converged = t0.elapsed().as_secs_f64();
    let view = GlobalView::from_multi(m);
    // Sample paths: the first host of subnet 0 to the last host of every
    // other subnet, resolved through the agents' and routers' RPCs.
    let mut paths = Vec::new();
    let src_sub = &view.subnets[0];
    let src = src_sub
        .end_ports
        .first()
        .ok_or_else(|| anyhow!("subnet 0 has no hosts"))?;
    for dst_sub in view.subnets.iter().skip(1) {
        let dst = dst_sub
            .end_ports
            .last()
            .ok_or_else(|| anyhow!("a subnet has no hosts"))?;
        let sg = Gid {
            prefix: src_sub.prefix,
            guid: src.guid,
        };
        let dg = Gid {
            prefix: dst_sub.prefix,
            guid: dst.guid,
        };
        let agent_addr = &run.agents[0].2;
        let mut ac = v1::agent_client::AgentClient::connect(agent_addr.clone()).await?;
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
        // Follow the packet router by router (a transit subnet adds a hop):
        // each router rewrites the source LID to its egress port's LID and
        // the destination LID to the next hop's, as in the paper's relay.
        let routers = view.routers();
        let (mut router, mut ingress, mut slid) = (rp.router_guid, rp.port, pq.slid);
        let mut hops = Vec::new();
        // Ends only on delivery: every other way out is an error.
        let fd = loop {
            let raddr = run
                .routers
                .iter()
                .find(|(g, _)| *g == router)
                .map(|(_, a)| a.clone())
                .ok_or_else(|| anyhow!("no router {router:#018x}"))?;
            let mut rc = v1::router_fw_client::RouterFwClient::connect(raddr).await?;
            let fd = rc
                .forward(v1::ForwardQuery {
                    ingress_port: ingress as u32,
                    slid,
                    destination: Some(proto::convert::gid_to_wire(dg)),
                })
                .await
                .context("router forward query")?
                .into_inner();
            hops.push(serde_json::json!({
                "router": format!("{router:#018x}"), "ingress_port": ingress,
                "egress_port": fd.egress_port, "next_lid": fd.next_lid,
            }));
            // The subnet the egress port is in: LIDs mean something only
            // there, so delivery is the destination's LID in its own subnet.
            let out = routers
                .get(&router)
                .and_then(|ps| ps.iter().find(|(_, p)| p.port as u32 == fd.egress_port))
                .ok_or_else(|| anyhow!("router {router:#018x} has no port {}", fd.egress_port))?;
            let (sn, out_port) = (out.0, out.1);
            if view.subnets[sn].prefix == dst_sub.prefix && fd.next_lid == dst.lid as u32 {
                break fd;
            }
            if hops.len() >= view.subnets.len() {
                bail!(
                    "{dg} not delivered after {} router hops (a loop through the routers?)",
                    hops.len()
                );
            }
            let next = view.subnets[sn]
                .router_ports
                .iter()
                .find(|p| p.lid as u32 == fd.next_lid)
                .ok_or_else(|| {
                    anyhow!(
                        "router {router:#018x} sends {dg} to LID {} in '{}', which is neither the destination nor a router port",
                        fd.next_lid,
                        view.subnets[sn].name
                    )
                })?;
            (router, ingress, slid) = (next.router_guid, next.port, out_port.lid as u32);
        };
        paths.push(serde_json::json!({
            "source": sg.to_string(), "destination": dg.to_string(),
            "slid": pq.slid, "router_port_lid": pq.dlid, "sl": pq.sl,
            "router": format!("{:#018x}", rp.router_guid), "ingress_port": rp.port,
            "egress_port": fd.egress_port, "next_lid": fd.next_lid,
            "destination_lid": dst.lid, "delivered": true,
            "router_hops": hops,
            "table_version": fd.table_version,
        }));
    }
    let all_ok = state.subnets.iter().all(|s| {
        s.routing
            .as_ref()
            .is_some_and(|r| r.verified && r.deadlock_free)
    });
    if a.json {
        let v = serde_json::json!({
            "converged_seconds": converged,
            "algorithm": state.algorithm,
            "subnets": state.subnets.iter().map(|s| serde_json::json!({
                "agent": s.agent_id, "prefix": format!("{:#018x}", s.subnet_prefix),
                "switches": s.topology.map_or(0, |t| t.switches), "cas": s.topology.map_or(0, |t| t.cas),
                "engine": s.routing.as_ref().map(|r| r.engine.clone()),
                "vls": s.routing.as_ref().map(|r| r.vls), "deadlock_free": s.routing.as_ref().map(|r| r.deadlock_free),
                "verified": s.routing.as_ref().map(|r| r.verified), "mapping_version": s.mapping_version,
            })).collect::<Vec<_>>(),
            "routers": state.routers.iter().map(|r| serde_json::json!({
                "guid": format!("{:#018x}", r.router_guid), "desc": r.desc, "egress_version": r.egress_version,
            })).collect::<Vec<_>>(),
            "paths": paths,
            "ok": all_ok,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "ibfabric demo: {} fat-tree subnets joined by {} routers, controller + {} agents + {} routers over loopback gRPC",
            m.subnets.len(),
            m.routers.len(),
            run.agents.len(),
            run.routers.len()
        );
        println!(
            "converged in {converged:.2} s; inter-subnet algorithm: {}",
            state.algorithm
        );
        println!();
        println!(
            "{:<10} {:<20} {:>8} {:>5} {:<8} {:>4} {:<14} {:>8}",
            "subnet", "prefix", "switches", "CAs", "engine", "VLs", "deadlock free", "mapping"
        );
        for s in &state.subnets {
            let r = s.routing.clone().unwrap_or_default();
            println!(
                "{:<10} {:<20} {:>8} {:>5} {:<8} {:>4} {:<14} {:>8}",
                s.agent_id,
                format!("{:#018x}", s.subnet_prefix),
                s.topology.map_or(0, |t| t.switches),
                s.topology.map_or(0, |t| t.cas),
                r.engine,
                r.vls,
                if r.verified && r.deadlock_free {
                    "yes (verified)"
                } else {
                    "NO"
                },
                format!("v{}", s.mapping_version)
            );
        }
        println!();
        for r in &state.routers {
            println!(
                "router {} {:#018x}: egress table v{}",
                r.desc, r.router_guid, r.egress_version
            );
        }
        println!();
        println!("sample inter-subnet paths (agent path query, then each router's decision):");
        for p in &paths {
            let hops: Vec<String> = p["router_hops"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| {
                    format!(
                        "router {} in port {} -> out port {} -> LID {}",
                        h["router"].as_str().unwrap_or(""),
                        h["ingress_port"],
                        h["egress_port"],
                        h["next_lid"]
                    )
                })
                .collect();
            println!(
                "  {} -> {}: SLID {} -> router port LID {} (SL {}), {} {}",
                p["source"].as_str().unwrap_or(""),
                p["destination"].as_str().unwrap_or(""),
                p["slid"],
                p["router_port_lid"],
                p["sl"],
                hops.join(", "),
                if p["delivered"].as_bool() == Some(true) {
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
    Ok(if all_ok { 0 } else { 1 })
}
