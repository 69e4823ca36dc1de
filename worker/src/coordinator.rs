//! The caller's side of a job: cut it into parts, hand them to workers,
//! give a lost worker's parts to the others, merge. The merged report is
//! the report of one process whatever the cut and whoever computed what
//! ([`fabric::verify::merge_parts`]); when no worker is left, the parts
//! still open run here, and the report says so.

use fabric::tables::Routing;
use fabric::verify::{merge_parts, MergeError, Part, Report};
use fabric::Fabric;
use proto::v1;
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
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
}

impl Default for Options {
    fn default() -> Self {
        Self {
            parts_per_worker: 4,
            chunk_bytes: 4 << 20,
            columns: true,
        }
    }
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

#[derive(Debug, Clone, serde::Serialize)]
pub struct JobRun {
    pub job: String,
    pub parts: usize,
    pub workers: Vec<WorkerRun>,
    /// Parts computed here because no worker was left.
    pub local_parts: usize,
    pub bytes_per_load: u64,
    /// Column bytes sent with the parts, all parts together (0 when the
    /// whole tables were loaded).
    pub column_bytes: u64,
    pub seconds: f64,
    pub merge_seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum CoordError {
    #[error("no worker address given")]
    NoWorkers,
    #[error(transparent)]
    Merge(#[from] MergeError),
}

/// Destinations `0..n` cut into `k` ranges as equal as they come.
pub fn cut(n: usize, k: usize) -> Vec<(usize, usize)> {
    let k = k.clamp(1, n.max(1));
    (0..k).map(|i| (i * n / k, (i + 1) * n / k)).collect()
}

/// Per part, in cut order: its LFT columns and its path-SL columns.
type Columns = Arc<Vec<(Vec<u8>, Vec<u8>)>>;

struct Queue {
    /// Parts nobody holds, as indices into the cut.
    open: VecDeque<usize>,
    in_flight: usize,
    done: Vec<Part>,
}

/// Verifies `routing` on `f` with the workers at `addrs` (the topology
/// `topology` is the ibnetdiscover text `f` was read from).
pub async fn verify(
    f: &Fabric,
    routing: &Routing,
    topology: &[u8],
    addrs: &[String],
    transport: &ibtls::Transport,
    opts: &Options,
) -> Result<(Report, JobRun), CoordError> {
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
    let job: String = Sha256::new()
        .chain_update(&*topology)
        .chain_update(&*tables)
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let ranges = cut(
        f.endports().len(),
        addrs.len() * opts.parts_per_worker.max(1),
    );
    let parts = ranges.len();
    let q = Arc::new(Mutex::new(Queue {
        open: (0..parts).collect(),
        in_flight: 0,
        done: Vec::new(),
    }));
    tracing::info!(%job, parts, workers = addrs.len(), "verification job cut");
    let mut tasks = Vec::new();
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
    let ranges = Arc::new(ranges);
    for addr in addrs {
        let (addr, t, q, job) = (addr.clone(), transport.clone(), q.clone(), job.clone());
        let (topology, tables, chunk) = (topology.clone(), tables.clone(), opts.chunk_bytes);
        let (columns, ranges) = (columns.clone(), ranges.clone());
        tasks.push(tokio::spawn(async move {
            let data = JobData {
                job,
                topology,
                tables,
                columns,
                ranges,
            };
            run_worker(addr, t, q, data, chunk).await
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
        g.open.drain(..).collect()
    };
    let local_parts = left.len();
    if local_parts > 0 {
        tracing::warn!(
            parts = local_parts,
            "no worker left for these parts: verifying them here"
        );
        for i in left {
            let (a, b) = ranges[i];
            let p = fabric::verify::verify_part(f, routing, a..b);
            q.lock().unwrap_or_else(|p| p.into_inner()).done.push(p);
        }
    }
    let column_bytes = columns.as_ref().map_or(0, |c| {
        c.iter().map(|(l, s)| (l.len() + s.len()) as u64).sum()
    });
    let done = std::mem::take(&mut q.lock().unwrap_or_else(|p| p.into_inner()).done);
    let t = Instant::now();
    let report = merge_parts(f, routing, &done)?;
    let merge_seconds = t.elapsed().as_secs_f64();
    Ok((
        report,
        JobRun {
            job,
            parts,
            workers,
            local_parts,
            bytes_per_load: (topology.len() + tables.len()) as u64,
            column_bytes,
            seconds: t0.elapsed().as_secs_f64(),
            merge_seconds,
        },
    ))
}

/// What a worker task sends: the job's load and each part's columns.
struct JobData {
    job: String,
    topology: Arc<Vec<u8>>,
    tables: Arc<Vec<u8>>,
    columns: Option<Columns>,
    /// The cut: each part's destinations, in the order `columns` holds them.
    ranges: Arc<Vec<(usize, usize)>>,
}

async fn run_worker(
    addr: String,
    t: ibtls::Transport,
    q: Arc<Mutex<Queue>>,
    data: JobData,
    chunk: usize,
) -> WorkerRun {
    let JobData {
        job,
        topology,
        tables,
        columns,
        ranges,
    } = data;
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
    let ch = match proto::client::connect(&addr, &t, ibtls::Role::Worker).await {
        Ok(c) => c,
        Err(e) => {
            lose(&mut run, e.to_string());
            return run;
        }
    };
    let mut c = v1::worker_client::WorkerClient::new(ch)
        .max_decoding_message_size(proto::client::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(proto::client::MAX_MESSAGE_BYTES);
    let load = |c: &mut v1::worker_client::WorkerClient<tonic::transport::Channel>| {
        let chunks = chunks(&job, &topology, &tables, chunk);
        let mut c = c.clone();
        async move { c.load(tokio_stream::iter(chunks)).await }
    };
    let t_load = Instant::now();
    if let Err(e) = load(&mut c).await {
        lose(&mut run, format!("load: {}", e.message()));
        return run;
    }
    run.load_seconds = t_load.elapsed().as_secs_f64();
    loop {
        let next = {
            let mut g = q.lock().unwrap_or_else(|p| p.into_inner());
            match g.open.pop_front() {
                Some(r) => {
                    g.in_flight += 1;
                    Some(r)
                }
                None if g.in_flight == 0 => return run,
                None => None,
            }
        };
        // Parts still out with other workers may come back: wait.
        let Some(i) = next else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let (a, b) = ranges[i];
        let cols = columns.as_ref().and_then(|c| c.get(i));
        let ask = v1::VerifyPartRequest {
            job: job.clone(),
            start: a as u64,
            end: b as u64,
            columns: cols.is_some(),
            lft_columns: cols.map(|c| c.0.clone()).unwrap_or_default(),
            sl_columns: cols.map(|c| c.1.clone()).unwrap_or_default(),
        };
        let mut reply = c.verify_part(ask.clone()).await;
        if matches!(&reply, Err(s) if s.code() == tonic::Code::FailedPrecondition) {
            // Restarted or dropped the job: load it again, once.
            reply = match load(&mut c).await {
                Ok(_) => c.verify_part(ask).await,
                Err(e) => Err(e),
            };
        }
        let part = reply
            .map_err(|s| s.message().to_string())
            .and_then(|r| {
                let r = r.into_inner();
                let secs = r.seconds;
                crate::wire::part_from_wire(&r)
                    .map(|p| (p, secs))
                    .map_err(|e| e.to_string())
            })
            .and_then(|(p, secs)| {
                if (p.start, p.end) == (a, b) {
                    Ok((p, secs))
                } else {
                    Err(format!("asked {a}..{b}, answered {}..{}", p.start, p.end))
                }
            });
        let mut g = q.lock().unwrap_or_else(|p| p.into_inner());
        g.in_flight -= 1;
        match part {
            Ok((p, secs)) => {
                run.parts += 1;
                run.part_seconds += secs;
                tracing::info!(worker = %addr, start = a, end = b, secs, "part done");
                g.done.push(p);
            }
            Err(why) => {
                g.open.push_back(i);
                drop(g);
                lose(&mut run, format!("part {a}..{b}: {why}"));
                return run;
            }
        }
    }
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
