//! [`Store`] on etcd v3: keys under a namespace, revisions from etcd's
//! cluster revision, elections on leases.

use super::{
    Entry, Event, EventKind, EventSource, LeaderGuard, Op, Revision, Store, StoreError, Term,
    Watch, candidate_id, check_namespace, election_key,
};
use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, PutOptions, ResponseHeader, Txn, TxnOp,
    WatchOptions, WatchStream,
};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Bounds every unary request: the client library has no deadline of its
/// own, and a controller must not hang on a store that stopped answering.
const OP_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// HTTP/2 pings find a dead connection even while no request is pending.
const PING_INTERVAL: Duration = Duration::from_secs(2);
const PING_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between attempts to restore a keep-alive or watch stream.
const RETRY: Duration = Duration::from_millis(200);

/// etcd-backed [`Store`]. Cheap to clone: clones share one connection.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    endpoints: String,
    ns: String,
}

impl EtcdStore {
    /// Connects and checks that etcd answers, so a wrong address fails
    /// here and not at the first write.
    pub async fn connect(endpoints: &[String], namespace: &str) -> Result<Self, StoreError> {
        Self::connect_with(endpoints, namespace, None).await
    }

    /// [`EtcdStore::connect`], over TLS with this client certificate when
    /// `tls` is given (etcd started with `--client-cert-auth`).
    pub async fn connect_with(
        endpoints: &[String],
        namespace: &str,
        tls: Option<&ibtls::TlsSettings>,
    ) -> Result<Self, StoreError> {
        check_namespace(namespace)?;
        if endpoints.is_empty() {
            return Err(StoreError::Config("no etcd endpoints given".into()));
        }
        let joined = endpoints.join(",");
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_keep_alive(PING_INTERVAL, PING_TIMEOUT)
            .with_keep_alive_while_idle(true);
        if let Some(t) = tls {
            // One name for every member: certificates of an etcd cluster
            // name each member's host; endpoints name it too.
            let host = endpoints[0]
                .parse::<tonic::transport::Uri>()
                .ok()
                .and_then(|u| u.host().map(str::to_string))
                .ok_or_else(|| StoreError::Config(format!("{}: no host", endpoints[0])))?;
            let cfg = ibtls::client_tls(t, &host)
                .map_err(|e| StoreError::Config(format!("etcd TLS: {e}")))?;
            opts = opts.with_tls(cfg);
        }
        let client =
            match tokio::time::timeout(OP_TIMEOUT, Client::connect(endpoints, Some(opts))).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    return Err(StoreError::Unreachable {
                        endpoints: joined,
                        detail: e.to_string(),
                    });
                }
                Err(_) => {
                    return Err(StoreError::Unreachable {
                        endpoints: joined,
                        detail: format!("no connection within {OP_TIMEOUT:?}"),
                    });
                }
            };
        let s = Self {
            client,
            endpoints: joined,
            ns: namespace.to_string(),
        };
        let rev = s.revision().await?;
        tracing::info!(endpoints = %s.endpoints, namespace = %s.ns, revision = rev, "connected to etcd");
        Ok(s)
    }

    fn full(&self, key: &str) -> String {
        format!("{}{key}", self.ns)
    }

    fn strip(&self, key: &[u8]) -> Result<String, StoreError> {
        let k = std::str::from_utf8(key).map_err(|_| StoreError::NotUtf8 {
            namespace: self.ns.clone(),
            what: format!("key {key:?}"),
        })?;
        Ok(k.strip_prefix(self.ns.as_str()).unwrap_or(k).to_string())
    }

    fn fail(&self, op: &'static str, e: etcd_client::Error) -> StoreError {
        classify(&self.endpoints, op, e)
    }

    /// Runs one request with a deadline and a clear error.
    async fn call<T>(
        &self,
        op: &'static str,
        f: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(OP_TIMEOUT, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.fail(op, e)),
            Err(_) => Err(StoreError::Unreachable {
                endpoints: self.endpoints.clone(),
                detail: format!("{op}: no answer within {OP_TIMEOUT:?}"),
            }),
        }
    }

    fn header_rev(
        &self,
        op: &'static str,
        h: Option<&ResponseHeader>,
    ) -> Result<Revision, StoreError> {
        h.map(|h| rev(h.revision()))
            .ok_or_else(|| StoreError::Protocol {
                endpoints: self.endpoints.clone(),
                op,
                detail: "response without header".into(),
            })
    }

    /// A watch on `key` (with `prefix`, on every key under it) starting at
    /// revision `from`.
    async fn open_watch(
        &self,
        key: String,
        prefix: bool,
        from: Revision,
    ) -> Result<WatchStream, StoreError> {
        let mut c = self.client.clone();
        let mut opts = WatchOptions::new().with_start_revision(from as i64);
        if prefix {
            opts = opts.with_prefix();
        }
        self.call("watch", c.watch(key, Some(opts))).await
    }
}

/// Transport failures and unavailability say "unreachable"; everything
/// else keeps etcd's own error.
fn classify(endpoints: &str, op: &'static str, e: etcd_client::Error) -> StoreError {
    use etcd_client::Error as E;
    let unreachable = match &e {
        E::TransportError(_) | E::IoError(_) => true,
        E::GRpcStatus(s) => matches!(
            s.code(),
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
        ),
        _ => false,
    };
    if unreachable {
        StoreError::Unreachable {
            endpoints: endpoints.to_string(),
            detail: format!("{op}: {e}"),
        }
    } else {
        StoreError::Etcd {
            endpoints: endpoints.to_string(),
            op,
            source: e,
        }
    }
}

fn rev(r: i64) -> Revision {
    r.max(0) as Revision
}

#[async_trait]
impl Store for EtcdStore {
    fn namespace(&self) -> &str {
        &self.ns
    }

    fn describe(&self) -> String {
        format!("etcd at {}, namespace {}", self.endpoints, self.ns)
    }

    async fn get(&self, key: &str) -> Result<Option<(Vec<u8>, Revision)>, StoreError> {
        let mut c = self.client.clone();
        let r = self.call("get", c.get(self.full(key), None)).await?;
        Ok(r.kvs()
            .first()
            .map(|kv| (kv.value().to_vec(), rev(kv.mod_revision()))))
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<Revision, StoreError> {
        let mut c = self.client.clone();
        let r = self.call("put", c.put(self.full(key), value, None)).await?;
        self.header_rev("put", r.header())
    }

    async fn put_if(
        &self,
        key: &str,
        value: Vec<u8>,
        expected: Option<Revision>,
    ) -> Result<Option<Revision>, StoreError> {
        let full = self.full(key);
        // etcd reports 0 for every revision of a missing key, so "exists"
        // is its own comparison (version > 0) next to the revision.
        let when = match expected {
            None => vec![Compare::create_revision(full.clone(), CompareOp::Equal, 0)],
            Some(r) => vec![
                Compare::version(full.clone(), CompareOp::Greater, 0),
                Compare::mod_revision(full.clone(), CompareOp::Equal, r as i64),
            ],
        };
        let txn = Txn::new()
            .when(when)
            .and_then(vec![TxnOp::put(full, value, None)]);
        let mut c = self.client.clone();
        let r = self.call("put_if", c.txn(txn)).await?;
        if !r.succeeded() {
            return Ok(None);
        }
        Ok(Some(self.header_rev("put_if", r.header())?))
    }

    async fn commit_fenced(
        &self,
        ops: Vec<Op>,
        election: &str,
        term: Revision,
    ) -> Result<Option<Revision>, StoreError> {
        let leader_key = self.full(&election_key(election)?);
        // The term's leader key was created at `term` and never written
        // since (keepalives do not write it); a successor's key, an
        // overwrite, or no key (the lease expired) fails one of the two,
        // as any write to the key ends the term in `monitor_etcd_term`.
        let ops = ops
            .into_iter()
            .map(|op| match op {
                Op::Put { key, value } => TxnOp::put(self.full(&key), value, None),
                Op::Delete { key } => TxnOp::delete(self.full(&key), None),
            })
            .collect::<Vec<_>>();
        let txn = Txn::new()
            .when(vec![
                Compare::create_revision(leader_key.clone(), CompareOp::Equal, term as i64),
                Compare::mod_revision(leader_key, CompareOp::Equal, term as i64),
            ])
            .and_then(ops);
        let mut c = self.client.clone();
        let r = self.call("commit_fenced", c.txn(txn)).await?;
        if !r.succeeded() {
            return Ok(None);
        }
        Ok(Some(self.header_rev("commit_fenced", r.header())?))
    }

    async fn delete(&self, key: &str) -> Result<Option<Revision>, StoreError> {
        let mut c = self.client.clone();
        let r = self.call("delete", c.delete(self.full(key), None)).await?;
        if r.deleted() == 0 {
            return Ok(None);
        }
        Ok(Some(self.header_rev("delete", r.header())?))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<Entry>, StoreError> {
        let mut c = self.client.clone();
        let r = self
            .call(
                "list",
                c.get(self.full(prefix), Some(GetOptions::new().with_prefix())),
            )
            .await?;
        r.kvs()
            .iter()
            .map(|kv| {
                Ok(Entry {
                    key: self.strip(kv.key())?,
                    value: kv.value().to_vec(),
                    revision: rev(kv.mod_revision()),
                })
            })
            .collect()
    }

    async fn list_keys(&self, prefix: &str) -> Result<Vec<(String, Revision)>, StoreError> {
        let mut c = self.client.clone();
        let r = self
            .call(
                "list_keys",
                c.get(
                    self.full(prefix),
                    Some(GetOptions::new().with_prefix().with_keys_only()),
                ),
            )
            .await?;
        r.kvs()
            .iter()
            .map(|kv| Ok((self.strip(kv.key())?, rev(kv.mod_revision()))))
            .collect()
    }

    async fn watch(&self, prefix: &str) -> Result<Watch, StoreError> {
        // An explicit start revision makes "after the current revision"
        // exact; without it etcd starts whenever the watcher is created.
        let after = self.revision().await?;
        let stream = self.open_watch(self.full(prefix), true, after + 1).await?;
        Ok(Watch::new(
            prefix,
            after,
            Box::new(EtcdWatch {
                store: self.clone(),
                prefix: prefix.to_string(),
                stream: Some(stream),
                buf: VecDeque::new(),
            }),
        ))
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        let mut c = self.client.clone();
        let r = self
            .call(
                "revision",
                c.get(self.ns.clone(), Some(GetOptions::new().with_count_only())),
            )
            .await?;
        self.header_rev("revision", r.header())
    }

    async fn campaign(
        &self,
        election: &str,
        candidate: &str,
        ttl: Duration,
    ) -> Result<LeaderGuard, StoreError> {
        let key = self.full(&election_key(election)?);
        // etcd leases are whole seconds; rounding up never makes a leader
        // give up earlier than asked.
        let ttl_s = ttl.as_secs_f64().ceil().max(1.0) as i64;
        let ttl = Duration::from_secs(ttl_s as u64);
        let mut c = self.client.clone();
        let granted_at = Instant::now();
        let g = self.call("lease grant", c.lease_grant(ttl_s, None)).await?;
        let lease = g.id();
        let (alive_tx, mut alive) = watch::channel(true);
        // Renewal starts now, not on winning: a follower may wait longer
        // than one ttl for its turn.
        let keeper = Tasks(vec![tokio::spawn(keep_alive(
            self.client.clone(),
            self.endpoints.clone(),
            lease,
            ttl,
            granted_at + ttl,
            alive_tx,
        ))]);
        let lost = |detail: &str| StoreError::Election {
            election: election.to_string(),
            detail: format!("{detail} (lease {lease:x}, etcd at {})", self.endpoints),
        };
        let won = loop {
            let txn = Txn::new()
                .when(vec![Compare::create_revision(
                    key.clone(),
                    CompareOp::Equal,
                    0,
                )])
                .and_then(vec![TxnOp::put(
                    key.clone(),
                    candidate,
                    Some(PutOptions::new().with_lease(lease)),
                )]);
            let r = self.call("campaign", c.txn(txn)).await?;
            let at = self.header_rev("campaign", r.header())?;
            if r.succeeded() {
                break at;
            }
            tracing::debug!(election, candidate, "waiting for the leader to go");
            // Events after the failed attempt: the leader key cannot
            // vanish unseen between the attempt and the wait.
            let mut ws = self.open_watch(key.clone(), false, at + 1).await?;
            loop {
                tokio::select! {
                    _ = until_false(&mut alive) => {
                        return Err(lost("lease lost while waiting for leadership"));
                    }
                    m = ws.message() => match m {
                        Ok(Some(resp)) if resp.canceled() => break,
                        Ok(Some(resp)) => {
                            if resp.events().iter().any(|e| e.event_type() == etcd_client::EventType::Delete) {
                                break;
                            }
                        }
                        Ok(None) | Err(_) => {
                            tokio::time::sleep(RETRY).await;
                            break;
                        }
                    },
                }
            }
        };
        tracing::info!(election, candidate, revision = won, lease = %format!("{lease:x}"), "leadership won");
        let leading = Arc::new(watch::channel(true).0);
        let mut tasks = keeper;
        tasks.0.push(tokio::spawn(monitor_etcd_term(
            self.clone(),
            key,
            won,
            alive,
            leading.clone(),
        )));
        Ok(LeaderGuard::new(
            election,
            candidate,
            won,
            leading,
            Box::new(EtcdTerm {
                store: self.clone(),
                lease,
                tasks,
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

/// Background tasks aborted on drop: a dropped guard (or an abandoned
/// campaign) stops renewing its lease, as a dead process would.
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

struct EtcdTerm {
    store: EtcdStore,
    lease: i64,
    tasks: Tasks,
}

#[async_trait]
impl Term for EtcdTerm {
    async fn resign(&mut self) -> Result<(), StoreError> {
        for t in &self.tasks.0 {
            t.abort();
        }
        // Revoking deletes the leader key with the lease, which wakes the
        // waiting candidates at once.
        let mut c = self.store.client.clone();
        self.store
            .call("lease revoke", c.lease_revoke(self.lease))
            .await
            .map(|_| ())
    }
}

/// Renews `lease` every ttl/3 and publishes false on `alive` once it is
/// gone: etcd says so, or no renewal was confirmed before `valid_until`.
/// The local deadline counts from when a renewal was sent, which is never
/// later than etcd's own, so this side gives up no later than etcd does.
async fn keep_alive(
    mut client: Client,
    endpoints: String,
    lease: i64,
    ttl: Duration,
    mut valid_until: Instant,
    alive: watch::Sender<bool>,
) {
    let period = ttl / 3;
    let why = 'run: loop {
        let sent = Instant::now();
        let opened = tokio::select! {
            _ = tokio::time::sleep_until(valid_until) => break 'run "no renewal confirmed within the ttl".to_string(),
            r = client.lease_keep_alive(lease) => r,
        };
        let (mut keeper, mut stream) = match opened {
            Ok(ks) => ks,
            Err(etcd_client::Error::LeaseKeepAliveError(e)) => break 'run format!("etcd: {e}"),
            Err(e) => {
                tracing::warn!(lease = %format!("{lease:x}"), error = %classify(&endpoints, "lease keep-alive", e), "renewing the lease; retrying");
                tokio::select! {
                    _ = tokio::time::sleep_until(valid_until) => break 'run "no renewal confirmed within the ttl".to_string(),
                    _ = tokio::time::sleep(RETRY) => continue 'run,
                }
            }
        };
        // Opening the stream renewed the lease once.
        valid_until = sent + ttl;
        let mut pending: VecDeque<Instant> = VecDeque::new();
        let mut next = sent + period;
        loop {
            tokio::select! {
                _ = alive.closed() => return,
                _ = tokio::time::sleep_until(valid_until) => break 'run "no renewal confirmed within the ttl".to_string(),
                _ = tokio::time::sleep_until(next) => {
                    next += period;
                    pending.push_back(Instant::now());
                    if keeper.keep_alive().await.is_err() {
                        continue 'run;
                    }
                }
                m = stream.message() => match m {
                    Ok(Some(r)) if r.ttl() > 0 => {
                        // Responses come in request order on one stream.
                        if let Some(t) = pending.pop_front() {
                            valid_until = t + Duration::from_secs(r.ttl() as u64);
                        }
                    }
                    Ok(Some(_)) => break 'run "etcd says the lease expired".to_string(),
                    Ok(None) | Err(_) => {
                        tokio::time::sleep(RETRY.min(period)).await;
                        continue 'run;
                    }
                },
            }
        }
    };
    tracing::warn!(lease = %format!("{lease:x}"), reason = %why, "lease lost");
    alive.send_replace(false);
}

/// Leadership ends when the lease is lost or anything else writes the
/// leader key (the lease expiring server-side deletes it; an operator may
/// delete it by hand).
async fn monitor_etcd_term(
    store: EtcdStore,
    key: String,
    won: Revision,
    mut alive: watch::Receiver<bool>,
    leading: Arc<watch::Sender<bool>>,
) {
    let why = 'run: loop {
        // Restarting from the winning revision replays whatever happened
        // while the stream was down.
        let mut ws = tokio::select! {
            _ = until_false(&mut alive) => break 'run "lease lost",
            r = store.open_watch(key.clone(), false, won + 1) => match r {
                Ok(ws) => ws,
                Err(e) => {
                    tracing::warn!(key = %key, error = %e, "watching the leader key; retrying");
                    tokio::time::sleep(RETRY).await;
                    continue 'run;
                }
            },
        };
        loop {
            tokio::select! {
                _ = until_false(&mut alive) => break 'run "lease lost",
                m = ws.message() => match m {
                    Ok(Some(resp)) if resp.canceled() => break 'run "watch on the leader key cancelled",
                    Ok(Some(resp)) if !resp.events().is_empty() => break 'run "leader key changed or removed",
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => {
                        tokio::time::sleep(RETRY).await;
                        continue 'run;
                    }
                },
            }
        }
    };
    tracing::warn!(key = %key, reason = why, "leadership lost");
    leading.send_replace(false);
}

/// Resolves once `rx` holds false (or its sender is gone). Returns
/// nothing, so no borrow of the channel lives across the caller's awaits.
async fn until_false(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| !v).await;
}

struct EtcdWatch {
    store: EtcdStore,
    prefix: String,
    stream: Option<WatchStream>,
    buf: VecDeque<Event>,
}

impl EtcdWatch {
    fn lost(&mut self, detail: String) -> Option<Result<Event, StoreError>> {
        self.stream = None;
        Some(Err(StoreError::WatchLost {
            prefix: self.prefix.clone(),
            detail,
        }))
    }
}

#[async_trait]
impl EventSource for EtcdWatch {
    async fn next(&mut self) -> Option<Result<Event, StoreError>> {
        loop {
            if let Some(ev) = self.buf.pop_front() {
                return Some(Ok(ev));
            }
            let stream = self.stream.as_mut()?;
            let resp = match stream.message().await {
                Ok(Some(r)) => r,
                Ok(None) => return self.lost("etcd closed the watch".into()),
                Err(e) => {
                    let e = classify(&self.store.endpoints, "watch", e);
                    return self.lost(e.to_string());
                }
            };
            if resp.canceled() {
                let detail = if resp.compact_revision() > 0 {
                    format!("compacted up to revision {}", resp.compact_revision())
                } else {
                    format!("cancelled: {}", resp.cancel_reason())
                };
                return self.lost(detail);
            }
            for e in resp.events() {
                let Some(kv) = e.kv() else { continue };
                let key = match self.store.strip(kv.key()) {
                    Ok(k) => k,
                    Err(err) => return self.lost(err.to_string()),
                };
                let ev = match e.event_type() {
                    etcd_client::EventType::Put => Event {
                        kind: EventKind::Put,
                        key,
                        value: kv.value().to_vec(),
                        revision: rev(kv.mod_revision()),
                    },
                    etcd_client::EventType::Delete => Event {
                        kind: EventKind::Delete,
                        key,
                        value: Vec::new(),
                        revision: rev(kv.mod_revision()),
                    },
                };
                self.buf.push_back(ev);
            }
        }
    }
}
