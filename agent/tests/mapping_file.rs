//! An agent with an operator's mapping file (the inter-subnet paper's
//! Code 1) answers remote path queries from it before any controller
//! exists, and falls back to backup and default routes when a router
//! leaves its topology.

use agent::Agent;
use agent::config::{AgentConfig, ConfigFile};
use fabric::formats::mapping::gid_text;
use fabric::intersubnet::{Gid, GlobalView};
use fabric::multi::fat_tree_subnets;
use std::path::Path;

fn write_topology(path: &Path, routers: u32) -> GlobalView {
    let m = fat_tree_subnets(2, 2, 2, 2, routers).expect("generates");
    std::fs::write(
        path,
        fabric::formats::ibnetdiscover::write(&m.subnets[0].fabric),
    )
    .expect("write topology");
    GlobalView::from_multi(&m)
}

fn config(dir: &Path, prefix: u64) -> AgentConfig {
    let text = format!(
        "agent_id = \"s0\"\nsubnet_prefix = \"{prefix:#018x}\"\ntopology = \"s0.net\"\n\
         engine = \"updn\"\nmapping_file = \"s0.map\"\nout_dir = \"out\"\ninsecure = true\n"
    );
    let p = dir.join("agent.toml");
    std::fs::write(&p, text).expect("write config");
    AgentConfig::load(&p).expect("config loads")
}

#[tokio::test]
async fn routes_follow_the_file_then_its_backups_and_defaults() {
    let dir = tempfile::tempdir().expect("tempdir");
    let view = write_topology(&dir.path().join("s0.net"), 2);
    let (local, remote) = (&view.subnets[0], &view.subnets[1]);
    // Router ports in subnet 0, one per router (the view sorts by port).
    let port_of = |router: usize| {
        let guids: std::collections::BTreeSet<u64> =
            local.router_ports.iter().map(|p| p.router_guid).collect();
        let r = *guids.iter().nth(router).expect("router");
        local
            .router_ports
            .iter()
            .find(|p| p.router_guid == r)
            .expect("port")
            .clone()
    };
    let (r0, r1) = (port_of(0), port_of(1));
    let dst = |i: usize| Gid {
        prefix: remote.prefix,
        guid: remote.end_ports[i].guid,
    };
    // Destination 0: router 1, backed up by router 0. Destination 1: not
    // listed, so the defaults (router 1 first).
    let file = format!(
        "{d0} {g1:#018x}\n{d0} {g0:#018x}\n#default route\n* {g1:#018x}\n* {g0:#018x}\n",
        d0 = gid_text(dst(0)),
        g0 = r0.port_guid,
        g1 = r1.port_guid,
    );
    std::fs::write(dir.path().join("s0.map"), &file).expect("write map");
    let a = Agent::new(config(dir.path(), local.prefix));
    a.reroute().await.expect("routes");
    let src = Gid {
        prefix: local.prefix,
        guid: local.end_ports[0].guid,
    };
    for d in [dst(0), dst(1)] {
        let r = a.path_query(src, d).expect("remote path");
        assert!(r.remote);
        assert_eq!(r.router_port_guid, r1.port_guid, "{d}");
        assert_eq!(r.dlid, r1.lid as u32);
        assert_eq!(r.mapping_version, 0, "served from the file");
    }

    // Router 1 leaves the subnet: its lines fall through to the backups.
    write_topology(&dir.path().join("s0.net"), 1);
    a.reroute().await.expect("reroutes");
    let s = a.subnet.load_full().expect("routed");
    let r0_lid = s.router_port_lid(r0.port_guid).expect("router 0 stays");
    assert!(
        s.router_port_lid(r1.port_guid).is_none(),
        "router 1 is gone"
    );
    for d in [dst(0), dst(1)] {
        let r = a.path_query(src, d).expect("remote path");
        assert_eq!(r.router_port_guid, r0.port_guid, "{d}");
        assert_eq!(r.dlid, r0_lid as u32);
    }

    // An agent (re)started during the outage reads the same file: the lines
    // for the absent router wait, the backups serve.
    let b = Agent::new(config(dir.path(), local.prefix));
    b.reroute().await.expect("starts during the outage");
    for d in [dst(0), dst(1)] {
        let r = b.path_query(src, d).expect("remote path");
        assert_eq!(r.router_port_guid, r0.port_guid, "{d}");
    }
}

#[tokio::test]
async fn a_bad_mapping_file_stops_the_agent_with_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let view = write_topology(&dir.path().join("s0.net"), 2);
    std::fs::write(
        dir.path().join("s0.map"),
        "# routes\n* 0x0000000000000bad\n",
    )
    .expect("write map");
    let a = Agent::new(config(dir.path(), view.subnets[0].prefix));
    let e = a.reroute().await.expect_err("refused").to_string();
    assert!(e.contains("s0.map:2:"), "{e}");
    assert!(e.contains("not a router port"), "{e}");
}
