//! Interop with the real tools: our LFT dump is loaded by OpenSM
//! (`routing_engine file`, `lfts_file`) into switches simulated by ibsim, read
//! back with `dump_lfts`, and must equal ours entry for entry. The files we
//! write load in ibsim, and what `ibnetdiscover` prints of the running fabric
//! parses back to the same model.

use integration_tests::sim::Sim;
use integration_tests::{ibfabric, parse_lft_listing};

fn info(path: &std::path::Path) -> serde_json::Value {
    let text = ibfabric(&["info", path.to_str().unwrap(), "--json", "--guids"]).expect("info runs");
    serde_json::from_str(&text).expect("info prints JSON")
}

#[test]
fn opensm_loads_our_lfts_into_ibsim_switches() {
    let dir = tempfile::tempdir().unwrap();
    let net = dir.path().join("fabric.net");
    let out = dir.path().join("out");
    // A 2-ary 3-tree: 12 switches, 8 HCAs, 20 LIDs (clear of the dump_lfts
    // display bug at LID multiples of 64 described in shared/opensm).
    ibfabric(&[
        "gen",
        "kary",
        "--k",
        "2",
        "--n",
        "3",
        "-o",
        net.to_str().unwrap(),
    ])
    .unwrap();
    ibfabric(&[
        "route",
        "-t",
        net.to_str().unwrap(),
        "-e",
        "minhop",
        "-o",
        out.to_str().unwrap(),
        "--opensm-dump",
    ])
    .unwrap();
    let dump = out.join("opensm-lfts.dump");
    let ours = parse_lft_listing(&std::fs::read_to_string(&dump).unwrap()).unwrap();

    let simdir = dir.path().join("sim");
    std::fs::create_dir_all(&simdir).unwrap();
    let mut sim = Sim::start(&net, &simdir).expect("ibsim loads the file we wrote");
    let log = sim
        .run_opensm(&format!(
            "routing_engine file,no_fallback\nlfts_file {}\n",
            dump.display()
        ))
        .expect("OpenSM brings the subnet up with our LFTs");
    assert!(
        log.contains("file tables configured on all switches"),
        "OpenSM used the file engine"
    );
    sim.stop_opensm();

    let theirs = parse_lft_listing(&sim.diag("dump_lfts", &[]).unwrap()).unwrap();
    let f = info(&net);
    let (switches, hcas) = (f["switches"].as_u64().unwrap(), f["hcas"].as_u64().unwrap());
    // Every switch routes to every HCA and every switch: all 12 x 20 entries
    // less each switch's route to itself, which OpenSM's dump lists as port 0.
    let expected = switches * (switches + hcas);
    assert_eq!(
        ours.len() as u64,
        expected,
        "our dump covers every (switch, destination)"
    );
    let mut compared = 0u64;
    for (key, port) in &ours {
        let got = theirs.get(key).copied();
        assert_eq!(
            got,
            Some(*port),
            "switch 0x{:016x} -> port GUID 0x{:016x}",
            key.0,
            key.1
        );
        compared += 1;
    }
    assert_eq!(compared, expected);

    // ibnetdiscover on the live fabric gives back the same model.
    let disc = dir.path().join("discovered.net");
    std::fs::write(&disc, sim.diag("ibnetdiscover", &[]).unwrap()).unwrap();
    let a = info(&net);
    let b = info(&disc);
    for key in [
        "switches",
        "cas",
        "links",
        "ports",
        "diameter",
        "max_radix",
        "guids",
    ] {
        assert_eq!(
            a[key], b[key],
            "{key} differs between our file and ibnetdiscover's view"
        );
    }
    // And our LFTs verify against the discovered topology (OpenSM's LIDs).
    let v = ibfabric(&[
        "verify",
        "-t",
        disc.to_str().unwrap(),
        "--lfts",
        dump.to_str().unwrap(),
        "--json",
    ])
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&v).unwrap();
    assert_eq!(v["all_pairs_routed"], true);
    assert_eq!(v["deadlock_free"], true);
}

/// `fabric::routing::sssp_opensm` is OpenSM's SSSP step for step: on a
/// Dragonfly (where ties between equal-cost routes abound and OpenSM's
/// heap order, switch order and weights all decide), OpenSM 3.3.23's own
/// `sssp` engine on ibsim writes the same port for every (switch,
/// destination) pair.
#[test]
fn our_copy_of_opensms_sssp_chooses_every_port_as_opensm_does() {
    let dir = tempfile::tempdir().unwrap();
    let net = dir.path().join("df3.net");
    ibfabric(&["gen", "dragonfly", "--p", "3", "-o", net.to_str().unwrap()]).unwrap();
    let f = fabric::formats::ibnetdiscover::read(&net).unwrap();
    let ours = parse_lft_listing(&fabric::formats::lft::write(
        &f,
        &fabric::routing::sssp_opensm::opensm_sssp_lfts(&f),
    ))
    .unwrap();

    let simdir = dir.path().join("sim");
    std::fs::create_dir_all(&simdir).unwrap();
    let mut sim = Sim::start(&net, &simdir).expect("ibsim loads the Dragonfly");
    // log_flags with ROUTING (0x40): OpenSM writes opensm-lfts.dump.
    sim.run_opensm("routing_engine sssp,no_fallback\nlog_flags 0x43\n")
        .expect("OpenSM routes with sssp");
    sim.stop_opensm();
    let theirs = parse_lft_listing(
        &std::fs::read_to_string(simdir.join("opensm-lfts.dump")).expect("OpenSM's LFT dump"),
    )
    .unwrap();
    // 114 switches x (342 HCAs + 114 switches).
    assert_eq!(theirs.len(), 114 * (342 + 114), "OpenSM's dump is whole");
    let differ: Vec<_> = theirs
        .iter()
        .filter(|(k, p)| ours.get(k) != Some(p))
        .take(5)
        .collect();
    assert!(
        differ.is_empty(),
        "entries where OpenSM chose another port (switch, destination port GUID): {differ:?}"
    );
    assert_eq!(ours.len(), theirs.len());
}

/// Our `minhop` and `dor` route the destinations in OpenSM's order (end
/// ports switch by switch, switches by end-port count then by GUID as
/// OpenSM's maps order them) with its tie rule, so OpenSM 3.3.23's own
/// engines on ibsim write the same port for every (switch, destination)
/// pair: on a Dragonfly, where the balance decides among many equal
/// ports, and on a mesh for dimension order.
#[test]
fn our_minhop_and_dor_choose_every_port_as_opensm_does() {
    for (gen_args, engine, switches, hcas) in [
        (&["dragonfly", "--p", "3"][..], "minhop", 114, 342),
        (&["mesh", "--dims", "5x4"][..], "dor", 20, 20),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let net = dir.path().join("f.net");
        let mut args = vec!["gen"];
        args.extend_from_slice(gen_args);
        args.extend_from_slice(&["-o", net.to_str().unwrap()]);
        ibfabric(&args).unwrap();
        let f = fabric::formats::ibnetdiscover::read(&net).unwrap();
        let kind: fabric::routing::EngineKind = engine.parse().unwrap();
        let r = kind
            .engine()
            .route(&f, &fabric::routing::EngineOptions::default())
            .unwrap();
        let ours = parse_lft_listing(&fabric::formats::lft::write(&f, &r.lfts)).unwrap();

        let simdir = dir.path().join("sim");
        std::fs::create_dir_all(&simdir).unwrap();
        let mut sim = Sim::start(&net, &simdir).expect("ibsim loads the fabric");
        sim.run_opensm(&format!(
            "routing_engine {engine},no_fallback\nlog_flags 0x43\n"
        ))
        .unwrap_or_else(|e| panic!("OpenSM routes with {engine}: {e}"));
        sim.stop_opensm();
        let theirs = parse_lft_listing(
            &std::fs::read_to_string(simdir.join("opensm-lfts.dump")).expect("OpenSM's LFT dump"),
        )
        .unwrap();
        assert_eq!(
            theirs.len(),
            switches * (hcas + switches),
            "{engine}: OpenSM's dump is whole"
        );
        let differ: Vec<_> = theirs
            .iter()
            .filter(|(k, p)| ours.get(k) != Some(p))
            .collect();
        assert!(
            differ.is_empty(),
            "{engine}: {} entries where OpenSM chose another port, first (switch, destination port GUID): {:?}",
            differ.len(),
            differ.iter().take(5).collect::<Vec<_>>()
        );
        assert_eq!(ours.len(), theirs.len());
    }
}

/// With LMC 1 and 2 (OpenSM's `lmc`), OpenSM 3.3.23's MinHop spreads each
/// destination's LIDs over neighbours its earlier LIDs did not take; ours
/// does the same, so on the fabric as OpenSM numbered it (read back with
/// `ibnetdiscover`, LMC ranges and all) every entry of every switch's LFT,
/// every LID of every port included, is the port OpenSM chose. Our
/// verifier then walks every LID pair of OpenSM's tables and finds them
/// all delivered.
#[test]
fn our_minhop_spreads_lmc_lids_as_opensm_does() {
    for lmc in [1u8, 2] {
        let dir = tempfile::tempdir().unwrap();
        let net = dir.path().join("f.net");
        ibfabric(&["gen", "dragonfly", "--p", "3", "-o", net.to_str().unwrap()]).unwrap();
        let simdir = dir.path().join("sim");
        std::fs::create_dir_all(&simdir).unwrap();
        let mut sim = Sim::start(&net, &simdir).expect("ibsim loads the fabric");
        sim.run_opensm(&format!(
            "routing_engine minhop,no_fallback\nlmc {lmc}\nlog_flags 0x43\n"
        ))
        .unwrap_or_else(|e| panic!("OpenSM routes with LMC {lmc}: {e}"));
        let seen = sim.diag("ibnetdiscover", &[]).expect("ibnetdiscover");
        sim.stop_opensm();
        let f = fabric::formats::ibnetdiscover::parse_with_lmc(&seen, std::path::Path::new("seen"))
            .expect("the discovered fabric reads with its LMC");
        assert_eq!(f.max_lmc(), lmc, "OpenSM gave the CA ports LMC {lmc}");
        assert_eq!(f.end_lids().len(), 342 << lmc);
        let theirs = fabric::formats::lft::read(&f, &simdir.join("opensm-lfts.dump"))
            .expect("OpenSM's LFT dump");
        let ours = fabric::routing::EngineKind::Minhop
            .engine()
            .route(&f, &fabric::routing::EngineOptions::default())
            .unwrap();
        let differ: Vec<(u32, u16)> = (0..f.switches().len() as u32)
            .flat_map(|si| (1..=f.max_lid()).map(move |lid| (si, lid)))
            .filter(|&(si, lid)| theirs.get(si, lid) != ours.lfts.get(si, lid))
            .collect();
        assert!(
            differ.is_empty(),
            "LMC {lmc}: {} entries where OpenSM chose another port, first (switch index, LID): {:?}",
            differ.len(),
            &differ[..differ.len().min(5)]
        );
        let rep = fabric::verify::verify(&f, &fabric::tables::Routing::lfts_only(theirs));
        assert!(rep.all_pairs_routed(), "LMC {lmc}: {rep:?}");
        assert_eq!(rep.end_lids, 342 << lmc);
    }
}
