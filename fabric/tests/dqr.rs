//! Dynamic quick reconfiguration on generated fabrics: after a link or
//! switch fault only the broken flows move, the new tables are connected
//! and deadlock free with no more VLs, and every mix of old and new tables
//! the update passes through is deadlock free.

use fabric::dqr::{self, ChannelList, Detours, Fault, Options, Turns, apply_faults};
use fabric::generate::{Topology, generate};
use fabric::model::{Fabric, NONE, Slot};
use fabric::routing::{EngineKind, EngineOptions};
use fabric::tables::{NO_PATH, Routing};
use fabric::verify::{check_transition, verify};

mod common;

fn routed(t: Topology, engine: EngineKind) -> (Fabric, Routing) {
    let f = generate(&t).expect("topology");
    let r = engine
        .engine()
        .route(&f, &EngineOptions::default())
        .expect("routes");
    assert!(verify(&f, &r).ok(), "{engine} routes {t:?}");
    (f, r)
}

/// The switch ports a flow toward LID `dlid` of port `dst` leaves by, in
/// order (None: not delivered).
fn path(f: &Fabric, r: &Routing, src: Slot, (dst, dlid): (Slot, u16)) -> Option<Vec<Slot>> {
    let mut c = src;
    let mut out = Vec::new();
    for _ in 0..64 {
        let rem = f.remote(c);
        if rem == dst {
            return Some(out);
        }
        if rem == NONE {
            return None;
        }
        let node = f.node_of(rem);
        let si = f.switch_index(node)?;
        let p = r.lfts.get(si, dlid);
        if p == NO_PATH || p == 0 || p > f.num_ports(node) {
            return None;
        }
        c = f.slot(node, p);
        out.push(c);
    }
    None
}

static DRAINED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

struct Checked {
    changed: u64,
    broken: u64,
}

/// Reroutes after `faults` and checks every guarantee; None when DQR
/// found no path for some flow.
fn reroute_and_check(
    f0: &Fabric,
    r0: &Routing,
    faults: &[Fault],
    opts: &Options,
) -> Option<Checked> {
    let (mut list, before) = ChannelList::build(f0, r0).expect("channel list");
    let f1 = apply_faults(f0, faults);
    let out = match dqr::reroute_from(f0, &f1, r0, &mut list, opts) {
        Ok(o) => o,
        Err(dqr::DqrError::NoPath { .. }) => return None,
        Err(e) => panic!("{e}"),
    };
    let rep = verify(&f1, &out.routing);
    assert!(rep.ok(), "rerouted tables: {rep:?}");
    assert!(
        rep.vls_used <= before.vls_used,
        "{} VLs, {} before",
        rep.vls_used,
        before.vls_used
    );
    assert!(rep.max_vl <= before.max_vl);
    // Every step of the update, checked on its own by the full check.
    let steps: Vec<(&Routing, &Routing)> = match &out.drain {
        Some(d) => vec![(r0, d), (d, &out.routing)],
        None => vec![(r0, &out.routing)],
    };
    for (a, b) in steps {
        let t = check_transition(&f1, a, b);
        assert!(
            t.deadlock_free(),
            "transition: {}",
            t.describe_cycle(&f1).unwrap_or_default()
        );
    }
    if out.drain.is_some() {
        DRAINED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    // Only flows whose old route is gone changed: a flow from each LID of
    // a port toward each LID of another (LMC).
    let (mut changed, mut broken, mut pairs) = (0, 0, 0u64);
    for &(s, slid) in f1.end_lids() {
        for &(d, dlid) in f1.end_lids() {
            if s == d {
                continue;
            }
            pairs += 1;
            let old = path(&f1, r0, s, (d, dlid));
            let new = path(&f1, &out.routing, s, (d, dlid));
            assert!(new.is_some(), "flow {s} -> {d} (LID {dlid}) not delivered");
            if old.is_none() {
                broken += 1;
            }
            if old != new {
                changed += 1;
                assert!(
                    old.is_none(),
                    "flow {s} -> {d} (LID {dlid}) changed though its route survived"
                );
            }
            let sl = |r: &Routing| r.path_sl.as_ref().map_or(0, |p| p.get(slid, dlid));
            if sl(r0) != sl(&out.routing) {
                assert!(
                    old.is_none(),
                    "SL of {s} -> {d} changed though its route survived"
                );
            }
        }
    }
    // Management traffic: every switch that reached another switch's LID
    // before the fault still does (the subnet manager's queries travel
    // there).
    let live: Vec<u32> = (0..f1.switches().len() as u32)
        .filter(|&si| {
            let sw = f1.switches()[si as usize];
            f1.port_slots(sw).any(|p| f1.remote(p) != NONE)
        })
        .collect();
    let reached = |f: &Fabric, r: &Routing, a: u32, b: u32| {
        let dlid = f.switch_lid(f.switches()[b as usize]);
        let mut cur = a;
        for _ in 0..=f.switches().len() {
            if cur == b {
                return true;
            }
            let sw = f.switches()[cur as usize];
            let p = r.lfts.get(cur, dlid);
            if p == 0 || p > f.num_ports(sw) {
                return false;
            }
            let rem = f.remote(f.slot(sw, p));
            match (rem != NONE)
                .then(|| f.switch_index(f.node_of(rem)))
                .flatten()
            {
                Some(n) => cur = n,
                None => return false,
            }
        }
        false
    };
    for &a in &live {
        for &b in &live {
            if !reached(f0, r0, a, b) {
                continue;
            }
            let dlid = f1.switch_lid(f1.switches()[b as usize]);
            let mut cur = a;
            let mut hops = 0;
            while cur != b {
                let sw = f1.switches()[cur as usize];
                let p = out.routing.lfts.get(cur, dlid);
                assert!(
                    p >= 1 && p <= f1.num_ports(sw),
                    "switch {a} has no way to switch {b}"
                );
                let rem = f1.remote(f1.slot(sw, p));
                assert!(rem != NONE, "switch {a} to switch {b}: dead port");
                cur = f1.switch_index(f1.node_of(rem)).expect("a switch");
                hops += 1;
                assert!(hops <= live.len(), "switch {a} to switch {b}: loop");
            }
        }
    }
    assert_eq!(broken, out.stats.flows_broken, "{:?}", out.stats);
    assert_eq!(pairs, out.stats.flows, "{:?}", out.stats);
    assert_eq!(out.stats.flows_rerouted, broken);
    Some(Checked { changed, broken })
}

/// With LMC, a fault reroutes the broken LIDs only: each LID of a port
/// routes apart, and a LID whose route survived keeps it (checked flow by
/// flow above), with DF-DN's VLs and Up*/Down*'s one VL kept.
#[test]
fn with_lmc_only_the_broken_lids_move() {
    for (t, engine) in [
        (Topology::Dragonfly { p: 2, hosts: None }, EngineKind::Dfdn),
        (
            Topology::Mesh {
                dims: vec![4, 4],
                torus: true,
                hosts: 1,
            },
            EngineKind::Updn,
        ),
    ] {
        let f = fabric::generate::with_lmc(&generate(&t).expect("topology"), 1).expect("LMC");
        let r = engine
            .engine()
            .route(&f, &EngineOptions::default())
            .expect("routes");
        assert!(verify(&f, &r).ok(), "{engine}");
        let mut tolerated = 0;
        let mut moved = 0;
        for &l in f.switch_links().iter().step_by(5) {
            if let Some(c) = reroute_and_check(&f, &r, &[Fault::Link(l)], &Options::default()) {
                tolerated += 1;
                moved += c.changed;
                assert!(c.broken > 0 || c.changed == 0);
            }
        }
        assert!(
            tolerated > 0 && moved > 0,
            "{engine}: {tolerated} faults rerouted"
        );
    }
}

#[test]
fn a_ring_reroutes_the_other_way_round() {
    let (f, r) = routed(
        Topology::Mesh {
            dims: vec![6],
            torus: true,
            hosts: 1,
        },
        EngineKind::Updn,
    );
    let links = f.switch_links();
    let mut ok = 0;
    for &l in &links {
        if let Some(c) = reroute_and_check(&f, &r, &[Fault::Link(l)], &Options::default()) {
            assert!(c.broken > 0);
            ok += 1;
        }
    }
    // Up*/Down* on a ring: every single link fault is reroutable.
    assert_eq!(ok, links.len());
}

#[test]
fn dragonfly_dfdn_keeps_its_vls_after_any_link_fault() {
    let (f, r) = routed(Topology::Dragonfly { p: 2, hosts: None }, EngineKind::Dfdn);
    let mut ok = 0;
    let links = f.switch_links();
    for &l in &links {
        if reroute_and_check(&f, &r, &[Fault::Link(l)], &Options::default()).is_some() {
            ok += 1;
        }
    }
    eprintln!(
        "dfdn dragonfly p=2: {ok}/{} single link faults rerouted",
        links.len()
    );
    assert_eq!(ok, links.len());
}

#[test]
fn a_full_recompute_after_a_fault_has_an_unsafe_transition() {
    // The reason for DQR: the update to a from-scratch routing mixes old
    // and new dependencies into a cycle.
    let (f, r) = routed(Topology::Dragonfly { p: 2, hosts: None }, EngineKind::Dfdn);
    let unsafe_seen = common::unsafe_recomputes(&f, &r, EngineKind::Dfdn, 12).len();
    assert!(unsafe_seen > 0, "every full recompute happened to be safe");
}

#[test]
fn mesh_updn_variants() {
    let (f, r) = routed(
        Topology::Mesh {
            dims: vec![5, 5],
            torus: false,
            hosts: 1,
        },
        EngineKind::Updn,
    );
    for turns in [Turns::None, Turns::Single, Turns::All] {
        let opts = Options {
            turns,
            ..Options::default()
        };
        let links = f.switch_links();
        let ok = links
            .iter()
            .filter(|&&l| reroute_and_check(&f, &r, &[Fault::Link(l)], &opts).is_some())
            .count();
        eprintln!("mesh 5x5 updn {turns:?}: {ok}/{}", links.len());
        assert!(ok > 0);
    }
}

/// The mesh plug-in on XY routing (`dor`): every single link fault of a
/// mesh is rerouted, with the guarantees checked.
#[test]
fn the_mesh_plugin_tolerates_every_single_link_fault() {
    for dims in [vec![5u32, 5], vec![6, 4], vec![3, 3, 3]] {
        let (f0, r0) = routed(
            Topology::Mesh {
                dims: dims.clone(),
                torus: false,
                hosts: 1,
            },
            EngineKind::Dor,
        );
        for l in f0.switch_links() {
            let mesh = Options {
                detours: Detours::Mesh,
                ..Options::default()
            };
            let c = reroute_and_check(&f0, &r0, &[Fault::Link(l)], &mesh);
            let c = c.unwrap_or_else(|| panic!("mesh {dims:?}: link at slot {l} not rerouted"));
            assert!(
                c.broken > 0 && c.changed > 0,
                "{dims:?}: every mesh link carries flows"
            );
        }
    }
}

/// The torus plug-in: E-cube's layers are meshes routed in dimension
/// order, and the mesh plug-in's detours serve each layer; every single
/// link fault of a torus (the wrap-around links too) is rerouted, with the
/// guarantees checked, within E-cube's VLs.
#[test]
fn the_torus_plugin_tolerates_every_single_link_fault() {
    for dims in [vec![5u32, 5], vec![6, 4], vec![3, 3, 3]] {
        let (f0, r0) = routed(
            Topology::Mesh {
                dims: dims.clone(),
                torus: true,
                hosts: 1,
            },
            EngineKind::Ecube,
        );
        let opts = Options {
            detours: Detours::default_for(EngineKind::Ecube),
            ..Options::default()
        };
        for l in f0.switch_links() {
            let c = reroute_and_check(&f0, &r0, &[Fault::Link(l)], &opts);
            let c = c.unwrap_or_else(|| panic!("torus {dims:?}: link at slot {l} not rerouted"));
            assert!(
                c.broken > 0 && c.changed > 0,
                "{dims:?}: every torus link carries flows"
            );
        }
    }
}

/// Once an update is in force the list is pruned to the new tables'
/// dependencies, in the order it had: the old tables' and the mixes'
/// dependencies leave, exactly the new tables' stay, and the next fault is
/// rerouted against it with every guarantee.
#[test]
fn a_pruned_list_holds_the_new_tables_and_serves_the_next_fault() {
    let (f0, r0) = routed(
        Topology::Mesh {
            dims: vec![6, 6],
            torus: false,
            hosts: 1,
        },
        EngineKind::Dor,
    );
    let opts = Options {
        detours: Detours::Mesh,
        ..Options::default()
    };
    let links = f0.switch_links();
    let (mut list, _) = ChannelList::build(&f0, &r0).expect("list");
    let f1 = apply_faults(&f0, &[Fault::Link(links[7])]);
    let out = dqr::reroute_from(&f0, &f1, &r0, &mut list, &opts).expect("reroutes");
    let carried = list.num_edges();
    let fresh = ChannelList::build(&f1, &out.routing).expect("list").0;
    list.prune_to(&f1, &out.routing).expect("pruned");
    assert_eq!(list.num_edges(), fresh.num_edges());
    assert!(
        list.num_edges() < carried,
        "{} of {carried}",
        list.num_edges()
    );
    // The next fault, from the pruned list, checked in full.
    let l2 = f1.switch_links()[20];
    let f2 = apply_faults(&f1, &[Fault::Link(l2)]);
    let out2 = dqr::reroute_from(&f1, &f2, &out.routing, &mut list, &opts).expect("reroutes");
    let rep = verify(&f2, &out2.routing);
    assert!(rep.ok() && rep.all_pairs_routed(), "{rep:?}");
    let t = check_transition(&f2, &out.routing, &out2.routing);
    assert!(out2.drain.is_some() || t.deadlock_free());
}

#[test]
fn a_failed_switch_is_routed_around() {
    let (f, r) = routed(
        Topology::FatTree2 {
            leaves: 4,
            spines: 3,
            hosts: 2,
            links: 1,
        },
        EngineKind::Updn,
    );
    let spine = *f.switches().last().expect("switches");
    let c = reroute_and_check(&f, &r, &[Fault::Switch(spine)], &Options::default())
        .expect("a fat tree survives a spine");
    assert!(c.changed > 0);
}

mod random_fault_sequences {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        /// After every fault DQR reroutes, the new tables and each step of
        /// the update pass the checks ([`reroute_and_check`] asserts them).
        #[test]
        fn every_rerouted_fault_has_a_safe_update(
            seed in 0u64..1000,
            engine in prop::sample::select(vec![EngineKind::Updn, EngineKind::Dfsssp, EngineKind::Lash]),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 1..4),
        ) {
            let (mut f, mut r) = routed(
                Topology::RandomRegular { switches: 10, degree: 4, hosts: 1, seed },
                engine,
            );
            for pick in picks {
                let links = f.switch_links();
                let l = links[pick.index(links.len())];
                let faults = [Fault::Link(l)];
                let f1 = apply_faults(&f, &faults);
                if reroute_and_check(&f, &r, &faults, &Options::default()).is_none() {
                    break;
                }
                let (mut list, _) = ChannelList::build(&f, &r).expect("list");
                let Ok(out) = dqr::reroute(&f1, &r, &mut list, &Options::default()) else {
                    break;
                };
                f = f1;
                r = out.routing;
            }
        }

        /// Successive link faults on a mesh routed by dimension order,
        /// rerouted with the mesh plug-in's detours (or the shortest ones):
        /// the first is always rerouted, and every reroute passes the
        /// checks.
        #[test]
        fn mesh_detours_keep_every_update_safe(
            w in 3u32..6,
            h in 3u32..6,
            local in any::<bool>(),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 1..4),
        ) {
            let (mut f, mut r) = routed(
                Topology::Mesh { dims: vec![w, h], torus: false, hosts: 1 },
                EngineKind::Dor,
            );
            let opts = Options {
                detours: if local { Detours::Local } else { Detours::Mesh },
                ..Options::default()
            };
            for (k, pick) in picks.into_iter().enumerate() {
                let links = f.switch_links();
                let l = links[pick.index(links.len())];
                let faults = [Fault::Link(l)];
                let f1 = apply_faults(&f, &faults);
                if f1.switch_links().is_empty() {
                    break;
                }
                let checked = reroute_and_check(&f, &r, &faults, &opts);
                prop_assert!(k > 0 || checked.is_some(), "the first fault is rerouted");
                if checked.is_none() {
                    break;
                }
                let (mut list, _) = ChannelList::build(&f, &r).expect("list");
                let out = dqr::reroute_from(&f, &f1, &r, &mut list, &opts);
                let Ok(out) = out else { break };
                f = f1;
                r = out.routing;
            }
        }
    }
}
