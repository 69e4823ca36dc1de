//! A stock OpenSM answers off-subnet PathRecords with the router port our
//! `prefix` routes chose: `route-multi -a prefix` writes each subnet's
//! `prefix-routes.conf`, OpenSM (`prefix_routes_file`) runs on ibsim with
//! the subnet's router nodes, and `saquery` for a remote host's GID returns
//! the LID of that router port. ISSR chooses per GID, which OpenSM's prefix
//! routes cannot say: no file is written for it.

use fabric::formats::{ibnetdiscover, manifest};
use fabric::model::NodeKind;
use integration_tests::ibfabric;
use integration_tests::sim::{Sim, plugin_conf};
use std::collections::HashMap;
use std::path::PathBuf;

/// `0x<prefix> 0x<guid>` lines of a prefix-routes.conf.
fn routes(text: &str) -> HashMap<u64, u64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('*'))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let p = u64::from_str_radix(w.next()?.trim_start_matches("0x"), 16).ok()?;
            let g = u64::from_str_radix(w.next()?.trim_start_matches("0x"), 16).ok()?;
            Some((p, g))
        })
        .collect()
}

fn ask_every_remote_host(
    fab: &std::path::Path,
    out: &std::path::Path,
    m: &manifest::Manifest,
    li: usize,
    tmp: &std::path::Path,
) {
    let local = &m.fabric.subnets[li];
    let conf = out.join(&local.name).join("prefix-routes.conf");
    let chosen = routes(&std::fs::read_to_string(&conf).expect("prefix-routes.conf written"));
    assert_eq!(
        chosen.len(),
        m.fabric.subnets.len() - 1,
        "one line per remote prefix: {chosen:?}"
    );

    let net = fab.join(format!("{}.net", local.name));
    let f = ibnetdiscover::read(&net).unwrap();
    // Both routers have a port in this subnet (one each, striped: OpenSM
    // knows a router by the first port it discovers, so a route naming a
    // router's second port in the subnet would fail at random): the test
    // tells which one OpenSM picked.
    let router_ports: Vec<u64> = f
        .endports()
        .iter()
        .filter(|&&s| f.kind(f.node_of(s)) == NodeKind::Router)
        .map(|&s| f.port_guid(s))
        .collect();
    assert_eq!(
        router_ports.len(),
        2,
        "two routers, one port each, in {}",
        local.name
    );
    let src = first_ca(&f);

    let simdir = tmp.join(format!("sim{li}"));
    std::fs::create_dir_all(&simdir).unwrap();
    let mut sim = Sim::start(&net, &simdir).expect("ibsim models router nodes");
    sim.run_opensm(&format!(
        "log_flags 0x07\nsubnet_prefix {:#018x}\nprefix_routes_file {}\nrouting_engine file,no_fallback\nlfts_file {}\n",
        local.prefix,
        conf.display(),
        out.join(&local.name).join("opensm-lfts.dump").display()
    ))
    .expect("OpenSM up with our LFTs and prefix routes");
    let lid_of = live_lids(&sim, &simdir);

    let mut asked = 0;
    for remote in m.fabric.subnets.iter().filter(|r| r.prefix != local.prefix) {
        let rf = ibnetdiscover::read(&fab.join(format!("{}.net", remote.name))).unwrap();
        let want = chosen[&remote.prefix];
        assert!(
            router_ports.contains(&want),
            "{want:#x} is a router port here"
        );
        for &s in rf
            .endports()
            .iter()
            .filter(|&&s| rf.kind(rf.node_of(s)) == NodeKind::Ca)
        {
            let pair = format!(
                "{}-{}",
                gid(0xfe80_0000_0000_0000, src),
                gid(remote.prefix, rf.port_guid(s))
            );
            let (dlid, _) = path_record(&sim, &pair);
            assert_eq!(
                dlid, lid_of[&want],
                "{pair}: OpenSM answered LID {dlid}, the prefix route names {want:#x} (LID {})",
                lid_of[&want]
            );
            asked += 1;
        }
    }
    assert_eq!(asked, 8, "every remote host asked");
}

/// Three subnets of two leaves, two spines and four hosts, joined by two
/// routers striped over the spines (one port per router and subnet),
/// routed with `algorithm` (tempdir, fabric dir, manifest, out).
fn routed(algorithm: &str) -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let fab = dir.path().join("fab");
    ibfabric(&[
        "gen",
        "multi",
        "--subnets",
        "3",
        "--leaves",
        "2",
        "--spines",
        "2",
        "--hosts",
        "2",
        "--routers",
        "2",
        "--wiring",
        "stripe",
        "--out",
        fab.to_str().unwrap(),
    ])
    .unwrap();
    let man = fab.join("manifest.toml");
    let out = dir.path().join("out");
    ibfabric(&[
        "route-multi",
        "-m",
        man.to_str().unwrap(),
        "-a",
        algorithm,
        "-e",
        "updn",
        "-o",
        out.to_str().unwrap(),
        "--opensm-dump",
    ])
    .unwrap_or_else(|e| panic!("route-multi {algorithm}: {e}"));
    (dir, fab, man, out)
}

/// The port GUID of the fabric's first CA: the source of the queries.
fn first_ca(f: &fabric::Fabric) -> u64 {
    f.endports()
        .iter()
        .find(|&&s| f.kind(f.node_of(s)) == NodeKind::Ca)
        .map(|&s| f.port_guid(s))
        .expect("a CA")
}

/// Port GUID -> LID as OpenSM assigned them (they need not be the file's).
fn live_lids(sim: &Sim, dir: &std::path::Path) -> HashMap<u64, u16> {
    let live = dir.join("live.net");
    std::fs::write(&live, sim.diag("ibnetdiscover", &[]).unwrap()).unwrap();
    let f = ibnetdiscover::read(&live).unwrap();
    f.port_guid_index()
        .into_iter()
        .map(|(g, s)| (g, f.lid_of_slot(s)))
        .collect()
}

/// `saquery -p --sgid-to-dgid PAIR`: the answer's DLID and DGID.
///
/// OpenSM may answer with no record while a sweep that follows SUBNET UP
/// (traps from ibsim's ports coming up) rebuilds its tables; an empty answer
/// is asked again for a few seconds before it counts as a failure.
fn path_record(sim: &Sim, pair: &str) -> (u16, std::net::Ipv6Addr) {
    let mut text = String::new();
    for _ in 0..50 {
        text = sim
            .diag("saquery", &["-p", "--sgid-to-dgid", pair])
            .unwrap();
        if text.contains("dlid") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let field = |name: &str| {
        text.lines()
            .find_map(|l| Some(l.trim().strip_prefix(name)?.trim_start_matches('.').trim()))
            .unwrap_or_else(|| {
                let log = sim.opensm_log();
                let tail: Vec<&str> = log.lines().rev().take(200).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                panic!(
                    "no {name} for {pair}:\n{text}\nOpenSM's log ends:\n{}",
                    tail.join("\n")
                )
            })
    };
    (
        field("dlid").parse().expect("a LID"),
        field("dgid").parse().expect("a GID"),
    )
}

fn gid(prefix: u64, guid: u64) -> String {
    let v = ((prefix as u128) << 64) | guid as u128;
    std::net::Ipv6Addr::from(v).to_string()
}

#[test]
fn stock_opensm_answers_remote_gids_with_the_router_port_prefix_routes_chose() {
    let (dir, fab, man, out) = routed("prefix");
    let m = manifest::read(&man).unwrap();
    for i in 0..m.fabric.subnets.len() {
        ask_every_remote_host(&fab, &out, &m, i, dir.path());
    }
    let local = &m.fabric.subnets[0];

    // ISSR deals destinations of one prefix over both routers.
    let (_issr_dir, _, _, issr) = routed("issr");
    assert!(issr.join(&local.name).join("ibfabric-mapping.txt").exists());
    assert!(
        !issr.join(&local.name).join("prefix-routes.conf").exists(),
        "ISSR's per-GID choice is not written as prefix routes"
    );
}

/// ISSR and ISFR choose the router port per destination GID, which
/// OpenSM's prefix routes cannot say. With the ibfabric plugin, OpenSM
/// answers an off-subnet PathRecord Get (SGID and DGID given) from the
/// mapping file the agent keeps beside the tables: the DLID is the LID of
/// the router port the mapping names for that very GID, and the answer's
/// DGID stays the remote one.
#[test]
fn the_plugin_answers_each_remote_gid_with_the_router_port_issr_chose() {
    let plugin = integration_tests::opensm_plugin_build().expect("the plugin is built");
    let (dir, fab, man, out) = routed("issr");
    let m = manifest::read(&man).unwrap();
    let local = &m.fabric.subnets[0];
    let tables = out.join(&local.name);
    // The mapping's route per destination: its first line.
    let mut route: HashMap<(u64, u64), u64> = HashMap::new();
    for l in std::fs::read_to_string(tables.join("ibfabric-mapping.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('*'))
    {
        let mut w = l.split_whitespace();
        let (Some(g), Some(rp)) = (w.next(), w.next()) else {
            continue;
        };
        let v = u128::from(g.parse::<std::net::Ipv6Addr>().expect("eight-group GID"));
        let rp = u64::from_str_radix(rp.trim_start_matches("0x"), 16).unwrap();
        route.entry(((v >> 64) as u64, v as u64)).or_insert(rp);
    }
    let distinct: std::collections::HashSet<u64> = route.values().copied().collect();
    assert!(
        distinct.len() >= 2,
        "ISSR spreads one prefix over router ports, else this test tells nothing: {distinct:?}"
    );

    let net = fab.join(format!("{}.net", local.name));
    let f = ibnetdiscover::read(&net).unwrap();
    let src = first_ca(&f);
    let simdir = dir.path().join("sim");
    std::fs::create_dir_all(&simdir).unwrap();
    let mut sim = Sim::start(&net, &simdir).unwrap();
    let log = sim
        .run_opensm_with(
            &format!(
                "subnet_prefix {:#018x}\n{}",
                local.prefix,
                plugin_conf(&tables)
            ),
            &[("LD_LIBRARY_PATH", &plugin)],
        )
        .expect("OpenSM with the plugin");
    assert!(log.contains("off-subnet PathRecords from"), "{log}");
    let lid_of = live_lids(&sim, &simdir);
    let mut asked = 0;
    for ((prefix, guid), rp) in &route {
        let pair = format!(
            "{}-{}",
            gid(0xfe80_0000_0000_0000, src),
            gid(*prefix, *guid)
        );
        let (dlid, dgid) = path_record(&sim, &pair);
        assert_eq!(
            dlid, lid_of[rp],
            "{pair}: OpenSM answered LID {dlid}, the mapping names {rp:#x}"
        );
        assert_eq!(
            dgid,
            gid(*prefix, *guid).parse::<std::net::Ipv6Addr>().unwrap(),
            "the answer keeps the remote DGID"
        );
        asked += 1;
    }
    assert_eq!(asked, 8);
}
