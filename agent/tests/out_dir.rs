//! The agent's out_dir gets what `ibfabric route` gives a directory: the
//! tables of an earlier engine that the new one does not set are removed,
//! a failed write leaves the previous tables whole and no temporary file,
//! a topology with two ports on one GUID is refused with its line, and a
//! topology with LMC gets every LID routed and written.

use agent::config::{AgentConfig, ConfigFile};
use agent::subnet::{RouteError, route_subnet};
use fabric::formats::{ibnetdiscover, tableset, write_file};
use std::path::Path;

const LFTS: &str = "ibfabric-lfts.bin";
const SL2VL: &str = "ibfabric-sl2vl.bin";
const PATH_SL: &str = "ibfabric-pathsl.bin";
const MAPPING: &str = "ibfabric-mapping.txt";
const MANIFEST: &str = "ibfabric-tables.txt";

fn config(dir: &Path, engine: &str) -> AgentConfig {
    let text = format!(
        "agent_id = \"a\"\nsubnet_prefix = \"0xfec0000000000001\"\ntopology = \"torus.net\"\nengine = \"{engine}\"\nout_dir = \"out\"\ninsecure = true\n"
    );
    let p = dir.join("agent.toml");
    write_file(&p, &text).expect("config");
    AgentConfig::load(&p).expect("valid config")
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Verifies what the directory holds, as `ibfabric verify --dir` reads it.
fn verify_dir(f: &fabric::Fabric, out: &Path) -> fabric::verify::Report {
    let routing = tableset::read_set(f, out).expect("a whole set");
    fabric::verify::verify(f, &routing)
}

fn torus(dir: &Path) -> fabric::Fabric {
    let f = fabric::testing::cyclic_torus().expect("torus");
    write_file(&dir.join("torus.net"), &ibnetdiscover::write(&f)).expect("topology");
    f
}

#[test]
fn a_new_engine_removes_the_tables_of_the_old_one_and_keeps_the_mapping() {
    let d = tempfile::tempdir().expect("tmp");
    let f = torus(d.path());
    let out = d.path().join("out");
    let first = route_subnet(&config(d.path(), "dfsssp")).expect("routes");
    assert_eq!(names(&out), [LFTS, PATH_SL, SL2VL, MANIFEST]);
    assert_eq!(
        verify_dir(&f, &out).vls_used,
        first.routing.report().vls_used
    );
    // The operator's copy of the controller's mapping is no table file.
    write_file(&out.join(MAPPING), "# mapping\n").expect("mapping");

    let second = route_subnet(&config(d.path(), "updn")).expect("routes");
    assert_eq!(names(&out), [LFTS, MAPPING, MANIFEST]);
    let want = second.routing.report();
    let got = verify_dir(&f, &out);
    assert_eq!(
        (
            got.vls_used,
            got.sls_used,
            got.deadlock_free(),
            got.broken_pairs
        ),
        (
            want.vls_used,
            want.sls_used,
            want.deadlock_free(),
            want.broken_pairs
        )
    );
}

#[test]
fn a_failed_write_leaves_the_previous_tables_whole() {
    let d = tempfile::tempdir().expect("tmp");
    torus(d.path());
    let out = d.path().join("out");
    route_subnet(&config(d.path(), "updn")).expect("routes");
    let before = std::fs::read(out.join(LFTS)).expect("LFTs");
    // Something in the way of the path SLs: DF-SSSP's LFTs and SL-to-VL
    // tables are written, but must not replace anything.
    std::fs::create_dir(out.join(PATH_SL)).expect("obstacle");
    let err = route_subnet(&config(d.path(), "dfsssp"))
        .err()
        .expect("fails");
    assert!(matches!(err, RouteError::Fabric(_)), "{err}");
    assert!(err.to_string().contains(PATH_SL), "{err}");
    assert!(
        std::fs::read(out.join(LFTS)).expect("LFTs") == before,
        "the LFTs in place are the previous engine's"
    );
    assert_eq!(
        names(&out),
        [LFTS, PATH_SL, MANIFEST],
        "no SL2VL, no temporary file"
    );
    // The manifest still vouches for the set in place, which OpenSM's
    // plugin may apply.
    fabric::formats::tableset::check_dir(&out).expect("the set in place is whole");
}

#[test]
fn a_topology_with_one_port_guid_on_two_cas_is_refused_with_its_line() {
    let d = tempfile::tempdir().expect("tmp");
    let f = torus(d.path());
    // The second CA takes the first one's port GUID.
    let ports: Vec<u64> = f.endports().iter().map(|&s| f.port_guid(s)).collect();
    let text = ibnetdiscover::write(&f);
    let second = format!("{:x}", ports[1]);
    let first = format!("{:x}", ports[0]);
    let line = text
        .lines()
        .position(|l| l.starts_with(&format!("[1]({second})")))
        .expect("the second CA's port line")
        + 1;
    write_file(
        &d.path().join("torus.net"),
        &text.replace(&format!("({second})"), &format!("({first})")),
    )
    .expect("topology");
    let err = route_subnet(&config(d.path(), "updn"))
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("torus.net:{line}: port GUID 0x{first:0>16} of ")),
        "{msg}"
    );
    assert!(msg.contains("is already the port GUID of"), "{msg}");
    assert!(!d.path().join("out").exists(), "nothing written");
}

/// An agent on a fabric with LMC: every LID of every port routed,
/// verified and written (the set reads back and verifies LID by LID); an
/// engine that routes one LID per port is refused by name.
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
    // The report carries each port's base LID and LMC.
    assert_eq!(routed.report.end_ports.len(), f.endports().len());
    for p in &routed.report.end_ports {
        assert_eq!((p.lmc, p.lid % 2), (1, 0), "{p:?}");
    }
    let err = route_subnet(&config(d.path(), "ecube"))
        .err()
        .expect("ecube routes one LID per port")
        .to_string();
    assert!(
        err.contains("engine ecube routes one LID per port"),
        "{err}"
    );
}
