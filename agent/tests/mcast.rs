//! The agent with multicast groups in its config: the set carries reserved
//! trees checked with its tables; a link of the tree fails and DQR's set
//! carries trees repaired around it (the old tree's remaining links kept,
//! so old and new entries mixed close no cycle); every stage written and
//! every final set verifies with its trees; the links come back and the
//! recompute keeps the tree.

use agent::Agent;
use agent::config::{AgentConfig, ConfigFile};
use agent::follow::PLUGIN_STATUS;
use fabric::dqr::{Fault, apply_faults};
use fabric::formats::{ibnetdiscover, tableset, write_file};
use fabric::generate::{Topology, generate};
use fabric::model::Fabric;
use fabric::verify::mcast::{check_mixed, verify_with_mcast};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn config(dir: &Path) -> AgentConfig {
    write_file(&dir.join("groups.txt"), "0xC000 sl=0 all\n").expect("groups");
    let text = "agent_id = \"a\"\nsubnet_prefix = \"0xfec0000000000001\"\ntopology = \"t.net\"\n\
                engine = \"lash\"\nout_dir = \"out\"\ninsecure = true\nstage_wait_ms = 200\n\
                mcast_groups = \"groups.txt\"\n";
    let p = dir.join("agent.toml");
    write_file(&p, text).expect("config");
    AgentConfig::load(&p).expect("valid config")
}

fn put_topology(dir: &Path, f: &Fabric) {
    write_file(&dir.join("t.net"), &ibnetdiscover::write(f)).expect("topology");
}

/// The set in `out` with its trees, read against `f` and checked.
fn checked(f: &Fabric, out: &Path) -> fabric::mcast::Multicast {
    let r = tableset::read_set(f, out).expect("a whole set");
    let mc = tableset::read_multicast(f, out)
        .expect("reads")
        .expect("the set carries multicast");
    let (u, m) = verify_with_mcast(f, &r, &mc);
    assert!(u.ok(), "{u:?}");
    assert!(m.ok(), "{m:?}");
    let plan = mc.plan.as_ref().expect("a plan");
    assert!(u.max_vl < plan.vl, "unicast off the reserved VL");
    mc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trees_follow_a_link_fault_and_its_repair() {
    let f0 = generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("dragonfly");
    let d = tempfile::tempdir().expect("tmp");
    put_topology(d.path(), &f0);
    let a = Arc::new(Agent::new(config(d.path())));
    assert!(a.reroute().await.expect("routes"));
    let out = d.path().join("out");
    let mc0 = checked(&f0, &out);
    // No plugin status file: a drain stage waits stage_wait_ms, then the
    // final set follows.
    assert!(!out.join(PLUGIN_STATUS).exists());
    let t = Instant::now();
    while !a.dqr_ready() {
        assert!(t.elapsed() < Duration::from_secs(60), "no channel list");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A link of the tree fails.
    let plan = mc0.plan.as_ref().expect("plan");
    let v = *plan.tree.order.last().expect("switches");
    let link = plan.tree.down[v as usize];
    let f1 = apply_faults(&f0, &[Fault::Link(link)]);
    put_topology(d.path(), &f1);
    assert!(a.reroute().await.expect("reroutes"));
    let s = a.subnet.load_full().expect("routed");
    let u = s
        .report
        .routing
        .as_ref()
        .and_then(|r| r.update.clone())
        .expect("update");
    let mc1 = checked(&f1, &out);
    let plan1 = mc1.plan.as_ref().expect("plan");
    assert_ne!(
        plan1.tree, plan.tree,
        "{u:?}: the tree went around the fault"
    );
    let r1 = tableset::read_set(&f1, &out).expect("set");
    assert_eq!(
        check_mixed(&f1, &r1, &mc0, &mc1),
        None,
        "old and new mix safely"
    );
    assert_eq!(
        s.mcast.as_ref(),
        Some(&mc1),
        "the trees in force are the set's"
    );

    // The link comes back: a recompute keeps the tree repaired, not new.
    put_topology(d.path(), &f0);
    if a.reroute().await.expect("restored") {
        let mc2 = checked(&f0, &out);
        let r2 = tableset::read_set(&f0, &out).expect("set");
        assert_eq!(check_mixed(&f0, &r2, &mc1, &mc2), None);
    }
}

#[test]
fn groups_need_a_vl_and_an_sl_to_spare() {
    let d = tempfile::tempdir().expect("tmp");
    let text = "agent_id = \"a\"\nsubnet_prefix = \"0x1\"\ntopology = \"t.net\"\ninsecure = true\n\
                max_vls = 1\nmcast_groups = \"groups.txt\"\n";
    let p = d.path().join("agent.toml");
    write_file(&p, text).expect("config");
    let e = AgentConfig::load(&p).expect_err("refused");
    assert!(e.to_string().contains("mcast_groups needs a VL"), "{e}");
}
