//! The engines routed in rounds on workers ([`fabric::routing::rounds`]:
//! Nue's virtual layers, SSSP's streams): the units are dealt out (each
//! worker holds a session of some units) and routed round by round; after
//! every round the units' added loads are summed here and sent with the
//! next round. The loads of every round are kept, so a lost worker's units
//! start again elsewhere (another worker, or here when none is left) and
//! replay the rounds already routed: the tables equal one process's, byte
//! for byte, whoever computed what.

use super::{Client, CoordError, Farm, JobRun, Load, PartRun, WorkerRun, job_id, open_worker};
use fabric::Fabric;
use fabric::routing::nue::{LayerCols, Stats};
use fabric::routing::rounds::{Held, Plan};
use fabric::routing::{EngineKind, EngineOptions};
use fabric::tables::Routing;
use proto::v1;
use std::sync::Arc;
use std::time::Instant;

/// Where a group of units is routed.
enum At {
    /// A session on worker `w` (index into the workers).
    Worker { w: usize, session: u64 },
    /// Here; None once finished.
    Here(Option<Box<Held>>),
}

struct Group {
    ids: Vec<usize>,
    at: At,
    /// Rounds the holder has routed.
    next: usize,
    /// Seconds the holders reported for this group's calls.
    seconds: f64,
    /// Times the job was loaded again on the group's worker.
    reloads: u32,
}

struct Remote {
    run: WorkerRun,
    client: Option<Client>,
    /// The workers' leases, when they were found in the store.
    leases: Option<store::registry::Leases>,
    /// Units it holds now.
    holds: usize,
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
            None => Err(StepError::Lost("not connected".into())),
        }
    }
}

/// Why a group's call failed: its worker is lost (the group moves), it no
/// longer holds the job (restarted, or dropped it for newer ones: the job
/// is loaded there again and the group replays in a new session), it holds
/// the job but not the session or not at that round (a new session
/// replays), or the routing itself failed (the job fails, as it would in
/// one process).
enum StepError {
    Lost(String),
    Dropped(String),
    Restart(String),
    Fatal(fabric::Error),
}

/// Times a group starts again on its worker (the job sent again, or a new
/// session) before it moves elsewhere: a worker that keeps dropping it is
/// too busy.
const RELOADS: u32 = 2;

impl StepError {
    fn from_status(s: tonic::Status, what: String) -> Self {
        let why = format!("{what}: {}", s.message());
        match s.code() {
            tonic::Code::FailedPrecondition => StepError::Dropped(why),
            tonic::Code::NotFound | tonic::Code::Aborted => StepError::Restart(why),
            _ => StepError::Lost(why),
        }
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
/// missed, from `history`) and returns the load it added in round `upto`.
async fn step(
    g: &mut Group,
    upto: usize,
    history: &[Vec<u64>],
    ctx: &Ctx<'_>,
    remotes: &[Remote],
) -> Result<Vec<u64>, StepError> {
    let mut last = Vec::new();
    while g.next <= upto {
        let global = &history[g.next];
        match &mut g.at {
            At::Here(held) => {
                let units = held
                    .as_mut()
                    .ok_or_else(|| StepError::Lost("the units here are finished".into()))?;
                let t = Instant::now();
                last = units
                    .round(ctx.f, ctx.plan, global)
                    .map_err(StepError::Fatal)?;
                g.seconds += t.elapsed().as_secs_f64();
            }
            At::Worker { w, session } => {
                let (r, c) = remotes[*w].connected()?;
                let req = v1::RoundRequest {
                    job: ctx.job.to_string(),
                    session: *session,
                    engine: ctx.engine.name().to_string(),
                    sssp_streams: ctx.sssp_streams,
                    units: if g.next == 0 {
                        g.ids.iter().map(|&l| l as u32).collect()
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
                        format!("{}s {:?}, round {}", ctx.plan.unit_name(), g.ids, g.next),
                    )
                })?;
                ctx.received.fetch_add(
                    reply.delta.len() as u64,
                    std::sync::atomic::Ordering::Relaxed,
                );
                last = loads(&reply.delta, ctx.plan.channels()).map_err(StepError::Lost)?;
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
    ctx: &Ctx<'_>,
    remotes: &[Remote],
) -> Result<Vec<LayerCols>, StepError> {
    match &mut g.at {
        At::Here(held) => held
            .take()
            .map(|l| l.finish())
            .ok_or_else(|| StepError::Lost("the units here are finished".into())),
        At::Worker { w, session } => {
            let (r, c) = remotes[*w].connected()?;
            let mut out = Vec::with_capacity(g.ids.len());
            for &l in &g.ids {
                let req = v1::RoundRequest {
                    job: ctx.job.to_string(),
                    session: *session,
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
                    return Err(StepError::Lost(format!(
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
                    },
                });
            }
            Ok(out)
        }
    }
}

/// Gives the group of a lost worker to the live worker holding the fewest
/// units, or to this process when none is left; the new holder starts
/// at round 0.
fn move_group(
    g: &mut Group,
    why: String,
    remotes: &mut [Remote],
    plan: &Plan,
    sessions: &mut u64,
) -> Result<(), CoordError> {
    if let At::Worker { w, .. } = g.at {
        let r = &mut remotes[w];
        tracing::warn!(worker = %r.run.address, "worker lost: {why}");
        if r.run.lost.is_none() {
            r.run.lost = Some(why);
        }
        r.client = None;
        r.holds = r.holds.saturating_sub(g.ids.len());
    }
    let best = remotes
        .iter()
        .enumerate()
        .filter(|(_, r)| r.client.is_some())
        .min_by_key(|(i, r)| (r.holds, *i))
        .map(|(i, _)| i);
    g.next = 0;
    g.at = match best {
        Some(w) => {
            remotes[w].holds += g.ids.len();
            *sessions += 1;
            At::Worker {
                w,
                session: *sessions,
            }
        }
        None => {
            tracing::warn!(units = ?g.ids, "no worker left for these {}s: routing them here", plan.unit_name());
            At::Here(Some(Box::new(plan.start(&g.ids)?)))
        }
    };
    Ok(())
}

/// What a failed call does to its group: a routing error fails the job
/// (as in one process); otherwise the group starts again on its worker or
/// moves ([`StepError`]).
async fn recover(
    g: &mut Group,
    e: StepError,
    remotes: &mut [Remote],
    load: &super::Load,
    plan: &Plan,
    sessions: &mut u64,
) -> Result<(), CoordError> {
    match e {
        StepError::Fatal(e) => Err(e.into()),
        StepError::Lost(why) => move_group(g, why, remotes, plan, sessions),
        StepError::Dropped(why) => reload(g, why, true, remotes, load, plan, sessions).await,
        StepError::Restart(why) => reload(g, why, false, remotes, load, plan, sessions).await,
    }
}

/// The group's worker no longer holds the job (`send_job`) or the session:
/// sends it the job again if needed and restarts the group there in a new
/// session at round 0 (it replays the rounds from the loads kept here),
/// unless that happened too often or the load fails; then the group moves
/// as from a lost worker.
async fn reload(
    g: &mut Group,
    why: String,
    send_job: bool,
    remotes: &mut [Remote],
    load: &super::Load,
    plan: &Plan,
    sessions: &mut u64,
) -> Result<(), CoordError> {
    let At::Worker { w, .. } = g.at else {
        return move_group(g, why, remotes, plan, sessions);
    };
    if g.reloads >= RELOADS {
        let why = format!("{why} (dropped the job {} times)", g.reloads + 1);
        return move_group(g, why, remotes, plan, sessions);
    }
    g.reloads += 1;
    let r = &remotes[w];
    let Some(c) = r.client.clone() else {
        return move_group(g, why, remotes, plan, sessions);
    };
    let loaded = if send_job {
        tracing::info!(worker = %r.run.address, "{why}: loading the job there again");
        tokio::select! {
            l = super::load_job(c, load) => l.map(|_| ()).map_err(|s| s.message().to_string()),
            _ = r.gone() => Err(super::LEASE_ENDED.to_string()),
        }
    } else {
        tracing::info!(worker = %r.run.address, "{why}: starting a new session there");
        Ok(())
    };
    match loaded {
        Ok(_) => {
            *sessions += 1;
            g.at = At::Worker {
                w,
                session: *sessions,
            };
            g.next = 0;
            Ok(())
        }
        Err(e) => move_group(
            g,
            format!("{why}; loading it again: {e}"),
            remotes,
            plan,
            sessions,
        ),
    }
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
    let (addrs, transport, opts) = (&farm.addrs, &farm.transport, &farm.opts);
    if addrs.is_empty() {
        return Err(CoordError::NoWorkers);
    }
    let t0 = Instant::now();
    let plan = Plan::new(engine, f, engine_opts)?;
    let topology = Arc::new(topology.to_vec());
    let job = job_id(
        &topology,
        &[],
        &format!("route {engine} {}", engine_opts.sssp_streams),
    );
    let load = Load {
        job: job.clone(),
        topology: topology.clone(),
        tables: Arc::new(Vec::new()),
        chunk: opts.chunk_bytes,
    };
    // Connect and load everywhere at once.
    let remote = |address: &String| Remote {
        run: WorkerRun {
            address: address.clone(),
            parts: 0,
            load_seconds: 0.0,
            part_seconds: 0.0,
            lost: None,
        },
        client: None,
        leases: opts.leases.clone(),
        holds: 0,
    };
    let opened = futures::future::join_all(addrs.iter().map(|addr| {
        let (load, r) = (&load, remote(addr));
        async move {
            let opened = open_worker(addr, transport, load, &mut r.gone()).await;
            (r, opened)
        }
    }))
    .await;
    let mut remotes: Vec<Remote> = opened
        .into_iter()
        .map(|(mut r, opened)| {
            let run = &mut r.run;
            r.client = match opened {
                Ok((c, secs)) => {
                    run.load_seconds = secs;
                    Some(c)
                }
                Err(why) => {
                    tracing::warn!(worker = %run.address, "worker lost: {why}");
                    run.lost = Some(why);
                    None
                }
            };
            r
        })
        .collect();
    // Units dealt round robin over the workers that loaded the job.
    let live: Vec<usize> = (0..remotes.len())
        .filter(|&i| remotes[i].client.is_some())
        .collect();
    let mut sessions = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0))
        << 8;
    let mut groups: Vec<Group> = Vec::new();
    if live.is_empty() || plan.rounds() == 0 {
        if plan.rounds() == 0 {
            tracing::info!("nothing to route in rounds (no HCA to route to): finishing here");
        } else {
            tracing::warn!("no worker loaded the job: routing every unit here");
        }
        groups.push(Group {
            ids: (0..plan.units()).collect(),
            at: At::Here(Some(Box::new(
                plan.start(&(0..plan.units()).collect::<Vec<_>>())?,
            ))),
            next: 0,
            seconds: 0.0,
            reloads: 0,
        });
    } else {
        for (j, &w) in live.iter().enumerate().take(plan.units()) {
            let ids: Vec<usize> = (j..plan.units()).step_by(live.len()).collect();
            remotes[w].holds += ids.len();
            sessions += 1;
            groups.push(Group {
                ids,
                at: At::Worker {
                    w,
                    session: sessions,
                },
                next: 0,
                seconds: 0.0,
                reloads: 0,
            });
        }
    }
    tracing::info!(%job, %engine, units = plan.units(), rounds = plan.rounds(), workers = live.len(), "job dealt in rounds");
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
    let mut history: Vec<Vec<u64>> = Vec::with_capacity(plan.rounds());
    let mut global = vec![0u64; plan.channels()];
    for r in 0..plan.rounds() {
        history.push(global.clone());
        loop {
            let results = {
                let remotes = &remotes;
                let history = &history;
                let ctx = &ctx;
                futures::future::join_all(
                    groups
                        .iter_mut()
                        .enumerate()
                        .filter(|(_, g)| g.next <= r)
                        .map(|(i, g)| async move { (i, step(g, r, history, ctx, remotes).await) }),
                )
                .await
            };
            let mut moved = false;
            for (i, res) in results {
                match res {
                    Ok(d) => global.iter_mut().zip(d).for_each(|(x, y)| *x += y),
                    Err(e) => {
                        let g = &mut groups[i];
                        recover(g, e, &mut remotes, &load, &plan, &mut sessions).await?;
                        moved = true;
                    }
                }
            }
            if !moved {
                break;
            }
        }
        engine_opts.report((r + 1) as u64, plan.rounds() as u64);
    }
    let mut cols = Vec::with_capacity(plan.units());
    for g in &mut groups {
        loop {
            // A group moved at the end replays every round first.
            let caught_up = if g.next < plan.rounds() {
                step(g, plan.rounds() - 1, &history, &ctx, &remotes)
                    .await
                    .map(|_| ())
            } else {
                Ok(())
            };
            let res = match caught_up {
                Ok(()) => finish(g, &ctx, &remotes).await,
                Err(e) => Err(e),
            };
            match res {
                Ok(c) => {
                    cols.extend(c);
                    break;
                }
                Err(e) => recover(g, e, &mut remotes, &load, &plan, &mut sessions).await?,
            }
        }
    }
    let mut part_runs = Vec::with_capacity(plan.units());
    let mut local_parts = 0;
    for g in &groups {
        let by = match g.at {
            At::Worker { w, .. } => {
                let r = &mut remotes[w].run;
                r.parts += g.ids.len();
                r.part_seconds += g.seconds;
                r.address.clone()
            }
            At::Here(_) => {
                local_parts += g.ids.len();
                "local".to_string()
            }
        };
        for &l in &g.ids {
            part_runs.push(PartRun {
                start: l,
                end: l + 1,
                by: by.clone(),
                seconds: g.seconds / g.ids.len().max(1) as f64,
            });
        }
    }
    part_runs.sort_by_key(|p| p.start);
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
