//! The embedded store: one process, state in memory, etcd's semantics.
//! With a state file it survives restarts: every write rewrites the file
//! (a temporary file, fsync, rename, fsync of the directory), so the
//! revision counter and the controller's term never go back.

use super::{
    Entry, Event, EventKind, EventSource, LeaderGuard, Op, Revision, Store, StoreError, Term,
    Watch, candidate_id, check_namespace, election_key,
};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// How many events a watcher may fall behind before it is told it lost
/// some (etcd's equivalent is a watcher whose start was compacted).
const WATCH_BACKLOG: usize = 4096;

/// In-memory [`Store`]. Handles made with [`MemoryStore::namespaced`] share
/// one key space and one revision counter, as clients of one etcd do.
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
    ns: String,
}

struct Inner {
    state: Mutex<State>,
    /// Sent under the state lock, so events go out in revision order.
    events: broadcast::Sender<Arc<Event>>,
    /// Where the keys and the revision are kept across restarts.
    file: Option<PathBuf>,
}

#[derive(Default)]
struct State {
    revision: Revision,
    /// Full keys (namespace included) -> (value, revision of last write).
    keys: BTreeMap<String, (Vec<u8>, Revision)>,
    /// The state file's journal, appended to by every write; None until
    /// the first write (which writes a snapshot) and after a failed one.
    journal: Option<Journal>,
}

/// The append side of the state file (`crate::statefile`).
struct Journal {
    file: std::fs::File,
    /// Bytes appended since the snapshot, and the snapshot's size: the
    /// file is rewritten whole when the journal outgrows the snapshot.
    bytes: u64,
    snapshot: u64,
}

/// The journal may grow to this before a rewrite even when the snapshot is
/// smaller: small stores are not rewritten on every other write.
const JOURNAL_MIN: u64 = 1 << 20;

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the map half
        // updated (every mutation is one insert or remove), so the data
        // is still good.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `changes` at one new revision, writes the state file, and
    /// only then tells the watchers. A write the state file refused (a
    /// full disk) is undone in memory too: a controller whose election key
    /// could not be written must not find it there afterwards and wait
    /// for itself to leave.
    fn apply(
        &self,
        st: &mut State,
        changes: Vec<(EventKind, String, Vec<u8>)>,
    ) -> Result<Revision, StoreError> {
        let before = st.revision;
        let rev = before + 1;
        let mut undo = Vec::with_capacity(changes.len());
        for (kind, key, value) in &changes {
            let old = match kind {
                EventKind::Put => st.keys.insert(key.clone(), (value.clone(), rev)),
                EventKind::Delete => st.keys.remove(key),
            };
            undo.push((key.clone(), old));
        }
        st.revision = rev;
        if let Err(e) = self.persist(st, rev, &changes) {
            for (key, old) in undo.into_iter().rev() {
                match old {
                    Some(v) => st.keys.insert(key, v),
                    None => st.keys.remove(&key),
                };
            }
            st.revision = before;
            return Err(e);
        }
        for (kind, key, value) in changes {
            // No receivers is fine: nobody watches.
            let _ = self.events.send(Arc::new(Event {
                kind,
                key,
                value,
                revision: rev,
            }));
        }
        Ok(rev)
    }

    /// Records a write at `rev` in the state file (when there is one):
    /// appended to the journal and synced, or, when the journal has
    /// outgrown the snapshot (or there is none yet), the whole state
    /// written anew. Election keys are left out: a leader's key dies with
    /// its process, as its etcd lease would.
    fn persist(
        &self,
        st: &mut State,
        rev: Revision,
        changes: &[(EventKind, String, Vec<u8>)],
    ) -> Result<(), StoreError> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        let fail =
            |e: std::io::Error| StoreError::Config(format!("state file {}: {e}", path.display()));
        if let Some(j) = st
            .journal
            .as_mut()
            .filter(|j| j.bytes <= j.snapshot.max(JOURNAL_MIN))
        {
            let kept: Vec<crate::statefile::Change<'_>> = changes
                .iter()
                .filter(|(_, k, _)| !k.contains(super::ELECTION_PREFIX))
                .map(|(kind, k, v)| {
                    (
                        k.as_str(),
                        (*kind == EventKind::Put).then_some(v.as_slice()),
                    )
                })
                .collect();
            let line = crate::statefile::journal_line(rev, &kept);
            use std::io::Write;
            let r = same_file(path, &j.file)
                .and_then(|()| j.file.write_all(line.as_bytes()))
                .and_then(|()| j.file.sync_data());
            return match r {
                Ok(()) => {
                    j.bytes += line.len() as u64;
                    Ok(())
                }
                Err(e) => {
                    // The line may be in the file in part: the next write
                    // replaces the file whole.
                    st.journal = None;
                    Err(fail(e))
                }
            };
        }
        let text = crate::statefile::snapshot(
            st.revision,
            st.keys
                .iter()
                .filter(|(k, _)| !k.contains(super::ELECTION_PREFIX)),
        );
        st.journal = None;
        write_atomically(path, text.as_bytes())
            .map_err(|e| StoreError::Config(format!("state file {}: {e}", path.display())))?;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(fail)?;
        st.journal = Some(Journal {
            file,
            bytes: 0,
            snapshot: text.len() as u64,
        });
        Ok(())
    }

    /// Deletes `key` only if its last write is at `rev`: a term ends only
    /// its own leader key, never a successor's.
    fn delete_at(&self, key: &str, rev: Revision) -> bool {
        let mut st = self.lock();
        if st.keys.get(key).is_some_and(|(_, r)| *r == rev) {
            // A leader key is not in the state file: its end needs no
            // write there, and a full disk must not keep a term alive.
            st.revision += 1;
            st.keys.remove(key);
            let _ = self.events.send(Arc::new(Event {
                kind: EventKind::Delete,
                key: key.to_string(),
                value: Vec::new(),
                revision: st.revision,
            }));
            true
        } else {
            false
        }
    }
}

impl MemoryStore {
    /// A fresh, empty store whose keys live under `namespace`.
    pub fn new(namespace: &str) -> Result<Self, StoreError> {
        Self::open(namespace, None)
    }

    /// A store kept in `file` when given: loaded from it when it exists,
    /// rewritten on every write.
    pub fn open(namespace: &str, file: Option<&Path>) -> Result<Self, StoreError> {
        check_namespace(namespace)?;
        let state = match file {
            Some(p) if p.exists() => load(p)?,
            _ => State::default(),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                events: broadcast::channel(WATCH_BACKLOG).0,
                file: file.map(Path::to_path_buf),
            }),
            ns: namespace.to_string(),
        })
    }

    /// Another handle on the same data under a different namespace.
    pub fn namespaced(&self, namespace: &str) -> Result<Self, StoreError> {
        check_namespace(namespace)?;
        Ok(Self {
            inner: self.inner.clone(),
            ns: namespace.to_string(),
        })
    }

    fn full(&self, key: &str) -> String {
        format!("{}{key}", self.ns)
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn namespace(&self) -> &str {
        &self.ns
    }

    fn describe(&self) -> String {
        format!("memory store, namespace {}", self.ns)
    }

    async fn get(&self, key: &str) -> Result<Option<(Vec<u8>, Revision)>, StoreError> {
        Ok(self.inner.lock().keys.get(&self.full(key)).cloned())
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<Revision, StoreError> {
        let mut st = self.inner.lock();
        self.inner
            .apply(&mut st, vec![(EventKind::Put, self.full(key), value)])
    }

    async fn put_if(
        &self,
        key: &str,
        value: Vec<u8>,
        expected: Option<Revision>,
    ) -> Result<Option<Revision>, StoreError> {
        let full = self.full(key);
        let mut st = self.inner.lock();
        let current = st.keys.get(&full).map(|(_, r)| *r);
        if current != expected {
            return Ok(None);
        }
        Ok(Some(
            self.inner
                .apply(&mut st, vec![(EventKind::Put, full, value)])?,
        ))
    }

    async fn commit_fenced(
        &self,
        ops: Vec<Op>,
        election: &str,
        term: Revision,
    ) -> Result<Option<Revision>, StoreError> {
        let leader_key = self.full(&election_key(election)?);
        let mut st = self.inner.lock();
        // The leader key is written once per term, so its revision is the
        // revision the term began at.
        if st.keys.get(&leader_key).map(|(_, r)| *r) != Some(term) {
            return Ok(None);
        }
        let mut changes = Vec::with_capacity(ops.len());
        for op in ops {
            changes.push(match op {
                Op::Put { key, value } => (EventKind::Put, self.full(&key), value),
                Op::Delete { key } => {
                    let full = self.full(&key);
                    if !st.keys.contains_key(&full) {
                        continue;
                    }
                    (EventKind::Delete, full, Vec::new())
                }
            });
        }
        // One revision for the whole step, as etcd gives a transaction.
        Ok(Some(self.inner.apply(&mut st, changes)?))
    }

    async fn delete(&self, key: &str) -> Result<Option<Revision>, StoreError> {
        let full = self.full(key);
        let mut st = self.inner.lock();
        if !st.keys.contains_key(&full) {
            return Ok(None);
        }
        Ok(Some(self.inner.apply(
            &mut st,
            vec![(EventKind::Delete, full, Vec::new())],
        )?))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<Entry>, StoreError> {
        let full = self.full(prefix);
        let st = self.inner.lock();
        Ok(st
            .keys
            .range(full.clone()..)
            .take_while(|(k, _)| k.starts_with(&full))
            .map(|(k, (v, r))| Entry {
                key: k[self.ns.len()..].to_string(),
                value: v.clone(),
                revision: *r,
            })
            .collect())
    }

    async fn list_keys(&self, prefix: &str) -> Result<Vec<(String, Revision)>, StoreError> {
        let full = self.full(prefix);
        let st = self.inner.lock();
        Ok(st
            .keys
            .range(full.clone()..)
            .take_while(|(k, _)| k.starts_with(&full))
            .map(|(k, (_, r))| (k[self.ns.len()..].to_string(), *r))
            .collect())
    }

    async fn watch(&self, prefix: &str) -> Result<Watch, StoreError> {
        // Subscribing under the lock makes the start exact: every write
        // after `after` is in the channel, none before it is.
        let st = self.inner.lock();
        let rx = self.inner.events.subscribe();
        let after = st.revision;
        drop(st);
        Ok(Watch::new(
            prefix,
            after,
            Box::new(MemoryWatch {
                rx,
                full_prefix: self.full(prefix),
                ns_len: self.ns.len(),
                prefix: prefix.to_string(),
                ended: false,
            }),
        ))
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        Ok(self.inner.lock().revision)
    }

    async fn campaign(
        &self,
        election: &str,
        candidate: &str,
        ttl: Duration,
    ) -> Result<LeaderGuard, StoreError> {
        let key = election_key(election)?;
        let full = self.full(&key);
        // Opened before each attempt, so the leader's departure cannot slip
        // between a failed attempt and the wait.
        let mut w = self.watch(&key).await?;
        let won = loop {
            if let Some(rev) = self.put_if(&key, candidate.into(), None).await? {
                break rev;
            }
            tracing::debug!(election, candidate, "waiting for the leader to go");
            loop {
                match w.next().await {
                    Some(Ok(ev)) if ev.key == key && ev.kind == EventKind::Delete => break,
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => {
                        w = self.watch(&key).await?;
                        break;
                    }
                }
            }
        };
        tracing::info!(election, candidate, revision = won, "leadership won");
        let leading = Arc::new(watch::channel(true).0);
        let monitor = tokio::spawn(monitor_memory_term(w, key, won, leading.clone()));
        Ok(LeaderGuard::new(
            election,
            candidate,
            won,
            leading,
            Box::new(MemoryTerm {
                inner: self.inner.clone(),
                full_key: full,
                revision: won,
                ttl,
                monitor,
                resigned: false,
            }),
        ))
    }

    async fn leader(&self, election: &str) -> Result<Option<String>, StoreError> {
        let key = election_key(election)?;
        match self.get(&key).await? {
            Some((v, _)) => Ok(Some(candidate_id(&self.ns, election, v)?)),
            None => Ok(None),
        }
    }
}

/// Leadership ends when anything but this term writes the leader key (an
/// operator deleting it, or the term's own expiry).
async fn monitor_memory_term(
    mut w: Watch,
    key: String,
    won: Revision,
    leading: Arc<watch::Sender<bool>>,
) {
    loop {
        match w.next().await {
            Some(Ok(ev)) if ev.key == key && ev.revision > won => break,
            Some(Ok(_)) => {}
            // The channel lagging cannot lose the leader key for good, but
            // it can hide its removal: treat it as lost to stay safe.
            Some(Err(_)) | None => break,
        }
    }
    tracing::info!(key = %key, "leadership lost");
    leading.send_replace(false);
}

struct MemoryTerm {
    inner: Arc<Inner>,
    full_key: String,
    revision: Revision,
    ttl: Duration,
    monitor: tokio::task::JoinHandle<()>,
    resigned: bool,
}

#[async_trait]
impl Term for MemoryTerm {
    async fn resign(&mut self) -> Result<(), StoreError> {
        self.resigned = true;
        self.monitor.abort();
        self.inner.delete_at(&self.full_key, self.revision);
        Ok(())
    }
}

impl Drop for MemoryTerm {
    fn drop(&mut self) {
        self.monitor.abort();
        if self.resigned {
            return;
        }
        // An abandoned term behaves like etcd's unrenewed lease: the key
        // stays until the ttl runs out, then goes.
        let inner = self.inner.clone();
        let key = std::mem::take(&mut self.full_key);
        let rev = self.revision;
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                let ttl = self.ttl;
                h.spawn(async move {
                    tokio::time::sleep(ttl).await;
                    if inner.delete_at(&key, rev) {
                        tracing::info!(key = %key, "abandoned leadership expired");
                    }
                });
            }
            // Without a runtime nothing could be waiting on the key either.
            Err(_) => {
                inner.delete_at(&key, rev);
            }
        }
    }
}

struct MemoryWatch {
    rx: broadcast::Receiver<Arc<Event>>,
    full_prefix: String,
    ns_len: usize,
    prefix: String,
    ended: bool,
}

#[async_trait]
impl EventSource for MemoryWatch {
    async fn next(&mut self) -> Option<Result<Event, StoreError>> {
        if self.ended {
            return None;
        }
        loop {
            match self.rx.recv().await {
                Ok(ev) if ev.key.starts_with(&self.full_prefix) => {
                    return Some(Ok(Event {
                        kind: ev.kind,
                        key: ev.key[self.ns_len..].to_string(),
                        value: ev.value.clone(),
                        revision: ev.revision,
                    }));
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    self.ended = true;
                    return Some(Err(StoreError::WatchLost {
                        prefix: self.prefix.clone(),
                        detail: format!("{n} events behind"),
                    }));
                }
                Err(broadcast::error::RecvError::Closed) => {
                    self.ended = true;
                    return None;
                }
            }
        }
    }
}

/// Reads a state file written by [`Inner::persist`].
fn load(path: &Path) -> Result<State, StoreError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| StoreError::Config(format!("state file {}: {e}", path.display())))?;
    let l = crate::statefile::parse(&text, path)?;
    if l.torn_tail {
        tracing::warn!(file = %path.display(), "the state file ends in a write cut short; it is dropped");
    }
    // The first write rewrites the file (no journal is appended to a file
    // read back, which may end in a torn line).
    Ok(State {
        revision: l.revision,
        keys: l.keys,
        journal: None,
    })
}

/// Whether `file` is still the one at `path`: a state file removed or
/// replaced under the store (its directory gone, a restore from backup)
/// must not swallow writes into an unlinked file.
fn same_file(path: &Path, file: &std::fs::File) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let (a, b) = (std::fs::metadata(path)?, file.metadata()?);
        if (a.dev(), a.ino()) != (b.dev(), b.ino()) {
            return Err(std::io::Error::other(
                "the file was replaced under the store",
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, file);
    Ok(())
}

/// Writes `bytes` to `path` so that a crash leaves the old file or the new
/// one, never a mix: a temporary file in the same directory, fsync,
/// rename, fsync of the directory.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), fabric::fsio::WriteError> {
    // The state file holds the revision and the term: private to the
    // controller.
    fabric::fsio::write_bytes(
        path,
        bytes,
        fabric::fsio::Options {
            mode: Some(0o600),
            ..fabric::fsio::Options::default()
        },
    )
}
