//! The engines routed in rounds on workers ([`fabric::routing::rounds`]:
//! Nue's virtual layers, SSSP's streams): the units are dealt out (each
//! worker holds a session of some units) and routed round by round; after
//! every round the units' added loads are summed here and sent with the
//! next round. The loads of every round are kept, so a lost worker's units
//! start again elsewhere (another worker, or here when none is left) and
//! replay the rounds already routed: the tables equal one process's, byte
//! for byte, whoever computed what. Who holds which units, and what a
//! failed call does to them, is decided by [`super::deal`]; this file makes
//! the calls.

use super::deal::{Action, At, Deal, Failure, Group};
use super::{Client, CoordError, Farm, JobBytes, JobRun, PartRun, WorkerRun, job_id, open_worker};
use fabric::Fabric;
use fabric::routing::nue::{LayerCols, Stats};
use fabric::routing::rounds::{Held, Plan};
use fabric::routing::{EngineKind, EngineOptions};
use fabric::tables::Routing;
use proto::v1;
use std::sync::Arc;
use std::time::Instant;

/// A worker of the job: its run so far and its client (None once given
/// up on).
struct Remote {
    run: WorkerRun,
    client: Option<Client>,
    /// The workers' leases, when they were found in the store.
    leases: Option<store::registry::Leases>,
}

impl Remote {
    /// Resolves when the worker's lease in the store ends; never without
    /// leases.
    fn gone(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        match &self.leases {
            Some(l) => Box::pin(l.gone(&self.run.address)),
            None => Box::pin(std::future::pending()),
        }
    }

    /// The worker and its client, unless it was given up on.
    fn connected(&self) -> Result<(&Remote, &Client), StepError> {
        match &self.client {
            Some(c) => Ok((self, c)),
            None => Err(StepError::Failed(Failure::Lost("not connected".into()))),
        }
    }
}

/// Why a group's call failed: a failure the deal recovers from, or the
/// routing itself failed (the job fails, as it would in one process).
enum StepError {
    Failed(Failure),
    Fatal(fabric::Error),
}

impl StepError {
    fn from_status(s: tonic::Status, what: String) -> Self {
        let why = format!("{what}: {}", s.message());
        StepError::Failed(match s.code() {
            tonic::Code::FailedPrecondition => Failure::Dropped(why),
            tonic::Code::NotFound | tonic::Code::Aborted => Failure::Restart(why),
            _ => Failure::Lost(why),
        })
    }

    fn lost(why: impl Into<String>) -> Self {
        StepError::Failed(Failure::Lost(why.into()))
    }
}

/// What every call of the job shares.
struct Ctx<'a> {
    job: &'a str,
    f: &'a Fabric,
    engine: EngineKind,
    sssp_streams: u32,
    plan: &'a Plan,
    max_vls: u32,
    max_sls: u32,
    /// Bytes sent with rounds, and received, all calls together.
    sent: std::sync::atomic::AtomicU64,
    received: std::sync::atomic::AtomicU64,
}

/// The loads a reply carries: one per channel.
fn loads(b: &[u8], want: usize) -> Result<Vec<u64>, String> {
    match crate::wire::u64s_from_le(b) {
        Some(v) if v.len() == want => Ok(v),
        _ => Err(format!("{} load bytes for {want} channels", b.len())),
    }
}

/// Calls the worker unless its lease ends first.
async fn call(
    r: &Remote,
    c: &Client,
    req: v1::RoundRequest,
) -> Result<v1::RoundReply, tonic::Status> {
    let mut c = c.clone();
    tokio::select! {
        r = c.round(req) => r.map(|r| r.into_inner()),
        _ = r.gone() => Err(tonic::Status::unavailable(super::LEASE_ENDED)),
    }
}

/// Routes the group's rounds up to `upto` (replaying those a new holder
/// missed, from `history`) and returns the load it added in round `upto`;
/// `held`: its units when they are routed here.
async fn step(
    g: &mut Group,
    held: &mut Option<Box<Held>>,
    upto: usize,
    history: &[Vec<u64>],
    ctx: &Ctx<'_>,
    remotes: &[Remote],
) -> Result<Vec<u64>, StepError> {
    let mut last = Vec::new();
    while g.next <= upto {
        let global = &history[g.next];
        match g.at() {
            At::Here => {
                let units = held
                    .as_mut()
                    .ok_or_else(|| StepError::lost("the units here are finished"))?;
                let t = Instant::now();
                last = units
                    .round(ctx.f, ctx.plan, global)
                    .map_err(StepError::Fatal)?;
                g.seconds += t.elapsed().as_secs_f64();
            }
            At::Worker { w, session } => {
                let (r, c) = remotes[w].connected()?;
                let req = v1::RoundRequest {
                    job: ctx.job.to_string(),
                    session,
                    engine: ctx.engine.name().to_string(),
                    sssp_streams: ctx.sssp_streams,
                    units: if g.next == 0 {
                        g.ids().iter().map(|&l| l as u32).collect()
                    } else {
                        Vec::new()
                    },
                    max_vls: ctx.max_vls,
                    max_sls: ctx.max_sls,
                    round: g.next as u64,
                    global: crate::wire::u64s_to_le(global),
                    ..Default::default()
                };
                ctx.sent.fetch_add(
                    req.global.len() as u64,
                    std::sync::atomic::Ordering::Relaxed,
                );
                let reply = call(r, c, req).await.map_err(|s| {
                    StepError::from_status(
                        s,
                        format!("{}s {:?}, round {}", ctx.plan.unit_name(), g.ids(), g.next),
                    )
                })?;
                ctx.received.fetch_add(
                    reply.delta.len() as u64,
                    std::sync::atomic::Ordering::Relaxed,
                );
                last = loads(&reply.delta, ctx.plan.channels()).map_err(StepError::lost)?;
                g.seconds += reply.seconds;
            }
        }
        g.next += 1;
    }
    Ok(last)
}

/// The group's finished units, every round routed.
async fn finish(
    g: &mut Group,
    held: &mut Option<Box<Held>>,
    ctx: &Ctx<'_>,
    remotes: &[Remote],
) -> Result<Vec<LayerCols>, StepError> {
    match g.at() {
        At::Here => held
            .take()
            .map(|l| l.finish())
            .ok_or_else(|| StepError::lost("the units here are finished")),
        At::Worker { w, session } => {
            let (r, c) = remotes[w].connected()?;
            let mut out = Vec::with_capacity(g.ids().len());
            for l in g.ids().to_vec() {
                let req = v1::RoundRequest {
                    job: ctx.job.to_string(),
                    session,
                    finish: true,
                    finish_unit: l as u32,
                    ..Default::default()
                };
                let reply = call(r, c, req).await.map_err(|s| {
                    StepError::from_status(s, format!("{} {l}, finish", ctx.plan.unit_name()))
                })?;
                ctx.received.fetch_add(
                    reply.cols.len() as u64,
                    std::sync::atomic::Ordering::Relaxed,
                );
                if reply.unit as usize != l {
                    return Err(StepError::lost(format!(
                        "asked {0} {l}, answered {0} {1}",
                        ctx.plan.unit_name(),
                        reply.unit
                    )));
                }
                g.seconds += reply.seconds;
                out.push(LayerCols {
                    layer: l,
                    cols: reply.cols,
                    stats: Stats {
                        repairs: reply.repairs,
                        fallbacks: reply.fallbacks,
                        fixed: reply.fixed,
                        reruns: reply.reruns,
                        blocked: reply.blocked,
                        reorders: reply.reorders,
                        most_queued: reply.most_queued,
                    },
                });
            }
            Ok(out)
        }
    }
}

/// What a failed call does to group `g`: a routing error fails the job
/// (as in one process); otherwise the deal decides, and this makes its
/// calls (the job sent again, units started here) until the group has a
/// holder to replay on.
async fn recover(
    deal: &mut Deal,
    g: usize,
    e: StepError,
    remotes: &mut [Remote],
    held: &mut [Option<Box<Held>>],
    load: &JobBytes,
    plan: &Plan,
) -> Result<(), CoordError> {
    let f = match e {
        StepError::Fatal(e) => return Err(e.into()),
        StepError::Failed(f) => f,
    };
    let mut action = deal.fail(g, f);
    while let Action::SendJob { w, why } = action {
        let r = &remotes[w];
        tracing::info!(worker = %r.run.address, "{why}: loading the job there again");
        let sent = match r.client.clone() {
            None => Err("not connected".to_string()),
            Some(c) => tokio::select! {
                l = super::send_job(c, load) => l.map(|_| ()).map_err(|s| s.message().to_string()),
                _ = r.gone() => Err(super::LEASE_ENDED.to_string()),
            },
        };
        action = deal.reloaded(g, why, sent);
    }
    for (w, r) in remotes.iter_mut().enumerate() {
        if let Some(why) = deal.lost(w) {
            r.client = None;
            r.run.lost.get_or_insert_with(|| why.to_string());
        }
    }
    let grp = &deal.groups()[g];
    held[g] = match grp.at() {
        At::Here => {
            tracing::warn!(units = ?grp.ids(), "no worker left for these {}s: routing them here", plan.unit_name());
            Some(Box::new(plan.start(grp.ids())?))
        }
        At::Worker { .. } => None,
    };
    Ok(())
}

/// Routes `f` with `engine` (one that splits in rounds,
/// [`fabric::routing::Split::Rounds`]) on the workers of `farm` (see the
/// module doc).
pub async fn route_rounds(
    farm: &Farm,
    engine: EngineKind,
    f: &Fabric,
    topology: &[u8],
    engine_opts: &EngineOptions<'_>,
) -> Result<(Routing, JobRun), CoordError> {
    if farm.addrs.is_empty() {
        return Err(CoordError::NoWorkers);
    }
    let t0 = Instant::now();
    let plan = Plan::new(engine, f, engine_opts)?;
    let topology = Arc::new(topology.to_vec());
    let kind = format!("route {engine} {}", engine_opts.sssp_streams);
    let job = job_id(&topology, &[], &kind);
    let load = JobBytes {
        job: job.clone(),
        kind,
        topology: topology.clone(),
        tables: Arc::new(Vec::new()),
        chunk: farm.opts.chunk_bytes,
    };
    let (mut remotes, loaded) = open_all(farm, &load).await;
    let first_session = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0))
        << 8;
    let mut deal = Deal::new(&loaded, plan.units(), plan.rounds(), first_session);
    let mut held: Vec<Option<Box<Held>>> = Vec::with_capacity(deal.groups().len());
    for g in deal.groups() {
        held.push(match g.at() {
            At::Here => Some(Box::new(plan.start(g.ids())?)),
            At::Worker { .. } => None,
        });
    }
    if plan.rounds() == 0 {
        tracing::info!("nothing to route in rounds (no HCA to route to): finishing here");
    } else if remotes.iter().all(|r| r.client.is_none()) {
        tracing::warn!("no worker loaded the job: routing every unit here");
    }
    let live = loaded.iter().filter(|l| l.is_ok()).count();
    tracing::info!(%job, %engine, units = plan.units(), rounds = plan.rounds(), workers = live, "job dealt in rounds");
    let ctx = Ctx {
        job: &job,
        f,
        engine,
        sssp_streams: u32::from(engine_opts.sssp_streams),
        plan: &plan,
        max_vls: u32::from(engine_opts.max_vls),
        max_sls: u32::from(engine_opts.max_sls),
        sent: Default::default(),
        received: Default::default(),
    };
    let mut job_state = Rounds {
        deal: &mut deal,
        held: &mut held,
        remotes: &mut remotes,
        load: &load,
        ctx: &ctx,
    };
    let (history, global) = job_state.route_rounds(engine_opts).await?;
    let cols = job_state.finish_all(&history).await?;
    let (part_runs, local_parts) = accounting(&deal, &mut remotes, plan.units());
    let t = Instant::now();
    let routing = plan.tables(f, cols, &global)?;
    let (sent, received) = (
        ctx.sent.load(std::sync::atomic::Ordering::Relaxed),
        ctx.received.load(std::sync::atomic::Ordering::Relaxed),
    );
    let run = JobRun {
        job,
        kind: "route",
        parts: plan.units(),
        workers: remotes.into_iter().map(|r| r.run).collect(),
        part_runs,
        local_parts,
        bytes_per_load: topology.len() as u64,
        column_bytes: sent,
        reply_bytes: received,
        seconds: t0.elapsed().as_secs_f64(),
        merge_seconds: t.elapsed().as_secs_f64(),
    };
    Ok((routing, run))
}

/// Connects to every worker of `farm` and loads the job there, all at
/// once: the workers, and per worker whether the load succeeded or why
/// not.
async fn open_all(farm: &Farm, load: &JobBytes) -> (Vec<Remote>, Vec<Result<(), String>>) {
    let opened = futures::future::join_all(farm.addrs.iter().map(|addr| async move {
        let r = Remote {
            run: WorkerRun {
                address: addr.clone(),
                parts: 0,
                load_seconds: 0.0,
                part_seconds: 0.0,
                lost: None,
            },
            client: None,
            leases: farm.opts.leases.clone(),
        };
        let opened = open_worker(addr, &farm.transport, load, &mut r.gone()).await;
        (r, opened)
    }))
    .await;
    opened
        .into_iter()
        .map(|(mut r, opened)| {
            let loaded = match opened {
                Ok((c, secs)) => {
                    r.run.load_seconds = secs;
                    r.client = Some(c);
                    Ok(())
                }
                Err(why) => {
                    tracing::warn!(worker = %r.run.address, "worker lost: {why}");
                    r.run.lost = Some(why.clone());
                    Err(why)
                }
            };
            (r, loaded)
        })
        .unzip()
}

/// A job in rounds while it runs: the deal, the units held here, the
/// workers.
struct Rounds<'a, 'c> {
    deal: &'a mut Deal,
    held: &'a mut Vec<Option<Box<Held>>>,
    remotes: &'a mut Vec<Remote>,
    load: &'a JobBytes,
    ctx: &'a Ctx<'c>,
}

impl Rounds<'_, '_> {
    /// Routes every round, a round's groups side by side; a failed group
    /// recovers and the round is asked again of the groups behind. Returns
    /// the summed loads at the start of each round, and at the end.
    async fn route_rounds(
        &mut self,
        engine_opts: &EngineOptions<'_>,
    ) -> Result<(Vec<Vec<u64>>, Vec<u64>), CoordError> {
        let plan = self.ctx.plan;
        let mut history: Vec<Vec<u64>> = Vec::with_capacity(plan.rounds());
        let mut global = vec![0u64; plan.channels()];
        for r in 0..plan.rounds() {
            history.push(global.clone());
            // Until every group stepped round r: a failed group is moved
            // (recovered) and the round asked again of it.
            while self.round_once(r, &history, &mut global).await? {}
            engine_opts.report((r + 1) as u64, plan.rounds() as u64);
        }
        Ok((history, global))
    }

    /// Steps round `r` on every group due for it, adding their deltas to
    /// `global`; true when a group failed and was moved (ask again).
    async fn round_once(
        &mut self,
        r: usize,
        history: &[Vec<u64>],
        global: &mut [u64],
    ) -> Result<bool, CoordError> {
        let results = {
            let (remotes, ctx) = (&*self.remotes, self.ctx);
            futures::future::join_all(
                self.deal
                    .groups_mut()
                    .iter_mut()
                    .zip(self.held.iter_mut())
                    .enumerate()
                    .filter(|(_, (g, _))| g.next <= r)
                    .map(|(i, (g, h))| async move {
                        (i, step(g, h, r, history, ctx, remotes).await)
                    }),
            )
            .await
        };
        let mut moved = false;
        for (i, res) in results {
            match res {
                Ok(d) => global.iter_mut().zip(d).for_each(|(x, y)| *x += y),
                Err(e) => {
                    self.recover(i, e).await?;
                    moved = true;
                }
            }
        }
        Ok(moved)
    }

    /// Every group's finished units; a group moved at the end replays
    /// every round first.
    async fn finish_all(&mut self, history: &[Vec<u64>]) -> Result<Vec<LayerCols>, CoordError> {
        let rounds = self.ctx.plan.rounds();
        let mut cols = Vec::with_capacity(self.ctx.plan.units());
        for g in 0..self.deal.groups().len() {
            loop {
                let (grp, held) = (&mut self.deal.groups_mut()[g], &mut self.held[g]);
                let caught_up = if grp.next < rounds {
                    step(grp, held, rounds - 1, history, self.ctx, self.remotes)
                        .await
                        .map(|_| ())
                } else {
                    Ok(())
                };
                let res = match caught_up {
                    Ok(()) => finish(grp, held, self.ctx, self.remotes).await,
                    Err(e) => Err(e),
                };
                match res {
                    Ok(c) => {
                        cols.extend(c);
                        break;
                    }
                    Err(e) => self.recover(g, e).await?,
                }
            }
        }
        Ok(cols)
    }

    async fn recover(&mut self, g: usize, e: StepError) -> Result<(), CoordError> {
        recover(
            self.deal,
            g,
            e,
            self.remotes,
            self.held,
            self.load,
            self.ctx.plan,
        )
        .await
    }
}

/// Who routed which units, and how many were routed here.
fn accounting(deal: &Deal, remotes: &mut [Remote], units: usize) -> (Vec<PartRun>, usize) {
    let mut part_runs = Vec::with_capacity(units);
    let mut local_parts = 0;
    for g in deal.groups() {
        let by = match g.at() {
            At::Worker { w, .. } => {
                let r = &mut remotes[w].run;
                r.parts += g.ids().len();
                r.part_seconds += g.seconds;
                r.address.clone()
            }
            At::Here => {
                local_parts += g.ids().len();
                "local".to_string()
            }
        };
        for &l in g.ids() {
            part_runs.push(PartRun {
                start: l,
                end: l + 1,
                by: by.clone(),
                seconds: g.seconds / g.ids().len().max(1) as f64,
            });
        }
    }
    part_runs.sort_by_key(|p| p.start);
    (part_runs, local_parts)
}
