//! Chaos across hosts: the control plane as containers on private Docker
//! networks (3 etcd members, 2 controllers, 4 agents, 2 routers; see
//! `integration_tests::chaos`), faults injected with the docker CLI.
//!
//! One test drives every scenario in turn on one cluster (building the
//! image and starting the cluster costs more than the scenarios), so they
//! never overlap. Each scenario changes a subnet's topology as it injects
//! its fault, so "recovered" means the change went all the way through
//! the leader that survives: exactly one controller leads, every agent is
//! live with it and holds its latest mapping, every router holds its
//! latest egress tables (built from verified, deadlock-free reports) and
//! told it so. The time from the fault to that state must stay within
//! `BOUND`. All along, a monitor checks every probe round: no router ever
//! puts in force a table older than one it held or one no leader
//! published, and no leader or agent loses a subnet's mapping.
//!
//! Without a Docker daemon the test says so on one line and passes.

use integration_tests::chaos::{
    AGENT_LEASE, ChaosCluster, ELECTION_TTL, Expect, Monitor, Project, docker_async,
    docker_unavailable, fmt_version, unix_ms,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Recovery bound of every scenario: two election leases. A leader fault
/// costs one lease before another controller may win, the rest is for the
/// clients to find it and the change to go through.
const BOUND: Duration = Duration::from_secs(2 * ELECTION_TTL.as_secs());
/// How long a scenario is watched before it counts as not recovered, so a
/// slow recovery is measured rather than cut off at the bound.
const OBSERVE: Duration = Duration::from_secs(30);
/// The nemesis's bound from the end of its last fault to the whole cluster
/// recovered: its last fault may be any of them, and faults before it may
/// have left work queued (a push to a router that was paused).
const NEMESIS_BOUND: Duration = Duration::from_secs(4 * ELECTION_TTL.as_secs());
/// The nemesis's seed and length, from the environment (CI runs the
/// defaults; `IBFABRIC_NEMESIS_SEED=n IBFABRIC_NEMESIS_SECONDS=600` by hand).
fn nemesis_params() -> (u64, u64) {
    let get = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    (
        get("IBFABRIC_NEMESIS_SEED", 1),
        get("IBFABRIC_NEMESIS_SECONDS", 60),
    )
}

/// A seeded schedule of every kind of fault at once
/// (`integration_tests::nemesis`); the monitor checks the history all
/// along, and the cluster must be whole within [`NEMESIS_BOUND`] after the
/// last fault.
async fn nemesis(c: &ChaosCluster, m: &mut Monitor, o: &mut Outcome) -> Result<(), String> {
    let (seed, secs) = nemesis_params();
    o.bound = NEMESIS_BOUND;
    settle(c, m).await?;
    let run =
        integration_tests::nemesis::run(c, m, seed, Duration::from_secs(secs), OBSERVE, all_up())
            .await;
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for (_, f) in &run.faults {
        let k = format!("{f:?}");
        let k = k.split(['(', ' ']).next().unwrap_or("").to_string();
        *kinds.entry(k).or_default() += 1;
    }
    o.notes.push(format!(
        "seed {seed}, {secs} s: {} faults ({}); {} probe rounds checked",
        run.faults.len(),
        kinds
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        run.rounds
    ));
    o.phase(
        "converged",
        run.converged
            .ok_or_else(|| "did not converge after the last fault".to_string()),
    );
    o.errors.extend(run.errors);
    if !o.passed() {
        o.notes.push(format!(
            "replay: IBFABRIC_NEMESIS_SEED={seed} IBFABRIC_NEMESIS_SECONDS={secs} cargo nextest run -p integration-tests --test chaos --no-capture"
        ));
    }
    Ok(())
}

/// How long the cluster may take to heal after a fault is lifted, before
/// the next scenario starts anyway.
const HEAL: Duration = Duration::from_secs(60);

/// One measured phase of a scenario.
struct Phase {
    label: String,
    took: Result<Duration, String>,
}

struct Outcome {
    name: &'static str,
    /// The recovery bound of its phases.
    bound: Duration,
    phases: Vec<Phase>,
    notes: Vec<String>,
    errors: Vec<String>,
    violations: Vec<String>,
}

impl Outcome {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            bound: BOUND,
            phases: Vec::new(),
            notes: Vec::new(),
            errors: Vec::new(),
            violations: Vec::new(),
        }
    }

    fn phase(&mut self, label: &str, took: Result<Duration, String>) {
        self.phases.push(Phase {
            label: label.to_string(),
            took,
        });
    }

    fn passed(&self) -> bool {
        self.errors.is_empty()
            && self.violations.is_empty()
            && !self.phases.is_empty()
            && self
                .phases
                .iter()
                .all(|p| p.took.as_ref().is_ok_and(|t| *t <= self.bound))
    }

    /// `chaos: <scenario>: recovered in X.Y s (bound B s)`, then the other
    /// phases and notes.
    fn line(&self) -> String {
        let verdict = if self.passed() { "ok" } else { "FAILED" };
        let mut parts = Vec::new();
        for (k, p) in self.phases.iter().enumerate() {
            let what = if k == 0 {
                "recovered".to_string()
            } else {
                p.label.clone()
            };
            parts.push(match &p.took {
                Ok(t) if *t <= self.bound => format!("{what} in {:.1} s", t.as_secs_f64()),
                Ok(t) => format!("{what} in {:.1} s, OVER THE BOUND", t.as_secs_f64()),
                Err(why) => format!("{what}: NOT within {} s ({why})", OBSERVE.as_secs()),
            });
        }
        if parts.is_empty() {
            parts.push("not run".into());
        }
        let mut s = format!(
            "chaos: {}: {} (bound {:.1} s) [{verdict}]",
            self.name,
            parts.join("; "),
            self.bound.as_secs_f64()
        );
        for n in &self.notes {
            s += &format!("\n    {n}");
        }
        for e in &self.errors {
            s += &format!("\n    error: {e}");
        }
        for v in &self.violations {
            s += &format!("\n    violation: {v}");
        }
        s
    }
}

fn all_up() -> Expect {
    Expect {
        etcd_healthy: true,
        ..Expect::default()
    }
}

async fn docker(args: &[&str]) -> Result<String, String> {
    docker_async(args.iter().map(|s| s.to_string()).collect())
        .await
        .map_err(|e| e.to_string())
}

/// Waits for the cluster to be whole before a scenario; its leader.
async fn settle(c: &ChaosCluster, m: &mut Monitor) -> Result<usize, String> {
    let now = Instant::now();
    m.wait_recovered(c, &all_up(), now, now, HEAL)
        .await
        .map(|(_, l)| l)
        .map_err(|e| format!("the cluster did not recover before the scenario: {e}"))
}

/// Runs `body` between the monitor's violation counts, so a scenario owns
/// the violations found while it ran.
async fn scenario<F>(c: &ChaosCluster, m: &mut Monitor, o: &mut Outcome, body: F)
where
    F: AsyncFnOnce(&ChaosCluster, &mut Monitor, &mut Outcome) -> Result<(), String>,
{
    let before = m.violations(c).len();
    if let Err(e) = body(c, m, o).await {
        o.errors.push(e);
    }
    o.violations = m.violations(c).split_off(before);
    eprintln!("{}", o.line());
}

/// Which agent's topology the next scenario changes.
struct Flips(usize);

impl Flips {
    fn next(&mut self, avoid: Option<usize>) -> usize {
        let mut i = self.0 % integration_tests::chaos::SUBNETS;
        if Some(i) == avoid {
            i = (i + 1) % integration_tests::chaos::SUBNETS;
        }
        self.0 = i + 1;
        i
    }
}

/// When another controller led alone, so that the election and the
/// clients' part of a recovery can be told apart.
fn elected(m: &Monitor, t0: Instant, old: usize) -> String {
    match m.led_by_other_after(t0, old) {
        Some(t) => format!(
            "another controller led alone {:.1} s after the fault",
            t.as_secs_f64()
        ),
        None => "no other controller ever led alone".to_string(),
    }
}

/// Cuts the leader from one network while an agent's topology changes;
/// another controller must lead and carry the change to everyone, then
/// the link comes back and the cluster must be whole again.
async fn partition(
    c: &ChaosCluster,
    m: &mut Monitor,
    o: &mut Outcome,
    flips: &mut Flips,
    from_store: bool,
) -> Result<(), String> {
    let l0 = settle(c, m).await?;
    let ctl = &c.controllers[l0];
    c.cut_controller(l0, from_store)
        .await
        .map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let flipped = flips.next(None);
    c.flip_topology(flipped).await.map_err(|e| e.to_string())?;
    let e = Expect {
        not_leader: vec![l0],
        ..Expect::default()
    };
    let r = m.wait_recovered(c, &e, t0, t0, OBSERVE).await;
    o.notes.push(format!(
        "cut {} (leader) from the {} network; {} changed topology",
        ctl.name,
        if from_store { "etcd" } else { "client" },
        c.agents[flipped].name
    ));
    if let Ok((_, l)) = &r {
        o.notes
            .push(format!("{} took over", c.controllers[*l].name));
    }
    o.notes.push(elected(m, t0, l0));
    o.phase("recovered", r.map(|(t, _)| t));
    c.reconnect_controller(l0, from_store)
        .await
        .map_err(|e| e.to_string())?;
    let t1 = Instant::now();
    let healed = m.wait_recovered(c, &all_up(), t1, t1, HEAL).await;
    match healed {
        Ok((t, l)) => o.notes.push(format!(
            "link restored: whole again after {:.1} s, {} leads",
            t.as_secs_f64(),
            c.controllers[l].name
        )),
        Err(e) => o.errors.push(format!(
            "not whole {} s after the link came back: {e}",
            HEAL.as_secs()
        )),
    }
    Ok(())
}

/// SIGKILLs the leader in the middle of a push: one router is frozen
/// (`docker pause`) so the push of a topology change cannot finish; once
/// the leader has published the new tables and the other router holds
/// them, the leader is killed and the frozen router thawed. The new leader
/// must finish the push from what the dead one wrote, and neither router
/// may ever put an older table in force. (Without the frozen router the
/// push is over in milliseconds, long before `docker kill` lands.)
async fn kill_leader_during_push(
    c: &ChaosCluster,
    m: &mut Monitor,
    o: &mut Outcome,
    flips: &mut Flips,
) -> Result<(), String> {
    let l0 = settle(c, m).await?;
    let ctl = &c.controllers[l0];
    let (done, frozen) = (0, 1);
    let before = c.controller_state(l0).await?;
    let published = |s: &proto::v1::ControllerState| -> Vec<u64> {
        c.router_guids
            .iter()
            .map(|g| {
                s.routers
                    .iter()
                    .find(|r| r.router_guid == *g)
                    .map_or(0, |r| r.egress_version)
            })
            .collect()
    };
    let old = published(&before);
    docker(&["pause", &c.routers[frozen].container]).await?;
    let flipped = flips.next(None);
    let flip_at = Instant::now();
    if let Err(e) = c.flip_topology(flipped).await {
        docker(&["unpause", &c.routers[frozen].container]).await?;
        return Err(e.to_string());
    }
    // The agent polls its topology file twice a second, then routes and
    // reports; the leader writes, publishes and pushes.
    let mut new = None;
    while flip_at.elapsed() < Duration::from_secs(10) {
        if let Ok(s) = c.controller_state(l0).await {
            let v = published(&s);
            if v != old
                && c.router_state(done)
                    .await
                    .is_ok_and(|r| r.version == v[done])
            {
                new = Some(v);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let kill = docker(&["kill", "-s", "KILL", &ctl.container]).await;
    let t0 = Instant::now();
    let killed_ms = unix_ms();
    docker(&["unpause", &c.routers[frozen].container]).await?;
    kill?;
    let e = Expect {
        not_leader: vec![l0],
        ..Expect::default()
    };
    let r = m.wait_recovered(c, &e, t0, t0, OBSERVE).await;
    match &new {
        Some(v) => {
            let had: Vec<String> = v
                .iter()
                .enumerate()
                .map(|(i, &ver)| {
                    format!(
                        "{} {}",
                        c.routers[i].name,
                        match m.installed_at(i, ver) {
                            Some(at) if at <= killed_ms =>
                                format!("had {} before the kill", fmt_version(ver)),
                            Some(at) => format!(
                                "put {} in force {} ms after the kill",
                                fmt_version(ver),
                                at - killed_ms
                            ),
                            None => format!("never put {} in force", fmt_version(ver)),
                        }
                    )
                })
                .collect();
            o.notes.push(format!(
                "{} changed topology; {} frozen; {} published {} and {} held it; \
                 SIGKILLed {} {:.1} s after the change; {}",
                c.agents[flipped].name,
                c.routers[frozen].name,
                ctl.name,
                fmt_version(v[done]),
                c.routers[done].name,
                ctl.name,
                (t0 - flip_at).as_secs_f64(),
                had.join(", ")
            ));
        }
        None => o.errors.push(format!(
            "{} did not publish the change of {} (or {} did not take it) within 10 s; \
             killed it anyway",
            ctl.name, c.agents[flipped].name, c.routers[done].name
        )),
    }
    if let Ok((_, l)) = &r {
        o.notes
            .push(format!("{} took over", c.controllers[*l].name));
    }
    o.notes.push(elected(m, t0, l0));
    o.phase("recovered", r.map(|(t, _)| t));
    docker(&["start", &ctl.container]).await?;
    let t1 = Instant::now();
    match m.wait_recovered(c, &all_up(), t1, t1, HEAL).await {
        Ok((t, _)) => o.notes.push(format!(
            "{} restarted: whole again after {:.1} s",
            ctl.name,
            t.as_secs_f64()
        )),
        Err(e) => o.errors.push(format!(
            "not whole {} s after {} restarted: {e}",
            HEAL.as_secs(),
            ctl.name
        )),
    }
    Ok(())
}

/// Restarts the etcd member that leads the raft group while a topology
/// change must be written through it.
async fn restart_etcd_member(
    c: &ChaosCluster,
    m: &mut Monitor,
    o: &mut Outcome,
    flips: &mut Flips,
) -> Result<(), String> {
    settle(c, m).await?;
    let k = c.etcd_leader().await.unwrap_or(0);
    let member = &c.etcd[k];
    let t0 = Instant::now();
    let restart = tokio::spawn(docker_async(vec![
        "restart".into(),
        "-t".into(),
        "5".into(),
        member.container.clone(),
    ]));
    let flipped = flips.next(None);
    c.flip_topology(flipped).await.map_err(|e| e.to_string())?;
    match restart.await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(e.to_string()),
        Err(e) => return Err(e.to_string()),
    }
    let back = Instant::now();
    o.notes.push(format!(
        "restarted {} (raft leader) in {:.1} s; {} changed topology",
        member.name,
        (back - t0).as_secs_f64(),
        c.agents[flipped].name
    ));
    // Rounds from before the member went down would show it healthy.
    let r = m.wait_recovered(c, &all_up(), t0, back, OBSERVE).await;
    o.phase("recovered", r.map(|(t, _)| t));
    Ok(())
}

/// Freezes an agent past its lease while another subnet changes: the rest
/// must carry on and the frozen subnet keep its mapping; once thawed, the
/// agent must catch up.
async fn pause_agent(
    c: &ChaosCluster,
    m: &mut Monitor,
    o: &mut Outcome,
    flips: &mut Flips,
) -> Result<(), String> {
    settle(c, m).await?;
    let paused = 0;
    let agent = &c.agents[paused];
    docker(&["pause", &agent.container]).await?;
    let t0 = Instant::now();
    let flipped = flips.next(Some(paused));
    c.flip_topology(flipped).await.map_err(|e| e.to_string())?;
    let e = Expect {
        skip_agents: vec![paused],
        ..Expect::default()
    };
    let r = m.wait_recovered(c, &e, t0, t0, OBSERVE).await;
    o.phase("recovered", r.map(|(t, _)| t));
    // Frozen past two leases, so the leader sees it silent; the monitor
    // checks every round that its subnet keeps its mapping meanwhile.
    let frozen = AGENT_LEASE * 2;
    tokio::time::sleep(frozen.saturating_sub(t0.elapsed())).await;
    let o_frozen = m.next_after(Instant::now()).await;
    let still_live = o_frozen.controllers.iter().flatten().any(|s| {
        s.leader
            && s.subnets
                .iter()
                .any(|s| s.subnet_prefix == c.prefixes[paused] && s.live)
    });
    docker(&["unpause", &agent.container]).await?;
    let t1 = Instant::now();
    o.notes.push(format!(
        "paused {} for {:.1} s; {} changed topology meanwhile; the leader {} it live at the end",
        agent.name,
        t0.elapsed().as_secs_f64(),
        c.agents[flipped].name,
        if still_live {
            "still called"
        } else {
            "no longer called"
        }
    ));
    let r = m.wait_recovered(c, &all_up(), t1, t1, OBSERVE).await;
    o.phase("after unpause", r.map(|(t, _)| t));
    Ok(())
}

/// Restarts every container in turn (`docker restart`: SIGTERM, then a
/// new process): etcd members, the follower controller, then the leader,
/// agents, routers. Each restart comes with a topology change, and each
/// must be recovered from within the bound before the next.
async fn rolling_restart(
    c: &ChaosCluster,
    m: &mut Monitor,
    o: &mut Outcome,
    flips: &mut Flips,
) -> Result<(), String> {
    let l0 = settle(c, m).await?;
    let mut order: Vec<&integration_tests::chaos::Node> = c.etcd.iter().collect();
    order.push(&c.controllers[1 - l0]);
    order.push(&c.controllers[l0]);
    order.extend(c.agents.iter());
    order.extend(c.routers.iter());
    let t_all = Instant::now();
    let mut steps = Vec::new();
    for node in order {
        let agent = c.agents.iter().position(|a| a.name == node.name);
        if let Some(i) = agent {
            // A restarted agent has no mapping until the leader pushes it.
            m.exempt_agent(i, true);
        }
        let t0 = Instant::now();
        let restart = tokio::spawn(docker_async(vec![
            "restart".into(),
            "-t".into(),
            "5".into(),
            node.container.clone(),
        ]));
        let flipped = flips.next(agent);
        c.flip_topology(flipped).await.map_err(|e| e.to_string())?;
        match restart.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e.to_string()),
            Err(e) => return Err(e.to_string()),
        }
        let back = Instant::now();
        let r = m.wait_recovered(c, &all_up(), t0, back, OBSERVE).await;
        if let Some(i) = agent {
            m.exempt_agent(i, false);
        }
        let took = r.map(|(t, _)| t);
        eprintln!(
            "chaos:   rolling restart of {}: {}",
            node.name,
            match &took {
                Ok(t) => format!("recovered in {:.1} s", t.as_secs_f64()),
                Err(e) => format!("NOT within {} s: {e}", OBSERVE.as_secs()),
            }
        );
        let failed = took.is_err();
        steps.push((node.name.clone(), took));
        if failed {
            break;
        }
    }
    let worst = steps
        .iter()
        .max_by_key(|(_, t)| t.as_ref().map_or(Duration::MAX, |t| *t))
        .cloned();
    if let Some((name, took)) = worst {
        o.phase("recovered", took);
        o.notes.push(format!(
            "slowest step: {name}; {} restarts in {:.1} s: {}",
            steps.len(),
            t_all.elapsed().as_secs_f64(),
            steps
                .iter()
                .map(|(n, t)| match t {
                    Ok(t) => format!("{n} {:.1} s", t.as_secs_f64()),
                    Err(_) => format!("{n} not recovered"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_suite() {
    if let Some(why) = docker_unavailable() {
        eprintln!("chaos: SKIPPED (no Docker daemon): {why}");
        return;
    }
    let project = Project::new();
    let t_start = Instant::now();
    let c = match ChaosCluster::start(&project).await {
        Ok(c) => Arc::new(c),
        Err(e) => panic!("chaos: the cluster did not start: {e:#}"),
    };
    let mut m = Monitor::start(c.clone());
    let now = Instant::now();
    if let Err(e) = m
        .wait_recovered(&c, &all_up(), now, now, Duration::from_secs(120))
        .await
    {
        panic!(
            "chaos: the control plane never converged: {e}\n{}",
            c.logs_tail(30).await
        );
    }
    eprintln!(
        "chaos: cluster {} up and converged in {:.1} s (image {})",
        c.project,
        t_start.elapsed().as_secs_f64(),
        c.image
    );
    m.arm();

    let mut flips = Flips(0);
    let mut outcomes = Vec::new();
    let mut o = Outcome::new("partition-leader-from-etcd");
    scenario(&c, &mut m, &mut o, async |c, m, o| {
        partition(c, m, o, &mut flips, true).await
    })
    .await;
    outcomes.push(o);
    let mut o = Outcome::new("partition-leader-from-clients");
    scenario(&c, &mut m, &mut o, async |c, m, o| {
        partition(c, m, o, &mut flips, false).await
    })
    .await;
    outcomes.push(o);
    let mut o = Outcome::new("kill-leader-during-push");
    scenario(&c, &mut m, &mut o, async |c, m, o| {
        kill_leader_during_push(c, m, o, &mut flips).await
    })
    .await;
    outcomes.push(o);
    let mut o = Outcome::new("restart-etcd-member");
    scenario(&c, &mut m, &mut o, async |c, m, o| {
        restart_etcd_member(c, m, o, &mut flips).await
    })
    .await;
    outcomes.push(o);
    let mut o = Outcome::new("pause-agent");
    scenario(&c, &mut m, &mut o, async |c, m, o| {
        pause_agent(c, m, o, &mut flips).await
    })
    .await;
    outcomes.push(o);
    let mut o = Outcome::new("rolling-restart");
    scenario(&c, &mut m, &mut o, async |c, m, o| {
        rolling_restart(c, m, o, &mut flips).await
    })
    .await;
    outcomes.push(o);
    let mut o = Outcome::new("nemesis");
    scenario(&c, &mut m, &mut o, async |c, m, o| nemesis(c, m, o).await).await;
    outcomes.push(o);

    let two = m.two_leader_rounds();
    eprintln!(
        "chaos: summary ({:.0} s in all)",
        t_start.elapsed().as_secs_f64()
    );
    for o in &outcomes {
        eprintln!("{}", o.line());
    }
    if two > 0 {
        eprintln!("chaos: {two} probe rounds saw two controllers claim to lead");
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.passed())
        .map(|o| o.name)
        .collect();
    let leftover = m.violations(&c);
    let owned: usize = outcomes.iter().map(|o| o.violations.len()).sum();
    if !failed.is_empty() || leftover.len() > owned {
        eprintln!("chaos: last log lines\n{}", c.logs_tail(25).await);
        panic!(
            "chaos: failed scenarios: {failed:?}; violations: {:#?}",
            leftover
        );
    }
    drop(m);
}
