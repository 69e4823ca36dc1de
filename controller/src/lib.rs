//! The super-controller (`ibfabric controller --config FILE`).
//!
//! Agents register their subnet and report it; the leader keeps the global
//! GID -> (subnet, LID) and router-port picture ([`GlobalView`]), runs the
//! configured inter-subnet algorithm on every change, and pushes the
//! results: a mapping per subnet to its agent, egress tables per router to
//! its firmware. A result keeps its version while its content is unchanged,
//! so receivers only see real changes; versions only grow.
//!
//! Only the leader serves registrations, reports and pushes; the others
//! answer UNAVAILABLE naming the leader, which sends clients on to the next
//! address. What the leader accepts is persisted first, so a follower that
//! takes over serves the same versions.
//!
//! The rules of what to accept, write and publish are pure transitions in
//! [`state`]; [`Controller`] does the store writes (fenced by the leader's
//! term) and the publishing, [`start`] runs the leadership loop and
//! [`service`] the gRPC side.

pub mod config;
mod leader;
pub mod service;
pub mod state;
pub mod status_page;

pub use leader::{ELECTION, start};

use fabric::intersubnet::{GlobalView, InterSubnetRouting};
use proto::v1;
pub use state::Limits;
pub use state::Published;
use state::{ROUTES_KEY, SUBNET_KEY, State, TERM_KEY, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use store::{StoreError, StorePersist};
use tokio::sync::watch;

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("not the leader (leader: {0})")]
    NotLeader(String),
    #[error("subnet prefix {prefix:#018x} is held by live agent '{holder}'")]
    PrefixHeld { prefix: u64, holder: String },
    #[error("unknown session for subnet {0:#018x}: register again")]
    UnknownSession(u64),
    #[error("report generation {got} is older than generation {have} already accepted")]
    StaleReport { got: u64, have: u64 },
    #[error("{0}")]
    Invalid(String),
    #[error("limit reached: {0}")]
    Exhausted(String),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("store: {key}: undecodable: {source}")]
    Undecodable {
        key: String,
        #[source]
        source: prost::DecodeError,
    },
    #[error(transparent)]
    Routing(#[from] fabric::Error),
    #[error("recomputation task failed: {0}")]
    Task(String),
    /// The whole-fabric check refused the computed routes.
    #[error("routes refused by the whole-fabric check: {0}")]
    Refused(#[from] state::compose::ComposeRefusal),
    /// The store holds another release's layout: retrying cannot help.
    #[error("{0}")]
    StoreLayout(String),
}

/// Store key of the layout version of everything the controllers keep.
pub const LAYOUT_KEY: &str = "layout";
/// The layout this release reads and writes. A store without the key
/// whose values decode is this layout (written before the key existed).
pub const LAYOUT: u64 = 1;

/// The I/O side of the controller: it holds the [`State`] and the
/// published snapshot, writes what the transitions ask for, then answers
/// and publishes.
pub struct Controller {
    pub id: String,
    pub lease: Duration,
    /// Shared with the blocking thread a recomputation runs on.
    algo: Arc<dyn InterSubnetRouting>,
    persist: Arc<StorePersist>,
    state: Mutex<State>,
    /// Serializes the transitions that write (check, write, apply), so a
    /// change is checked against the state it is applied to.
    writer: tokio::sync::Mutex<()>,
    /// Serializes recomputations so versions are handed out in order.
    recompute: tokio::sync::Mutex<()>,
    published: watch::Sender<Arc<Published>>,
    leader: watch::Receiver<Option<String>>,
    sessions: std::sync::atomic::AtomicU64,
    /// This leader's term (0 before it first leads).
    term: std::sync::atomic::AtomicU64,
    /// Unix milliseconds at which this leader's term began serving.
    serving_since: std::sync::atomic::AtomicU64,
    pub limits: Limits,
    /// What routers (by GUID) and agents (by prefix) say they hold.
    held_egress: dashmap::DashMap<u64, u64>,
    held_mapping: dashmap::DashMap<u64, u64>,
    /// The last recomputation did not publish (a store or routing
    /// failure): the leader retries until it does.
    pending: std::sync::atomic::AtomicBool,
    /// Why the last computed routes were refused, for the status.
    refused: Mutex<String>,
    /// Open push streams per client (its identity, or its address without
    /// TLS), counted by the service against its bound.
    pub streams: Arc<dashmap::DashMap<String, usize>>,
    /// When this follower last noted each client's complaint.
    noted: dashmap::DashMap<String, Instant>,
    /// Fired when the leader should give up its term (its clients cannot
    /// reach it).
    step_down: tokio::sync::Notify,
}

/// Store prefix of the complaints followers note for a leader:
/// `complaints/<leader id>/<client>` holding the unix milliseconds.
pub const COMPLAINTS_KEY: &str = "complaints/";
/// How long a complaint counts.
const COMPLAINT_FRESH: Duration = Duration::from_secs(4);
/// A complaint noted this soon after a leader began serving may come from
/// a probe round that started before it served (a round lasts up to
/// [`proto::client::PROBE_TIMEOUT`]): it says nothing about the term.
const COMPLAINT_SETTLE: Duration = Duration::from_millis(2000);
/// How often a leader reads its complaints.
const COMPLAINT_CHECK: Duration = Duration::from_millis(300);

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Controller {
    /// `leader` holds the current leader's id (None while unknown); this
    /// controller serves when it holds its own id.
    pub fn new(
        id: String,
        lease: Duration,
        algo: Box<dyn InterSubnetRouting>,
        persist: Arc<StorePersist>,
        leader: watch::Receiver<Option<String>>,
        limits: Limits,
    ) -> Arc<Self> {
        Arc::new(Self {
            id,
            lease,
            algo: Arc::from(algo),
            persist,
            state: Mutex::new(State::default()),
            writer: tokio::sync::Mutex::new(()),
            recompute: tokio::sync::Mutex::new(()),
            published: watch::channel(Arc::new(Published::default())).0,
            leader,
            sessions: std::sync::atomic::AtomicU64::new(0),
            term: std::sync::atomic::AtomicU64::new(0),
            serving_since: std::sync::atomic::AtomicU64::new(u64::MAX),
            limits,
            held_egress: dashmap::DashMap::new(),
            held_mapping: dashmap::DashMap::new(),
            pending: std::sync::atomic::AtomicBool::new(false),
            refused: Mutex::new(String::new()),
            streams: Arc::new(dashmap::DashMap::new()),
            noted: dashmap::DashMap::new(),
            step_down: tokio::sync::Notify::new(),
        })
    }

    /// This leader's term: the high 32 bits of the versions it hands out.
    pub fn term(&self) -> u64 {
        self.term.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Records the version a router (`Some(guid)`) or an agent says it
    /// holds.
    pub fn held(&self, router: Option<u64>, prefix: Option<u64>, version: u64) {
        if let Some(g) = router {
            self.held_egress.insert(g, version);
        }
        if let Some(p) = prefix {
            self.held_mapping.insert(p, version);
        }
    }

    pub fn is_leader(&self) -> bool {
        self.leader.borrow().as_deref() == Some(self.id.as_str())
    }

    fn check_leader(&self) -> Result<(), ControlError> {
        if self.is_leader() {
            Ok(())
        } else {
            Err(ControlError::NotLeader(
                self.leader
                    .borrow()
                    .clone()
                    .unwrap_or_else(|| "unknown".into()),
            ))
        }
    }

    pub fn published(&self) -> Arc<Published> {
        self.published.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<Published>> {
        self.published.subscribe()
    }

    /// Held only for a transition, never across an await.
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn save_all(&self, ws: Vec<Write>) -> Result<(), ControlError> {
        Ok(self
            .persist
            .save_all(ws.into_iter().map(|w| (w.key, w.value)).collect())
            .await?)
    }

    /// Loads what an earlier leader persisted, raises the term and
    /// recomputes the routes (keeping the versions of every result whose
    /// content is unchanged); called when this controller becomes leader,
    /// before it serves.
    pub async fn take_over(&self) -> Result<(), ControlError> {
        let layout = self.check_layout().await?;
        let (subnets, routes) = match (
            self.persist.load(SUBNET_KEY).await,
            self.persist.load(ROUTES_KEY).await,
        ) {
            (Ok(s), Ok(r)) => (s, r),
            (Err(e @ StoreError::Corrupt { .. }), _) | (_, Err(e @ StoreError::Corrupt { .. }))
                if layout.is_none() =>
            {
                return Err(older_layout(&e.to_string()));
            }
            (Err(e), _) | (_, Err(e)) => return Err(e.into()),
        };
        let state = State::restore(subnets, Instant::now()).map_err(|e| match (&e, layout) {
            (ControlError::Undecodable { .. }, None) => older_layout(&e.to_string()),
            _ => e,
        })?;
        let restored = Published::restore(self.algo.name(), routes)?;
        let stored_term = self
            .persist
            .load(TERM_KEY)
            .await?
            .into_iter()
            .find(|(k, _)| k == TERM_KEY)
            .and_then(|(_, v)| <[u8; 8]>::try_from(v.as_slice()).ok())
            .map_or(0, u64::from_be_bytes);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // A term never below what was published, even if the term key was
        // lost while the routes survived.
        let term = state::next_term(stored_term.max(state::term_of(restored.version)), now);
        self.save_all(vec![
            Write {
                key: TERM_KEY.into(),
                value: term.to_be_bytes().to_vec(),
            },
            Write {
                key: LAYOUT_KEY.into(),
                value: LAYOUT.to_be_bytes().to_vec(),
            },
        ])
        .await?;
        // Complaints about an earlier term of this controller are stale.
        let _ = self
            .persist
            .forget(&format!("{COMPLAINTS_KEY}{}/", self.id))
            .await;
        match self.persist.collect_parts().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(parts = n, "removed parts no stored value names"),
            // Garbage only: it costs space, not correctness.
            Err(e) => tracing::warn!("stale parts left in the store: {e}"),
        }
        self.term.store(term, std::sync::atomic::Ordering::SeqCst);
        self.serving_since
            .store(unix_ms(), std::sync::atomic::Ordering::SeqCst);
        tracing::info!(
            id = %self.id,
            subnets = state.len(),
            version = restored.version,
            term,
            "took over as leader"
        );
        *self.lock() = state;
        self.published.send_replace(Arc::new(restored));
        // The content comes from the reports: recomputed before serving,
        // so receivers are offered the versions they already hold.
        match self.recompute().await {
            Ok(()) => Ok(()),
            Err(e @ ControlError::Store(_)) => Err(e),
            Err(e) => {
                tracing::error!("routes not recomputed at take-over (retrying): {e}");
                Ok(())
            }
        }
    }

    /// The layout the store says it holds (None: no key, as before the
    /// key existed); a layout this release does not read is refused with
    /// what to do.
    async fn check_layout(&self) -> Result<Option<u64>, ControlError> {
        let stored = self
            .persist
            .load(LAYOUT_KEY)
            .await?
            .into_iter()
            .find(|(k, _)| k == LAYOUT_KEY)
            .map(|(_, v)| {
                <[u8; 8]>::try_from(v.as_slice())
                    .map(u64::from_be_bytes)
                    .map_err(|_| {
                        ControlError::StoreLayout(format!(
                            "the store's '{LAYOUT_KEY}' key holds {} bytes, not a layout version",
                            v.len()
                        ))
                    })
            })
            .transpose()?;
        match stored {
            Some(v) if v > LAYOUT => Err(ControlError::StoreLayout(format!(
                "the store holds layout {v}, written by a newer release; this controller \
                 reads layout {LAYOUT}: run the release that wrote it (or newer)"
            ))),
            Some(v) if v < LAYOUT => Err(older_layout(&format!("layout {v}"))),
            v => Ok(v),
        }
    }

    /// Gives `holder` a session for the subnet (memory only: the store
    /// holds a subnet from its first accepted report).
    pub async fn register(
        &self,
        r: &v1::RegisterRequest,
        holder: &str,
    ) -> Result<v1::RegisterReply, ControlError> {
        self.check_leader()?;
        let n = self
            .sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Sessions name the term: a session of an earlier leader is
        // unknown here, whatever its counter.
        let session = format!("{}-t{}-{n}", self.id, self.term());
        let _w = self.writer.lock().await;
        self.lock().register(
            r,
            holder,
            session.clone(),
            Instant::now(),
            self.lease,
            &self.limits,
        )?;
        tracing::info!(agent = %r.agent_id, subnet = %format!("{:#018x}", r.subnet_prefix), "agent registered");
        Ok(v1::RegisterReply {
            session,
            controller_id: self.id.clone(),
            lease_seconds: self.lease.as_secs().max(1) as u32,
        })
    }

    /// Accepts a report from `holder`; when the subnet changed, writes it,
    /// and only then applies it, recomputes and publishes.
    pub async fn report(
        &self,
        r: v1::SubnetReport,
        holder: Option<&str>,
    ) -> Result<v1::ReportAck, ControlError> {
        self.check_leader()?;
        let prefix = r.subnet_prefix;
        let changed = {
            let _w = self.writer.lock().await;
            let mut accepted = self.lock().check_report(&r, holder, &self.limits)?;
            let changed = accepted.changed();
            if let Some(w) = accepted.write.take() {
                self.save_all(vec![w]).await?;
            }
            self.lock().apply(accepted, Instant::now());
            changed
        };
        if changed {
            tracing::info!(subnet = %format!("{prefix:#018x}"), generation = r.generation, "subnet report accepted");
            // The report is stored and applied: a failure to publish is
            // the leader's to retry ([`Controller::retry_pending`]), not
            // the agent's.
            if let Err(e) = self.recompute().await {
                tracing::error!("routes not published (retrying): {e}");
            }
        }
        let p = self.published();
        let left_out = self.lock().left_out(prefix).unwrap_or_default().to_string();
        if changed && !left_out.is_empty() {
            tracing::warn!(subnet = %format!("{prefix:#018x}"), "subnet left out of the routes: {left_out}");
        }
        Ok(v1::ReportAck {
            generation: r.generation,
            mapping_version: p.mappings.get(&prefix).map_or(0, |m| m.version()),
            left_out,
        })
    }

    /// Removes a subnet an operator names: its stored report, its
    /// mapping, its claims; then recomputes. False when the leader held
    /// nothing for it.
    pub async fn forget(&self, prefix: u64) -> Result<bool, ControlError> {
        self.check_leader()?;
        {
            let _w = self.writer.lock().await;
            if self.lock().get(prefix).is_none() {
                return Ok(false);
            }
            self.persist
                .remove(vec![state::subnet_key(prefix), state::mapping_key(prefix)])
                .await?;
            self.lock().forget(prefix);
            self.published
                .send_modify(|p| *p = Arc::new(p.without_mapping(prefix)));
        }
        tracing::warn!(subnet = %format!("{prefix:#018x}"), "subnet forgotten by an operator");
        if let Err(e) = self.recompute().await {
            tracing::error!("routes not published (retrying): {e}");
        }
        Ok(true)
    }

    /// The global view from the accepted reports.
    pub fn view(&self) -> GlobalView {
        self.lock().view()
    }

    /// Runs the inter-subnet algorithm on the current view; a changed
    /// result is written, then published. On failure nothing is
    /// published and the recomputation stays pending.
    pub async fn recompute(&self) -> Result<(), ControlError> {
        let _g = self.recompute.lock().await;
        let r = self.recompute_locked().await;
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        match &r {
            // The same inputs give the same refusal: nothing to retry
            // until a report changes. The tables in force stay.
            Err(ControlError::Refused(why)) => {
                tracing::error!("routes not published, the tables in force stay: {why}");
                *refused = why.to_string();
                self.pending
                    .store(false, std::sync::atomic::Ordering::SeqCst);
            }
            Ok(()) => {
                refused.clear();
                self.pending
                    .store(false, std::sync::atomic::Ordering::SeqCst);
            }
            Err(_) => self
                .pending
                .store(true, std::sync::atomic::Ordering::SeqCst),
        }
        drop(refused);
        r
    }

    async fn recompute_locked(&self) -> Result<(), ControlError> {
        let (view, reports) = {
            let st = self.lock();
            (st.view(), st.reports())
        };
        let (algo, prev, term) = (self.algo.clone(), self.published(), self.term());
        // Seconds of CPU on large fabrics: off the async workers, which
        // keep the election lease, the heartbeats and the pushes going.
        let t = Instant::now();
        let next = tokio::task::spawn_blocking(move || {
            state::recompute(&view, &reports, algo.as_ref(), &prev, term)
        })
        .await
        .map_err(|e| ControlError::Task(e.to_string()))??;
        metrics::histogram!("ibfabric_controller_compute_seconds")
            .record(t.elapsed().as_secs_f64());
        let Some(next) = next else {
            return Ok(());
        };
        let written = next.writes.len();
        self.save_all(next.writes).await?;
        let p = next.published;
        tracing::info!(
            version = p.version,
            subnets = p.mappings.len(),
            routers = p.egress.len(),
            changed = written,
            algorithm = %p.algorithm,
            "inter-subnet routes published"
        );
        drop(self.published.send_replace(Arc::new(p)));
        give_back_freed_memory();
        Ok(())
    }

    /// True while computed routes wait to be written and published.
    pub fn is_pending(&self) -> bool {
        self.pending.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Recomputes when the last attempt failed; the leadership loop calls
    /// it now and then.
    pub async fn retry_pending(&self) {
        if self.is_leader() && self.is_pending() {
            match self.recompute().await {
                Ok(()) => tracing::info!("pending routes published"),
                Err(e) => tracing::debug!("routes still pending: {e}"),
            }
        }
    }

    pub fn state(&self) -> v1::ControllerState {
        let p = self.published();
        let mut d = self.lock().describe(&p, Instant::now(), self.lease);
        for s in &mut d.subnets {
            s.held_mapping_version = self.held_mapping.get(&s.subnet_prefix).map_or(0, |v| *v);
        }
        for r in &mut d.routers {
            r.held_version = self.held_egress.get(&r.router_guid).map_or(0, |v| *v);
        }
        let mut store = self.persist.health();
        store.pending = self.is_pending();
        v1::ControllerState {
            controller_id: self.id.clone(),
            leader: self.is_leader(),
            algorithm: self.algo.name().to_string(),
            term: self.term(),
            store: Some(store),
            refused: self
                .refused
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            ..d
        }
    }

    /// A client says it cannot reach the leader this follower sees: noted
    /// in the store for the leader to read (at most once a second per
    /// client). A leader ignores complaints: the client reached it.
    pub async fn complain(&self, client: &str) -> Result<(), ControlError> {
        if self.is_leader() {
            return Ok(());
        }
        let Some(leader) = self.leader.borrow().clone() else {
            return Ok(());
        };
        if self
            .noted
            .get(client)
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return Ok(());
        }
        self.noted.insert(client.to_string(), Instant::now());
        tracing::info!(%client, %leader, "a client cannot reach the leader");
        self.persist
            .note(
                &format!("{COMPLAINTS_KEY}{leader}/{client}"),
                unix_ms().to_be_bytes().to_vec(),
            )
            .await?;
        Ok(())
    }

    /// The clients this leader serves, by the key a complaint names them
    /// with: the subnets that take part in the routes and the routers it
    /// publishes for (a registration alone proves nothing).
    fn known_clients(&self) -> std::collections::HashSet<String> {
        let agents: Vec<u64> = self.lock().prefixes().collect();
        let routers: Vec<u64> = self.published().egress.keys().copied().collect();
        agents
            .into_iter()
            .map(|prefix| ibtls::Identity::Agent { prefix }.to_uri())
            .chain(
                routers
                    .into_iter()
                    .map(|guid| ibtls::Identity::Router { guid }.to_uri()),
            )
            .collect()
    }

    /// Reads the complaints about this leader; when most of its clients
    /// complained within the last few seconds (each found no leader it
    /// could reach, and this one silent), it steps down (true).
    pub async fn check_complaints(&self) -> bool {
        if !self.is_leader() {
            return false;
        }
        let prefix = format!("{COMPLAINTS_KEY}{}/", self.id);
        let notes = match self.persist.notes(&prefix).await {
            Ok(n) => n,
            Err(e) => {
                tracing::debug!("complaints: {e}");
                return false;
            }
        };
        let now = unix_ms();
        let settled = self
            .serving_since
            .load(std::sync::atomic::Ordering::SeqCst)
            .saturating_add(COMPLAINT_SETTLE.as_millis() as u64);
        let lost: Vec<String> = notes
            .into_iter()
            .filter_map(|(k, v)| {
                let at = u64::from_be_bytes(<[u8; 8]>::try_from(v.as_slice()).ok()?);
                let client = k.strip_prefix(&prefix)?.to_string();
                // The streams of a client cut off from here stay open on
                // this side until keepalive gives up (15 s): only the
                // complaint's age counts.
                (at >= settled && now.saturating_sub(at) < COMPLAINT_FRESH.as_millis() as u64)
                    .then_some(client)
            })
            .collect();
        // Only clients this leader serves count: a certificate of the CA
        // for a subnet or router the fabric does not have complains about
        // nothing. Without TLS a client is its address and cannot be
        // checked: a plaintext control plane trusts its network.
        let clients = self.known_clients();
        let lost: Vec<String> = lost
            .into_iter()
            .filter(|c| clients.contains(c) || !c.starts_with("ibfabric://"))
            .collect();
        let known = clients.len().max(1);
        if !lost.is_empty() && lost.len() * 2 >= known {
            tracing::warn!(
                clients = ?lost,
                known,
                "most clients cannot reach this leader; stepping down"
            );
            self.step_down.notify_one();
            return true;
        }
        false
    }

    /// The query address an agent registered for a subnet.
    pub fn query_addr(&self, prefix: u64) -> Option<String> {
        self.lock().get(prefix).map(|e| e.query_addr.clone())
    }
}

/// Refusal of a store written by an older release, with what to do.
fn older_layout(detail: &str) -> ControlError {
    ControlError::StoreLayout(format!(
        "the store holds values this release cannot read ({detail}): it was written by an \
         older release, whose layout is not migrated. Stop every controller of the older \
         release, then start this one on an empty namespace (`prefix` in [store]) or after \
         removing the old one (`etcdctl del --prefix <prefix>`): the agents report their \
         subnets again within a lease and the routes are computed afresh"
    ))
}

/// Returns the pages freed by the last recomputation to the system. At the
/// LID limit a recomputation builds and drops hundreds of MB across
/// blocking threads, each with its own malloc arena; without this the
/// controller's resident size keeps the high mark of every arena.
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of glibc's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}
