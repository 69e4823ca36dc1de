//! The tables reach a (simulated) fabric whole: OpenSM with the ibfabric
//! plugin (`opensm-plugin/`) applies the set `ibfabric route` wrote, and
//! what the simulated switches and the SA then hold, read back through
//! infiniband-diags by `ibfabric audit`, equals the files entry by entry
//! (matched by GUID: OpenSM assigns its own LIDs) and verifies deadlock
//! free on its own. A truncated set is refused and the tables in force stay.

use integration_tests::sim::Sim;
use integration_tests::{ibfabric, ibfabric_bin, opensm_plugin_build};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    net: PathBuf,
    plugin: PathBuf,
}

fn fixture(gen: &[&str]) -> Fixture {
    let plugin = opensm_plugin_build().expect("the plugin is built");
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let net = root.join("fabric.net");
    let mut args = vec!["gen"];
    args.extend_from_slice(gen);
    args.extend_from_slice(&["-o", net.to_str().unwrap()]);
    ibfabric(&args).expect("gen");
    Fixture {
        _tmp: tmp,
        root,
        net,
        plugin,
    }
}

fn route(fx: &Fixture, engine: &str, extra: &[&str], out: &Path) -> Value {
    let mut args = vec![
        "route",
        "-t",
        fx.net.to_str().unwrap(),
        "-e",
        engine,
        "--require-deadlock-free",
        "--json",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    serde_json::from_str(&ibfabric(&args).expect("route")).expect("route --json")
}

fn start(fx: &Fixture, tables: &Path) -> Sim {
    let simdir = fx.root.join("sim");
    std::fs::create_dir_all(&simdir).unwrap();
    let mut sim = Sim::start(&fx.net, &simdir).expect("ibsim loads the topology");
    let log = sim
        .run_opensm_with(
            &format!(
                "event_plugin_name ibfabric\n\
                 event_plugin_options ibfabric_dir={} ibfabric_poll_ms=200\n\
                 routing_engine ibfabric,no_fallback\n\
                 qos TRUE\n",
                tables.display()
            ),
            &[("LD_LIBRARY_PATH", &fx.plugin)],
        )
        .expect("OpenSM with the plugin brings the subnet up");
    assert!(
        log.contains("ibfabric: loaded set")
            && log.contains("ibfabric tables configured on all switches"),
        "OpenSM used the plugin's engine:\n{log}"
    );
    sim
}

/// `ibfabric audit` against the running fabric; returns its JSON and exit
/// code.
fn audit(fx: &Fixture, sim: &Sim, expect: &Path, name: &str) -> (Value, i32) {
    let rb = fx.root.join(name);
    let out = sim
        .command(ibfabric_bin().unwrap())
        .args(["audit", "--json", "-o"])
        .arg(&rb)
        .arg("--expect")
        .arg(expect)
        .arg("-t")
        .arg(&fx.net)
        .arg("--pathrecord-tool")
        .arg(fx.plugin.join("ibfabric-pathrecord-sl"))
        .output()
        .expect("audit runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "audit --json: {e}\nstdout: {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().unwrap_or(-1))
}

/// The read-back files verify on their own with `ibfabric verify`.
fn verify_read_back(fx: &Fixture, name: &str) -> Value {
    let rb = fx.root.join(name);
    let p = |f: &str| rb.join(f).to_str().unwrap().to_string();
    let text = ibfabric(&[
        "verify",
        "--json",
        "-t",
        &p("ibnetdiscover.txt"),
        "--lfts",
        &p("dump_lfts.txt"),
        "--sl2vl",
        &p("sl2vl.txt"),
        "--path-sl",
        &p("pathrecords.txt"),
    ])
    .expect("verify of the read-back tables exits 0 (deadlock free, all pairs)");
    serde_json::from_str(&text).unwrap()
}

fn round_trip(gen: &[&str], engine: &str, extra: &[&str]) {
    let fx = fixture(gen);
    let tables = fx.root.join("tables");
    let routed = route(&fx, engine, extra, &tables);
    let info: Value =
        serde_json::from_str(&ibfabric(&["info", "--json", fx.net.to_str().unwrap()]).unwrap())
            .unwrap();
    let (sw, hcas) = (
        info["switches"].as_u64().unwrap(),
        info["cas"].as_u64().unwrap(),
    );
    let mut sim = start(&fx, &tables);
    let (a, code) = audit(&fx, &sim, &tables, "readback");
    sim.stop_opensm();
    let e = &a["expected"];
    assert_eq!(
        e["differences"], 0,
        "live tables differ from the files: {a:#}"
    );
    assert_eq!(code, 0, "audit exit code: {a:#}");
    // Every switch's entry for every port, every ordered HCA pair's SL.
    assert_eq!(e["lft_entries"].as_u64().unwrap(), sw * (sw + hcas));
    assert_eq!(e["path_sls"].as_u64().unwrap(), hcas * (hcas - 1));
    assert!(
        e["sl2vl_rows"].as_u64().unwrap() > sw,
        "SL-to-VL rows compared: {e}"
    );
    assert_eq!(a["deadlock_free"], true);
    assert_eq!(a["all_pairs_routed"], true);
    let v = verify_read_back(&fx, "readback");
    assert_eq!(v["deadlock_free"], true);
    assert_eq!(v["pairs"].as_u64().unwrap(), hcas * (hcas - 1));
    // The live fabric uses the VLs the engine chose: deadlock freedom here
    // rests on the SL-to-VL tables and path SLs having arrived.
    assert_eq!(
        v["vls"], routed["vls"],
        "VLs in use live vs as routed: {v:#} / {routed:#}"
    );
    assert!(v["vls"].as_u64().unwrap() >= 2, "a multi-VL routing: {v:#}");
}

#[test]
fn dfdn_on_a_dragonfly_reaches_the_switches_whole() {
    round_trip(&["dragonfly", "--p", "2"], "dfdn", &[]);
}

#[test]
fn lash_on_a_torus_reaches_the_switches_whole() {
    round_trip(&["torus", "--dims", "3x3x3", "--hosts", "1"], "lash", &[]);
}

#[test]
fn dfsssp_on_a_slim_fly_reaches_the_switches_whole() {
    round_trip(&["slimfly", "--q", "5", "--hosts", "1"], "dfsssp", &[]);
}

#[test]
fn nue_on_a_random_fabric_reaches_the_switches_whole() {
    round_trip(
        &[
            "random",
            "--switches",
            "16",
            "--degree",
            "4",
            "--hosts",
            "2",
            "--seed",
            "7",
        ],
        "nue",
        &[],
    );
}

/// A new set written into the live directory is applied by itself (the
/// plugin polls its manifest); a set whose file is cut short is refused and
/// the switches keep the set in force; SIGHUP retries once it is whole.
#[test]
fn a_truncated_set_is_refused_and_a_whole_one_is_applied() {
    let fx = fixture(&["dragonfly", "--p", "2"]);
    let live = fx.root.join("tables");
    let a = fx.root.join("a");
    let b = fx.root.join("b");
    route(&fx, "dfdn", &[], &a);
    route(&fx, "dfdn", &["--base", "sssp"], &b);
    assert_ne!(
        std::fs::read(a.join("opensm-lfts.dump")).unwrap(),
        std::fs::read(b.join("opensm-lfts.dump")).unwrap(),
        "the two sets differ, so the read-back tells which is in force"
    );
    route(&fx, "dfdn", &[], &live);
    let mut sim = start(&fx, &live);
    let ups = sim.opensm_log().matches("SUBNET UP").count();

    // Set b with its path SLs cut short, manifest last as a writer would.
    let names = ["opensm-lfts.dump", "opensm-sl2vl.dump", "path-sl.txt"];
    for n in names {
        std::fs::copy(b.join(n), live.join(n)).unwrap();
    }
    let psl = std::fs::read(b.join("path-sl.txt")).unwrap();
    std::fs::write(live.join("path-sl.txt"), &psl[..psl.len() / 2]).unwrap();
    std::fs::copy(
        b.join("ibfabric-tables.txt"),
        live.join("ibfabric-tables.txt"),
    )
    .unwrap();
    sim.wait_log("ibfabric: refusing the set", 1, Duration::from_secs(30))
        .expect("the plugin refuses the truncated set");
    sim.wait_log("SUBNET UP", ups + 1, Duration::from_secs(30))
        .expect("the sweep completes on the set in force");
    let log = sim.opensm_log();
    assert!(
        log.contains("path-sl.txt") && log.contains("bytes, the manifest says"),
        "the refusal names the file and why:\n{log}"
    );
    let (r, code) = audit(&fx, &sim, &a, "after-refusal");
    assert_eq!(
        r["expected"]["differences"], 0,
        "set a still in force: {r:#}"
    );
    assert_eq!(code, 0);

    // The file completed; the manifest is the same, so nothing polls it
    // anew: a heavy sweep (SIGHUP, as an operator would) applies it.
    std::fs::write(live.join("path-sl.txt"), &psl).unwrap();
    let loaded = sim.opensm_log().matches("ibfabric: loaded set").count();
    let ups = sim.opensm_log().matches("SUBNET UP").count();
    let pid = sim.opensm_pid().expect("OpenSM runs");
    let t0 = Instant::now();
    assert!(std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    sim.wait_log("ibfabric: loaded set", loaded + 1, Duration::from_secs(30))
        .expect("SIGHUP makes the plugin load the whole set");
    sim.wait_log("SUBNET UP", ups + 1, Duration::from_secs(30))
        .expect("the sweep completes");
    eprintln!(
        "SIGHUP -> set b loaded in {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    let (r, code) = audit(&fx, &sim, &b, "after-reload");
    assert_eq!(r["expected"]["differences"], 0, "set b in force: {r:#}");
    assert_eq!(code, 0);

    // The product's own writer into the live directory: applied by itself.
    let loaded = sim.opensm_log().matches("ibfabric: loaded set").count();
    let ups = sim.opensm_log().matches("SUBNET UP").count();
    let t0 = Instant::now();
    route(&fx, "dfdn", &[], &live);
    sim.wait_log("ibfabric: loaded set", loaded + 1, Duration::from_secs(30))
        .expect("a new manifest is picked up without a signal");
    sim.wait_log("SUBNET UP", ups + 1, Duration::from_secs(30))
        .expect("the sweep completes");
    eprintln!(
        "route -o live -> set loaded in {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    let (r, code) = audit(&fx, &sim, &a, "after-rewrite");
    assert_eq!(r["expected"]["differences"], 0, "set a again: {r:#}");
    assert_eq!(code, 0);
}
