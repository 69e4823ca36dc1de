//! `ibfabric status`: asks the controllers (and routers and workers, when
//! named) what they hold, and says what lags.

use anyhow::{Result, bail};
use clap::Args;
use proto::v1;
use serde::Serialize;

#[derive(Args)]
#[command(
    after_help = "Exit status: 0 when a leader answers and nothing lags; 6 when no \
    controller leads or something lags (a subnet not live, an agent or router holding an older \
    version than published, the store failing); 1 when no controller answers."
)]
pub struct StatusArgs {
    /// Controller addresses (https://host:port; http:// for plaintext services), repeated or comma-separated.
    #[arg(
        long = "controller",
        short,
        value_delimiter = ',',
        required_unless_present_any = ["workers", "workers_from"]
    )]
    controllers: Vec<String>,
    /// Router firmware services to ask as well (what they hold in force).
    #[arg(long = "router", value_delimiter = ',')]
    routers: Vec<String>,
    /// Workers to ask as well (`ibfabric worker`): the jobs they hold, the
    /// parts they finished, and the parts they are computing now (job,
    /// kind, range, for how long). Without --controller, only these.
    #[arg(long = "worker", value_delimiter = ',')]
    workers: Vec<String>,
    /// Ask the workers registered in the store this TOML file's `[store]`
    /// names (a controller's config will do), each under its lease; one
    /// that answers with another name than it registered under is
    /// flagged.
    #[arg(long, value_name = "FILE")]
    workers_from: Option<std::path::PathBuf>,
    #[command(flatten)]
    tls: super::runtime::ClientTls,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct ControllerJson {
    address: String,
    answered: bool,
    error: Option<String>,
    id: Option<String>,
    leader: bool,
    term: u64,
}

#[derive(Serialize)]
struct SubnetJson {
    agent_id: String,
    prefix: String,
    live: bool,
    generation: u64,
    engine: Option<String>,
    vls: Option<u32>,
    deadlock_free: Option<bool>,
    mapping_version: u64,
    held_mapping_version: u64,
    /// Why the controller leaves the subnet out of the routes; null when
    /// it takes part.
    left_out: Option<String>,
}

#[derive(Serialize)]
struct RouterJson {
    router_guid: String,
    desc: String,
    egress_version: u64,
    held_version: u64,
}

#[derive(Serialize)]
struct RouterAskedJson {
    address: String,
    error: Option<String>,
    version: u64,
    rules: u32,
    rejected: u64,
}

#[derive(Serialize)]
struct LagJson {
    what: String,
    why: String,
}

#[derive(Serialize)]
struct WorkerAskedJson {
    address: String,
    /// The name it holds its lease under, when found in the store.
    #[serde(skip_serializing_if = "Option::is_none")]
    registered_as: Option<String>,
    error: Option<String>,
    name: Option<String>,
    jobs: Vec<String>,
    parts_done: u64,
    working: Vec<WorkingJson>,
}

#[derive(Serialize)]
struct WorkingJson {
    job: String,
    kind: String,
    start: u64,
    end: u64,
    seconds: f64,
}

#[derive(Serialize)]
struct StatusJson {
    controllers: Vec<ControllerJson>,
    leader: Option<String>,
    term: u64,
    algorithm: Option<String>,
    subnets: Vec<SubnetJson>,
    routers: Vec<RouterJson>,
    routers_asked: Vec<RouterAskedJson>,
    workers_asked: Vec<WorkerAskedJson>,
    /// With `--workers-from`: the parts recorded in the store, each under
    /// its holder's lease.
    parts_held: Vec<store::registry::HeldPart>,
    /// The leader's store as its last operations found it.
    store: Option<StoreJson>,
    lagging: Vec<LagJson>,
}

#[derive(Serialize)]
struct StoreJson {
    ok: bool,
    failures: u64,
    last_error: String,
    last_error_unix_ms: u64,
    /// Computed routes not yet written (retried).
    pending: bool,
}

pub fn run(a: StatusArgs) -> Result<i32> {
    let transport = a.tls.transport()?;
    super::runtime::runtime()?.block_on(status(a, transport))
}

async fn status(a: StatusArgs, transport: ibtls::Transport) -> Result<i32> {
    let (controllers, states) = ask_controllers(&a.controllers, &transport).await;
    if states.is_empty() && !a.controllers.is_empty() {
        let why: Vec<String> = controllers
            .iter()
            .filter_map(|c| c.error.as_ref().map(|e| format!("{}: {e}", c.address)))
            .collect();
        bail!("no controller answered: {}", why.join("; "));
    }
    // The leader of the highest term speaks for the cluster; a deposed one
    // that has not noticed yet holds a lower term.
    let leader = states
        .iter()
        .filter(|s| s.leader)
        .max_by_key(|s| s.term)
        .cloned();
    let mut lagging: Vec<LagJson> = Vec::new();
    for c in controllers.iter().filter(|c| !c.answered) {
        lagging.push(LagJson {
            what: format!("controller {}", c.address),
            why: c.error.clone().unwrap_or_default(),
        });
    }
    if leader.is_none() && !a.controllers.is_empty() {
        lagging.push(LagJson {
            what: "controllers".into(),
            why: "none leads (an election may be under way)".into(),
        });
    }
    let routers_asked = ask_routers(&a.routers, &transport, &mut lagging).await;
    let (workers_asked, parts_held) = ask_workers(&a, &transport, &mut lagging).await?;
    let l = leader.clone().unwrap_or_default();
    if !a.controllers.is_empty() {
        lagging.extend(proto::ops::lagging(&l).into_iter().map(|x| LagJson {
            what: x.what,
            why: x.why,
        }));
    }
    let out = StatusJson {
        routers_asked,
        workers_asked,
        parts_held,
        controllers,
        lagging,
        ..of_leader(leader.as_ref())
    };
    let code = if out.lagging.is_empty() {
        super::exit::OK
    } else {
        super::exit::DEGRADED
    };
    if a.json {
        super::print_json("status", &out)?;
    } else {
        print(&out);
    }
    Ok(code)
}

/// Each controller's state, or why it did not answer.
async fn ask_controllers(
    addrs: &[String],
    transport: &ibtls::Transport,
) -> (Vec<ControllerJson>, Vec<proto::v1::ControllerState>) {
    let mut controllers = Vec::new();
    let mut states = Vec::new();
    for addr in addrs {
        match controller_state(addr, transport).await {
            Ok(s) => {
                controllers.push(ControllerJson {
                    address: addr.clone(),
                    answered: true,
                    error: None,
                    id: Some(s.controller_id.clone()),
                    leader: s.leader,
                    term: s.term,
                });
                states.push(s);
            }
            Err(e) => controllers.push(ControllerJson {
                address: addr.clone(),
                answered: false,
                error: Some(super::error_text(&e)),
                id: None,
                leader: false,
                term: 0,
            }),
        }
    }
    (controllers, states)
}

/// Each router's tables in force; a router that does not answer lags.
async fn ask_routers(
    addrs: &[String],
    transport: &ibtls::Transport,
    lagging: &mut Vec<LagJson>,
) -> Vec<RouterAskedJson> {
    let mut routers_asked = Vec::new();
    for addr in addrs {
        routers_asked.push(match router_state(addr, transport).await {
            Ok(r) => RouterAskedJson {
                address: addr.clone(),
                error: None,
                version: r.version,
                rules: r.rules,
                rejected: r.rejected,
            },
            Err(e) => {
                lagging.push(LagJson {
                    what: format!("router {addr}"),
                    why: super::error_text(&e),
                });
                RouterAskedJson {
                    address: addr.clone(),
                    error: Some(super::error_text(&e)),
                    version: 0,
                    rules: 0,
                    rejected: 0,
                }
            }
        });
    }
    routers_asked
}

/// The workers named or registered in the store, each asked what it
/// holds, and the parts the store says they hold.
async fn ask_workers(
    a: &StatusArgs,
    transport: &ibtls::Transport,
    lagging: &mut Vec<LagJson>,
) -> Result<(Vec<WorkerAskedJson>, Vec<store::registry::HeldPart>)> {
    let mut workers_asked = Vec::new();
    let mut targets: Vec<(String, Option<String>)> =
        a.workers.iter().map(|w| (w.clone(), None)).collect();
    let mut parts_held = Vec::new();
    if let Some(p) = &a.workers_from {
        parts_held = super::runtime::held_parts(p).await?;
        let leases = super::runtime::registered_workers(p).await?;
        if leases.workers.is_empty() {
            lagging.push(LagJson {
                what: format!("workers in {}", p.display()),
                why: "no worker is registered".into(),
            });
        }
        targets.extend(leases.workers.into_iter().map(|w| (w.url, Some(w.name))));
    }
    for (addr, registered_as) in targets {
        workers_asked.push(match worker_state(&addr, transport).await {
            Ok(w) => {
                if let Some(r) = registered_as.as_ref().filter(|r| **r != w.name) {
                    lagging.push(LagJson {
                        what: format!("worker {addr}"),
                        why: format!("registered as '{r}' but answers as '{}'", w.name),
                    });
                }
                WorkerAskedJson {
                    address: addr.clone(),
                    registered_as,
                    error: None,
                    name: Some(w.name),
                    jobs: w.jobs,
                    parts_done: w.parts_done,
                    working: w
                        .working
                        .into_iter()
                        .map(|p| WorkingJson {
                            job: p.job,
                            kind: p.kind,
                            start: p.start,
                            end: p.end,
                            seconds: p.seconds,
                        })
                        .collect(),
                }
            }
            Err(e) => {
                lagging.push(LagJson {
                    what: format!("worker {addr}"),
                    why: super::error_text(&e),
                });
                WorkerAskedJson {
                    address: addr.clone(),
                    registered_as,
                    error: Some(super::error_text(&e)),
                    name: None,
                    jobs: Vec::new(),
                    parts_done: 0,
                    working: Vec::new(),
                }
            }
        });
    }
    Ok((workers_asked, parts_held))
}

/// What the leader says: its subnets and routers (empty without one).
fn of_leader(leader: Option<&proto::v1::ControllerState>) -> StatusJson {
    let l = leader.cloned().unwrap_or_default();
    StatusJson {
        leader: leader.map(|s| s.controller_id.clone()),
        term: l.term,
        algorithm: leader.map(|s| s.algorithm.clone()),
        subnets: l
            .subnets
            .iter()
            .map(|s| SubnetJson {
                agent_id: s.agent_id.clone(),
                prefix: format!("{:#018x}", s.subnet_prefix),
                live: s.live,
                generation: s.generation,
                engine: s.routing.as_ref().map(|r| r.engine.clone()),
                vls: s.routing.as_ref().map(|r| r.vls),
                deadlock_free: s.routing.as_ref().map(|r| r.deadlock_free && r.verified),
                mapping_version: s.mapping_version,
                held_mapping_version: s.held_mapping_version,
                left_out: (!s.left_out.is_empty()).then(|| s.left_out.clone()),
            })
            .collect(),
        routers: l
            .routers
            .iter()
            .map(|r| RouterJson {
                router_guid: format!("{:#018x}", r.router_guid),
                desc: r.desc.clone(),
                egress_version: r.egress_version,
                held_version: r.held_version,
            })
            .collect(),
        routers_asked: Vec::new(),
        workers_asked: Vec::new(),
        parts_held: Vec::new(),
        store: l.store.as_ref().map(|h| StoreJson {
            ok: h.ok,
            failures: h.failures,
            last_error: h.last_error.clone(),
            last_error_unix_ms: h.last_error_unix_ms,
            pending: h.pending,
        }),
        controllers: Vec::new(),
        lagging: Vec::new(),
    }
}

fn print(s: &StatusJson) {
    for c in &s.controllers {
        match (&c.id, &c.error) {
            (Some(id), _) => println!(
                "controller      {} at {}: {}, term {}",
                id,
                c.address,
                if c.leader { "leader" } else { "follower" },
                c.term
            ),
            (None, e) => println!(
                "controller      {}: no answer ({})",
                c.address,
                e.as_deref().unwrap_or("?")
            ),
        }
    }
    if let Some(a) = &s.algorithm {
        println!("algorithm       {a}");
    }
    for x in &s.subnets {
        println!(
            "subnet          {} {} {} gen {} {} {} VLs, {}, mapping {} (held {})",
            x.agent_id,
            x.prefix,
            if x.live { "live" } else { "NOT LIVE" },
            x.generation,
            x.engine.as_deref().unwrap_or("-"),
            x.vls.map_or("-".into(), |v| v.to_string()),
            match x.deadlock_free {
                Some(true) => "deadlock free",
                Some(false) => "NOT deadlock free",
                None => "not routed",
            },
            proto::version::show(x.mapping_version),
            proto::version::show(x.held_mapping_version)
        );
        if let Some(why) = &x.left_out {
            println!("  LEFT OUT      {why}");
        }
    }
    for r in &s.routers {
        println!(
            "router          {} {} egress {} (held {})",
            r.router_guid,
            r.desc,
            proto::version::show(r.egress_version),
            proto::version::show(r.held_version)
        );
    }
    for r in &s.routers_asked {
        match &r.error {
            None => println!(
                "router asked    {}: version {} in force, {} rules, {} refused",
                r.address,
                proto::version::show(r.version),
                r.rules,
                r.rejected
            ),
            Some(e) => println!("router asked    {}: no answer ({e})", r.address),
        }
    }
    for w in &s.workers_asked {
        match &w.error {
            None => {
                println!(
                    "worker asked    {} ({}{}): {} jobs held, {} parts done, {} in progress",
                    w.address,
                    w.name.as_deref().unwrap_or(""),
                    w.registered_as
                        .as_deref()
                        .map(|r| format!(", leased as {r}"))
                        .unwrap_or_default(),
                    w.jobs.len(),
                    w.parts_done,
                    w.working.len()
                );
                for p in &w.working {
                    println!(
                        "  working on    {} part {}..{} of job {} for {:.1} s",
                        p.kind, p.start, p.end, p.job, p.seconds
                    );
                }
            }
            Some(e) => println!("worker asked    {}: no answer ({e})", w.address),
        }
    }
    for p in &s.parts_held {
        println!("part held       {} by {} (leased)", p.part, p.worker);
    }
    if s.lagging.is_empty() {
        println!("lagging         nothing");
    }
    for l in &s.lagging {
        println!("lagging         {}: {}", l.what, l.why);
    }
}

async fn controller_state(addr: &str, t: &ibtls::Transport) -> Result<v1::ControllerState> {
    let mut c = proto::client::controller(addr, t).await?;
    Ok(c.state(proto::client::unary(v1::StateRequest {}))
        .await?
        .into_inner())
}

async fn worker_state(addr: &str, t: &ibtls::Transport) -> Result<v1::WorkerState> {
    let ch = proto::client::connect(addr, t, ibtls::Role::Worker).await?;
    let mut c = v1::worker_client::WorkerClient::new(ch);
    Ok(c.state(proto::client::unary(v1::WorkerStateRequest {}))
        .await?
        .into_inner())
}

async fn router_state(addr: &str, t: &ibtls::Transport) -> Result<v1::RouterState> {
    let ch = proto::client::connect(addr, t, ibtls::Role::Router).await?;
    let mut c = v1::router_fw_client::RouterFwClient::new(ch);
    Ok(c.state(proto::client::unary(v1::RouterStateRequest {}))
        .await?
        .into_inner())
}
