//! A leader steps down when most of its clients say they cannot reach it
//! (noted by a follower). Only clients the fabric has count: certificates
//! of the CA for subnets or routers that are not in the fabric, calling
//! `Unreachable`, must not make the leader resign.

use controller::{COMPLAINTS_KEY, Controller, Limits};
use fabric::intersubnet::AlgorithmKind;
use std::sync::Arc;
use std::time::Duration;
use store::{MemoryStore, StorePersist};

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complaints_from_clients_the_fabric_does_not_have_do_not_count() {
    let store = Arc::new(MemoryStore::new("/t/complaints/").expect("store"));
    let persist = Arc::new(StorePersist::new(store));
    let (_tx, leader) = tokio::sync::watch::channel(Some("ctl".to_string()));
    let ctl = Controller::new(
        "ctl".into(),
        Duration::from_secs(30),
        AlgorithmKind::Issr.algorithm(),
        persist.clone(),
        leader,
        Limits::default(),
    );
    ctl.take_over().await.expect("takes over");
    // Fresh and after the settling time: they would count if they came
    // from clients.
    let at = (unix_ms() + 2_500).to_be_bytes().to_vec();
    for prefix in [0xdead_u64, 0xbeef, 0xf00d] {
        let who = ibtls::Identity::Agent { prefix }.to_uri();
        persist
            .note(&format!("{COMPLAINTS_KEY}ctl/{who}"), at.clone())
            .await
            .expect("noted");
    }
    assert!(
        !ctl.check_complaints().await,
        "three agents of no subnet made the leader resign"
    );
    // A client on a plaintext control plane is named by its address and
    // cannot be checked: it counts.
    persist
        .note(&format!("{COMPLAINTS_KEY}ctl/10.0.0.7"), at.clone())
        .await
        .expect("noted");
    assert!(ctl.check_complaints().await);
}
