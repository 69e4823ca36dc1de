//! Workers found through the store. A worker with a `[store]` holds a
//! leased key, `election/worker-<name>` = the URL it is reached at, for as
//! long as it runs (an election only it enters, so it wins at once and the
//! store renews the lease in the background). A coordinator lists those
//! keys to find the workers, and watches them during a job: when a
//! worker's lease ends (the process died, froze, or lost the store for the
//! lease's length) its key goes, the coordinator gives up on it and its
//! open part goes back to the queue at once, whatever its connection still
//! looks like.

use crate::{ELECTION_PREFIX, EventKind, Store, StoreConfig, StoreError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Election names of workers start with this; the worker's name follows.
pub const ELECTION: &str = "worker-";

/// Election names of parts being computed start with this; then the job,
/// the kind and the range (`<job>-verify-0-512`), or for the engines
/// routed in rounds the units a session holds (`<job>-layers-0_2`,
/// `<job>-streams-1_4`). The holder is the worker's name, under a lease of its own: the record goes when the part is done
/// or the worker's lease ends.
pub const PART: &str = "part-";

/// One part a worker holds, as recorded in the store.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HeldPart {
    /// `<job>-<kind>-<range>`, as under [`PART`].
    pub part: String,
    /// The holding worker's name.
    pub worker: String,
}

/// The parts the workers registered in `store` hold now, by part.
pub async fn held_parts(store: &dyn Store) -> Result<Vec<HeldPart>, StoreError> {
    let prefix = format!("{ELECTION_PREFIX}{PART}");
    let mut parts: Vec<HeldPart> = store
        .list(&prefix)
        .await?
        .into_iter()
        .filter_map(|e| {
            Some(HeldPart {
                part: e.key.strip_prefix(&prefix)?.to_string(),
                worker: String::from_utf8(e.value).ok()?,
            })
        })
        .collect();
    parts.sort_by(|a, b| a.part.cmp(&b.part));
    Ok(parts)
}

fn election(name: &str) -> String {
    format!("{ELECTION}{name}")
}

/// Holds `name`'s registration until the returned guard is dropped (then
/// the key goes when the lease runs out); when the lease is lost (the store
/// was out of reach for its length), registers again every `retry`.
pub fn register(
    store: Arc<dyn Store>,
    name: String,
    url: String,
    ttl: Duration,
    retry: Duration,
) -> Registration {
    let task = tokio::spawn(async move {
        loop {
            match store.campaign(&election(&name), &url, ttl).await {
                Ok(guard) => {
                    tracing::info!(worker = %name, %url, store = %store.describe(), "registered in the store");
                    guard.lost().await;
                    tracing::warn!(worker = %name, "registration lease lost; registering again");
                }
                Err(e) => {
                    tracing::warn!(worker = %name, error = %e, "cannot register in the store")
                }
            }
            tokio::time::sleep(retry).await;
        }
    });
    Registration {
        _task: AbortOnDrop(task),
    }
}

/// A worker's registration, held while this lives.
pub struct Registration {
    _task: AbortOnDrop,
}

/// One registered worker.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Registered {
    pub name: String,
    pub url: String,
}

/// The workers registered when a job started, and per URL a flag that
/// turns true when that worker's lease ends.
#[derive(Clone)]
pub struct Leases {
    pub workers: Vec<Registered>,
    gone: HashMap<String, watch::Receiver<bool>>,
    _watcher: Arc<AbortOnDrop>,
}

impl std::fmt::Debug for Leases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leases")
            .field("workers", &self.workers)
            .finish()
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Leases {
    pub fn urls(&self) -> Vec<String> {
        self.workers.iter().map(|w| w.url.clone()).collect()
    }

    /// Resolves when the worker at `url` loses its lease; never for a URL
    /// the store did not list, or once the store cannot be watched (the
    /// connection's own keepalive still notices a dead worker then).
    pub fn gone(
        &self,
        url: &str,
    ) -> impl std::future::Future<Output = ()> + Send + 'static + use<> {
        let rx = self.gone.get(url).cloned();
        async move {
            let Some(mut rx) = rx else {
                return std::future::pending().await;
            };
            if rx.wait_for(|g| *g).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The workers registered in the store `sc` names (see [`discover`]).
pub async fn find(sc: &StoreConfig) -> Result<Leases, StoreError> {
    discover(crate::open(sc).await?).await
}

/// The workers registered in `store` now, watched from before they are
/// listed so that no lease can end unseen in between.
pub async fn discover(store: Arc<dyn Store>) -> Result<Leases, StoreError> {
    let prefix = format!("{ELECTION_PREFIX}{ELECTION}");
    let mut w = store.watch(&prefix).await?;
    let mut workers = Vec::new();
    let mut by_key = HashMap::new();
    let mut gone = HashMap::new();
    for e in store.list(&prefix).await? {
        let Some(name) = e.key.strip_prefix(&prefix) else {
            continue;
        };
        let Ok(url) = String::from_utf8(e.value) else {
            tracing::warn!(key = %e.key, "a worker registration that is not UTF-8: skipped");
            continue;
        };
        let (tx, rx) = watch::channel(false);
        by_key.insert(e.key.clone(), tx);
        gone.insert(url.clone(), rx);
        workers.push(Registered {
            name: name.to_string(),
            url,
        });
    }
    workers.sort_by(|a, b| a.name.cmp(&b.name));
    let task = tokio::spawn(async move {
        while let Some(ev) = w.next().await {
            match ev {
                Ok(ev) if ev.kind == EventKind::Delete => {
                    if let Some(tx) = by_key.get(&ev.key) {
                        tracing::warn!(key = %ev.key, "a worker's lease ended");
                        tx.send_replace(true);
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch the workers' leases any more");
                    break;
                }
            }
        }
        // Keep the senders: a closed channel must not read as "gone".
        let _senders = by_key;
        std::future::pending::<()>().await;
    });
    Ok(Leases {
        workers,
        gone,
        _watcher: Arc::new(AbortOnDrop(task)),
    })
}

/// A TOML file's `[store]` table, whatever else the file holds (a
/// controller's or a worker's config will do): where to find workers.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct StoreFile {
    #[serde(default)]
    pub store: Option<StoreConfig>,
}

impl settings::ConfigFile for StoreFile {
    fn check(&self) -> Result<(), settings::Invalid> {
        match &self.store {
            Some(s) if s.shared() => Ok(()),
            Some(_) => Err(settings::Invalid(
                "store.kind must be \"etcd\": workers register in a shared store, and a memory store lives in one process".into(),
            )),
            None => Err(settings::Invalid(
                "no [store] table: name the etcd the workers register in".into(),
            )),
        }
    }
    fn paths_mut(&mut self) -> Vec<&mut std::path::PathBuf> {
        self.store
            .as_mut()
            .and_then(StoreConfig::etcd_tls_mut)
            .into_iter()
            .flat_map(ibtls::TlsSettings::paths_mut)
            .collect()
    }
}
