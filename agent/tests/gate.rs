//! The agent routes through the verification gate: tables with a
//! dependency cycle never reach its out_dir or its report.

use agent::config::{AgentConfig, ConfigFile};
use agent::subnet::{RouteError, route_subnet, route_subnet_with};
use fabric::formats::{ibnetdiscover, write_file};
use fabric::testing::{MislabelledEngine, cyclic_torus};
use fabric::verify::Refusal;

fn config(dir: &std::path::Path, engine: &str) -> AgentConfig {
    let text = format!(
        "agent_id = \"a\"\nsubnet_prefix = \"0xfec0000000000001\"\ntopology = \"torus.net\"\nengine = \"{engine}\"\nout_dir = \"out\"\ninsecure = true\n"
    );
    let p = dir.join("agent.toml");
    write_file(&p, &text).expect("config");
    AgentConfig::load(&p).expect("valid config")
}

#[test]
fn the_agent_refuses_a_cyclic_routing_from_an_engine_that_claims_deadlock_freedom() {
    let d = tempfile::tempdir().expect("tmp");
    let f = cyclic_torus().expect("torus");
    write_file(&d.path().join("torus.net"), &ibnetdiscover::write(&f)).expect("topology");
    let cfg = config(d.path(), "dfdn");
    let err = route_subnet_with(&cfg, &MislabelledEngine)
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            RouteError::Refused {
                refusal: Refusal::EngineBroken { .. },
                ..
            }
        ),
        "{err}"
    );
    assert!(!d.path().join("out").exists(), "nothing written");
    // MinHop does not claim deadlock freedom, but an agent feeds a live
    // fabric: its cycle is refused too.
    let err = route_subnet(&config(d.path(), "minhop"))
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            RouteError::Refused {
                refusal: Refusal::Cycle { .. },
                ..
            }
        ),
        "{err}"
    );
    assert!(!d.path().join("out").exists(), "nothing written");
    // DF-DN passes, writes its tables and reports them verified.
    let ok = route_subnet(&config(d.path(), "dfdn")).expect("routes");
    let r = ok.report.routing.as_ref().expect("routing result");
    assert!(r.verified && r.deadlock_free, "{r:?}");
    assert!(d.path().join("out/ibfabric-sl2vl.bin").is_file());
}
