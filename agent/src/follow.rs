//! Following the live fabric (`[fabric]` in the config): the topology comes
//! from `ibnetdiscover`, on a schedule and at once when OpenSM's ibfabric
//! plugin counts a heavy sweep (a link or switch came or went); a changed
//! topology is rerouted, the new set written where the plugin applies it,
//! OpenSM optionally signalled, and the switches read back until they hold
//! exactly the new tables, which must verify deadlock free as read.

use crate::config::{AgentConfig, LiveFabric};
use crate::subnet::RoutedSubnet;
use crate::{Agent, AgentError};
use fabric::formats::ibnetdiscover;
use fabric::model::Fabric;
use fabric::tables::Routing;
use fabric::verify::{Step, Verified};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;

/// Written by the plugin after each heavy sweep's discovery.
pub const SWEEP_STAMP: &str = "opensm-sweep.txt";
/// The plugin's verdict on the last set it saw.
pub const PLUGIN_STATUS: &str = "opensm-plugin-status.txt";
/// Where the confirmation reads the switches back into, under `out_dir`.
pub const READBACK_DIR: &str = "readback";

#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error(transparent)]
    Live(#[from] crate::live::LiveError),
    #[error(transparent)]
    Fabric(#[from] fabric::error::Error),
    #[error("OpenSM's ibfabric plugin refused generation {generation}: {reason}")]
    Refused { generation: u64, reason: String },
    #[error("the switches do not hold generation {generation} after {secs:.1} s: {last}")]
    NotApplied {
        generation: u64,
        secs: f64,
        last: String,
    },
    #[error(
        "the tables read back from the switches are not deadlock free or leave pairs unrouted: {0}"
    )]
    LiveUnsafe(String),
    #[error("task failed: {0}")]
    Task(String),
    #[error("{0}")]
    Discovery(fabric::discovery::DiscoveryRefused),
}

/// What the confirmation found.
#[derive(Debug)]
pub struct Confirmed {
    pub generation: u64,
    pub seconds: f64,
    pub lft_entries: u64,
    pub sl2vl_rows: u64,
    pub path_sls: u64,
}

/// Runs `ibnetdiscover` and writes what it printed to the config's
/// `topology` file when it describes another fabric than `known`. Returns
/// the fabric it wrote (parsed once, handed on in memory), or None when
/// nothing changed.
pub fn discover_into(
    cfg: &AgentConfig,
    live: &LiveFabric,
    known: Option<&Fabric>,
) -> Result<Option<Fabric>, FollowError> {
    let text = live.diags().discover()?;
    // Parsed before it replaces anything: a discovery the reader refuses
    // (an incomplete one) leaves the topology in force.
    let mut found = ibnetdiscover::parse_with_lmc(&text, &cfg.topology)?;
    found.subnet_prefix = cfg.subnet_prefix;
    // An empty discovery never replaces the topology file: an agent that
    // restarts routes the fabric it last saw.
    if let Err(e @ fabric::discovery::DiscoveryRefused::Empty { .. }) =
        fabric::discovery::check(None, &found)
    {
        return Err(FollowError::Discovery(e));
    }
    // Matched by GUID and port, not by text: the fabric in force keeps
    // failed nodes (unlinked) so that its tables index it.
    if known.is_some_and(|k| fabric::dqr::change_between(k, &found) == fabric::dqr::Change::Same) {
        return Ok(None);
    }
    fabric::formats::write_file(&cfg.topology, &text)?;
    Ok(Some(found))
}

fn stamp(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Reads the switches back until they hold `written` (the set in
/// `out_dir`'s manifest, computed for `wf`), the plugin refuses it, or the
/// time runs out. Final tables must verify connected and deadlock free as
/// read; a drain stage read back as written is what the gate accepted.
pub fn confirm(
    live: &LiveFabric,
    out_dir: &Path,
    wf: &Fabric,
    verified: &Verified<Routing>,
) -> Result<Confirmed, FollowError> {
    let (written, step) = (verified.get(), verified.step());
    let t0 = Instant::now();
    let generation = fabric::formats::tableset::check_dir(out_dir)?.generation;
    let deadline = t0 + Duration::from_millis(live.confirm_timeout_ms);
    let diags = live.diags();
    let readback = out_dir.join(READBACK_DIR);
    loop {
        if let Some(Err(reason)) = plugin_verdict(out_dir, generation) {
            return Err(FollowError::Refused { generation, reason });
        }
        // A drain stage is confirmed by its forwarding tables alone (see
        // [`crate::live::Diags::read_back_lfts`]); its other tables are
        // the written ones, which the gate verified.
        let (sampled, read) = match step {
            Step::Final => (diags.path_sample.is_some(), diags.read_back(&readback)),
            Step::Drain => (true, diags.read_back_lfts(&readback)),
        };
        let lfts_only;
        let expect = match step {
            Step::Final => written,
            Step::Drain => {
                lfts_only = Routing {
                    lfts: written.lfts.clone(),
                    sl2vl: None,
                    path_sl: None,
                    vls_needed: None,
                };
                &lfts_only
            }
        };
        let last = match read.map(|rb| matches_written(wf, written, expect, step, &rb, sampled)) {
            Ok(Ok(c)) => {
                return Ok(Confirmed {
                    generation,
                    seconds: t0.elapsed().as_secs_f64(),
                    lft_entries: c.lft_entries,
                    sl2vl_rows: c.sl2vl_rows,
                    path_sls: c.path_sls,
                });
            }
            Ok(Err(Differ::Unsafe(why))) => return Err(FollowError::LiveUnsafe(why)),
            Ok(Err(Differ::Not(last))) => last,
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(FollowError::NotApplied {
                generation,
                secs: t0.elapsed().as_secs_f64(),
                last,
            });
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Why a read-back does not confirm the written tables.
enum Differ {
    /// Not (yet) what was written: the reason, for the last attempt.
    Not(String),
    /// What was written is in force, and it is not safe as read.
    Unsafe(String),
}

/// Compares one read-back with `expect` (the written tables, or their
/// LFTs alone for a drain stage); final tables are verified as read too.
fn matches_written(
    wf: &Fabric,
    written: &Routing,
    expect: &Routing,
    step: Step,
    rb: &crate::live::ReadBack,
    sampled: bool,
) -> Result<fabric::audit::Comparison, Differ> {
    let c = fabric::audit::compare(wf, expect, &rb.fabric, &rb.routing, sampled, 3);
    if !c.matches() {
        return Err(Differ::Not(format!(
            "{} of {} entries differ, first {:?}",
            c.differences,
            c.lft_entries + c.sl2vl_rows + c.path_sls,
            c.first.first()
        )));
    }
    if step == Step::Final {
        let tables = fabric::audit::verifiable(wf, written, &rb.fabric, &rb.routing, sampled);
        let r = fabric::verify::verify(&rb.fabric, &tables);
        if !r.ok() {
            return Err(Differ::Unsafe(format!(
                "{} broken pairs, cycle: {}",
                r.broken_pairs,
                if r.deadlock_free() { "none" } else { "yes" }
            )));
        }
    }
    Ok(c)
}

fn signal_opensm(pid_file: &Path) {
    let pid = match std::fs::read_to_string(pid_file) {
        Ok(s) => s.trim().to_string(),
        Err(e) => {
            tracing::warn!(file = %pid_file.display(), "cannot read OpenSM's PID: {e}");
            return;
        }
    };
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        tracing::warn!(file = %pid_file.display(), "not a PID: '{pid}'");
        return;
    }
    match std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
    {
        Ok(s) if s.success() => tracing::info!(pid, "asked OpenSM for a heavy sweep (SIGHUP)"),
        Ok(s) => tracing::warn!(pid, "kill -HUP failed: {s}"),
        Err(e) => tracing::warn!(pid, "kill -HUP: {e}"),
    }
}

/// After a reroute: signal OpenSM if configured, then confirm from the
/// switches (logged; a failure is an error line, the agent goes on).
pub async fn apply_and_confirm(agent: &Arc<Agent>, t_change: Instant) {
    let (Some(live), Some(out_dir)) = (agent.cfg.fabric.clone(), agent.cfg.out_dir.clone()) else {
        return;
    };
    if let Some(p) = &live.opensm_pid_file {
        signal_opensm(p);
    }
    if !live.confirm {
        return;
    }
    let Some(routed) = agent.subnet.load_full() else {
        return;
    };
    let res = tokio::task::spawn_blocking(move || {
        confirm(&live, &out_dir, &routed.fabric, &routed.routing)
    })
    .await;
    match res {
        Ok(Ok(c)) => tracing::info!(
            generation = c.generation,
            confirm_secs = c.seconds,
            since_change_secs = t_change.elapsed().as_secs_f64(),
            lft_entries = c.lft_entries,
            sl2vl_rows = c.sl2vl_rows,
            path_sls = c.path_sls,
            "tables confirmed in the switches and verified deadlock free as read"
        ),
        Ok(Err(e)) => tracing::error!("{e}"),
        Err(e) => tracing::error!("confirmation task failed: {e}"),
    }
}

/// Applies one drain stage of an update: writes it where OpenSM's plugin
/// applies it, signals OpenSM when configured, and returns once the
/// switches hold it (read back with `[fabric] confirm`), or the plugin
/// reports it applied. Without either, it waits `stage_wait_ms` for a
/// report that may never come, then goes on: nothing else tells. `to` is
/// the update the stage leads to: the stage indexes its fabric.
pub async fn apply_stage(
    agent: &Arc<Agent>,
    to: &Arc<RoutedSubnet>,
    stage: Verified<Routing>,
    n: usize,
) -> Result<(), FollowError> {
    let Some(dir) = agent.cfg.out_dir.clone() else {
        // No table set reaches a fabric: nothing to order.
        return Ok(());
    };
    let t0 = Instant::now();
    let had_status = dir.join(PLUGIN_STATUS).exists();
    let (to2, dir2) = (to.clone(), dir.clone());
    let export = agent.cfg.export();
    let stage = Arc::new(stage);
    let st = stage.clone();
    let generation = tokio::task::spawn_blocking(move || {
        // The stage carries the trees the update leads to: they were
        // checked with it, and without them OpenSM would build its own.
        let mut staged = fabric::formats::stage_routing(&to2.fabric, &st, &dir2, export)?;
        if let Some(m) = &to2.mcast {
            staged = staged.with_multicast(&to2.fabric, m)?;
        }
        staged.commit()?;
        fabric::formats::tableset::check_dir(&dir2).map(|m| m.generation)
    })
    .await
    .map_err(|e| FollowError::Task(e.to_string()))??;
    tracing::info!(
        stage = n,
        generation,
        "drain stage written: the entries toward rerouted destinations are dropped until the new tables follow"
    );
    if let Some(live) = agent.cfg.fabric.clone() {
        if let Some(p) = &live.opensm_pid_file {
            signal_opensm(p);
        }
        if live.confirm {
            let (to, dir) = (to.clone(), dir.clone());
            let c = tokio::task::spawn_blocking(move || confirm(&live, &dir, &to.fabric, &stage))
                .await
                .map_err(|e| FollowError::Task(e.to_string()))??;
            tracing::info!(
                stage = n,
                generation,
                confirm_secs = c.seconds,
                "drain stage confirmed in the switches"
            );
            return Ok(());
        }
    }
    // A plugin that has reported before is waited for as long as a
    // confirmation; without one, only `stage_wait_ms`.
    let wait = if had_status {
        agent
            .cfg
            .fabric
            .as_ref()
            .map_or(Duration::from_millis(120_000), |l| {
                Duration::from_millis(l.confirm_timeout_ms)
            })
    } else {
        Duration::from_millis(agent.routing_config().stage_wait_ms)
    };
    loop {
        match plugin_verdict(&dir, generation) {
            Some(Ok(())) => {
                tracing::info!(
                    stage = n,
                    generation,
                    secs = t0.elapsed().as_secs_f64(),
                    "OpenSM's plugin applied the drain stage"
                );
                return Ok(());
            }
            Some(Err(reason)) => return Err(FollowError::Refused { generation, reason }),
            None => {}
        }
        if t0.elapsed() >= wait {
            if had_status {
                return Err(FollowError::NotApplied {
                    generation,
                    secs: t0.elapsed().as_secs_f64(),
                    last: "OpenSM's plugin did not report the drain stage".into(),
                });
            }
            tracing::warn!(
                stage = n,
                generation,
                wait_ms = agent.routing_config().stage_wait_ms,
                "no report that the drain stage is applied (no ibfabric plugin?); going on"
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The plugin's verdict on `generation`, if it gave one.
fn plugin_verdict(dir: &Path, generation: u64) -> Option<Result<(), String>> {
    let s = std::fs::read_to_string(dir.join(PLUGIN_STATUS)).ok()?;
    let s = s.trim();
    if s == format!("applied generation {generation}") {
        return Some(Ok(()));
    }
    s.strip_prefix(&format!("refused generation {generation}: "))
        .map(|r| Err(r.to_string()))
}

/// The loop: rediscover on schedule or when OpenSM swept, reroute when the
/// fabric changed.
pub async fn follow_fabric(agent: Arc<Agent>, mut shutdown: watch::Receiver<bool>) {
    let (Some(live), Some(out_dir)) = (agent.cfg.fabric.clone(), agent.cfg.out_dir.clone()) else {
        return;
    };
    let sweep: PathBuf = out_dir.join(SWEEP_STAMP);
    let mut last_sweep = stamp(&sweep);
    let every = Duration::from_millis(live.rediscover_ms);
    let mut next = Instant::now() + every;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = shutdown.changed() => return,
        }
        let s = stamp(&sweep);
        let swept = s.is_some() && s != last_sweep;
        if !swept && Instant::now() < next {
            continue;
        }
        last_sweep = s;
        next = Instant::now() + every;
        let t_change = Instant::now();
        let (cfg, live2) = (agent.cfg.clone(), live.clone());
        let known = agent.subnet.load_full();
        let found = tokio::task::spawn_blocking(move || {
            discover_into(&cfg, &live2, known.as_deref().map(|k| &k.fabric))
        })
        .await;
        let found = match found {
            Ok(Ok(None)) => {
                tracing::debug!(swept, "fabric unchanged");
                continue;
            }
            Ok(Ok(Some(f))) => {
                tracing::info!(swept, "the fabric changed; rerouting");
                f
            }
            Ok(Err(e)) => {
                tracing::error!("discovery failed, keeping the tables in force: {e}");
                continue;
            }
            Err(e) => {
                tracing::error!("discovery task failed: {e}");
                continue;
            }
        };
        match agent.reroute_with(Some(found)).await {
            Ok(true) => apply_and_confirm(&agent, t_change).await,
            Ok(false) => tracing::debug!("the same fabric: tables in force kept"),
            Err(e) => tracing::error!("reroute failed, keeping the tables in force: {e}"),
        }
    }
}

/// At start: the fabric's topology into the `topology` file, and the
/// fabric as parsed, for the first route to take in memory. When the
/// fabric cannot be read and a topology file exists, that file serves
/// (None: the first route reads it).
pub async fn initial_discovery(agent: &Arc<Agent>) -> Result<Option<Fabric>, AgentError> {
    let Some(live) = agent.cfg.fabric.clone() else {
        return Ok(None);
    };
    let cfg = agent.cfg.clone();
    let res = tokio::task::spawn_blocking(move || discover_into(&cfg, &live, None)).await?;
    match res {
        Ok(found) => Ok(found),
        Err(e) if agent.cfg.topology.exists() => {
            tracing::warn!(topology = %agent.cfg.topology.display(), "cannot read the fabric ({e}); routing the topology file until it can");
            Ok(None)
        }
        Err(e) => Err(AgentError::Follow(e)),
    }
}
