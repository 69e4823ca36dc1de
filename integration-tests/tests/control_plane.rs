//! The control plane as real processes over loopback gRPC: controller
//! (in-memory store), one agent per subnet, one router firmware process
//! per router. Every answer of the live system is checked against the
//! pure inter-subnet algorithm run on the same generated fabric.

use fabric::intersubnet::{self, Gid, GlobalView};
use ibtls::{Identity, Role, Transport};
use integration_tests::cluster::{Cluster, wait_for};
use proto::v1;
use std::time::Duration;

const CONVERGE: Duration = Duration::from_secs(30);

async fn path_query(
    cl: &Cluster,
    addr: &str,
    src: Gid,
    dst: Gid,
) -> Result<v1::PathQueryReply, tonic::Status> {
    let ch = cl
        .connect(addr, Role::Agent)
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let mut c = v1::agent_client::AgentClient::new(ch);
    c.path_query(v1::PathQueryRequest {
        source: Some(proto::convert::gid_to_wire(src)),
        destination: Some(proto::convert::gid_to_wire(dst)),
    })
    .await
    .map(|r| r.into_inner())
}

async fn forward(
    cl: &Cluster,
    addr: &str,
    ingress: u8,
    slid: u32,
    dst: Gid,
) -> Result<v1::ForwardDecision, tonic::Status> {
    let ch = cl
        .connect(addr, Role::Router)
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let mut c = v1::router_fw_client::RouterFwClient::new(ch);
    c.forward(v1::ForwardQuery {
        ingress_port: ingress as u32,
        slid,
        destination: Some(proto::convert::gid_to_wire(dst)),
    })
    .await
    .map(|r| r.into_inner())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_report_routers_get_tables_and_every_cross_subnet_path_resolves() {
    let c = Cluster::start(3, 2, "lash").expect("cluster starts");
    let st = c.converged(0, CONVERGE).await.expect("converges");
    for s in &st.subnets {
        let r = s.routing.as_ref().expect("routing reported");
        assert!(r.verified && r.deadlock_free, "{}: {r:?}", s.agent_id);
        assert_eq!(r.table_digest.len(), 64);
        assert!(s.live);
    }
    // The agents wrote the table sets they report on.
    for a in &c.agents {
        let p = c.path(&format!("out/{}", a.name));
        let set = fabric::formats::tableset::check_dir(&p).expect("a whole set written");
        assert!(
            set.files.iter().any(|e| e.name == "ibfabric-lfts.bin"),
            "{}",
            p.display()
        );
    }
    // Every cross-subnet pair: agent's router port, then the router's
    // decision, equal to what the algorithm computes on the same view.
    let view = GlobalView::from_multi(&c.fabric);
    let expect = intersubnet::by_name("prefix")
        .and_then(|a| a.route(&view))
        .expect("algorithm runs");
    let mut checked = 0;
    for (si, s) in view.subnets.iter().enumerate() {
        let agent = c
            .agents
            .iter()
            .find(|a| a.prefix == s.prefix)
            .expect("agent per subnet");
        for src in &s.end_ports {
            for d in view.subnets.iter().filter(|d| d.prefix != s.prefix) {
                for dst in &d.end_ports {
                    let sg = Gid {
                        prefix: s.prefix,
                        guid: src.guid,
                    };
                    let dg = Gid {
                        prefix: d.prefix,
                        guid: dst.guid,
                    };
                    let pq = path_query(&c, &agent.addr, sg, dg)
                        .await
                        .expect("path query");
                    assert!(pq.remote);
                    assert_eq!(pq.slid, src.lid as u32);
                    let hops = intersubnet::trace(&view, &expect, sg, dg).expect("pure trace");
                    let first = &hops[0];
                    let rp = s
                        .router_ports
                        .iter()
                        .find(|p| p.port_guid == pq.router_port_guid)
                        .expect("agent picked a router port of its subnet");
                    assert_eq!(
                        (rp.router_guid, rp.port),
                        (first.router_guid, first.ingress_port)
                    );
                    assert_eq!(pq.dlid, rp.lid as u32);
                    let router = c
                        .routers
                        .iter()
                        .find(|r| r.guid == rp.router_guid)
                        .expect("router");
                    let fd = forward(&c, &router.addr, rp.port, pq.slid, dg)
                        .await
                        .expect("forward");
                    assert_eq!(
                        fd.next_lid, dst.lid as u32,
                        "delivered to the destination's LID"
                    );
                    assert_eq!(fd.egress_port, first.egress_port as u32);
                    checked += 1;
                }
            }
        }
        assert!(si < 3);
    }
    // 3 subnets x 8 hosts x 16 remote hosts.
    assert_eq!(checked, 3 * 8 * 16);
    // Each agent keeps the mapping in force as the paper's mapping file,
    // and it reads back to exactly what the algorithm computed.
    for (s, m) in view.subnets.iter().zip(&expect.mappings) {
        let agent = c
            .agents
            .iter()
            .find(|a| a.prefix == s.prefix)
            .expect("agent per subnet");
        let path = c
            .dir
            .path()
            .join("out")
            .join(&agent.name)
            .join("ibfabric-mapping.txt");
        let read = fabric::formats::mapping::read(&path, s.prefix, &s.router_ports)
            .expect("agent's mapping file reads");
        assert_eq!(&read, m, "{}", path.display());
    }
    // Local pairs resolve without a router.
    let s = &view.subnets[0];
    let pq = path_query(
        &c,
        &c.agents[0].addr,
        Gid {
            prefix: s.prefix,
            guid: s.end_ports[0].guid,
        },
        Gid {
            prefix: s.prefix,
            guid: s.end_ports[5].guid,
        },
    )
    .await
    .expect("local query");
    assert!(!pq.remote);
    assert_eq!(pq.dlid, s.end_ports[5].lid as u32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_table_push_is_refused_and_the_old_table_kept() {
    let c = Cluster::start(2, 1, "lash").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let before = c.router_state(0).await.expect("router state");
    assert!(before.version > 0 && before.rules > 0);
    let view = GlobalView::from_multi(&c.fabric);
    let d = &view.subnets[1];
    let dg = Gid {
        prefix: d.prefix,
        guid: d.end_ports[0].guid,
    };
    let rp = &view.subnets[0].router_ports[0];
    let ok = forward(&c, &c.routers[0].addr, rp.port, 1, dg)
        .await
        .expect("forward");

    // Only the controller's identity may install tables.
    let as_controller = Transport::Tls(c.tls_for(&Identity::Controller).expect("cert"));
    let ch = c
        .connect_as(&c.routers[0].addr, Role::Router, &as_controller)
        .await
        .expect("connect");
    let mut client = v1::router_fw_client::RouterFwClient::new(ch);
    let mut tester = v1::router_fw_client::RouterFwClient::new(
        c.connect(&c.routers[0].addr, Role::Router)
            .await
            .expect("connect"),
    );
    let rule = |next_lid: u32, ports: Vec<u32>| v1::EgressRule {
        r#match: Some(v1::egress_rule::Match::Gid(proto::convert::gid_to_wire(dg))),
        next_lid,
        ports,
        choice: v1::Choice::First as i32,
    };
    let table = |version: u64, rules: Vec<v1::EgressRule>| v1::EgressTables {
        router_guid: c.routers[0].guid,
        version,
        algorithm: "test".into(),
        contexts: vec![v1::IngressContext {
            ingress_ports: vec![],
            rules,
            continued: false,
        }],
        replaces: 0,
        part: 0,
        parts: 0,
    };
    // Another identity of the CA may ask, not install, even a good table.
    let e = tester
        .install(table(before.version + 10, vec![rule(5, vec![1])]))
        .await
        .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{}", e.message());
    // A forged version far in the future is refused as absurd.
    let e = client
        .install(table(u64::MAX, vec![rule(5, vec![1])]))
        .await
        .expect_err("absurd");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{}", e.message());
    assert!(e.message().contains("absurd"), "{}", e.message());
    // Malformed: LID 0, a port the router lacks, no port at all; then a
    // well-formed but older table, and one for another router.
    for (bad, code) in [
        (
            table(before.version + 10, vec![rule(0, vec![1])]),
            tonic::Code::InvalidArgument,
        ),
        (
            table(before.version + 10, vec![rule(5, vec![200])]),
            tonic::Code::InvalidArgument,
        ),
        (
            table(before.version + 10, vec![rule(5, vec![])]),
            tonic::Code::InvalidArgument,
        ),
        (
            table(before.version, vec![rule(5, vec![1])]),
            tonic::Code::FailedPrecondition,
        ),
        (
            v1::EgressTables {
                router_guid: 0x1234,
                ..table(before.version + 10, vec![rule(5, vec![1])])
            },
            tonic::Code::InvalidArgument,
        ),
    ] {
        let e = client.install(bad).await.expect_err("refused");
        assert_eq!(e.code(), code, "{}", e.message());
    }
    let after = c.router_state(0).await.expect("router state");
    assert_eq!(after.version, before.version, "old table kept");
    assert_eq!(after.rules, before.rules);
    assert_eq!(after.rejected, before.rejected + 6);
    assert_eq!(
        forward(&c, &c.routers[0].addr, rp.port, 1, dg)
            .await
            .expect("forward"),
        ok
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_agent_claiming_a_live_prefix_is_refused() {
    let mut c = Cluster::start(2, 1, "lash").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let prefix = c.agents[0].prefix;
    // A client whose certificate names another role or prefix is refused
    // before anything is looked at.
    let mut tester = proto::client::controller_client(
        c.connect(&c.controllers[0].0, Role::Controller)
            .await
            .expect("connect"),
    );
    let e = tester
        .register(v1::RegisterRequest {
            agent_id: "intruder".into(),
            subnet_prefix: prefix,
            query_addr: String::new(),
        })
        .await
        .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{}", e.message());
    let other = Transport::Tls(
        c.tls_for(&Identity::Agent {
            prefix: c.agents[1].prefix,
        })
        .expect("cert"),
    );
    let mut wrong = proto::client::controller_client(
        c.connect_as(&c.controllers[0].0, Role::Controller, &other)
            .await
            .expect("connect"),
    );
    let e = wrong
        .register(v1::RegisterRequest {
            agent_id: "subnet1".into(),
            subnet_prefix: prefix,
            query_addr: String::new(),
        })
        .await
        .expect_err("an agent of prefix B speaking for prefix A");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{}", e.message());
    assert!(e.message().contains("may not act as"), "{}", e.message());
    // A twin: a second certificate for the same prefix, from the same CA.
    let twin_dir = c.path("twin");
    std::fs::create_dir_all(&twin_dir).expect("dir");
    std::fs::copy(c.path("ca.pem"), twin_dir.join("ca.pem")).expect("ca");
    let twin = Transport::Tls(
        integration_tests::cluster::issue_into(&twin_dir, &c.ca, &Identity::Agent { prefix })
            .expect("twin cert"),
    );
    let mut client = proto::client::controller_client(
        c.connect_as(&c.controllers[0].0, Role::Controller, &twin)
            .await
            .expect("connect"),
    );
    let e = client
        .register(v1::RegisterRequest {
            agent_id: "intruder".into(),
            subnet_prefix: prefix,
            query_addr: String::new(),
        })
        .await
        .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    assert!(
        e.message().contains("held by live agent 'subnet0'"),
        "{}",
        e.message()
    );
    // A real agent process with its own certificate for the same prefix
    // does not take it over.
    let ctl = vec![c.controllers[0].0.clone()];
    c.write_agent_config(0, "lash", "intruder", prefix, &ctl)
        .expect("config");
    let cfg = c.path("intruder.agent.toml");
    let text = std::fs::read_to_string(&cfg).expect("config");
    let text = text.replace(
        c.path("agent-").to_str().expect("utf-8"),
        twin_dir.join("agent-").to_str().expect("utf-8"),
    );
    std::fs::write(&cfg, text).expect("config");
    let i = c
        .agents
        .iter()
        .position(|a| a.name == "intruder")
        .expect("added");
    c.start_agent(i).expect("starts");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let st = c.state(0).await.expect("state");
    let s = st
        .subnets
        .iter()
        .find(|s| s.subnet_prefix == prefix)
        .expect("subnet");
    assert_eq!(s.agent_id, "subnet0");
    assert!(s.live);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_resyncs_with_the_same_versions() {
    let mut c = Cluster::start(2, 1, "lash").expect("cluster starts");
    let st = c.converged(0, CONVERGE).await.expect("converges");
    let before = st
        .subnets
        .iter()
        .find(|s| s.agent_id == "subnet0")
        .expect("subnet0")
        .clone();
    let view = GlobalView::from_multi(&c.fabric);
    let (s, d) = (&view.subnets[0], &view.subnets[1]);
    let sg = Gid {
        prefix: s.prefix,
        guid: s.end_ports[0].guid,
    };
    let dg = Gid {
        prefix: d.prefix,
        guid: d.end_ports[0].guid,
    };
    let q1 = path_query(&c, &c.agents[0].addr, sg, dg)
        .await
        .expect("query");

    c.agents[0].proc.kill();
    assert!(
        path_query(&c, &c.agents[0].addr, sg, dg).await.is_err(),
        "agent is down"
    );
    c.start_agent(0).expect("restarts");
    let addr = c.agents[0].addr.clone();
    let q2 = wait_for("the restarted agent's mapping", CONVERGE, || {
        let (addr, c) = (addr.clone(), &c);
        async move { path_query(c, &addr, sg, dg).await.ok() }
    })
    .await
    .expect("resynced");
    assert_eq!(q2, q1, "same routes, same mapping version");
    let st = c.state(0).await.expect("state");
    let after = st
        .subnets
        .iter()
        .find(|s| s.agent_id == "subnet0")
        .expect("subnet0");
    assert!(
        after.session != before.session && after.generation >= 1,
        "a new report arrived in the restarted agent's new session"
    );
    assert_eq!(
        after.mapping_version, before.mapping_version,
        "nothing changed, no new version"
    );
    assert_eq!(
        after.routing.as_ref().map(|r| r.table_digest.clone()),
        before.routing.as_ref().map(|r| r.table_digest.clone())
    );
}
