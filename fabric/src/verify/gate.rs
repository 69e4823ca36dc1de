//! The one gate every routing passes before it leaves a process.
//!
//! The policy, the same for the command line, the agent and the
//! multi-subnet pipeline:
//!
//! - a routing that leaves any source/destination pair undelivered (no
//!   route, a loop, a dead port, a wrong end port, no SL) is refused;
//! - a routing whose channel dependency graph has a cycle is refused when
//!   the engine claims deadlock freedom (the engine is wrong, whatever the
//!   caller wants) and under [`Policy::DeadlockFree`];
//! - only under [`Policy::AllowCycles`], which a caller must ask for
//!   explicitly, is a cyclic routing from an engine that does not claim
//!   deadlock freedom (MinHop, SSSP) accepted; the [`Verified`] value then
//!   says so (`report().deadlock_free()` is false).
//!
//! [`Verified`] can only be made here, and the writers of table files and
//! the reports an agent sends take it, so an unverified routing cannot be
//! written or reported. It remembers the fabric it was checked against,
//! and writers refuse it for another one.

use super::mcast::McastReport;
use super::summary::{self, DependencySummary, SummaryError};
use super::{Report, verify_keeping_both, verify_keeping_local};
use crate::mcast::Multicast;
use crate::model::{Fabric, NONE};
use crate::routing::{EngineKind, RoutingEngine};
use crate::tables::Routing;
use std::sync::Arc;

/// What a caller accepts beyond the rule that every pair is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    /// The channel dependency graph must be acyclic.
    #[default]
    DeadlockFree,
    /// A cycle is accepted from an engine that does not claim deadlock
    /// freedom. Never the default: only where an operator asked for it.
    AllowCycles,
}

/// Why the gate refused a routing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{broken} of {pairs} pairs are not routed{}", first.as_ref().map(|f| format!(" (first: {f})")).unwrap_or_default())]
    Unrouted {
        broken: u64,
        pairs: u64,
        first: Option<String>,
    },
    #[error(
        "engine '{engine}' claims deadlock freedom but its tables have a channel dependency cycle: {cycle}"
    )]
    EngineBroken { engine: EngineKind, cycle: String },
    #[error(
        "the tables of engine '{engine}' are not deadlock free (channel dependency cycle: {cycle})"
    )]
    Cycle { engine: EngineKind, cycle: String },
}

/// A refused routing, with the verifier's report for the caller to show.
#[derive(Debug, thiserror::Error)]
#[error("{refusal}")]
pub struct Refused {
    pub refusal: Refusal,
    pub report: Box<Report>,
}

/// A routing the gate accepted, bound to the fabric it was checked on.
#[derive(Debug, Clone)]
pub struct Verified<T> {
    inner: T,
    report: Report,
    engine: EngineKind,
    fabric_id: u64,
    dependencies: Result<Arc<DependencySummary>, SummaryError>,
    step: Step,
}

impl<T> Verified<T> {
    pub fn get(&self) -> &T {
        &self.inner
    }
    /// The verifier's report of the accepted tables.
    pub fn report(&self) -> &Report {
        &self.report
    }
    pub fn engine(&self) -> EngineKind {
        self.engine
    }
    /// Whether these tables were checked on `f` (same nodes, GUIDs, links
    /// and LIDs).
    pub fn is_for(&self, f: &Fabric) -> bool {
        self.fabric_id == fingerprint(f)
    }
    pub fn into_inner(self) -> T {
        self.inner
    }
    /// The subnet's dependency summary for the whole-fabric check
    /// ([`super::summary`]), made from these tables and the verifier's
    /// graph when the gate accepted them; an error when the subnet has no
    /// router port on a switch or its tables give no summary (VL 15, a
    /// cycle [`Policy::AllowCycles`] let through).
    pub fn dependencies(&self) -> Result<&DependencySummary, &SummaryError> {
        self.dependencies.as_deref()
    }
    /// Whether these are final tables or a reroute's drain stage.
    pub fn step(&self) -> Step {
        self.step
    }
}

/// Verifies `routing` (made by `engine` for `f`) and applies the policy.
pub fn accept(
    f: &Fabric,
    engine: &dyn RoutingEngine,
    routing: Routing,
    policy: Policy,
) -> Result<Verified<Routing>, Refused> {
    let (report, local) = verify_keeping_local(f, &routing);
    settle(f, engine, routing, report, policy, from_local(f, &local))
}

/// [`accept`], with `side` run on a thread of its own beside the
/// verification, on the very tables being verified: the caller writes
/// them out while they are checked ([`crate::formats::stage_candidate`])
/// and puts them in place only if they are accepted. `side` has the tables
/// borrowed until both are done, so what it saw is what was verified.
/// Also returns how long the verification took on its own.
pub fn accept_while<S: Send>(
    f: &Fabric,
    engine: &dyn RoutingEngine,
    routing: Routing,
    policy: Policy,
    side: impl FnOnce(&Routing) -> S + Send,
) -> (Result<Verified<Routing>, Refused>, S, std::time::Duration) {
    let ((report, local), took, s) = beside(&routing, side, |r| verify_keeping_local(f, r));
    let accepted = settle(f, engine, routing, report, policy, from_local(f, &local));
    (accepted, s, took)
}

/// `work` on this thread and `side` on a thread of its own, both on
/// `routing`: what `work` gave, how long it took, what `side` gave. A
/// panic of `side` goes on in the caller.
pub fn beside<S: Send, T>(
    routing: &Routing,
    side: impl FnOnce(&Routing) -> S + Send,
    work: impl FnOnce(&Routing) -> T,
) -> (T, std::time::Duration, S) {
    std::thread::scope(|sc| {
        let h = sc.spawn(|| side(routing));
        let t = std::time::Instant::now();
        let out = work(routing);
        let took = t.elapsed();
        let s = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        (out, took, s)
    })
}

/// The dependency summary made from the CA-to-CA graph a walk kept.
fn from_local<'a>(
    f: &'a Fabric,
    local: &'a Option<super::LocalCdg>,
) -> impl FnOnce(&Routing, &Report) -> Result<Arc<DependencySummary>, SummaryError> + 'a {
    move |routing, report| match local {
        // A cycle the policy let through lies in the very graph the
        // summary stands for: no summary can vouch for it.
        Some(_) if !report.deadlock_free() => Err(SummaryError::Cyclic),
        Some(g) => summary::build(f, routing, g).map(Arc::new),
        None => Err(SummaryError::NoRouterPorts),
    }
}

/// [`accept`], with the multicast trees of `mc` checked with the unicast
/// routes in the same walk, and `side` run beside the walk (as
/// [`accept_while`]): the verdict, the multicast report (for accepted
/// tables only), what `side` gave, and how long the verification took.
pub fn accept_with_mcast_while<S: Send>(
    f: &Fabric,
    engine: &dyn RoutingEngine,
    routing: Routing,
    policy: Policy,
    mc: &Multicast,
    side: impl FnOnce(&Routing) -> S + Send,
) -> (
    Result<Verified<Routing>, Refused>,
    Option<McastReport>,
    S,
    std::time::Duration,
) {
    let ((report, local, m), took, s) = beside(&routing, side, |r| {
        let (report, local, all) = verify_keeping_both(f, r);
        let m = super::mcast::check(f, r, mc, &all);
        (report, local, m)
    });
    let accepted = settle(f, engine, routing, report, policy, from_local(f, &local));
    let m = accepted.is_ok().then_some(m);
    (accepted, m, s, took)
}

/// The policy applied to a report; accepted tables get their dependency
/// summary from `dependencies`.
fn settle(
    f: &Fabric,
    engine: &dyn RoutingEngine,
    routing: Routing,
    report: Report,
    policy: Policy,
    dependencies: impl FnOnce(&Routing, &Report) -> Result<Arc<DependencySummary>, SummaryError>,
) -> Result<Verified<Routing>, Refused> {
    match decide(f, engine, &report, policy) {
        Ok(()) => Ok(Verified {
            dependencies: dependencies(&routing, &report),
            inner: routing,
            report,
            engine: engine.kind(),
            fabric_id: fingerprint(f),
            step: Step::Final,
        }),
        Err(refusal) => Err(Refused {
            refusal,
            report: Box::new(report),
        }),
    }
}

/// [`accept`] for tables whose report was merged from parts computed
/// elsewhere ([`super::merge_parts`]: the report one process gives). The
/// parts keep no dependency graph, so the tables carry no summary for
/// inter-subnet checks; verify in one place for those.
pub fn accept_merged(
    f: &Fabric,
    engine: &dyn RoutingEngine,
    routing: Routing,
    report: Report,
    policy: Policy,
) -> Result<Verified<Routing>, Refused> {
    settle(f, engine, routing, report, policy, |_, _| {
        Err(SummaryError::Merged)
    })
}

/// A step of a reroute (see [`crate::dqr`]) to be written as a table set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The new tables: connected and deadlock free.
    Final,
    /// A drain stage: deadlock free; the pairs whose route led into the
    /// fault are dropped on purpose until the final tables follow.
    Drain,
}

/// Accepts the tables of a reroute of a routing `engine` computed: the
/// same checks as [`accept`] (with [`Policy::DeadlockFree`]), except that a
/// drain stage may leave pairs unrouted.
pub fn accept_step(
    f: &Fabric,
    engine: EngineKind,
    routing: Routing,
    step: Step,
) -> Result<Verified<Routing>, Refused> {
    let (report, local) = verify_keeping_local(f, &routing);
    let refusal = if step == Step::Final && !report.all_pairs_routed() {
        Some(unrouted(&report))
    } else {
        report
            .describe_cycle(f)
            .map(|cycle| Refusal::Cycle { engine, cycle })
    };
    if let Some(refusal) = refusal {
        return Err(Refused {
            refusal,
            report: Box::new(report),
        });
    }
    Ok(Verified {
        dependencies: match &local {
            Some(g) if step == Step::Final => summary::build(f, &routing, g).map(Arc::new),
            Some(_) => Err(SummaryError::Malformed(
                "a drain stage leaves pairs unrouted on purpose".into(),
            )),
            None => Err(SummaryError::NoRouterPorts),
        },
        inner: routing,
        report,
        engine,
        fabric_id: fingerprint(f),
        step,
    })
}

fn unrouted(report: &Report) -> Refusal {
    Refusal::Unrouted {
        broken: report.broken_pairs,
        pairs: report.pairs,
        first: report
            .broken_examples
            .first()
            .map(|b| format!("LID {} -> LID {}: {:?}", b.src_lid, b.dst_lid, b.fault)),
    }
}

/// The policy alone, on a report already made.
pub fn decide(
    f: &Fabric,
    engine: &dyn RoutingEngine,
    report: &Report,
    policy: Policy,
) -> Result<(), Refusal> {
    if !report.all_pairs_routed() {
        return Err(unrouted(report));
    }
    if report.deadlock_free() {
        return Ok(());
    }
    let cycle = report.describe_cycle(f).unwrap_or_default();
    if engine.claims_deadlock_free() {
        return Err(Refusal::EngineBroken {
            engine: engine.kind(),
            cycle,
        });
    }
    match policy {
        Policy::AllowCycles => Ok(()),
        Policy::DeadlockFree => Err(Refusal::Cycle {
            engine: engine.kind(),
            cycle,
        }),
    }
}

/// A hash of what tables depend on: nodes, GUIDs, links and LIDs (FNV-1a;
/// it tells fabrics apart, it guards against no adversary).
fn fingerprint(f: &Fabric) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |v: u64| {
        for b in v.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    mix(f.num_nodes() as u64);
    mix(f.num_slots() as u64);
    for n in 0..f.num_nodes() as u32 {
        mix(f.guid(n));
    }
    for s in 0..f.num_slots() as u32 {
        let r = f.remote(s);
        mix(if r == NONE { u64::MAX } else { u64::from(r) });
        mix(f.port_guid(s));
        mix(u64::from(f.lid_of_slot(s)));
        mix(u64::from(f.lmc(s)));
    }
    h
}
