//! One behavioural suite for every store: each property is an async fn
//! over `dyn Store` handles and runs twice, on a `MemoryStore` and on an
//! `EtcdStore` talking to a real etcd process started for the test.
//!
//! Handles: `a` and `b` share a namespace but not a connection (two
//! controller processes of one cluster); `other` shares the backend under
//! another namespace (another cluster on the same etcd).

use settings::ConfigFile;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::registry::StoreFile;
use store::testing::{EtcdServer, unique_namespace};
use store::{
    EtcdStore, Event, EventKind, MemoryStore, Store, StoreError, StorePersist, Watch,
    observe_leader,
};
use store::{StoreConfig, StoreKind};
use tokio::time::timeout;

/// Bound on anything that should happen promptly; generous because the
/// test machine is shared.
const STEP: Duration = Duration::from_secs(5);
const TTL: Duration = Duration::from_secs(2);

struct Handles {
    a: Arc<dyn Store>,
    b: Arc<dyn Store>,
    other: Arc<dyn Store>,
}

/// `/t/ns-other/` next to `/t/ns/`: the same backend, no overlap.
fn sibling(ns: &str) -> String {
    format!("{}-other/", ns.trim_end_matches('/'))
}

fn memory_handles(ns: &str) -> Handles {
    let a = MemoryStore::new(ns).expect("memory store");
    Handles {
        b: Arc::new(a.namespaced(ns).expect("same namespace")),
        other: Arc::new(a.namespaced(&sibling(ns)).expect("other namespace")),
        a: Arc::new(a),
    }
}

async fn etcd_handles(server: &EtcdServer, ns: &str) -> Handles {
    let connect = |ns: String| async move {
        EtcdStore::connect(&server.endpoints(), &ns)
            .await
            .unwrap_or_else(|e| panic!("connecting to the test etcd: {e}"))
    };
    Handles {
        a: Arc::new(connect(ns.to_string()).await),
        b: Arc::new(connect(ns.to_string()).await),
        other: Arc::new(connect(sibling(ns)).await),
    }
}

/// `mod NAME { memory, etcd }` running `fn NAME(Handles)` on each store.
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn memory() {
                let ns = unique_namespace(stringify!($name));
                super::$name(memory_handles(&ns)).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn etcd() {
                // Started on the test thread: the server dies with it.
                let server = EtcdServer::start();
                let ns = unique_namespace(stringify!($name));
                super::$name(etcd_handles(&server, &ns).await).await;
            }
        }
    )*};
}

on_both_stores!(
    put_get_revision,
    put_if_compare_and_swap,
    list_sees_only_its_prefix,
    delete_removes,
    watch_delivers_in_order,
    persist_adapter_round_trip,
    one_leader_and_resign_hands_over,
    contention_has_exactly_one_leader,
    abandoned_leadership_expires_after_ttl,
    a_leader_whose_term_ended_writes_nothing,
    followers_observe_the_leader,
    large_values_go_in_parts,
    many_keys_in_one_save,
    stale_parts_are_collected,
    a_fenced_commit_is_atomic,
);

/// What a controller's persist layer reads back for `key`.
async fn stored(s: &Arc<dyn Store>, key: &str) -> Vec<u8> {
    StorePersist::new(s.clone())
        .load(key)
        .await
        .expect("load")
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .unwrap_or_default()
}

/// A value of `n` bytes that differs from position to position, so a
/// part out of order would show.
fn big(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31) ^ salt ^ (i >> 11) as u8)
        .collect()
}

/// A value over etcd's request limit (1.5 MiB by default: the test etcd
/// runs with the defaults) is written in parts and read back whole; a
/// smaller value written over it removes the parts.
async fn large_values_go_in_parts(h: Handles) {
    let ga = within("campaign", STEP, h.a.campaign("ctl", "ctl-a", TTL))
        .await
        .unwrap();
    let p = StorePersist::new(h.a.clone());
    p.fence("ctl", ga.revision());
    let v = big(3 << 20, 7);
    p.save("subnets/0001", v.clone())
        .await
        .expect("a 3 MiB value");
    assert_eq!(stored(&h.b, "subnets/0001").await, v);
    let parts = h.a.list_keys("parts/").await.unwrap();
    assert_eq!(parts.len(), 6, "3 MiB in 512 KiB parts: {parts:?}");
    // Listing the subnets never meets a part.
    let listed = StorePersist::new(h.b.clone())
        .load("subnets/")
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    // A new large value replaces the parts, a small one removes them.
    let v2 = big((3 << 20) + 5, 9);
    p.save("subnets/0001", v2.clone()).await.expect("replaced");
    assert_eq!(stored(&h.b, "subnets/0001").await, v2);
    assert_eq!(h.a.list_keys("parts/").await.unwrap().len(), 7);
    p.save("subnets/0001", b"small".to_vec())
        .await
        .expect("small");
    assert_eq!(stored(&h.b, "subnets/0001").await, b"small");
    assert!(h.a.list_keys("parts/").await.unwrap().is_empty());
    // A corrupted part is noticed, not read back as a value.
    p.save("subnets/0002", v.clone()).await.expect("again");
    let (k, _) = h.a.list_keys("parts/").await.unwrap().remove(2);
    h.a.put(&k, b"garbage".to_vec()).await.unwrap();
    let e = StorePersist::new(h.b.clone())
        .load("subnets/")
        .await
        .expect_err("corrupt");
    assert!(e.to_string().contains("subnets/0002"), "{e}");
    ga.resign().await.unwrap();
}

/// More keys than one etcd transaction may carry (128 operations by
/// default), in one save.
async fn many_keys_in_one_save(h: Handles) {
    let ga = within("campaign", STEP, h.a.campaign("ctl", "ctl-a", TTL))
        .await
        .unwrap();
    let p = StorePersist::new(h.a.clone());
    p.fence("ctl", ga.revision());
    let writes: Vec<(String, Vec<u8>)> = (0..300)
        .map(|i| (format!("routes/egress/{i:016x}"), big(2000 + i, i as u8)))
        .collect();
    p.save_all(writes.clone()).await.expect("300 keys");
    let back = StorePersist::new(h.b.clone())
        .load("routes/")
        .await
        .unwrap();
    assert_eq!(back.len(), 300);
    let mut want = writes;
    want.sort();
    assert_eq!(back, want);
    assert!(p.health().ok);
    ga.resign().await.unwrap();
}

/// Parts a writer left without a head (it stopped in between) are removed
/// by the next leader; parts a head names stay.
async fn stale_parts_are_collected(h: Handles) {
    let ga = within("campaign", STEP, h.a.campaign("ctl", "ctl-a", TTL))
        .await
        .unwrap();
    let p = StorePersist::new(h.a.clone());
    p.fence("ctl", ga.revision());
    p.save("subnets/0001", big(1 << 20, 1)).await.unwrap();
    h.a.put("parts/subnets/0002/dead-1/000000", b"orphan".to_vec())
        .await
        .unwrap();
    h.a.put("parts/subnets/0001/dead-2/000000", b"orphan".to_vec())
        .await
        .unwrap();
    let next = StorePersist::new(h.b.clone());
    next.fence("ctl", ga.revision());
    next.load("subnets/").await.unwrap();
    assert_eq!(next.collect_parts().await.unwrap(), 2);
    assert_eq!(stored(&h.b, "subnets/0001").await, big(1 << 20, 1));
    assert_eq!(h.a.list_keys("parts/").await.unwrap().len(), 2);
    ga.resign().await.unwrap();
}

/// Every write of a fenced commit lands, at one revision, or none does.
async fn a_fenced_commit_is_atomic(h: Handles) {
    use store::Op;
    let ga = within("campaign", STEP, h.a.campaign("ctl", "ctl-a", TTL))
        .await
        .unwrap();
    h.a.put("k/gone", b"x".to_vec()).await.unwrap();
    let ops = vec![
        Op::Put {
            key: "k/1".into(),
            value: b"one".to_vec(),
        },
        Op::Put {
            key: "k/2".into(),
            value: b"two".to_vec(),
        },
        Op::Delete {
            key: "k/gone".into(),
        },
        Op::Delete {
            key: "k/never".into(),
        },
    ];
    let rev =
        h.a.commit_fenced(ops.clone(), "ctl", ga.revision())
            .await
            .unwrap()
            .expect("in the term");
    let l = h.b.list("k/").await.unwrap();
    assert_eq!(l.len(), 2);
    assert!(l.iter().all(|e| e.revision == rev), "{l:?}");
    // Outside the term: nothing.
    h.a.put("k/gone", b"x".to_vec()).await.unwrap();
    assert_eq!(
        h.a.commit_fenced(ops, "ctl", ga.revision() + 1000)
            .await
            .unwrap(),
        None
    );
    assert!(h.b.get("k/gone").await.unwrap().is_some());
    ga.resign().await.unwrap();
}

async fn within<T>(what: &str, d: Duration, f: impl Future<Output = T>) -> T {
    match timeout(d, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: nothing within {d:?}"),
    }
}

async fn next_event(w: &mut Watch) -> Event {
    within("watch event", STEP, w.next())
        .await
        .expect("watch ended")
        .unwrap_or_else(|e| panic!("watch failed: {e}"))
}

fn ev(kind: EventKind, key: &str, value: &[u8], revision: u64) -> Event {
    Event {
        kind,
        key: key.to_string(),
        value: value.to_vec(),
        revision,
    }
}

async fn put_get_revision(h: Handles) {
    let s = h.a.as_ref();
    let r0 = s.revision().await.unwrap();
    assert_eq!(s.get("k").await.unwrap(), None);
    let r1 = s.put("k", b"one".to_vec()).await.unwrap();
    assert!(r1 > r0, "a write moves the revision: {r0} -> {r1}");
    assert_eq!(s.get("k").await.unwrap(), Some((b"one".to_vec(), r1)));
    // Another connection reads what this one wrote.
    assert_eq!(h.b.get("k").await.unwrap(), Some((b"one".to_vec(), r1)));
    let r2 = s.put("k", b"two".to_vec()).await.unwrap();
    assert!(r2 > r1);
    assert_eq!(s.get("k").await.unwrap(), Some((b"two".to_vec(), r2)));
    let r3 = h.b.put("other-key", Vec::new()).await.unwrap();
    assert!(r3 > r2, "revisions order writes across handles");
    assert!(s.revision().await.unwrap() >= r3);
    // The key's revision is that of its own last write.
    assert_eq!(s.get("k").await.unwrap().unwrap().1, r2);
    assert_eq!(
        s.get("other-key").await.unwrap(),
        Some((Vec::new(), r3)),
        "empty values are values"
    );
}

async fn put_if_compare_and_swap(h: Handles) {
    let s = h.a.as_ref();
    let r1 = s
        .put_if("cas", b"v1".to_vec(), None)
        .await
        .unwrap()
        .expect("create on a missing key");
    assert_eq!(
        h.b.put_if("cas", b"lost".to_vec(), None).await.unwrap(),
        None,
        "create on an existing key fails"
    );
    assert_eq!(s.get("cas").await.unwrap(), Some((b"v1".to_vec(), r1)));
    let r2 =
        h.b.put_if("cas", b"v2".to_vec(), Some(r1))
            .await
            .unwrap()
            .expect("swap at the current revision");
    assert!(r2 > r1);
    assert_eq!(
        s.put_if("cas", b"stale".to_vec(), Some(r1)).await.unwrap(),
        None,
        "swap at a stale revision fails"
    );
    assert_eq!(s.put_if("cas", b"x".to_vec(), Some(0)).await.unwrap(), None);
    assert_eq!(s.get("cas").await.unwrap(), Some((b"v2".to_vec(), r2)));
    assert_eq!(
        s.put_if("missing", b"x".to_vec(), Some(r2)).await.unwrap(),
        None,
        "swap on a missing key fails"
    );
    assert_eq!(s.get("missing").await.unwrap(), None);
    s.delete("cas").await.unwrap().expect("deleted");
    assert_eq!(
        s.put_if("cas", b"v3".to_vec(), Some(r2)).await.unwrap(),
        None
    );
    let r3 = s
        .put_if("cas", b"v3".to_vec(), None)
        .await
        .unwrap()
        .expect("create again after delete");
    assert!(r3 > r2);
}

async fn list_sees_only_its_prefix(h: Handles) {
    let s = h.a.as_ref();
    let ra1 = s.put("a/1", b"1".to_vec()).await.unwrap();
    let ra2 = s.put("a/2", b"2".to_vec()).await.unwrap();
    s.put("ab", b"3".to_vec()).await.unwrap();
    s.put("b/1", b"4".to_vec()).await.unwrap();
    // Same relative keys in another namespace on the same backend.
    h.other.put("a/1", b"other".to_vec()).await.unwrap();
    h.other.put("a/3", b"other".to_vec()).await.unwrap();

    let l = s.list("a/").await.unwrap();
    let got: Vec<(&str, &[u8], u64)> = l
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_slice(), e.revision))
        .collect();
    assert_eq!(got, vec![("a/1", &b"1"[..], ra1), ("a/2", &b"2"[..], ra2)]);
    let all: Vec<String> = s
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(
        all,
        vec!["a/1", "a/2", "ab", "b/1"],
        "sorted, own namespace only"
    );
    let theirs: Vec<String> = h
        .other
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(theirs, vec!["a/1", "a/3"]);
    assert!(s.list("zzz/").await.unwrap().is_empty());
}

async fn delete_removes(h: Handles) {
    let s = h.a.as_ref();
    let r1 = s.put("gone", b"x".to_vec()).await.unwrap();
    s.put("kept", b"y".to_vec()).await.unwrap();
    h.other.put("gone", b"z".to_vec()).await.unwrap();
    let rd = s.delete("gone").await.unwrap().expect("existing key");
    assert!(rd > r1, "a delete is a write");
    assert_eq!(s.get("gone").await.unwrap(), None);
    assert_eq!(h.b.get("gone").await.unwrap(), None);
    assert_eq!(s.delete("gone").await.unwrap(), None, "already gone");
    assert_eq!(s.delete("never").await.unwrap(), None);
    assert!(s.get("kept").await.unwrap().is_some());
    assert_eq!(
        h.other.get("gone").await.unwrap().map(|v| v.0),
        Some(b"z".to_vec()),
        "other namespaces untouched"
    );
}

async fn watch_delivers_in_order(h: Handles) {
    let s = h.a.as_ref();
    let r0 = s.put("w/0", b"before".to_vec()).await.unwrap();
    let mut w = s.watch("w/").await.unwrap();
    assert!(w.after() >= r0, "starts after the current revision");
    let r1 = s.put("w/1", b"a".to_vec()).await.unwrap();
    h.b.put("x/1", b"elsewhere".to_vec()).await.unwrap();
    h.other
        .put("w/1", b"other namespace".to_vec())
        .await
        .unwrap();
    let r2 = h.b.put("w/2", b"b".to_vec()).await.unwrap();
    let r3 = s.delete("w/1").await.unwrap().unwrap();
    let r4 = s.put_if("w/3", b"c".to_vec(), None).await.unwrap().unwrap();
    assert_eq!(s.put_if("w/3", b"no".to_vec(), None).await.unwrap(), None);
    let r5 = s.delete("w/0").await.unwrap().unwrap();
    let want = vec![
        ev(EventKind::Put, "w/1", b"a", r1),
        ev(EventKind::Put, "w/2", b"b", r2),
        ev(EventKind::Delete, "w/1", b"", r3),
        ev(EventKind::Put, "w/3", b"c", r4),
        ev(EventKind::Delete, "w/0", b"", r5),
    ];
    let mut got = Vec::new();
    for _ in 0..want.len() {
        got.push(next_event(&mut w).await);
    }
    assert_eq!(
        got, want,
        "every write under the prefix, in order, nothing else"
    );
    assert!(got.windows(2).all(|p| p[0].revision < p[1].revision));
    assert!(got.iter().all(|e| e.revision > w.after()));
    // Nothing else is queued: the next event is the next write.
    let r6 = s.put("w/4", b"d".to_vec()).await.unwrap();
    assert_eq!(
        next_event(&mut w).await,
        ev(EventKind::Put, "w/4", b"d", r6)
    );
}

async fn persist_adapter_round_trip(h: Handles) {
    let p = StorePersist::new(h.a.clone());
    p.save("subnets/01", b"one".to_vec()).await.unwrap();
    p.save("subnets/02", b"two".to_vec()).await.unwrap();
    p.save("routes", b"r".to_vec()).await.unwrap();
    StorePersist::new(h.other.clone())
        .save("subnets/03", b"theirs".to_vec())
        .await
        .unwrap();
    let loaded = StorePersist::new(h.b.clone())
        .load("subnets/")
        .await
        .unwrap();
    assert_eq!(
        loaded,
        vec![
            ("subnets/01".to_string(), b"one".to_vec()),
            ("subnets/02".to_string(), b"two".to_vec())
        ]
    );
}

async fn one_leader_and_resign_hands_over(h: Handles) {
    assert_eq!(h.a.leader("ctl").await.unwrap(), None);
    let ga = within(
        "uncontested campaign",
        STEP,
        h.a.campaign("ctl", "ctl-a", TTL),
    )
    .await
    .unwrap();
    assert!(ga.is_leader());
    assert_eq!(h.a.leader("ctl").await.unwrap().as_deref(), Some("ctl-a"));
    assert_eq!(h.b.leader("ctl").await.unwrap().as_deref(), Some("ctl-a"));
    assert_eq!(h.other.leader("ctl").await.unwrap(), None, "per namespace");

    let b = h.b.clone();
    let mut follower = tokio::spawn(async move { b.campaign("ctl", "ctl-b", TTL).await });
    assert!(
        timeout(Duration::from_millis(500), &mut follower)
            .await
            .is_err(),
        "a second leader while the first holds"
    );
    assert!(ga.is_leader());

    let mut lost = ga.subscribe();
    let t = Instant::now();
    ga.resign().await.unwrap();
    assert!(
        !*lost.borrow_and_update(),
        "a resigned guard stops leading at once"
    );
    let gb = within("takeover after resign", STEP, follower)
        .await
        .unwrap()
        .unwrap();
    let handover = t.elapsed();
    assert!(
        handover < Duration::from_secs(1),
        "resign hands over at once, not after the ttl: {handover:?}"
    );
    assert!(gb.is_leader());
    assert!(gb.revision() > 0);
    assert_eq!(h.a.leader("ctl").await.unwrap().as_deref(), Some("ctl-b"));

    // Removing the leader key (an operator's doing) ends the term.
    h.a.delete("election/ctl")
        .await
        .unwrap()
        .expect("leader key");
    within("loss noticed", STEP, gb.lost()).await;
    assert!(!gb.is_leader());
}

async fn contention_has_exactly_one_leader(h: Handles) {
    let stores = [h.a.clone(), h.b.clone(), h.a.clone(), h.b.clone()];
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for (i, s) in stores.into_iter().enumerate() {
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let g = s.campaign("ctl", &format!("c{i}"), TTL).await.unwrap();
            let _ = tx.send(g);
        }));
    }
    let first = within("a first leader", STEP, rx.recv()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rx.try_recv().is_err(), "exactly one leader at a time");
    assert_eq!(
        h.a.leader("ctl").await.unwrap().as_deref(),
        Some(first.candidate())
    );
    let first_rev = first.revision();
    first.resign().await.unwrap();
    let second = within("the next leader", STEP, rx.recv()).await.unwrap();
    assert!(second.revision() > first_rev, "terms are ordered");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rx.try_recv().is_err(), "still exactly one");
    second.resign().await.unwrap();
    for t in tasks {
        t.abort();
    }
}

/// A leader paused past its lease (it never noticed the loss) wakes up and
/// saves: the write is refused, the successor's state stays.
async fn a_leader_whose_term_ended_writes_nothing(h: Handles) {
    let ga = within("campaign", STEP, h.a.campaign("ctl", "ctl-a", TTL))
        .await
        .unwrap();
    let old = StorePersist::new(h.a.clone());
    old.fence("ctl", ga.revision());
    old.save("routes", b"a1".to_vec())
        .await
        .expect("leader writes");
    assert_eq!(stored(&h.b, "routes").await, b"a1");
    // A fence names a term by its start; another term's revision fails
    // even while a leader holds the key.
    let r =
        h.a.put_fenced("routes", b"x".to_vec(), "ctl", ga.revision() + 1000)
            .await
            .unwrap();
    assert_eq!(r, None, "a term that never was");
    // The pause: renewals stop, the lease runs out, ctl-b takes over.
    let b = h.b.clone();
    let follower = tokio::spawn(async move { b.campaign("ctl", "ctl-b", TTL).await });
    drop(ga);
    let gb = within("takeover", Duration::from_secs(10), follower)
        .await
        .unwrap()
        .unwrap();
    let new = StorePersist::new(h.b.clone());
    new.fence("ctl", gb.revision());
    new.save("routes", b"b1".to_vec())
        .await
        .expect("new leader writes");
    let e = old
        .save("routes", b"a2".to_vec())
        .await
        .expect_err("the old term is over");
    assert!(e.to_string().contains("term"), "{e}");
    assert_eq!(stored(&h.a, "routes").await, b"b1");
}

/// A leader that stops renewing without resigning (its process died) is
/// replaced once its ttl runs out, not before.
async fn abandoned_leadership_expires_after_ttl(h: Handles) {
    let ga = within("campaign", STEP, h.a.campaign("ctl", "ctl-a", TTL))
        .await
        .unwrap();
    let b = h.b.clone();
    let mut follower = tokio::spawn(async move { b.campaign("ctl", "ctl-b", TTL).await });
    assert!(
        timeout(Duration::from_millis(300), &mut follower)
            .await
            .is_err()
    );
    let t = Instant::now();
    drop(ga);
    drop(h.a);
    let gb = within("takeover", Duration::from_secs(10), follower)
        .await
        .unwrap()
        .unwrap();
    let took = t.elapsed();
    eprintln!("failover after an abandoned {TTL:?} lease: {took:?}");
    assert!(gb.is_leader());
    assert!(
        took < TTL + Duration::from_secs(1),
        "takeover within ttl + 1 s: {took:?}"
    );
    assert!(
        took > Duration::from_millis(500),
        "the key outlives the process by its lease: {took:?}"
    );
    assert_eq!(h.b.leader("ctl").await.unwrap().as_deref(), Some("ctl-b"));
}

async fn followers_observe_the_leader(h: Handles) {
    let mut seen = observe_leader(h.b.clone(), "ctl", Duration::from_millis(100))
        .await
        .unwrap();
    assert_eq!(*seen.borrow_and_update(), None);
    let ga = h.a.campaign("ctl", "ctl-a", TTL).await.unwrap();
    within(
        "leader seen",
        STEP,
        seen.wait_for(|l| l.as_deref() == Some("ctl-a")),
    )
    .await
    .unwrap();
    ga.resign().await.unwrap();
    within("no leader seen", STEP, seen.wait_for(|l| l.is_none()))
        .await
        .unwrap();
}

#[test]
fn names_are_checked() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        assert!(matches!(
            MemoryStore::new("no-slash"),
            Err(StoreError::Config(_))
        ));
        let s = MemoryStore::new("/t/").unwrap();
        for bad in ["", "a/b"] {
            let e = s.leader(bad).await.unwrap_err();
            assert!(matches!(e, StoreError::Election { .. }), "{e}");
        }
    });
}

#[tokio::test]
async fn unreachable_etcd_is_named_in_the_error() {
    // A port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ep = format!("http://127.0.0.1:{port}");
    let t = Instant::now();
    let e = match EtcdStore::connect(std::slice::from_ref(&ep), "/t/").await {
        Ok(_) => panic!("connected to nothing"),
        Err(e) => e,
    };
    assert!(t.elapsed() < Duration::from_secs(10), "fails fast");
    let msg = e.to_string();
    assert!(
        matches!(e, StoreError::Unreachable { .. })
            && msg.contains(&format!("etcd at {ep} unreachable")),
        "{msg}"
    );
}

/// The leader's side of a partition: when etcd goes away, the leader stops
/// leading within its ttl, before anyone else could have taken over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_leader_steps_down_when_etcd_is_gone() {
    let mut server = EtcdServer::start();
    let h = etcd_handles(&server, &unique_namespace("stepdown")).await;
    let g = h.a.campaign("ctl", "ctl-a", TTL).await.unwrap();
    // One renewal round trip first, so the deadline is a renewed one.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(g.is_leader());
    let t = Instant::now();
    server.kill();
    within("step down", TTL + STEP, g.lost()).await;
    let took = t.elapsed();
    assert!(
        took <= TTL + Duration::from_millis(200),
        "stepped down within the ttl: {took:?}"
    );
    let e = h.a.get("x").await.unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("etcd at {} unreachable", server.endpoint())),
        "{e}"
    );
}

/// Figures for the record: `cargo test -p store --test store --
/// --ignored --nocapture etcd_figures`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement, run by hand"]
async fn etcd_figures() {
    let server = EtcdServer::start();
    let h = etcd_handles(&server, &unique_namespace("figures")).await;
    let mut rtt = Vec::new();
    for i in 0..200u32 {
        let t = Instant::now();
        let r = h.a.put("lat", i.to_le_bytes().to_vec()).await.unwrap();
        let (_, got) = h.a.get("lat").await.unwrap().unwrap();
        rtt.push(t.elapsed());
        assert_eq!(got, r);
    }
    rtt.sort();
    eprintln!(
        "put+get round trip over 200: median {:?}, p90 {:?}, max {:?}",
        rtt[100], rtt[180], rtt[199]
    );
    for round in 0..3 {
        let election = format!("fail{round}");
        let ga = h.a.campaign(&election, "a", TTL).await.unwrap();
        let b = h.b.clone();
        let e2 = election.clone();
        let f = tokio::spawn(async move { b.campaign(&e2, "b", TTL).await });
        tokio::time::sleep(Duration::from_millis(700)).await;
        let t = Instant::now();
        drop(ga);
        let gb = f.await.unwrap().unwrap();
        eprintln!(
            "failover (ttl {TTL:?}, leader abandoned): {:?}",
            t.elapsed()
        );
        let t = Instant::now();
        let a = h.a.clone();
        let e3 = election.clone();
        let f = tokio::spawn(async move { a.campaign(&e3, "a", TTL).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let t2 = Instant::now();
        gb.resign().await.unwrap();
        let ga = f.await.unwrap().unwrap();
        eprintln!(
            "handover on resign: {:?} (campaign wait {:?})",
            t2.elapsed(),
            t.elapsed()
        );
        ga.resign().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_picks_the_store() {
    let mem = store::open(&StoreConfig::default()).await.unwrap();
    assert!(mem.describe().starts_with("memory"), "{}", mem.describe());
    assert_eq!(mem.namespace(), "/ibfabric/default/");

    let server = EtcdServer::start();
    let cfg = StoreConfig {
        kind: StoreKind::Etcd {
            endpoints: server.endpoints(),
            tls: None,
        },
        prefix: unique_namespace("config"),
        ..StoreConfig::default()
    };
    let s = store::open(&cfg).await.unwrap();
    assert!(s.describe().contains(server.endpoint()), "{}", s.describe());
    let r = s.put("k", b"v".to_vec()).await.unwrap();
    // Visible through a second, independent connection: it is etcd.
    let direct = EtcdStore::connect(&server.endpoints(), &cfg.prefix)
        .await
        .unwrap();
    assert_eq!(direct.get("k").await.unwrap(), Some((b"v".to_vec(), r)));

    // An unknown kind cannot reach `open`: the config refuses it when read.
    let bad = StoreFile::parse("[store]\nkind = \"zookeeper\"\n", "c.toml")
        .expect_err("unknown store kind");
    assert!(bad.to_string().contains("zookeeper"), "{bad}");
}

#[tokio::test]
async fn a_memory_store_with_a_state_file_keeps_keys_and_revision_across_restarts() {
    let d = tempfile::tempdir().expect("tmp");
    let file = d.path().join("state");
    let ns = "/t/";
    let rev = {
        let s = MemoryStore::open(ns, Some(&file)).expect("opens");
        s.put("a", b"1".to_vec()).await.expect("put");
        s.put("b", b"2".to_vec()).await.expect("put");
        s.delete("a").await.expect("delete");
        // A leader key dies with the process, as its lease would.
        let g = s
            .campaign("ctl", "c1", Duration::from_secs(5))
            .await
            .expect("leads");
        std::mem::forget(g);
        s.revision().await.expect("revision")
    };
    let s = MemoryStore::open(ns, Some(&file)).expect("reopens");
    assert_eq!(s.get("a").await.expect("get"), None);
    assert_eq!(
        s.get("b").await.expect("get").map(|(v, _)| v),
        Some(b"2".to_vec())
    );
    assert!(s.revision().await.expect("revision") >= rev - 1);
    assert_eq!(s.leader("ctl").await.expect("leader"), None);
    let next = s.put("c", b"3".to_vec()).await.expect("put");
    assert!(next > rev - 1, "revisions never go back");
    // A damaged file is refused with the file and line.
    std::fs::write(&file, "ibfabric-memory-store 1\nrevision x\n").expect("write");
    let e = MemoryStore::open(ns, Some(&file)).err().expect("refused");
    assert!(e.to_string().contains(":2:"), "{e}");
}

/// A write the state file refuses (a full disk; here its directory
/// replaced by a file, which fails for root too) changes nothing in
/// memory: no watcher hears of it, and a controller whose election key
/// could not be written campaigns again and wins once the disk takes
/// writes, instead of waiting for its own key to go.
#[tokio::test]
async fn a_write_the_state_file_refuses_is_undone_and_the_campaign_wins_later() {
    let d = tempfile::tempdir().expect("tmp");
    let dir = d.path().join("state");
    std::fs::create_dir(&dir).expect("dir");
    let file = dir.join("store");
    let s = MemoryStore::open("/t/", Some(&file)).expect("opens");
    let before = s.put("a", b"1".to_vec()).await.expect("put");
    let mut w = s.watch("").await.expect("watch");
    std::fs::remove_dir_all(&dir).expect("rm");
    std::fs::write(&dir, "not a directory").expect("file");
    assert!(s.put("b", b"2".to_vec()).await.is_err());
    assert!(s.delete("a").await.is_err());
    let e = within("a failed campaign", Duration::from_secs(5), async {
        s.campaign("ctl", "c1", Duration::from_secs(5)).await
    })
    .await;
    assert!(e.is_err(), "the election key was not written");
    assert_eq!(s.get("b").await.expect("get"), None);
    assert_eq!(
        s.get("a").await.expect("get").map(|(v, _)| v),
        Some(b"1".to_vec())
    );
    assert_eq!(s.revision().await.expect("revision"), before);
    assert_eq!(s.leader("ctl").await.expect("leader"), None);
    // The disk takes writes again.
    std::fs::remove_file(&dir).expect("rm");
    std::fs::create_dir(&dir).expect("dir");
    let g = within("the campaign", Duration::from_secs(5), async {
        s.campaign("ctl", "c1", Duration::from_secs(5)).await
    })
    .await
    .expect("leads");
    assert_eq!(
        s.leader("ctl").await.expect("leader").as_deref(),
        Some("c1")
    );
    // The watcher heard the election key, never the refused writes.
    let ev = next_event(&mut w).await;
    assert_eq!(ev.kind, EventKind::Put);
    assert!(ev.key.contains("ctl"), "{}", ev.key);
    drop(g);
}

/// The state file is a snapshot and a journal: a small write after a large
/// state appends its own bytes (a heartbeat of one subnet does not rewrite
/// the others' megabytes), the journal is folded into a new snapshot once
/// it outgrows the old one, and everything reads back after a restart,
/// also when the last write was cut short.
#[tokio::test]
async fn the_state_file_appends_small_writes_and_reads_back_whole() {
    let d = tempfile::tempdir().expect("tmp");
    let file = d.path().join("state");
    let big = vec![7u8; 2 << 20];
    {
        let s = MemoryStore::open("/t/", Some(&file)).expect("opens");
        s.put("big", big.clone()).await.expect("put");
        let after_big = std::fs::metadata(&file).expect("file").len();
        for i in 0..100u32 {
            s.put("small", i.to_be_bytes().to_vec()).await.expect("put");
        }
        let grown = std::fs::metadata(&file).expect("file").len() - after_big;
        assert!(grown < 10_000, "100 small writes added {grown} bytes");
        // Enough large rewrites fold the journal into a new snapshot.
        for i in 0..6u8 {
            s.put("big", vec![i; 2 << 20]).await.expect("put");
        }
        let len = std::fs::metadata(&file).expect("file").len();
        assert!(len < 3 * (4 << 20) as u64, "{len} bytes after compaction");
    }
    // A write cut short at the end of the file.
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .expect("open")
        .write_all(b"T 999999 p:6869:")
        .expect("append");
    let s = MemoryStore::open("/t/", Some(&file)).expect("reopens");
    assert_eq!(
        s.get("small").await.expect("get").map(|(v, _)| v),
        Some(99u32.to_be_bytes().to_vec())
    );
    assert_eq!(
        s.get("big").await.expect("get").map(|(v, _)| v),
        Some(vec![5u8; 2 << 20])
    );
    assert_eq!(
        s.get("hi").await.expect("get"),
        None,
        "the torn write is dropped"
    );
    s.put("after", b"x".to_vec())
        .await
        .expect("writes after a torn tail");
    drop(s);
    let s = MemoryStore::open("/t/", Some(&file)).expect("reopens");
    assert_eq!(
        s.get("after").await.expect("get").map(|(v, _)| v),
        Some(b"x".to_vec())
    );
}

/// The health the controller's status shows: a failed write stays a
/// failure while reads succeed (the leader reads every few hundred
/// milliseconds), until a write lands again.
#[tokio::test]
async fn a_failed_write_stays_in_the_health_until_a_write_lands() {
    let d = tempfile::tempdir().expect("tmp");
    let dir = d.path().join("state");
    std::fs::create_dir(&dir).expect("dir");
    let s = Arc::new(MemoryStore::open("/t/", Some(&dir.join("store"))).expect("opens"));
    let p = StorePersist::new(s);
    p.save("a", b"1".to_vec()).await.expect("save");
    assert!(p.health().ok);
    std::fs::remove_dir_all(&dir).expect("rm");
    std::fs::write(&dir, "not a directory").expect("file");
    assert!(p.save("b", b"2".to_vec()).await.is_err());
    p.notes("complaints/").await.expect("a read succeeds");
    p.load("a").await.expect("a read succeeds");
    let h = p.health();
    assert!(!h.ok, "a read cleared the write's failure");
    assert_eq!(h.failures, 1);
    assert!(h.last_error.starts_with("write:"), "{}", h.last_error);
    std::fs::remove_file(&dir).expect("rm");
    std::fs::create_dir(&dir).expect("dir");
    p.save("b", b"2".to_vec()).await.expect("save");
    assert!(p.health().ok);
}

/// etcd serving clients over TLS with client certificates required: the
/// store connects with the controller's certificate, and a client without
/// one, or with one from another CA, gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_over_tls_takes_only_clients_with_a_certificate_of_its_ca() {
    let d = tempfile::tempdir().expect("tmp");
    let ca = ibtls::generate_ca("etcd CA").expect("ca");
    let write = |dir: &std::path::Path, ca: &ibtls::CaBundle, id: &ibtls::Identity, name: &str| {
        let c = ibtls::issue(
            ca,
            id,
            &["localhost".to_string()],
            &[std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)],
        )
        .expect("issue");
        let s = ibtls::TlsSettings {
            ca: dir.join(format!("{name}-ca.pem")),
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}-key.pem")),
        };
        std::fs::write(&s.ca, &ca.cert_pem).expect("ca");
        std::fs::write(&s.cert, c.cert_pem).expect("cert");
        std::fs::write(&s.key, c.key_pem).expect("key");
        s
    };
    let server_tls = write(
        d.path(),
        &ca,
        &ibtls::Identity::Worker {
            name: "etcd".into(),
        },
        "etcd",
    );
    let ctl_tls = write(d.path(), &ca, &ibtls::Identity::Controller, "controller");
    let rogue_ca = ibtls::generate_ca("rogue").expect("ca");
    let mut rogue_tls = write(d.path(), &rogue_ca, &ibtls::Identity::Controller, "rogue");
    // The rogue trusts the real CA (it can verify the server), but its own
    // certificate comes from another one.
    rogue_tls.ca = ctl_tls.ca.clone();
    let server = EtcdServer::start_tls(&server_tls);
    let ns = unique_namespace("tls");
    let s = EtcdStore::connect_with(&server.endpoints(), &ns, Some(&ctl_tls))
        .await
        .expect("connects with the controller's certificate");
    let r = s.put("k", b"v".to_vec()).await.expect("put");
    assert_eq!(s.get("k").await.expect("get"), Some((b"v".to_vec(), r)));
    // Through the controller's config too.
    let cfg = StoreConfig {
        kind: StoreKind::Etcd {
            endpoints: server.endpoints(),
            tls: Some(ctl_tls.clone()),
        },
        prefix: ns.clone(),
        ..StoreConfig::default()
    };
    let via = store::open(&cfg).await.expect("opens");
    assert_eq!(via.get("k").await.expect("get"), Some((b"v".to_vec(), r)));
    // No certificate, or another CA's: refused.
    assert!(
        EtcdStore::connect_with(&server.endpoints(), &ns, None)
            .await
            .is_err(),
        "plaintext client"
    );
    let rogue = EtcdStore::connect_with(&server.endpoints(), &ns, Some(&rogue_tls)).await;
    let refused = match rogue {
        Err(_) => true,
        Ok(s) => s.get("k").await.is_err(),
    };
    assert!(refused, "a certificate of another CA");
}
