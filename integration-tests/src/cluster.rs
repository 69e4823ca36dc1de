//! A multi-subnet control plane of real processes on loopback: one
//! `ibfabric controller`, one `ibfabric agent` per subnet, one
//! `ibfabric router` per router, each with its own config file and log.
//! Processes are killed when the cluster (or the process handle) drops.
//! Every link speaks mutual TLS with certificates the cluster issues from
//! its own CA; tests talk to the services as the `tester` worker identity
//! (or as the controller where only it may act).

use anyhow::{Context, Result, bail};
use fabric::multi::MultiFabric;
use ibtls::{Identity, Role, TlsSettings, Transport};
use proto::v1;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed on drop; its stderr goes to `log`.
pub struct Proc {
    pub name: String,
    pub log: PathBuf,
    child: Option<Child>,
}

impl Proc {
    pub fn spawn(name: &str, args: &[&str], dir: &Path) -> Result<Self> {
        let bin = crate::ibfabric_bin()?;
        let log = dir.join(format!("{name}.log"));
        let f =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = Command::new(&bin);
        // The services read IBFABRIC_* as config overrides: none of the
        // test runner's own may reach them.
        for (k, _) in std::env::vars() {
            if k.starts_with("IBFABRIC_") {
                cmd.env_remove(k);
            }
        }
        let child = cmd
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(f)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        Ok(Self {
            name: name.to_string(),
            log,
            child: Some(child),
        })
    }

    /// SIGKILL: the process gets no chance to clean up, as in a crash.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `signal` (e.g. "STOP", "CONT") to the process: a frozen
    /// process keeps its sockets open and answers nothing, as a hung host.
    pub fn signal(&self, signal: &str) -> Result<()> {
        let Some(c) = self.child.as_ref() else {
            bail!("{} is not running", self.name);
        };
        let st = Command::new("kill")
            .args([&format!("-{signal}"), &c.id().to_string()])
            .status()
            .context("running kill")?;
        if !st.success() {
            bail!("kill -{signal} {} failed", self.name);
        }
        Ok(())
    }

    /// The process id (0 once killed).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// Whether the process ended without the test killing it (a zombie
    /// not yet reaped), without the `&mut` that reaping needs.
    pub fn died(&self) -> bool {
        let Some(c) = self.child.as_ref() else {
            return false;
        };
        match std::fs::read_to_string(format!("/proc/{}/stat", c.id())) {
            // The state follows the command name, which is in parentheses.
            Ok(stat) => stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .is_some_and(|state| state == "Z" || state == "X"),
            Err(_) => true,
        }
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// The whole log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn log_tail(&self) -> String {
        let t = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = t.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback port for a test service, claimed so that no other draw of
/// this machine's tests gets it ([`store::testing::free_port`]).
pub fn free_port() -> Result<u16> {
    Ok(store::testing::free_port()?)
}

/// Polls `f` every 50 ms until it returns `Some`, or fails after `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if Instant::now() > end {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub struct AgentProc {
    pub name: String,
    pub prefix: u64,
    pub addr: String,
    pub config: PathBuf,
    pub proc: Proc,
}

pub struct RouterProc {
    pub guid: u64,
    pub addr: String,
    pub proc: Proc,
}

/// A cluster to start: the fabric, the engine of every agent, the
/// controllers' algorithm, store, election lease and any extra lines for
/// their config (e.g. a `[limits]` table).
pub struct Spec<'a> {
    pub fabric: MultiFabric,
    pub engine: &'a str,
    pub algorithm: &'a str,
    pub controllers: usize,
    pub store: StoreSpec<'a>,
    pub ttl_seconds: u64,
    pub extra: String,
}

/// Where the cluster's controllers keep their state.
#[derive(Clone, Copy, Debug)]
pub enum StoreSpec<'a> {
    /// In memory, lost on restart.
    Memory,
    /// In memory, kept in a state file across restarts.
    MemoryFile,
    /// A shared etcd: (endpoint, namespace).
    Etcd(&'a str, &'a str),
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    /// The cluster's CA, to issue more certificates in tests.
    pub ca: ibtls::CaBundle,
    /// How tests reach the services: the `tester` worker certificate.
    pub client: Transport,
    pub fabric: MultiFabric,
    pub controllers: Vec<(String, Proc)>,
    pub agents: Vec<AgentProc>,
    pub routers: Vec<RouterProc>,
    /// Every process's Prometheus listener: (process name, port).
    pub metrics: Vec<(String, u16)>,
}

impl Cluster {
    /// Generates `subnets` fat-tree subnets (4 leaves, 2 spines, 2 hosts per
    /// leaf) joined by `routers` routers, writes their files and starts a
    /// memory-store controller, the routers and the agents.
    pub fn start(subnets: u32, routers: u32, engine: &str) -> Result<Self> {
        Self::start_with(subnets, routers, engine, 1, None)
    }

    /// As [`Cluster::start`] with `controllers` controller processes; with
    /// `etcd = Some((endpoint, namespace))` they share that etcd (one leads),
    /// else each has its own memory store (use one).
    pub fn start_with(
        subnets: u32,
        routers: u32,
        engine: &str,
        controllers: usize,
        etcd: Option<(&str, &str)>,
    ) -> Result<Self> {
        let store = match etcd {
            Some((ep, ns)) => StoreSpec::Etcd(ep, ns),
            None => StoreSpec::Memory,
        };
        Self::start_with_store(subnets, routers, engine, controllers, store)
    }

    /// As [`Cluster::start_with`] with the store spelled out.
    pub fn start_with_store(
        subnets: u32,
        routers: u32,
        engine: &str,
        controllers: usize,
        store_spec: StoreSpec<'_>,
    ) -> Result<Self> {
        Self::start_spec(Spec {
            fabric: fabric::multi::fat_tree_subnets(subnets, 4, 2, 2, routers)?,
            engine,
            algorithm: "prefix",
            controllers,
            store: store_spec,
            ttl_seconds: 1,
            extra: String::new(),
        })
    }

    /// Starts the cluster `spec` describes.
    pub fn start_spec(spec: Spec<'_>) -> Result<Self> {
        let Spec {
            fabric,
            engine,
            algorithm,
            controllers,
            store: store_spec,
            ttl_seconds: ttl,
            extra,
        } = spec;
        let dir = tempfile::tempdir()?;
        let ca = ibtls::generate_ca("ibfabric test CA")?;
        std::fs::write(dir.path().join("ca.pem"), &ca.cert_pem)?;
        let tester = issue_into(
            dir.path(),
            &ca,
            &Identity::Worker {
                name: "tester".into(),
            },
        )?;
        let mut c = Self {
            dir,
            ca,
            client: Transport::Tls(tester),
            fabric,
            controllers: Vec::new(),
            agents: Vec::new(),
            routers: Vec::new(),
            metrics: Vec::new(),
        };
        for k in 0..controllers.max(1) {
            let port = free_port()?;
            let name = if k == 0 {
                "ctl".to_string()
            } else {
                format!("ctl{k}")
            };
            let cfg = c.path(&format!("{name}.toml"));
            let metrics = c.metrics_port(&name)?;
            let store = match store_spec {
                StoreSpec::Etcd(ep, ns) => format!(
                    "\n[store]\nkind = \"etcd\"\nendpoints = [\"{ep}\"]\nprefix = \"{ns}\"\nelection_ttl_seconds = {ttl}\ninsecure = true\n"
                ),
                StoreSpec::MemoryFile => format!(
                    "\n[store]\nkind = \"memory\"\nstate_file = \"{name}.state\"\nelection_ttl_seconds = {ttl}\n"
                ),
                StoreSpec::Memory => String::new(),
            };
            std::fs::write(
                &cfg,
                format!(
                    "id = \"{name}\"\nlisten = \"127.0.0.1:{port}\"\nalgorithm = \"{algorithm}\"\nlease_seconds = 3\nmetrics_listen = \"127.0.0.1:{metrics}\"\n{store}{}\n{extra}\n",
                    c.tls_section(&Identity::Controller)?
                ),
            )?;
            let p = Proc::spawn(
                &name,
                &["controller", "--config", path_str(&cfg)?],
                c.dir.path(),
            )?;
            c.controllers.push((format!("http://127.0.0.1:{port}"), p));
        }
        let ctl: Vec<String> = c.controllers.iter().map(|(a, _)| a.clone()).collect();
        for i in 0..c.fabric.routers.len() {
            c.start_router(i, &ctl)?;
        }
        for i in 0..c.fabric.subnets.len() {
            let s = &c.fabric.subnets[i];
            let net = c.path(&format!("{}.net", s.name));
            std::fs::write(&net, fabric::formats::ibnetdiscover::write(&s.fabric))?;
            c.write_agent_config(i, engine, &s.name.clone(), s.prefix, &ctl)?;
            c.start_agent(i)?;
        }
        Ok(c)
    }

    /// Starts controller `k` again from its config (after a kill).
    pub fn restart_controller(&mut self, k: usize) -> Result<()> {
        let name = self.controllers[k].1.name.clone();
        let cfg = self.path(&format!("{name}.toml"));
        self.controllers[k].1.kill();
        self.controllers[k].1 = Proc::spawn(
            &name,
            &["controller", "--config", path_str(&cfg)?],
            self.dir.path(),
        )?;
        Ok(())
    }

    /// The metrics port of process `name`, chosen on first use.
    pub fn metrics_port(&mut self, name: &str) -> Result<u16> {
        if let Some((_, p)) = self.metrics.iter().find(|(n, _)| n == name) {
            return Ok(*p);
        }
        let p = free_port()?;
        self.metrics.push((name.to_string(), p));
        Ok(p)
    }

    /// What process `name` serves on /metrics, or `None` if nothing answers.
    pub async fn scrape(&self, name: &str) -> Option<String> {
        let (_, port) = self.metrics.iter().find(|(n, _)| n == name)?;
        crate::chaos::http_get(*port, "/metrics").await
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A `[tls]` section for `id`, issuing its certificate on first use.
    pub fn tls_section(&self, id: &Identity) -> Result<String> {
        let s = self.tls_for(id)?;
        Ok(format!(
            "\n[tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n",
            path_str(&s.ca)?,
            path_str(&s.cert)?,
            path_str(&s.key)?
        ))
    }

    /// The TLS files of `id` (issued from the cluster's CA when missing).
    pub fn tls_for(&self, id: &Identity) -> Result<TlsSettings> {
        let s = settings_of(self.dir.path(), id);
        if s.cert.exists() {
            return Ok(s);
        }
        issue_into(self.dir.path(), &self.ca, id)
    }

    /// A channel to a service of role `server`, as `client`.
    pub async fn connect_as(
        &self,
        addr: &str,
        server: Role,
        client: &Transport,
    ) -> Result<tonic::transport::Channel> {
        Ok(proto::client::connect(addr, client, server).await?)
    }

    /// A channel to a service of role `server`, as the tester.
    pub async fn connect(&self, addr: &str, server: Role) -> Result<tonic::transport::Channel> {
        self.connect_as(addr, server, &self.client).await
    }

    pub fn start_router(&mut self, i: usize, controllers: &[String]) -> Result<()> {
        let r = self.fabric.routers[i].clone();
        let port = free_port()?;
        let ports = r.ports.iter().map(|p| p.port).max().unwrap_or(0);
        let cfg = self.path(&format!("router{i}.toml"));
        let metrics = self.metrics_port(&format!("router{i}"))?;
        std::fs::write(
            &cfg,
            format!(
                "router_guid = \"{:#018x}\"\nlisten = \"127.0.0.1:{port}\"\ncontrollers = {}\nports = {ports}\nmetrics_listen = \"127.0.0.1:{metrics}\"\n{}",
                r.guid,
                toml_list(controllers),
                self.tls_section(&Identity::Router { guid: r.guid })?
            ),
        )?;
        let p = Proc::spawn(
            &format!("router{i}"),
            &["router", "--config", path_str(&cfg)?],
            self.dir.path(),
        )?;
        self.routers.push(RouterProc {
            guid: r.guid,
            addr: format!("http://127.0.0.1:{port}"),
            proc: p,
        });
        Ok(())
    }

    pub fn write_agent_config(
        &mut self,
        i: usize,
        engine: &str,
        agent_id: &str,
        prefix: u64,
        controllers: &[String],
    ) -> Result<()> {
        let name = self.fabric.subnets[i].name.clone();
        let port = free_port()?;
        let cfg = self.path(&format!("{agent_id}.agent.toml"));
        let metrics = self.metrics_port(agent_id)?;
        std::fs::write(
            &cfg,
            format!(
                "agent_id = \"{agent_id}\"\nsubnet_prefix = \"{prefix:#018x}\"\ntopology = \"{name}.net\"\n\
                 engine = \"{engine}\"\nout_dir = \"out/{agent_id}\"\ncontrollers = {}\nlisten = \"127.0.0.1:{port}\"\n\
                 metrics_listen = \"127.0.0.1:{metrics}\"\n{}",
                toml_list(controllers),
                self.tls_section(&Identity::Agent { prefix })?
            ),
        )?;
        let entry = AgentProc {
            name: agent_id.to_string(),
            prefix,
            addr: format!("http://127.0.0.1:{port}"),
            config: cfg,
            // Replaced by start_agent.
            proc: Proc {
                name: agent_id.to_string(),
                log: PathBuf::new(),
                child: None,
            },
        };
        if let Some(a) = self.agents.iter_mut().find(|a| a.name == agent_id) {
            *a = entry;
        } else {
            self.agents.push(entry);
        }
        Ok(())
    }

    pub fn start_agent(&mut self, i: usize) -> Result<()> {
        let a = &mut self.agents[i];
        a.proc.kill();
        a.proc = Proc::spawn(
            &a.name.clone(),
            &["agent", "--config", path_str(&a.config)?],
            self.dir.path(),
        )?;
        Ok(())
    }

    /// The first controller's state.
    pub async fn state(&self, i: usize) -> Option<v1::ControllerState> {
        let ch = self
            .connect(&self.controllers[i].0, Role::Controller)
            .await
            .ok()?;
        let mut c = proto::client::controller_client(ch);
        c.state(v1::StateRequest {})
            .await
            .ok()
            .map(|r| r.into_inner())
    }

    pub async fn router_state(&self, i: usize) -> Option<v1::RouterState> {
        let ch = self
            .connect(&self.routers[i].addr, Role::Router)
            .await
            .ok()?;
        let mut c = v1::router_fw_client::RouterFwClient::new(ch);
        c.state(v1::RouterStateRequest {})
            .await
            .ok()
            .map(|r| r.into_inner())
    }

    /// Index of the controller that says it leads.
    pub async fn leader(&self) -> Option<usize> {
        for i in 0..self.controllers.len() {
            if self.state(i).await.is_some_and(|s| s.leader) {
                return Some(i);
            }
        }
        None
    }

    /// Waits until every subnet is reported with a mapping and every router
    /// holds a table; returns the controller state then.
    pub async fn converged(&self, ctl: usize, limit: Duration) -> Result<v1::ControllerState> {
        let n = self.fabric.subnets.len();
        let r = wait_for("the control plane to converge", limit, || async {
            if let Some(p) = self.processes().find(|p| p.died()) {
                return Some(Err(format!("{} exited", p.name)));
            }
            let st = self.state(ctl).await?;
            if !(st.leader && proto::convert::subnets_mapped(&st, n)) {
                return None;
            }
            for i in 0..self.routers.len() {
                let rs = self.router_state(i).await?;
                if !proto::convert::router_current(&st, &rs) {
                    return None;
                }
            }
            Some(Ok(st))
        })
        .await;
        match r {
            Ok(Ok(st)) => Ok(st),
            Ok(Err(e)) => bail!("{e}\n{}", self.logs()),
            // What is missing first: a long failure output may be cut.
            Err(e) => bail!("{e}\n{}\n{}", self.lagging(ctl).await, self.logs()),
        }
    }

    fn processes(&self) -> impl Iterator<Item = &Proc> {
        self.controllers
            .iter()
            .map(|(_, p)| p)
            .chain(self.agents.iter().map(|a| &a.proc))
            .chain(self.routers.iter().map(|r| &r.proc))
    }

    /// One line per subnet and router that `converged` still waits for.
    async fn lagging(&self, ctl: usize) -> String {
        let Some(st) = self.state(ctl).await else {
            return format!("controller {ctl} does not answer State");
        };
        let mut out = format!(
            "controller {ctl}: leader {}, {} of {} subnets reported\n",
            st.leader,
            st.subnets.len(),
            self.fabric.subnets.len()
        );
        for s in &st.subnets {
            if s.routing.is_none() || s.mapping_version == 0 {
                out += &format!(
                    "subnet {:#x}: routing {}, mapping version {}\n",
                    s.subnet_prefix,
                    s.routing.is_some(),
                    s.mapping_version
                );
            }
        }
        for (i, r) in self.routers.iter().enumerate() {
            let published = st
                .routers
                .iter()
                .find(|p| p.router_guid == r.guid)
                .map(|p| p.egress_version);
            match self.router_state(i).await {
                Some(rs) if proto::convert::router_current(&st, &rs) => {}
                Some(rs) => {
                    out += &format!(
                        "{}: holds {}, controller publishes {published:?}, {} refused\n",
                        r.proc.name, rs.version, rs.rejected
                    )
                }
                None => out += &format!("{}: does not answer State\n", r.proc.name),
            }
        }
        out
    }

    /// Tails of every process log, for failure messages.
    pub fn logs(&self) -> String {
        self.processes()
            .map(|p| format!("--- {}\n{}\n", p.name, p.log_tail()))
            .collect()
    }
}

fn settings_of(dir: &Path, id: &Identity) -> TlsSettings {
    TlsSettings {
        ca: dir.join("ca.pem"),
        cert: dir.join(format!("{}.pem", id.file_stem())),
        key: dir.join(format!("{}-key.pem", id.file_stem())),
    }
}

/// Issues a loopback certificate for `id` into `dir`.
pub fn issue_into(dir: &Path, ca: &ibtls::CaBundle, id: &Identity) -> Result<TlsSettings> {
    let c = ibtls::issue(
        ca,
        id,
        &["localhost".to_string()],
        &[std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)],
    )?;
    let s = settings_of(dir, id);
    std::fs::write(&s.cert, c.cert_pem)?;
    std::fs::write(&s.key, c.key_pem)?;
    Ok(s)
}

fn path_str(p: &Path) -> Result<&str> {
    p.to_str().context("temporary path is not UTF-8")
}

fn toml_list(v: &[String]) -> String {
    format!(
        "[{}]",
        v.iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ")
    )
}
