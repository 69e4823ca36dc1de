//! The caller's side of a job: cut it into parts, hand them to workers,
//! give a lost worker's parts to the others, merge. The merged result is
//! one process's whatever the cut and whoever computed what
//! ([`fabric::verify::merge_parts`], [`fabric::routing::shard::merge_dfdn`]);
//! when no worker is left, the parts still open run here, and the result
//! says so.

mod deal;
mod queue;
mod rounds;

use queue::{Next, Queue};

pub use rounds::route_rounds;

use fabric::Fabric;
use fabric::routing::shard::{RoutePart, merge_dfdn};
use fabric::routing::{EngineOptions, RoutingEngine, Split};
use fabric::tables::Routing;
use fabric::verify::{MergeError, Part, Report, merge_parts};
use proto::v1;
use sha2::{Digest, Sha256};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Options {
    /// Parts per worker: more parts spread the load and lose less work
    /// with a worker, at a merge cost per part.
    pub parts_per_worker: usize,
    /// Bytes per load chunk.
    pub chunk_bytes: usize,
    /// Load jobs without their LFTs and path-SL rows and send each part
    /// its columns: the tables cross the network once in all instead of
    /// once per worker.
    pub columns: bool,
    /// The workers' leases when they were found in the store: a worker
    /// whose lease ends is given up on at once, its open part requeued.
    pub leases: Option<store::registry::Leases>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            parts_per_worker: 4,
            chunk_bytes: 4 << 20,
            columns: true,
            leases: None,
        }
    }
}

/// The workers a job goes to: where they are, how to reach them, and how
/// to cut and watch the job. One value serves every job of a caller.
#[derive(Debug, Clone)]
pub struct Farm {
    pub addrs: Vec<String>,
    pub transport: ibtls::Transport,
    pub opts: Options,
}

/// What one worker did for a job.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkerRun {
    pub address: String,
    pub parts: usize,
    /// Seconds spent loading the job (transfer and parse).
    pub load_seconds: f64,
    /// Seconds the worker reported computing its parts.
    pub part_seconds: f64,
    /// Why the worker was given up on, if it was (its open part went back
    /// to the queue).
    pub lost: Option<String>,
}

/// Who computed one part, and how long it took there.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PartRun {
    pub start: usize,
    pub end: usize,
    /// The worker's address, or "local".
    pub by: String,
    pub seconds: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct JobRun {
    pub job: String,
    /// "verify" or "route".
    pub kind: &'static str,
    pub parts: usize,
    pub workers: Vec<WorkerRun>,
    /// Every part, in cut order, with who computed it.
    pub part_runs: Vec<PartRun>,
    /// Parts computed here because no worker was left.
    pub local_parts: usize,
    pub bytes_per_load: u64,
    /// Column bytes sent with the parts, all parts together (0 when the
    /// whole tables were loaded); for the engines routed in rounds, the
    /// rounds' channel loads.
    pub column_bytes: u64,
    /// Bytes of the parts' replies, all together.
    pub reply_bytes: u64,
    pub seconds: f64,
    /// Seconds to merge the parts and finish the job here (for a routing
    /// job: the SL choice too).
    pub merge_seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum CoordError {
    #[error("no worker address given")]
    NoWorkers,
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error(transparent)]
    Route(#[from] fabric::Error),
}

/// Destinations `0..n` cut into `k` ranges as equal as they come.
pub fn cut(n: usize, k: usize) -> Vec<(usize, usize)> {
    let k = k.clamp(1, n.max(1));
    (0..k).map(|i| (i * n / k, (i + 1) * n / k)).collect()
}

/// At least `wanted` parts, and enough that no part's request or reply
/// carries more than half the largest gRPC message: `per_item` bytes per
/// destination (or destination switch), `fixed` bytes per part.
fn parts_for(items: usize, per_item: usize, fixed: usize, wanted: usize) -> usize {
    let room = (proto::client::MAX_MESSAGE_BYTES / 2)
        .saturating_sub(fixed)
        .max(1);
    let per_part = (room / per_item.max(1)).max(1);
    wanted.max(items.div_ceil(per_part))
}

/// Per part, in cut order: its LFT columns and its path-SL columns.
type Columns = Arc<Vec<(Vec<u8>, Vec<u8>)>>;

type Client = v1::worker_client::WorkerClient<tonic::transport::Channel>;

/// Why a part did not come back: the worker's status (a worker that
/// dropped the job is loaded again), or a reply that is not a part.
enum AskError {
    Status(tonic::Status),
    Reply(String),
}

/// A part's result, its worker-side seconds and its reply bytes.
type Answer<T> = Result<(T, f64, u64), AskError>;
type AskFuture<T> = Pin<Box<dyn Future<Output = Answer<T>> + Send>>;
/// Asks a worker for part `i` of the cut, which covers `range`.
type Ask<T> = Arc<dyn Fn(Client, usize, (usize, usize)) -> AskFuture<T> + Send + Sync>;

/// The range a returned part says it covers; a part that answers another
/// range than it was asked for is refused and its worker given up on.
trait Covers {
    fn covers(&self) -> (usize, usize);
}

impl Covers for Part {
    fn covers(&self) -> (usize, usize) {
        (self.start, self.end)
    }
}

impl Covers for fabric::routing::shard::RowsPart {
    fn covers(&self) -> (usize, usize) {
        (self.start, self.end)
    }
}

impl Covers for RoutePart {
    fn covers(&self) -> (usize, usize) {
        (self.start, self.end)
    }
}

/// What every worker of a job loads.
struct Load {
    job: String,
    topology: Arc<Vec<u8>>,
    tables: Arc<Vec<u8>>,
    chunk: usize,
}

fn job_id(topology: &[u8], tables: &[u8], kind: &str) -> String {
    Sha256::new()
        .chain_update(kind)
        .chain_update(topology)
        .chain_update(tables)
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs the parts of `ranges` on the workers at `addrs`; what no worker
/// could take runs here through `local`. Returns the parts in cut order and
/// the job's run; the caller merges and fills in `seconds` and
/// `merge_seconds` (and `column_bytes` when the parts carried columns).
#[allow(clippy::too_many_arguments)]
async fn run_parts<T: Covers + Send + 'static>(
    addrs: &[String],
    leases: Option<&store::registry::Leases>,
    transport: &ibtls::Transport,
    load: Load,
    kind: &'static str,
    ranges: &[(usize, usize)],
    ask: Ask<T>,
    local: impl Fn(usize) -> Result<T, CoordError>,
) -> Result<(Vec<T>, JobRun), CoordError> {
    let (job, bytes_per_load) = (
        load.job.clone(),
        (load.topology.len() + load.tables.len()) as u64,
    );
    let q = Arc::new(Mutex::new(Queue::new(ranges.len())));
    let load = Arc::new(load);
    let ranges_arc = Arc::new(ranges.to_vec());
    let replies = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for addr in addrs {
        let (addr, t, q, load) = (addr.clone(), transport.clone(), q.clone(), load.clone());
        let (ask, ranges, replies) = (ask.clone(), ranges_arc.clone(), replies.clone());
        let gone = leases.map(|l| l.gone(&addr));
        tasks.push(tokio::spawn(async move {
            let w = Work {
                q,
                load,
                ranges,
                ask,
                replies,
            };
            match gone {
                None => run_worker(addr, t, w, std::future::pending()).await,
                Some(g) => run_worker(addr, t, w, g).await,
            }
        }));
    }
    let mut workers = Vec::new();
    for task in tasks {
        match task.await {
            Ok(w) => workers.push(w),
            Err(e) => tracing::error!("worker task failed: {e}"),
        }
    }
    // Whatever no worker took: here, said so.
    let left: Vec<usize> = {
        let mut g = q.lock().unwrap_or_else(|p| p.into_inner());
        g.take_open()
    };
    let local_parts = left.len();
    if local_parts > 0 {
        tracing::warn!(
            parts = local_parts,
            "no worker left for these parts: computing them here"
        );
        for i in left {
            let t = Instant::now();
            let p = local(i)?;
            let run = PartRun {
                start: ranges[i].0,
                end: ranges[i].1,
                by: "local".into(),
                seconds: t.elapsed().as_secs_f64(),
            };
            q.lock()
                .unwrap_or_else(|p| p.into_inner())
                .done_here(i, p, run);
        }
    }
    let (parts, part_runs) = q.lock().unwrap_or_else(|p| p.into_inner()).finish();
    Ok((
        parts,
        JobRun {
            job,
            kind,
            parts: ranges.len(),
            workers,
            part_runs,
            local_parts,
            bytes_per_load,
            column_bytes: 0,
            reply_bytes: replies.load(std::sync::atomic::Ordering::Relaxed),
            seconds: 0.0,
            merge_seconds: 0.0,
        },
    ))
}

/// Verifies `routing` on `f` with the workers of `farm` (the topology
/// `topology` is the ibnetdiscover text `f` was read from).
pub async fn verify(
    farm: &Farm,
    f: &Fabric,
    routing: &Routing,
    topology: &[u8],
) -> Result<(Report, JobRun), CoordError> {
    let (addrs, transport, opts) = (&farm.addrs, &farm.transport, &farm.opts);
    if addrs.is_empty() {
        return Err(CoordError::NoWorkers);
    }
    let t0 = Instant::now();
    let tables = Arc::new(if opts.columns {
        routing.to_bytes_base()
    } else {
        routing.to_bytes()
    });
    let topology = Arc::new(topology.to_vec());
    let job = job_id(&topology, &tables, "verify");
    let per_dest = if opts.columns {
        f.switches().len() + routing.path_sl.as_ref().map_or(0, |p| p.num_rows())
    } else {
        0
    };
    let dests = f.endports().len();
    let ranges = cut(
        dests,
        parts_for(
            dests,
            per_dest,
            0,
            addrs.len() * opts.parts_per_worker.max(1),
        ),
    );
    tracing::info!(%job, parts = ranges.len(), workers = addrs.len(), "verification job cut");
    // The columns of each part, cut once, handed to whichever worker
    // takes the part (again after a loss).
    let columns: Option<Columns> = opts.columns.then(|| {
        Arc::new(
            ranges
                .iter()
                .map(|&(a, b)| fabric::verify::part_columns(f, routing, a..b))
                .collect(),
        )
    });
    let column_bytes = columns.as_ref().map_or(0, |c| {
        c.iter().map(|(l, s)| (l.len() + s.len()) as u64).sum()
    });
    let ask: Ask<Part> = {
        let job = job.clone();
        Arc::new(move |mut c: Client, i: usize, (a, b): (usize, usize)| {
            let cols = columns.as_ref().and_then(|c| c.get(i));
            let req = v1::VerifyPartRequest {
                job: job.clone(),
                start: a as u64,
                end: b as u64,
                columns: cols.is_some(),
                lft_columns: cols.map(|c| c.0.clone()).unwrap_or_default(),
                sl_columns: cols.map(|c| c.1.clone()).unwrap_or_default(),
            };
            Box::pin(async move {
                let r = c
                    .verify_part(req)
                    .await
                    .map_err(AskError::Status)?
                    .into_inner();
                let bytes = prost::Message::encoded_len(&r) as u64;
                let p =
                    crate::wire::part_from_wire(&r).map_err(|e| AskError::Reply(e.to_string()))?;
                Ok((p, r.seconds, bytes))
            })
        })
    };
    let load = Load {
        job,
        topology,
        tables,
        chunk: opts.chunk_bytes,
    };
    let (parts, mut run) = run_parts(
        addrs,
        opts.leases.as_ref(),
        transport,
        load,
        "verify",
        &ranges,
        ask,
        |i| {
            let (a, b) = ranges[i];
            Ok(fabric::verify::verify_part(f, routing, a..b))
        },
    )
    .await?;
    let t = Instant::now();
    let report = merge_parts(f, routing, &parts)?;
    run.merge_seconds = t.elapsed().as_secs_f64();
    run.column_bytes = column_bytes;
    run.seconds = t0.elapsed().as_secs_f64();
    Ok((report, run))
}

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
    let load = Load {
        job,
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

/// What every worker's task shares.
struct Work<T> {
    q: Arc<Mutex<Queue<T>>>,
    load: Arc<Load>,
    ranges: Arc<Vec<(usize, usize)>>,
    ask: Ask<T>,
    replies: Arc<std::sync::atomic::AtomicU64>,
}

/// Why a worker whose lease ended is given up on.
const LEASE_ENDED: &str = "its lease in the store ended";

/// Feeds one worker parts until the queue is empty or the worker is lost;
/// `gone` resolves when its lease in the store ends.
async fn run_worker<T: Covers + Send + 'static>(
    addr: String,
    t: ibtls::Transport,
    w: Work<T>,
    gone: impl Future<Output = ()> + Send,
) -> WorkerRun {
    let Work {
        q,
        load,
        ranges,
        ask,
        replies,
    } = w;
    tokio::pin!(gone);
    let mut run = WorkerRun {
        address: addr.clone(),
        parts: 0,
        load_seconds: 0.0,
        part_seconds: 0.0,
        lost: None,
    };
    let lose = |run: &mut WorkerRun, why: String| {
        tracing::warn!(worker = %addr, "worker lost: {why}");
        run.lost = Some(why);
    };
    let (c, load_seconds) = match open_worker(&addr, &t, &load, &mut gone).await {
        Ok(x) => x,
        Err(why) => {
            lose(&mut run, why);
            return run;
        }
    };
    run.load_seconds = load_seconds;
    let send_load = |c: &Client| load_job(c.clone(), &load);
    loop {
        let next = q.lock().unwrap_or_else(|p| p.into_inner()).next();
        let i = match next {
            Next::Part(i) => i,
            Next::Finished => return run,
            // Parts still out with other workers may come back.
            Next::Wait => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let (a, b) = ranges[i];
        tracing::debug!(worker = %addr, start = a, end = b, "part handed out");
        let attempt = async {
            let reply = ask(c.clone(), i, (a, b)).await;
            if matches!(&reply, Err(AskError::Status(s)) if s.code() == tonic::Code::FailedPrecondition)
            {
                // Restarted or dropped the job: load it again, once.
                return match send_load(&c).await {
                    Ok(_) => ask(c.clone(), i, (a, b)).await,
                    Err(e) => Err(AskError::Status(e)),
                };
            }
            reply
        };
        let reply = tokio::select! {
            r = attempt => r,
            _ = &mut gone => Err(AskError::Reply(LEASE_ENDED.into())),
        };
        let reply = reply.and_then(|(p, secs, bytes)| match p.covers() {
            got if got == (a, b) => Ok((p, secs, bytes)),
            (x, y) => Err(AskError::Reply(format!(
                "asked {a}..{b}, answered {x}..{y}"
            ))),
        });
        let mut g = q.lock().unwrap_or_else(|p| p.into_inner());
        match reply {
            Ok((p, secs, bytes)) => {
                run.parts += 1;
                run.part_seconds += secs;
                replies.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
                tracing::info!(worker = %addr, start = a, end = b, secs, "part done");
                g.done(
                    i,
                    p,
                    PartRun {
                        start: a,
                        end: b,
                        by: addr.clone(),
                        seconds: secs,
                    },
                );
            }
            Err(e) => {
                g.failed(i);
                drop(g);
                let why = match e {
                    AskError::Status(s) => s.message().to_string(),
                    AskError::Reply(r) => r,
                };
                lose(&mut run, format!("part {a}..{b}: {why}"));
                return run;
            }
        }
    }
}

/// Connects to the worker at `addr` and loads the job there: the client
/// and the seconds the load took, or why the worker is given up on.
async fn open_worker(
    addr: &str,
    t: &ibtls::Transport,
    load: &Load,
    gone: &mut (impl Future<Output = ()> + Send + Unpin),
) -> Result<(Client, f64), String> {
    // A frozen worker accepts the TCP connection and never finishes the
    // handshake: its lease says so before the connect timeout does.
    let ch = tokio::select! {
        r = proto::client::connect(addr, t, ibtls::Role::Worker) => r.map_err(|e| e.to_string())?,
        _ = &mut *gone => return Err(format!("connect: {LEASE_ENDED}")),
    };
    let c: Client = v1::worker_client::WorkerClient::new(ch)
        .max_decoding_message_size(proto::client::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(proto::client::MAX_MESSAGE_BYTES);
    let t_load = Instant::now();
    tokio::select! {
        r = load_job(c.clone(), load) => r.map_err(|e| format!("load: {}", e.message()))?,
        _ = &mut *gone => return Err(format!("load: {LEASE_ENDED}")),
    };
    Ok((c, t_load.elapsed().as_secs_f64()))
}

/// Sends the job to a worker.
async fn load_job(
    mut c: Client,
    load: &Load,
) -> Result<tonic::Response<v1::LoadReply>, tonic::Status> {
    let chunks = chunks(&load.job, &load.topology, &load.tables, load.chunk);
    c.load(tokio_stream::iter(chunks)).await
}

fn chunks(job: &str, topology: &[u8], tables: &[u8], size: usize) -> Vec<v1::JobChunk> {
    let size = size.max(1);
    let mut out = vec![v1::JobChunk {
        job: job.to_string(),
        topology_bytes: topology.len() as u64,
        tables_bytes: tables.len() as u64,
        ..Default::default()
    }];
    for c in topology.chunks(size) {
        out.push(v1::JobChunk {
            topology: c.to_vec(),
            ..Default::default()
        });
    }
    for c in tables.chunks(size) {
        out.push(v1::JobChunk {
            tables: c.to_vec(),
            ..Default::default()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_stay_under_the_message_bound() {
        let half = proto::client::MAX_MESSAGE_BYTES / 2;
        assert_eq!(
            parts_for(100, 10, 0, 4),
            4,
            "small jobs keep the parts asked for"
        );
        // Dragonfly p=10: 40,200 destinations, 4,020 LFT + 4,020 SL bytes each.
        let k = parts_for(40_200, 8_040, 0, 4);
        assert!(40_200usize.div_ceil(k) * 8_040 <= half, "{k} parts");
        assert!(k > 4);
        let k = parts_for(4_020, 4_020, 1_300_000, 1);
        assert!(
            4_020usize.div_ceil(k) * 4_020 + 1_300_000 <= half,
            "{k} parts"
        );
    }

    #[test]
    fn cuts_cover_every_destination_once() {
        for (n, k) in [(10, 3), (7, 7), (5, 9), (0, 4), (1000, 16)] {
            let c = cut(n, k);
            assert_eq!(c.first().map(|x| x.0), Some(0), "{n} {k}");
            assert_eq!(c.last().map(|x| x.1), Some(n), "{n} {k}");
            assert!(c.windows(2).all(|w| w[0].1 == w[1].0));
            assert!(c.len() <= k.max(1));
        }
    }
}
