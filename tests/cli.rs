//! The `ibfabric` binary end to end: exit codes, JSON, files on disk.

use std::path::Path;
use std::process::{Command, Output};

fn ibf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ibfabric"))
        .args(args)
        .output()
        .expect("binary runs")
}

/// Runs `ibfabric ARGS`, which must succeed.
fn ok(args: &[&str]) {
    let o = ibf(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn json(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("stdout is JSON")
}

/// Stdout as JSON whatever the exit code (verdicts exit 3 with a report).
fn json_any(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn gen_info_route_verify_on_a_fat_tree() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("kary.net");
    let out = d.path().join("out");
    json(&ibf(&[
        "gen",
        "kary",
        "--k",
        "4",
        "--n",
        "3",
        "-o",
        s(&net),
        "--json",
    ]));
    let info = json(&ibf(&["info", s(&net), "--json"]));
    assert_eq!(info["switches"], 48);
    assert_eq!(info["hcas"], 64);
    assert_eq!(info["diameter"], 4);
    assert!(info.get("guids").is_none(), "GUIDs only when asked");
    let info = json(&ibf(&["info", s(&net), "--json", "--guids"]));
    assert_eq!(info["guids"].as_array().unwrap().len(), 48 + 64);

    let r = json(&ibf(&[
        "route",
        "--topology",
        s(&net),
        "--engine",
        "minhop",
        "--out",
        s(&out),
        "--json",
    ]));
    assert_eq!(r["engine"], "minhop");
    assert_eq!(r["switches"], 48);
    assert_eq!(r["hcas"], 64);
    assert_eq!(r["vls"], 1);
    assert_eq!(r["deadlock_free"], true);
    assert_eq!(r["broken_pairs"], 0);
    assert_eq!(r["pairs"], 64 * 63);
    assert!(out.join("ibfabric-lfts.bin").exists());
    assert!(
        !out.join("ibfabric-pathsl.bin").exists(),
        "MinHop sets no SLs"
    );
    // Link load: 64 HCAs, 216 switch hops per source (12 pod peers at 2,
    // 48 others at 4) over 256 directed links: mean 54. A leaf's up links
    // carry its 4 hosts' traffic to 60 others, so no routing does better
    // than 60; ftree reaches it.
    let l = &r["link_load"];
    assert_eq!(
        (l["links"].as_u64(), l["pairs"].as_u64()),
        (Some(256), Some(64 * 63))
    );
    assert_eq!(l["mean"].as_f64(), Some(54.0));
    assert!(l["max"].as_u64().unwrap() >= 60, "{l}");
    let ft = json(&ibf(&[
        "route",
        "-t",
        s(&net),
        "-e",
        "ftree",
        "-o",
        s(&d.path().join("ftree")),
        "--json",
    ]));
    assert_eq!(
        ft["link_load"]["max"].as_u64(),
        Some(60),
        "{}",
        ft["link_load"]
    );

    // Re-verify from the written files.
    let v = json(&ibf(&[
        "verify",
        "--topology",
        s(&net),
        "--dir",
        s(&out),
        "--json",
    ]));
    assert_eq!(v["deadlock_free"], true);
    assert_eq!(v["all_pairs_routed"], true);
    assert_eq!(v["max_hops"], 4);
}

#[test]
fn minhop_on_a_torus_is_reported_not_deadlock_free_with_the_cycle() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("t.net");
    json(&ibf(&[
        "gen",
        "torus",
        "--dims",
        "4x4x4",
        "-o",
        s(&net),
        "--json",
    ]));
    let out = d.path().join("out");
    let r = ibf(&[
        "route",
        "-t",
        s(&net),
        "-e",
        "minhop",
        "-o",
        s(&out),
        "--allow-cycles",
        "--json",
    ]);
    // Written because asked, and the exit code still says unsafe.
    assert_eq!(r.status.code(), Some(3));
    let r = json_any(&r);
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["command"], "route");
    assert_eq!(r["deadlock_free"], false);
    assert_eq!(r["written"], true);
    // The cycle as channel objects: each channel leaves the port the one
    // before it reached, and the last closes on the first.
    let cycle = r["cycle"].as_array().expect("cycle witness");
    assert!(cycle.len() >= 2);
    for (i, c) in cycle.iter().enumerate() {
        let next = &cycle[(i + 1) % cycle.len()];
        assert_eq!(c["to"]["guid"], next["from"]["guid"], "{c} then {next}");
        assert!(
            c["from"]["guid"]
                .as_str()
                .is_some_and(|g| g.starts_with("0x"))
        );
        assert!(c["vl"].is_u64());
    }
    assert!(r["cycle_text"].as_str().is_some_and(|t| t.contains("=>")));
    assert!(out.join("ibfabric-lfts.bin").exists());
    // The verifier says the same from disk, with exit code 3.
    let v = ibf(&["verify", "-t", s(&net), "-d", s(&out)]);
    assert_eq!(v.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&v.stdout).contains("deadlock free   NO"));
    // Without --allow-cycles route refuses, says how to get safe tables,
    // writes nothing and exits 3.
    let out2 = d.path().join("out2");
    let r = ibf(&["route", "-t", s(&net), "-e", "minhop", "-o", s(&out2)]);
    assert_eq!(r.status.code(), Some(3));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("nothing written") && err.contains("--allow-cycles"),
        "{err}"
    );
    assert!(!out2.exists());
    // With no engine named, route picks a deadlock-free one and says why.
    let r = json(&ibf(&["route", "-t", s(&net), "-o", s(&out2), "--json"]));
    assert_eq!(r["engine"], "dfdn", "{r}");
    assert!(
        r["engine_reason"]
            .as_str()
            .is_some_and(|t| t.contains("diameter 6"))
    );
    assert_eq!(r["deadlock_free"], true);
    assert!(out2.join("ibfabric-lfts.bin").exists());
    // A dry run routes and verifies, prints, and writes nothing (and
    // takes no output directory).
    let r = json(&ibf(&["route", "-t", s(&net), "--dry-run", "--json"]));
    assert_eq!(r["dry_run"], true);
    assert_eq!(r["written"], false);
    assert_eq!(r["files"].as_array().map(Vec::len), Some(0));
    assert!(r["route_seconds"].is_f64() && r["verify_seconds"].is_f64());
    let o = ibf(&["route", "-t", s(&net), "--dry-run", "-o", s(&out2)]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "--dry-run with -o is a usage error"
    );
}

#[test]
fn bad_input_exits_non_zero_with_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("bad.net");
    std::fs::write(&net, "Switch 2 \"a\"\n[1] \"nowhere\"[1]\n").unwrap();
    let missing = d.path().join("nope.net");
    let o = ibf(&["info", s(&missing)]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.matches("No such file").count(),
        1,
        "the cause once: {err}"
    );
    let o = ibf(&["info", s(&net)]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.net:2:") && err.contains("undefined node"),
        "{err}"
    );

    // Engines are a closed set on the command line: an unknown one is a
    // usage error (exit 2) that lists the engines there are.
    let o = ibf(&["route", "-t", s(&net), "-e", "nosuch", "-o", s(d.path())]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("invalid value 'nosuch'") && err.contains("dfdn") && err.contains("nue"),
        "{err}"
    );

    let o = ibf(&["gen", "slimfly", "--q", "9", "-o", s(&net)]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn updn_takes_a_root_guid_file_and_ftree_refuses_a_torus() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("kary.net");
    json(&ibf(&[
        "gen",
        "kary",
        "--k",
        "2",
        "--n",
        "3",
        "-o",
        s(&net),
        "--json",
    ]));
    let list = String::from_utf8(ibf(&["engines"]).stdout).unwrap();
    for e in ["updn", "dnup", "ftree"] {
        assert!(list.lines().any(|l| l.starts_with(e)), "{list}");
    }
    let route = |out: &Path, extra: &[&str]| {
        let mut args = vec!["route", "-t", s(&net), "-e", "updn", "-o", s(out), "--json"];
        args.extend_from_slice(extra);
        ibf(&args)
    };
    let def = d.path().join("default");
    let r = json(&route(&def, &[]));
    assert_eq!(r["deadlock_free"], true);
    assert_eq!(r["vls"], 1);

    // Leaf switch s0_0 as the root: still deadlock free on one VL, and the
    // tables differ from the default (top-level roots).
    let roots = d.path().join("roots.txt");
    std::fs::write(&roots, "# leaf as root\n0x0002000000000001  # s0_0\n").unwrap();
    let leaf = d.path().join("leaf");
    let r = json(&route(&leaf, &["--root-guids", s(&roots)]));
    assert_eq!(r["deadlock_free"], true);
    assert_eq!(r["all_pairs_routed"], true);
    assert_eq!(r["vls"], 1);
    let a = std::fs::read(def.join("ibfabric-lfts.bin")).unwrap();
    let b = std::fs::read(leaf.join("ibfabric-lfts.bin")).unwrap();
    assert_ne!(a, b, "the root file changes the tables");

    for (text, needle) in [
        (
            "0x0002000000000001\nnot-a-guid\n",
            "roots.txt:2: bad GUID 'not-a-guid'",
        ),
        (
            "0x00020000000000ff\n",
            "roots.txt:1: GUID 0x00020000000000ff is not a node",
        ),
        (
            "0x0001000000000010\n",
            "roots.txt:1: GUID 0x0001000000000010 is the CA",
        ),
    ] {
        std::fs::write(&roots, text).unwrap();
        let o = route(&d.path().join("bad"), &["--root-guids", s(&roots)]);
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{err}");
        assert!(!d.path().join("bad").exists());
    }
    std::fs::write(&roots, "0x0002000000000001\n").unwrap();
    let o = ibf(&[
        "route",
        "-t",
        s(&net),
        "-e",
        "minhop",
        "-o",
        s(d.path()),
        "--root-guids",
        s(&roots),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("takes no root switches"));

    let torus = d.path().join("t.net");
    json(&ibf(&[
        "gen",
        "torus",
        "--dims",
        "3x3",
        "-o",
        s(&torus),
        "--json",
    ]));
    let o = ibf(&[
        "route",
        "-t",
        s(&torus),
        "-e",
        "ftree",
        "-o",
        s(&d.path().join("t")),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not a fat tree: all 9 switches have HCAs"),
        "{err}"
    );
    let r = json(&ibf(&[
        "route",
        "-t",
        s(&torus),
        "-e",
        "dnup",
        "-o",
        s(&d.path().join("t")),
        "--json",
    ]));
    assert_eq!(r["deadlock_free"], true);
    assert_eq!(r["vls"], 1);
}

#[test]
fn demo_resolves_inter_subnet_paths_with_every_algorithm() {
    for (engine, algorithm) in [("updn", "prefix"), ("lash", "issr"), ("ftree", "isfr")] {
        let o = ibf(&[
            "demo",
            "--engine",
            engine,
            "--algorithm",
            algorithm,
            "--json",
        ]);
        assert!(
            o.status.success(),
            "{engine}/{algorithm}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v = json(&o);
        assert_eq!(v["ok"], true);
        assert_eq!(v["algorithm"], algorithm);
        let subnets = v["subnets"].as_array().expect("subnets");
        assert_eq!(subnets.len(), 3);
        for s in subnets {
            assert_eq!(s["deadlock_free"], true, "{s}");
            assert_eq!(s["verified"], true);
            assert_eq!(s["engine"], engine);
        }
        let paths = v["paths"].as_array().expect("paths");
        assert_eq!(paths.len(), 2);
        for p in paths {
            assert_eq!(p["delivered"], true, "{p}");
            assert_eq!(p["next_lid"], p["destination_lid"]);
        }
    }
    // A misspelt engine fails fast with its reason instead of a hung demo.
    let o = ibf(&["demo", "--engine", "nosuch"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nosuch"));
}

#[test]
fn gen_multi_writes_a_manifest_that_sim_reads_and_ranks_the_algorithms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("fab");
    let o = ibf(&[
        "gen",
        "multi",
        "--subnets",
        "3",
        "--leaves",
        "4",
        "--spines",
        "4",
        "--hosts",
        "4",
        "--routers",
        "4",
        "--wiring",
        "stripe",
        "--router-links",
        "2",
        "--out",
        out.to_str().expect("utf-8 path"),
        "--json",
    ]);
    let v = json(&o);
    assert_eq!(v["subnets"], 3);
    assert_eq!(v["hcas"], 48);
    let manifest = out.join("manifest.toml");
    assert!(out.join("subnet2.net").is_file());
    let svg = dir.path().join("sim.svg");
    let sim = |extra: &[&str]| {
        let mut args = vec!["sim", "--manifest", s(&manifest), "--json"];
        args.extend_from_slice(extra);
        ibf(&args)
    };
    let o = sim(&[
        "--model",
        "flow",
        "--rings",
        "20",
        "--isp",
        "0,100",
        "--samples",
        "2",
        "--svg",
        s(&svg),
    ]);
    let v = json(&o);
    let res = v["setups"][0]["results"].as_array().expect("results");
    let avg = |name: &str| {
        res.iter()
            .find(|r| r["algorithm"] == name)
            .and_then(|r| r["traffic"]["ror_avg_mbs"].as_f64())
            .expect("figure")
    };
    assert!(
        avg("prefix") < avg("issr") && avg("issr") <= avg("isfr"),
        "{res:?}"
    );
    for r in res {
        assert_eq!(r["global"]["unreachable"], 0, "{r}");
        assert_eq!(r["global"]["cycle"], serde_json::Value::Null, "{r}");
        let t = &r["traffic"];
        assert_eq!(
            t["nor_mbs"].as_f64().map(|x| x.round()),
            Some(2000.0),
            "{r}"
        );
        assert_eq!(t["uniform"].as_array().map(Vec::len), Some(2));
    }
    assert!(
        std::fs::read_to_string(&svg)
            .expect("svg")
            .starts_with("<svg")
    );
    // The packet model: every packet through credits and buffers; a ring
    // of short messages is a little under the line rate (the pipeline
    // fills and drains), and the ordering holds.
    let o = sim(&[
        "--rings",
        "5",
        "--message-kb",
        "64",
        "--isp",
        "20",
        "--samples",
        "1",
        "--warmup-us",
        "10",
        "--window-us",
        "100",
    ]);
    let v = json(&o);
    assert_eq!(v["model"], "packet");
    let res = v["setups"][0]["results"].as_array().expect("results");
    let figure = |name: &str, key: &str| {
        res.iter()
            .find(|r| r["algorithm"] == name)
            .and_then(|r| r["traffic"][key].as_f64())
            .expect("figure")
    };
    assert!(
        figure("prefix", "ror_avg_mbs") < figure("isfr", "ror_avg_mbs"),
        "{res:?}"
    );
    for r in res {
        let nor = r["traffic"]["nor_mbs"].as_f64().expect("NOR");
        // 66 bytes of headers per 2048-byte packet.
        assert!(nor > 1850.0 && nor <= 2000.0 * 2048.0 / 2114.0, "{r}");
        let u = r["traffic"]["uniform"][0][1].as_f64().expect("uniform");
        assert!(u > 0.0 && u <= 100.0, "{r}");
    }
    assert_eq!(v["packet"]["overhead"], 66, "{}", v["packet"]);
    // The ideal link carries payload only: the natural ring is as much
    // faster as the headers took.
    let o = sim(&[
        "--rings",
        "0",
        "--message-kb",
        "64",
        "--isp",
        "",
        "--ideal-link",
    ]);
    let ideal = json(&o);
    assert_eq!(ideal["packet"]["overhead"], 0);
    for (r, i) in res
        .iter()
        .zip(ideal["setups"][0]["results"].as_array().expect("results"))
    {
        let (with, without) = (
            r["traffic"]["nor_mbs"].as_f64().expect("NOR"),
            i["traffic"]["nor_mbs"].as_f64().expect("NOR"),
        );
        let ratio = without / with;
        assert!((ratio - 2114.0 / 2048.0).abs() < 0.005, "{with} {without}");
    }
    // --isp "" skips uniform traffic, as the help says.
    let o = sim(&["--rings", "5", "--message-kb", "64", "--isp", ""]);
    let v = json(&o);
    for r in v["setups"][0]["results"].as_array().expect("results") {
        assert_eq!(
            r["traffic"]["uniform"].as_array().map(Vec::len),
            Some(0),
            "{r}"
        );
    }
    // A broken manifest fails with its file and line.
    std::fs::write(
        &manifest,
        "[[subnet]]\nname = \"a\"\nprefix = \"zz\"\ntopology = \"subnet0.net\"\n",
    )
    .expect("writes");
    let o = ibf(&["sim", "--manifest", manifest.to_str().expect("utf-8 path")]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("manifest.toml:3"), "{err}");
}

#[test]
fn sim_shows_minhop_deadlock_on_a_torus_only_when_cycles_are_allowed() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("t.net");
    let o = ibf(&["gen", "torus", "--dims", "4x4x4", "-o", s(&net)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let manifest = d.path().join("manifest.toml");
    std::fs::write(
        &manifest,
        "[[subnet]]\nname = \"torus\"\nprefix = \"0xfec0000000000001\"\ntopology = \"t.net\"\nengine = \"minhop\"\n",
    )
    .unwrap();
    let args = [
        "sim",
        "--manifest",
        s(&manifest),
        "--algorithms",
        "isfr",
        "--rings",
        "2",
        "--message-kb",
        "64",
        "--isp",
        "0",
        "--samples",
        "1",
        // One packet per buffer: a 2048-byte payload and its 66 bytes of
        // headers.
        "--buffer",
        "2114",
        "--json",
    ];
    // The gate refuses cyclic tables unless asked.
    let o = ibf(&args);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not deadlock free"));
    let mut allowed = args.to_vec();
    allowed.push("--allow-cycles");
    let o = ibf(&allowed);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json_any(&o);
    let r = &v["setups"][0]["results"][0];
    assert!(r["global"]["cycle"].is_array(), "{r}");
    let dl = &r["traffic"]["deadlock"];
    let channels = dl["channels"].as_array().expect("the deadlock's channels");
    assert!(channels.len() >= 2, "{dl}");
    assert!(
        channels
            .iter()
            .all(|c| c.as_str().is_some_and(|c| c.contains("VL 0"))),
        "{dl}"
    );
}

fn gen_multi(dir: &Path, extra: &[&str]) -> std::path::PathBuf {
    let mut args = vec!["gen", "multi", "--out", s(dir)];
    args.extend_from_slice(extra);
    let o = ibf(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    dir.join("manifest.toml")
}

#[test]
fn route_multi_checks_the_whole_fabric_then_writes_tables_and_mapping_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = gen_multi(&dir.path().join("fab"), &[]);
    // Subnet 1 names its own engine in the manifest; the others take --engine.
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    let text = text.replacen(
        "topology = \"subnet1.net\"",
        "topology = \"subnet1.net\"\nengine = \"updn\"",
        1,
    );
    std::fs::write(&manifest, text).expect("manifest");
    let out = dir.path().join("out");
    let v = json(&ibf(&[
        "route-multi",
        "-m",
        s(&manifest),
        "-a",
        "issr",
        "-o",
        s(&out),
        "--json",
    ]));
    assert_eq!(v["written"], true);
    assert_eq!(v["global"]["method"], "compositional");
    assert_eq!(v["global"]["unreachable"], 0);
    assert_eq!(v["global"]["cycle"], serde_json::Value::Null);
    // 3 subnets of 16 HCAs: every ordered pair of the 48.
    assert_eq!(v["global"]["pairs"], 48 * 47);
    assert_eq!(v["exhaustive"], serde_json::Value::Null);
    let engines: Vec<&str> = v["subnets"]
        .as_array()
        .expect("subnets")
        .iter()
        .map(|x| x["engine"].as_str().expect("engine"))
        .collect();
    assert_eq!(engines, ["ftree", "updn", "ftree"]);
    // Each subnet's mapping file lists every remote HCA once and reads back
    // (router ports resolved in its own subnet).
    let m = fabric::formats::manifest::read(&manifest).expect("manifest reads");
    let view = fabric::intersubnet::GlobalView::from_multi(&m.fabric);
    for sv in &view.subnets {
        let sdir = out.join(&sv.name);
        assert!(sdir.join("ibfabric-lfts.bin").is_file());
        let map = fabric::formats::mapping::read(
            &sdir.join("ibfabric-mapping.txt"),
            sv.prefix,
            &sv.router_ports,
        )
        .expect("mapping file reads");
        assert_eq!(map.entries.len(), 32);
        assert!(map.entries.iter().all(|e| e.dest.prefix != sv.prefix));
        assert_eq!(map.defaults.len(), 2, "one default route per router");
    }
    let egress = std::fs::read_to_string(out.join("router-egress.txt")).expect("egress");
    assert_eq!(egress.matches("\nrouter 0x").count(), 2);

    // Transit choices only issr has.
    let o = ibf(&[
        "route-multi",
        "-m",
        s(&manifest),
        "-a",
        "isfr",
        "--transit",
        "shortest",
        "-o",
        s(&out),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("issr only"));
}

#[test]
fn route_multi_crosses_transit_subnets_and_refuses_what_the_global_check_rejects() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |manifest: &Path, engine: &str, extra: &[&str], out: &Path| {
        let mut args = vec![
            "route-multi",
            "-m",
            s(manifest),
            "-a",
            "issr",
            "-e",
            engine,
            "-o",
            s(out),
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = ibf(&args);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        (o, v)
    };
    // A ring of five subnets, every router on both top switches of the two
    // subnets it joins: subnets two apart talk through a transit subnet.
    let ring = gen_multi(
        &dir.path().join("ring"),
        &["--subnets", "5", "--routers", "5", "--join", "ring"],
    );
    for engine in ["ftree", "lash"] {
        let out = dir.path().join(format!("ring-{engine}"));
        // With the all-pairs reference too: both must agree to write.
        let (o, v) = run(&ring, engine, &["--exhaustive"], &out);
        assert!(o.status.success(), "{engine}: {v}");
        assert_eq!(v["global"]["method"], "compositional+exhaustive");
        assert_eq!(v["global"]["unreachable"], 0);
        assert_eq!(v["global"]["pairs"], 80 * 79);
        assert!(v["global"]["cycle"].is_null(), "{engine}: {v}");
        assert_eq!(v["exhaustive"]["pairs"], 80 * 79);
        assert!(v["exhaustive"]["cycle"].is_null(), "{engine}: {v}");
        assert!(out.join("router-egress.txt").is_file());
    }
    let refused = |o: &Output, v: &serde_json::Value, out: &Path| {
        assert_eq!(o.status.code(), Some(3), "unsafe routes: {v}");
        assert_eq!(v["written"], false);
        assert!(!out.exists(), "nothing written");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("nothing written"), "{err}");
    };
    // Shortest subnet paths close a cycle through the routers.
    let out = dir.path().join("ring-shortest");
    let (o, v) = run(&ring, "ftree", &["--transit", "shortest"], &out);
    refused(&o, &v, &out);
    let steps = v["global"]["cycle"].as_array().expect("the cycle's steps");
    assert!(
        steps
            .iter()
            .all(|c| c["subnet"].is_string() && c["vl"].is_u64()),
        "{v}"
    );
    // Named by subnet, router port and VL.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("subnet0: router 0x") && err.contains(", VL 0"),
        "{err}"
    );
    let (o, v) = run(
        &ring,
        "ftree",
        &["--transit", "shortest", "--exhaustive"],
        &out,
    );
    refused(&o, &v, &out);
    assert!(!v["exhaustive"]["cycle"].is_null(), "{v}");
    // Routers striped over the top switches: crossing a subnet means going
    // from one top switch to another, which fat-tree routing never routes.
    let stripe = gen_multi(
        &dir.path().join("stripe"),
        &[
            "--subnets",
            "4",
            "--routers",
            "4",
            "--join",
            "chain",
            "--wiring",
            "stripe",
        ],
    );
    let out = dir.path().join("stripe-ftree");
    let (o, v) = run(&stripe, "ftree", &["--exhaustive"], &out);
    refused(&o, &v, &out);
    assert!(v["global"]["unreachable"].as_u64() > Some(0), "{v}");
    assert_eq!(v["global"]["unreachable"], v["exhaustive"]["unreachable"]);
    let first = v["global"]["first_unreachable"]
        .as_str()
        .unwrap_or_default();
    assert!(first.starts_with("from subnet '"), "{first}");
    // An engine that routes between top switches crosses the same fabric.
    let (o, v) = run(&stripe, "lash", &[], &dir.path().join("stripe-lash"));
    assert!(o.status.success(), "{v}");
}

#[test]
fn demo_crosses_transit_subnets_router_by_router() {
    // A chain of four subnets: the first reaches the last through two
    // transit subnets, each router relaying over the live services.
    for (engine, algorithm) in [("updn", "issr"), ("ftree", "isfr")] {
        let o = ibf(&[
            "demo",
            "--engine",
            engine,
            "--algorithm",
            algorithm,
            "--join",
            "chain",
            "--subnets",
            "4",
            "--routers",
            "3",
            "--json",
        ]);
        let v = json(&o);
        assert_eq!(v["ok"], true);
        let hops: Vec<usize> = v["paths"]
            .as_array()
            .expect("paths")
            .iter()
            .map(|p| {
                assert_eq!(p["delivered"], true, "{p}");
                assert_eq!(p["next_lid"], p["destination_lid"]);
                p["router_hops"].as_array().expect("hops").len()
            })
            .collect();
        assert_eq!(hops, [1, 2, 3], "{engine}/{algorithm}");
    }
    let o = ibf(&["demo", "--join", "chain", "--algorithm", "prefix"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not cross transit subnets"));
}

#[test]
fn certs_makes_a_ca_and_one_certificate_per_identity() {
    let d = tempfile::tempdir().unwrap();
    let pki = d.path().join("pki");
    let ca = json(&ibf(&["certs", "--out", s(&pki), "ca", "--json"]));
    let ca_pem = pki.join("ca.pem");
    let ca_key = pki.join("ca-key.pem");
    assert_eq!(ca["cert"], s(&ca_pem));
    assert_eq!(ca["key"], s(&ca_key));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&ca_key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the CA key is private");
    }

    let issue = |role: &[&str]| {
        let mut args = vec![
            "certs",
            "--out",
            s(&pki),
            "issue",
            "--ca",
            s(&ca_pem),
            "--ca-key",
            s(&ca_key),
        ];
        args.extend_from_slice(role);
        args.push("--json");
        ibf(&args)
    };
    for (role, stem, uri) in [
        (
            &["controller", "--dns", "localhost", "--ip", "127.0.0.1"][..],
            "controller",
            "ibfabric://controller",
        ),
        (
            &["agent", "--prefix", "0xfec0000000000001"][..],
            "agent-0xfec0000000000001",
            "ibfabric://agent/0xfec0000000000001",
        ),
        (
            &["router", "--guid", "0x0002c90300000001", "--ip", "::1"][..],
            "router-0x0002c90300000001",
            "ibfabric://router/0x0002c90300000001",
        ),
        (
            &["worker", "--name", "w1"][..],
            "worker-w1",
            "ibfabric://worker/w1",
        ),
    ] {
        let v = json(&issue(role));
        let cert = pki.join(format!("{stem}.pem"));
        let key = pki.join(format!("{stem}-key.pem"));
        assert_eq!(v["identity"], uri);
        assert_eq!(v["cert"], s(&cert));
        assert_eq!(v["key"], s(&key));
        let pem = std::fs::read(&cert).unwrap();
        let id = ibtls::Identity::from_cert_pem(&pem).expect("identity in the certificate");
        assert_eq!(id.to_uri(), uri);
        // The files are what a service's [tls] section points at.
        let tls = ibtls::TlsSettings {
            ca: ca_pem.clone(),
            cert,
            key,
        };
        assert_eq!(tls.identity().unwrap(), id);
        assert!(ibtls::server_tls(&tls).is_ok());
    }

    // Nothing is overwritten without --force, and a refusal writes nothing.
    let before = std::fs::read(pki.join("controller-key.pem")).unwrap();
    let o = issue(&["controller"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    assert_eq!(
        std::fs::read(pki.join("controller-key.pem")).unwrap(),
        before
    );
    let o = ibf(&["certs", "--out", s(&pki), "ca"]);
    assert!(!o.status.success());
    json(&issue(&["controller", "--force"]));
    assert_ne!(
        std::fs::read(pki.join("controller-key.pem")).unwrap(),
        before
    );

    // Bad input is refused with the reason.
    let o = issue(&["agent", "--prefix", "0xnope"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a 64-bit hex number"));
    let o = issue(&["worker", "--name", "../w"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("worker name"));
    let o = ibf(&[
        "certs",
        "--out",
        s(&pki),
        "issue",
        "--ca",
        s(&pki.join("controller.pem")),
        "--ca-key",
        s(&pki.join("controller-key.pem")),
        "worker",
        "--name",
        "w2",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a CA certificate"));
    let leftovers: Vec<_> = std::fs::read_dir(&pki)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "no temporary files left behind");
}

const MANIFEST: &str = "ibfabric-tables.txt";
const LFTS: &str = "ibfabric-lfts.bin";

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Polls until `child` has begun writing into `dir` (a temporary file
/// appeared, or the dump changed from `before`): `true`, or
/// `false` when it exited first.
fn wait_for_write(
    child: &mut std::process::Child,
    dir: &Path,
    before: Option<&std::fs::Metadata>,
) -> bool {
    use std::os::unix::fs::MetadataExt;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        if child.try_wait().expect("polls").is_some() {
            return false;
        }
        let others = std::fs::read_dir(dir)
            .map(|r| {
                r.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with('.'))
            })
            .unwrap_or(false);
        let changed = match (before, std::fs::metadata(dir.join("opensm-lfts.dump"))) {
            (Some(b), Ok(m)) => {
                m.ino() != b.ino() || m.len() != b.len() || m.mtime_nsec() != b.mtime_nsec()
            }
            (None, Ok(_)) => true,
            (_, Err(_)) => false,
        };
        if others || changed {
            return true;
        }
        assert!(std::time::Instant::now() < deadline, "route never wrote");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn route_killed_while_writing_leaves_the_old_dump_or_the_new_one() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("big.net");
    // About 21 MB of LFTs in OpenSM's text: long enough to be caught in
    // the middle.
    const DUMP: &str = "opensm-lfts.dump";
    json(&ibf(&[
        "gen",
        "fattree",
        "--leaves",
        "96",
        "--spines",
        "32",
        "--hosts",
        "24",
        "-o",
        s(&net),
        "--json",
    ]));
    let route = |engine: &str, out: &Path| {
        Command::new(env!("CARGO_BIN_EXE_ibfabric"))
            .args([
                "route",
                "-t",
                s(&net),
                "-e",
                engine,
                "-o",
                s(out),
                "--opensm-dump",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts")
    };
    let old_dir = d.path().join("old");
    assert!(route("minhop", &old_dir).wait().expect("runs").success());
    let old = std::fs::read(old_dir.join(DUMP)).unwrap();
    // The new dump, and how long writing it takes here and now.
    let new_dir = d.path().join("new");
    std::fs::create_dir(&new_dir).unwrap();
    let mut child = route("updn", &new_dir);
    assert!(wait_for_write(&mut child, &new_dir, None));
    let began = std::time::Instant::now();
    assert!(child.wait().expect("runs").success());
    let write_time = began.elapsed();
    let new = std::fs::read(new_dir.join(DUMP)).unwrap();
    assert_ne!(old, new, "the engines write different tables");

    // Kill moments spread over the write, from a seed that changes per run.
    let seed = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(u64::from(std::process::id()));
        h.finish()
    };
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let mut mid_write = 0;
    for i in 0..6u64 {
        std::fs::write(out.join(DUMP), &old).unwrap();
        // The old dump stands alone, as one written before manifests.
        let _ = std::fs::remove_file(out.join(MANIFEST));
        let before = std::fs::metadata(out.join(DUMP)).unwrap();
        let mut child = route("updn", &out);
        if wait_for_write(&mut child, &out, Some(&before)) {
            let frac = (seed.rotate_left(i as u32 * 11) % 1000) as f64 / 1000.0;
            std::thread::sleep(write_time.mul_f64(frac * 0.9));
        }
        // Exited already: then the kill is a no-op and the dump is new.
        let _ = child.kill();
        let status = child.wait().expect("reaped");
        let got = std::fs::read(out.join(DUMP)).unwrap();
        assert!(
            got == old || got == new,
            "kill {i}: the dump has {} bytes, neither the old one ({}) nor the new one ({})",
            got.len(),
            old.len(),
            new.len()
        );
        // A manifest vouches only for a whole set: it is removed before
        // the first file is replaced and written after the last.
        if out.join(MANIFEST).exists() {
            fabric::formats::tableset::check_dir(&out)
                .unwrap_or_else(|e| panic!("kill {i}: a manifest beside a mixed set: {e}"));
        }
        // A temporary file left by the killed process: it died writing.
        let others = names(&out)
            .into_iter()
            .filter(|n| n != DUMP && n != LFTS && n != MANIFEST)
            .count();
        if status.signal() == Some(9) && others > 0 {
            mid_write += 1;
        }
    }
    eprintln!("write time {write_time:?}, {mid_write} of 6 kills while writing");
    assert!(mid_write >= 1, "no kill landed while the dump was written");
    // A complete run afterwards puts the new dump in place and clears what
    // the killed ones left.
    assert!(route("updn", &out).wait().expect("runs").success());
    assert_eq!(std::fs::read(out.join(DUMP)).unwrap(), new);
    assert_eq!(names(&out), [LFTS, MANIFEST, DUMP]);
    fabric::formats::tableset::check_dir(&out).expect("a whole set");
}

/// `route --json` then `verify --json` on what it wrote: the verifier's
/// findings agree.
fn assert_verify_agrees(net: &Path, out: &Path, routed: &serde_json::Value) {
    let o = ibf(&["verify", "-t", s(net), "-d", s(out), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let ok = routed["deadlock_free"] == true && routed["all_pairs_routed"] == true;
    assert_eq!(o.status.code(), Some(if ok { 0 } else { 3 }), "{v}");
    for key in [
        "deadlock_free",
        "all_pairs_routed",
        "pairs",
        "broken_pairs",
        "vls",
        "max_vl",
        "sls",
        "max_hops",
        "cdg_vertices",
        "cdg_edges",
        "cycle",
    ] {
        assert_eq!(routed[key], v[key], "{key}: route {routed}\nverify {v}");
    }
}

#[test]
fn a_routing_removes_the_files_of_the_engine_before_it() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("t.net");
    json(&ibf(&[
        "gen",
        "torus",
        "--dims",
        "4x4",
        "-o",
        s(&net),
        "--json",
    ]));
    let out = d.path().join("out");
    let route = |engine: &str| {
        json_any(&ibf(&[
            "route",
            "-t",
            s(&net),
            "-e",
            engine,
            "-o",
            s(&out),
            "--allow-cycles",
            "--json",
        ]))
    };
    let r = route("dfsssp");
    assert_eq!(
        names(&out),
        [LFTS, "ibfabric-pathsl.bin", "ibfabric-sl2vl.bin", MANIFEST],
        "{r}"
    );
    assert_verify_agrees(&net, &out, &r);
    let r = route("minhop");
    // Before the names: what an operator sees is verify disagreeing.
    assert_verify_agrees(&net, &out, &r);
    assert_eq!(names(&out), [LFTS, MANIFEST], "{r}");
    assert_eq!(r["removed"].as_array().map(Vec::len), Some(2), "{r}");
    // And back: all three again, with the manifest.
    let r = route("dfsssp");
    assert_eq!(names(&out).len(), 4);
    assert_verify_agrees(&net, &out, &r);
}

#[test]
fn route_multi_removes_the_files_of_the_engine_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = gen_multi(&dir.path().join("fab"), &[]);
    let out = dir.path().join("out");
    for (engine, files) in [
        (
            "dfsssp",
            vec![
                LFTS,
                "ibfabric-mapping.txt",
                "ibfabric-pathsl.bin",
                "ibfabric-sl2vl.bin",
                MANIFEST,
            ],
        ),
        ("ftree", vec![LFTS, "ibfabric-mapping.txt", MANIFEST]),
    ] {
        let v = json(&ibf(&[
            "route-multi",
            "-m",
            s(&manifest),
            "-e",
            engine,
            "-o",
            s(&out),
            "--json",
        ]));
        assert_eq!(v["written"], true);
        for sub in ["subnet0", "subnet1", "subnet2"] {
            assert_eq!(names(&out.join(sub)), files, "{engine}");
        }
    }
}

/// One switch and three CAs; `h1_port` is the port line of the second CA,
/// `switch` the switch header.
fn three_cas(switch: &str, h1_port: &str) -> String {
    format!(
        "\
switchguid=0x0002000000000001
{switch}
[1] \"h0\"[1]
[2] \"h1\"[1]
[3] \"h2\"[1]
caguid=0x0001000000000010
Ca 1 \"h0\"
[1](1000000000011) \"s\"[1]  # lid 2 lmc 0
caguid=0x0001000000000020
Ca 1 \"h1\"
{h1_port}
caguid=0x0001000000000030
Ca 1 \"h2\"
[1](1000000000031) \"s\"[3]  # lid 4 lmc 0
"
    )
}

/// `route` and `verify` on `text` both exit 1 with `cause` and write nothing.
fn assert_refused(d: &Path, text: &str, cause: &str) {
    let net = d.join("bad.net");
    std::fs::write(&net, text).unwrap();
    let out = d.join("out");
    for args in [
        vec!["route", "-t", s(&net), "-e", "minhop", "-o", s(&out)],
        vec!["verify", "-t", s(&net), "-d", s(&out)],
    ] {
        let o = ibf(&args);
        assert_eq!(o.status.code(), Some(1), "{}: {text}", args[0]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("bad.net:{cause}")),
            "{}: {err}",
            args[0]
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(!out.exists(), "nothing written");
    }
}

#[test]
fn route_and_verify_refuse_a_topology_with_one_port_guid_on_two_cas() {
    let d = tempfile::tempdir().unwrap();
    let sw = "Switch 4 \"s\"  # \"s\" base port 0 lid 1 lmc 0";
    let good = three_cas(sw, "[1](1000000000021) \"s\"[2]  # lid 3 lmc 0");
    let net = d.path().join("good.net");
    std::fs::write(&net, &good).unwrap();
    json(&ibf(&["info", s(&net), "--json"]));
    assert_refused(
        d.path(),
        &three_cas(sw, "[1](1000000000011) \"s\"[2]  # lid 3 lmc 0"),
        "11: port GUID 0x0001000000000011 of \"h1\"[1] is already the port GUID of \"h0\"[1] (line 8)",
    );
}

#[test]
fn route_and_verify_refuse_an_unparsable_or_impossible_lid() {
    let d = tempfile::tempdir().unwrap();
    let port = "[1](1000000000021) \"s\"[2]  # lid 3 lmc 0";
    for (switch, h1_port, cause) in [
        (
            "Switch 4 \"s\"  # \"s\" base port 0 lid 1x lmc 0",
            port,
            "2: bad LID '1x'",
        ),
        (
            "Switch 4 \"s\"  # \"s\" base port 0 lid 70000 lmc 0",
            port,
            "2: LID 70000 is outside the unicast range",
        ),
        (
            "Switch 4 \"s\"  # \"s\" base port 0 lid 1 lmc 0",
            "[1](1000000000021) \"s\"[2]  # lid 0 lmc 0",
            "11: LID 0 (no LID assigned) beside assigned LIDs (line 2)",
        ),
        (
            "Switch 4 \"s\"  # \"s\" base port 0 lid 1 lmc 0",
            "[1](1000000000021) \"s\"[2]  # lid 4 lmc 0",
            "14: LID 4 is assigned twice (first on line 11)",
        ),
        (
            "Switch 4 \"s\"  # \"s\" base port 0 lid 1 lmc 0",
            "[1](1000000000021) \"s\"[2]  # lid 3 lmc 1",
            "11: LID 3 with LMC 1 is not a multiple of 2",
        ),
    ] {
        assert_refused(d.path(), &three_cas(switch, h1_port), cause);
    }
}

/// `ibfabric gen ... -o - | head`: the command ends on SIGPIPE as Unix
/// filters do, with no panic on stderr.
#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ibfabric"))
        .args(["gen", "dragonfly", "--p", "6", "-o", "-"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let mut first = [0u8; 64];
    child
        .stdout
        .take()
        .expect("stdout")
        .read_exact(&mut first)
        .expect("some output");
    // The pipe's read end is closed here; the rest of a 5,256-HCA topology
    // has nowhere to go.
    let out = child.wait_with_output().expect("exits");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}

#[test]
fn engines_json_lists_every_engine_with_its_claim() {
    let v = json(&ibf(&["engines", "--json"]));
    assert_eq!(v["schema_version"], 1);
    let list = v["engines"].as_array().expect("a list");
    assert_eq!(list.len(), 12);
    let claim = |n: &str| {
        list.iter()
            .find(|e| e["name"] == n)
            .map(|e| e["deadlock_free"].as_bool())
    };
    assert_eq!(claim("dfdn"), Some(Some(true)));
    assert_eq!(claim("minhop"), Some(Some(false)));
    assert_eq!(claim("dor"), Some(Some(false)));
    assert_eq!(claim("ecube"), Some(Some(true)));
    // How each splits over workers: the engines' own answer.
    let workers = |n: &str| {
        list.iter()
            .find(|e| e["name"] == n)
            .and_then(|e| e["workers"].as_str())
            .map(str::to_string)
    };
    assert_eq!(workers("minhop").as_deref(), Some("by source switch"));
    assert_eq!(workers("dfdn").as_deref(), Some("by destination switch"));
    assert_eq!(workers("nue").as_deref(), Some("in rounds"));
    assert_eq!(
        workers("sssp").as_deref(),
        Some("in rounds with --sssp-streams N")
    );
    assert_eq!(workers("lash").as_deref(), Some("here (not cut)"));
    // Which route every LID of a port with LMC.
    let lmc: Vec<&str> = list
        .iter()
        .filter(|e| e["routes_lmc"] == true)
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(
        lmc,
        [
            "minhop", "sssp", "dfd2", "dfdn", "dfsssp", "lash", "updn", "dnup", "ftree", "nue",
            "dor"
        ]
    );
}

/// Logs go to files and journald without terminal colour codes.
#[test]
fn logs_carry_no_colour_codes_off_a_terminal() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("t.net");
    ok(&["gen", "torus", "--dims", "3x3", "-o", s(&net)]);
    let o = ibf(&[
        "-v",
        "route",
        "-t",
        s(&net),
        "-e",
        "updn",
        "-o",
        s(&d.path().join("o")),
    ]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("INFO"), "logs at -v: {err}");
    assert!(!err.contains('\u{1b}'), "colour codes in: {err:?}");
}

#[test]
fn reroute_after_a_link_fault_and_check_each_update_step() {
    let dir = tempfile::tempdir().expect("tmp");
    let topo = dir.path().join("df2.topo");
    let old = dir.path().join("old");
    let new = dir.path().join("new");
    ok(&["gen", "dragonfly", "--p", "2", "-o", s(&topo)]);
    ok(&["route", "-t", s(&topo), "-e", "dfdn", "-o", s(&old)]);
    // Switch g0r0's port 3 leads to g0r1 (hosts on ports 1-2).
    let fail = "0x0002000000000001:3";
    let o = ibf(&[
        "reroute",
        "-t",
        s(&topo),
        "-d",
        s(&old),
        "--fail",
        fail,
        "-o",
        s(&new),
        "--json",
    ]);
    let j = json(&o);
    assert_eq!(j["rerouted"], true);
    let st = &j["stats"];
    assert!(st["flows_broken"].as_u64().unwrap_or(0) > 0, "{j}");
    assert_eq!(st["flows_broken"], st["flows_rerouted"]);
    assert!(st["vls_after"].as_u64() <= st["vls_before"].as_u64(), "{j}");
    // Each step of the update, checked by the full transition check.
    let steps: Vec<(std::path::PathBuf, std::path::PathBuf)> = match j["drain"].as_str() {
        Some(d) => vec![(old.clone(), d.into()), (d.into(), new.clone())],
        None => vec![(old.clone(), new.clone())],
    };
    for (a, b) in steps {
        let o = ibf(&[
            "verify",
            "-t",
            s(&topo),
            "--fail",
            fail,
            "--transition",
            s(&a),
            s(&b),
            "--json",
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert_eq!(json(&o)["deadlock_free"], true);
    }
    // A fault the topology does not have is refused with the reason.
    let o = ibf(&[
        "reroute",
        "-t",
        s(&topo),
        "-d",
        s(&old),
        "--fail",
        "0x0002000000000001:99",
        "-o",
        s(&new),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has ports"));
}

/// A mesh routed by dimension order loses a link: with the mesh plug-in
/// the detour around it is enabled first and every broken flow is
/// rerouted (the search alone, given only legal turns, reroutes none).
#[test]
fn reroute_a_dor_mesh_with_the_mesh_plugin() {
    let dir = tempfile::tempdir().expect("tmp");
    let topo = dir.path().join("m.net");
    let old = dir.path().join("old");
    ok(&["gen", "mesh", "--dims", "6x6", "-o", s(&topo)]);
    json(&ibf(&[
        "route",
        "-t",
        s(&topo),
        "-e",
        "dor",
        "-o",
        s(&old),
        "--json",
    ]));
    // s0_0's port 3 leads to s0_1 (host on port 1, +X on port 2).
    let fail = "0x0002000000000001:3";
    // `detours` None: the flag left out.
    let run = |detours: Option<&str>, out: &str| {
        let out = dir.path().join(out);
        let mut args = vec![
            "reroute",
            "-t",
            s(&topo),
            "-d",
            s(&old),
            "--fail",
            fail,
            "--turns",
            "none",
            "-o",
            s(&out),
            "--json",
        ];
        if let Some(d) = detours {
            args.extend(["--detours", d]);
        }
        ibf(&args)
    };
    let j = json(&run(Some("mesh"), "new"));
    assert_eq!(j["rerouted"], true, "{j}");
    let st = &j["stats"];
    assert!(st["flows_broken"].as_u64().unwrap_or(0) > 0, "{j}");
    assert_eq!(st["flows_broken"], st["flows_rerouted"]);
    assert_eq!(st["detours_kind"], "mesh", "{j}");
    assert!(
        st["detours"].as_u64().unwrap_or(0) >= 2,
        "both directions: {j}"
    );
    assert_eq!(st["vls_after"], 1);
    let o = run(Some("none"), "plain");
    assert_ne!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // Tables of dor get the mesh plug-in when no detours are named.
    assert_eq!(json(&run(None, "default"))["stats"]["detours_kind"], "mesh");
}

/// E-cube routes a torus on one VL per set of wrap-around links crossed,
/// refuses a mesh with the switch that does not fit, and its tables get
/// the torus plug-in (the mesh plug-in's detours per layer) by default: a
/// wrap-around link lost is rerouted within the same 4 VLs.
#[test]
fn ecube_routes_a_torus_and_reroutes_a_wrap_around_link() {
    let dir = tempfile::tempdir().expect("tmp");
    let topo = dir.path().join("t.net");
    let mesh = dir.path().join("m.net");
    let old = dir.path().join("old");
    ok(&["gen", "torus", "--dims", "5x5", "-o", s(&topo)]);
    ok(&["gen", "mesh", "--dims", "5x5", "-o", s(&mesh)]);
    let r = json(&ibf(&[
        "route",
        "-t",
        s(&topo),
        "-e",
        "ecube",
        "-o",
        s(&old),
        "--json",
    ]));
    assert_eq!(r["vls"], 4, "{r}");
    let o = ibf(&[
        "route",
        "-t",
        s(&mesh),
        "-e",
        "ecube",
        "-o",
        s(&dir.path().join("no")),
    ]);
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not a torus"), "{err}");
    // s0_0's port 2 is its -X link, the wrap-around to s4_0 (host on 1).
    let j = json(&ibf(&[
        "reroute",
        "-t",
        s(&topo),
        "-d",
        s(&old),
        "--fail",
        "0x0002000000000001:2",
        "-o",
        s(&dir.path().join("new")),
        "--json",
    ]));
    assert_eq!(j["rerouted"], true, "{j}");
    let st = &j["stats"];
    assert!(st["flows_broken"].as_u64().unwrap_or(0) > 0, "{j}");
    assert_eq!(st["flows_broken"], st["flows_rerouted"]);
    assert_eq!(st["detours_kind"], "mesh", "{j}");
    assert!(st["vls_after"].as_u64().unwrap_or(99) <= 4, "{j}");
}

/// One schema across commands: every `--json` object names its command
/// and schema version, HCAs are `hcas`, and times name their phase.
#[test]
fn every_json_report_shares_the_schema() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("df.net");
    let out = d.path().join("out");
    let reports = [
        (
            "gen",
            json(&ibf(&[
                "gen",
                "dragonfly",
                "--p",
                "2",
                "-o",
                s(&net),
                "--json",
            ])),
        ),
        ("info", json(&ibf(&["info", s(&net), "--json"]))),
        (
            "route",
            json(&ibf(&["route", "-t", s(&net), "-o", s(&out), "--json"])),
        ),
        (
            "verify",
            json(&ibf(&["verify", "-t", s(&net), "-d", s(&out), "--json"])),
        ),
        ("engines", json(&ibf(&["engines", "--json"]))),
    ];
    for (cmd, v) in &reports {
        assert_eq!(v["schema_version"], 1, "{cmd}: {v}");
        assert_eq!(v["command"], *cmd, "{v}");
        let keys: Vec<&String> = v.as_object().expect("an object").keys().collect();
        assert!(
            !keys.iter().any(|k| *k == "cas" || *k == "seconds"),
            "{cmd}: {keys:?}"
        );
    }
    let hcas: Vec<_> = reports[..4]
        .iter()
        .map(|(_, v)| v["hcas"].clone())
        .collect();
    assert!(hcas.iter().all(|h| *h == hcas[0] && h.is_u64()), "{hcas:?}");
    assert!(reports[0].1["gen_seconds"].is_f64());
    assert!(reports[3].1["verify_seconds"].is_f64());
}

/// `--log-format json`: one JSON object per log line on stderr, no colour.
#[test]
fn json_logs_are_one_object_per_line() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("df.net");
    json(&ibf(&[
        "gen",
        "dragonfly",
        "--p",
        "2",
        "-o",
        s(&net),
        "--json",
    ]));
    let o = ibf(&["--log-format", "json", "-v", "info", s(&net)]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert!(!lines.is_empty(), "info logs at -v");
    for l in lines {
        let v: serde_json::Value = serde_json::from_str(l).expect("a JSON object per line");
        assert!(v["level"].is_string() && v["fields"].is_object(), "{l}");
    }
}

/// Exit codes are documented where a user looks; completions and man
/// pages come from the same definitions as `--help`.
#[test]
fn help_documents_exit_codes_and_completions_and_man_pages_are_generated() {
    let o = ibf(&["--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    for line in [
        "Exit codes:",
        "  3  the tables are unsafe",
        "  2  usage error",
    ] {
        assert!(help.contains(line), "{line}: {help}");
    }
    // The simulator's default model is the packet one, and its help says so.
    let o = ibf(&["sim", "--help"]);
    let sim = String::from_utf8_lossy(&o.stdout);
    assert!(
        sim.contains("packet level by default") && sim.contains("[default: packet]"),
        "{sim}"
    );
    let o = ibf(&["completions", "bash"]);
    assert!(o.status.success());
    let bash = String::from_utf8_lossy(&o.stdout);
    assert!(
        bash.contains("_ibfabric()") && bash.contains("route-multi"),
        "{bash}"
    );
    let d = tempfile::tempdir().unwrap();
    let o = ibf(&["man", "-o", s(d.path())]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let route = std::fs::read_to_string(d.path().join("ibfabric-route.1")).expect("page");
    assert!(
        route.contains(".TH") && route.contains("allow\\-cycles"),
        "{route}"
    );
    assert!(d.path().join("ibfabric.1").is_file());
    // Every page a page names (SEE ALSO, `name(1)`) is written, nested
    // subcommands too.
    for e in std::fs::read_dir(d.path()).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for word in text.split(|c: char| c.is_whitespace() || c == ',') {
            if let Some(name) = word.strip_suffix("(1)") {
                let name = name.replace('\\', "");
                let is_name = !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
                if is_name {
                    assert!(
                        d.path().join(format!("{name}.1")).is_file(),
                        "{name}(1) is named but not written"
                    );
                }
            }
        }
    }
    assert!(d.path().join("ibfabric-gen-multi.1").is_file());
}

/// A report that cannot be written (stdout on a full disk) is an error of
/// the command, exit 1 with the cause, never a panic (exit 101).
#[test]
fn a_json_report_to_a_full_disk_is_an_error_not_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("t.net");
    ok(&["gen", "torus", "--dims", "3x3", "-o", s(&net)]);
    let Some(out) = to_full_disk(&["route", "-t", s(&net), "--dry-run", "--json"]) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("writing the --json report"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `ibfabric ARGS` with stdout on `/dev/full`; None (said) where the
/// machine has none.
fn to_full_disk(args: &[&str]) -> Option<std::process::Output> {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("SKIPPED: no /dev/full on this machine");
        return None;
    };
    Some(
        Command::new(env!("CARGO_BIN_EXE_ibfabric"))
            .args(args)
            .stdout(full)
            .output()
            .expect("runs"),
    )
}

/// A topology without line breaks (`/dev/zero`) is refused at its first
/// line, exit 1, instead of being read into memory without end.
#[test]
fn a_file_without_line_breaks_is_refused() {
    if !Path::new("/dev/zero").exists() {
        eprintln!("SKIPPED: no /dev/zero on this machine");
        return;
    }
    let out = ibf(&["info", "/dev/zero"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("/dev/zero:1: a line longer than"), "{err}");
}

/// `route --out` on an empty or comments-only topology (what
/// `ibnetdiscover > file` leaves while it runs) is refused, exit 1, and
/// the table set in place stays byte for byte.
#[test]
fn routing_an_empty_discovery_is_refused_and_the_set_in_place_stays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = dir.path().join("t.net");
    let out = dir.path().join("out");
    let o = ibf(&["gen", "kary", "--k", "2", "--n", "2", "-o", s(&net)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let route = |net: &Path| {
        ibf(&[
            "route",
            "--topology",
            net.to_str().expect("utf-8"),
            "--engine",
            "updn",
            "--out",
            out.to_str().expect("utf-8"),
        ])
    };
    let o = route(&net);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let snapshot = || -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&out)
            .expect("set")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.is_file())
            .map(|p| (p.display().to_string(), std::fs::read(&p).expect("reads")))
            .collect();
        v.sort();
        v
    };
    let before = snapshot();
    for text in ["", "# ibnetdiscover still running\n\n"] {
        let empty = dir.path().join("empty.net");
        std::fs::write(&empty, text).expect("write");
        let o = route(&empty);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("empty.net: the discovery holds 0 switches"),
            "{err}"
        );
        assert!(err.contains("nothing routed or written"), "{err}");
        assert!(snapshot() == before, "the set in place changed");
    }
}

/// `verify --dir` checks a set as a whole: without its manifest (a route
/// killed mid-commit) it is refused unless --no-manifest says to take the
/// files as they are; with a file of another routing mixed in, the
/// manifest's digest refuses it. Temporary files a killed writer left,
/// also of files the next routing does not write, are removed by it.
#[test]
fn verify_dir_takes_a_set_only_whole() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("t.net");
    let out = d.path().join("out");
    let other = d.path().join("other");
    let o = ibf(&["gen", "kary", "--k", "2", "--n", "2", "-o", s(&net)]);
    assert!(o.status.success());
    for (engine, dir) in [("updn", &out), ("minhop", &other)] {
        let o = ibf(&["route", "-t", s(&net), "-e", engine, "-o", s(dir)]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let ok = ibf(&["verify", "-t", s(&net), "-d", s(&out)]);
    assert_eq!(ok.status.code(), Some(0));
    // A file of another routing mixed in.
    std::fs::copy(
        other.join("ibfabric-lfts.bin"),
        out.join("ibfabric-lfts.bin"),
    )
    .unwrap();
    let mixed = ibf(&["verify", "-t", s(&net), "-d", s(&out)]);
    assert_eq!(mixed.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&mixed.stderr).contains("ibfabric-lfts.bin"),
        "{}",
        String::from_utf8_lossy(&mixed.stderr)
    );
    // No manifest.
    std::fs::remove_file(out.join("ibfabric-tables.txt")).unwrap();
    let bare = ibf(&["verify", "-t", s(&net), "-d", s(&out)]);
    let err = String::from_utf8_lossy(&bare.stderr);
    assert_eq!(bare.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no manifest") && err.contains("--no-manifest"),
        "{err}"
    );
    let taken = ibf(&["verify", "-t", s(&net), "-d", s(&out), "--no-manifest"]);
    assert_eq!(taken.status.code(), Some(0));
    // Leftovers of a killed writer (pid_max is at most 2^22 on Linux: this
    // pid is nobody's), of a file the next routing writes and of one it
    // does not.
    let dead = [
        ".opensm-lfts.dump.tmp-4294967295-0",
        ".opensm-sl2vl.dump.tmp-4294967295-3",
    ];
    for n in dead {
        std::fs::write(out.join(n), b"partial").unwrap();
    }
    let o = ibf(&["route", "-t", s(&net), "-e", "updn", "-o", s(&out)]);
    assert!(o.status.success());
    for n in dead {
        assert!(!out.join(n).exists(), "{n} left behind");
    }
}

/// A text report to a full disk is an error of the output (exit 1, one
/// line), not a panic.
#[test]
fn a_text_report_to_a_full_disk_is_an_error_not_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("t.net");
    ok(&["gen", "torus", "--dims", "3x3", "-o", s(&net)]);
    for args in [
        vec!["route", "-t", s(&net), "--dry-run"],
        vec!["info", s(&net)],
        vec!["engines"],
    ] {
        let Some(out) = to_full_disk(&args) else {
            return;
        };
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("cannot write the output"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// README's update walkthrough as written: `reroute` of Nue tables writes
/// a drain stage under NEW/drain, and `verify --transition OLD NEW` checks
/// the update as the switches take it, OLD to the drain stage, then the
/// drain stage to NEW, and passes; the one-step mix of OLD and NEW (which
/// never happens) has a cycle.
#[test]
fn verify_transition_checks_a_reroute_with_its_drain_stage_in_two_steps() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("df.net");
    let out = d.path().join("out");
    ok(&["gen", "dragonfly", "--p", "3", "-o", s(&net)]);
    ok(&[
        "route",
        "--topology",
        s(&net),
        "--engine",
        "nue",
        "--max-vls",
        "4",
        "--out",
        s(&out),
    ]);
    // The first fault of the first switch whose reroute needs a drain stage.
    let mut found = None;
    for port in 1..=11 {
        let fail = format!("0x0002000000000001:{port}");
        let new = d.path().join(format!("new{port}"));
        let o = ibf(&[
            "reroute",
            "--topology",
            s(&net),
            "--dir",
            s(&out),
            "--fail",
            &fail,
            "--out",
            s(&new),
        ]);
        if o.status.success() && new.join("drain").join("ibfabric-tables.txt").exists() {
            found = Some((fail, new));
            break;
        }
    }
    let (fail, new) = found.expect("a fault whose reroute has a drain stage");
    let args = [
        "verify",
        "--topology",
        s(&net),
        "--fail",
        &fail,
        "--transition",
        s(&out),
        s(&new),
    ];
    let o = ibf(&args);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert_eq!(text.matches("step            ").count(), 2, "{text}");
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let j = json(&ibf(&with_json));
    assert_eq!(j["deadlock_free"], true);
    assert_eq!(j["steps"].as_array().map(Vec::len), Some(2));
    // The same tables without their drain stage: the one-step mix.
    let flat = d.path().join("flat");
    std::fs::create_dir(&flat).unwrap();
    for e in std::fs::read_dir(&new).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, flat.join(p.file_name().unwrap())).unwrap();
        }
    }
    let o = ibf(&[
        "verify",
        "--topology",
        s(&net),
        "--fail",
        &fail,
        "--transition",
        s(&out),
        s(&flat),
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// `certs renew` replaces a certificate and its key in place with a new
/// pair of the same identity and names from the CA.
#[test]
fn certs_renew_keeps_the_identity_and_names_with_a_new_key() {
    let d = tempfile::tempdir().unwrap();
    let pki = d.path().join("pki");
    ok(&["certs", "--out", s(&pki), "ca"]);
    let (ca, ca_key) = (pki.join("ca.pem"), pki.join("ca-key.pem"));
    let issued = json(&ibf(&[
        "certs",
        "--out",
        s(&pki),
        "--json",
        "issue",
        "--ca",
        s(&ca),
        "--ca-key",
        s(&ca_key),
        "router",
        "--guid",
        "0x0002c90300000001",
        "--dns",
        "r1.example.org",
        "--ip",
        "127.0.0.1",
    ]));
    let cert = std::path::PathBuf::from(issued["cert"].as_str().unwrap());
    let key = std::path::PathBuf::from(issued["key"].as_str().unwrap());
    let (old_cert, old_key) = (std::fs::read(&cert).unwrap(), std::fs::read(&key).unwrap());
    // A site gave the key to the services' group (0640): the renewed key
    // keeps the group read bit (and its owner and group).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    }
    let renewed = json(&ibf(&[
        "certs",
        "--json",
        "renew",
        "--ca",
        s(&ca),
        "--ca-key",
        s(&ca_key),
        "--cert",
        s(&cert),
    ]));
    assert_eq!(renewed["identity"], issued["identity"]);
    assert_eq!(renewed["key"].as_str(), Some(s(&key)));
    let (new_cert, new_key) = (std::fs::read(&cert).unwrap(), std::fs::read(&key).unwrap());
    assert_ne!(new_cert, old_cert);
    assert_ne!(new_key, old_key);
    assert_eq!(
        ibtls::Identity::from_cert_pem(&new_cert).unwrap().to_uri(),
        "ibfabric://router/0x0002c90300000001"
    );
    let (dns, ips) = ibtls::Identity::names_pem(&new_cert).unwrap();
    assert_eq!(dns, vec!["r1.example.org".to_string()]);
    assert_eq!(ips, vec![std::net::IpAddr::from([127, 0, 0, 1])]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "the group read bit kept, nothing for others");
    }
    // The renewed pair is a TLS identity the transport takes.
    let t = ibtls::TlsSettings {
        ca: ca.clone(),
        cert: cert.clone(),
        key: key.clone(),
    };
    assert!(ibtls::server_tls(&t).is_ok());
    // No --out for issue: said.
    let o = ibf(&["certs", "ca"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give --out"));
}

/// `verify --dir` with one file named apart reads the directory's other
/// files in the form it holds: a compact set's SL-to-VL tables, without
/// which a layered engine's tables look cyclic.
#[test]
fn verify_dir_with_a_file_named_apart_reads_the_compact_rest() {
    let d = tempfile::tempdir().unwrap();
    let (net, out) = (d.path().join("t.net"), d.path().join("out"));
    ok(&["gen", "torus", "--dims", "3x3", "-o", s(&net)]);
    ok(&["route", "-t", s(&net), "-e", "dfdn", "-o", s(&out)]);
    assert!(out.join("ibfabric-sl2vl.bin").is_file());
    let psl = out.join("ibfabric-pathsl.bin");
    let v = json(&ibf(&[
        "verify",
        "-t",
        s(&net),
        "-d",
        s(&out),
        "--path-sl",
        s(&psl),
        "--json",
    ]));
    assert_eq!(v["deadlock_free"], true, "{v}");
    assert!(v["vls"].as_u64().unwrap_or(0) >= 2, "{v}");
}

/// `dqr-curve` on a written topology gives the library's curve on the
/// generated fabric (the `dqr` bench's), point for point, for the same
/// seed; turns that must go up the list make runs stop, and each stop
/// is counted at its fault.
#[test]
fn dqr_curve_reproduces_the_library_curve_point_for_point() {
    use fabric::dqr::curve::{CurveSetup, ListAfter, tolerance};
    use fabric::dqr::{ChannelList, Detours, Options, Turns};
    use fabric::routing::{EngineKind, EngineOptions};
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("m6.net");
    assert!(
        ibf(&["gen", "mesh", "--dims", "6x6", "-o", s(&net)])
            .status
            .success()
    );
    let svg = d.path().join("curve.svg");
    let o = ibf(&[
        "dqr-curve",
        "-t",
        s(&net),
        "-e",
        "updn",
        "--runs",
        "12",
        "--faults",
        "6",
        "--seed",
        "5",
        "--turns",
        "none",
        "--json",
        "--svg",
        s(&svg),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");

    let f = fabric::generate::generate(&fabric::generate::Topology::Mesh {
        dims: vec![6, 6],
        torus: false,
        hosts: 1,
    })
    .expect("mesh");
    let r = EngineKind::Updn
        .engine()
        .route(&f, &EngineOptions::default())
        .expect("routes");
    let (list, _) = ChannelList::build(&f, &r).expect("list");
    let setup = CurveSetup {
        runs: 12,
        faults: 6,
        seed: 5,
        options: Options {
            turns: Turns::None,
            detours: Detours::None,
            ..Options::default()
        },
        list: ListAfter::Pruned,
    };
    let c = tolerance(&f, &r, &list, &setup, |_| {});
    let got: Vec<usize> = j["tolerated"]
        .as_array()
        .expect("tolerated")
        .iter()
        .map(|v| v.as_u64().expect("count") as usize)
        .collect();
    assert_eq!(got, c.tolerated, "{j}");
    assert!(c.tolerated[0] < 12, "some runs stop: {c:?}");
    let stops: u64 = j["stopped"]
        .as_array()
        .expect("stopped")
        .iter()
        .map(|s| s["runs"].as_u64().expect("runs"))
        .sum();
    assert_eq!(stops as usize + c.tolerated[5], 12, "{j}");
    let drawn = std::fs::read_to_string(&svg).expect("svg");
    assert!(
        drawn.starts_with("<svg") && drawn.contains("polyline"),
        "{drawn}"
    );
    // No run asked for: said, not an empty curve.
    let o = ibf(&["dqr-curve", "-t", s(&net), "-e", "updn", "--runs", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--runs"));
}

/// `dqr-curve --switch-flows` on a fat tree: DQR reconnects every flow
/// toward a switch (the fat-tree routing leaves switch-to-switch paths
/// out), then tolerates the faults; without turns that go down the list
/// the spine-to-spine U-turns cannot be made, and that is said.
#[test]
fn dqr_curve_with_switch_flows_reconnects_them_before_the_faults() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("ft.net");
    let made = ibf(&[
        "gen",
        "fattree",
        "--leaves",
        "6",
        "--spines",
        "4",
        "--hosts",
        "3",
        "-o",
        s(&net),
    ]);
    assert!(made.status.success());
    let curve = |turns: &str| {
        ibf(&[
            "dqr-curve",
            "-t",
            s(&net),
            "-e",
            "ftree",
            "--switch-flows",
            "--turns",
            turns,
            "--runs",
            "5",
            "--faults",
            "3",
            "--json",
        ])
    };
    let o = curve("single");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    // 10 endpoints, each reached from the 27 other end ports but the 3
    // hosts of its own switch when it is a leaf.
    assert_eq!(j["switch_flows"]["endpoints"], 10, "{j}");
    assert_eq!(j["switch_flows"]["flows_rerouted"], 10 * 27 - 6 * 3, "{j}");
    assert_eq!(j["switch_flows"]["vls_after"], 1, "{j}");
    assert_eq!(j["percent"][0], 100.0, "{j}");
    let o = curve("none");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("could not reconnect the switch-to-switch flows"),
        "{err}"
    );
}

/// A fabric with LMC 1 (the ibnetdiscover man page's example): `info`
/// shows its LID ranges; `route` picks an engine that routes every LID
/// (dfdn), spreads them and writes a set `verify` reads back; an engine
/// that routes one LID per port is refused by name; `reroute` of a link
/// moves the flows of the LIDs that crossed it, and no other.
#[test]
fn a_fabric_with_lmc_is_routed_lid_by_lid_or_refused_by_name() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fabric/tests/data/ibnetdiscover/ibtopotool-1.txt"
    );
    let o = ibf(&["info", file]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("LMC             up to 1 on 5 ports, 12 LIDs")
    );
    let j = json_any(&ibf(&["info", file, "--json"]));
    assert_eq!(j["max_lmc"], 1);
    assert_eq!(j["lids"], 12);
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("set");
    let out_s = out.to_str().unwrap();
    let j = json(&ibf(&["route", "-t", file, "--out", out_s, "--json"]));
    assert_eq!(j["engine"], "dfdn");
    assert_eq!(j["deadlock_free"], true);
    assert_eq!(j["broken_pairs"], 0);
    // 5 linked CA ports with 2 LIDs each: each port's 2 LIDs toward the
    // 8 LIDs of the others.
    let pairs = 5 * 2 * 8;
    assert_eq!(j["pairs"], pairs);
    assert!(j["lid_spread"]["pairs"].as_u64().unwrap() > 0);
    // Link load per LID (a port toward each LID of another: 5 * 8) and
    // per port pair on base LIDs (5 * 4).
    assert_eq!(j["link_load"]["pairs"], 40);
    assert_eq!(j["link_load_base"]["pairs"], 20);
    let v = json(&ibf(&["verify", "-t", file, "--dir", out_s, "--json"]));
    assert_eq!(v["pairs"], pairs);
    assert_eq!(v["deadlock_free"], true);
    assert_eq!(v["lid_spread"], j["lid_spread"]);
    assert_eq!(v["link_load_base"], j["link_load_base"]);
    let o = ibf(&["route", "-t", file, "-e", "ecube", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("engine ecube routes one LID per port")
            && e.contains("minhop, sssp, dfd2, dfdn"),
        "{e}"
    );
    // The two switches share two links, and each port's two LIDs take
    // one each: failing one breaks half the destination LIDs, and only
    // their flows move.
    let new = d.path().join("new");
    let r = json(&ibf(&[
        "reroute",
        "-t",
        file,
        "--dir",
        out_s,
        "--fail",
        "0x5442ba00003080:10",
        "--out",
        new.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(r["rerouted"], true, "{r}");
    let st = &r["stats"];
    assert_eq!(st["flows"], pairs);
    assert_eq!(st["destinations_affected"], 5, "{st}");
    assert!(st["flows_broken"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(st["flows_rerouted"], st["flows_broken"]);
    let v = json(&ibf(&[
        "verify",
        "-t",
        file,
        "--dir",
        new.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(v["deadlock_free"], true);
    assert_eq!(v["broken_pairs"], 0);

    // The base LIDs alone use both links between the switches (a one-link
    // funnel would be max/mean 2).
    let b = &j["link_load_base"];
    assert!(
        b["max"].as_f64().unwrap() < 2.0 * b["mean"].as_f64().unwrap(),
        "{b}"
    );
    // The packet model on the set, on base LIDs and spread over both: no
    // deadlock, and both carry traffic over both links.
    let load = |lids: &str| {
        json(&ibf(&[
            "load",
            "-t",
            file,
            "-d",
            out_s,
            "--lids",
            lids,
            "--samples",
            "4",
            "--json",
        ]))
    };
    let (base, spread) = (load("base"), load("spread"));
    assert_eq!(
        (base["max_lmc"].as_u64(), base["lids"].as_str()),
        (Some(1), Some("base"))
    );
    assert_eq!(spread["lids"], "spread");
    assert!(base["deadlock"].is_null() && spread["deadlock"].is_null());
    let (tb, ts) = (
        base["throughput"].as_f64().unwrap(),
        spread["throughput"].as_f64().unwrap(),
    );
    assert!(tb > 0.42 && ts > 0.42, "spread {ts}, base {tb}");
}
