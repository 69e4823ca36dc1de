//! The agent's report carries its subnet's dependency summary, made from
//! the tables the gate accepted, for the controller's whole-fabric check.

use agent::config::{AgentConfig, ConfigFile};
use agent::subnet::route_subnet;
use fabric::formats::{ibnetdiscover, write_file};
use fabric::multi::fat_tree_subnets;

fn config(dir: &std::path::Path) -> AgentConfig {
    let text = "agent_id = \"a\"\nsubnet_prefix = \"0xfec0000000000001\"\n\
                topology = \"s.net\"\nengine = \"lash\"\ninsecure = true\n";
    let p = dir.join("agent.toml");
    write_file(&p, text).expect("config");
    AgentConfig::load(&p).expect("valid config")
}

#[test]
fn the_report_carries_the_summary_of_the_verified_tables() {
    let d = tempfile::tempdir().expect("tmp");
    let m = fat_tree_subnets(2, 2, 2, 2, 2).expect("fabric");
    write_file(
        &d.path().join("s.net"),
        &ibnetdiscover::write(&m.subnets[0].fabric),
    )
    .expect("topology");
    let routed = route_subnet(&config(d.path())).expect("routes");
    let wire = routed.report.dependencies.as_ref().expect("a summary");
    let back = proto::convert::summary_from_wire(wire, &routed.report).expect("converts");
    assert_eq!(Ok(&back), routed.routing.dependencies());
    // Two routers with a port on each of the two spines.
    assert_eq!(back.ports.len(), 4);
    assert_eq!(back.host_lids.len(), routed.report.end_ports.len());

    // A subnet without router ports sends none.
    let t = fabric::generate::generate(&fabric::generate::Topology::Mesh {
        dims: vec![3, 3],
        torus: true,
        hosts: 1,
    })
    .expect("torus");
    write_file(&d.path().join("s.net"), &ibnetdiscover::write(&t)).expect("topology");
    let routed = route_subnet(&config(d.path())).expect("routes");
    assert!(routed.report.dependencies.is_none());
}
