//! The leader runs the whole-fabric check before it publishes, on the
//! subnets that vouch for their part: a subnet whose report carries no
//! dependency summary (as an agent of an earlier release sends) is left
//! out, named in the status, and the routes of the others are published;
//! once it vouches, it takes part.

use controller::{Controller, Limits};
use fabric::intersubnet::AlgorithmKind;
use fabric::multi::{Join, TreeSubnets, Wiring, tree_subnets};
use fabric::pipeline;
use fabric::routing::EngineKind;
use proto::v1;
use std::sync::Arc;
use std::time::Duration;
use store::{MemoryStore, StorePersist};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subnet_that_does_not_vouch_is_left_out_and_the_others_are_published() {
    let m = tree_subnets(&TreeSubnets {
        subnets: 3,
        leaves: 2,
        spines: 2,
        hosts: 2,
        routers: 2,
        router_links: 1,
        wiring: Wiring::All,
        join: Join::Chain,
    })
    .expect("fabric");
    let routed = pipeline::route_subnets(&m, EngineKind::Updn).expect("routes");
    let reports: Vec<v1::SubnetReport> = m
        .subnets
        .iter()
        .zip(&routed.routings)
        .map(|(s, v)| {
            let sv = routed
                .view
                .subnets
                .iter()
                .find(|x| x.prefix == s.prefix)
                .expect("in the view");
            let mut r = proto::convert::view_to_report(sv);
            r.generation = 1;
            for p in &mut r.router_ports {
                p.router_num_ports = 8;
            }
            r.routing = Some(v1::RoutingResult {
                engine: "updn".into(),
                verified: true,
                deadlock_free: true,
                ..Default::default()
            });
            r.dependencies = v.dependencies().ok().map(proto::convert::summary_to_wire);
            r
        })
        .collect();
    assert!(reports.iter().all(|r| r.dependencies.is_some()));
    let store = Arc::new(MemoryStore::new("/t/refusal/").expect("store"));
    let (_tx, leader) = tokio::sync::watch::channel(Some("ctl".to_string()));
    let ctl = Controller::new(
        "ctl".into(),
        Duration::from_secs(30),
        AlgorithmKind::Issr.algorithm(),
        Arc::new(StorePersist::new(store)),
        leader,
        Limits::default(),
    );
    ctl.take_over().await.expect("takes over");
    let mut sessions = Vec::new();
    for r in &reports {
        let reg = ctl
            .register(
                &v1::RegisterRequest {
                    agent_id: format!("a{:x}", r.subnet_prefix),
                    subnet_prefix: r.subnet_prefix,
                    query_addr: String::new(),
                },
                &format!("insecure:a{:x}", r.subnet_prefix),
            )
            .await
            .expect("registers");
        sessions.push(reg.session);
    }
    // The last subnet's agent sends no summary.
    for (i, r) in reports.iter().enumerate() {
        let mut r = r.clone();
        r.session = sessions[i].clone();
        if i == 2 {
            r.dependencies = None;
        }
        ctl.report(r, None).await.expect("accepted");
    }
    let st = ctl.state();
    assert!(st.refused.is_empty(), "refused: {}", st.refused);
    let left: Vec<(u64, &str)> = st
        .subnets
        .iter()
        .filter(|s| !s.left_out.is_empty())
        .map(|s| (s.subnet_prefix, s.left_out.as_str()))
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].0, reports[2].subnet_prefix);
    assert!(left[0].1.contains("no dependency summary"), "{}", left[0].1);
    let before = ctl.published();
    assert_eq!(before.mappings.len(), 2, "the two that vouch are published");
    assert!(
        before.mappings[&reports[0].subnet_prefix]
            .decode()
            .expect("decodes")
            .entries
            .iter()
            .any(|e| e
                .destination
                .is_some_and(|d| d.prefix == reports[1].subnet_prefix))
    );
    assert!(
        !before
            .mappings
            .values()
            .any(|m| m.decode().expect("decodes").entries.iter().any(|e| e
                .destination
                .is_some_and(|d| d.prefix == reports[2].subnet_prefix))),
        "no route toward the subnet nothing vouches for"
    );
    // Its agent upgrades: the whole fabric checks, routes are published.
    let mut r = reports[2].clone();
    r.session = sessions[2].clone();
    r.generation = 2;
    ctl.report(r, None).await.expect("accepted");
    let st = ctl.state();
    assert!(st.refused.is_empty(), "{}", st.refused);
    let p = ctl.published();
    assert_eq!(p.mappings.len(), 3);
    assert!(
        p.mappings[&reports[0].subnet_prefix]
            .decode()
            .expect("decodes")
            .entries
            .iter()
            .any(|e| e
                .destination
                .is_some_and(|d| d.prefix == reports[2].subnet_prefix))
    );
}
