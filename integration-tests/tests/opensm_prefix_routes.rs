//! A stock OpenSM answers off-subnet PathRecords with the router port our
//! `prefix` routes chose: `route-multi -a prefix` writes each subnet's
//! `prefix-routes.conf`, OpenSM (`prefix_routes_file`) runs on ibsim with
//! the subnet's router nodes, and `saquery` for a remote host's GID returns
//! the LID of that router port. ISSR chooses per GID, which OpenSM's prefix
//! routes cannot say: no file is written for it.

use fabric::formats::{ibnetdiscover, manifest};
use fabric::model::NodeKind;
use integration_tests::ibfabric;
use integration_tests::sim::Sim;
use std::collections::HashMap;

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
    let ports = f.port_guid_index();
    let lid_of = |g: u64| f.lid_of_slot(ports[&g]);
    // Both routers have ports in this subnet (two each): the test tells
    // which one OpenSM picked.
    let router_ports: Vec<u64> = f
        .endports()
        .iter()
        .filter(|&&s| f.kind(f.node_of(s)) == NodeKind::Router)
        .map(|&s| f.port_guid(s))
        .collect();
    assert_eq!(
        router_ports.len(),
        4,
        "two routers, two ports each, in {}",
        local.name
    );
    let src = f
        .endports()
        .iter()
        .find(|&&s| f.kind(f.node_of(s)) == NodeKind::Ca)
        .map(|&s| f.port_guid(s))
        .unwrap();

    let simdir = tmp.join(format!("sim{li}"));
    std::fs::create_dir_all(&simdir).unwrap();
    let mut sim = Sim::start(&net, &simdir).expect("ibsim models router nodes");
    sim.run_opensm(&format!(
        "subnet_prefix {:#018x}\nprefix_routes_file {}\nrouting_engine file,no_fallback\nlfts_file {}\n",
        local.prefix,
        conf.display(),
        out.join(&local.name).join("opensm-lfts.dump").display()
    ))
    .expect("OpenSM up with our LFTs and prefix routes");

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
            let text = sim
                .diag("saquery", &["-p", "--sgid-to-dgid", &pair])
                .unwrap();
            let dlid: u16 = text
                .lines()
                .find_map(|l| {
                    l.trim()
                        .strip_prefix("dlid")?
                        .trim_start_matches('.')
                        .trim()
                        .parse()
                        .ok()
                })
                .unwrap_or_else(|| panic!("no dlid for {pair}:\n{text}"));
            assert_eq!(
                dlid,
                lid_of(want),
                "{pair}: OpenSM answered LID {dlid}, the prefix route names {want:#x} (LID {})",
                lid_of(want)
            );
            asked += 1;
        }
    }
    assert_eq!(asked, 8, "every remote host asked");
}

fn gid(prefix: u64, guid: u64) -> String {
    let v = ((prefix as u128) << 64) | guid as u128;
    std::net::Ipv6Addr::from(v).to_string()
}

#[test]
fn stock_opensm_answers_remote_gids_with_the_router_port_prefix_routes_chose() {
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
        "prefix",
        "-e",
        "updn",
        "-o",
        out.to_str().unwrap(),
    ])
    .expect("route-multi prefix");
    let m = manifest::read(&man).unwrap();
    for i in 0..m.fabric.subnets.len() {
        ask_every_remote_host(&fab, &out, &m, i, dir.path());
    }
    let local = &m.fabric.subnets[0];

    // ISSR deals destinations of one prefix over both routers.
    let issr = dir.path().join("issr");
    ibfabric(&[
        "route-multi",
        "-m",
        man.to_str().unwrap(),
        "-a",
        "issr",
        "-e",
        "updn",
        "-o",
        issr.to_str().unwrap(),
    ])
    .unwrap();
    assert!(issr.join(&local.name).join("ibfabric-mapping.txt").exists());
    assert!(
        !issr.join(&local.name).join("prefix-routes.conf").exists(),
        "ISSR's per-GID choice is not written as prefix routes"
    );
}
