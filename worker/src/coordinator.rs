//! The caller's side of a job: cut it into parts, hand them to workers,
//! give a lost worker's parts to the others, merge. The merged result is
//! one process's whatever the cut and whoever computed what
//! ([`fabric::verify::merge_parts`], [`fabric::routing::shard::merge_dfdn`]);
//! when no worker is left, the parts still open run here, and the result
//! says so.

mod deal;
mod parts;
mod queue;
mod rounds;
mod route;

use parts::{Ask, AskError, run_parts};

pub use rounds::route_rounds;
pub use route::{route, route_dfdn, route_minhop};

use fabric::Fabric;
use fabric::tables::Routing;
use fabric::verify::{MergeError, Part, Report, merge_parts};
use proto::v1;
use sha2::{Digest, Sha256};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, Clone)]
pub struct Options {
    /// Parts per worker: more parts spread the load and lose less work
    /// with a worker, at a merge cost per part.
    pub parts_per_worker: usize,
    /// Bytes per load chunk.
    pub chunk_bytes: usize,
    /// JobBytes jobs without their LFTs and path-SL rows and send each part
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

/// Why a worker whose lease ended is given up on.
pub(crate) const LEASE_ENDED: &str = "its lease in the store ended";

/// What every worker of a job is sent (`Worker.Load`): the fabric and the
/// tables as bytes, in chunks of `chunk` bytes.
pub(crate) struct JobBytes {
    job: String,
    /// What the job is for, hashed into its name.
    kind: String,
    topology: Arc<Vec<u8>>,
    tables: Arc<Vec<u8>>,
    chunk: usize,
}

/// A job's name from what it is for and its content; the worker computes
/// it again from what it received ([`crate::Service`]).
pub fn job_id(topology: &[u8], tables: &[u8], kind: &str) -> String {
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
    let dests = f.end_lids().len();
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
    let load = JobBytes {
        job,
        kind: "verify".into(),
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

/// Connects to the worker at `addr` and loads the job there: the client
/// and the seconds the load took, or why the worker is given up on.
async fn open_worker(
    addr: &str,
    t: &ibtls::Transport,
    load: &JobBytes,
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
        r = send_job(c.clone(), load) => r.map_err(|e| format!("load: {}", e.message()))?,
        _ = &mut *gone => return Err(format!("load: {LEASE_ENDED}")),
    };
    Ok((c, t_load.elapsed().as_secs_f64()))
}

/// Sends the job to a worker.
async fn send_job(
    mut c: Client,
    load: &JobBytes,
) -> Result<tonic::Response<v1::LoadReply>, tonic::Status> {
    let chunks = chunks(load, load.chunk);
    let r = c.load(tokio_stream::iter(chunks)).await?;
    // The worker says what it holds: the same bytes, or the job is not
    // used there.
    let want = Sha256::new()
        .chain_update(load.topology.as_slice())
        .chain_update(load.tables.as_slice())
        .finalize()
        .to_vec();
    if r.get_ref().job != load.job || r.get_ref().digest != want {
        return Err(tonic::Status::data_loss(format!(
            "the worker holds job '{}' with another digest than job {} sent",
            r.get_ref().job,
            load.job
        )));
    }
    Ok(r)
}

fn chunks(load: &JobBytes, size: usize) -> Vec<v1::JobChunk> {
    let (topology, tables) = (load.topology.as_slice(), load.tables.as_slice());
    let size = size.max(1);
    let mut out = vec![v1::JobChunk {
        job: load.job.clone(),
        kind: load.kind.clone(),
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
