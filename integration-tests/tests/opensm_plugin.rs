//! The tables reach a (simulated) fabric whole: OpenSM with the ibfabric
//! plugin (`opensm-plugin/`) applies the set `ibfabric route` wrote, and
//! what the simulated switches and the SA then hold, read back through
//! infiniband-diags by `ibfabric audit`, equals the files entry by entry
//! (matched by GUID: OpenSM assigns its own LIDs) and verifies deadlock
//! free on its own. A truncated set is refused and the tables in force stay.

use integration_tests::sim::{Sim, plugin_conf};
use integration_tests::{ibfabric, ibfabric_bin, opensm_plugin_build};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    net: PathBuf,
    plugin: PathBuf,
    /// Read SL-to-VL tables with ibfabric-sl2vl-read (one process), else
    /// with one `smpquery sl2vl` per port.
    sl2vl_reader: bool,
    /// `audit --path-sample K`; every pair when `None`.
    path_sample: Option<usize>,
}

fn fixture(gen_args: &[&str]) -> Fixture {
    let plugin = opensm_plugin_build().expect("the plugin is built");
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let net = root.join("fabric.net");
    let mut args = vec!["gen"];
    args.extend_from_slice(gen_args);
    args.extend_from_slice(&["-o", net.to_str().unwrap()]);
    ibfabric(&args).expect("gen");
    Fixture {
        _tmp: tmp,
        root,
        net,
        plugin,
        sl2vl_reader: true,
        path_sample: None,
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
    start_sim(fx, tables, false)
}

fn start_sim(fx: &Fixture, tables: &Path, console: bool) -> Sim {
    let simdir = fx.root.join("sim");
    std::fs::create_dir_all(&simdir).unwrap();
    let mut sim = if console {
        Sim::start_with_console(&fx.net, &simdir)
    } else {
        Sim::start(&fx.net, &simdir)
    }
    .expect("ibsim loads the topology");
    let log = sim
        .run_opensm_with(
            &format!("{}qos TRUE\n", plugin_conf(tables)),
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
    audit_against(fx, sim, expect, &fx.net, name)
}

fn audit_against(fx: &Fixture, sim: &Sim, expect: &Path, topo: &Path, name: &str) -> (Value, i32) {
    let rb = fx.root.join(name);
    let mut cmd = sim.command(ibfabric_bin().unwrap());
    cmd.args(["audit", "--json"]);
    if fx.sl2vl_reader {
        cmd.arg("--sl2vl-tool")
            .arg(fx.plugin.join("ibfabric-sl2vl-read"));
    }
    if let Some(k) = fx.path_sample {
        cmd.arg("--path-sample").arg(k.to_string());
    }
    let out = cmd
        .arg("-o")
        .arg(&rb)
        .arg("--expect")
        .arg(expect)
        .arg("-t")
        .arg(topo)
        .arg("--pathrecord-tool")
        .arg(fx.plugin.join("ibfabric-pathrecord-sl"))
        .output()
        .expect("audit runs");
    integration_tests::json_and_code(&out, "audit")
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

fn round_trip(gen_args: &[&str], engine: &str, extra: &[&str], sl2vl_reader: bool) {
    round_trip_in(gen_args, engine, extra, sl2vl_reader, false)
}

/// Makes the set in `dir` one of an earlier release: OpenSM's text files
/// only (written with `--opensm-dump`), its manifest naming them alone.
fn text_only(dir: &Path) {
    use fabric::formats::tableset;
    let mut set = tableset::check_dir(dir).expect("a whole set");
    for e in set.files.iter().filter(|e| e.name.starts_with("ibfabric-")) {
        std::fs::remove_file(dir.join(&e.name)).expect("remove");
    }
    set.files.retain(|e| !e.name.starts_with("ibfabric-"));
    assert!(
        set.files.len() >= 2,
        "the export was written: {:?}",
        set.files
    );
    std::fs::write(dir.join(tableset::MANIFEST_FILE), tableset::write(&set)).expect("manifest");
    tableset::check_dir(dir).expect("the text set is whole");
}

/// Routes, programs the switches through the plugin, reads them back:
/// from the compact set, or with `text` from OpenSM's text files alone.
fn round_trip_in(gen_args: &[&str], engine: &str, extra: &[&str], sl2vl_reader: bool, text: bool) {
    let mut fx = fixture(gen_args);
    fx.sl2vl_reader = sl2vl_reader;
    let tables = fx.root.join("tables");
    let mut args = extra.to_vec();
    if text {
        args.push("--opensm-dump");
    }
    let routed = route(&fx, engine, &args, &tables);
    if text {
        text_only(&tables);
    }
    let info: Value =
        serde_json::from_str(&ibfabric(&["info", "--json", fx.net.to_str().unwrap()]).unwrap())
            .unwrap();
    let (sw, hcas) = (
        info["switches"].as_u64().unwrap(),
        info["hcas"].as_u64().unwrap(),
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
    round_trip(&["dragonfly", "--p", "2"], "dfdn", &[], true);
}

/// A set of an earlier release (OpenSM's text files, no compact ones)
/// still reaches the switches whole.
#[test]
fn a_text_only_set_reaches_the_switches_whole() {
    round_trip_in(&["dragonfly", "--p", "2"], "dfdn", &[], true, true);
}

/// SL-to-VL tables without path SLs: every pair on SL 0, the VL raised by
/// the switches.
#[test]
fn dfd2_on_a_slim_fly_reaches_the_switches_whole() {
    round_trip(&["slimfly", "--q", "5", "--hosts", "1"], "dfd2", &[], true);
}

#[test]
fn lash_on_a_torus_reaches_the_switches_whole() {
    // Read back with smpquery, one process per port, as without the tools.
    // On the MinHop base: on this torus LASH's default SSSP base happens to
    // be acyclic in one layer, and the test needs layers to deliver.
    round_trip(
        &["torus", "--dims", "3x3x3", "--hosts", "1"],
        "lash",
        &["--base", "minhop"],
        false,
    );
}

#[test]
fn dfsssp_on_a_slim_fly_reaches_the_switches_whole() {
    round_trip(
        &["slimfly", "--q", "5", "--hosts", "1"],
        "dfsssp",
        &[],
        true,
    );
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
        true,
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
        std::fs::read(a.join("ibfabric-lfts.bin")).unwrap(),
        std::fs::read(b.join("ibfabric-lfts.bin")).unwrap(),
        "the two sets differ, so the read-back tells which is in force"
    );
    route(&fx, "dfdn", &[], &live);
    let mut sim = start(&fx, &live);
    let ups = sim.opensm_log().matches("SUBNET UP").count();

    // Set b with its path SLs cut short, manifest last as a writer would.
    let names = [
        "ibfabric-lfts.bin",
        "ibfabric-sl2vl.bin",
        "ibfabric-pathsl.bin",
    ];
    for n in names {
        std::fs::copy(b.join(n), live.join(n)).unwrap();
    }
    let psl = std::fs::read(b.join("ibfabric-pathsl.bin")).unwrap();
    std::fs::write(live.join("ibfabric-pathsl.bin"), &psl[..psl.len() / 2]).unwrap();
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
        log.contains("ibfabric-pathsl.bin") && log.contains("bytes, the manifest says"),
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
    std::fs::write(live.join("ibfabric-pathsl.bin"), &psl).unwrap();
    let pid = sim.opensm_pid().expect("OpenSM runs");
    let secs = applied(
        &mut sim,
        "SIGHUP makes the plugin load the whole set",
        || {
            assert!(
                std::process::Command::new("kill")
                    .args(["-HUP", &pid.to_string()])
                    .status()
                    .unwrap()
                    .success()
            )
        },
    );
    eprintln!("SIGHUP -> set b loaded in {secs:.2} s");
    let (r, code) = audit(&fx, &sim, &b, "after-reload");
    assert_eq!(r["expected"]["differences"], 0, "set b in force: {r:#}");
    assert_eq!(code, 0);

    // The product's own writer into the live directory: applied by itself.
    let secs = applied(
        &mut sim,
        "a new manifest is picked up without a signal",
        || {
            route(&fx, "dfdn", &[], &live);
        },
    );
    eprintln!("route -o live -> set loaded in {secs:.2} s");
    let (r, code) = audit(&fx, &sim, &a, "after-rewrite");
    assert_eq!(r["expected"]["differences"], 0, "set a again: {r:#}");
    assert_eq!(code, 0);
}

/// Runs `trigger`, then waits until the plugin has loaded a set and the
/// sweep has completed; the seconds that took.
fn applied(sim: &mut Sim, what: &str, trigger: impl FnOnce()) -> f64 {
    let loaded = sim.opensm_log().matches("ibfabric: loaded set").count();
    let ups = sim.opensm_log().matches("SUBNET UP").count();
    let t0 = Instant::now();
    trigger();
    sim.wait_log("ibfabric: loaded set", loaded + 1, Duration::from_secs(30))
        .expect(what);
    sim.wait_log("SUBNET UP", ups + 1, Duration::from_secs(30))
        .expect("the sweep completes");
    t0.elapsed().as_secs_f64()
}

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_log(path: &Path, what: &str, count: usize, timeout: Duration) -> f64 {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.matches(what).count() >= count {
            return t0.elapsed().as_secs_f64();
        }
        assert!(
            t0.elapsed() < timeout,
            "no {count} x '{what}' in {} after {timeout:?}:\n{text}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An agent following `fx`'s fabric under `engine`, started on a set
/// `ibfabric route` wrote; returns the simulator, the agent, its log, the
/// topology it keeps and the table directory, once the switches hold its
/// first set.
fn agent_following(fx: &Fixture, engine: &str) -> (Sim, Child, PathBuf, PathBuf, PathBuf) {
    let live = fx.root.join("tables");
    // A set to start OpenSM on, as an operator bootstraps it; the agent
    // replaces it with one computed on the fabric it discovers.
    route(fx, engine, &[], &live);
    let sim = start_sim(fx, &live, true);
    let topo = fx.root.join("live.net");
    let conf = fx.root.join("agent.toml");
    std::fs::write(
        &conf,
        format!(
            "insecure = true\nagent_id = \"s0\"\nsubnet_prefix = \"0xfec0000000000001\"\n\
             topology = \"{}\"\nengine = \"{engine}\"\nout_dir = \"{}\"\n\
             [fabric]\nrediscover_ms = 60000\nconfirm_timeout_ms = 60000\npathrecord_tool = \"{}\"\nsl2vl_tool = \"{}\"\n",
            topo.display(),
            live.display(),
            fx.plugin.join("ibfabric-pathrecord-sl").display(),
            fx.plugin.join("ibfabric-sl2vl-read").display()
        ),
    )
    .unwrap();
    let log = fx.root.join("agent.log");
    let agent = Child(
        sim.command(ibfabric_bin().unwrap())
            .args(["agent", "--config"])
            .arg(&conf)
            .env("RUST_LOG", "info")
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("the agent starts"),
    );
    let first = wait_for_log(&log, CONFIRMED, 1, Duration::from_secs(300));
    eprintln!("agent start -> tables confirmed in {first:.2} s");
    (sim, agent, log, topo, live)
}

const CONFIRMED: &str = "tables confirmed in the switches";

fn links(p: &Path) -> u64 {
    let v: Value =
        serde_json::from_str(&ibfabric(&["info", "--json", p.to_str().unwrap()]).unwrap()).unwrap();
    v["links"].as_u64().unwrap()
}

/// An agent that follows the fabric: it discovers the topology through the
/// SM's port, routes it, writes the set OpenSM's plugin applies, and reads
/// the switches back. A link removed with ibsim's `Unlink` reaches OpenSM
/// as a trap; the agent sees the heavy sweep, rediscovers, reroutes, and
/// the switches hold the new tables, read back and verified; `ReLink`
/// brings the first topology back the same way.
#[test]
fn an_agent_follows_unlink_and_relink_to_verified_tables_in_the_switches() {
    // IBF_FOLLOW_P=3 (4, ...) measures the same on larger Dragonflies
    // (BENCHMARKS.md).
    let p = std::env::var("IBF_FOLLOW_P").unwrap_or_else(|_| "2".into());
    let mut fx = fixture(&["dragonfly", "--p", &p]);
    // Every pair's PathRecord is compared by the round-trip tests; here a
    // sample keeps larger Dragonflies quick.
    fx.path_sample = Some(32);
    let (mut sim, _agent, log, topo, live) = agent_following(&fx, "dfdn");
    let all = links(&fx.net);
    assert_eq!(
        links(&topo),
        all,
        "the agent discovered the whole Dragonfly"
    );

    // g0r0 port 3 is its link to g0r1 (gen dragonfly's wiring). Each step
    // is seen by the agent, rerouted, and confirmed in the switches; an
    // independent audit then finds the same tables, deadlock free.
    let steps = [
        ("Unlink", all - 1, "after-unlink"),
        ("ReLink", all, "after-relink"),
    ];
    for (n, (command, want_links, name)) in steps.into_iter().enumerate() {
        sim.console(&format!("{command} \"g0r0\"[3]")).unwrap();
        let secs = wait_for_log(&log, CONFIRMED, n + 2, Duration::from_secs(300));
        eprintln!("{command} -> new tables confirmed in the switches in {secs:.2} s");
        assert_eq!(
            links(&topo),
            want_links,
            "the agent's topology after {command}"
        );
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(
            text.matches("the fabric changed; rerouting").count() > n,
            "{text}"
        );
        // The failure is rerouted by DQR; the link back is recomputed with
        // the update checked (or the tables in force kept).
        let methods: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split("method=").nth(1))
            .filter_map(|m| m.split_whitespace().next())
            .collect();
        let want: &[&str] = if n == 0 {
            &["dqr"]
        } else {
            &["recompute", "kept"]
        };
        assert!(
            methods.get(n).is_some_and(|m| want.contains(m)),
            "{methods:?}\n{text}"
        );
        let (a, code) = audit_against(&fx, &sim, &live, &topo, name);
        assert_eq!(a["expected"]["differences"], 0, "{a:#}");
        assert_eq!(
            (a["deadlock_free"].clone(), code),
            (Value::Bool(true), 0),
            "{a:#}"
        );
    }
}

/// A failure whose one-step update is not deadlock free: the agent applies
/// DQR's drain stage, the switches are read back holding it (entries into
/// the fault dropped, deadlock free as read), then the new tables, read
/// back equal to the files and verified.
#[test]
fn a_drain_stage_reaches_the_switches_before_the_rerouted_tables() {
    let fx = fixture(&["mesh", "--dims", "4x4"]);
    let (mut sim, _agent, log, topo, live) = agent_following(&fx, "updn");
    // Which links need a drain stage under the agent's own tables: asked of
    // `ibfabric reroute`, on the topology the agent discovered.
    let f = fabric::formats::ibnetdiscover::read(&topo).expect("the agent's topology");
    let probe = fx.root.join("probe");
    let pick = f
        .switch_links()
        .into_iter()
        .find(|&l| {
            let (n, p) = (f.node_of(l), f.port_of(l));
            let fail = format!("{:#x}:{p}", f.guid(n));
            let out = ibfabric(&[
                "reroute",
                "-t",
                topo.to_str().unwrap(),
                "-d",
                live.to_str().unwrap(),
                "--fail",
                &fail,
                "-o",
                probe.to_str().unwrap(),
                "--json",
            ])
            .expect("reroute");
            let v: Value = serde_json::from_str(&out).expect("reroute --json");
            !v["drain"].is_null()
        })
        .expect("some link of the 4x4 mesh needs a drain stage under updn");
    let (n, p) = (f.node_of(pick), f.port_of(pick));
    sim.console(&format!("Unlink \"{}\"[{p}]", f.desc(n)))
        .unwrap();
    let secs = wait_for_log(&log, CONFIRMED, 2, Duration::from_secs(300));
    eprintln!("Unlink -> drain stage, then new tables confirmed in the switches in {secs:.2} s");
    let text = std::fs::read_to_string(&log).unwrap();
    let drained = text
        .find("drain stage confirmed in the switches")
        .expect("the drain stage was confirmed");
    let updated = text
        .find("tables updated after a topology change")
        .expect("the update is logged");
    assert!(
        text[updated..].contains("method=dqr") && text[updated..].contains("drain_stages=1"),
        "{text}"
    );
    let last = text.rfind(CONFIRMED).unwrap();
    assert!(
        drained < updated && updated < last,
        "drain, then the new tables:\n{text}"
    );
    let (a, code) = audit_against(&fx, &sim, &live, &topo, "after-drain");
    assert_eq!(a["expected"]["differences"], 0, "{a:#}");
    assert_eq!(
        (a["deadlock_free"].clone(), code),
        (Value::Bool(true), 0),
        "{a:#}"
    );
}
