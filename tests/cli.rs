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

    let o = ibf(&["route", "-t", s(&net), "-e", "nosuch", "-o", s(d.path())]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown routing engine 'nosuch'"));

    let o = ibf(&["gen", "slimfly", "--q", "9", "-o", s(&net)]);
    assert_eq!(o.status.code(), Some(1));
}
