//! Jobs cut in ranges (verification by destination, DF-DN by destination
//! switch, MinHop by source switch): one task per worker takes open parts
//! from the [`super::queue::Queue`] until none is left or the worker is
//! lost; what no worker took runs here.

use super::queue::{AfterFailure, Next, Queue, after_failure};
use super::{
    Client, CoordError, JobBytes, JobRun, LEASE_ENDED, PartRun, WorkerRun, open_worker, send_job,
};
use fabric::routing::shard::{RoutePart, RowsPart};
use fabric::verify::Part;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why a part did not come back: the worker's status (a worker that
/// dropped the job is loaded again), or a reply that is not a part.
pub(super) enum AskError {
    Status(tonic::Status),
    Reply(String),
}

/// A part's result, its worker-side seconds and its reply bytes.
type Answer<T> = Result<(T, f64, u64), AskError>;
type AskFuture<T> = Pin<Box<dyn Future<Output = Answer<T>> + Send>>;
/// Asks a worker for part `i` of the cut, which covers `range`.
pub(super) type Ask<T> = Arc<dyn Fn(Client, usize, (usize, usize)) -> AskFuture<T> + Send + Sync>;

/// The range a returned part says it covers; a part that answers another
/// range than it was asked for is refused and its worker given up on.
pub(super) trait Covers {
    fn covers(&self) -> (usize, usize);
}

impl Covers for Part {
    fn covers(&self) -> (usize, usize) {
        (self.start, self.end)
    }
}

impl Covers for RowsPart {
    fn covers(&self) -> (usize, usize) {
        (self.start, self.end)
    }
}

impl Covers for RoutePart {
    fn covers(&self) -> (usize, usize) {
        (self.start, self.end)
    }
}

/// Runs the parts of `ranges` on the workers at `addrs`; what no worker
/// could take runs here through `local`. Returns the parts in cut order and
/// the job's run; the caller merges and fills in `seconds` and
/// `merge_seconds` (and `column_bytes` when the parts carried columns).
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_parts<T: Covers + Send + 'static>(
    addrs: &[String],
    leases: Option<&store::registry::Leases>,
    transport: &ibtls::Transport,
    load: JobBytes,
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

/// What every worker's task shares.
struct Work<T> {
    q: Arc<Mutex<Queue<T>>>,
    load: Arc<JobBytes>,
    ranges: Arc<Vec<(usize, usize)>>,
    ask: Ask<T>,
    replies: Arc<std::sync::atomic::AtomicU64>,
}

/// Asks part `i` of a worker, loading the job again when the worker
/// dropped it (as [`after_failure`] decides).
async fn ask_reloading<T>(
    ask: &Ask<T>,
    c: &Client,
    i: usize,
    range: (usize, usize),
    load: &JobBytes,
) -> Answer<T> {
    let mut reloads = 0;
    loop {
        let reply = ask(c.clone(), i, range).await;
        let code = match &reply {
            Err(AskError::Status(s)) => Some(s.code()),
            _ => None,
        };
        match after_failure(code, reloads) {
            AfterFailure::Reload => {
                reloads += 1;
                if let Err(e) = send_job(c.clone(), load).await {
                    return Err(AskError::Status(e));
                }
            }
            AfterFailure::Done => return reply,
        }
    }
}

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
        let attempt = ask_reloading(&ask, &c, i, (a, b), &load);
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
