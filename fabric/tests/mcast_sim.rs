//! Multicast in the packet simulator: every receiver gets every copy;
//! OpenSM-like min-hop trees on the unicast SL deadlock under load on a
//! cycle of unicast and tree dependencies the verifier's graphs hold;
//! reserved trees never do under the same load.

use fabric::Fabric;
use fabric::generate::{Topology, generate};
use fabric::mcast::tree::TreeMode;
use fabric::mcast::{Multicast, PortMask, all_members};
use fabric::routing::EngineKind;
use fabric::sim::packet::{Channel, Config, Sim, Stop, SubnetMcast};
use fabric::sim::workload::{Saturate, saturate_with};
use fabric::sim::{Paths, SubnetPaths};
use fabric::tables::Routing;
use fabric::verify::mcast::verify_with_mcast;
use fabric::verify::{LocalCdg, verify_with_cdg};

mod common;

/// The broadcast group and a small one, on SL 0 unless reserved.
fn routed(t: &Topology, kind: EngineKind, mode: TreeMode) -> (Fabric, Routing, Multicast) {
    let f = generate(t).expect("topology");
    let mut all = all_members(&f);
    all.sort_unstable();
    let some: Vec<_> = all.iter().step_by(5).copied().collect();
    let (r, mc) = common::route_with_trees(&f, kind, mode, common::two_groups(all, some));
    (f, r, mc)
}

fn load(seed: u64, mcast_share: f64) -> Saturate {
    common::saturating(seed, false, mcast_share)
}

fn tight() -> Config {
    Config {
        buffer: 2048,
        ..Config::default()
    }
}

/// Why channel `a` waits on `b`: a unicast dependency, or a switch that
/// copies what comes in on `a` onto `b` for some group.
#[derive(Debug, PartialEq)]
enum Wait {
    Unicast,
    Tree,
    Neither,
}

fn why(f: &Fabric, r: &Routing, mc: &Multicast, cdg: &LocalCdg, a: Channel, b: Channel) -> Wait {
    let v = a.0 as usize * cdg.vls + a.1 as usize;
    let w = (b.0 as usize * cdg.vls + b.1 as usize) as u32;
    if v + 1 < cdg.start.len()
        && cdg.adj[cdg.start[v] as usize..cdg.start[v + 1] as usize].contains(&w)
    {
        return Wait::Unicast;
    }
    let inp = f.remote(a.0);
    let y = f.switch_index(f.node_of(b.0));
    let (p, q) = (f.port_of(inp), f.port_of(b.0));
    let copied = |y: u32| {
        mc.groups.iter().any(|g| {
            mc.mfts.ports(g.mlid, y).is_some_and(|m| m.contains(q))
                && r.switch_vl(y, p, q, g.sl) == b.1
        })
    };
    match y {
        Some(y) if f.node_of(inp) == f.node_of(b.0) && copied(y) => Wait::Tree,
        _ => Wait::Neither,
    }
}

#[test]
fn a_broadcast_reaches_every_other_host_once_at_line_rate() {
    let t = Topology::FatTree2 {
        leaves: 4,
        spines: 4,
        hosts: 4,
        links: 1,
    };
    let (f, r, mc) = routed(&t, EngineKind::Updn, TreeMode::Reserved);
    let net = SubnetPaths::new(&f, &r);
    let m = SubnetMcast::new(&f, &r, &mc, net.hosts());
    let cfg = Config::default();
    let mut sim = Sim::new(&net, cfg).expect("sim").with_mcast(&m);
    sim.send_mcast(0, 0, 100 * 2048, 2048, 9).expect("send");
    let mut got = Vec::new();
    loop {
        match sim.run(u64::MAX) {
            Stop::Notice => {
                sim.take_drained();
                got.extend(sim.take_delivered());
            }
            Stop::Idle => break,
            other => panic!("{other:?}"),
        }
    }
    let hosts = net.hosts().len() as u64;
    assert_eq!(sim.delivered_bytes(), 100 * 2048 * (hosts - 1));
    assert_eq!(got.len(), 1, "one notice once every receiver has it");
    // Copies leave a switch together: the farthest receiver, four hops
    // away, has the last byte one message time and four latencies after
    // the start, as a lone unicast message would.
    assert_eq!(got[0], (9, 100 * 2048 + 4 * cfg.latency));
    assert_eq!(sim.packets_in_fabric(), 0);
}

#[test]
fn min_hop_trees_deadlock_under_load_on_a_cycle_the_graphs_hold_and_reserved_ones_never() {
    let torus = Topology::Mesh {
        dims: vec![6, 6],
        torus: true,
        hosts: 1,
    };
    let df = Topology::Dragonfly { p: 3, hosts: None };
    for (t, e) in [(&torus, EngineKind::Lash), (&df, EngineKind::Dfsssp)] {
        let (f, r, mc) = routed(t, e, TreeMode::MinHop);
        let (_, m) = verify_with_mcast(&f, &r, &mc);
        assert!(
            m.cycle.is_some(),
            "{e} on {t:?}: min-hop trees found acyclic"
        );
        let (_, cdg) = verify_with_cdg(&f, &r);
        let net = SubnetPaths::new(&f, &r);
        let sm = SubnetMcast::new(&f, &r, &mc, net.hosts());
        let mut seen = 0;
        for seed in 1..=4 {
            let got = saturate_with(&net, Some(&sm), tight(), &load(seed, 0.3)).expect("runs");
            if let Some(d) = got.deadlock {
                let waits: Vec<Wait> = (0..d.cycle.len())
                    .map(|i| {
                        why(
                            &f,
                            &r,
                            &mc,
                            &cdg,
                            d.cycle[i],
                            d.cycle[(i + 1) % d.cycle.len()],
                        )
                    })
                    .collect();
                assert!(
                    !waits.contains(&Wait::Neither),
                    "{e} on {t:?}: a wait of {:?} is in neither graph: {waits:?}",
                    d.cycle
                );
                assert!(waits.contains(&Wait::Tree), "{e} on {t:?}: {waits:?}");
                seen += 1;
            }
            // The same tables carrying unicast only: the cycle needs the
            // trees.
            let plain = saturate_with(&net, Some(&sm), tight(), &load(seed, 0.0)).expect("runs");
            assert_eq!(
                plain.deadlock, None,
                "{e} on {t:?}: unicast alone deadlocked"
            );
        }
        assert!(
            seen > 0,
            "{e} on {t:?}: min-hop trees never deadlocked in 4 runs"
        );

        let (f, r, mc) = routed(t, e, TreeMode::Reserved);
        let net = SubnetPaths::new(&f, &r);
        let sm = SubnetMcast::new(&f, &r, &mc, net.hosts());
        for seed in 1..=4 {
            let got = saturate_with(&net, Some(&sm), tight(), &load(seed, 0.3)).expect("runs");
            assert_eq!(got.deadlock, None, "{e} on {t:?} with reserved trees");
            assert!(got.throughput > 0.05, "{e} on {t:?}: {}", got.throughput);
        }
    }
}

#[test]
fn multicast_without_groups_or_to_nobody_is_refused() {
    let t = Topology::Dragonfly { p: 2, hosts: None };
    let (f, r, mut mc) = routed(&t, EngineKind::Dfdn, TreeMode::Reserved);
    let net = SubnetPaths::new(&f, &r);
    let mut sim = Sim::new(&net, Config::default()).expect("sim");
    let e = sim
        .send_mcast(0, 0, 2048, 2048, 0)
        .expect_err("no groups given");
    assert!(e.to_string().contains("no multicast groups"), "{e}");
    // A group whose entries are all gone reaches no one.
    mc.mfts.entries.clear();
    let sm = SubnetMcast::new(&f, &r, &mc, net.hosts());
    let mut sim = Sim::new(&net, Config::default())
        .expect("sim")
        .with_mcast(&sm);
    let e = sim
        .send_mcast(0, 0, 2048, 2048, 0)
        .expect_err("no receivers");
    assert!(e.to_string().contains("no receiver"), "{e}");
    let e = sim
        .send_mcast(0, 7, 2048, 2048, 0)
        .expect_err("no such group");
    assert!(e.to_string().contains("no multicast group 7"), "{e}");
    // Entries on every port of every switch: the copies would circle the
    // Dragonfly's groups for ever.
    for (y, &sw) in f.switches().iter().enumerate() {
        let mut m = PortMask::default();
        for q in 1..=f.num_ports(sw) {
            m.insert(q);
        }
        mc.mfts.set(0xC000, y as u32, m);
    }
    let sm = SubnetMcast::new(&f, &r, &mc, net.hosts());
    let mut sim = Sim::new(&net, Config::default())
        .expect("sim")
        .with_mcast(&sm);
    let e = sim.send_mcast(0, 0, 2048, 2048, 0).expect_err("loops");
    assert!(e.to_string().contains("twice (the entries loop)"), "{e}");
    let bad = Saturate {
        mcast_share: 0.5,
        ..load(1, 0.0)
    };
    assert!(saturate_with(&net, None, tight(), &bad).is_err());
}
