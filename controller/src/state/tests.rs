use super::*;
use fabric::intersubnet::AlgorithmKind;

/// The versioning half of [`super::recompute`], without the whole-fabric
/// check: these reports are synthetic and carry no dependency summaries
/// (`compose.rs` tests the check on routed fabrics).
fn recompute(
    view: &GlobalView,
    algo: &dyn InterSubnetRouting,
    prev: &Published,
    term: u64,
) -> Result<Option<Publication>, ControlError> {
    Ok(prev.next(algo.route(view)?, term))
}

const LEASE: Duration = Duration::from_secs(10);
const TERM: u64 = 7;

/// What the agents of a two-subnet fabric joined by one router report.
fn reports() -> Vec<v1::SubnetReport> {
    let m = fabric::multi::fat_tree_subnets(2, 2, 2, 2, 1).expect("fabric");
    GlobalView::from_multi(&m)
        .subnets
        .iter()
        .map(|s| v1::SubnetReport {
            subnet_prefix: s.prefix,
            generation: 1,
            end_ports: s
                .end_ports
                .iter()
                .map(|p| v1::EndPort {
                    guid: p.guid,
                    lid: p.lid as u32,
                    desc: String::new(),
                    lmc: 0,
                })
                .collect(),
            router_ports: s
                .router_ports
                .iter()
                .map(|p| v1::RouterPort {
                    router_guid: p.router_guid,
                    router_desc: "r0".into(),
                    port: p.port as u32,
                    port_guid: p.port_guid,
                    lid: p.lid as u32,
                    switch_guid: p.switch_guid,
                    primary_lids: Vec::new(),
                    router_num_ports: 8,
                })
                .collect(),
            routing: Some(v1::RoutingResult {
                engine: "ftree".into(),
                verified: true,
                deadlock_free: true,
                ..Default::default()
            }),
            // Empty, but well formed: these tests leave the whole-fabric
            // check out, and a subnet with no summary takes no part.
            dependencies: Some(v1::DependencySummary::default()),
            ..v1::SubnetReport::default()
        })
        .collect()
}

fn register(st: &mut State, agent: &str, prefix: u64, session: &str, now: Instant) {
    st.register(
        &v1::RegisterRequest {
            agent_id: agent.into(),
            subnet_prefix: prefix,
            query_addr: format!("{agent}:7200"),
        },
        &format!("id-{agent}"),
        session.into(),
        now,
        LEASE,
        &Limits::default(),
    )
    .expect("registers")
}

/// Checks and applies a report as the controller does after the write
/// landed; returns the write.
fn report(
    st: &mut State,
    r: &v1::SubnetReport,
    now: Instant,
) -> Result<Option<Write>, ControlError> {
    let mut a = st.check_report(r, None, &Limits::default())?;
    let w = a.write.take();
    st.apply(a, now);
    Ok(w)
}

/// Registers and reports every subnet of [`reports`]; returns them as
/// sent (with their sessions).
fn reported(st: &mut State, now: Instant) -> Vec<v1::SubnetReport> {
    let mut sent = Vec::new();
    for (i, mut r) in reports().into_iter().enumerate() {
        let session = format!("s{i}");
        register(st, &format!("a{i}"), r.subnet_prefix, &session, now);
        r.session = session;
        assert!(report(st, &r, now).expect("accepted").is_some());
        sent.push(r);
    }
    sent
}

fn decode_subnet(w: &Write) -> v1::StoredSubnet {
    v1::StoredSubnet::decode(w.value.as_slice()).expect("decodes")
}

fn other(agent: &str) -> v1::RegisterRequest {
    v1::RegisterRequest {
        agent_id: agent.into(),
        subnet_prefix: 0xfec0,
        query_addr: String::new(),
    }
}

#[test]
fn register_guards_a_live_prefix_for_the_identity_that_holds_it() {
    let t0 = Instant::now();
    let mut st = State::default();
    let l = Limits::default();
    register(&mut st, "a", 0xfec0, "s1", t0);
    // Another identity for a prefix whose holder is live: refused, nothing
    // changes, even under the same agent id.
    for agent in ["b", "a"] {
        let e = st
            .register(
                &other(agent),
                "intruder",
                "s2".into(),
                t0 + LEASE / 2,
                LEASE,
                &l,
            )
            .expect_err("held");
        assert!(matches!(e, ControlError::PrefixHeld { ref holder, .. } if holder == "a"));
    }
    assert_eq!(st.get(0xfec0).map(|e| e.session.as_str()), Some("s1"));
    // The holder itself registers again at once (an agent restart).
    st.register(&other("a"), "id-a", "s3".into(), t0 + LEASE / 2, LEASE, &l)
        .expect("same identity");
    // Once the holder's lease ran out, the prefix is free.
    st.register(
        &other("b"),
        "id-b",
        "s4".into(),
        t0 + LEASE + LEASE / 2,
        LEASE,
        &l,
    )
    .expect("lease over");
    assert_eq!(st.get(0xfec0).map(|e| e.agent_id.as_str()), Some("b"));
    let empty = v1::RegisterRequest {
        agent_id: " ".into(),
        ..other("b")
    };
    assert!(matches!(
        st.register(&empty, "x", "s5".into(), t0, LEASE, &l),
        Err(ControlError::Invalid(_))
    ));
}

#[test]
fn registrations_are_bounded_and_those_that_never_report_expire() {
    let t0 = Instant::now();
    let mut st = State::default();
    let l = Limits {
        max_subnets: 3,
        ..Limits::default()
    };
    for p in 1..=3u64 {
        let r = v1::RegisterRequest {
            agent_id: format!("a{p}"),
            subnet_prefix: p,
            query_addr: String::new(),
        };
        st.register(&r, &format!("id{p}"), format!("s{p}"), t0, LEASE, &l)
            .expect("within the limit");
    }
    let fourth = v1::RegisterRequest {
        agent_id: "a4".into(),
        subnet_prefix: 4,
        query_addr: String::new(),
    };
    assert!(matches!(
        st.register(&fourth, "id4", "s4".into(), t0, LEASE, &l),
        Err(ControlError::Exhausted(_))
    ));
    // None of the three reported: a lease later they are gone and the
    // fourth fits.
    st.register(&fourth, "id4", "s4".into(), t0 + LEASE, LEASE, &l)
        .expect("the silent ones expired");
    assert_eq!(st.len(), 1);
}

#[test]
fn a_re_registering_agent_keeps_its_report_and_starts_its_generations_again() {
    let t0 = Instant::now();
    let mut st = State::default();
    let mut sent = reported(&mut st, t0);
    sent[0].generation = 1_700_000_000_000;
    assert!(report(&mut st, &sent[0], t0).expect("accepted").is_none());
    register(&mut st, "a0", sent[0].subnet_prefix, "s9", t0);
    assert_eq!(
        st.get(sent[0].subnet_prefix)
            .and_then(|e| e.report.as_ref())
            .map(|r| &r.end_ports),
        Some(&sent[0].end_ports)
    );
    // The old session is gone with the new registration.
    assert!(matches!(
        st.check_report(&sent[0], None, &Limits::default()),
        Err(ControlError::UnknownSession(_))
    ));
    // The new session's first generation is accepted whatever the old
    // session counted to.
    let mut fresh = sent[0].clone();
    fresh.session = "s9".into();
    fresh.generation = 1;
    assert!(report(&mut st, &fresh, t0).is_ok());
}

#[test]
fn a_report_is_taken_only_from_its_sessions_identity() {
    let t0 = Instant::now();
    let mut st = State::default();
    let sent = reported(&mut st, t0);
    let l = Limits::default();
    assert!(matches!(
        st.check_report(&sent[0], Some("someone-else"), &l),
        Err(ControlError::UnknownSession(_))
    ));
    assert!(st.check_report(&sent[0], Some("id-a0"), &l).is_ok());
}

#[test]
fn a_changed_report_is_written_then_applied_then_published_in_the_term() {
    let t0 = Instant::now();
    let mut st = State::default();
    let algo = AlgorithmKind::Prefix.algorithm();
    let sent = reported(&mut st, t0);
    let first = recompute(&st.view(), algo.as_ref(), &Published::default(), TERM)
        .expect("routes")
        .expect("a first publication");
    assert_eq!(first.published.version, first_version(TERM));
    assert_eq!(term_of(first.published.version), TERM);
    // One head per result: two mappings and the router's tables.
    assert_eq!(first.writes.len(), 3);
    assert!(first.writes.iter().all(|w| w.key.starts_with(ROUTES_KEY)));
    assert_eq!(first.published.mappings.len(), 2);
    assert!(
        first
            .published
            .mappings
            .values()
            .all(|m| m.version() == first_version(TERM))
    );
    assert_eq!(first.published.egress.len(), 1);

    // Subnet 0 loses a host: its report is written, and the mapping of
    // subnet 1 (which routes to that host) and the router's table change.
    let mut changed = sent[0].clone();
    changed.generation = 2;
    changed.end_ports.pop();
    let w = report(&mut st, &changed, t0)
        .expect("accepted")
        .expect("a write");
    let stored = decode_subnet(&w);
    assert_eq!(stored.report, Some(changed.clone()));
    assert_eq!(stored.subnet_prefix, changed.subnet_prefix);
    assert_eq!(stored.holder, "id-a0");
    let next = recompute(&st.view(), algo.as_ref(), &first.published, TERM)
        .expect("routes")
        .expect("a new publication");
    let p = &next.published;
    assert_eq!(p.version, first_version(TERM) + 1);
    let v = |prefix: u64| p.mappings[&prefix].version();
    assert_eq!(
        v(sent[1].subnet_prefix),
        p.version,
        "routes to the lost host went"
    );
    assert_eq!(
        v(sent[0].subnet_prefix),
        first_version(TERM),
        "unchanged content keeps its version"
    );
    assert!(p.egress.values().all(|t| t.version() == p.version));
    assert_eq!(next.writes.len(), 2, "only the changed results are written");
    // The heads are what a new leader restores: recomputing the same view
    // against them, even in a later term, gives the same versions and
    // writes nothing.
    let mut stored: BTreeMap<String, Vec<u8>> = first
        .writes
        .iter()
        .map(|w| (w.key.clone(), w.value.clone()))
        .collect();
    stored.extend(next.writes.iter().map(|w| (w.key.clone(), w.value.clone())));
    let restored = Published::restore("prefix", stored.into_iter().collect()).expect("decodes");
    assert_eq!(restored.version, p.version);
    assert!(restored.mappings.is_empty(), "heads only, no content");
    let again = recompute(&st.view(), algo.as_ref(), &restored, TERM + 1)
        .expect("routes")
        .expect("the content comes back");
    assert!(again.writes.is_empty());
    assert_eq!(again.published.mappings, p.mappings);
    assert_eq!(again.published.egress, p.egress);
    assert_eq!(again.published.version, p.version);
    // A later term starts above everything the earlier one handed out.
    changed.generation = 3;
    changed.end_ports.pop();
    report(&mut st, &changed, t0).expect("accepted");
    let later = recompute(&st.view(), algo.as_ref(), p, TERM + 1)
        .expect("routes")
        .expect("published");
    assert_eq!(later.published.version, first_version(TERM + 1));
}

#[test]
fn a_report_whose_write_failed_is_not_applied_and_counts_as_new_again() {
    let t0 = Instant::now();
    let mut st = State::default();
    let sent = reported(&mut st, t0);
    let mut changed = sent[0].clone();
    changed.end_ports.pop();
    // The caller's write fails: it drops the accepted change unapplied.
    let a = st
        .check_report(&changed, None, &Limits::default())
        .expect("accepted");
    assert!(a.changed());
    drop(a);
    assert_eq!(
        st.get(changed.subnet_prefix)
            .and_then(|e| e.report.as_ref()),
        Some(&sent[0]),
        "memory keeps what the store has"
    );
    // The retry is a change again, not a heartbeat.
    assert!(report(&mut st, &changed, t0).expect("accepted").is_some());
}

#[test]
fn an_identical_report_writes_and_publishes_nothing() {
    let t0 = Instant::now();
    let mut st = State::default();
    let algo = AlgorithmKind::Issr.algorithm();
    let sent = reported(&mut st, t0);
    let first = recompute(&st.view(), algo.as_ref(), &Published::default(), TERM)
        .expect("routes")
        .expect("published");
    // A heartbeat: same content, a later generation and routing time.
    let mut beat = sent[0].clone();
    beat.generation = 5;
    if let Some(r) = beat.routing.as_mut() {
        r.route_seconds = 0.5;
    }
    assert_eq!(report(&mut st, &beat, t0 + LEASE).expect("accepted"), None);
    assert_eq!(
        st.get(sent[0].subnet_prefix).map(|e| e.generation),
        Some(5),
        "the generation still advances"
    );
    assert_eq!(
        recompute(&st.view(), algo.as_ref(), &first.published, TERM).expect("routes"),
        None,
        "nothing to publish"
    );
    // Liveness follows the heartbeat.
    let d = st.describe(&first.published, t0 + LEASE + LEASE / 2, LEASE);
    let live = |prefix: u64| {
        d.subnets
            .iter()
            .find(|s| s.subnet_prefix == prefix)
            .map(|s| s.live)
    };
    assert_eq!(live(sent[0].subnet_prefix), Some(true));
    assert_eq!(live(sent[1].subnet_prefix), Some(false));
    // An older generation is refused and changes nothing.
    let mut stale = sent[0].clone();
    stale.generation = 3;
    stale.end_ports.clear();
    assert!(matches!(
        st.check_report(&stale, None, &Limits::default()),
        Err(ControlError::StaleReport { got: 3, have: 5 })
    ));
}

#[test]
fn reports_that_are_unverified_or_malformed_are_refused() {
    let t0 = Instant::now();
    let mut st = State::default();
    let sent = reported(&mut st, t0);
    let l = Limits::default();
    let refused = |st: &State, r: &v1::SubnetReport, what: &str| {
        let e = st.check_report(r, None, &l).expect_err(what);
        assert!(matches!(e, ControlError::Invalid(_)), "{what}: {e}");
        assert!(e.to_string().contains(what), "{e}");
    };
    let base = sent[0].clone();
    let mut r = base.clone();
    r.routing.as_mut().expect("routing").verified = false;
    refused(&st, &r, "not verified");
    let mut r = base.clone();
    r.routing.as_mut().expect("routing").deadlock_free = false;
    refused(&st, &r, "not deadlock free");
    let mut r = base.clone();
    r.routing = None;
    refused(&st, &r, "no routing result");
    let mut r = base.clone();
    r.routing.as_mut().expect("routing").link_load = Some(v1::LinkLoadSummary {
        buckets: vec![v1::LoadBucket::default(); 65],
        ..Default::default()
    });
    refused(&st, &r, "more than 64 buckets");
    // Port 7 on a router of 6 ports.
    let mut r = base.clone();
    r.router_ports[0].port = 7;
    r.router_ports[0].router_num_ports = 6;
    refused(&st, &r, "does not exist");
    // One router port twice, one router with two port counts.
    let mut r = base.clone();
    let mut twin = r.router_ports[0].clone();
    twin.port_guid = 0x5eed;
    twin.lid = 998;
    r.router_ports.push(twin.clone());
    refused(&st, &r, "appears twice");
    let mut r = base.clone();
    twin.port = r.router_ports[0].port + 1;
    twin.router_num_ports = 9;
    r.router_ports.push(twin);
    refused(&st, &r, "two port counts");
    // Duplicate GUIDs and LIDs inside one report, LIDs out of range.
    let mut r = base.clone();
    r.end_ports.push(r.end_ports[0].clone());
    refused(&st, &r, "appears twice");
    let mut r = base.clone();
    r.end_ports[0].lid = 0xc000;
    refused(&st, &r, "unicast range");
    // LMC: each of a port's 2^LMC LIDs is its own, from an aligned base.
    let free = 0x8000u32;
    let mut r = base.clone();
    r.end_ports[0].lid = free;
    r.end_ports[0].lmc = 2;
    st.check_report(&r, None, &l)
        .expect("LIDs 0x8000..=0x8003 of one port");
    r.end_ports[1].lid = free + 2;
    refused(&st, &r, &format!("LID {} is given to two ports", free + 2));
    let mut r = base.clone();
    r.end_ports[0].lid = free + 1;
    r.end_ports[0].lmc = 1;
    refused(&st, &r, "multiple of 2^LMC");
    let mut r = base.clone();
    r.end_ports[0].lid = free;
    r.end_ports[0].lmc = 8;
    refused(&st, &r, "LMC is 0..=7");
    let mut r = base.clone();
    r.end_ports[0].lid = 0xc000;
    r.end_ports[0].lmc = 2;
    refused(&st, &r, "unicast range");
    // Past the bound on end ports.
    let small = Limits {
        max_end_ports: 1,
        ..Limits::default()
    };
    let mut r = base.clone();
    r.end_ports[0].lid = 997;
    let e = st.check_report(&r, None, &small).expect_err("bounded");
    assert!(e.to_string().contains("the limit is 1"), "{e}");
    // Nothing refused reached the state.
    assert_eq!(
        st.get(base.subnet_prefix).and_then(|e| e.report.as_ref()),
        Some(&sent[0])
    );
}

/// The prefixes the view is built from.
fn in_view(st: &State) -> Vec<u64> {
    st.view().subnets.iter().map(|s| s.prefix).collect()
}

#[test]
fn a_report_that_cannot_vouch_or_claims_what_an_earlier_one_holds_is_left_out_alone() {
    let t0 = Instant::now();
    let mut st = State::default();
    let sent = reported(&mut st, t0);
    let (a, b) = (sent[0].subnet_prefix, sent[1].subnet_prefix);
    assert_eq!(in_view(&st), vec![a, b]);
    // Subnet 0 sends a report without a dependency summary (an agent of
    // an older release): kept, left out, named; subnet 1 stays.
    let mut r = sent[0].clone();
    r.generation = 2;
    r.dependencies = None;
    report(&mut st, &r, t0).expect("kept").expect("written");
    assert_eq!(in_view(&st), vec![b]);
    assert_eq!(st.reports().len(), 1);
    let why = st.left_out(a).expect("left out");
    assert!(why.contains("no dependency summary"), "{why}");
    let d = st.describe(&Published::default(), t0, LEASE);
    assert!(
        d.subnets
            .iter()
            .any(|s| s.subnet_prefix == a && s.left_out == why)
    );
    // It takes part again with a summary that decodes, and is left out
    // with one that does not.
    r.generation = 3;
    r.dependencies = Some(v1::DependencySummary {
        host_lids: vec![0xbffe],
        ..Default::default()
    });
    report(&mut st, &r, t0).expect("kept");
    let why = st.left_out(a).expect("left out");
    assert!(why.contains("dependency summary is refused"), "{why}");
    r.generation = 4;
    r.dependencies = sent[0].dependencies.clone();
    report(&mut st, &r, t0).expect("kept");
    assert_eq!(in_view(&st), vec![a, b]);
    // Subnet 0 (senior: its first report came first) now claims a host
    // that subnet 1 still reports (a host moved between subnets, or a
    // claim of a subnet's agent): subnet 1 is left out until the two
    // agree, and a change does not make subnet 0 junior.
    r.generation = 5;
    r.end_ports.push(sent[1].end_ports[0].clone());
    r.end_ports.last_mut().expect("pushed").lid = 999;
    report(&mut st, &r, t0).expect("kept");
    assert_eq!(in_view(&st), vec![a]);
    let why = st.left_out(b).expect("left out");
    assert!(
        why.contains(&format!("claimed by subnet {a:#018x}")),
        "{why}"
    );
    // A subnet no router joins to the others is left out; the two joined
    // ones take part.
    r.end_ports.pop();
    r.generation = 6;
    report(&mut st, &r, t0).expect("kept");
    register(&mut st, "lone", 0xfec9, "s9", t0);
    let mut lone = sent[0].clone();
    lone.subnet_prefix = 0xfec9;
    lone.session = "s9".into();
    lone.router_ports.clear();
    for (i, p) in lone.end_ports.iter_mut().enumerate() {
        p.guid = 0x9000 + i as u64;
    }
    report(&mut st, &lone, t0).expect("kept");
    assert_eq!(in_view(&st), vec![a, b]);
    let why = st.left_out(0xfec9).expect("left out");
    assert!(why.contains("no router joins it"), "{why}");
    // What the store holds gives the same answer after a restart, and an
    // operator can forget a subnet.
    assert!(st.forget(0xfec9));
    assert!(!st.forget(0xfec9));
    assert!(st.get(0xfec9).is_none() && st.left_out(0xfec9).is_none());
}

/// Re-cabling as the agents report it: every router now has 48 ports,
/// and each subnet's new report arrives while the other still holds the
/// old count. The reports converge in either order.
#[test]
fn re_cabling_converges_in_any_arrival_order() {
    for first in [0, 1] {
        let t0 = Instant::now();
        let mut st = State::default();
        let sent = reported(&mut st, t0);
        let mut stored = Vec::new();
        let mut moved: Vec<v1::SubnetReport> = sent.clone();
        for r in &mut moved {
            r.generation = 2;
            for p in &mut r.router_ports {
                p.router_num_ports = 48;
                p.port += 20;
            }
        }
        let w = report(&mut st, &moved[first], t0).expect("kept, not refused");
        stored.extend(w);
        // The junior subnet (1) waits, whichever arrived first.
        let waiting = st.left_out(moved[1].subnet_prefix).expect("waits");
        let (senior, junior) = if first == 0 { (48, 8) } else { (8, 48) };
        assert!(
            waiting.contains(&format!("has {senior} ports in the report of subnet")),
            "{waiting}"
        );
        assert!(
            waiting.contains(&format!("and {junior} in this one")),
            "{waiting}"
        );
        assert_eq!(in_view(&st), vec![moved[0].subnet_prefix]);
        let w = report(&mut st, &moved[1 - first], t0).expect("kept");
        stored.extend(w);
        assert_eq!(st.left_out(moved[0].subnet_prefix), None);
        assert_eq!(st.left_out(moved[1].subnet_prefix), None);
        assert_eq!(st.view().subnets.len(), 2);
        assert!(
            st.view()
                .subnets
                .iter()
                .flat_map(|s| &s.router_ports)
                .all(|p| p.port > 20)
        );
        // A leader restored from the writes sees the same.
        let back = State::restore(stored.into_iter().map(|w| (w.key, w.value)).collect(), t0)
            .expect("decodes");
        assert_eq!(in_view(&back), in_view(&st));
    }
}

#[test]
fn recompute_keeps_versions_of_unchanged_and_vanished_results() {
    let t0 = Instant::now();
    let mut st = State::default();
    let algo = AlgorithmKind::Prefix.algorithm();
    reported(&mut st, t0);
    let first = recompute(&st.view(), algo.as_ref(), &Published::default(), TERM)
        .expect("routes")
        .expect("published");
    // The same view again: nothing changed, nothing to publish.
    assert_eq!(
        recompute(&st.view(), algo.as_ref(), &first.published, TERM).expect("routes"),
        None
    );
    // Results for a subnet that no longer appears stay published.
    let mut prev = first.published.clone();
    let gone = v1::MappingUpdate {
        subnet_prefix: 0xdead,
        version: 1,
        ..Default::default()
    };
    let gone = Arc::new(Held::of(gone));
    prev.mappings.insert(0xdead, gone.clone());
    prev.version = first_version(TERM) + 6;
    // Only subnet 0 is known now (a new leader that heard from one agent
    // so far): its mapping loses the remote subnet.
    let mut alone = State::default();
    let mut r = reports().remove(0);
    register(&mut alone, "a0", r.subnet_prefix, "s", t0);
    r.session = "s".into();
    report(&mut alone, &r, t0).expect("accepted");
    let next = recompute(&alone.view(), algo.as_ref(), &prev, TERM)
        .expect("routes")
        .expect("a subnet lost its peer");
    assert_eq!(
        next.published.version,
        prev.version + 1,
        "versions only grow"
    );
    assert_eq!(next.published.mappings.get(&0xdead), Some(&gone));
    assert_eq!(
        next.published.egress.len(),
        first.published.egress.len(),
        "the router's table is kept"
    );
}

#[test]
fn restore_reads_what_the_writes_hold_and_skips_bare_registrations() {
    let t0 = Instant::now();
    let mut st = State::default();
    register(&mut st, "a", 0xfec0, "s1", t0);
    let mut r = reports().remove(0);
    r.subnet_prefix = 0xfec0;
    r.session = "s1".into();
    let w = report(&mut st, &r, t0).expect("accepted").expect("a write");
    // A registration that never reported, as older stores wrote it (no
    // prefix field, no report): it used to come back under prefix 0.
    let bare = v1::StoredSubnet {
        agent_id: "b".into(),
        session: "s2".into(),
        ..Default::default()
    };
    let back = State::restore(
        vec![
            (w.key.clone(), w.value),
            ("subnets/000000000000fec1".into(), bare.encode_to_vec()),
        ],
        t0,
    )
    .expect("decodes");
    assert_eq!(back.len(), 1);
    assert!(back.get(0).is_none());
    let e = back.get(0xfec0).expect("restored");
    assert_eq!((e.agent_id.as_str(), e.report.as_ref()), ("a", Some(&r)));
    assert_eq!(e.holder, "id-a");
    assert!(e.session.is_empty(), "sessions are not restored");
    assert!(matches!(
        State::restore(vec![("subnets/x".into(), vec![0xff])], t0),
        Err(ControlError::Undecodable { .. })
    ));
}

#[test]
fn terms_grow_from_the_store_and_never_fall_below_the_clock() {
    assert_eq!(next_term(5, 3), 6);
    assert_eq!(next_term(0, 1_800_000_000), 1_800_000_000);
    assert_eq!(next_term(1_800_000_005, 1_800_000_000), 1_800_000_006);
    assert_eq!(next_term(u64::MAX, 0), u64::from(u32::MAX));
    assert!(first_version(next_term(5, 3)) > first_version(5) + 1_000_000);
}

/// A squatter (an agent certificate of another prefix) reports a subnet's
/// host GUIDs before that subnet's agent first reports: the real subnet's
/// report is kept, left out and named with the squatter; once an operator
/// forgets the squatter, the real subnet takes part, and the squatter
/// reporting again is the later claim and is left out in its turn.
#[test]
fn a_squatted_subnet_is_named_and_an_operator_frees_it() {
    let t0 = Instant::now();
    let mut st = State::default();
    let real = reports();
    let (victim, other) = (real[0].clone(), real[1].clone());
    register(&mut st, "other", other.subnet_prefix, "so", t0);
    let mut r = other.clone();
    r.session = "so".into();
    report(&mut st, &r, t0).expect("kept");
    let squat_prefix = 0xfec0_0000_0000_0bad;
    register(&mut st, "squatter", squat_prefix, "sq", t0);
    let mut squat = victim.clone();
    squat.subnet_prefix = squat_prefix;
    squat.session = "sq".into();
    report(&mut st, &squat, t0).expect("kept");
    register(&mut st, "victim", victim.subnet_prefix, "sv", t0);
    let mut v = victim.clone();
    v.session = "sv".into();
    report(&mut st, &v, t0).expect("kept, not refused");
    let why = st.left_out(victim.subnet_prefix).expect("left out");
    assert!(why.contains(&format!("{squat_prefix:#018x}")), "{why}");
    assert!(st.forget(squat_prefix));
    assert_eq!(st.left_out(victim.subnet_prefix), None);
    assert_eq!(
        in_view(&st),
        vec![victim.subnet_prefix, other.subnet_prefix]
    );
    register(&mut st, "squatter", squat_prefix, "sq2", t0);
    squat.session = "sq2".into();
    squat.generation = 2;
    report(&mut st, &squat, t0).expect("kept");
    assert!(st.left_out(squat_prefix).is_some());
    assert_eq!(st.left_out(victim.subnet_prefix), None);
}
