//! Here or on workers: where a routing or a verification runs. `ibfabric
//! route`, `ibfabric verify` and the agent all go through [`Executor`],
//! so the choice is made in one place: the workers named or registered in
//! the store (read again for every job, since workers come and go), the
//! engine's own word on whether it splits ([`RoutingEngine::split`]), and
//! the computation here when there is no worker or the engine does not
//! split. Whatever the choice, the tables and the report are the ones one
//! process gives (the coordinator's merge invariant).

use crate::coordinator::{self, CoordError, Farm, JobRun, Options};
use fabric::Fabric;
use fabric::routing::{EngineOptions, RoutingEngine, Split};
use fabric::tables::Routing;
use fabric::verify::{Policy, Refused, Report, Verified};

/// Where the workers come from.
#[derive(Debug, Clone, Default)]
pub enum Workers {
    /// None: everything runs here.
    #[default]
    Here,
    /// These addresses (`http(s)://host:port`).
    Named(Vec<String>),
    /// The workers registered in this store, each under a lease that is
    /// watched during the job.
    Registered(store::StoreConfig),
}

/// Why the workers could not be listed.
#[derive(Debug, thiserror::Error)]
#[error("cannot list the workers registered in the store: {0}")]
pub struct ListError(#[from] pub store::StoreError);

/// Runs jobs here or on `workers`, reached over `transport`, each job cut
/// and watched as `opts` says (its `leases` are filled per job).
#[derive(Debug, Clone)]
pub struct Executor {
    workers: Workers,
    transport: ibtls::Transport,
    opts: Options,
}

/// The workers found for jobs on one fabric, with the fabric as they
/// read it.
#[derive(Debug)]
pub struct Placement {
    pub farm: Farm,
    topology: Vec<u8>,
}

impl Executor {
    /// Everything here.
    pub fn here() -> Self {
        Self::new(
            Workers::Here,
            ibtls::Transport::Insecure,
            Options::default(),
        )
    }

    pub fn new(workers: Workers, transport: ibtls::Transport, opts: Options) -> Self {
        Self {
            workers,
            transport,
            opts,
        }
    }

    /// Whether workers were asked for at all.
    pub fn wants_workers(&self) -> bool {
        !matches!(self.workers, Workers::Here)
    }

    /// The workers for jobs on `f` now; None when there is none to ask
    /// (none named, none registered in the store: warned, the jobs run
    /// here). A store that cannot be read is an error: the caller decides
    /// whether to run here instead.
    pub async fn place(&self, f: &Fabric) -> Result<Option<Placement>, ListError> {
        let (addrs, leases) = match &self.workers {
            Workers::Here => return Ok(None),
            Workers::Named(a) => (a.clone(), None),
            Workers::Registered(sc) => {
                let l = store::registry::find(sc).await?;
                tracing::info!(
                    workers = ?l.workers.iter().map(|w| format!("{}={}", w.name, w.url)).collect::<Vec<_>>(),
                    "workers found in the store"
                );
                (l.urls(), Some(l))
            }
        };
        if addrs.is_empty() {
            tracing::warn!("no worker is registered in the store: computing here");
            return Ok(None);
        }
        // The workers rebuild this very fabric from its binary form: they
        // compute on the fabric as it is in memory (not a file that may
        // have changed since it was read), numbered as here, with no text
        // to parse.
        let topology = fabric::formats::fabric_bin::write(f);
        Ok(Some(Placement {
            farm: Farm {
                addrs,
                transport: self.transport.clone(),
                opts: Options {
                    leases,
                    ..self.opts.clone()
                },
            },
            topology,
        }))
    }
}

/// Routes `f` with `engine`: on `placement`'s workers when there are some
/// and the engine splits with `opts`, here otherwise. The job's run is
/// returned when workers took part.
pub async fn route(
    placement: Option<&Placement>,
    engine: &dyn RoutingEngine,
    f: &Fabric,
    opts: &EngineOptions<'_>,
) -> Result<(Routing, Option<JobRun>), CoordError> {
    fabric::routing::check_lmc(engine, f)?;
    // The parts workers compute are cut by one LID per port.
    if placement.is_some() && f.max_lmc() > 0 {
        tracing::warn!("routing here, not on the workers: the fabric has LMC above 0");
    }
    let on = placement.filter(|_| !f.switches().is_empty() && f.max_lmc() == 0);
    match (on, engine.split(opts)) {
        (Some(p), split) if split.splits() => {
            let (r, run) = coordinator::route(&p.farm, engine, f, &p.topology, opts).await?;
            Ok((r, Some(run)))
        }
        (on, split) => {
            if let (Some(_), Split::Whole(why)) = (on, split) {
                tracing::warn!("routing here, not on the workers: {why}");
            }
            Ok((engine.route(f, opts)?, None))
        }
    }
}

/// Verifies `routing` on `f`: on `placement`'s workers when there are
/// some (the merged report equals one process's), here otherwise.
pub async fn verify(
    placement: Option<&Placement>,
    f: &Fabric,
    routing: &Routing,
) -> Result<(Report, Option<JobRun>), CoordError> {
    match placement {
        Some(p) => {
            let (r, run) = coordinator::verify(&p.farm, f, routing, &p.topology).await?;
            Ok((r, Some(run)))
        }
        None => Ok((fabric::verify::verify(f, routing), None)),
    }
}

/// Passes `routing` through the verification gate: verified here
/// ([`fabric::verify::gate::accept_while`], which also makes the
/// dependency summary inter-subnet checks need), or on `placement`'s
/// workers and accepted on their merged report
/// ([`fabric::verify::gate::accept_merged`]: the same policy, no summary).
/// `side` runs on a thread of its own meanwhile, on the tables being
/// verified (`route` writes them out then, to put them in place once
/// accepted). Also returns how long the verification took on its own.
pub fn accept_while<S: Send>(
    rt: &tokio::runtime::Runtime,
    placement: Option<&Placement>,
    f: &Fabric,
    engine: &dyn RoutingEngine,
    routing: Routing,
    policy: Policy,
    side: impl FnOnce(&Routing) -> S + Send,
) -> Result<Accepted<S>, CoordError> {
    let Some(p) = placement else {
        let (accepted, side, took) =
            fabric::verify::gate::accept_while(f, engine, routing, policy, side);
        return Ok(Accepted {
            accepted,
            job: None,
            side,
            verify_seconds: took.as_secs_f64(),
        });
    };
    let (merged, took, side) = fabric::verify::gate::beside(&routing, side, |r| {
        rt.block_on(coordinator::verify(&p.farm, f, r, &p.topology))
    });
    let (report, run) = merged?;
    Ok(Accepted {
        accepted: fabric::verify::gate::accept_merged(f, engine, routing, report, policy),
        job: Some(run),
        side,
        verify_seconds: took.as_secs_f64(),
    })
}

/// What [`accept_while`] gives back.
pub struct Accepted<S> {
    /// The gate's verdict.
    pub accepted: Result<Verified<Routing>, Refused>,
    /// The workers' job, when they verified.
    pub job: Option<JobRun>,
    /// What the side task returned.
    pub side: S,
    /// The verification alone (the side task may have run longer).
    pub verify_seconds: f64,
}
