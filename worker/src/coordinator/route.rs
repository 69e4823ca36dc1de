//! Routing jobs on workers, cut as the engine says it splits: DF-DN by
//! destination switch, MinHop by source switch ([`super::parts`]); the
//! engines routed in rounds go to [`super::rounds`].

use super::parts::{Ask, AskError, Covers, run_parts};
use super::{Client, CoordError, Farm, JobBytes, JobRun, cut, job_id, parts_for, route_rounds};
use fabric::Fabric;
use fabric::routing::shard::{RoutePart, merge_dfdn};
use fabric::routing::{EngineOptions, RoutingEngine, Split};
use fabric::tables::Routing;
use proto::v1;
use std::sync::Arc;
use std::time::Instant;

/// Routes `f` with DF-DN on the workers at `addrs`: each part is a range of
/// destination switches whose base-routing columns and link-load sums a
/// worker computes ([`fabric::routing::shard`]); the merge and the SL
/// choice run here. The tables equal one process's, byte for byte.
/// `engine_opts.base` must split ([`RoutingEngine::split`]).
pub async fn route_dfdn(
    farm: &Farm,
    f: &Fabric,
    topology: &[u8],
    engine_opts: &EngineOptions<'_>,
) -> Result<(Routing, JobRun), CoordError> {
    if let Split::Whole(reason) = fabric::routing::dfdn::DfDn.split(engine_opts) {
        return Err(CoordError::Route(fabric::Error::Routing {
            engine: "dfdn".into(),
            reason,
        }));
    }
    let n = f.switches().len();
    // Built once, and only if some part has to run here.
    let trees = std::sync::OnceLock::new();
    route_job(
        farm,
        f,
        topology,
        RouteJob {
            engine: "dfdn",
            per_switch: n,
            fixed: 8 * f.num_slots(),
            decode: move |r, (a, b)| {
                let p = crate::wire::route_part_from_wire(r)
                    .map_err(|e| AskError::Reply(e.to_string()))?;
                sized(p.next.len(), (b - a) * n, "column", (a, b))?;
                Ok(p)
            },
            local: |a, b| {
                let t = trees.get_or_init(|| fabric::routing::trees::TreeParents::new(f));
                fabric::routing::shard::route_part(f, t, a..b)
            },
            merge: |parts: &[RoutePart]| Ok(merge_dfdn(f, parts, engine_opts)?),
        },
    )
    .await
}

/// Routes `f` with `engine` on the workers of `farm`, cut as the engine
/// says it splits ([`RoutingEngine::split`]): [`route_minhop`] by source
/// switch, [`route_dfdn`] by destination switch, [`route_rounds`] in
/// rounds. An engine that does not split is refused with its reason.
pub async fn route(
    farm: &Farm,
    engine: &dyn RoutingEngine,
    f: &Fabric,
    topology: &[u8],
    engine_opts: &EngineOptions<'_>,
) -> Result<(Routing, JobRun), CoordError> {
    match engine.split(engine_opts) {
        Split::SourceSwitches => route_minhop(farm, f, topology).await,
        Split::DestinationSwitches => route_dfdn(farm, f, topology, engine_opts).await,
        Split::Rounds => route_rounds(farm, engine.kind(), f, topology, engine_opts).await,
        Split::Whole(reason) => Err(CoordError::Route(fabric::Error::Routing {
            engine: engine.name().into(),
            reason,
        })),
    }
}

/// MinHop on the workers at `addrs`: each computes the LFT rows of a range
/// of switches (each row balances on its own switch's counters alone,
/// [`fabric::routing::shard::minhop_part`]); the rows are stacked here. The
/// tables equal one process's, byte for byte.
pub async fn route_minhop(
    farm: &Farm,
    f: &Fabric,
    topology: &[u8],
) -> Result<(Routing, JobRun), CoordError> {
    let width = f.max_lid() as usize + 1;
    // Built once, and only if some part has to run here.
    let hops = std::sync::OnceLock::new();
    route_job(
        farm,
        f,
        topology,
        RouteJob {
            engine: "minhop",
            per_switch: width,
            fixed: 0,
            decode: move |r, (a, b)| {
                let p = crate::wire::rows_part_from_wire(r);
                sized(p.rows.len(), (b - a) * width, "row", (a, b))?;
                Ok(p)
            },
            local: |a, b| {
                let base = hops.get_or_init(|| fabric::routing::shard::MinhopBase::new(f));
                fabric::routing::shard::minhop_part(f, base, a..b)
            },
            merge: |parts: &[fabric::routing::shard::RowsPart]| {
                Ok(fabric::routing::shard::merge_rows(f, parts)?)
            },
        },
    )
    .await
}

/// What differs between routing jobs: the engine the workers run, the
/// bytes a part carries per switch of its range and in all, how a reply
/// becomes a part, the part computed here, and the merge.
struct RouteJob<D, L, M> {
    engine: &'static str,
    per_switch: usize,
    fixed: usize,
    decode: D,
    local: L,
    merge: M,
}

/// A routing job cut by switch: the parts on the workers at `addrs`, what
/// none took here, then the merge.
async fn route_job<T, D, L, M>(
    farm: &Farm,
    f: &Fabric,
    topology: &[u8],
    j: RouteJob<D, L, M>,
) -> Result<(Routing, JobRun), CoordError>
where
    T: Covers + Send + 'static,
    D: Fn(v1::RoutePartReply, (usize, usize)) -> Result<T, AskError> + Send + Sync + 'static,
    L: Fn(usize, usize) -> T,
    M: FnOnce(&[T]) -> Result<Routing, CoordError>,
{
    let (addrs, transport, opts) = (&farm.addrs, &farm.transport, &farm.opts);
    if addrs.is_empty() {
        return Err(CoordError::NoWorkers);
    }
    let t0 = Instant::now();
    let topology = Arc::new(topology.to_vec());
    let job = job_id(&topology, &[], &format!("route {}", j.engine));
    let n = f.switches().len();
    let ranges = cut(
        n,
        parts_for(
            n,
            j.per_switch,
            j.fixed,
            addrs.len() * opts.parts_per_worker.max(1),
        ),
    );
    tracing::info!(%job, engine = j.engine, parts = ranges.len(), workers = addrs.len(), "routing job cut");
    let ask = route_ask(job.clone(), j.engine, j.decode);
    // Routing jobs carry the topology alone.
    let load = JobBytes {
        job,
        kind: format!("route {}", j.engine),
        topology,
        tables: Arc::new(Vec::new()),
        chunk: opts.chunk_bytes,
    };
    let local = j.local;
    let (parts, mut run) = run_parts(
        addrs,
        opts.leases.as_ref(),
        transport,
        load,
        "route",
        &ranges,
        ask,
        |i| {
            let (a, b) = ranges[i];
            Ok(local(a, b))
        },
    )
    .await?;
    let t = Instant::now();
    let routing = (j.merge)(&parts)?;
    run.merge_seconds = t.elapsed().as_secs_f64();
    run.seconds = t0.elapsed().as_secs_f64();
    Ok((routing, run))
}

/// Asks a worker for part `(a, b)` of routing job `job` on `engine`;
/// `decode` turns the reply into the part, or refuses it.
fn route_ask<T: Send + 'static>(
    job: String,
    engine: &'static str,
    decode: impl Fn(v1::RoutePartReply, (usize, usize)) -> Result<T, AskError> + Send + Sync + 'static,
) -> Ask<T> {
    let decode = Arc::new(decode);
    Arc::new(move |mut c: Client, _: usize, (a, b): (usize, usize)| {
        let req = v1::RoutePartRequest {
            job: job.clone(),
            start: a as u64,
            end: b as u64,
            engine: engine.into(),
        };
        let decode = decode.clone();
        Box::pin(async move {
            let r = c
                .route_part(req)
                .await
                .map_err(AskError::Status)?
                .into_inner();
            let bytes = prost::Message::encoded_len(&r) as u64;
            let secs = r.seconds;
            Ok((decode(r, (a, b))?, secs, bytes))
        })
    })
}

/// A reply's `what` bytes for switches `a..b` are `want` long, or the
/// part is refused.
fn sized(got: usize, want: usize, what: &str, (a, b): (usize, usize)) -> Result<(), AskError> {
    if got == want {
        return Ok(());
    }
    Err(AskError::Reply(format!(
        "{got} {what} bytes for switches {a}..{b}, expected {want}"
    )))
}
