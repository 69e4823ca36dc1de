//! A controller on a store another release wrote refuses once, saying
//! what to do, instead of retrying a "corrupt value" forever; a store of
//! this layout (with or without the layout key) is taken over and gets
//! the key.

use controller::{ControlError, Controller, LAYOUT, LAYOUT_KEY, Limits};
use fabric::intersubnet::AlgorithmKind;
use std::sync::Arc;
use std::time::Duration;
use store::{MemoryStore, Store, StorePersist};

fn controller(store: Arc<MemoryStore>) -> Arc<Controller> {
    let (_tx, leader) = tokio::sync::watch::channel(Some("ctl".to_string()));
    // The sender may go: the receiver keeps the last value.
    Controller::new(
        "ctl".into(),
        Duration::from_secs(30),
        AlgorithmKind::Issr.algorithm(),
        Arc::new(StorePersist::new(store)),
        leader,
        Limits::default(),
    )
}

#[tokio::test]
async fn another_releases_layout_is_refused_with_what_to_do() {
    // An older release: values written without this release's wrapper.
    let old = Arc::new(MemoryStore::new("/t/old/").expect("store"));
    old.put("subnets/000000000000fec0", b"\x0a\x03old".to_vec())
        .await
        .expect("put");
    match controller(old).take_over().await {
        Err(ControlError::StoreLayout(why)) => {
            assert!(why.contains("older release"), "{why}");
            assert!(why.contains("empty namespace"), "{why}");
        }
        other => panic!("expected a layout refusal, got {other:?}"),
    }
    // A newer release.
    let newer = Arc::new(MemoryStore::new("/t/new/").expect("store"));
    StorePersist::new(newer.clone())
        .save(LAYOUT_KEY, (LAYOUT + 1).to_be_bytes().to_vec())
        .await
        .expect("save");
    match controller(newer).take_over().await {
        Err(ControlError::StoreLayout(why)) => assert!(why.contains("newer release"), "{why}"),
        other => panic!("expected a layout refusal, got {other:?}"),
    }
    // An empty store: taken over, and the key written.
    let fresh = Arc::new(MemoryStore::new("/t/fresh/").expect("store"));
    controller(fresh.clone())
        .take_over()
        .await
        .expect("takes over");
    let persist = StorePersist::new(fresh);
    let held = persist.load(LAYOUT_KEY).await.expect("load");
    assert_eq!(
        held,
        vec![(LAYOUT_KEY.to_string(), LAYOUT.to_be_bytes().to_vec())]
    );
}
