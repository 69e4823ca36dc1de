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
mod service;

pub mod wire;

use fabric::Fabric;
use fabric::tables::Routing;
use proto::v1;
pub use service::{PART_TIMEOUT, Service, serve};
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
    /// When a call last found the job.
    touched: Mutex<std::time::Instant>,
}

/// The key a job is held under: its owner's identity and its name.
fn held_as(owner: &str, id: &str) -> String {
    format!("{owner}#{id}")
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

/// How long a job with open sessions counts as in use after its last
/// call: a coordinator waits for its slowest worker's round before it asks
/// for the next, so a quiet session is not an abandoned one until long
/// after a round at the LID limit.
const SESSION_QUIET: std::time::Duration = std::time::Duration::from_secs(120);

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
            touched: Mutex::new(std::time::Instant::now()),
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
    /// Agents (identity URIs, or `ibfabric://agent/*`) that may use this
    /// worker besides controllers and operators.
    agents: Mutex<Vec<String>>,
    /// Loads streaming in now, per caller.
    loading: Mutex<std::collections::HashMap<String, usize>>,
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
            agents: Mutex::new(Vec::new()),
            loading: Mutex::new(std::collections::HashMap::new()),
        })
    }

    /// Lets these agents (identity URIs, or `ibfabric://agent/*` for
    /// every agent) load jobs and ask for parts.
    pub fn admit_agents(&self, agents: Vec<String>) {
        *self.agents.lock().unwrap_or_else(|p| p.into_inner()) = agents;
    }

    fn admits_agent(&self, uri: &str) -> bool {
        self.agents
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|a| a == uri || a == "ibfabric://agent/*")
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

    fn job(&self, owner: &str, id: &str) -> Option<Arc<Job>> {
        let job = self
            .jobs()
            .iter()
            .find(|(j, _)| j == &held_as(owner, id))
            .map(|(_, job)| job.clone())?;
        *job.touched.lock().unwrap_or_else(|p| p.into_inner()) = std::time::Instant::now();
        Some(job)
    }

    /// The job `id` of `owner`, or the status that makes the caller load
    /// it again.
    fn loaded(&self, owner: &str, id: &str) -> Result<Arc<Job>, Status> {
        self.job(owner, id)
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

    /// Holds `job` for `owner`: at most `max_jobs` per owner (its oldest
    /// idle one goes) and twice that in all, so one caller cannot evict
    /// every other's jobs nor hold unbounded memory. A job in use (a call
    /// on it in flight, or sessions between rounds) is never dropped: when
    /// only such jobs could make room the load is refused, and the caller
    /// takes its work elsewhere. Two callers that dropped each other's
    /// jobs in turn would each load again and drop the other's, and
    /// neither would finish.
    fn insert(&self, owner: &str, id: &str, job: Job) -> Result<(), Status> {
        let id = held_as(owner, id);
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
            return Ok(());
        }
        if let Some(at) = jobs.iter().position(|(j, _)| *j == id) {
            if in_use(&jobs[at].1) {
                return Err(Status::resource_exhausted(format!(
                    "{id} is held here with other content and in use"
                )));
            }
            jobs.remove(at);
        }
        let mine = format!("{owner}#");
        let held = jobs.iter().filter(|(j, _)| j.starts_with(&mine)).count();
        let mut evict = Vec::new();
        let idle = |(j, job): &(String, Arc<Job>), only: Option<&str>| {
            only.is_none_or(|m| j.starts_with(m)) && !in_use(job)
        };
        // The caller's own jobs first, then anyone's for the bound in all.
        let over_own = (held + 1).saturating_sub(self.max_jobs);
        evict.extend(
            (0..jobs.len())
                .filter(|&k| idle(&jobs[k], Some(&mine)))
                .take(over_own),
        );
        let over_all = (jobs.len() + 1 - evict.len()).saturating_sub(2 * self.max_jobs);
        let own = evict.len();
        let others: Vec<usize> = (0..jobs.len())
            .filter(|k| !evict.contains(k) && idle(&jobs[*k], None))
            .take(over_all)
            .collect();
        evict.extend(others);
        if own < over_own || evict.len() - own < over_all {
            return Err(Status::resource_exhausted(format!(
                "the worker holds {} jobs ({held} of this caller, at most {} each and {} in all) \
                 and every one it could drop is in use; the work goes elsewhere",
                jobs.len(),
                self.max_jobs,
                2 * self.max_jobs
            )));
        }
        evict.sort_unstable();
        for k in evict.into_iter().rev() {
            jobs.remove(k);
        }
        jobs.push_back((id, Arc::new(job)));
        Ok(())
    }
}

/// A call on `job` is in flight (it holds the job), or it has sessions a
/// call touched lately.
fn in_use(job: &Arc<Job>) -> bool {
    let sessions = !job
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .is_empty();
    let touched = *job.touched.lock().unwrap_or_else(|p| p.into_inner());
    Arc::strong_count(job) > 1 || (sessions && touched.elapsed() < SESSION_QUIET)
}

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
        w.insert("a", "j", job(1)).expect("room");
        let held = w.loaded("a", "j").expect("held");
        w.insert("a", "j", job(1)).expect("the same");
        let again = w.loaded("a", "j").expect("held");
        assert!(Arc::ptr_eq(&held, &again), "its sessions and plans stay");
        // Another caller's job of the same name is its own.
        w.insert("b", "j", job(2)).expect("room");
        assert!(Arc::ptr_eq(&held, &w.loaded("a", "j").expect("held")));
        assert!(!Arc::ptr_eq(&held, &w.loaded("b", "j").expect("held")));
        // A caller that loads many jobs evicts its own, not another's.
        for k in 0..5u8 {
            w.insert("b", &format!("k{k}"), job(k)).expect("room");
        }
        assert!(w.loaded("a", "j").is_ok(), "a's job stays");
        assert!(w.loaded("b", "j").is_err(), "b's oldest went");
        assert!(w.loaded("b", "k4").is_ok() && w.loaded("b", "k3").is_ok());
    }

    #[test]
    fn a_job_in_use_is_never_dropped_and_the_newcomer_is_refused() {
        let df2 = || {
            fabric::generate::generate(&fabric::generate::Topology::Dragonfly { p: 2, hosts: None })
                .expect("df2")
        };
        let w = Worker::new("w", 1);
        w.insert("a", "route", Job::new(df2(), None)).expect("room");
        // A call on the routing job is in flight: the caller's next job
        // does not push it out.
        let call = w.loaded("a", "route").expect("held");
        let refused = w
            .insert("a", "verify", Job::new(df2(), None))
            .expect_err("no room");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused}");
        assert!(w.loaded("a", "route").is_ok(), "the job in use stays");
        assert!(w.loaded("a", "verify").is_err());
        drop(call);
        // Between rounds: its sessions keep it, until they are quiet long.
        let held = w.loaded("a", "route").expect("held");
        let opts = fabric::routing::EngineOptions {
            max_vls: 2,
            ..Default::default()
        };
        let plan = fabric::routing::rounds::Plan::new(
            fabric::routing::EngineKind::Nue,
            &held.fabric,
            &opts,
        )
        .map(Arc::new)
        .expect("plan");
        let units = plan.start(&[0]).expect("units");
        held.sessions.lock().expect("sessions").push_back((
            1,
            Arc::new(Mutex::new(Session {
                plan,
                units: Some(units),
                done: Vec::new(),
                _held: None,
            })),
        ));
        drop(held);
        assert!(
            w.insert("a", "verify", Job::new(df2(), None)).is_err(),
            "a job between rounds stays"
        );
        let quiet = std::time::Instant::now()
            .checked_sub(SESSION_QUIET * 2)
            .expect("a clock past the quiet time");
        *w.loaded("a", "route")
            .expect("held")
            .touched
            .lock()
            .expect("touched") = quiet;
        w.insert("a", "verify", Job::new(df2(), None))
            .expect("a quiet job goes");
        assert!(w.loaded("a", "route").is_err() && w.loaded("a", "verify").is_ok());
        // An idle job of another caller goes for the bound in all, one in
        // use does not.
        let b = w.loaded("a", "verify").expect("held");
        w.insert("b", "x", Job::new(df2(), None)).expect("room");
        assert!(
            w.insert("c", "y", Job::new(df2(), None)).is_ok(),
            "b's idle job made room"
        );
        assert!(w.loaded("b", "x").is_err() && w.loaded("a", "verify").is_ok());
        drop(b);
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
