//! LMC through the plugin: OpenSM on ibsim with `lmc 1` and `lmc 2`
//! applies the set `ibfabric route` wrote for the fabric with that LMC.
//! Each LID of a port is a row of its own in the set; the plugin places it
//! at the same offset from the base LID OpenSM gave the port. What the
//! switches hold, read back with `dump_lfts` and `ibnetdiscover`, equals
//! the set entry for entry (every LID of every port, matched by GUID and
//! offset) and verifies on its own, and the SA answers PathRecords between
//! any two LIDs with the set's SL for that pair of LIDs. `ibfabric audit`
//! reads all of it back LID by LID (PathRecords asked per pair of LIDs) and
//! finds it equal to the set.

use fabric::Fabric;
use fabric::formats::{ibnetdiscover, lft, tableset};
use integration_tests::sim::{Sim, plugin_conf};
use integration_tests::{ibfabric, ibfabric_bin, opensm_plugin_build};
use std::collections::HashMap;
use std::path::Path;

/// Port GUID (a switch: its node GUID) to its slot's base LID and LMC.
fn lids_by_guid(f: &Fabric) -> HashMap<u64, (u16, u8)> {
    let mut m = HashMap::new();
    for &sw in f.switches() {
        m.insert(f.guid(sw), (f.switch_lid(sw), 0));
    }
    for &e in f.endports() {
        m.insert(f.port_guid(e), (f.lid_of_slot(e), f.lmc(e)));
    }
    m
}

/// The SL the SA answers for a PathRecord from `slid` to `dlid`.
fn sa_sl(sim: &Sim, slid: u16, dlid: u16) -> u8 {
    let text = sim
        .diag("saquery", &["--src-to-dst", &format!("{slid}:{dlid}")])
        .expect("saquery");
    // Lines read `key.....value`: the key is what comes before the dots.
    let sl = text
        .lines()
        .find_map(|l| {
            let (key, value) = l.trim().split_once('.')?;
            (key == "sl").then(|| value.trim_start_matches('.').trim())
        })
        .unwrap_or_else(|| panic!("no sl in the PathRecord:\n{text}"));
    match sl.strip_prefix("0x") {
        Some(h) => u8::from_str_radix(h, 16).ok(),
        None => sl.parse().ok(),
    }
    .unwrap_or_else(|| panic!("sl '{sl}' in:\n{text}"))
}

#[test]
fn lmc_sets_reach_the_switches_lid_by_lid() {
    let plugin = opensm_plugin_build().expect("the plugin is built");
    for lmc in [1u8, 2] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let net = root.join("fabric.net");
        let lmc_s = lmc.to_string();
        ibfabric(&[
            "gen",
            "dragonfly",
            "--p",
            "2",
            "--lmc",
            &lmc_s,
            "-o",
            net.to_str().unwrap(),
        ])
        .expect("gen");
        let tables = root.join("tables");
        let routed: serde_json::Value = serde_json::from_str(
            &ibfabric(&[
                "route",
                "-t",
                net.to_str().unwrap(),
                "-e",
                "dfdn",
                "--require-deadlock-free",
                "--json",
                "-o",
                tables.to_str().unwrap(),
            ])
            .expect("route"),
        )
        .unwrap();
        assert!(routed["vls"].as_u64().unwrap() >= 2, "{routed}");
        let simdir = root.join("sim");
        std::fs::create_dir_all(&simdir).unwrap();
        let mut sim = Sim::start(&net, &simdir).expect("ibsim loads the topology");
        let log = sim
            .run_opensm_with(
                &format!("{}qos TRUE\nlmc {lmc}\n", plugin_conf(&tables)),
                &[("LD_LIBRARY_PATH", &plugin)],
            )
            .expect("OpenSM with the plugin brings the subnet up");
        assert!(
            log.contains("ibfabric tables configured on all switches"),
            "LMC {lmc}: the plugin applied the set:\n{log}"
        );
        let seen = sim.diag("ibnetdiscover", &[]).expect("ibnetdiscover");
        let dump = sim.diag("dump_lfts", &[]).expect("dump_lfts");

        let lf = ibnetdiscover::parse_with_lmc(&seen, Path::new("live")).expect("live topology");
        assert_eq!(lf.max_lmc(), lmc);
        let live = lft::parse(&lf, dump.as_bytes(), Path::new("dump_lfts")).expect("dump_lfts");
        let wf = ibnetdiscover::read_with_lmc(&net).expect("our topology");
        let ours = tableset::read_set(&wf, &tables).expect("our set");

        // Every (switch, port, offset): the live entry at OpenSM's LID is
        // the set's at ours.
        let (wl, ll) = (lids_by_guid(&wf), lids_by_guid(&lf));
        let mut compared = 0;
        let mut differ = Vec::new();
        for (&g, &(wbase, wlmc)) in &wl {
            let (lbase, llmc) = ll[&g];
            assert_eq!(wlmc, llmc, "port {g:#x}: the same LMC");
            for &wsw in wf.switches() {
                let lsw = lf
                    .find_node_by_guid(wf.guid(wsw))
                    .expect("the switch is live");
                let (wi, li) = (wf.switch_index(wsw).unwrap(), lf.switch_index(lsw).unwrap());
                for k in 0..1u16 << wlmc {
                    compared += 1;
                    let (a, b) = (ours.lfts.get(wi, wbase + k), live.get(li, lbase + k));
                    if a != b {
                        differ.push((wf.desc(wsw).to_string(), g, k, a, b));
                    }
                }
            }
        }
        let nsw = wf.switches().len();
        assert_eq!(compared, nsw * (nsw + (wf.endports().len() << lmc)));
        assert!(
            differ.is_empty(),
            "LMC {lmc}: {} entries differ, first (switch, port, offset, set, live): {:?}",
            differ.len(),
            &differ[..differ.len().min(5)]
        );
        let rep = fabric::verify::verify(&lf, &fabric::tables::Routing::lfts_only(live));
        assert!(rep.all_pairs_routed(), "LMC {lmc}: {rep:?}");
        assert_eq!(rep.end_lids, wf.endports().len() << lmc);

        // PathRecords between LIDs at every offset: the set's SL for that
        // pair of LIDs.
        let psl = ours.path_sl.as_ref().expect("dfdn writes path SLs");
        let ends = wf.endports();
        let n = ends.len();
        for i in 0..12 {
            let (s, d) = (ends[(i * 7) % n], ends[(i * 11 + 3) % n]);
            if s == d {
                continue;
            }
            let (ks, kd) = ((i as u16) % (1 << lmc), (i as u16 / 2) % (1 << lmc));
            let want = psl.get(wf.lid_of_slot(s) + ks, wf.lid_of_slot(d) + kd);
            let (ls, ld) = (ll[&wf.port_guid(s)].0 + ks, ll[&wf.port_guid(d)].0 + kd);
            assert_eq!(
                sa_sl(&sim, ls, ld),
                want,
                "LMC {lmc}: SL from LID {ls} to LID {ld} (offsets {ks}, {kd})"
            );
        }
        // Pairs whose SL differs from the base LIDs' one: the offset
        // decides which SL the SA answers.
        let mut apart = 0;
        'pairs: for &s in ends {
            for &d in ends {
                for kd in 1..1u16 << lmc {
                    let (bs, bd) = (wf.lid_of_slot(s), wf.lid_of_slot(d));
                    let want = psl.get(bs, bd + kd);
                    if s == d || want == psl.get(bs, bd) {
                        continue;
                    }
                    let (ls, ld) = (ll[&wf.port_guid(s)].0, ll[&wf.port_guid(d)].0 + kd);
                    assert_eq!(sa_sl(&sim, ls, ld), want, "LMC {lmc}: LID {ls} to {ld}");
                    apart += 1;
                    if apart == 6 {
                        break 'pairs;
                    }
                }
            }
        }
        assert!(apart > 0, "LMC {lmc}: some LIDs of a port take other SLs");
        audit_lid_by_lid(&sim, &plugin, &net, &tables, root, lmc, &wf);
        sim.stop_opensm();
    }
}

/// `ibfabric audit --expect`: every LFT entry of every LID, the SL-to-VL
/// tables, and PathRecords between every LID of each CA port and every LID
/// of its next two CAs, asked by LID; all equal to the set, and the live
/// tables verify. One path SL per pair of LIDs is compared.
fn audit_lid_by_lid(
    sim: &Sim,
    plugin: &Path,
    net: &Path,
    tables: &Path,
    root: &Path,
    lmc: u8,
    wf: &Fabric,
) {
    let rb = root.join("read-back");
    let out = sim
        .command(ibfabric_bin().expect("ibfabric is built"))
        .args(["audit", "--json", "--path-sample", "2", "-o"])
        .arg(&rb)
        .arg("--expect")
        .arg(tables)
        .arg("-t")
        .arg(net)
        .arg("--pathrecord-tool")
        .arg(plugin.join("ibfabric-pathrecord-sl"))
        .arg("--sl2vl-tool")
        .arg(plugin.join("ibfabric-sl2vl-read"))
        .output()
        .expect("audit runs");
    let (v, code) = integration_tests::json_and_code(&out, "audit");
    assert_eq!(code, 0, "LMC {lmc}: audit exits 0: {v}");
    let e = &v["expected"];
    assert_eq!(e["differences"], 0, "LMC {lmc}: {e}");
    let nsw = wf.switches().len() as u64;
    let nends = wf.endports().len() as u64;
    assert_eq!(
        e["lft_entries"].as_u64(),
        Some(nsw * (nsw + (nends << lmc))),
        "{e}"
    );
    let lids_per_port = 1u64 << lmc;
    assert_eq!(
        e["path_sls"].as_u64(),
        Some(nends * 2 * lids_per_port * lids_per_port),
        "LMC {lmc}: every LID pair asked is compared: {e}"
    );
    let lids = nends << lmc;
    assert_eq!(
        v["pairs"].as_u64(),
        Some(lids * (lids - lids_per_port)),
        "every LID pair walked: {v}"
    );
    assert_eq!(v["broken_pairs"], 0, "{v}");
    let records = std::fs::read_to_string(rb.join("pathrecords.txt")).expect("pathrecords.txt");
    let answered = records.lines().filter(|l| !l.starts_with('#')).count() as u64;
    assert_eq!(answered, nends * 2 * lids_per_port * lids_per_port);
}
