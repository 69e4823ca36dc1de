//! The packet-level simulator against the verifier: tables whose channel
//! dependency graph has a cycle deadlock under load, on a cycle the
//! verifier found; deadlock-free tables and the mixes of an update the
//! transition check accepts never do.

use fabric::dqr::{self, ChannelList, Fault, Options, apply_faults};
use fabric::generate::{Topology, generate};
use fabric::model::Fabric;
use fabric::routing::{EngineKind, EngineOptions};
use fabric::sim::SubnetPaths;
use fabric::sim::packet::{Channel, Config};
use fabric::sim::workload::{Saturate, saturate};
use fabric::tables::{PathSl, Routing};
use fabric::verify::{LocalCdg, check_transition, verify, verify_with_cdg};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod common;

fn routed(t: &Topology, e: EngineKind) -> (Fabric, Routing) {
    let f = generate(t).expect("topology");
    let r = e
        .engine()
        .route(&f, &EngineOptions::default())
        .expect("routes");
    (f, r)
}

fn torus() -> Topology {
    Topology::Mesh {
        dims: vec![4, 4, 4],
        torus: true,
        hosts: 1,
    }
}

fn dragonfly() -> Topology {
    Topology::Dragonfly { p: 2, hosts: None }
}

fn load(seed: u64, skip_unroutable: bool) -> Saturate {
    common::saturating(seed, skip_unroutable, 0.0)
}

/// One packet per buffer and VL: the tightest buffers IB allows, where a
/// cyclic dependency fills up soonest.
fn tight() -> Config {
    Config {
        buffer: 2048,
        ..Config::default()
    }
}

fn assert_cycle_in_cdg(cycle: &[Channel], cdg: &LocalCdg) {
    assert!(cycle.len() >= 2, "{cycle:?}");
    for (i, &(a, va)) in cycle.iter().enumerate() {
        let (b, vb) = cycle[(i + 1) % cycle.len()];
        let v = a as usize * cdg.vls + va as usize;
        let w = (b as usize * cdg.vls + vb as usize) as u32;
        let edges = &cdg.adj[cdg.start[v] as usize..cdg.start[v + 1] as usize];
        assert!(
            edges.contains(&w),
            "the simulator's wait {a}/VL{va} -> {b}/VL{vb} is not a dependency the verifier found"
        );
    }
}

#[test]
fn minhop_deadlocks_on_a_torus_and_a_dragonfly_on_cycles_the_verifier_reports() {
    for t in [torus(), dragonfly()] {
        let (f, r) = routed(&t, EngineKind::Minhop);
        let (report, cdg) = verify_with_cdg(&f, &r);
        assert!(!report.deadlock_free(), "{t:?}: MinHop found acyclic");
        let net = SubnetPaths::new(&f, &r);
        let mut seen = 0;
        for seed in 1..=3 {
            let got = saturate(&net, tight(), &load(seed, false)).expect("runs");
            if let Some(d) = got.deadlock {
                assert_cycle_in_cdg(&d.cycle, &cdg);
                seen += 1;
            }
        }
        assert!(seen > 0, "{t:?}: MinHop never deadlocked in 3 runs");
    }
}

#[test]
fn deadlock_free_engines_never_deadlock_under_the_same_load() {
    let cases = [
        (torus(), EngineKind::Dfsssp),
        (torus(), EngineKind::Lash),
        (torus(), EngineKind::Nue),
        (torus(), EngineKind::Updn),
        (torus(), EngineKind::Dfdn),
        (dragonfly(), EngineKind::Dfdn),
        (dragonfly(), EngineKind::Dfsssp),
        (dragonfly(), EngineKind::Nue),
    ];
    for (t, e) in cases {
        let (f, r) = routed(&t, e);
        assert!(verify(&f, &r).deadlock_free(), "{e} on {t:?}");
        let net = SubnetPaths::new(&f, &r);
        for seed in 1..=2 {
            let got = saturate(&net, tight(), &load(seed, false)).expect("runs");
            assert_eq!(got.deadlock, None, "{e} on {t:?}");
            assert!(got.throughput > 0.05, "{e} on {t:?}: {}", got.throughput);
        }
    }
}

/// One state an update from `a` to `b` may pass through: each switch holds
/// its entry of either table per destination and either SL-to-VL table;
/// each source uses either path-SL row.
fn mix(f: &Fabric, a: &Routing, b: &Routing, rng: &mut ChaCha8Rng) -> Routing {
    let mut m = b.clone();
    for si in 0..f.switches().len() as u32 {
        for lid in 0..a.lfts.width().min(b.lfts.width()) as u16 {
            if rng.gen_bool(0.5) {
                m.lfts.set(si, lid, a.lfts.get(si, lid));
            }
        }
        if let (Some(ta), Some(tm)) = (&a.sl2vl, &mut m.sl2vl) {
            if rng.gen_bool(0.5) {
                let ports = f.num_ports(f.switches()[si as usize]);
                for i in 0..=ports {
                    for o in 0..=ports {
                        tm.set_switch_row(si, i, o, ta.switch_row(si, i, o));
                    }
                }
            }
        }
    }
    if let (Some(pa), Some(pb)) = (&a.path_sl, &b.path_sl) {
        let mut p = PathSl::new((pb.width() - 1) as u16);
        for lid in 0..pb.width() as u16 {
            let from = if rng.gen_bool(0.5) { pa } else { pb };
            if let Some(row) = from.row_of(lid) {
                let i = p.push_row(row);
                p.assign(lid, i);
            }
        }
        m.path_sl = Some(p);
    }
    m
}

#[test]
fn the_mixes_of_an_update_the_transition_check_accepts_never_deadlock() {
    let (f, r) = routed(&dragonfly(), EngineKind::Dfdn);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut mixes = 0;
    for &l in f.switch_links().iter().step_by(7).take(4) {
        let (mut list, _) = ChannelList::build(&f, &r).expect("channel list");
        let f1 = apply_faults(&f, &[Fault::Link(l)]);
        let out = dqr::reroute(&f1, &r, &mut list, &Options::default()).expect("reroutes");
        let steps: Vec<(&Routing, &Routing)> = match &out.drain {
            Some(d) => vec![(&r, d), (d, &out.routing)],
            None => vec![(&r, &out.routing)],
        };
        for (a, b) in steps {
            assert!(check_transition(&f1, a, b).deadlock_free());
            for k in 0..3 {
                let m = mix(&f1, a, b, &mut rng);
                let net = SubnetPaths::new(&f1, &m);
                let got = saturate(&net, tight(), &load(k, true)).expect("runs");
                assert_eq!(got.deadlock, None, "link {l}, mix {k}");
                assert!(got.throughput > 0.05, "link {l}, mix {k}: {got:?}");
                mixes += 1;
            }
        }
    }
    assert!(mixes >= 12);
}

#[test]
fn a_full_recompute_whose_transition_the_check_refuses_deadlocks_mid_update() {
    // The state the issue of DQR names: the new tables while the sources
    // still use their cached old SLs.
    let (f, r) = routed(&dragonfly(), EngineKind::Dfdn);
    let cases = common::unsafe_recomputes(&f, &r, EngineKind::Dfdn, 16);
    let refused = cases.len();
    for (f1, full) in cases {
        let m = Routing {
            path_sl: r.path_sl.clone(),
            ..full.clone()
        };
        let (_, cdg) = verify_with_cdg(&f1, &m);
        let net = SubnetPaths::new(&f1, &m);
        for seed in 1..=2 {
            let mut l = load(seed, true);
            l.window *= 2;
            let got = saturate(&net, tight(), &l).expect("runs");
            if let Some(d) = got.deadlock {
                assert_cycle_in_cdg(&d.cycle, &cdg);
                return;
            }
        }
    }
    panic!("none of {refused} refused transitions deadlocked in the simulator");
}
