//! An agent on a fabric with LMC: every LID of every port routed,
//! verified and written (the set reads back and verifies LID by LID); an
//! engine that routes one LID per port is refused by name.

use agent::config::{AgentConfig, ConfigFile};
use agent::subnet::route_subnet;
use fabric::formats::{ibnetdiscover, tableset, write_file};
use std::path::Path;

fn config(dir: &Path, engine: &str) -> AgentConfig {
    let text = format!(
        "agent_id = \"a\"\nsubnet_prefix = \"0xfec0000000000001\"\ntopology = \"torus.net\"\nengine = \"{engine}\"\nout_dir = \"out\"\ninsecure = true\n"
    );
    let p = dir.join("agent.toml");
    write_file(&p, &text).expect("config");
    AgentConfig::load(&p).expect("valid config")
}

#[test]
fn every_lid_is_routed_written_and_verified() {
    let d = tempfile::tempdir().expect("tmp");
    let torus = fabric::testing::cyclic_torus().expect("torus");
    let f = fabric::generate::with_lmc(&torus, 1).expect("LMC");
    write_file(&d.path().join("torus.net"), &ibnetdiscover::write(&f)).expect("topology");
    let routed = route_subnet(&config(d.path(), "dfsssp")).expect("routes");
    let rep = routed.routing.report();
    assert!(rep.ok(), "{rep:?}");
    assert_eq!(rep.end_lids, f.endports().len() * 2);
    let set = tableset::read_set(&f, &d.path().join("out")).expect("a whole set");
    let back = fabric::verify::verify(&f, &set);
    assert_eq!(back.pairs, rep.pairs);
    assert!(back.ok(), "{back:?}");
    for si in 0..f.switches().len() as u32 {
        for &(_, lid) in f.end_lids() {
            assert_ne!(set.lfts.get(si, lid), fabric::tables::NO_PATH);
        }
    }
    let err = route_subnet(&config(d.path(), "nue"))
        .err()
        .expect("nue routes one LID per port")
        .to_string();
    assert!(err.contains("engine nue routes one LID per port"), "{err}");
}
