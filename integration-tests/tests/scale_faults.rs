//! The controller at the sizes and faults that broke it before:
//!
//! - 8 subnets of 512 HCAs on a real etcd with its default request limit
//!   (1.5 MiB): the routes were one etcd value and never got published;
//!   now every result is its own key, and pushes travel in parts (the
//!   controller here cuts them at 16 KiB, so every mapping is many parts).
//! - A frozen leader (SIGSTOP) kept its routers and agents for more than a
//!   minute; now they leave it after three heartbeats of silence and find
//!   the new leader within two election leases.

use integration_tests::cluster::{Cluster, Spec, StoreSpec, wait_for};
use proto::v1;
use std::time::{Duration, Instant};
use store::testing::{EtcdServer, unique_namespace};

/// Every client of `st`'s controller holds what it publishes: each router
/// and each agent said so to this very controller (a stream it opened
/// here, or a Held after a push).
fn all_clients_hold(st: &v1::ControllerState, subnets: usize, routers: usize) -> bool {
    st.leader
        && st.subnets.len() == subnets
        && st.routers.len() == routers
        && st
            .subnets
            .iter()
            .all(|s| s.mapping_version > 0 && s.held_mapping_version == s.mapping_version)
        && st
            .routers
            .iter()
            .all(|r| r.egress_version > 0 && r.held_version == r.egress_version)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_thousand_hcas_publish_on_etcd_with_pushes_in_parts() {
    let etcd = EtcdServer::start();
    let ns = unique_namespace("scale");
    // `gen multi --subnets 8 --leaves 32 --spines 16 --hosts 16 --routers 8`
    let fabric = fabric::multi::fat_tree_subnets(8, 32, 16, 16, 8).expect("fabric");
    let hcas: usize = fabric.subnets.iter().map(|s| s.fabric.num_cas()).sum();
    assert!(hcas >= 4096, "{hcas} HCAs");
    let c = Cluster::start_spec(Spec {
        fabric,
        engine: "updn",
        algorithm: "issr",
        controllers: 1,
        store: StoreSpec::Etcd(etcd.endpoint(), &ns),
        ttl_seconds: 2,
        extra: "[limits]\npush_part_bytes = 16384\n".into(),
    })
    .expect("cluster starts");
    let started = Instant::now();
    let st = c
        .converged(0, Duration::from_secs(240))
        .await
        .expect("every subnet mapped, every router current");
    eprintln!("8 x 512 HCAs on etcd: converged in {:?}", started.elapsed());
    let store = st.store.clone().expect("store health");
    assert!(store.ok && !store.pending, "{store:?}");
    // The agents hold the whole mapping: every remote HCA has its entry.
    let st = wait_for(
        "every agent to hold its mapping",
        Duration::from_secs(60),
        || async {
            let st = c.state(0).await?;
            all_clients_hold(&st, 8, c.routers.len()).then_some(st)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    for a in &c.agents {
        let text = std::fs::read_to_string(c.path(&format!("out/{}/ibfabric-mapping.txt", a.name)))
            .expect("mapping file");
        let entries = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with('*') && !l.trim().is_empty())
            .count();
        assert_eq!(entries, 7 * 512, "{}: entries in its mapping file", a.name);
    }
    // Each mapping needed many parts at 16 KiB.
    let logs = c.logs();
    assert!(!logs.contains("refused"), "{logs}");
    assert!(st.subnets.iter().all(|s| s.mapping_version > 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_leader_loses_its_clients_within_two_leases() {
    let etcd = EtcdServer::start();
    let ns = unique_namespace("frozen");
    let ttl = 3;
    let c = Cluster::start_spec(Spec {
        fabric: fabric::multi::fat_tree_subnets(3, 4, 2, 2, 2).expect("fabric"),
        engine: "updn",
        algorithm: "prefix",
        controllers: 2,
        store: StoreSpec::Etcd(etcd.endpoint(), &ns),
        ttl_seconds: ttl,
        extra: "[limits]\nheartbeat_ms = 500\n".into(),
    })
    .expect("cluster starts");
    let leader = wait_for("a leader", Duration::from_secs(15), || c.leader())
        .await
        .expect("one controller leads");
    c.converged(leader, Duration::from_secs(60))
        .await
        .expect("converges");
    if let Err(e) = wait_for("every client to hold", Duration::from_secs(30), || async {
        let st = c.state(leader).await?;
        all_clients_hold(&st, 3, c.routers.len()).then_some(())
    })
    .await
    {
        panic!("{e}\n{:#?}\n{}", c.state(leader).await, c.logs());
    }
    let other = 1 - leader;
    c.controllers[leader].1.signal("STOP").expect("SIGSTOP");
    let frozen = Instant::now();
    let moved = wait_for(
        "every router and agent to follow the new leader",
        Duration::from_secs(30),
        || async {
            let st = c.state(other).await?;
            all_clients_hold(&st, 3, c.routers.len()).then(|| frozen.elapsed())
        },
    )
    .await;
    // Thawed before any assertion, so the cluster tears down cleanly.
    c.controllers[leader].1.signal("CONT").expect("SIGCONT");
    let moved = moved.unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    eprintln!("frozen leader: every client on the new leader after {moved:?} (lease {ttl} s)");
    assert!(
        moved <= Duration::from_secs(2 * ttl),
        "clients moved after {moved:?}, over two leases\n{}",
        c.logs()
    );
    // The thawed leader finds its term over and serves nobody.
    let st = wait_for(
        "the old leader to step down",
        Duration::from_secs(10),
        || async { c.state(leader).await.filter(|s| !s.leader) },
    )
    .await
    .expect("steps down");
    assert!(!st.leader);
}
