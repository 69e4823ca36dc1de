//! The worker's gRPC side: who may load jobs and ask for parts, and the
//! calls themselves. A job is named by a digest of its kind and content,
//! checked when it is loaded, so a part is always computed on the bytes
//! its coordinator sent; jobs are held per caller, so no caller can
//! replace or evict another's.

use super::*;
use proto::v1::worker_server::{Worker as WorkerRpc, WorkerServer};

/// The gRPC side. Jobs and parts are for the identities that coordinate:
/// controllers, workers' identities (what operators' commands present)
/// and the agents the worker admits ([`Worker::admit_agents`]); routers
/// and other agents are refused. `State` is open to any identity of the
/// CA.
pub struct Service {
    pub worker: Arc<Worker>,
    pub transport: ibtls::Transport,
}

/// Loads one caller may stream in at once.
const LOADS_PER_CALLER: usize = 2;

impl Service {
    /// The caller as jobs are held under (its identity; `insecure` on a
    /// plaintext transport), when it may coordinate.
    fn coordinator<T>(&self, req: &Request<T>) -> Result<String, Status> {
        let peer = self.transport.peer(req)?;
        match peer.identity() {
            None => Ok("insecure".into()),
            Some(id @ (ibtls::Identity::Controller | ibtls::Identity::Worker { .. })) => {
                Ok(id.to_uri())
            }
            Some(id @ ibtls::Identity::Agent { .. }) if self.worker.admits_agent(&id.to_uri()) => {
                Ok(id.to_uri())
            }
            Some(id) => Err(Status::permission_denied(format!(
                "{} may not use this worker: it serves controllers, operators (worker \
                 identities) and the agents its `coordinators` names",
                id.to_uri()
            ))),
        }
    }
}

/// A load in progress for a caller, counted until dropped.
struct Loading<'a> {
    worker: &'a Worker,
    owner: String,
}

impl<'a> Loading<'a> {
    fn start(worker: &'a Worker, owner: &str) -> Result<Self, Status> {
        let mut l = worker.loading.lock().unwrap_or_else(|p| p.into_inner());
        let n = l.entry(owner.to_string()).or_insert(0);
        if *n >= LOADS_PER_CALLER {
            return Err(Status::resource_exhausted(format!(
                "{owner} is loading {n} jobs here already"
            )));
        }
        *n += 1;
        Ok(Self {
            worker,
            owner: owner.to_string(),
        })
    }
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        let mut l = self
            .worker
            .loading
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(n) = l.get_mut(&self.owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                l.remove(&self.owner);
            }
        }
    }
}

/// Memory taken ahead for a load: the rest grows as bytes arrive, so a
/// first chunk that announces gigabytes costs nothing until they come.
const RESERVE_AHEAD: u64 = 64 << 20;

/// Largest topology or table blob a job may carry (a 48k-LID subnet's
/// tables are a few hundred MB).
const MAX_JOB_BYTES: u64 = 4 << 30;

#[tonic::async_trait]
impl WorkerRpc for Service {
    async fn load(
        &self,
        req: Request<Streaming<v1::JobChunk>>,
    ) -> Result<Response<v1::LoadReply>, Status> {
        let owner = self.coordinator(&req)?;
        let _loading = Loading::start(&self.worker, &owner)?;
        let t = std::time::Instant::now();
        let mut stream = req.into_inner();
        let mut job = String::new();
        let mut kind = String::new();
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
                kind = c.kind.clone();
                want_topo = c.topology_bytes;
                want_tables = c.tables_bytes;
                topo.reserve(want_topo.min(RESERVE_AHEAD) as usize);
                tables.reserve(want_tables.min(RESERVE_AHEAD) as usize);
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
        if crate::coordinator::job_id(&topo, &tables, &kind) != job {
            return Err(Status::invalid_argument(format!(
                "job {job}: the name is not the digest of its kind '{kind}' and content \
                 (a coordinator of an older release, or bytes that are not the job's)"
            )));
        }
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
        self.worker.insert(&owner, &job, parsed)?;
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
        let owner = self.coordinator(&req)?;
        let r = req.into_inner();
        let job = self.worker.loaded(&owner, &r.job)?;
        if job.routing.is_none() {
            return Err(Status::failed_precondition(format!(
                "job {} was loaded without tables (a routing job): nothing to verify",
                r.job
            )));
        }
        let n = job.fabric.end_lids().len() as u64;
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
        let owner = self.coordinator(&req)?;
        let r = req.into_inner();
        let job = self.worker.loaded(&owner, &r.job)?;
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
        let owner = self.coordinator(&req)?;
        let r = req.into_inner();
        let job = self.worker.loaded(&owner, &r.job)?;
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
            // Held as owner#name.
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
            most_queued: c.stats.most_queued,
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
    let (mut server, tls) = proto::client::server(&transport, PART_TIMEOUT, 16)?;
    let (_health, routes) = proto::ops::routes(&mut server, "ibfabric.v1.Worker").await?;
    let svc = WorkerServer::new(Service { worker, transport })
        .max_decoding_message_size(proto::client::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(proto::client::MAX_MESSAGE_BYTES);
    Ok(proto::ops::serve(routes.add_service(svc), listener, tls, shutdown).await?)
}

/// Deadline of one call: loading a large job or verifying a large part
/// takes minutes, not the control plane's seconds.
pub const PART_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
