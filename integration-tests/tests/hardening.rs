//! Faults and bad input on real processes: what an operator's mistake, a
//! discovery caught mid-write or a client misusing its certificate must
//! not do to the fabric's routes.

use integration_tests::cluster::{Cluster, wait_for};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const CONVERGE: Duration = Duration::from_secs(30);

/// The table files of a set directory, by name: not the controller's
/// mapping and what is made of it (a mapping may arrive at any time), nor
/// the manifest and temporary files (a restarted agent writes the same
/// tables again under a new generation).
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mapping = [
        fabric::formats::tableset::MANIFEST_FILE,
        fabric::formats::routes_files::MAPPING_FILE,
        fabric::formats::routes_files::EGRESS_FILE,
        "prefix-routes.conf",
    ];
    std::fs::read_dir(dir)
        .expect("table set")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .filter(|e| !mapping.iter().any(|m| e.file_name() == **m))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("reads"),
            )
        })
        .collect()
}

async fn generation(c: &Cluster, prefix: u64) -> u64 {
    c.state(0)
        .await
        .and_then(|st| {
            st.subnets
                .iter()
                .find(|s| s.subnet_prefix == prefix)
                .map(|s| s.generation)
        })
        .unwrap_or(0)
}

/// `ibnetdiscover > file` leaves the file empty while discovery runs: an
/// agent watching it keeps the tables in force (files and report) and
/// says why; a sharp shrink is held until it persists, then routed; the
/// fabric coming back is routed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_or_shrunken_discovery_keeps_the_tables_until_it_persists() {
    let mut c = Cluster::start(2, 1, "updn").expect("cluster starts");
    c.converged(0, CONVERGE).await.expect("converges");
    let cfg = c.agents[0].config.clone();
    let text = std::fs::read_to_string(&cfg).expect("config");
    std::fs::write(
        &cfg,
        text.replacen(
            "\n[tls]",
            "watch_topology = true\ndiscovery_hold_ms = 2500\n\n[tls]",
            1,
        ),
    )
    .expect("config");
    c.start_agent(0).expect("agent restarts");
    c.converged(0, CONVERGE).await.expect("converges again");
    // The controller may still hold the report of the agent before the
    // restart: the new one's tables are in place once it says so.
    wait_for("the restarted agent to route", CONVERGE, || async {
        c.agents[0]
            .proc
            .log()
            .contains("subnet routed and verified")
            .then_some(())
    })
    .await
    .expect("routed");
    let prefix = c.agents[0].prefix;
    let out = c.path(&format!("out/{}", c.agents[0].name));
    let net = c.path(&format!("{}.net", c.fabric.subnets[0].name));
    let whole = std::fs::read_to_string(&net).expect("topology");
    let before = files(&out);
    let gen0 = generation(&c, prefix).await;
    assert!(gen0 > 0);
    for (i, empty) in ["", "# ibnetdiscover is still running\n"]
        .iter()
        .enumerate()
    {
        std::fs::write(&net, empty).expect("write");
        let said = wait_for("the agent to refuse the empty file", CONVERGE, || async {
            let n = c.agents[0]
                .proc
                .log()
                .matches("an empty or partial discovery")
                .count();
            (n > i).then_some(())
        })
        .await;
        assert!(said.is_ok(), "{}", c.agents[0].proc.log_tail());
        let now = files(&out);
        let changed: Vec<&String> = now
            .keys()
            .chain(before.keys())
            .filter(|k| now.get(*k) != before.get(*k))
            .collect();
        assert!(
            changed.is_empty(),
            "the tables in force were replaced ({i}): {changed:?}\n{}",
            c.agents[0].proc.log()
        );
        assert_eq!(generation(&c, prefix).await, gen0, "a new report was sent");
    }
    // Half the subnet gone at once: held, then routed when it persists.
    let small = fabric::multi::fat_tree_subnets(2, 1, 2, 2, 1).expect("fabric");
    let shrunk = fabric::formats::ibnetdiscover::write(&small.subnets[0].fabric);
    let t = std::time::Instant::now();
    std::fs::write(&net, &shrunk).expect("write");
    wait_for("the agent to hold the shrink", CONVERGE, || async {
        c.agents[0]
            .proc
            .log()
            .contains("more than half gone")
            .then_some(())
    })
    .await
    .expect("held");
    if t.elapsed() < Duration::from_millis(2000) {
        assert!(files(&out) == before, "routed before the hold");
    }
    wait_for("the shrink to be routed", CONVERGE, || async {
        (generation(&c, prefix).await > gen0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.agents[0].proc.log_tail()));
    assert!(
        t.elapsed() >= Duration::from_millis(2500),
        "{:?}",
        t.elapsed()
    );
    assert!(files(&out) != before);
    // The fabric back: routed at once (growth is no shrink).
    let gen1 = generation(&c, prefix).await;
    std::fs::write(&net, &whole).expect("write");
    wait_for("the whole fabric to be routed", CONVERGE, || async {
        (generation(&c, prefix).await > gen1).then_some(())
    })
    .await
    .expect("routed");
}
