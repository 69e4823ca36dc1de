//! Multicast on a simulated fabric: OpenSM with the ibfabric plugin builds
//! the trees of the groups members join (`ibfabric-mcast-join`, proxy
//! joins through the SA) from the set's plan; the trees read back from the
//! switches (`dump_mfts`) equal the set's and verify deadlock free with the
//! unicast tables. Without a plan, OpenSM's own trees for the same groups
//! close a dependency cycle with LASH's routes on a Dragonfly: the case the
//! plan exists for. A group on another SL than the plan's gets no tree.

use integration_tests::sim::{Sim, plugin_conf};
use integration_tests::{ibfabric, ibfabric_bin, opensm_plugin_build};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    net: PathBuf,
    plugin: PathBuf,
}

fn fixture() -> Fixture {
    let plugin = opensm_plugin_build().expect("the plugin is built");
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().to_path_buf();
    let net = root.join("df2.net");
    ibfabric(&[
        "gen",
        "dragonfly",
        "--p",
        "2",
        "-o",
        net.to_str().expect("utf-8"),
    ])
    .expect("gen");
    Fixture {
        _tmp: tmp,
        root,
        net,
        plugin,
    }
}

/// Every CA port of the fabric, as the join tool reads them.
fn ca_ports(net: &Path) -> Vec<String> {
    let f = fabric::formats::ibnetdiscover::read(net).expect("topology");
    fabric::mcast::all_members(&f)
        .into_iter()
        .map(|s| format!("{:#018x}", f.port_guid(s)))
        .collect()
}

/// Starts ibsim and OpenSM with the plugin on `tables`, the default
/// partition's IPoIB group on `sl`.
fn start(fx: &Fixture, name: &str, tables: &Path, sl: u8) -> Sim {
    let dir = fx.root.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let part = dir.join("partitions.conf");
    std::fs::write(
        &part,
        format!("Default=0x7fff, ipoib, sl={sl}, defmember=full : ALL=full ;\n"),
    )
    .expect("partitions");
    let mut sim = Sim::start(&fx.net, &dir).expect("ibsim loads the topology");
    sim.run_opensm_with(
        &format!(
            "{}qos TRUE\npartition_config_file {}\n",
            plugin_conf(tables),
            part.display()
        ),
        &[("LD_LIBRARY_PATH", &fx.plugin)],
    )
    .expect("OpenSM with the plugin brings the subnet up");
    sim
}

/// Joins every CA port to IPoIB's broadcast group; returns the MLID.
fn join_all(fx: &Fixture, sim: &Sim, sl: u8) -> String {
    let mut cmd = sim.command(fx.plugin.join("ibfabric-mcast-join"));
    let ports = ca_ports(&fx.net);
    let input = fx.root.join("ports.txt");
    std::fs::write(&input, ports.join("\n")).expect("ports");
    let out = cmd
        .stdin(std::fs::File::open(&input).expect("ports"))
        .output()
        .expect("the join tool runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "joins answered: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), ports.len(), "one answer per port:\n{text}");
    let mlid = lines[0]
        .split_whitespace()
        .nth(1)
        .expect("an MLID")
        .to_string();
    for l in &lines {
        let w: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(w[1], mlid, "one group: {l}");
        assert_eq!(w[2], sl.to_string(), "the partition's SL: {l}");
    }
    mlid
}

/// The switches' multicast tables, read back.
fn read_back(sim: &Sim, dir: &Path) -> PathBuf {
    let p = dir.join("mfts.dump");
    // OpenSM programs the tables after the join; give it a moment.
    for _ in 0..50 {
        let text = sim.diag("dump_mfts", &[]).expect("dump_mfts");
        if text.lines().any(|l| l.starts_with("0xc000")) {
            std::fs::write(&p, &text).expect("write");
            return p;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let text = sim.diag("dump_mfts", &[]).expect("dump_mfts");
    std::fs::write(&p, &text).expect("write");
    p
}

/// `ibfabric route` of LASH into `tables`, with every CA port in IPoIB's
/// broadcast group when `groups`; its JSON.
fn route(fx: &Fixture, tables: &Path, groups: bool) -> Value {
    let mut args = vec![
        "route".to_string(),
        "-t".into(),
        fx.net.display().to_string(),
        "-e".into(),
        "lash".into(),
        "--json".into(),
        "-o".into(),
        tables.display().to_string(),
    ];
    if groups {
        let g = fx.root.join("groups.txt");
        std::fs::write(&g, "0xC000 sl=0 all\n").expect("groups");
        args.extend(["--mcast-groups".into(), g.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    serde_json::from_str(&ibfabric(&args).expect("route")).expect("route --json")
}

fn verify(fx: &Fixture, tables: &Path, sl: u8, mfts: &Path) -> (Value, i32) {
    let groups = fx.root.join(format!("groups-sl{sl}.txt"));
    std::fs::write(&groups, format!("0xC000 sl={sl} all\n")).expect("groups");
    let out = std::process::Command::new(ibfabric_bin().expect("binary"))
        .args(["verify", "--json", "-t"])
        .arg(&fx.net)
        .arg("-d")
        .arg(tables)
        .arg("--mcast-groups")
        .arg(&groups)
        .arg("--mfts")
        .arg(mfts)
        .output()
        .expect("verify runs");
    integration_tests::json_and_code(&out, "verify")
}

#[test]
fn trees_from_the_plan_reach_the_switches_and_verify_with_the_routes() {
    let fx = fixture();
    let tables = fx.root.join("tables");
    let routed = route(&fx, &tables, true);
    assert_eq!(routed["multicast"]["cycle"], Value::Null, "{routed}");
    assert!(tables.join("ibfabric-mcast-tree.txt").is_file());

    let sim = start(&fx, "plan", &tables, 15);
    assert!(
        sim.opensm_log()
            .contains("multicast trees from the set's plan, on SL 15")
    );
    assert_eq!(join_all(&fx, &sim, 15), "0xc000");
    let mfts = read_back(&sim, &fx.root.join("plan"));
    let (v, code) = verify(&fx, &tables, 15, &mfts);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["multicast"]["broken"], 0, "{v}");
    assert_eq!(v["multicast"]["cycle"], Value::Null, "{v}");
    assert_eq!(v["multicast"]["vls_used"], 1, "{v}");

    // What the switches hold is the set's tree for every member.
    let f = fabric::formats::ibnetdiscover::read(&fx.net).expect("topology");
    let read = fabric::formats::mcast::parse_mfts(
        &f,
        &std::fs::read_to_string(&mfts).expect("mfts"),
        &mfts,
    )
    .expect("dump_mfts parses");
    let set = fabric::formats::tableset::read_multicast(&f, &tables)
        .expect("the set reads")
        .expect("the set has multicast");
    assert_eq!(read, set.mfts, "the switches hold the set's trees");
}

#[test]
fn opensm_trees_without_a_plan_close_a_cycle_with_lash_on_a_dragonfly() {
    let fx = fixture();
    let tables = fx.root.join("tables");
    route(&fx, &tables, false);
    let sim = start(&fx, "default", &tables, 0);
    assert!(
        sim.opensm_log()
            .contains("OpenSM builds its own multicast trees")
    );
    join_all(&fx, &sim, 0);
    let mfts = read_back(&sim, &fx.root.join("default"));
    let (v, code) = verify(&fx, &tables, 0, &mfts);
    assert_eq!(code, 3, "not deadlock free: {v}");
    assert!(
        v["deadlock_free"].as_bool().unwrap_or(false),
        "unicast alone is: {v}"
    );
    assert_eq!(v["multicast"]["broken"], 0, "OpenSM's trees deliver: {v}");
    assert_eq!(
        v["multicast"]["cycle_mlids"],
        serde_json::json!([0xC000]),
        "{v}"
    );
}

#[test]
fn a_group_on_another_sl_than_the_plans_gets_no_tree() {
    let fx = fixture();
    let tables = fx.root.join("tables");
    route(&fx, &tables, true);
    let mut sim = start(&fx, "wrong-sl", &tables, 0);
    join_all(&fx, &sim, 0);
    sim.wait_log("but the set reserves SL 15", 1, Duration::from_secs(20))
        .expect("the plugin says why");
    let text = sim.diag("dump_mfts", &[]).expect("dump_mfts");
    assert!(
        !text.lines().any(|l| l.starts_with("0xc000")),
        "no switch forwards the group:\n{text}"
    );
}

/// A plan edited to name a link the fabric does not have (re-digested, so
/// the set is whole): the plugin refuses the set, and no switch forwards
/// the group.
#[test]
fn a_plan_that_does_not_fit_the_fabric_refuses_the_set() {
    use fabric::formats::tableset;
    let fx = fixture();
    let tables = fx.root.join("tables");
    route(&fx, &tables, true);
    let plan_path = tables.join("ibfabric-mcast-tree.txt");
    let plan = std::fs::read_to_string(&plan_path).expect("plan");
    // The first child's link moved to its parent's port 1, a host port.
    let child = plan
        .lines()
        .find(|l| l.contains(" down "))
        .expect("a child");
    let w: Vec<&str> = child.split_whitespace().collect();
    assert_ne!(w[5], "1", "{child}");
    let bad = plan.replacen(
        child,
        &child.replacen(&format!(" down {} ", w[5]), " down 1 ", 1),
        1,
    );
    std::fs::write(&plan_path, &bad).expect("edit");
    assert!(
        tableset::check_dir(&tables).is_err(),
        "the edit breaks the digest"
    );
    let text = std::fs::read_to_string(tables.join(tableset::MANIFEST_FILE)).expect("manifest");
    let mut set = tableset::parse(&text, Path::new("m")).expect("manifest");
    for e in &mut set.files {
        if e.name == "ibfabric-mcast-tree.txt" {
            let mut h = tableset::Fnv1a::default();
            h.update(bad.as_bytes());
            e.size = bad.len() as u64;
            e.digest = h.finish();
        }
    }
    std::fs::write(tables.join(tableset::MANIFEST_FILE), tableset::write(&set)).expect("manifest");
    tableset::check_dir(&tables).expect("whole again");

    let dir = fx.root.join("misfit");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut sim = Sim::start(&fx.net, &dir).expect("ibsim");
    let err = sim
        .run_opensm_with(
            &format!("{}qos TRUE\n", plugin_conf(&tables)),
            &[("LD_LIBRARY_PATH", &fx.plugin)],
        )
        .err();
    let log = sim.opensm_log();
    assert!(
        log.contains("multicast plan's link") && log.contains("is not in the fabric"),
        "the plugin names the link ({err:?}):\n{log}"
    );
}
