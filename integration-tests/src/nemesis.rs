//! A seeded fault schedule for the chaos suite, in the manner of etcd's
//! robustness tests and Jepsen's nemesis: for a set time it draws faults
//! from a seeded generator (kills, pauses and partitions of controllers,
//! agents and routers; etcd member restarts; re-cabling; empty and
//! truncated discoveries; certificate misuse: reports that cannot vouch
//! for their subnet and reports squatting on another subnet's GUIDs),
//! injects each, holds it a drawn time, heals it. The suite's monitor
//! checks the history all along (no router puts in force a version older
//! than one it held or one no leader published; no leader or agent loses
//! a subnet's mapping); after the last fault the cluster must converge
//! within a bound. The same seed gives the same schedule.

use crate::chaos::{ChaosCluster, Monitor, docker_async};
use anyhow::Result;
use ibtls::{Role, TlsSettings, Transport};
use proto::v1;
use std::time::{Duration, Instant};

/// splitmix64: small, fast, and the same sequence on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Uniform in `lo..hi` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next_u64() % (hi - lo).max(1))
    }
}

/// One fault the nemesis can inject, and what it targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    KillController(usize),
    PauseController(usize),
    CutController {
        k: usize,
        store: bool,
    },
    KillAgent(usize),
    PauseAgent(usize),
    PauseRouter(usize),
    RestartEtcd(usize),
    /// A legitimate topology change: the agent's file switches variant.
    Recable(usize),
    /// The agent's file empty for a while (`ibnetdiscover > file`).
    EmptyDiscovery(usize),
    /// The first third of the agent's file for a while.
    TruncatedDiscovery(usize),
    /// An agent certificate for a prefix the fabric does not have reports
    /// without a dependency summary.
    ReportWithoutSummary,
    /// An agent certificate for a prefix the fabric does not have reports
    /// the GUIDs of subnet `i`.
    SquatGuids(usize),
}

impl Fault {
    /// Draws a fault for `c`.
    pub fn draw(rng: &mut Rng, c: &ChaosCluster) -> Fault {
        let (k, a, r, e) = (
            c.controllers.len(),
            c.agents.len(),
            c.routers.len(),
            c.etcd.len(),
        );
        match rng.below(12) {
            0 => Fault::KillController(rng.below(k)),
            1 => Fault::PauseController(rng.below(k)),
            2 => Fault::CutController {
                k: rng.below(k),
                store: rng.below(2) == 0,
            },
            3 => Fault::KillAgent(rng.below(a)),
            4 => Fault::PauseAgent(rng.below(a)),
            5 => Fault::PauseRouter(rng.below(r)),
            6 => Fault::RestartEtcd(rng.below(e)),
            7 => Fault::Recable(rng.below(a)),
            8 => Fault::EmptyDiscovery(rng.below(a)),
            9 => Fault::TruncatedDiscovery(rng.below(a)),
            10 => Fault::ReportWithoutSummary,
            _ => Fault::SquatGuids(rng.below(a)),
        }
    }

    /// The agent whose mapping may be missing while the fault lasts (a
    /// killed agent restarts without one).
    fn exempt_agent(&self) -> Option<usize> {
        match self {
            Fault::KillAgent(i) => Some(*i),
            _ => None,
        }
    }
}

/// What a run did, for the suite's summary and TESTING.md.
#[derive(Debug, Default)]
pub struct Run {
    pub seed: u64,
    pub faults: Vec<(f64, Fault)>,
    /// Probe rounds the monitor checked while the nemesis ran.
    pub rounds: u64,
    /// From the end of the last fault to the whole cluster recovered.
    pub converged: Option<Duration>,
    pub errors: Vec<String>,
}

async fn docker(args: &[&str]) -> Result<String> {
    docker_async(args.iter().map(|s| s.to_string()).collect()).await
}

/// The rogue client: an agent certificate of the cluster's CA for a
/// prefix the fabric does not have (what any agent's certificate allows).
struct Rogue {
    prefix: u64,
    transport: Transport,
    generation: u64,
}

impl Rogue {
    fn new(c: &ChaosCluster, prefix: u64) -> Result<Self> {
        let out = c.dir.path().join(format!("rogue-{prefix:x}"));
        std::fs::create_dir_all(&out)?;
        let p = format!("{prefix:#018x}");
        let (cert, key) = crate::chaos::issue(
            &out,
            &c.dir.path().join("pki"),
            &["agent", "--prefix", &p],
            &[],
        )?;
        Ok(Self {
            prefix,
            transport: Transport::Tls(TlsSettings {
                ca: out.join("ca.pem"),
                cert: out.join(cert),
                key: out.join(key),
            }),
            generation: 0,
        })
    }

    /// Registers and reports `end_ports` with or without a (well formed,
    /// empty) summary, with whichever controller leads.
    async fn report(
        &mut self,
        c: &ChaosCluster,
        end_ports: Vec<v1::EndPort>,
        summary: bool,
    ) -> Result<String> {
        // An election may be under way (an earlier fault): ask again, as
        // an agent would, for a few election leases.
        let deadline = std::time::Instant::now() + 4 * crate::chaos::ELECTION_TTL;
        loop {
            match self.report_once(c, &end_ports, summary).await {
                Ok(left) => return Ok(left),
                Err(e) if std::time::Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    /// One round of [`Rogue::report`] over the controllers.
    async fn report_once(
        &mut self,
        c: &ChaosCluster,
        end_ports: &[v1::EndPort],
        summary: bool,
    ) -> Result<String> {
        let mut last = String::from("no controller");
        for k in 0..c.controllers.len() {
            let addr = c.controllers[k].addr();
            let ch = match proto::client::connect(&addr, &self.transport, Role::Controller).await {
                Ok(ch) => ch,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let mut ctl = proto::client::controller_client(ch);
            let reg = match ctl
                .register(proto::client::unary(v1::RegisterRequest {
                    agent_id: format!("rogue-{:x}", self.prefix),
                    subnet_prefix: self.prefix,
                    query_addr: String::new(),
                }))
                .await
            {
                Ok(r) => r.into_inner(),
                Err(e) => {
                    last = e.message().to_string();
                    continue;
                }
            };
            self.generation += 1;
            let ack = ctl
                .report(proto::client::unary(v1::SubnetReport {
                    session: reg.session,
                    subnet_prefix: self.prefix,
                    generation: self.generation,
                    end_ports: end_ports.to_vec(),
                    routing: Some(v1::RoutingResult {
                        engine: "minhop".into(),
                        verified: true,
                        deadlock_free: true,
                        ..Default::default()
                    }),
                    dependencies: summary.then(v1::DependencySummary::default),
                    ..Default::default()
                }))
                .await;
            match ack {
                Ok(a) => return Ok(a.into_inner().left_out),
                Err(e) => last = e.message().to_string(),
            }
        }
        anyhow::bail!("no controller took the rogue report: {last}")
    }
}

/// Runs the schedule of `seed` on `c` for `length`, then heals
/// everything and waits up to `bound` for the cluster to recover.
pub async fn run(
    c: &ChaosCluster,
    m: &mut Monitor,
    seed: u64,
    length: Duration,
    bound: Duration,
    recovered: crate::chaos::Expect,
) -> Run {
    let mut rng = Rng::new(seed);
    let mut run = Run {
        seed,
        ..Run::default()
    };
    let t0 = Instant::now();
    let rounds0 = m.rounds();
    let mut rogues = Rogues::default();
    while t0.elapsed() < length {
        let f = Fault::draw(&mut rng, c);
        let hold = rng.millis(500, 5_000);
        let at = t0.elapsed().as_secs_f64();
        eprintln!(
            "nemesis: seed {seed} t={at:.1} s: {f:?} for {:.1} s",
            hold.as_secs_f64()
        );
        if let Some(i) = f.exempt_agent() {
            m.exempt_agent(i, true);
        }
        let r = inject(c, &f, hold, &mut rogues).await;
        if let Err(e) = r {
            run.errors.push(format!("t={at:.1} s {f:?}: {e:#}"));
        }
        run.faults.push((at, f));
        tokio::time::sleep(rng.millis(0, 1_500)).await;
    }
    let t_end = Instant::now();
    let r = m.wait_recovered(c, &recovered, t_end, t_end, bound).await;
    for f in &run.faults {
        if let Some(i) = f.1.exempt_agent() {
            m.exempt_agent(i, false);
        }
    }
    match r {
        Ok((t, _)) => run.converged = Some(t),
        Err(e) => run.errors.push(format!(
            "not recovered {} s after the last fault: {e}",
            bound.as_secs()
        )),
    }
    // The rogue subnets are an operator's to forget.
    for prefix in rogues.by_prefix.keys() {
        if let Err(e) = c.forget_subnet(*prefix).await {
            run.errors.push(format!("forget {prefix:#x}: {e}"));
        }
    }
    run.rounds = m.rounds() - rounds0;
    run
}

/// Injects `f`, holds it `hold`, heals it.
/// The rogue clients so far: a few prefixes used in turn, so that a long
/// run stays under the controllers' bound on subnets.
#[derive(Default)]
struct Rogues {
    by_prefix: std::collections::BTreeMap<u64, Rogue>,
    used: u64,
}

/// Prefixes the rogues take in turn.
const ROGUE_PREFIXES: u64 = 8;

impl Rogues {
    fn next(&mut self, c: &ChaosCluster) -> Result<&mut Rogue> {
        let prefix = 0xfec0_0000_0000_e000 + self.used % ROGUE_PREFIXES;
        self.used += 1;
        if let std::collections::btree_map::Entry::Vacant(e) = self.by_prefix.entry(prefix) {
            e.insert(Rogue::new(c, prefix)?);
        }
        self.by_prefix
            .get_mut(&prefix)
            .ok_or_else(|| anyhow::anyhow!("rogue {prefix:#x} missing"))
    }
}

async fn inject(c: &ChaosCluster, f: &Fault, hold: Duration, rogues: &mut Rogues) -> Result<()> {
    let container = |n: &crate::chaos::Node| n.container.clone();
    match f {
        Fault::KillController(k) => {
            let n = container(&c.controllers[*k]);
            docker(&["kill", "-s", "KILL", &n]).await?;
            tokio::time::sleep(hold).await;
            docker(&["start", &n]).await?;
        }
        Fault::KillAgent(i) => {
            let n = container(&c.agents[*i]);
            docker(&["kill", "-s", "KILL", &n]).await?;
            tokio::time::sleep(hold).await;
            docker(&["start", &n]).await?;
        }
        Fault::PauseController(k) => pause(&container(&c.controllers[*k]), hold).await?,
        Fault::PauseAgent(i) => pause(&container(&c.agents[*i]), hold).await?,
        Fault::PauseRouter(i) => pause(&container(&c.routers[*i]), hold).await?,
        Fault::CutController { k, store } => {
            c.cut_controller(*k, *store).await?;
            tokio::time::sleep(hold).await;
            c.reconnect_controller(*k, *store).await?;
        }
        Fault::RestartEtcd(e) => {
            docker(&["restart", "-t", "2", &container(&c.etcd[*e])]).await?;
        }
        Fault::Recable(i) => c.flip_topology(*i).await?,
        Fault::EmptyDiscovery(i) => {
            c.put_topology(*i, "").await?;
            tokio::time::sleep(hold).await;
            c.put_topology(*i, &c.topology_now(*i)).await?;
        }
        Fault::TruncatedDiscovery(i) => {
            let whole = c.topology_now(*i);
            let lines: Vec<&str> = whole.lines().collect();
            let cut = lines[..lines.len() / 3].join("\n");
            c.put_topology(*i, &cut).await?;
            tokio::time::sleep(hold).await;
            c.put_topology(*i, &whole).await?;
        }
        Fault::ReportWithoutSummary => {
            let r = rogues.next(c)?;
            let ports = vec![v1::EndPort {
                guid: 0xe000_0000_0000_0000 | (r.prefix & 0xffff),
                lid: 1,
                desc: "rogue".into(),
                lmc: 0,
            }];
            let left = r.report(c, ports, false).await?;
            anyhow::ensure!(
                left.contains("no dependency summary"),
                "the rogue subnet is not left out: '{left}'"
            );
        }
        Fault::SquatGuids(i) => {
            let r = rogues.next(c)?;
            let ports: Vec<v1::EndPort> = c
                .host_guids(*i)?
                .into_iter()
                .enumerate()
                .map(|(n, guid)| v1::EndPort {
                    guid,
                    lid: n as u32 + 1,
                    desc: "squat".into(),
                    lmc: 0,
                })
                .collect();
            let left = r.report(c, ports, true).await?;
            anyhow::ensure!(
                !left.is_empty(),
                "the squatting subnet takes part in the routes"
            );
        }
    }
    Ok(())
}

async fn pause(container: &str, hold: Duration) -> Result<()> {
    docker(&["pause", container]).await?;
    tokio::time::sleep(hold).await;
    docker(&["unpause", container]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_sequence() {
        let a: Vec<u64> = (0..5)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..5)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..5)
            .scan(Rng::new(8), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut r = Rng::new(1);
        assert!((0..1000).all(|_| r.below(12) < 12));
    }
}
