//! `audit::compare`: a routing against the same routing read back agrees
//! entry for entry; each kind of changed entry is found and named; a
//! sampled read-back skips only the pairs it did not ask.

mod common;

use common::make;
use fabric::audit::{Difference, compare};
use fabric::generate::Topology;
use fabric::model::{NONE, NodeKind};
use fabric::routing::{self, EngineOptions};
use fabric::tables::SL_NONE;

#[test]
fn a_read_back_agrees_and_every_changed_entry_is_named() {
    let f = make(Topology::Dragonfly { p: 2, hosts: None });
    let written = routing::by_name("dfdn")
        .unwrap()
        .route(&f, &EngineOptions::default())
        .unwrap();
    let same = compare(&f, &written, &f, &written, false, 10);
    let (sw, ends) = (f.switches().len() as u64, f.num_cas() as u64);
    assert!(same.matches(), "{:?}", same.first);
    assert_eq!(same.lft_entries, sw * (sw + ends));
    assert_eq!(same.path_sls, ends * (ends - 1));
    assert!(same.sl2vl_rows > sw);

    let mut live = written.clone();
    // One LFT entry: the first switch's route to the last LID elsewhere.
    let lid = f.max_lid();
    let old = live.lfts.get(0, lid);
    live.lfts.set(0, lid, if old == 1 { 2 } else { 1 });
    // One SL-to-VL row of the first switch's first connected out port.
    let s0 = f.switches()[0];
    let out = (1..=f.num_ports(s0))
        .find(|&o| f.remote(f.slot(s0, o)) != NONE)
        .unwrap();
    let t = live.sl2vl.as_mut().unwrap();
    let mut row = t.switch_row(0, 0, out);
    row[0] = (row[0] + 1) % 8;
    t.set_switch_row(0, 0, out, row);
    // One path SL.
    let cas: Vec<u16> = f
        .endports()
        .iter()
        .filter(|&&s| f.kind(f.node_of(s)) == NodeKind::Ca)
        .map(|&s| f.lid_of_slot(s))
        .collect();
    let (a, b) = (cas[0], cas[1]);
    let ps = live.path_sl.as_mut().unwrap();
    let mut r = ps.row_of(a).unwrap().to_vec();
    r[b as usize] = (r[b as usize] + 1) % 4;
    let i = ps.push_row(&r);
    ps.assign(a, i);

    let c = compare(&f, &written, &f, &live, false, 10);
    assert_eq!(c.differences, 3, "{:?}", c.first);
    assert!(
        c.first
            .iter()
            .any(|d| matches!(d, Difference::Lft { live: l, .. } if *l != old))
    );
    assert!(
        c.first
            .iter()
            .any(|d| matches!(d, Difference::Sl2Vl { out_port, .. } if *out_port == out))
    );
    assert!(
        c.first
            .iter()
            .any(|d| matches!(d, Difference::PathSl { .. }))
    );

    // A pair the read-back did not ask: a difference unless sampled.
    let mut unasked = written.clone();
    let ps = unasked.path_sl.as_mut().unwrap();
    let mut r = ps.row_of(a).unwrap().to_vec();
    r[b as usize] = SL_NONE;
    let i = ps.push_row(&r);
    ps.assign(a, i);
    assert_eq!(
        compare(&f, &written, &f, &unasked, false, 10).differences,
        1
    );
    let s = compare(&f, &written, &f, &unasked, true, 10);
    assert!(s.matches());
    assert_eq!(s.path_sls, ends * (ends - 1) - 1);

    // The written SLs placed at the (here same) live LIDs are the written
    // ones for every pair.
    let mut placed = written.clone();
    placed.path_sl = Some(fabric::audit::path_sl_at(
        &f,
        written.path_sl.as_ref().unwrap(),
        &f,
    ));
    let c = compare(&f, &written, &f, &placed, false, 10);
    assert!(c.matches(), "{:?}", c.first);
    assert_eq!(c.path_sls, ends * (ends - 1));
}

/// With LMC every LID of a port is compared, matched by its offset from the
/// port's base LID: a changed entry or SL at offset 1 is named with its
/// offset, and a live port with fewer LIDs lacks the others.
#[test]
fn with_lmc_every_lid_is_compared_by_its_offset() {
    let f0 = make(Topology::Dragonfly { p: 2, hosts: None });
    let f = fabric::generate::with_lmc(&f0, 1).unwrap();
    let written = routing::by_name("dfdn")
        .unwrap()
        .route(&f, &EngineOptions::default())
        .unwrap();
    let (sw, lids) = (f.switches().len() as u64, 2 * f.num_cas() as u64);
    let same = compare(&f, &written, &f, &written, false, 10);
    assert!(same.matches(), "{:?}", same.first);
    assert_eq!(same.lft_entries, sw * (sw + lids));
    assert_eq!(same.path_sls, lids * (lids - 2));

    let cas: Vec<_> = f
        .endports()
        .iter()
        .copied()
        .filter(|&s| f.kind(f.node_of(s)) == NodeKind::Ca)
        .collect();
    let (a, b) = (cas[0], cas[1]);
    let mut live = written.clone();
    let second = f.lid_of_slot(b) + 1;
    let old = live.lfts.get(0, second);
    live.lfts.set(0, second, if old == 1 { 2 } else { 1 });
    let (sa, sb) = (f.lid_of_slot(a) + 1, f.lid_of_slot(b) + 1);
    let ps = live.path_sl.as_mut().unwrap();
    let mut r = ps.row_of(sa).unwrap().to_vec();
    r[sb as usize] = (r[sb as usize] + 1) % 4;
    let i = ps.push_row(&r);
    ps.assign(sa, i);
    let c = compare(&f, &written, &f, &live, false, 10);
    assert_eq!(c.differences, 2, "{:?}", c.first);
    let (ga, gb) = (f.port_guid(a), f.port_guid(b));
    assert!(c.first.iter().any(|d| matches!(d,
        Difference::Lft { destination, offset: 1, .. } if *destination == gb)));
    assert!(c.first.iter().any(|d| matches!(d,
        Difference::PathSl { source, destination, source_offset: 1, destination_offset: 1, .. }
            if *source == ga && *destination == gb)));

    // Written SLs placed at the live LIDs, LID by LID.
    let mut placed = written.clone();
    placed.path_sl = Some(fabric::audit::path_sl_at(
        &f,
        written.path_sl.as_ref().unwrap(),
        &f,
    ));
    assert!(compare(&f, &written, &f, &placed, false, 10).matches());

    // A live fabric that gives each port one LID lacks every second LID.
    let one = routing::by_name("dfdn")
        .unwrap()
        .route(&f0, &EngineOptions::default())
        .unwrap();
    let c = compare(&f, &written, &f0, &one, true, 100_000);
    let missing = c
        .first
        .iter()
        .filter(|d| matches!(d, Difference::Missing { what } if what.starts_with("LID offset 1 of port")))
        .count() as u64;
    assert_eq!(
        missing,
        sw * lids / 2,
        "every switch misses every second LID"
    );
}
