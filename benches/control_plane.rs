//! Control-plane latency: from an agent's report to every router holding
//! the tables that report leads to. Controller (in-memory store) and router
//! firmware services run in this process and talk real gRPC over loopback;
//! the reports are those the agent would send (each subnet routed and
//! verified first, outside the timed part).
//!
//! Setup: `IBF_CP_SUBNETS` fat-tree subnets (default 8) of `IBF_CP_LEAVES`
//! leaves x `IBF_CP_HOSTS` hosts (default 64 x 32 = 2,048 HCAs), `IBF_CP_SPINES`
//! spines (default 16),
//! `IBF_CP_ROUTERS` routers (default 4). Runs `IBF_CP_RUNS` times (default
//! 5) and prints the median of each figure. `IBF_CP_ALGO` picks the
//! inter-subnet algorithm (prefix, issr, isfr; default prefix);
//! `IBF_CP_STORE=etcd` keeps the controller's state in a real etcd started
//! for the run (Debian's etcd, default settings: 1.5 MiB requests), else
//! the in-memory store. The routers follow the pushes as in production
//! (FollowEgress: parts and heartbeats).
//!
//!   cargo bench --bench control_plane
//!   IBF_CP_STORE=etcd IBF_CP_LEAVES=128 IBF_CP_HOSTS=128 IBF_CP_ROUTERS=8 cargo bench --bench control_plane

mod common;

use common::{register, route, without_last_hosts};
use fabric::multi::fat_tree_subnets;
use proto::v1;
use settings::ConfigFile;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;

fn env(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

struct Figures {
    all_reports_to_tables: f64,
    change_to_published: f64,
    change_to_tables: f64,
    recompute: f64,
}

async fn one_run(
    reports: &[v1::SubnetReport],
    changed: &v1::SubnetReport,
    routers: &[(u64, u8)],
    algo: &str,
    etcd: Option<&str>,
    run: u32,
) -> Figures {
    let (_stop_tx, stop) = watch::channel(false);
    let store = match etcd {
        Some(ep) => format!(
            "[store]\nkind = \"etcd\"\nendpoints = [\"{ep}\"]\nprefix = \"/bench/{run}/\"\ninsecure = true\n"
        ),
        None => String::new(),
    };
    let cfg = controller::config::ControllerConfig::parse(
        &format!(
            "id = \"bench\"\nlisten = \"127.0.0.1:1\"\nlease_seconds = 300\nalgorithm = \"{algo}\"\ninsecure = true\n{store}"
        ),
        "bench",
    )
    .expect("config");
    let ctl = controller::start(&cfg, stop.clone())
        .await
        .expect("controller");
    while !ctl.is_leader() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = format!("http://{}", l.local_addr().expect("addr"));
    tokio::spawn(controller::service::serve(
        ctl.clone(),
        controller::service::Bounds::default(),
        ibtls::Transport::Insecure,
        l,
        stop.clone(),
    ));
    // The routers run on a runtime of their own, as the separate processes
    // they are in production: their decoding must not starve the
    // controller's tasks (its election lease among them).
    let fw_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("router runtime");
    let mut fws = Vec::new();
    for &(guid, ports) in routers {
        let fw = Arc::new(router_fw::RouterFw::new(guid, ports));
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.set_nonblocking(true).expect("nonblocking");
        let (fw2, addr2, stop2) = (fw.clone(), addr.clone(), stop.clone());
        fw_rt.spawn(async move {
            let l = TcpListener::from_std(l).expect("listener");
            router_fw::run(fw2, ibtls::Transport::Insecure, l, vec![addr2], stop2).await
        });
        fws.push(fw);
    }
    let mut client = v1::controller_client::ControllerClient::connect(addr.clone())
        .await
        .expect("connect");
    let mut sessions = Vec::new();
    for r in reports {
        sessions.push(register(&mut client, r.subnet_prefix).await);
    }
    let wait_all = |version: u64| {
        let fws = fws.clone();
        async move {
            loop {
                if fws.iter().all(|f| f.version() >= version) {
                    return;
                }
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        }
    };
    // All subnets report; time until every router applied the final tables.
    let t = Instant::now();
    let mut last_ack = 0;
    for (r, s) in reports.iter().zip(&sessions) {
        let mut r = r.clone();
        r.session = s.clone();
        r.generation = 1;
        last_ack = client
            .report(r)
            .await
            .expect("report")
            .into_inner()
            .generation;
    }
    assert_eq!(last_ack, 1);
    let v = ctl.published().version;
    wait_all(v).await;
    let all_reports_to_tables = t.elapsed().as_secs_f64();
    let health = ctl.state().store.unwrap_or_default();
    assert!(health.ok && !health.pending, "store: {health:?}");

    // One subnet changes (a host leaves): report to tables applied.
    let mut changed = changed.clone();
    changed.session = sessions[0].clone();
    changed.generation = 2;
    let t = Instant::now();
    client.report(changed).await.expect("report");
    // The report's answer comes after the write, the recomputation and
    // the publication: the controller's part.
    let change_to_published = t.elapsed().as_secs_f64();
    let v2 = ctl.published().version;
    assert!(v2 > v, "a change publishes a new version");
    wait_all(v2).await;
    let change_to_tables = t.elapsed().as_secs_f64();

    let t = Instant::now();
    ctl.recompute().await.expect("recompute");
    let recompute = t.elapsed().as_secs_f64();
    fw_rt.shutdown_background();
    Figures {
        all_reports_to_tables,
        change_to_published,
        change_to_tables,
        recompute,
    }
}

fn main() {
    // RUST_LOG=info shows where the time goes.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let subnets = env("IBF_CP_SUBNETS", 8);
    let leaves = env("IBF_CP_LEAVES", 64);
    let hosts = env("IBF_CP_HOSTS", 32);
    let routers = env("IBF_CP_ROUTERS", 4);
    let runs = env("IBF_CP_RUNS", 5).max(1);
    let algo = std::env::var("IBF_CP_ALGO").unwrap_or_else(|_| "prefix".into());
    let etcd = match std::env::var("IBF_CP_STORE").as_deref() {
        Ok("etcd") => Some(store::testing::EtcdServer::start()),
        Ok("memory") | Err(_) => None,
        Ok(other) => panic!("IBF_CP_STORE={other}: memory or etcd"),
    };
    let spines = env("IBF_CP_SPINES", 16);
    let m = fat_tree_subnets(subnets, leaves, spines, hosts, routers).expect("fabric");
    let dir = tempfile::tempdir().expect("tmp");
    let mut reports = Vec::new();
    let t = Instant::now();
    for s in &m.subnets {
        let net = dir.path().join(format!("{}.net", s.name));
        fabric::formats::write_file(&net, &fabric::formats::ibnetdiscover::write(&s.fabric))
            .expect("write");
        reports.push(route(&s.name, s.prefix, &net));
    }
    // Subnet 0 once one of its hosts left: what its agent reports then.
    let changed = {
        let s = &m.subnets[0];
        let net = dir.path().join(format!("{}-1.net", s.name));
        let text = fabric::formats::ibnetdiscover::write(&s.fabric);
        fabric::formats::write_file(&net, &without_last_hosts(&text, 1)).expect("write");
        route(&s.name, s.prefix, &net)
    };
    let route_all = t.elapsed().as_secs_f64();
    let routers: Vec<(u64, u8)> = m
        .routers
        .iter()
        .map(|r| (r.guid, r.ports.iter().map(|p| p.port).max().unwrap_or(0)))
        .collect();
    let hcas: usize = m.subnets.iter().map(|s| s.fabric.num_cas()).sum();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut figs = Vec::new();
    for run in 0..runs {
        figs.push(rt.block_on(one_run(
            &reports,
            &changed,
            &routers,
            &algo,
            etcd.as_ref().map(|e| e.endpoint()),
            run,
        )));
    }
    println!(
        "{subnets} subnets x {} HCAs ({hcas} HCAs), {} routers joining every subnet (one egress rule per remote HCA); algorithm {algo}; store {}; routing all subnets (minhop, outside the timed part) {:.2} s; {} threads; median of {runs}",
        m.subnets[0].fabric.num_cas(),
        routers.len(),
        if etcd.is_some() {
            "etcd (local, one member)"
        } else {
            "memory"
        },
        route_all,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    println!("| figure | seconds |");
    println!("|---|---|");
    println!(
        "| all {subnets} reports -> every router holds the final tables | {:.3} |",
        median(figs.iter().map(|f| f.all_reports_to_tables).collect())
    );
    println!(
        "| one subnet's changed report -> written and published by the controller | {:.3} |",
        median(figs.iter().map(|f| f.change_to_published).collect())
    );
    println!(
        "| one subnet's changed report -> every router holds the new tables | {:.3} |",
        median(figs.iter().map(|f| f.change_to_tables).collect())
    );
    println!(
        "| controller recompute alone (prefix baseline, no change) | {:.4} |",
        median(figs.iter().map(|f| f.recompute).collect())
    );
}
