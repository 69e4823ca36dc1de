//! Two controller processes on a real etcd: one leads; when it is killed
//! (SIGKILL, no resignation) the other takes over within 3 s and serves
//! the same table versions, and routers and agents follow it.

use fabric::intersubnet::{Gid, GlobalView};
use ibtls::{Identity, Role, Transport};
use integration_tests::cluster::{Cluster, wait_for};
use proto::v1;
use std::time::{Duration, Instant};
use store::testing::{EtcdServer, unique_namespace};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_hands_over_within_3_s_with_the_same_versions() {
    let etcd = EtcdServer::start();
    let ns = unique_namespace("failover");
    let mut c =
        Cluster::start_with(2, 2, "updn", 2, Some((etcd.endpoint(), &ns))).expect("cluster starts");
    let leader = wait_for("a leader", Duration::from_secs(15), || c.leader())
        .await
        .expect("one controller leads");
    let st = c
        .converged(leader, Duration::from_secs(30))
        .await
        .expect("converges");
    let follower = 1 - leader;
    let fst = c.state(follower).await.expect("follower answers");
    assert!(!fst.leader, "exactly one leader");
    // Followers refuse registrations and name the leader.
    let mut fc = proto::client::controller_client(
        c.connect_as(
            &c.controllers[follower].0,
            Role::Controller,
            &as_agent(&c, 1),
        )
        .await
        .expect("connect"),
    );
    let e = fc
        .register(v1::RegisterRequest {
            agent_id: "x".into(),
            subnet_prefix: 1,
            query_addr: String::new(),
        })
        .await
        .expect_err("follower refuses");
    assert_eq!(e.code(), tonic::Code::Unavailable);

    let mut router_versions = Vec::new();
    for i in 0..c.routers.len() {
        router_versions.push(c.router_state(i).await.expect("router").version);
    }
    let egress: Vec<(u64, u64)> = st
        .routers
        .iter()
        .map(|r| (r.router_guid, r.egress_version))
        .collect();
    let maps: Vec<(u64, u64)> = st
        .subnets
        .iter()
        .map(|s| (s.subnet_prefix, s.mapping_version))
        .collect();
    let view = GlobalView::from_multi(&c.fabric);
    let (s, d) = (&view.subnets[0], &view.subnets[1]);
    let sg = Gid {
        prefix: s.prefix,
        guid: s.end_ports[0].guid,
    };
    let dg = Gid {
        prefix: d.prefix,
        guid: d.end_ports[3].guid,
    };
    let tester = c.client.clone();
    let query = |addr: String| {
        let t = tester.clone();
        async move {
            let ch = proto::client::connect(&addr, &t, Role::Agent).await.ok()?;
            let mut a = v1::agent_client::AgentClient::new(ch);
            a.path_query(v1::PathQueryRequest {
                source: Some(proto::convert::gid_to_wire(sg)),
                destination: Some(proto::convert::gid_to_wire(dg)),
            })
            .await
            .ok()
            .map(|r| r.into_inner())
        }
    };
    let before = query(c.agents[0].addr.clone()).await.expect("path query");

    c.controllers[leader].1.kill();
    let killed = Instant::now();
    let took = wait_for(
        "the follower to take over",
        Duration::from_secs(10),
        || async {
            c.state(follower)
                .await
                .filter(|s| s.leader)
                .map(|_| killed.elapsed())
        },
    )
    .await
    .expect("follower takes over");
    eprintln!("takeover after {took:?}");
    assert!(took < Duration::from_secs(3), "takeover took {took:?}");

    // Same versions on the new leader, and the agents find it (live again,
    // nothing republished).
    let st2 = wait_for(
        "agents to re-register with the new leader",
        Duration::from_secs(15),
        || async {
            let st = c.state(follower).await?;
            (st.subnets.len() == 2 && st.subnets.iter().all(|s| s.live && s.routing.is_some()))
                .then_some(st)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    let egress2: Vec<(u64, u64)> = st2
        .routers
        .iter()
        .map(|r| (r.router_guid, r.egress_version))
        .collect();
    let maps2: Vec<(u64, u64)> = st2
        .subnets
        .iter()
        .map(|s| (s.subnet_prefix, s.mapping_version))
        .collect();
    assert_eq!(egress2, egress, "same egress versions after failover");
    assert_eq!(maps2, maps, "same mapping versions after failover");
    for (i, v) in router_versions.iter().enumerate() {
        assert_eq!(c.router_state(i).await.expect("router").version, *v);
    }
    assert_eq!(
        query(c.agents[0].addr.clone()).await.expect("path query"),
        before
    );

    // The new leader serves changes: an agent restart re-reports and the
    // routers stay on the same versions (nothing changed), while a
    // registration for a new prefix is now accepted here.
    let mut lc = proto::client::controller_client(
        c.connect_as(
            &c.controllers[follower].0,
            Role::Controller,
            &as_agent(&c, 0xfec0_0000_0000_00aa),
        )
        .await
        .expect("connect"),
    );
    lc.register(v1::RegisterRequest {
        agent_id: "newcomer".into(),
        subnet_prefix: 0xfec0_0000_0000_00aa,
        query_addr: String::new(),
    })
    .await
    .expect("the new leader accepts registrations");
}

/// A client transport with the certificate of the agent of `prefix`.
fn as_agent(c: &Cluster, prefix: u64) -> Transport {
    Transport::Tls(c.tls_for(&Identity::Agent { prefix }).expect("cert"))
}

/// A subnet that registered but never reported is not brought back by the
/// next leader (it used to come back under prefix 0x0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_that_never_reported_does_not_survive_a_failover() {
    let etcd = EtcdServer::start();
    let ns = unique_namespace("silent");
    let mut c =
        Cluster::start_with(2, 1, "updn", 2, Some((etcd.endpoint(), &ns))).expect("cluster starts");
    let leader = wait_for("a leader", Duration::from_secs(15), || c.leader())
        .await
        .expect("one controller leads");
    let before = c
        .converged(leader, Duration::from_secs(30))
        .await
        .expect("converges");
    let silent = 0xfec0_0000_0000_00bb;
    let mut lc = proto::client::controller_client(
        c.connect_as(
            &c.controllers[leader].0,
            Role::Controller,
            &as_agent(&c, silent),
        )
        .await
        .expect("connect"),
    );
    lc.register(v1::RegisterRequest {
        agent_id: "silent".into(),
        subnet_prefix: silent,
        query_addr: String::new(),
    })
    .await
    .expect("registers");
    c.controllers[leader].1.kill();
    let follower = 1 - leader;
    let after = c
        .converged(follower, Duration::from_secs(30))
        .await
        .expect("the follower leads and converges");
    let prefixes: Vec<u64> = after.subnets.iter().map(|s| s.subnet_prefix).collect();
    assert!(!prefixes.contains(&0), "{prefixes:x?}");
    assert!(!prefixes.contains(&silent), "{prefixes:x?}");
    assert_eq!(
        prefixes.len(),
        before.subnets.len(),
        "the reporting subnets are all there"
    );
}
