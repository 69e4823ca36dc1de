//! Multicast through the `ibfabric` binary: `route --mcast-groups` writes
//! the trees into the set and `verify -d` checks them again; the check
//! modes refuse to write; `reroute` carries the trees over a fault; a later
//! routing without groups removes them; bad input names file and line.

use std::path::Path;
use std::process::{Command, Output};

fn ibf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ibfabric"))
        .args(args)
        .output()
        .expect("binary runs")
}

fn json_any(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

fn setup() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    setup_with(&["dragonfly", "--p", "2"])
}

/// A scratch directory with the fabric `gen TOPOLOGY...` makes and a groups file
/// of IPoIB's broadcast group over every CA port.
fn setup_with(topology: &[&str]) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let d = tempfile::tempdir().expect("tmp");
    let net = d.path().join("fabric.net");
    let mut args = vec!["gen"];
    args.extend_from_slice(topology);
    args.extend_from_slice(&["-o", s(&net)]);
    assert!(ibf(&args).status.success());
    let groups = d.path().join("groups.txt");
    std::fs::write(&groups, "# IPoIB broadcast\n0xC000 sl=0 all\n").expect("groups");
    (d, net, groups)
}

/// `route` of LASH on `net` with `groups` and the `extra` arguments.
fn route(net: &Path, groups: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "route",
        "-t",
        s(net),
        "-e",
        "lash",
        "--mcast-groups",
        s(groups),
    ];
    args.extend_from_slice(extra);
    ibf(&args)
}

#[test]
fn a_set_carries_its_trees_and_verify_checks_them_again() {
    let (d, net, groups) = setup();
    let out = d.path().join("out");
    let o = route(&net, &groups, &["--json", "-o", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json_any(&o);
    assert_eq!(v["multicast"]["deadlock_free"], true, "{v}");
    assert_eq!(v["multicast"]["groups"], 1);
    assert_eq!(v["multicast"]["memberships"], 72);
    let manifest = std::fs::read_to_string(out.join("ibfabric-tables.txt")).expect("manifest");
    for f in [
        "ibfabric-mcast-tree.txt",
        "ibfabric-mcast-groups.txt",
        "ibfabric-mfts.txt",
    ] {
        assert!(manifest.contains(f), "{f} in the manifest:\n{manifest}");
    }
    let groups_written = std::fs::read_to_string(out.join("ibfabric-mcast-groups.txt")).expect("g");
    assert!(
        groups_written.contains("0xC000 sl=15 all"),
        "{groups_written}"
    );
    // The unicast files were written beside the verification: the time
    // is reported, and every file in the directory is one the set lists
    // (nothing staged is left behind).
    assert!(v["write_seconds"].as_f64().is_some_and(|t| t > 0.0), "{v}");
    for e in std::fs::read_dir(&out).expect("out") {
        let name = e.expect("entry").file_name().to_string_lossy().into_owned();
        assert!(
            name == "ibfabric-tables.txt" || manifest.contains(&name),
            "{name} is not in the manifest:\n{manifest}"
        );
    }

    let o = ibf(&["verify", "-t", s(&net), "-d", s(&out), "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v = json_any(&o);
    assert_eq!(v["multicast"]["deadlock_free"], true, "{v}");
    assert_eq!(v["multicast"]["broken"], 0, "{v}");

    // A trees file changed by hand no longer matches the manifest.
    let mfts = out.join("ibfabric-mfts.txt");
    let text = std::fs::read_to_string(&mfts).expect("mfts");
    std::fs::write(&mfts, text.replacen(" 0x001 ", " 0x002 ", 1)).expect("edit");
    let o = ibf(&["verify", "-t", s(&net), "-d", s(&out)]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("ibfabric-mfts.txt"));

    // A routing without groups removes the trees of the one before.
    let o = ibf(&["route", "-t", s(&net), "-e", "lash", "-o", s(&out)]);
    assert!(o.status.success());
    assert!(!out.join("ibfabric-mcast-tree.txt").exists());
    assert!(!out.join("ibfabric-mfts.txt").exists());
}

#[test]
fn check_modes_refuse_to_write_and_min_hop_trees_exit_unsafe() {
    let (d, net, groups) = setup();
    let out = d.path().join("out");
    let o = route(&net, &groups, &["-o", s(&out), "--mcast-trees", "min-hop"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--dry-run"));
    assert!(!out.exists());

    let o = route(
        &net,
        &groups,
        &["--dry-run", "--json", "--mcast-trees", "min-hop"],
    );
    assert_eq!(o.status.code(), Some(3), "unsafe");
    let v = json_any(&o);
    assert_eq!(v["deadlock_free"], true, "unicast alone: {v}");
    assert_eq!(
        v["multicast"]["cycle_mlids"],
        serde_json::json!([0xC000]),
        "{v}"
    );
    assert!(
        v["multicast"]["cycle_text"]
            .as_str()
            .is_some_and(|t| t.contains("VL0"))
    );

    let o = ibf(&[
        "route",
        "-t",
        s(&net),
        "-e",
        "updn",
        "--max-vls",
        "1",
        "--dry-run",
        "--mcast-groups",
        s(&groups),
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--mcast-trees shared"));
}

#[test]
fn reroute_carries_the_trees_over_the_fault() {
    let (d, net, groups) = setup();
    let out = d.path().join("out");
    let new = d.path().join("new");
    assert!(route(&net, &groups, &["-o", s(&out)]).status.success());
    // A tree link: the root's first child, as the plan lists it.
    let plan = std::fs::read_to_string(out.join("ibfabric-mcast-tree.txt")).expect("plan");
    let child = plan
        .lines()
        .find(|l| l.contains(" parent "))
        .expect("a child")
        .split_whitespace()
        .collect::<Vec<_>>();
    let fault = format!("{}:{}", child[3], child[5]);
    let o = ibf(&[
        "reroute",
        "-t",
        s(&net),
        "-d",
        s(&out),
        "--fail",
        &fault,
        "-o",
        s(&new),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plan2 = std::fs::read_to_string(new.join("ibfabric-mcast-tree.txt")).expect("new plan");
    assert_ne!(plan, plan2, "the tree went around the fault");
    assert!(!plan2.contains(&format!("parent {} down {} ", child[3], child[5])));
    let o = ibf(&[
        "verify",
        "-t",
        s(&net),
        "--fail",
        &fault,
        "--transition",
        s(&out),
        s(&new),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = ibf(&["verify", "-t", s(&net), "-d", s(&new), "--json"]);
    let v = json_any(&o);
    assert_eq!(v["multicast"]["deadlock_free"], true, "{v}");
    assert_eq!(v["multicast"]["broken"], 0, "{v}");
}

#[test]
fn a_bad_groups_file_names_its_line() {
    let (d, net, _) = setup();
    let bad = d.path().join("bad.txt");
    std::fs::write(&bad, "0xC000 sl=0 all\n0xC001 sl=0 0x42\n").expect("bad");
    let o = ibf(&[
        "route",
        "-t",
        s(&net),
        "--dry-run",
        "--mcast-groups",
        s(&bad),
    ]);
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.txt:2:") && err.contains("not in the topology"),
        "{err}"
    );
}

/// Two sets whose trees come from different spanning trees of a torus:
/// `verify --transition` finds the cycle switches holding a mix of their
/// entries could close, and says the update is not deadlock free.
#[test]
fn a_transition_between_unrelated_trees_is_not_deadlock_free() {
    use fabric::mcast::tree::{SpanningTree, group_tree};
    use fabric::mcast::{Multicast, TreePlan};
    let (d, net, groups) = setup_with(&["torus", "--dims", "4x4"]);
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    assert!(route(&net, &groups, &["-o", s(&a)]).status.success());
    // Set b: the same tables, the trees of a spanning tree from another root.
    let f = fabric::formats::ibnetdiscover::read(&net).expect("topology");
    let r = fabric::formats::tableset::read_set(&f, &a).expect("set a");
    let mc = fabric::formats::tableset::read_multicast(&f, &a)
        .expect("reads")
        .expect("trees");
    let plan = mc.plan.clone().expect("plan");
    let g = fabric::graph::SwitchGraph::new(&f);
    let tree = SpanningTree::bfs(&g, (plan.tree.root + 5) % 16);
    let mfts = group_tree(&f, &tree, 0xC000, &mc.groups[0].members).expect("tree");
    let other = Multicast {
        groups: mc.groups.clone(),
        mfts,
        plan: Some(TreePlan { tree, ..plan }),
    };
    let kind = fabric::routing::EngineKind::Lash;
    let v = fabric::verify::accept(
        &f,
        kind.engine().as_ref(),
        r,
        fabric::verify::Policy::DeadlockFree,
    )
    .expect("accepted");
    fabric::formats::stage_routing(&f, &v, &b, fabric::formats::Export::default())
        .expect("staged")
        .with_multicast(&f, &other)
        .expect("trees staged")
        .commit()
        .expect("written");
    // Each set alone is fine; the mix is not.
    for dir in [&a, &b] {
        assert_eq!(
            ibf(&["verify", "-t", s(&net), "-d", s(dir)]).status.code(),
            Some(0)
        );
    }
    let o = ibf(&[
        "verify",
        "-t",
        s(&net),
        "--transition",
        s(&a),
        s(&b),
        "--json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let v = json_any(&o);
    assert!(
        v["multicast_mix_cycle"]
            .as_str()
            .is_some_and(|c| c.contains("VL")),
        "{v}"
    );
    assert_eq!(v["deadlock_free"], false);
}

#[test]
fn load_carries_the_sets_own_trees_and_deadlocks_on_min_hop_ones() {
    let (d, net, groups) = setup_with(&["torus", "--dims", "6x6"]);
    let res = d.path().join("res");
    assert!(route(&net, &groups, &["--out", s(&res)]).status.success());
    fn args<'a>(net: &'a Path, dir: &'a Path) -> Vec<&'a str> {
        vec!["load", "-t", s(net), "-d", s(dir), "--mcast-share", "0.3"]
    }
    let o = ibf(&[args(&net, &res), vec!["--samples", "4", "--json"]].concat());
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let j = json_any(&o);
    assert!(j["deadlock"].is_null(), "{j}");
    assert!(j["throughput"].as_f64().unwrap_or(0.0) > 0.05, "{j}");
    assert_eq!(j["groups"], 1);

    // The same engine's routes with OpenSM-like trees on SL 0.
    let plain = d.path().join("plain");
    let o = ibf(&["route", "-t", s(&net), "-e", "lash", "--out", s(&plain)]);
    assert!(o.status.success());
    let given = ["--mcast-groups", s(&groups), "--mcast-trees", "min-hop"];
    let o = ibf(&[
        args(&net, &plain),
        given.to_vec(),
        vec!["--samples", "4", "--json"],
    ]
    .concat());
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let j = json_any(&o);
    assert!(j["deadlock"]["channels"].as_u64().unwrap_or(0) >= 2, "{j}");
    assert!(
        j["deadlock"]["cycle"]
            .as_str()
            .unwrap_or("")
            .contains(" -> "),
        "{j}"
    );

    // The set's own groups and trees given as files read the same.
    let (own_g, own) = (
        res.join("ibfabric-mcast-groups.txt"),
        res.join("ibfabric-mfts.txt"),
    );
    let given = ["--mcast-groups", s(&own_g), "--mfts", s(&own), "--json"];
    let o = ibf(&[args(&net, &res), given.to_vec()].concat());
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(json_any(&o)["deadlock"].is_null());
    let o = ibf(&[args(&net, &res), vec!["--mcast-groups", s(&groups)]].concat());
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs their trees"));

    // Without groups there is nothing to send a share to.
    let o = ibf(&args(&net, &plain));
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no multicast groups"));
    let o = ibf(&["load", "-t", s(&net), "-d", s(&res), "--mcast-share", "1.5"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--mcast-share"));
}
