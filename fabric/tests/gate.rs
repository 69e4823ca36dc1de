//! The verification gate: one policy for every caller.

use fabric::formats::{Export, ibnetdiscover, write_routing};
use fabric::generate::{Topology, generate};
use fabric::multi::{MultiFabric, Subnet};
use fabric::pipeline;
use fabric::routing::{EngineKind, EngineOptions, RoutingEngine};
use fabric::testing::{MislabelledEngine, cyclic_torus};
use fabric::verify::{Policy, Refusal, accept};

fn route(e: &dyn RoutingEngine, f: &fabric::Fabric) -> fabric::tables::Routing {
    e.route(f, &EngineOptions::default()).expect("routes")
}

#[test]
fn a_cyclic_routing_from_an_engine_that_claims_deadlock_freedom_is_refused_under_every_policy() {
    let f = cyclic_torus().expect("torus");
    for policy in [Policy::DeadlockFree, Policy::AllowCycles] {
        let err = accept(
            &f,
            &MislabelledEngine,
            route(&MislabelledEngine, &f),
            policy,
        )
        .expect_err("a cycle from a deadlock-free engine");
        assert!(
            matches!(
                err.refusal,
                Refusal::EngineBroken {
                    engine: EngineKind::Dfdn,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.report.cycle.is_some(), "the report carries the cycle");
        assert!(err.to_string().contains("claims deadlock freedom"), "{err}");
    }
}

#[test]
fn minhop_cycles_pass_only_where_the_caller_allows_them() {
    let f = cyclic_torus().expect("torus");
    let minhop = EngineKind::Minhop.engine();
    let err = accept(
        &f,
        minhop.as_ref(),
        route(minhop.as_ref(), &f),
        Policy::DeadlockFree,
    )
    .expect_err("cycle refused by default");
    assert!(matches!(err.refusal, Refusal::Cycle { .. }), "{err}");
    let v = accept(
        &f,
        minhop.as_ref(),
        route(minhop.as_ref(), &f),
        Policy::AllowCycles,
    )
    .expect("allowed on request");
    assert!(!v.report().deadlock_free());
    assert!(v.report().all_pairs_routed());
}

#[test]
fn a_deadlock_free_engine_passes_and_its_tables_are_bound_to_their_fabric() {
    let f = cyclic_torus().expect("torus");
    let dfdn = EngineKind::Dfdn.engine();
    let v = accept(
        &f,
        dfdn.as_ref(),
        route(dfdn.as_ref(), &f),
        Policy::DeadlockFree,
    )
    .expect("DF-DN is deadlock free on a torus");
    assert!(v.report().ok());
    assert!(v.is_for(&f));
    let other = generate(&Topology::Mesh {
        dims: vec![4, 4],
        torus: true,
        hosts: 2,
    })
    .expect("torus");
    assert!(!v.is_for(&other));
    let dir = tempfile::tempdir().expect("tmp");
    let err = write_routing(&other, &v, dir.path(), Export::default()).expect_err("another fabric");
    assert!(err.to_string().contains("another topology"), "{err}");
    assert!(std::fs::read_dir(dir.path()).expect("dir").next().is_none());
    let files = write_routing(&f, &v, dir.path(), Export::default()).expect("writes");
    assert_eq!(
        files.written.len(),
        4,
        "LFTs, SL-to-VL tables, path SLs and the manifest"
    );
    // A parse of the written topology is the same fabric again.
    let t = dir.path().join("t.net");
    std::fs::write(&t, ibnetdiscover::write(&f)).expect("write");
    assert!(v.is_for(&ibnetdiscover::read(&t).expect("parse")));
}

#[test]
fn tables_that_leave_a_pair_unrouted_are_refused_under_every_policy() {
    let f = cyclic_torus().expect("torus");
    let minhop = EngineKind::Minhop.engine();
    let mut r = route(minhop.as_ref(), &f);
    let dst = f.lid_of_slot(f.endports()[0]);
    r.lfts.set(0, dst, 0);
    for policy in [Policy::DeadlockFree, Policy::AllowCycles] {
        let err = accept(&f, minhop.as_ref(), r.clone(), policy).expect_err("unrouted");
        assert!(
            matches!(err.refusal, Refusal::Unrouted { broken, .. } if broken > 0),
            "{err}"
        );
    }
}

#[test]
fn the_multi_subnet_pipeline_refuses_a_subnet_whose_engine_lies() {
    let torus = cyclic_torus().expect("torus");
    let m = MultiFabric::from_subnets(vec![Subnet {
        name: "t".into(),
        prefix: 0xfec0_0000_0000_0001,
        fabric: torus,
    }])
    .expect("one subnet");
    let err = pipeline::route_with(&m, &[&MislabelledEngine])
        .err()
        .expect("refused");
    assert!(err.to_string().contains("claims deadlock freedom"), "{err}");
    let dfdn = EngineKind::Dfdn.engine();
    let ok = pipeline::route_with(&m, &[dfdn.as_ref()]).expect("DF-DN passes");
    assert!(ok.routings[0].report().ok());
}

/// Tables written beside their verification are put in place only with
/// the gate's acceptance of those very tables; another acceptance (of a
/// copy, of a drain stage, for another fabric) is refused, and a candidate
/// dropped leaves neither files nor the directory it made.
#[test]
fn a_candidate_set_is_confirmed_only_by_the_acceptance_of_its_own_tables() {
    use fabric::formats::{Export, stage_candidate};
    let f = generate(&Topology::Dragonfly { p: 2, hosts: None }).expect("dragonfly");
    let e = EngineKind::Dfdn.engine();
    let d = tempfile::tempdir().expect("tmp");
    let out = d.path().join("set");
    let stage = |r: &fabric::tables::Routing| {
        stage_candidate(&f, r, EngineKind::Dfdn, &out, Export::default())
    };
    let (v, c, _) = fabric::verify::gate::accept_while(
        &f,
        e.as_ref(),
        route(e.as_ref(), &f),
        Policy::DeadlockFree,
        stage,
    );
    let v = v.expect("accepted");
    let c = c.expect("staged");
    // A copy of the same tables, accepted on its own: not these tables.
    let copy = accept(&f, e.as_ref(), v.get().clone(), Policy::DeadlockFree).expect("copy");
    let err = c.confirm(&f, &copy).err().expect("another acceptance");
    assert!(err.to_string().contains("not the tables staged"), "{err}");
    assert!(!out.exists(), "the refused candidate leaves nothing");
    // The acceptance of the staged tables themselves puts them in place.
    let (v, c, _) = fabric::verify::gate::accept_while(
        &f,
        e.as_ref(),
        v.into_inner(),
        Policy::DeadlockFree,
        stage,
    );
    let v = v.expect("accepted");
    let files = c
        .expect("staged")
        .confirm(&f, &v)
        .expect("confirmed")
        .commit()
        .expect("commit");
    assert!(
        files
            .written
            .iter()
            .any(|p| p.ends_with("ibfabric-lfts.bin"))
    );
    let back = fabric::formats::tableset::read_set(&f, &out).expect("read back");
    assert_eq!(
        back.lfts,
        v.get().lfts,
        "the set reads back as the tables accepted"
    );
    assert_eq!(back.sl2vl, v.get().sl2vl);
    assert_eq!(back.path_sl, v.get().path_sl);
}
