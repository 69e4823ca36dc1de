//! The worker role: holds jobs (a fabric and its tables, loaded by a
//! caller) and computes parts of them: the verifier's walks toward a range
//! of destinations ([`fabric::verify::verify_part`]), DF-DN's base routing
//! toward a range of destination switches
//! ([`fabric::routing::shard::route_part`]), MinHop's LFT rows of a range
//! of switches ([`fabric::routing::shard::minhop_part`]; routing jobs are
//! loaded without tables), and the units of the engines routed in rounds
//! (Nue's layers, SSSP's streams) one round per call in sessions. The
//! caller ([`coordinator`], reached through [`exec`]) cuts the job as the
//! engine says it splits, hands parts to workers, gives a lost worker's
//! parts to the others, and merges: the result equals one process's,
//! whatever the cut.

pub mod config;
pub mod coordinator;
pub mod exec;

pub mod wire;

use fabric::Fabric;
use fabric::tables::Routing;
use proto::v1;
use proto::v1::worker_server::{Worker as WorkerRpc, WorkerServer};
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tonic::{Request, Response, Status, Streaming};

/// A loaded job: the fabric and the tables to work on (none for a
/// routing job).
pub struct Job {
    pub fabric: Fabric,
    pub routing: Option<Routing>,
    /// The BFS trees of a routing job, built by its first part.
    trees: std::sync::OnceLock<fabric::routing::trees::TreeParents>,
    /// The switch graph and its hop matrix, for MinHop parts.
    hops: std::sync::OnceLock<fabric::routing::shard::MinhopBase>,
    /// Sessions of the engines routed in rounds, by the caller's id,
    /// oldest first.
    sessions: Mutex<VecDeque<(u64, Arc<Mutex<Session>>)>>,
    /// Plans of the engines routed in rounds, by what fixes them: built
    /// once per job, shared by its sessions (a caller that moves units
    /// here after a loss does not pay for the plan again).
    plans: Mutex<Vec<(PlanKey, Arc<fabric::routing::rounds::Plan>)>>,
    /// SHA-256 of the topology and tables as loaded: the same job loaded
    /// again keeps this one, with its sessions and plans.
    digest: Vec<u8>,
}

/// Engine, VLs, SLs, SSSP streams.
type PlanKey = (fabric::routing::EngineKind, u8, u8, u16);

/// Some units of a job routed in rounds (Nue's layers, SSSP's streams),
/// between rounds.
struct Session {
    plan: Arc<fabric::routing::rounds::Plan>,
    /// The units while they route; None once finished.
    units: Option<fabric::routing::rounds::Held>,
    /// Finished units not yet returned.
    done: Vec<fabric::routing::nue::LayerCols>,
    /// The session's record in the store, given up when it ends.
    _held: Option<tokio::sync::oneshot::Sender<()>>,
}

/// Sessions a job keeps: a caller that went away leaves its session
/// behind, and a new one starts for the same units.
const MAX_SESSIONS: usize = 16;

/// Plans a job keeps (engine, VLs, SLs, streams as callers asked); the
/// oldest goes first.
const MAX_PLANS: usize = 4;

impl Job {
    pub fn new(fabric: Fabric, routing: Option<Routing>) -> Self {
        Self {
            fabric,
            routing,
            trees: std::sync::OnceLock::new(),
            hops: std::sync::OnceLock::new(),
            sessions: Mutex::new(VecDeque::new()),
            plans: Mutex::new(Vec::new()),
            digest: Vec::new(),
        }
    }
}

/// The worker's state: the jobs it holds (oldest dropped past
/// `max_jobs`) and what it has done.
pub struct Worker {
    pub name: String,
    max_jobs: usize,
    jobs: Mutex<VecDeque<(String, Arc<Job>)>>,
    parts_done: AtomicU64,
    /// Parts being computed, oldest first.
    working: Mutex<Vec<Working>>,
    tickets: AtomicU64,
    ledger: std::sync::OnceLock<Ledger>,
}

struct Working {
    ticket: u64,
    job: String,
    kind: &'static str,
    range: (u64, u64),
    since: std::time::Instant,
}

/// A part in progress, listed in the worker's state until dropped.
struct OnPart<'a> {
    worker: &'a Worker,
    ticket: u64,
    since: std::time::Instant,
    /// Its record in the store, given up when this drops.
    _held: Option<tokio::sync::oneshot::Sender<()>>,
}

/// Where a worker records the parts it holds: a store, and the lease
/// length.
struct Ledger {
    store: Arc<dyn store::Store>,
    ttl: std::time::Duration,
}

impl OnPart<'_> {
    /// Counts the part as done; its seconds.
    fn finish(self) -> f64 {
        self.worker.parts_done.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("ibfabric_worker_parts_total").increment(1);
        let secs = self.since.elapsed().as_secs_f64();
        metrics::histogram!("ibfabric_worker_part_seconds").record(secs);
        secs
    }
}

impl Drop for OnPart<'_> {
    fn drop(&mut self) {
        self.worker
            .working
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|w| w.ticket != self.ticket);
    }
}

impl Worker {
    pub fn new(name: impl Into<String>, max_jobs: usize) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            max_jobs: max_jobs.max(1),
            jobs: Mutex::new(VecDeque::new()),
            parts_done: AtomicU64::new(0),
            working: Mutex::new(Vec::new()),
            tickets: AtomicU64::new(0),
            ledger: std::sync::OnceLock::new(),
        })
    }

    /// Records every part from now on in `store`, under a lease of `ttl`
    /// held while the part is computed ([`store::registry::held_parts`]): a
    /// worker that dies loses the lease, and the record goes with it.
    pub fn record_parts_in(&self, store: Arc<dyn store::Store>, ttl: std::time::Duration) {
        let _ = self.ledger.set(Ledger { store, ttl });
    }

    /// Holds `part`'s record in the store until the returned sender drops;
    /// None without a store. Runs in the background: a part never waits
    /// for the store (a record still held by a lost holder's lease is
    /// taken over once that lease ends).
    fn hold(&self, part: String) -> Option<tokio::sync::oneshot::Sender<()>> {
        let l = self.ledger.get()?;
        let rt = tokio::runtime::Handle::try_current().ok()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (store, ttl, name) = (l.store.clone(), l.ttl, self.name.clone());
        let election = format!("{}{part}", store::registry::PART);
        rt.spawn(async move {
            tokio::pin!(rx);
            let guard = tokio::select! {
                g = store.campaign(&election, &name, ttl) => g,
                _ = &mut rx => return,
            };
            match guard {
                Ok(g) => {
                    let _ = rx.await;
                    if let Err(e) = g.resign().await {
                        tracing::debug!(%election, error = %e, "part record not resigned; its lease ends it");
                    }
                }
                Err(e) => tracing::warn!(%election, error = %e, "cannot record the part in the store"),
            }
        });
        Some(tx)
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, VecDeque<(String, Arc<Job>)>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn job(&self, id: &str) -> Option<Arc<Job>> {
        self.jobs()
            .iter()
            .find(|(j, _)| j == id)
            .map(|(_, job)| job.clone())
    }

    /// The job `id`, or the status that makes the caller load it again.
    fn loaded(&self, id: &str) -> Result<Arc<Job>, Status> {
        self.job(id)
            .ok_or_else(|| Status::failed_precondition(format!("job {id} is not loaded here")))
    }

    /// Lists a part as in progress until the guard drops, and records it
    /// in the store if `record` (sessions of units routed in rounds are
    /// recorded once, not each round).
    fn on_part(
        &self,
        job: &str,
        kind: &'static str,
        start: u64,
        end: u64,
        record: bool,
    ) -> OnPart<'_> {
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        let since = std::time::Instant::now();
        self.working
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Working {
                ticket,
                job: job.to_string(),
                kind,
                range: (start, end),
                since,
            });
        let held = if record {
            self.hold(format!("{job}-{}-{start}-{end}", kind.replace(' ', "-")))
        } else {
            None
        };
        OnPart {
            worker: self,
            ticket,
            since,
            _held: held,
        }
    }

    /// The parts in progress, oldest first.
    pub fn working(&self) -> Vec<v1::PartInProgress> {
        self.working
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|w| v1::PartInProgress {
                job: w.job.clone(),
                kind: w.kind.to_string(),
                start: w.range.0,
                end: w.range.1,
                seconds: w.since.elapsed().as_secs_f64(),
            })
            .collect()
    }

    fn insert(&self, id: String, job: Job) {
        let mut jobs = self.jobs();
        // The same job again (another caller, or one that found it gone
        // while it was only its session): keep the one held, with its
        // sessions, as the newest.
        if let Some(at) = jobs
            .iter()
            .position(|(j, held)| *j == id && held.digest == job.digest)
        {
            if let Some(kept) = jobs.remove(at) {
                jobs.push_back(kept);
            }
            return;
        }
        jobs.retain(|(j, _)| *j != id);
        jobs.push_back((id, Arc::new(job)));
        while jobs.len() > self.max_jobs {
            jobs.pop_front();
        }
    }
}

/// The gRPC side: any identity of the CA may load jobs and ask for parts.
pub struct Service {
    pub worker: Arc<Worker>,
    pub transport: ibtls::Transport,
}

/// Largest topology or table blob a job may carry (a 48k-LID subnet's
/// tables are a few hundred MB).
const MAX_JOB_BYTES: u64 = 4 << 30;

#[tonic::async_trait]
impl WorkerRpc for Service {
    async fn load(
        &self,
        req: Request<Streaming<v1::JobChunk>>,
    ) -> Result<Response<v1::LoadReply>, Status> {
        self.transport.peer(&req)?;
        let t = std::time::Instant::now();
        let mut stream = req.into_inner();
        let mut job = String::new();
        let (mut topo, mut tables) = (Vec::new(), Vec::new());
        let (mut want_topo, mut want_tables) = (0u64, 0u64);
        let mut first = true;
        while let Some(c) = stream.message().await? {
            if first {
                if c.job.is_empty() {
                    return Err(Status::invalid_argument("the first chunk names no job"));
                }
                if c.topology_bytes > MAX_JOB_BYTES || c.tables_bytes > MAX_JOB_BYTES {
                    return Err(Status::resource_exhausted(format!(
                        "a job of {} + {} bytes is over the worker's {MAX_JOB_BYTES}",
                        c.topology_bytes, c.tables_bytes
                    )));
                }
                job = c.job.clone();
                want_topo = c.topology_bytes;
                want_tables = c.tables_bytes;
                topo.reserve(want_topo as usize);
                tables.reserve(want_tables as usize);
                first = false;
            }
            topo.extend_from_slice(&c.topology);
            tables.extend_from_slice(&c.tables);
            if topo.len() as u64 > want_topo || tables.len() as u64 > want_tables {
                return Err(Status::invalid_argument(
                    "more bytes than the first chunk announced",
                ));
            }
        }
        if first || topo.len() as u64 != want_topo || tables.len() as u64 != want_tables {
            return Err(Status::invalid_argument(format!(
                "job {job}: {} of {want_topo} topology bytes and {} of {want_tables} table bytes arrived",
                topo.len(),
                tables.len()
            )));
        }
        let digest = Sha256::new()
            .chain_update(&topo)
            .chain_update(&tables)
            .finalize()
            .to_vec();
        let (id, d) = (job.clone(), digest.clone());
        let parsed = tokio::task::spawn_blocking(move || -> Result<Job, String> {
            // Coordinators send the fabric in its binary form; text from
            // an older one is still read.
            let fabric = if fabric::formats::fabric_bin::is_binary(&topo) {
                fabric::formats::fabric_bin::read(&topo).map_err(|e| format!("job {id}: {e}"))?
            } else {
                let text = std::str::from_utf8(&topo).map_err(|e| format!("topology: {e}"))?;
                fabric::formats::ibnetdiscover::parse(
                    text,
                    std::path::Path::new(&format!("job {id}")),
                )
                .map_err(|e| e.to_string())?
            };
            let routing = if tables.is_empty() {
                None
            } else {
                Some(Routing::from_bytes(&fabric, &tables).map_err(|e| format!("tables: {e}"))?)
            };
            let mut job = Job::new(fabric, routing);
            job.digest = d;
            Ok(job)
        })
        .await
        .map_err(|e| Status::internal(format!("load task: {e}")))?
        .map_err(Status::invalid_argument)?;
        self.worker.insert(job.clone(), parsed);
        tracing::info!(%job, secs = t.elapsed().as_secs_f64(), "job loaded");
        Ok(Response::new(v1::LoadReply {
            job,
            digest,
            seconds: t.elapsed().as_secs_f64(),
        }))
    }

    async fn verify_part(
        &self,
        req: Request<v1::VerifyPartRequest>,
    ) -> Result<Response<v1::VerifyPartReply>, Status> {
        self.transport.peer(&req)?;
        let r = req.into_inner();
        let job = self.worker.loaded(&r.job)?;
        if job.routing.is_none() {
            return Err(Status::failed_precondition(format!(
                "job {} was loaded without tables (a routing job): nothing to verify",
                r.job
            )));
        }
        let n = job.fabric.endports().len() as u64;
        if r.start > r.end || r.end > n {
            return Err(Status::invalid_argument(format!(
                "destinations {}..{} of a job with {n}",
                r.start, r.end
            )));
        }
        let on = self.worker.on_part(&r.job, "verify", r.start, r.end, true);
        let part = tokio::task::spawn_blocking(move || {
            let range = r.start as usize..r.end as usize;
            let Some(routing) = job.routing.as_ref() else {
                return Err("the job holds no tables".to_string());
            };
            if r.columns {
                fabric::verify::verify_part_columns(
                    &job.fabric,
                    routing,
                    range,
                    &r.lft_columns,
                    &r.sl_columns,
                )
                .map_err(|e| e.to_string())
            } else {
                Ok(fabric::verify::verify_part(&job.fabric, routing, range))
            }
        })
        .await
        .map_err(|e| Status::internal(format!("verify task: {e}")))?
        .map_err(Status::invalid_argument)?;
        Ok(Response::new(wire::part_to_wire(&part, on.finish())))
    }

    async fn route_part(
        &self,
        req: Request<v1::RoutePartRequest>,
    ) -> Result<Response<v1::RoutePartReply>, Status> {
        self.transport.peer(&req)?;
        let r = req.into_inner();
        let job = self.worker.loaded(&r.job)?;
        let n = job.fabric.switches().len() as u64;
        if r.start > r.end || r.end > n {
            return Err(Status::invalid_argument(format!(
                "switches {}..{} of a job with {n}",
                r.start, r.end
            )));
        }
        let range = r.start as usize..r.end as usize;
        match r.engine.as_str() {
            "" | "dfdn" => {
                let on = self.worker.on_part(&r.job, "route", r.start, r.end, true);
                let part = tokio::task::spawn_blocking(move || {
                    let trees = job
                        .trees
                        .get_or_init(|| fabric::routing::trees::TreeParents::new(&job.fabric));
                    fabric::routing::shard::route_part(&job.fabric, trees, range)
                })
                .await
                .map_err(|e| Status::internal(format!("route task: {e}")))?;
                Ok(Response::new(wire::route_part_to_wire(&part, on.finish())))
            }
            "minhop" => {
                let on = self
                    .worker
                    .on_part(&r.job, "route minhop", r.start, r.end, true);
                let part = tokio::task::spawn_blocking(move || {
                    let base = job
                        .hops
                        .get_or_init(|| fabric::routing::shard::MinhopBase::new(&job.fabric));
                    fabric::routing::shard::minhop_part(&job.fabric, base, range)
                })
                .await
                .map_err(|e| Status::internal(format!("route task: {e}")))?;
                Ok(Response::new(wire::rows_part_to_wire(&part, on.finish())))
            }
            other => Err(Status::invalid_argument(format!(
                "engine '{other}' is not cut across workers (dfdn and minhop are; nue and SSSP streams go by Round)"
            ))),
        }
    }

    async fn round(
        &self,
        req: Request<v1::RoundRequest>,
    ) -> Result<Response<v1::RoundReply>, Status> {
        self.transport.peer(&req)?;
        let r = req.into_inner();
        let job = self.worker.loaded(&r.job)?;
        let kind = if r.finish { "finish" } else { "round" };
        let on = self
            .worker
            .on_part(&r.job, kind, r.round, r.round + 1, false);
        let t = std::time::Instant::now();
        let (session, round, finish) = (r.session, r.round, r.finish);
        let worker = self.worker.clone();
        let mut reply = tokio::task::spawn_blocking(move || round_step(&worker, &job, r))
            .await
            .map_err(|e| Status::internal(format!("round task: {e}")))??;
        on.finish();
        reply.seconds = t.elapsed().as_secs_f64();
        if finish {
            tracing::info!(session, unit = reply.unit, "unit returned");
        } else {
            tracing::info!(session, round, secs = reply.seconds, "round routed");
        }
        Ok(Response::new(reply))
    }

    async fn state(
        &self,
        req: Request<v1::WorkerStateRequest>,
    ) -> Result<Response<v1::WorkerState>, Status> {
        self.transport.peer(&req)?;
        Ok(Response::new(v1::WorkerState {
            name: self.worker.name.clone(),
            jobs: self.worker.jobs().iter().map(|(j, _)| j.clone()).collect(),
            parts_done: self.worker.parts_done.load(Ordering::Relaxed),
            working: self.worker.working(),
        }))
    }
}

/// The plan `r` names, built once per job.
fn plan_for(job: &Job, r: &v1::RoundRequest) -> Result<Arc<fabric::routing::rounds::Plan>, Status> {
    let engine = if r.engine.is_empty() {
        fabric::routing::EngineKind::Nue
    } else {
        r.engine
            .parse()
            .map_err(|e: fabric::Error| Status::invalid_argument(e.to_string()))?
    };
    let opts = fabric::routing::EngineOptions {
        max_vls: u8::try_from(r.max_vls).unwrap_or(u8::MAX),
        max_sls: u8::try_from(r.max_sls).unwrap_or(u8::MAX),
        sssp_streams: u16::try_from(r.sssp_streams)
            .map_err(|_| Status::invalid_argument(format!("{} SSSP streams", r.sssp_streams)))?,
        ..Default::default()
    };
    let key = (engine, opts.max_vls, opts.max_sls, opts.sssp_streams);
    if let Some((_, p)) = job
        .plans
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|(k, _)| *k == key)
    {
        return Ok(p.clone());
    }
    // Built outside the lock: a Nue plan takes seconds on large fabrics.
    let plan = Arc::new(
        fabric::routing::rounds::Plan::new(engine, &job.fabric, &opts)
            .map_err(|e| Status::invalid_argument(e.to_string()))?,
    );
    let mut plans = job.plans.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, p)) = plans.iter().find(|(k, _)| *k == key) {
        return Ok(p.clone());
    }
    plans.push((key, plan.clone()));
    if plans.len() > MAX_PLANS {
        plans.remove(0);
    }
    Ok(plan)
}

/// One call of a session: start it (round 0), route its next round, or
/// hand back one finished unit.
fn round_step(worker: &Worker, job: &Job, r: v1::RoundRequest) -> Result<v1::RoundReply, Status> {
    let known = job
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|(id, _)| *id == r.session)
        .map(|(_, s)| s.clone());
    let session = match known {
        Some(s) => s,
        None if r.round == 0 && !r.finish => {
            let plan = plan_for(job, &r)?;
            let ids: Vec<usize> = r.units.iter().map(|&l| l as usize).collect();
            let units = plan
                .start(&ids)
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            let list: Vec<String> = ids.iter().map(|l| l.to_string()).collect();
            let s = Arc::new(Mutex::new(Session {
                _held: worker.hold(format!(
                    "{}-{}s-{}",
                    r.job,
                    plan.unit_name(),
                    list.join("_")
                )),
                plan,
                units: Some(units),
                done: Vec::new(),
            }));
            let mut sessions = job.sessions.lock().unwrap_or_else(|p| p.into_inner());
            sessions.push_back((r.session, s.clone()));
            while sessions.len() > MAX_SESSIONS {
                sessions.pop_front();
            }
            s
        }
        // The job is here but not the session (evicted, or never started):
        // NOT_FOUND, so the caller starts a new one without sending the
        // job again (FAILED_PRECONDITION says the job is gone).
        None => {
            return Err(Status::not_found(format!(
                "session {} is not held here",
                r.session
            )));
        }
    };
    let mut s = session.lock().unwrap_or_else(|p| p.into_inner());
    let s = &mut *s;
    let unit = s.plan.unit_name();
    if r.finish {
        if let Some(units) = s.units.take() {
            if units.rounds_done() != s.plan.rounds() {
                let done = units.rounds_done();
                s.units = Some(units);
                return Err(Status::aborted(format!(
                    "session {}: {done} of {} rounds routed, nothing to finish",
                    r.session,
                    s.plan.rounds()
                )));
            }
            s.done = units.finish();
        }
        let at = s
            .done
            .iter()
            .position(|c| c.layer == r.finish_unit as usize)
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "session {} holds no finished {unit} {}",
                    r.session, r.finish_unit
                ))
            })?;
        let c = s.done.swap_remove(at);
        if s.done.is_empty() {
            job.sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|(id, _)| *id != r.session);
        }
        return Ok(v1::RoundReply {
            round: s.plan.rounds() as u64,
            unit: c.layer as u32,
            cols: c.cols,
            repairs: c.stats.repairs,
            fallbacks: c.stats.fallbacks,
            fixed: c.stats.fixed,
            reruns: c.stats.reruns,
            blocked: c.stats.blocked,
            reorders: c.stats.reorders,
            ..Default::default()
        });
    }
    let Some(units) = s.units.as_mut() else {
        return Err(Status::aborted(format!(
            "session {} is finished",
            r.session
        )));
    };
    if r.round != units.rounds_done() as u64 {
        return Err(Status::aborted(format!(
            "session {}: asked round {}, next is {}",
            r.session,
            r.round,
            units.rounds_done()
        )));
    }
    let global = wire::u64s_from_le(&r.global).ok_or_else(|| {
        Status::invalid_argument(format!(
            "{} load bytes: not whole 64-bit words",
            r.global.len()
        ))
    })?;
    let delta = units
        .round(&job.fabric, &s.plan, &global)
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    Ok(v1::RoundReply {
        round: r.round,
        delta: wire::u64s_to_le(&delta),
        ..Default::default()
    })
}

/// Serves the worker on `listener` until `shutdown` turns true.
pub async fn serve(
    worker: Arc<Worker>,
    transport: ibtls::Transport,
    listener: tokio::net::TcpListener,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<(), proto::client::ServeError> {
    let mut server = proto::client::server(&transport, PART_TIMEOUT, 16)?;
    let (_health, routes) = proto::ops::routes(&mut server, "ibfabric.v1.Worker").await?;
    let svc = WorkerServer::new(Service { worker, transport })
        .max_decoding_message_size(proto::client::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(proto::client::MAX_MESSAGE_BYTES);
    Ok(proto::ops::serve(routes.add_service(svc), listener, shutdown).await?)
}

/// Deadline of one call: loading a large job or verifying a large part
/// takes minutes, not the control plane's seconds.
pub const PART_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_job_loaded_again_keeps_what_it_holds() {
        let df2 = || {
            fabric::generate::generate(&fabric::generate::Topology::Dragonfly { p: 2, hosts: None })
                .expect("df2")
        };
        let job = |digest: u8| {
            let mut j = Job::new(df2(), None);
            j.digest = vec![digest];
            j
        };
        let w = Worker::new("w", 2);
        w.insert("j".into(), job(1));
        let held = w.loaded("j").expect("held");
        w.insert("j".into(), job(1));
        let again = w.loaded("j").expect("held");
        assert!(Arc::ptr_eq(&held, &again), "its sessions and plans stay");
        w.insert("j".into(), job(2));
        let other = w.loaded("j").expect("held");
        assert!(
            !Arc::ptr_eq(&held, &other),
            "other bytes under the same name replace it"
        );
    }

    #[test]
    fn a_part_is_listed_while_it_runs_and_not_after() {
        let w = Worker::new("w", 2);
        let a = w.on_part("j1", "route", 0, 10, false);
        {
            let _b = w.on_part("j1", "verify", 10, 20, false);
            let now = w.working();
            assert_eq!(now.len(), 2);
            assert_eq!(
                (now[0].kind.as_str(), now[0].start, now[0].end),
                ("route", 0, 10)
            );
            assert_eq!(
                (now[1].kind.as_str(), now[1].start, now[1].end),
                ("verify", 10, 20)
            );
        }
        assert_eq!(w.working().len(), 1, "the failed part left the list");
        assert_eq!(
            w.parts_done.load(Ordering::Relaxed),
            0,
            "and was not counted"
        );
        a.finish();
        assert!(w.working().is_empty());
        assert_eq!(
            w.parts_done.load(Ordering::Relaxed),
            1,
            "the finished one was"
        );
    }
}
