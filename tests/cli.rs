//! The `ibfabric` binary end to end: exit codes, JSON, files on disk.

use std::path::Path;
use std::process::{Command, Output};

fn ibf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ibfabric"))
        .args(args)
        .output()
        .expect("binary runs")
}

fn json(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("stdout is JSON")
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
    assert_eq!(info["cas"], 64);
    assert_eq!(info["diameter"], 4);
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
    assert!(out.join("opensm-lfts.dump").exists());
    assert!(!out.join("path-sl.txt").exists(), "MinHop sets no SLs");

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
    let r = json(&ibf(&[
        "route",
        "-t",
        s(&net),
        "-e",
        "minhop",
        "-o",
        s(&out),
        "--json",
    ]));
    assert_eq!(r["deadlock_free"], false);
    let cycle = r["cycle"].as_array().expect("cycle witness");
    assert!(cycle.len() >= 2);
    assert!(out.join("opensm-lfts.dump").exists());
    // The verifier says the same from disk, with exit code 2.
    let v = ibf(&["verify", "-t", s(&net), "-d", s(&out)]);
    assert_eq!(v.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&v.stdout).contains("deadlock free   NO"));
    // Asked for deadlock freedom, route refuses and writes nothing.
    let out2 = d.path().join("out2");
    let r = ibf(&[
        "route",
        "-t",
        s(&net),
        "-e",
        "minhop",
        "-o",
        s(&out2),
        "--require-deadlock-free",
    ]);
    assert_eq!(r.status.code(), Some(1));
    assert!(!out2.exists());
}

#[test]
fn bad_input_exits_non_zero_with_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    let net = d.path().join("bad.net");
    std::fs::write(&net, "Switch 2 \"a\"\n[1] \"nowhere\"[1]\n").unwrap();
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
    let a = std::fs::read(def.join("opensm-lfts.dump")).unwrap();
    let b = std::fs::read(leaf.join("opensm-lfts.dump")).unwrap();
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
    assert_eq!(v["cas"], 48);
    let manifest = out.join("manifest.toml");
    assert!(out.join("subnet2.net").is_file());
    let svg = dir.path().join("sim.svg");
    let o = ibf(&[
        "sim",
        "--manifest",
        manifest.to_str().expect("utf-8 path"),
        "--rings",
        "20",
        "--isp",
        "0,100",
        "--samples",
        "2",
        "--svg",
        svg.to_str().expect("utf-8 path"),
        "--json",
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
    assert!(std::fs::read_to_string(&svg)
        .expect("svg")
        .starts_with("<svg"));
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
        assert!(sdir.join("opensm-lfts.dump").is_file());
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
        assert!(!o.status.success(), "{v}");
        assert_eq!(v["written"], false);
        assert!(!out.exists(), "nothing written");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("nothing written"), "{err}");
    };
    // Shortest subnet paths close a cycle through the routers.
    let out = dir.path().join("ring-shortest");
    let (o, v) = run(&ring, "ftree", &["--transit", "shortest"], &out);
    refused(&o, &v, &out);
    assert!(!v["global"]["cycle"].is_null(), "{v}");
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
