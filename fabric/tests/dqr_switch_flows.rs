//! The DQR paper's fat-tree experiment: the switch-to-switch flows the
//! fat-tree routing leaves out, reconnected by DQR with U-turns at the
//! leaves, deadlock free, and single link faults tolerated afterwards.

use fabric::dqr::switch_flows::{self, SwitchFlows};
use fabric::dqr::{self, ChannelList, Options};
use fabric::generate::{Topology, generate};
use fabric::model::{Fabric, NodeKind, Slot};
use fabric::routing::{EngineKind, EngineOptions};
use fabric::tables::{NO_PATH, Routing};

fn fat_tree(leaves: u32, spines: u32, hosts: u32) -> (Fabric, Routing) {
    let f = generate(&Topology::FatTree2 {
        leaves,
        spines,
        hosts,
        links: 1,
    })
    .expect("topology");
    let r = EngineKind::Ftree
        .engine()
        .route(&f, &EngineOptions::default())
        .expect("ftree routes");
    (f, r)
}

fn reconnected(sf: &SwitchFlows) -> (dqr::Outcome, ChannelList) {
    let (mut list, before) = ChannelList::build(&sf.fabric, &sf.routing).expect("channel list");
    // Every flow toward an endpoint but its own switch's hosts' and its
    // own is cut: (end ports - 1) sources each, less those on its switch.
    assert!(before.broken_pairs > 0, "the endpoints start disconnected");
    let opts = Options {
        reconnect: true,
        ..Options::default()
    };
    let out = dqr::reroute(&sf.fabric, &sf.routing, &mut list, &opts).expect("DQR reconnects");
    (out, list)
}

/// The switches a route from `src` to `dst` crosses, in order.
fn path(f: &Fabric, r: &Routing, src: Slot, dst: Slot) -> Vec<u32> {
    let dlid = f.lid_of_slot(dst);
    let mut at = f.remote(src);
    let mut out = Vec::new();
    while f.kind(f.node_of(at)) == NodeKind::Switch {
        let sw = f.node_of(at);
        out.push(sw);
        assert!(out.len() < 16, "a forwarding loop");
        let si = f.switch_index(sw).expect("switch");
        let p = r.lfts.get(si, dlid);
        assert_ne!(p, NO_PATH, "no entry at {}", f.desc(sw));
        at = f.remote(f.slot(sw, p));
    }
    assert_eq!(at, dst, "delivered to the destination");
    out
}

fn is_leaf(f: &Fabric, sw: u32) -> bool {
    (1..=f.num_ports(sw)).any(|p| {
        let t = f.remote(f.slot(sw, p));
        t != fabric::model::NONE
            && f.kind(f.node_of(t)) == NodeKind::Ca
            && !f.desc(f.node_of(t)).ends_with("management")
    })
}

#[test]
fn dqr_creates_every_switch_to_switch_path_with_u_turns_at_leaves() {
    let (f, r) = fat_tree(6, 4, 3);
    let sf = switch_flows::disconnected(&f, &r).expect("endpoints");
    assert_eq!(sf.endpoints.len(), f.switches().len());
    let (out, _) = reconnected(&sf);
    let g = &sf.fabric;
    // The verifier, on the tables alone: every pair of end ports (hosts
    // and switch endpoints) connected, no dependency cycle, one VL.
    let rep = fabric::verify::verify(g, &out.routing);
    assert_eq!(rep.broken_pairs, 0, "{:?}", rep.broken_examples.first());
    assert!(rep.deadlock_free(), "{:?}", rep.cycle);
    assert_eq!(rep.vls_used, 1);
    assert!(out.stats.flows_rerouted > 0);
    // Host-to-host entries are the fat-tree routing's own.
    for &h in f.endports() {
        let lid = f.lid_of_slot(h);
        for si in 0..f.switches().len() as u32 {
            assert_eq!(out.routing.lfts.get(si, lid), r.lfts.get(si, lid));
        }
    }
    // Spine to spine goes down to a leaf and up again: a U-turn the
    // fat-tree routing never makes, found for every pair.
    let spines: Vec<usize> = (0..f.switches().len())
        .filter(|&i| !is_leaf(&f, f.switches()[i]))
        .collect();
    assert_eq!(spines.len(), 4);
    let mut u_turns = 0;
    for &a in &spines {
        for &b in &spines {
            if a == b {
                continue;
            }
            let p = path(g, &out.routing, sf.endpoints[a], sf.endpoints[b]);
            assert_eq!(p.len(), 3, "spine, leaf, spine: {p:?}");
            assert!(is_leaf(&f, p[1]));
            u_turns += 1;
        }
    }
    assert_eq!(u_turns, 12);
}

#[test]
fn with_switch_flows_one_link_fault_is_tolerated_end_to_end() {
    let (f, r) = fat_tree(6, 4, 3);
    let sf = switch_flows::disconnected(&f, &r).expect("endpoints");
    let (out, list) = reconnected(&sf);
    // Every switch-to-switch link, one at a time: end-to-end rerouting
    // (no local detour) keeps all pairs connected, deadlock free, on the
    // VLs in force (DQR's own checks, and the transition's).
    let g = &sf.fabric;
    for l in g.switch_links() {
        let mut list = list.clone();
        let after = dqr::apply_faults(g, &[dqr::Fault::Link(l)]);
        let o = dqr::reroute_from(g, &after, &out.routing, &mut list, &Options::default())
            .unwrap_or_else(|e| panic!("link {l}: {e}"));
        let rep = fabric::verify::verify(&after, &o.routing);
        assert_eq!(rep.broken_pairs, 0);
        assert!(rep.deadlock_free());
    }
}

#[test]
fn tables_of_another_fabric_are_refused() {
    let (f, r) = fat_tree(2, 1, 1);
    let mut short = r.clone();
    short.lfts = fabric::tables::Lfts::new(1, f.max_lid());
    let e = switch_flows::disconnected(&f, &short).expect_err("tables of another fabric");
    assert!(e.to_string().contains("another fabric"), "{e}");
}

/// Toward each endpoint, every switch's entry on a shortest way there
/// (breadth first from the endpoint's switch, the ports tried from one
/// that moves with the endpoint): the U-turns spread over the leaves with
/// no thought for the dependencies they add.
fn shortest_switch_routes(sf: &SwitchFlows) -> Routing {
    let g = &sf.fabric;
    let mut r = sf.routing.clone();
    for (i, &ep) in sf.endpoints.iter().enumerate() {
        let lid = g.lid_of_slot(ep);
        let home = g.node_of(g.remote(ep));
        let mut seen = vec![false; g.num_nodes()];
        seen[home as usize] = true;
        let mut queue = std::collections::VecDeque::from([home]);
        while let Some(x) = queue.pop_front() {
            let np = g.num_ports(x) as usize;
            for k in 0..np {
                let p = 1 + ((k + i) % np) as u8;
                let t = g.remote(g.slot(x, p));
                if t == fabric::model::NONE {
                    continue;
                }
                let y = g.node_of(t);
                if g.kind(y) == NodeKind::Switch && !seen[y as usize] {
                    seen[y as usize] = true;
                    let si = g.switch_index(y).expect("switch");
                    r.lfts.set(si, lid, g.port_of(t));
                    queue.push_back(y);
                }
            }
        }
    }
    r
}

#[test]
fn u_turns_placed_without_care_close_a_cycle_and_dqr_without_reconnect_leaves_them_cut() {
    let (f, r) = fat_tree(6, 4, 3);
    let sf = switch_flows::disconnected(&f, &r).expect("endpoints");
    let naive = shortest_switch_routes(&sf);
    let rep = fabric::verify::verify(&sf.fabric, &naive);
    assert_eq!(rep.broken_pairs, 0);
    assert!(!rep.deadlock_free(), "shortest U-turns anywhere deadlock");
    let (mut list, _) = ChannelList::build(&sf.fabric, &sf.routing).expect("channel list");
    let e = dqr::reroute(&sf.fabric, &sf.routing, &mut list, &Options::default())
        .expect_err("a reroute without reconnect routes no unrouted flow");
    assert!(e.to_string().contains("verification"), "{e}");
}

/// With LMC the hosts keep their LID ranges and ftree's routes toward
/// every LID; the endpoints take LIDs past them, and DQR reconnects them
/// deadlock free on one VL, every LID pair delivered.
#[test]
fn with_lmc_the_endpoints_are_reconnected_and_every_lid_kept() {
    let (f0, _) = fat_tree(6, 4, 3);
    let f = fabric::generate::with_lmc(&f0, 1).expect("LMC");
    let r = EngineKind::Ftree
        .engine()
        .route(&f, &EngineOptions::default())
        .expect("ftree routes LMC");
    let sf = switch_flows::disconnected(&f, &r).expect("endpoints");
    let g = &sf.fabric;
    for &h in f.endports() {
        let gh = g.slot(f.node_of(h), f.port_of(h));
        assert_eq!(g.lids_of_slot(gh), f.lids_of_slot(h));
    }
    for &e in &sf.endpoints {
        assert!(g.lid_of_slot(e) > f.max_lid());
    }
    let (out, _) = reconnected(&sf);
    let rep = fabric::verify::verify(g, &out.routing);
    assert_eq!(rep.broken_pairs, 0, "{:?}", rep.broken_examples.first());
    assert!(rep.deadlock_free() && rep.vls_used == 1, "{:?}", rep.cycle);
    for &(_, lid) in f.end_lids() {
        for si in 0..f.switches().len() as u32 {
            assert_eq!(
                out.routing.lfts.get(si, lid),
                r.lfts.get(si, lid),
                "LID {lid}"
            );
        }
    }
}
