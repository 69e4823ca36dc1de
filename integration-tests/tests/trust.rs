//! The control plane against forged calls, over real processes with
//! mutual TLS: what an attacker with a certificate (or without the right
//! one) tries is refused, and nothing wrong reaches a router.

use ibtls::{Identity, Role, Transport};
use integration_tests::cluster::{Cluster, wait_for};
use proto::v1;
use std::time::Duration;

const CONVERGE: Duration = Duration::from_secs(30);

async fn controller_as(
    c: &Cluster,
    t: &Transport,
) -> v1::controller_client::ControllerClient<tonic::transport::Channel> {
    proto::client::controller_client(
        c.connect_as(&c.controllers[0].0, Role::Controller, t)
            .await
            .expect("connect"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_another_ca_or_without_the_right_identity_are_refused() {
    let c = Cluster::start(2, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    // A certificate from another CA, for a real prefix: the handshake fails.
    let rogue_dir = c.path("rogue");
    std::fs::create_dir_all(&rogue_dir).expect("dir");
    let rogue_ca = ibtls::generate_ca("rogue").expect("ca");
    std::fs::write(rogue_dir.join("ca.pem"), &c.ca.cert_pem).expect("ca");
    let prefix = c.agents[0].prefix;
    let rogue = Transport::Tls(
        integration_tests::cluster::issue_into(&rogue_dir, &rogue_ca, &Identity::Agent { prefix })
            .expect("cert"),
    );
    let refused = match c
        .connect_as(&c.controllers[0].0, Role::Controller, &rogue)
        .await
    {
        Err(_) => true,
        Ok(ch) => proto::client::controller_client(ch)
            .state(v1::StateRequest {})
            .await
            .is_err(),
    };
    assert!(refused, "a certificate of another CA is refused");
    // Plaintext to a TLS listener gets nowhere either.
    let plain =
        proto::client::connect(&c.controllers[0].0, &Transport::Insecure, Role::Controller).await;
    let refused = match plain {
        Err(_) => true,
        Ok(ch) => proto::client::controller_client(ch)
            .state(v1::StateRequest {})
            .await
            .is_err(),
    };
    assert!(refused, "plaintext is refused");
    // A router's certificate cannot watch another router's tables.
    let r = Transport::Tls(c.tls_for(&Identity::Router { guid: 0x77 }).expect("cert"));
    let e = controller_as(&c, &r)
        .await
        .follow_egress(v1::WatchEgressRequest {
            router_guid: c.routers[0].guid,
            have_version: 0,
            max_message_bytes: 0,
        })
        .await
        .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{}", e.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_that_are_not_verified_or_claim_another_subnets_ports_are_refused_or_left_out() {
    let c = Cluster::start(2, 1, "updn").expect("cluster starts");
    let st = c.converged(0, CONVERGE).await.expect("converges");
    // A newcomer subnet with a valid certificate registers, then reports
    // forged content.
    let prefix = 0xfec0_0000_0000_00ee;
    let t = Transport::Tls(c.tls_for(&Identity::Agent { prefix }).expect("cert"));
    let mut ctl = controller_as(&c, &t).await;
    let reg = ctl
        .register(v1::RegisterRequest {
            agent_id: "newcomer".into(),
            subnet_prefix: prefix,
            query_addr: String::new(),
        })
        .await
        .expect("registers")
        .into_inner();
    let real = st.subnets[0].clone();
    let base = v1::SubnetReport {
        session: reg.session.clone(),
        subnet_prefix: prefix,
        generation: 1,
        end_ports: vec![v1::EndPort {
            guid: 0xee01,
            lid: 1,
            desc: "h".into(),
            lmc: 0,
        }],
        routing: Some(v1::RoutingResult {
            engine: "minhop".into(),
            verified: true,
            deadlock_free: false,
            ..Default::default()
        }),
        ..Default::default()
    };
    let e = ctl
        .report(base.clone())
        .await
        .expect_err("not deadlock free");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{}", e.message());
    assert!(e.message().contains("not deadlock free"), "{}", e.message());
    // The router port an existing subnet has, on a router of 6 ports, at
    // port 7.
    let mut forged = base.clone();
    forged.routing = Some(v1::RoutingResult {
        engine: "updn".into(),
        verified: true,
        deadlock_free: true,
        ..Default::default()
    });
    forged.router_ports = vec![v1::RouterPort {
        router_guid: c.routers[0].guid,
        port: 7,
        port_guid: 0xee07,
        lid: 2,
        router_num_ports: 6,
        ..Default::default()
    }];
    let e = ctl.report(forged).await.expect_err("no such port");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{}", e.message());
    // A GUID of a host in another subnet.
    let theirs = c.fabric.subnets[0]
        .fabric
        .port_guid(c.fabric.subnets[0].fabric.endports()[0]);
    let mut stolen = base.clone();
    stolen.routing = Some(v1::RoutingResult {
        verified: true,
        deadlock_free: true,
        ..Default::default()
    });
    stolen.end_ports[0].guid = theirs;
    stolen.dependencies = Some(v1::DependencySummary::default());
    // Kept (a re-cabling looks the same from one report) but left out:
    // the subnet that holds the GUID came first.
    let ack = ctl
        .report(stolen)
        .await
        .expect("kept, left out")
        .into_inner();
    assert!(
        ack.left_out.contains("claimed by subnet"),
        "{}",
        ack.left_out
    );
    assert_eq!(ack.mapping_version, 0);
    // Nothing of it was published: the routers keep their tables.
    let after = c.state(0).await.expect("state");
    assert!(
        after
            .subnets
            .iter()
            .all(|s| s.subnet_prefix != prefix || s.left_out.contains("claimed by subnet"))
    );
    assert_eq!(
        after
            .routers
            .iter()
            .map(|r| r.egress_version)
            .collect::<Vec<_>>(),
        st.routers
            .iter()
            .map(|r| r.egress_version)
            .collect::<Vec<_>>()
    );
    let _ = real;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_version_on_a_router_is_repaired_by_the_leader() {
    let c = Cluster::start(2, 1, "updn").expect("cluster starts");
    let st = c.converged(0, CONVERGE).await.expect("converges");
    let current = c.router_state(0).await.expect("router").version;
    // A version from a term no leader had (plausible for the clock, so the
    // router takes it), installed with the controller's own certificate.
    let forged = ((st.term + 1_000) << 32) | 1;
    let as_ctl = Transport::Tls(c.tls_for(&Identity::Controller).expect("cert"));
    let mut r = v1::router_fw_client::RouterFwClient::new(
        c.connect_as(&c.routers[0].addr, Role::Router, &as_ctl)
            .await
            .expect("connect"),
    );
    r.install(v1::EgressTables {
        router_guid: c.routers[0].guid,
        version: forged,
        algorithm: "forged".into(),
        contexts: vec![],
        replaces: 0,
        part: 0,
        parts: 0,
    })
    .await
    .expect("the router took it");
    assert_eq!(c.router_state(0).await.expect("router").version, forged);
    // The router watches again with what it holds; the leader sees a
    // version it never published and replaces it with its own.
    let repaired = wait_for("the leader's repair", Duration::from_secs(15), || async {
        let v = c.router_state(0).await?.version;
        (v == current).then_some(v)
    })
    .await;
    assert!(repaired.is_ok(), "{}", c.logs());
    let st = c.state(0).await.expect("state");
    assert!(st.routers.iter().all(|r| r.held_version == current));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_hold_unbounded_watch_streams() {
    let c = Cluster::start(2, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let t = Transport::Tls(c.tls_for(&Identity::Router { guid: 0x99 }).expect("cert"));
    let mut ctl = controller_as(&c, &t).await;
    let mut open = Vec::new();
    let mut refused = None;
    for _ in 0..32 {
        match ctl
            .follow_egress(v1::WatchEgressRequest {
                router_guid: 0x99,
                have_version: 0,
                max_message_bytes: 0,
            })
            .await
        {
            Ok(s) => open.push(s.into_inner()),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("a limit");
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{}", e.message());
    assert_eq!(open.len(), 8, "the default limit");
    // Closing streams frees their places.
    open.clear();
    let again = wait_for("a freed stream slot", Duration::from_secs(5), || {
        let mut ctl = ctl.clone();
        async move {
            ctl.follow_egress(v1::WatchEgressRequest {
                router_guid: 0x99,
                have_version: 0,
                max_message_bytes: 0,
            })
            .await
            .ok()
        }
    })
    .await;
    assert!(again.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_memory_store_controller_never_hands_out_an_older_version() {
    let mut c = Cluster::start_with_store(
        2,
        1,
        "updn",
        1,
        integration_tests::cluster::StoreSpec::MemoryFile,
    )
    .expect("cluster starts");
    let before = c.converged(0, CONVERGE).await.expect("converges");
    let held = c.router_state(0).await.expect("router").version;
    c.restart_controller(0).expect("restarts");
    let after = c.converged(0, CONVERGE).await.expect("converges again");
    // A new term, above the old one: whatever it publishes next starts at
    // (term << 32) + 1, above every version of the earlier run.
    assert!(
        after.term > before.term,
        "{} -> {}",
        before.term,
        after.term
    );
    assert!((after.term << 32) > held);
    // What was published survived the restart: the same versions, and the
    // router kept (and still holds) its table.
    assert_eq!(
        after
            .routers
            .iter()
            .map(|r| r.egress_version)
            .collect::<Vec<_>>(),
        before
            .routers
            .iter()
            .map(|r| r.egress_version)
            .collect::<Vec<_>>()
    );
    assert_eq!(c.router_state(0).await.expect("router").version, held);
    // The agents find the restarted controller and report in new sessions.
    let resumed = wait_for("the agents' new sessions", CONVERGE, || async {
        let st = c.state(0).await?;
        st.subnets
            .iter()
            .all(|s| s.live && !s.session.is_empty() && s.generation >= 1)
            .then_some(())
    })
    .await;
    assert!(resumed.is_ok(), "{}", c.logs());
}

/// A report whose write fails leaves the controller's memory as the store
/// has it, and the same report sent again is written and published (it
/// used to count as unchanged and never reach the store).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_whose_write_failed_is_written_when_sent_again() {
    let c = Cluster::start_with_store(
        2,
        1,
        "updn",
        1,
        integration_tests::cluster::StoreSpec::MemoryFile,
    )
    .expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let prefix = 0xfec0_0000_0000_00cc;
    let t = Transport::Tls(c.tls_for(&Identity::Agent { prefix }).expect("cert"));
    let mut ctl = controller_as(&c, &t).await;
    let reg = ctl
        .register(v1::RegisterRequest {
            agent_id: "newcomer".into(),
            subnet_prefix: prefix,
            query_addr: String::new(),
        })
        .await
        .expect("registers")
        .into_inner();
    let report = |hosts: u32| v1::SubnetReport {
        session: reg.session.clone(),
        subnet_prefix: prefix,
        generation: 1,
        topology: Some(v1::TopologySummary {
            cas: hosts,
            ..Default::default()
        }),
        end_ports: (1..=hosts)
            .map(|i| v1::EndPort {
                guid: 0xcc00 + u64::from(i),
                lid: i,
                desc: format!("h{i}"),
                lmc: 0,
            })
            .collect(),
        routing: Some(v1::RoutingResult {
            engine: "updn".into(),
            verified: true,
            deadlock_free: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    let cas = |st: &v1::ControllerState| {
        st.subnets
            .iter()
            .find(|s| s.subnet_prefix == prefix)
            .and_then(|s| s.topology)
            .map(|t| t.cas)
    };
    ctl.report(report(1)).await.expect("accepted");
    assert_eq!(cas(&c.state(0).await.expect("state")), Some(1));
    // The store fails: its state file's place is taken by a directory.
    let file = c.path("ctl.state");
    std::fs::remove_file(&file).expect("state file");
    std::fs::create_dir_all(file.join("blocked")).expect("block");
    let e = ctl.report(report(2)).await.expect_err("not written");
    assert_eq!(e.code(), tonic::Code::Internal, "{}", e.message());
    assert_eq!(
        cas(&c.state(0).await.expect("state")),
        Some(1),
        "memory keeps what the store has"
    );
    // The store recovers; the very same report is now written and applied.
    std::fs::remove_dir_all(&file).expect("unblock");
    ctl.report(report(2)).await.expect("accepted");
    assert_eq!(cas(&c.state(0).await.expect("state")), Some(2));
    assert!(file.is_file(), "written to the store");
}

/// Runs `ibfabric ARGS` and returns its exit code and stdout.
fn cli(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(integration_tests::ibfabric_bin().expect("binary"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// One report that cannot vouch for its subnet (no dependency summary, as
/// an agent of an older release sends, here from a certificate for a
/// prefix the fabric does not have) stops no route: it is kept and left
/// out; after a controller restart on its state file a restarted router
/// gets its tables; `status` names the subnet; an operator forgets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_without_a_summary_is_left_out_and_stops_no_route() {
    use integration_tests::cluster::StoreSpec;
    let mut c =
        Cluster::start_with_store(2, 1, "updn", 1, StoreSpec::MemoryFile).expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let prefix = 0xfec0_0000_0000_00ee;
    let t = Transport::Tls(c.tls_for(&Identity::Agent { prefix }).expect("cert"));
    let mut ctl = controller_as(&c, &t).await;
    let reg = ctl
        .register(v1::RegisterRequest {
            agent_id: "old-release".into(),
            subnet_prefix: prefix,
            query_addr: String::new(),
        })
        .await
        .expect("registers")
        .into_inner();
    let ack = ctl
        .report(v1::SubnetReport {
            session: reg.session,
            subnet_prefix: prefix,
            generation: 1,
            end_ports: vec![v1::EndPort {
                guid: 0xee01,
                lid: 1,
                desc: "h".into(),
                lmc: 0,
            }],
            routing: Some(v1::RoutingResult {
                engine: "minhop".into(),
                verified: true,
                deadlock_free: true,
                ..Default::default()
            }),
            dependencies: None,
            ..Default::default()
        })
        .await
        .expect("kept")
        .into_inner();
    assert!(
        ack.left_out.contains("no dependency summary"),
        "{}",
        ack.left_out
    );
    // The controller restarts on its state file, the router restarts with
    // nothing: it gets the tables of the two real subnets.
    c.restart_controller(0).expect("controller restarts");
    let addrs: Vec<String> = c.controllers.iter().map(|x| x.0.clone()).collect();
    c.routers[0].proc.kill();
    c.routers.clear();
    c.start_router(0, &addrs).expect("router restarts");
    let st = wait_for("routes published and installed", CONVERGE, || async {
        let st = c.state(0).await?;
        let rs = c.router_state(0).await?;
        let mapped = st.subnets.iter().filter(|s| s.mapping_version > 0).count();
        (st.leader && mapped == 2 && proto::convert::router_current(&st, &rs)).then_some(st)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(st.refused.is_empty(), "{}", st.refused);
    let s = st
        .subnets
        .iter()
        .find(|s| s.subnet_prefix == prefix)
        .expect("kept across the restart");
    assert!(
        s.left_out.contains("no dependency summary"),
        "{}",
        s.left_out
    );
    // `status` names it and exits 6; `forget` needs the controllers'
    // identity and removes it.
    let ops = c.tls_for(&Identity::Controller).expect("cert");
    let tester = c
        .tls_for(&Identity::Worker {
            name: "tester".into(),
        })
        .expect("cert");
    let tls = |s: &ibtls::TlsSettings| {
        [
            "--ca".to_string(),
            s.ca.display().to_string(),
            "--cert".into(),
            s.cert.display().to_string(),
            "--key".into(),
            s.key.display().to_string(),
        ]
    };
    let ctl_addr = c.controllers[0].0.clone();
    let run = |cmd: &str, s: &ibtls::TlsSettings, more: &[&str]| {
        let mut args: Vec<String> = vec![cmd.into(), "--controller".into(), ctl_addr.clone()];
        args.extend(tls(s));
        args.extend(more.iter().map(|x| x.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        cli(&refs)
    };
    let (code, out) = run("status", &ops, &[]);
    assert_eq!(code, 6, "{out}");
    assert!(
        out.contains("LEFT OUT") && out.contains("no dependency summary"),
        "{out}"
    );
    let hex = format!("{prefix:#018x}");
    let (code, out) = run("forget", &tester, &["--prefix", &hex]);
    assert_eq!(code, 1, "a worker identity may not forget: {out}");
    let (code, out) = run("forget", &ops, &["--prefix", &hex, "--json"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("\"forgotten\": true"), "{out}");
    let st = c.state(0).await.expect("state");
    assert!(st.subnets.iter().all(|s| s.subnet_prefix != prefix));
    let (code, _) = run("forget", &ops, &["--prefix", &hex]);
    assert_eq!(code, 6, "nothing left to forget");
}
