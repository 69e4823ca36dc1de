//! The state store: a small key-value interface with etcd's semantics,
//! leader election on top of it, the `[store]` config every role shares,
//! leases, and the workers registered in it.
//!
//! Two implementations share one behaviour: [`MemoryStore`], the embedded
//! default for a single controller process, and [`EtcdStore`] for
//! controllers that fail over to each other. Callers hold an
//! `Arc<dyn Store>` chosen from the config ([`open`]).
//!
//! Every key is a string relative to the store's namespace (e.g.
//! `/ibfabric/prod/`), so several clusters, or several tests, share one
//! etcd without seeing each other.
//!
//! Revisions come from one counter per backend (etcd's cluster revision),
//! which every write increases. A key's revision is the revision of its
//! last write, so it doubles as a version for compare-and-swap and for
//! tables: a table stored at revision r is newer than one stored at r' < r.
//!
//! To follow a prefix without gaps, open the watch first, then list: the
//! watch delivers every write after [`Watch::after`], and an event whose
//! revision is not above the listed revision of its key is already known.

pub mod config;
mod etcd;
mod memory;
mod persist;
pub mod registry;
pub mod statefile;
#[cfg(feature = "testing")]
pub mod testing;

pub use etcd::EtcdStore;
pub use memory::MemoryStore;
pub use persist::{PART_BYTES, PARTS_PREFIX, StorePersist};

use async_trait::async_trait;
pub use config::{StoreConfig, StoreKind};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The most writes one transaction carries: etcd refuses more than its
/// `--max-txn-ops` (128 by default).
pub const MAX_TXN_OPS: usize = 64;
/// The most key and value bytes one transaction carries: etcd refuses a
/// request over its `--max-request-bytes` (1.5 MiB by default).
pub const MAX_TXN_BYTES: usize = 1 << 20;

/// A point in the store's history; 0 is "before any write".
pub type Revision = u64;

/// Key prefix under which elections keep their leader key:
/// `<namespace>election/<name>` holds the leader's candidate id.
pub const ELECTION_PREFIX: &str = "election/";

/// One key with its value and the revision of its last write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: Vec<u8>,
    pub revision: Revision,
}

/// One write of a [`Store::commit_fenced`] transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put {
        key: String,
        value: Vec<u8>,
    },
    /// Removing a key that does not exist is not an error.
    Delete {
        key: String,
    },
}

impl Op {
    /// Bytes this write puts on the wire (key and value), for keeping a
    /// transaction under the backend's request limit.
    pub fn size(&self) -> usize {
        match self {
            Op::Put { key, value } => key.len() + value.len(),
            Op::Delete { key } => key.len(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Put,
    Delete,
}

/// One write seen by a [`Watch`]. A delete carries an empty value and the
/// revision of the deletion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub key: String,
    pub value: Vec<u8>,
    pub revision: Revision,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("etcd at {endpoints} unreachable: {detail}")]
    Unreachable { endpoints: String, detail: String },
    #[error("etcd at {endpoints}: {op} failed: {source}")]
    Etcd {
        endpoints: String,
        op: &'static str,
        #[source]
        source: etcd_client::Error,
    },
    #[error("etcd at {endpoints}: {op}: unexpected answer: {detail}")]
    Protocol {
        endpoints: String,
        op: &'static str,
        detail: String,
    },
    #[error("watch on '{prefix}' lost events ({detail}): list again and watch anew")]
    WatchLost { prefix: String, detail: String },
    #[error("{what} under namespace '{namespace}' is not UTF-8")]
    NotUtf8 { namespace: String, what: String },
    #[error("election '{election}': {detail}")]
    Election { election: String, detail: String },
    #[error("store configuration: {0}")]
    Config(String),
    #[error("not written: the leadership term that began at revision {term} is over")]
    TermOver { term: Revision },
    #[error("stored value '{key}' is corrupt: {detail}")]
    Corrupt { key: String, detail: String },
}

/// The state store. Object safe: the controller holds an `Arc<dyn Store>`.
///
/// Writes are linearizable on both implementations: once a write returned
/// its revision, every later read (from any handle on the same backend)
/// sees it.
#[async_trait]
pub trait Store: Send + Sync {
    /// The namespace every key is relative to, e.g. `/ibfabric/prod/`.
    fn namespace(&self) -> &str;

    /// Where the data lives, for logs and errors ("memory", "etcd at ...").
    fn describe(&self) -> String;

    /// The value of `key` and the revision of its last write, or None when
    /// the key does not exist.
    async fn get(&self, key: &str) -> Result<Option<(Vec<u8>, Revision)>, StoreError>;

    /// Writes `key` unconditionally; returns the revision of this write,
    /// which is above every revision returned before it.
    async fn put(&self, key: &str, value: Vec<u8>) -> Result<Revision, StoreError>;

    /// Compare-and-swap. With `expected = None` the key must not exist;
    /// with `Some(r)` it must exist and its last write must be at revision
    /// `r`. Returns the new revision, or `Ok(None)` when the precondition
    /// failed (nothing was written).
    async fn put_if(
        &self,
        key: &str,
        value: Vec<u8>,
        expected: Option<Revision>,
    ) -> Result<Option<Revision>, StoreError>;

    /// Applies `ops` in one atomic step, only while the leadership term
    /// of `election` that began at revision `term`
    /// ([`LeaderGuard::revision`]) still holds the leader key: a leader
    /// paused past its lease (a stopped VM, a long GC) cannot overwrite
    /// its successor's state when it wakes. Every write of the step gets
    /// the same new revision, which is returned; `Ok(None)` when the term
    /// is over (nothing was written). Callers keep a step within the
    /// backend's limits ([`MAX_TXN_OPS`], [`MAX_TXN_BYTES`]).
    async fn commit_fenced(
        &self,
        ops: Vec<Op>,
        election: &str,
        term: Revision,
    ) -> Result<Option<Revision>, StoreError>;

    /// [`Store::commit_fenced`] of one put.
    async fn put_fenced(
        &self,
        key: &str,
        value: Vec<u8>,
        election: &str,
        term: Revision,
    ) -> Result<Option<Revision>, StoreError> {
        self.commit_fenced(
            vec![Op::Put {
                key: key.to_string(),
                value,
            }],
            election,
            term,
        )
        .await
    }

    /// Removes `key`; returns the revision of the deletion, or None when
    /// the key did not exist (which writes nothing).
    async fn delete(&self, key: &str) -> Result<Option<Revision>, StoreError>;

    /// Every key starting with `prefix` (relative to the namespace), sorted
    /// by key, with the revision of its last write.
    async fn list(&self, prefix: &str) -> Result<Vec<Entry>, StoreError>;

    /// The keys under `prefix` with their revisions, without the values:
    /// a listing of large values would not fit one response.
    async fn list_keys(&self, prefix: &str) -> Result<Vec<(String, Revision)>, StoreError>;

    /// Writes under `prefix` from now on, in revision order. The watch
    /// starts after the current revision ([`Watch::after`]): writes that
    /// returned before this call are not delivered, writes after it all
    /// are. A watch that cannot keep up ends with
    /// [`StoreError::WatchLost`]; the caller lists again and re-watches.
    async fn watch(&self, prefix: &str) -> Result<Watch, StoreError>;

    /// The current revision of the backend: at least the revision of every
    /// write that returned before this call. Monotonic.
    async fn revision(&self) -> Result<Revision, StoreError>;

    /// Runs for leadership of `election` as `candidate` and resolves once
    /// this candidate leads. The leadership lives on a lease of `ttl`,
    /// renewed in the background by the returned guard: when the process
    /// dies (or loses the backend for `ttl`), the lease expires and another
    /// candidate takes over. Dropping the future before it resolves gives
    /// up the candidacy. Election names are plain strings (no `/`).
    async fn campaign(
        &self,
        election: &str,
        candidate: &str,
        ttl: Duration,
    ) -> Result<LeaderGuard, StoreError>;

    /// The candidate id currently leading `election`, if any; for followers
    /// that need to point clients at the leader.
    async fn leader(&self, election: &str) -> Result<Option<String>, StoreError>;
}

/// Opens the store a controller's config names.
pub async fn open(cfg: &StoreConfig) -> Result<Arc<dyn Store>, StoreError> {
    match &cfg.kind {
        StoreKind::Memory { state_file } => Ok(Arc::new(MemoryStore::open(
            &cfg.prefix,
            state_file.as_deref(),
        )?)),
        StoreKind::Etcd { endpoints, tls } => Ok(Arc::new(
            EtcdStore::connect_with(endpoints, &cfg.prefix, tls.as_ref()).await?,
        )),
    }
}

/// A namespace is a key prefix that ends a path component, so that
/// `/a/` and `/ab/` never overlap.
fn check_namespace(ns: &str) -> Result<(), StoreError> {
    if ns.is_empty() || !ns.ends_with('/') {
        return Err(StoreError::Config(format!(
            "namespace '{ns}' must be non-empty and end with '/'"
        )));
    }
    Ok(())
}

fn election_key(election: &str) -> Result<String, StoreError> {
    if election.is_empty() || election.contains('/') {
        return Err(StoreError::Election {
            election: election.to_string(),
            detail: "the name must be non-empty and contain no '/'".into(),
        });
    }
    Ok(format!("{ELECTION_PREFIX}{election}"))
}

fn candidate_id(namespace: &str, election: &str, value: Vec<u8>) -> Result<String, StoreError> {
    String::from_utf8(value).map_err(|_| StoreError::NotUtf8 {
        namespace: namespace.to_string(),
        what: format!("the leader of election '{election}'"),
    })
}

/// The backend side of a [`Watch`].
#[async_trait]
pub(crate) trait EventSource: Send {
    async fn next(&mut self) -> Option<Result<Event, StoreError>>;
}

/// A stream of writes under one prefix; see [`Store::watch`].
pub struct Watch {
    prefix: String,
    after: Revision,
    source: Box<dyn EventSource>,
}

impl Watch {
    pub(crate) fn new(prefix: &str, after: Revision, source: Box<dyn EventSource>) -> Self {
        Self {
            prefix: prefix.to_string(),
            after,
            source,
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Every event delivered has a revision above this one.
    pub fn after(&self) -> Revision {
        self.after
    }

    /// The next write, in revision order; None once the watch has ended
    /// (after an error, or when the backend went away).
    pub async fn next(&mut self) -> Option<Result<Event, StoreError>> {
        self.source.next().await
    }
}

/// The backend side of a [`LeaderGuard`].
#[async_trait]
pub(crate) trait Term: Send + Sync {
    /// Gives the leadership up now, so a follower can take over at once.
    async fn resign(&mut self) -> Result<(), StoreError>;
}

/// Held by the leader of an election; see [`Store::campaign`].
///
/// Dropping the guard without [`LeaderGuard::resign`] stops renewing the
/// lease but leaves the leader key in place, which is exactly what a
/// crashed process leaves behind: followers take over once the lease
/// expires, `ttl` later.
pub struct LeaderGuard {
    election: String,
    candidate: String,
    revision: Revision,
    /// Shared with the backend's monitor, which flips it on loss; the guard
    /// flips it on resign and drop, since its holder stops leading then.
    leading: Arc<watch::Sender<bool>>,
    term: Box<dyn Term>,
}

impl LeaderGuard {
    pub(crate) fn new(
        election: &str,
        candidate: &str,
        revision: Revision,
        leading: Arc<watch::Sender<bool>>,
        term: Box<dyn Term>,
    ) -> Self {
        Self {
            election: election.to_string(),
            candidate: candidate.to_string(),
            revision,
            leading,
            term,
        }
    }

    pub fn election(&self) -> &str {
        &self.election
    }

    pub fn candidate(&self) -> &str {
        &self.candidate
    }

    /// The revision at which this candidate became leader: a fencing token
    /// that grows with every change of leadership.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// False once the leadership is lost (lease expired or revoked, leader
    /// key removed, backend unreachable for the whole ttl). It never comes
    /// back: campaign again for a new term.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// A channel that holds [`Self::is_leader`] and flips to false when the
    /// leadership is lost.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// Resolves when the leadership is lost.
    pub async fn lost(&self) {
        let mut rx = self.leading.subscribe();
        // The guard holds the sender, so the channel cannot close under us.
        let _ = rx.wait_for(|leading| !leading).await;
    }

    /// Gives the leadership up at once: this guard stops leading before the
    /// call returns, and a waiting candidate takes over without waiting
    /// for the lease to expire.
    pub async fn resign(mut self) -> Result<(), StoreError> {
        tracing::info!(election = %self.election, candidate = %self.candidate, "resigning leadership");
        self.leading.send_replace(false);
        self.term.resign().await
    }
}

impl Drop for LeaderGuard {
    fn drop(&mut self) {
        self.leading.send_replace(false);
    }
}

impl std::fmt::Debug for LeaderGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderGuard")
            .field("election", &self.election)
            .field("candidate", &self.candidate)
            .field("revision", &self.revision)
            .field("leading", &self.is_leader())
            .finish()
    }
}

/// Follows who leads `election`: the returned channel holds the leader's
/// candidate id (None while there is none) and changes with every change
/// of leadership. Followers use it to point clients at the leader. The
/// background task ends when every receiver is dropped; on a store error
/// it retries every `retry`, holding None meanwhile, since a leader it
/// cannot see is not one it can name.
pub async fn observe_leader(
    store: Arc<dyn Store>,
    election: &str,
    retry: Duration,
) -> Result<watch::Receiver<Option<String>>, StoreError> {
    let key = election_key(election)?;
    // The first sync happens here so that errors (bad name, unreachable
    // backend) reach the caller instead of a log line.
    let (mut w, current) = leader_snapshot(store.as_ref(), &key, election).await?;
    let (tx, rx) = watch::channel(current);
    let election = election.to_string();
    tokio::spawn(async move {
        loop {
            let ended = tokio::select! {
                _ = tx.closed() => return,
                ev = w.next() => leader_event(ev, &key, store.namespace(), &election, &tx),
            };
            let Some(why) = ended else { continue };
            tracing::warn!(election = %election, error = %why, "following the leader: resyncing");
            match resync_leader(store.as_ref(), &key, &election, retry, &tx).await {
                Some(nw) => w = nw,
                None => return,
            }
        }
    });
    Ok(rx)
}

/// Applies one event of the leader watch to `tx`; Some(why) when the
/// watch failed or ended and must be synced again.
fn leader_event(
    ev: Option<Result<Event, StoreError>>,
    key: &str,
    namespace: &str,
    election: &str,
    tx: &watch::Sender<Option<String>>,
) -> Option<String> {
    match ev {
        Some(Ok(ev)) if ev.key == key => {
            let v = match ev.kind {
                EventKind::Put => candidate_id(namespace, election, ev.value).ok(),
                EventKind::Delete => None,
            };
            tx.send_replace(v);
            None
        }
        Some(Ok(_)) => None,
        Some(Err(e)) => Some(e.to_string()),
        None => Some("watch ended".to_string()),
    }
}

/// Names no leader until the store answers again, every `retry`; the new
/// watch, or None when every receiver is gone.
async fn resync_leader(
    store: &dyn Store,
    key: &str,
    election: &str,
    retry: Duration,
    tx: &watch::Sender<Option<String>>,
) -> Option<Watch> {
    loop {
        tx.send_replace(None);
        tokio::select! {
            _ = tx.closed() => return None,
            _ = tokio::time::sleep(retry) => {}
        }
        match leader_snapshot(store, key, election).await {
            Ok((nw, cur)) => {
                tx.send_replace(cur);
                return Some(nw);
            }
            Err(e) => tracing::warn!(election = %election, error = %e, "following the leader"),
        }
    }
}

/// Watch first, then read: no change between the two is missed.
async fn leader_snapshot(
    store: &dyn Store,
    key: &str,
    election: &str,
) -> Result<(Watch, Option<String>), StoreError> {
    let w = store.watch(key).await?;
    let cur = match store.get(key).await? {
        Some((v, _)) => Some(candidate_id(store.namespace(), election, v)?),
        None => None,
    };
    Ok((w, cur))
}
