//! The control plane as containers, for the chaos suite (`tests/chaos.rs`):
//! a 3-member etcd cluster, 2 controllers, one agent per subnet of a
//! 4-subnet fabric and its 2 routers, every link mutual TLS with
//! certificates from `ibfabric certs`.
//!
//! Two private networks: `store` joins the etcd members and the
//! controllers, `fabric` joins the controllers, agents and routers, so a
//! controller can be cut from etcd or from its clients separately (`docker
//! network disconnect`). Services find each other by network aliases
//! (`etcd-1`, `ctl-a`, `subnet0`, `router0`), which exist only on the
//! networks a container is attached to: a disconnected controller's name
//! stops resolving for its clients, as a partition would have it.
//!
//! The host reaches every service on a port published on 127.0.0.1, fixed
//! for the run: docker keeps a fixed host port across network changes and
//! restarts (it moves it to a network the container is still on), so a
//! controller cut from its clients is still observed.
//!
//! Images are built from scratch (no registry can be reached): the
//! `ibfabric` binary, Debian's etcd and the shared libraries `ldd` lists.
//! They hold no shell, so faults come from the docker CLI: disconnect and
//! connect, `kill -s KILL`, pause and unpause, restart.

use anyhow::{Context, Result, bail};
use fabric::intersubnet::{Gid, GlobalView};
use fabric::multi::MultiFabric;
use ibtls::{Role, TlsSettings, Transport};
use proto::v1;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tonic::transport::Channel;

/// How often the controllers' push streams beat (`[limits] heartbeat_ms`):
/// receivers leave a leader silent for three beats.
pub const HEARTBEAT: Duration = Duration::from_millis(500);
/// The controllers' election lease (`[store] election_ttl_seconds`).
pub const ELECTION_TTL: Duration = Duration::from_secs(2);
/// The controllers' agent lease (`lease_seconds`): an agent silent this
/// long is no longer live.
pub const AGENT_LEASE: Duration = Duration::from_secs(3);
/// Subnets (one agent each) and routers of the test fabric.
pub const SUBNETS: usize = 4;
pub const ROUTERS: usize = 2;

const CONTROLLER_PORT: u16 = 7100;
const AGENT_PORT: u16 = 7200;
const ROUTER_PORT: u16 = 7300;
const ETCD_CLIENT_PORT: u16 = 2379;
const ETCD_PEER_PORT: u16 = 2380;
const ETCD_METRICS_PORT: u16 = 2381;
/// Every container, network and image of a run carries this label with
/// the run's project name, so teardown finds them all.
const LABEL: &str = "ibfabric.chaos";
/// A probe that takes longer counts as no answer (a paused container
/// never answers).
const PROBE_TIMEOUT: Duration = Duration::from_millis(800);
const LOG_FILTER: &str = "info,agent=debug,router_fw=debug";

/// Why the suite cannot run here, or `None` when a Docker daemon answers.
pub fn docker_unavailable() -> Option<String> {
    match Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
    {
        Err(e) => Some(format!("`docker` cannot be run: {e}")),
        Ok(o) if !o.status.success() => {
            let err = String::from_utf8_lossy(&o.stderr);
            let line = err
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message");
            Some(format!("`docker info` failed: {}", line.trim()))
        }
        Ok(_) => None,
    }
}

/// Runs `docker ARGS`, failing with its stderr.
pub fn docker<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Result<String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .context("running docker")?;
    check_output(args, out)
}

/// [`docker`] without blocking the runtime.
pub async fn docker_async(args: Vec<String>) -> Result<String> {
    let out = tokio::process::Command::new("docker")
        .args(&args)
        .output()
        .await
        .context("running docker")?;
    check_output(&args, out)
}

fn check_output<S: AsRef<std::ffi::OsStr>>(
    args: &[S],
    out: std::process::Output,
) -> Result<String> {
    if !out.status.success() {
        let a: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        bail!(
            "docker {} failed ({}): {}",
            a.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One run's names, and its teardown: dropping it removes every
/// container, network and image labelled with the project name, also when
/// the test panics. With `IBFABRIC_CHAOS_LOGS=DIR` the containers' logs
/// are saved there first.
pub struct Project {
    pub name: String,
    pub image: String,
}

impl Project {
    pub fn new() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        // Short: container names carry it, and docker's network interface
        // names are bounded.
        let name = format!("ibfc{}x{:x}", std::process::id(), nanos >> 8);
        Self {
            image: format!("ibfabric-chaos:{name}"),
            name,
        }
    }

    fn label(&self) -> String {
        format!("{LABEL}={}", self.name)
    }

    fn containers(&self) -> Vec<String> {
        let filter = format!("label={}", self.label());
        docker(&["ps", "-aq", "--filter", filter.as_str()])
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    }

    fn save_logs(&self, dir: &Path) {
        let _ = std::fs::create_dir_all(dir);
        let filter = format!("label={}", self.label());
        let names = docker(&[
            "ps",
            "-a",
            "--filter",
            filter.as_str(),
            "--format",
            "{{.Names}}",
        ])
        .unwrap_or_default();
        for n in names.split_whitespace() {
            if let Ok(o) = Command::new("docker").args(["logs", n]).output() {
                let mut text = o.stdout;
                text.extend_from_slice(&o.stderr);
                let _ = std::fs::write(dir.join(format!("{n}.log")), text);
            }
        }
    }
}

impl Default for Project {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        if let Some(dir) = std::env::var_os("IBFABRIC_CHAOS_LOGS") {
            self.save_logs(Path::new(&dir));
        }
        let ids = self.containers();
        if !ids.is_empty() {
            let mut args = vec!["rm".to_string(), "-f".to_string(), "-v".to_string()];
            args.extend(ids);
            let _ = docker(&args);
        }
        let filter = format!("label={}", self.label());
        if let Ok(nets) = docker(&["network", "ls", "-q", "--filter", filter.as_str()]) {
            for n in nets.split_whitespace() {
                let _ = docker(&["network", "rm", n]);
            }
        }
        let _ = docker(&["rmi", "-f", self.image.as_str()]);
    }
}

/// The etcd binary the image gets: `$ETCD_BIN`, else `etcd` on the PATH or
/// in /usr/bin (Debian's etcd-server, from scripts/install-deps.sh).
fn etcd_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("ETCD_BIN") {
        return Ok(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("etcd"))
        .find(|p| p.is_file())
        .context(
            "no etcd binary: run scripts/install-deps.sh (Debian's etcd-server) or set ETCD_BIN",
        )
}

/// The shared libraries `ldd` lists for `bin`, the dynamic loader
/// included; none for a static binary.
fn shared_libs(bin: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(bin)
        .output()
        .context("running ldd")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        if String::from_utf8_lossy(&out.stderr).contains("not a dynamic executable")
            || text.contains("statically linked")
        {
            return Ok(Vec::new());
        }
        bail!(
            "ldd {} failed: {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut libs = Vec::new();
    for line in text.lines() {
        let path = match line.split_once("=>") {
            Some((_, right)) => right.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}

/// Puts `src` at `root/<dest>`: a hard link where it can (the debug binary
/// is large), else a copy (of the target when `src` is a symbolic link).
fn place(src: &Path, root: &Path, dest: &Path) -> Result<()> {
    let rel = dest.strip_prefix("/").unwrap_or(dest);
    let to = root.join(rel);
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    if to.exists() {
        return Ok(());
    }
    let real =
        std::fs::canonicalize(src).with_context(|| format!("resolving {}", src.display()))?;
    if std::fs::hard_link(&real, &to).is_err() {
        std::fs::copy(&real, &to)
            .with_context(|| format!("copying {} to {}", real.display(), to.display()))?;
    }
    Ok(())
}

/// Builds the run's image from scratch in a build context under `dir`.
pub fn build_image(project: &Project, dir: &Path) -> Result<()> {
    let ctx = dir.join("image");
    let root = ctx.join("rootfs");
    let ibfabric = crate::ibfabric_bin()?;
    let etcd = etcd_bin()?;
    place(&ibfabric, &root, Path::new("/usr/bin/ibfabric"))?;
    place(&etcd, &root, Path::new("/usr/bin/etcd"))?;
    for bin in [&ibfabric, &etcd] {
        for lib in shared_libs(bin)? {
            place(&lib, &root, &lib)?;
        }
    }
    std::fs::create_dir_all(root.join("etc/ibfabric"))?;
    std::fs::create_dir_all(root.join("tmp"))?;
    // Names resolve through /etc/hosts and docker's DNS server, which
    // knows the network aliases.
    std::fs::write(root.join("etc/nsswitch.conf"), "hosts: files dns\n")?;
    let dockerfile = Path::new(env!("CARGO_MANIFEST_DIR")).join("chaos/Dockerfile");
    std::fs::copy(&dockerfile, ctx.join("Dockerfile"))
        .with_context(|| format!("copying {}", dockerfile.display()))?;
    let label = project.label();
    docker(&[
        "build".as_ref(),
        "-q".as_ref(),
        "--label".as_ref(),
        label.as_str().as_ref(),
        "-t".as_ref(),
        project.image.as_str().as_ref(),
        ctx.as_os_str(),
    ])?;
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Etcd,
    Controller,
    Agent,
    Router,
}

/// One container.
#[derive(Clone, Debug)]
pub struct Node {
    /// Host name and network alias: `etcd-1`, `ctl-a`, `subnet0`, `router0`.
    pub name: String,
    pub container: String,
    pub kind: Kind,
    /// Host port (on 127.0.0.1) of its service: gRPC, or etcd's clients.
    pub port: u16,
    /// etcd only: host port of the plaintext metrics and health listener.
    pub metrics_port: u16,
}

impl Node {
    /// The gRPC address the host dials.
    pub fn addr(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }
}

/// What an agent answered to a path query toward a remote subnet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentAnswer {
    /// A path, from the mapping of this version.
    Mapping(u64),
    /// The agent answered but holds no mapping from a controller.
    NoMapping,
    /// No answer (stopped, paused, restarting).
    Silent(String),
}

/// One round of probes of every service, all sent at `started`.
#[derive(Clone, Debug)]
pub struct Observation {
    pub started: Instant,
    pub finished: Instant,
    pub controllers: Vec<Result<v1::ControllerState, String>>,
    pub routers: Vec<Result<v1::RouterState, String>>,
    pub agents: Vec<AgentAnswer>,
    /// etcd members' `/health`.
    pub etcd_healthy: Vec<bool>,
}

/// What "recovered" means at one moment of a scenario.
#[derive(Clone, Debug, Default)]
pub struct Expect {
    /// Controllers that must not be the leader (cut off or killed).
    pub not_leader: Vec<usize>,
    /// Agents that are down on purpose (paused): their subnet must keep
    /// its mapping in the leader, but they need not answer or be live.
    pub skip_agents: Vec<usize>,
    /// Every etcd member must report itself healthy.
    pub etcd_healthy: bool,
}

/// The running cluster.
pub struct ChaosCluster {
    pub project: String,
    pub image: String,
    pub dir: tempfile::TempDir,
    pub store_net: String,
    pub fabric_net: String,
    pub etcd: Vec<Node>,
    pub controllers: Vec<Node>,
    pub agents: Vec<Node>,
    pub routers: Vec<Node>,
    /// How the host talks to the services: a `worker` certificate.
    pub client: Transport,
    pub prefixes: Vec<u64>,
    pub router_guids: Vec<u64>,
    /// Per subnet, the two topologies an agent is switched between (the
    /// second has more hosts per leaf; routers and their ports are the
    /// same), and the CA count of each.
    variants: Vec<[String; 2]>,
    variant_cas: Vec<[u32; 2]>,
    /// The variant each agent was last given.
    current: Mutex<Vec<usize>>,
    /// Per agent, the (local, remote) GIDs of its path probe.
    probes: Vec<(Gid, Gid)>,
    channels: Arc<Mutex<HashMap<String, Channel>>>,
}

fn file_name(path: &str) -> Result<String> {
    Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .with_context(|| format!("no file name in {path}"))
}

/// Runs `ibfabric certs ... --json`; returns the certificate and key file
/// names it wrote into `out`.
/// Issues a certificate of the cluster's CA (`ibfabric certs issue`) into
/// `out`: the cert and key file names.
pub(crate) fn issue(
    out: &Path,
    pki: &Path,
    role: &[&str],
    names: &[&str],
) -> Result<(String, String)> {
    let out_s = out.to_str().context("temporary path is not UTF-8")?;
    let ca = pki.join("ca.pem");
    let ca_key = pki.join("ca-key.pem");
    let ca = ca.to_str().context("temporary path is not UTF-8")?;
    let ca_key = ca_key.to_str().context("temporary path is not UTF-8")?;
    let mut args = vec![
        "certs", "--out", out_s, "--json", "issue", "--ca", ca, "--ca-key", ca_key,
    ];
    args.extend_from_slice(role);
    for n in names {
        args.extend(["--dns", n]);
    }
    // The host dials every service on a port published on loopback.
    args.extend(["--ip", "127.0.0.1"]);
    let json: serde_json::Value = serde_json::from_str(&crate::ibfabric(&args)?)
        .context("`ibfabric certs --json` printed no JSON")?;
    let get = |k: &str| {
        json.get(k)
            .and_then(|v| v.as_str())
            .with_context(|| format!("`ibfabric certs --json` printed no \"{k}\": {json}"))
    };
    std::fs::copy(pki.join("ca.pem"), out.join("ca.pem"))?;
    Ok((file_name(get("cert")?)?, file_name(get("key")?)?))
}

fn tls_section(cert: &str, key: &str) -> String {
    format!("\n[tls]\nca = \"ca.pem\"\ncert = \"{cert}\"\nkey = \"{key}\"\n")
}

fn toml_list(v: &[String]) -> String {
    let quoted: Vec<String> = v.iter().map(|s| format!("\"{s}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

impl ChaosCluster {
    /// Builds the image, creates the networks, issues the certificates and
    /// starts every container; returns once the etcd members are healthy
    /// (the control plane converges on its own: see [`Monitor`]).
    pub async fn start(project: &Project) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        build_image(project, dir.path())?;
        let label = project.label();
        let store_net = format!("{}-store", project.name);
        let fabric_net = format!("{}-fabric", project.name);
        for n in [&store_net, &fabric_net] {
            docker(&["network", "create", "--label", label.as_str(), n.as_str()])?;
        }

        // The fabric, in two shapes per subnet.
        let mut variants: Vec<[String; 2]> = vec![Default::default(); SUBNETS];
        let mut variant_cas: Vec<[u32; 2]> = vec![[0, 0]; SUBNETS];
        let mut fabric: Option<MultiFabric> = None;
        for (v, hosts) in [(0usize, "2"), (1, "3")] {
            let out = dir.path().join(format!("fabric{v}"));
            let out_s = out.to_str().context("temporary path is not UTF-8")?;
            crate::ibfabric(&[
                "gen",
                "multi",
                "--subnets",
                &SUBNETS.to_string(),
                "--routers",
                &ROUTERS.to_string(),
                "--leaves",
                "4",
                "--spines",
                "2",
                "--hosts",
                hosts,
                "--out",
                out_s,
            ])?;
            let m = fabric::formats::manifest::read(&out.join("manifest.toml"))?;
            for (i, s) in m.fabric.subnets.iter().enumerate() {
                let path = m
                    .files
                    .get(i)
                    .context("manifest without a file per subnet")?;
                variants[i][v] = std::fs::read_to_string(path)?;
                variant_cas[i][v] = u32::try_from(s.fabric.num_cas())?;
            }
            if v == 0 {
                fabric = Some(m.fabric);
            }
        }
        let fabric = fabric.context("no fabric generated")?;
        if fabric.subnets.len() != SUBNETS || fabric.routers.len() != ROUTERS {
            bail!("gen multi made another fabric than asked");
        }
        let view = GlobalView::from_multi(&fabric);
        let mut probes = Vec::new();
        for i in 0..SUBNETS {
            let s = &view.subnets[i];
            let d = &view.subnets[(i + 1) % SUBNETS];
            let (Some(src), Some(dst)) = (s.end_ports.first(), d.end_ports.first()) else {
                bail!("a subnet without hosts");
            };
            probes.push((
                Gid {
                    prefix: s.prefix,
                    guid: src.guid,
                },
                Gid {
                    prefix: d.prefix,
                    guid: dst.guid,
                },
            ));
        }

        // Certificates: one CA, one certificate per container naming its
        // host name (and 127.0.0.1 for the host's probes).
        let pki = dir.path().join("pki");
        let pki_s = pki.to_str().context("temporary path is not UTF-8")?;
        crate::ibfabric(&["certs", "--out", pki_s, "ca"])?;
        let nodes_root = dir.path().join("nodes");
        let node_dir = |name: &str| -> Result<PathBuf> {
            let d = nodes_root.join(name);
            std::fs::create_dir_all(&d)?;
            Ok(d)
        };
        let tester_dir = node_dir("tester")?;
        let (cert, key) = issue(
            &tester_dir,
            &pki,
            &["worker", "--name", "chaos-tester"],
            &[],
        )?;
        let client = Transport::Tls(TlsSettings {
            ca: tester_dir.join("ca.pem"),
            cert: tester_dir.join(cert),
            key: tester_dir.join(key),
        });

        let mut c = Self {
            project: project.name.clone(),
            image: project.image.clone(),
            store_net,
            fabric_net,
            etcd: Vec::new(),
            controllers: Vec::new(),
            agents: Vec::new(),
            routers: Vec::new(),
            client,
            prefixes: fabric.subnets.iter().map(|s| s.prefix).collect(),
            router_guids: fabric.routers.iter().map(|r| r.guid).collect(),
            variants,
            variant_cas,
            current: Mutex::new(vec![0; SUBNETS]),
            probes,
            channels: Arc::new(Mutex::new(HashMap::new())),
            dir,
        };

        // etcd: three members, peers and clients over mutual TLS. The
        // controllers check every member against the first endpoint's
        // name, so every member's certificate names `etcd-1` too (after
        // its own name, which etcd's peer check resolves first).
        let members: Vec<String> = (1..=3).map(|k| format!("etcd-{k}")).collect();
        let cluster_arg = members
            .iter()
            .map(|m| format!("{m}=https://{m}:{ETCD_PEER_PORT}"))
            .collect::<Vec<_>>()
            .join(",");
        for m in &members {
            let d = node_dir(m)?;
            let mut names = vec![m.as_str()];
            if m != "etcd-1" {
                names.push("etcd-1");
            }
            let (cert, key) = issue(&d, &pki, &["worker", "--name", m], &names)?;
            let f = |n: &str| format!("/etc/ibfabric/{n}");
            let cmd: Vec<String> = [
                "/usr/bin/etcd",
                "--name",
                m,
                "--data-dir",
                "/var/lib/etcd",
                "--listen-client-urls",
                &format!("https://0.0.0.0:{ETCD_CLIENT_PORT}"),
                "--advertise-client-urls",
                &format!("https://{m}:{ETCD_CLIENT_PORT}"),
                "--listen-peer-urls",
                &format!("https://0.0.0.0:{ETCD_PEER_PORT}"),
                "--initial-advertise-peer-urls",
                &format!("https://{m}:{ETCD_PEER_PORT}"),
                "--initial-cluster",
                &cluster_arg,
                "--initial-cluster-state",
                "new",
                "--initial-cluster-token",
                &project.name,
                "--cert-file",
                &f(&cert),
                "--key-file",
                &f(&key),
                "--trusted-ca-file",
                &f("ca.pem"),
                "--client-cert-auth",
                "--peer-cert-file",
                &f(&cert),
                "--peer-key-file",
                &f(&key),
                "--peer-trusted-ca-file",
                &f("ca.pem"),
                "--peer-client-cert-auth",
                "--listen-metrics-urls",
                &format!("http://0.0.0.0:{ETCD_METRICS_PORT}"),
                "--logger",
                "zap",
                "--log-outputs",
                "stderr",
                "--log-level",
                "warn",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let node = Node {
                name: m.clone(),
                container: format!("{}-{m}", project.name),
                kind: Kind::Etcd,
                port: crate::cluster::free_port()?,
                metrics_port: crate::cluster::free_port()?,
            };
            let publish = [
                (node.port, ETCD_CLIENT_PORT),
                (node.metrics_port, ETCD_METRICS_PORT),
            ];
            c.create(&node, &[&c.store_net], &publish, &cmd, &d)?;
            c.etcd.push(node);
        }
        for node in &c.etcd {
            docker(&["start", node.container.as_str()])?;
        }
        let t0 = Instant::now();
        loop {
            let mut healthy = 0;
            for n in &c.etcd {
                if etcd_health(n.metrics_port).await {
                    healthy += 1;
                }
            }
            if healthy == c.etcd.len() {
                break;
            }
            if t0.elapsed() > Duration::from_secs(60) {
                bail!(
                    "etcd cluster not healthy after 60 s\n{}",
                    c.logs_tail(20).await
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        let endpoints: Vec<String> = members
            .iter()
            .map(|m| format!("https://{m}:{ETCD_CLIENT_PORT}"))
            .collect();
        let ctl_names = ["ctl-a", "ctl-b"];
        let ctl_addrs: Vec<String> = ctl_names
            .iter()
            .map(|n| format!("https://{n}:{CONTROLLER_PORT}"))
            .collect();
        for name in ctl_names {
            let d = node_dir(name)?;
            let (cert, key) = issue(&d, &pki, &["controller"], &[name])?;
            std::fs::write(
                d.join("controller.toml"),
                format!(
                    "id = \"{name}\"\nlisten = \"0.0.0.0:{CONTROLLER_PORT}\"\nalgorithm = \"issr\"\n\
                     lease_seconds = {}\n\n[store]\nkind = \"etcd\"\nendpoints = {}\n\
                     prefix = \"/ibfabric/{}/\"\nelection_ttl_seconds = {}\n\n\
                     [store.tls]\nca = \"ca.pem\"\ncert = \"{cert}\"\nkey = \"{key}\"\n\n\
                     [limits]\nheartbeat_ms = {}\n{}",
                    AGENT_LEASE.as_secs(),
                    toml_list(&endpoints),
                    project.name,
                    ELECTION_TTL.as_secs(),
                    HEARTBEAT.as_millis(),
                    tls_section(&cert, &key)
                ),
            )?;
            let node = Node {
                name: name.to_string(),
                container: format!("{}-{name}", project.name),
                kind: Kind::Controller,
                port: crate::cluster::free_port()?,
                metrics_port: 0,
            };
            let cmd = svc_cmd("controller", "controller.toml");
            // The fabric network first: the one the host's published port
            // is on while both are attached.
            c.create(
                &node,
                &[&c.fabric_net, &c.store_net],
                &[(node.port, CONTROLLER_PORT)],
                &cmd,
                &d,
            )?;
            docker(&["start", node.container.as_str()])?;
            c.controllers.push(node);
        }

        for (i, r) in fabric.routers.iter().enumerate() {
            let name = format!("router{i}");
            let d = node_dir(&name)?;
            let guid = format!("{:#018x}", r.guid);
            let (cert, key) = issue(&d, &pki, &["router", "--guid", &guid], &[&name])?;
            let ports = r.ports.iter().map(|p| p.port).max().unwrap_or(0);
            std::fs::write(
                d.join("router.toml"),
                format!(
                    "router_guid = \"{guid}\"\nlisten = \"0.0.0.0:{ROUTER_PORT}\"\ncontrollers = {}\n\
                     ports = {ports}\n{}",
                    toml_list(&ctl_addrs),
                    tls_section(&cert, &key)
                ),
            )?;
            let node = Node {
                name: name.clone(),
                container: format!("{}-{name}", project.name),
                kind: Kind::Router,
                port: crate::cluster::free_port()?,
                metrics_port: 0,
            };
            let cmd = svc_cmd("router", "router.toml");
            c.create(
                &node,
                &[&c.fabric_net],
                &[(node.port, ROUTER_PORT)],
                &cmd,
                &d,
            )?;
            docker(&["start", node.container.as_str()])?;
            c.routers.push(node);
        }

        for (i, s) in fabric.subnets.iter().enumerate() {
            let name = s.name.clone();
            let d = node_dir(&name)?;
            let prefix = format!("{:#018x}", s.prefix);
            let (cert, key) = issue(&d, &pki, &["agent", "--prefix", &prefix], &[&name])?;
            std::fs::write(d.join("topology.net"), &c.variants[i][0])?;
            std::fs::write(
                d.join("agent.toml"),
                format!(
                    "agent_id = \"{name}\"\nsubnet_prefix = \"{prefix}\"\ntopology = \"topology.net\"\n\
                     engine = \"updn\"\nout_dir = \"out\"\ncontrollers = {}\n\
                     listen = \"0.0.0.0:{AGENT_PORT}\"\nwatch_topology = true\n{}",
                    toml_list(&ctl_addrs),
                    tls_section(&cert, &key)
                ),
            )?;
            let node = Node {
                name: name.clone(),
                container: format!("{}-{name}", project.name),
                kind: Kind::Agent,
                port: crate::cluster::free_port()?,
                metrics_port: 0,
            };
            let cmd = svc_cmd("agent", "agent.toml");
            c.create(
                &node,
                &[&c.fabric_net],
                &[(node.port, AGENT_PORT)],
                &cmd,
                &d,
            )?;
            docker(&["start", node.container.as_str()])?;
            c.agents.push(node);
        }
        Ok(c)
    }

    /// Creates a container on `nets` (the first at creation, the others
    /// connected before start) with the files of `files` in /etc/ibfabric.
    fn create(
        &self,
        node: &Node,
        nets: &[&str],
        publish: &[(u16, u16)],
        cmd: &[String],
        files: &Path,
    ) -> Result<()> {
        let label = format!("{LABEL}={}", self.project);
        let mut args: Vec<String> = [
            "create",
            "--name",
            &node.container,
            "--hostname",
            &node.name,
            "--network",
            nets[0],
            "--network-alias",
            &node.name,
            "--label",
            &label,
            "-e",
            &format!("RUST_LOG={LOG_FILTER}"),
            // Logs go to files and test output, not a terminal.
            "-e",
            "NO_COLOR=1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for (host, inner) in publish {
            args.push("-p".into());
            args.push(format!("127.0.0.1:{host}:{inner}"));
        }
        args.push(self.image.clone());
        args.extend(cmd.iter().cloned());
        docker(&args)?;
        for net in &nets[1..] {
            docker(&[
                "network",
                "connect",
                "--alias",
                node.name.as_str(),
                net,
                node.container.as_str(),
            ])?;
        }
        let from = format!("{}/.", files.display());
        let to = format!("{}:/etc/ibfabric/", node.container);
        docker(&["cp", from.as_str(), to.as_str()])?;
        Ok(())
    }

    /// Every node, in a fixed order: etcd, controllers, agents, routers.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.etcd
            .iter()
            .chain(&self.controllers)
            .chain(&self.agents)
            .chain(&self.routers)
    }

    /// The CA count each subnet's agent was last given, as the leader
    /// must report it once it has the latest topology.
    pub fn expected_cas(&self) -> Vec<u32> {
        let cur = self
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cur.iter()
            .enumerate()
            .map(|(i, &v)| self.variant_cas[i][v])
            .collect()
    }

    /// Gives agent `i` the other shape of its subnet (more or fewer
    /// hosts): it reroutes and reports, and the leader must publish new
    /// mappings and egress tables. The copy gets a new modification time,
    /// which is what the agent's topology watch looks at.
    pub async fn flip_topology(&self, i: usize) -> Result<()> {
        let next = {
            let cur = self
                .current
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            1 - cur[i]
        };
        let file = self.dir.path().join(format!("flip-{i}.net"));
        std::fs::write(&file, &self.variants[i][next])?;
        docker_async(vec![
            "cp".into(),
            file.display().to_string(),
            format!("{}:/etc/ibfabric/topology.net", self.agents[i].container),
        ])
        .await?;
        let mut cur = self
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cur[i] = next;
        Ok(())
    }

    /// Cuts controller `k` from the store network (`store`) or the client
    /// network: its name stops resolving there.
    pub async fn cut_controller(&self, k: usize, store: bool) -> Result<()> {
        let net = if store {
            &self.store_net
        } else {
            &self.fabric_net
        };
        docker_async(vec![
            "network".into(),
            "disconnect".into(),
            net.clone(),
            self.controllers[k].container.clone(),
        ])
        .await?;
        Ok(())
    }

    /// Connects controller `k` to that network again, under its alias.
    pub async fn reconnect_controller(&self, k: usize, store: bool) -> Result<()> {
        let net = if store {
            &self.store_net
        } else {
            &self.fabric_net
        };
        let ctl = &self.controllers[k];
        docker_async(vec![
            "network".into(),
            "connect".into(),
            "--alias".into(),
            ctl.name.clone(),
            net.clone(),
            ctl.container.clone(),
        ])
        .await?;
        Ok(())
    }

    /// The topology agent `i` was last given (the variant in force).
    pub fn topology_now(&self, i: usize) -> String {
        let cur = self
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())[i];
        self.variants[i][cur].clone()
    }

    /// Puts `text` in agent `i`'s topology file (what an `ibnetdiscover >
    /// file` caught mid-run leaves, for instance), not changing which
    /// variant counts as in force.
    pub async fn put_topology(&self, i: usize, text: &str) -> Result<()> {
        let file = self.dir.path().join(format!("put-{i}.net"));
        std::fs::write(&file, text)?;
        docker_async(vec![
            "cp".into(),
            file.display().to_string(),
            format!("{}:/etc/ibfabric/topology.net", self.agents[i].container),
        ])
        .await?;
        Ok(())
    }

    /// The CA port GUIDs of agent `i`'s topology in force.
    pub fn host_guids(&self, i: usize) -> Result<Vec<u64>> {
        let f = fabric::formats::ibnetdiscover::parse(
            &self.topology_now(i),
            Path::new("topology.net"),
        )?;
        Ok(f.endports().iter().map(|&p| f.port_guid(p)).collect())
    }

    /// Forgets subnet `prefix` with an operator's (the controllers')
    /// certificate, asking each controller until the leader does it.
    pub async fn forget_subnet(&self, prefix: u64) -> Result<bool> {
        let ops = self.dir.path().join(format!("ops-{prefix:x}"));
        std::fs::create_dir_all(&ops)?;
        let (cert, key) = issue(&ops, &self.dir.path().join("pki"), &["controller"], &[])?;
        let t = Transport::Tls(ibtls::TlsSettings {
            ca: ops.join("ca.pem"),
            cert: ops.join(cert),
            key: ops.join(key),
        });
        let mut last = String::from("no controller");
        for n in &self.controllers {
            let ch = match proto::client::connect(&n.addr(), &t, Role::Controller).await {
                Ok(ch) => ch,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            match proto::client::controller_client(ch)
                .forget(proto::client::unary(v1::ForgetRequest {
                    subnet_prefix: prefix,
                }))
                .await
            {
                Ok(r) => return Ok(r.into_inner().forgotten),
                Err(e) => last = e.message().to_string(),
            }
        }
        anyhow::bail!("no controller forgot {prefix:#x}: {last}")
    }

    fn channel(&self, addr: &str, role: Role) -> Result<Channel> {
        let mut map = self
            .channels
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(ch) = map.get(addr) {
            return Ok(ch.clone());
        }
        let ch = proto::client::secure_endpoint(addr, &self.client, role)?.connect_lazy();
        map.insert(addr.to_string(), ch.clone());
        Ok(ch)
    }

    /// A channel that failed may hold a connection to a process that is
    /// gone: the next probe dials anew.
    fn forget(channels: &Mutex<HashMap<String, Channel>>, addr: &str) {
        channels
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(addr);
    }

    /// One controller's `State`.
    pub async fn controller_state(&self, k: usize) -> Result<v1::ControllerState, String> {
        let addr = self.controllers[k].addr();
        let ch = self
            .channel(&addr, Role::Controller)
            .map_err(|e| e.to_string())?;
        let r = tokio::time::timeout(PROBE_TIMEOUT, async move {
            proto::client::controller_client(ch)
                .state(v1::StateRequest {})
                .await
        })
        .await;
        let r = match r {
            Ok(Ok(s)) => Ok(s.into_inner()),
            Ok(Err(s)) => Err(format!("{}: {}", s.code(), s.message())),
            Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
        };
        if r.is_err() {
            Self::forget(&self.channels, &addr);
        }
        r
    }

    /// One router's `State`.
    pub async fn router_state(&self, i: usize) -> Result<v1::RouterState, String> {
        let addr = self.routers[i].addr();
        let ch = self
            .channel(&addr, Role::Router)
            .map_err(|e| e.to_string())?;
        let r = tokio::time::timeout(PROBE_TIMEOUT, async move {
            v1::router_fw_client::RouterFwClient::new(ch)
                .state(v1::RouterStateRequest {})
                .await
        })
        .await;
        let r = match r {
            Ok(Ok(s)) => Ok(s.into_inner()),
            Ok(Err(s)) => Err(format!("{}: {}", s.code(), s.message())),
            Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
        };
        if r.is_err() {
            Self::forget(&self.channels, &addr);
        }
        r
    }

    async fn agent_answer(&self, i: usize) -> AgentAnswer {
        let addr = self.agents[i].addr();
        let ch = match self.channel(&addr, Role::Agent) {
            Ok(ch) => ch,
            Err(e) => return AgentAnswer::Silent(e.to_string()),
        };
        let (src, dst) = self.probes[i];
        let r = tokio::time::timeout(PROBE_TIMEOUT, async move {
            v1::agent_client::AgentClient::new(ch)
                .path_query(v1::PathQueryRequest {
                    source: Some(proto::convert::gid_to_wire(src)),
                    destination: Some(proto::convert::gid_to_wire(dst)),
                })
                .await
        })
        .await;
        let a = match r {
            Ok(Ok(p)) => AgentAnswer::Mapping(p.into_inner().mapping_version),
            // The agent's own words for "routed, but no mapping yet".
            Ok(Err(s)) if s.message().contains("no router-port mapping") => AgentAnswer::NoMapping,
            Ok(Err(s)) => AgentAnswer::Silent(format!("{}: {}", s.code(), s.message())),
            Err(_) => AgentAnswer::Silent(format!("no answer within {PROBE_TIMEOUT:?}")),
        };
        if matches!(a, AgentAnswer::Silent(_)) {
            Self::forget(&self.channels, &addr);
        }
        a
    }

    /// Probes every service at once.
    pub async fn observe(&self) -> Observation {
        let started = Instant::now();
        let ctl = async {
            let mut v = Vec::new();
            for k in 0..self.controllers.len() {
                v.push(self.controller_state(k));
            }
            join_all(v).await
        };
        let rt = async {
            let mut v = Vec::new();
            for i in 0..self.routers.len() {
                v.push(self.router_state(i));
            }
            join_all(v).await
        };
        let ag = async {
            let mut v = Vec::new();
            for i in 0..self.agents.len() {
                v.push(self.agent_answer(i));
            }
            join_all(v).await
        };
        let et = async {
            let mut v = Vec::new();
            for n in &self.etcd {
                v.push(etcd_health(n.metrics_port));
            }
            join_all(v).await
        };
        let (controllers, routers, agents, etcd_healthy) = tokio::join!(ctl, rt, ag, et);
        Observation {
            started,
            finished: Instant::now(),
            controllers,
            routers,
            agents,
            etcd_healthy,
        }
    }

    /// Whether `o` shows the cluster recovered: exactly one controller
    /// leads (none of `e.not_leader`); it lists every subnet live (but the
    /// skipped agents'), with tables its verifier accepted as deadlock
    /// free, the topology each agent was last given, and a mapping that
    /// the agent holds (as it told the leader and answers path queries
    /// with); every router holds the leader's latest egress tables and
    /// told the leader so. Returns the leader's index, or why not.
    pub fn recovered(&self, o: &Observation, e: &Expect) -> Result<usize, String> {
        let leaders: Vec<usize> = o
            .controllers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.as_ref().is_ok_and(|s| s.leader))
            .map(|(k, _)| k)
            .collect();
        let l = match leaders.as_slice() {
            [l] => *l,
            [] => return Err(format!("no leader: {}", self.describe_controllers(o))),
            _ => {
                return Err(format!(
                    "{} controllers claim to lead: {}",
                    leaders.len(),
                    self.describe_controllers(o)
                ));
            }
        };
        if e.not_leader.contains(&l) {
            return Err(format!(
                "{} still leads: {}",
                self.controllers[l].name,
                self.describe_controllers(o)
            ));
        }
        let st = o.controllers[l]
            .as_ref()
            .map_err(|e| format!("leader gone: {e}"))?;
        let lname = &self.controllers[l].name;
        let cas = self.expected_cas();
        for (i, &prefix) in self.prefixes.iter().enumerate() {
            let skip = e.skip_agents.contains(&i);
            let Some(s) = st.subnets.iter().find(|s| s.subnet_prefix == prefix) else {
                return Err(format!("{lname} lists no subnet {prefix:#x}"));
            };
            if s.mapping_version == 0 {
                return Err(format!(
                    "{lname} has no mapping for {}",
                    self.agents[i].name
                ));
            }
            if skip {
                continue;
            }
            if !s.live {
                return Err(format!("{lname}: {} not live", self.agents[i].name));
            }
            match &s.routing {
                Some(r) if r.verified && r.deadlock_free => {}
                _ => {
                    return Err(format!(
                        "{lname}: {} without verified deadlock-free tables",
                        self.agents[i].name
                    ));
                }
            }
            let have = s.topology.as_ref().map_or(0, |t| t.cas);
            if have != cas[i] {
                return Err(format!(
                    "{lname}: {} reported with {have} hosts, its topology has {}",
                    self.agents[i].name, cas[i]
                ));
            }
            if s.held_mapping_version != s.mapping_version {
                return Err(format!(
                    "{lname}: {} holds mapping {} of {}",
                    self.agents[i].name,
                    fmt_version(s.held_mapping_version),
                    fmt_version(s.mapping_version)
                ));
            }
            match &o.agents[i] {
                AgentAnswer::Mapping(v) if *v == s.mapping_version => {}
                a => {
                    return Err(format!(
                        "{} answers {a:?}, {lname} publishes mapping {}",
                        self.agents[i].name,
                        fmt_version(s.mapping_version)
                    ));
                }
            }
        }
        for (i, &guid) in self.router_guids.iter().enumerate() {
            let rname = &self.routers[i].name;
            let Some(ri) = st.routers.iter().find(|r| r.router_guid == guid) else {
                return Err(format!("{lname} lists no {rname}"));
            };
            let rs = o.routers[i]
                .as_ref()
                .map_err(|e| format!("{rname} does not answer: {e}"))?;
            if ri.egress_version == 0 || rs.version != ri.egress_version {
                return Err(format!(
                    "{rname} holds {}, {lname} publishes {}",
                    fmt_version(rs.version),
                    fmt_version(ri.egress_version)
                ));
            }
            if ri.held_version != ri.egress_version {
                return Err(format!(
                    "{rname} has not told {lname} it holds {} (held: {})",
                    fmt_version(ri.egress_version),
                    fmt_version(ri.held_version)
                ));
            }
        }
        if e.etcd_healthy {
            if let Some(k) = o.etcd_healthy.iter().position(|h| !h) {
                return Err(format!("{} not healthy", self.etcd[k].name));
            }
        }
        Ok(l)
    }

    fn describe_controllers(&self, o: &Observation) -> String {
        o.controllers
            .iter()
            .enumerate()
            .map(|(k, s)| match s {
                Ok(s) => format!(
                    "{}: {} (term {})",
                    self.controllers[k].name,
                    if s.leader { "leader" } else { "follower" },
                    s.term
                ),
                Err(e) => format!("{}: {e}", self.controllers[k].name),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The etcd member that leads the raft group, from its metrics.
    pub async fn etcd_leader(&self) -> Option<usize> {
        for (k, n) in self.etcd.iter().enumerate() {
            let m = http_get(n.metrics_port, "/metrics")
                .await
                .unwrap_or_default();
            if m.lines().any(|l| l.trim() == "etcd_server_is_leader 1") {
                return Some(k);
            }
        }
        None
    }

    /// The last `lines` log lines of every container.
    pub async fn logs_tail(&self, lines: usize) -> String {
        let mut s = String::new();
        for n in self.nodes() {
            let out = tokio::process::Command::new("docker")
                .args(["logs", "--tail", &lines.to_string(), &n.container])
                .output()
                .await;
            s += &format!("--- {}\n", n.name);
            if let Ok(o) = out {
                s += &String::from_utf8_lossy(&o.stdout);
                s += &String::from_utf8_lossy(&o.stderr);
            }
        }
        s
    }
}

fn svc_cmd(service: &str, config: &str) -> Vec<String> {
    vec![
        "/usr/bin/ibfabric".into(),
        service.into(),
        "--config".into(),
        format!("/etc/ibfabric/{config}"),
    ]
}

/// Versions as `term.sequence`, as the demo prints them.
pub fn fmt_version(v: u64) -> String {
    format!("{}.{}", v >> 32, v & 0xffff_ffff)
}

async fn join_all<F: std::future::Future>(futs: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::with_capacity(futs.len());
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    // Polled together: every probe of a round is sent at once.
    let mut done: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if done[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => done[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.extend(done.into_iter().flatten());
    out
}

/// A plaintext HTTP GET on a loopback port (etcd's and the services'
/// metrics listeners): the whole response, headers included.
pub async fn http_get(port: u16, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let work = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        Some(String::from_utf8_lossy(&buf).into_owned())
    };
    tokio::time::timeout(PROBE_TIMEOUT, work)
        .await
        .ok()
        .flatten()
}

async fn etcd_health(port: u16) -> bool {
    http_get(port, "/health")
        .await
        .is_some_and(|r| r.contains("\"health\":\"true\""))
}

/// What the monitor found wrong, and what it saw.
#[derive(Debug, Default)]
struct Track {
    /// After the first convergence: a leader without a subnet's mapping,
    /// or an agent that loses or rolls back its mapping, is a violation.
    armed: bool,
    /// Agents being restarted on purpose: they may answer without mapping.
    exempt_agents: BTreeSet<usize>,
    violations: Vec<String>,
    routers: Vec<RouterTrack>,
    agent_last: Vec<u64>,
    /// Per router, the egress versions leaders were seen publishing, and
    /// the terms leaders were seen holding.
    published: Vec<BTreeSet<u64>>,
    terms: BTreeSet<u64>,
    /// Rounds in which two controllers said they lead.
    two_leaders: u64,
    /// Probe rounds checked.
    rounds: u64,
    /// Per recent round: when it ended and which controllers said they
    /// lead, to tell election time from the clients' time to follow.
    leader_rounds: std::collections::VecDeque<(Instant, Instant, Vec<usize>)>,
}

#[derive(Debug, Default)]
struct RouterTrack {
    started_unix_ms: u64,
    /// Installs of the current process seen so far.
    seen: u64,
    /// Highest version this router ever put in force (all processes).
    max_version: u64,
    /// Every install seen: (version, unix ms, process start).
    installs: Vec<(u64, u64, u64)>,
}

const MAX_VIOLATIONS: usize = 100;
/// Rounds kept for [`Monitor::led_by_other_after`]: minutes of them.
const LEADER_ROUNDS: usize = 4096;

impl Track {
    fn violation(&mut self, v: String) {
        if self.violations.len() < MAX_VIOLATIONS && !self.violations.contains(&v) {
            self.violations.push(v);
        }
    }

    fn check(&mut self, c: &ChaosCluster, o: &Observation) {
        self.rounds += 1;
        let leaders = o
            .controllers
            .iter()
            .filter(|s| s.as_ref().is_ok_and(|s| s.leader))
            .count();
        if leaders > 1 {
            self.two_leaders += 1;
        }
        let leading: Vec<usize> = o
            .controllers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.as_ref().is_ok_and(|s| s.leader))
            .map(|(k, _)| k)
            .collect();
        if self.leader_rounds.len() == LEADER_ROUNDS {
            self.leader_rounds.pop_front();
        }
        self.leader_rounds
            .push_back((o.started, o.finished, leading));
        for (k, s) in o.controllers.iter().enumerate() {
            let Ok(s) = s else { continue };
            if !s.leader {
                continue;
            }
            self.terms.insert(s.term);
            for (i, &guid) in c.router_guids.iter().enumerate() {
                if let Some(r) = s.routers.iter().find(|r| r.router_guid == guid) {
                    if r.egress_version > 0 {
                        self.published[i].insert(r.egress_version);
                        self.terms.insert(r.egress_version >> 32);
                    }
                }
            }
            if self.armed {
                for (i, &p) in c.prefixes.iter().enumerate() {
                    if !s
                        .subnets
                        .iter()
                        .any(|s| s.subnet_prefix == p && s.mapping_version > 0)
                    {
                        self.violation(format!(
                            "mapping lost: leader {} (term {}) has no mapping for {}",
                            c.controllers[k].name, s.term, c.agents[i].name
                        ));
                    }
                }
            }
        }
        for (i, r) in o.routers.iter().enumerate() {
            if let Ok(rs) = r {
                self.router(c, i, rs);
            }
        }
        for (i, a) in o.agents.iter().enumerate() {
            let exempt = self.exempt_agents.contains(&i);
            match a {
                AgentAnswer::Mapping(v) => {
                    if self.armed && !exempt && *v < self.agent_last[i] {
                        self.violation(format!(
                            "{} went back from mapping {} to {}",
                            c.agents[i].name,
                            fmt_version(self.agent_last[i]),
                            fmt_version(*v)
                        ));
                    }
                    self.agent_last[i] = if exempt {
                        *v
                    } else {
                        self.agent_last[i].max(*v)
                    };
                }
                AgentAnswer::NoMapping if self.armed && !exempt && self.agent_last[i] > 0 => {
                    self.violation(format!(
                        "mapping lost: {} answers without a mapping after holding {}",
                        c.agents[i].name,
                        fmt_version(self.agent_last[i])
                    ));
                }
                _ => {}
            }
        }
    }

    fn router(&mut self, c: &ChaosCluster, i: usize, rs: &v1::RouterState) {
        let name = &c.routers[i].name;
        let mut found = Vec::new();
        if rs.started_unix_ms == 0 {
            // Without its install history nothing below can be checked.
            self.violation(format!(
                "{name} reports no install history: the image holds an ibfabric \
                 older than this test (cargo build --bin ibfabric)"
            ));
            return;
        }
        let t = &mut self.routers[i];
        if rs.started_unix_ms != t.started_unix_ms {
            // A new process: its history starts over.
            t.started_unix_ms = rs.started_unix_ms;
            t.seen = 0;
        }
        let listed = rs.installs.len() as u64;
        let first = rs.installs_total.saturating_sub(listed);
        if first > t.seen {
            found.push(format!(
                "{name}: missed {} installs between two probes (history of {listed})",
                first - t.seen
            ));
        }
        let skip = usize::try_from(t.seen.saturating_sub(first)).unwrap_or(usize::MAX);
        for rec in rs.installs.iter().skip(skip) {
            let repair = rec.replaces != 0 && rec.replaces == rec.previous;
            if rec.version <= rec.previous && !repair {
                found.push(format!(
                    "older table: {name} put {} in force over {}",
                    fmt_version(rec.version),
                    fmt_version(rec.previous)
                ));
            }
            if rec.version < t.max_version && !repair {
                found.push(format!(
                    "older table: {name} put {} in force after having held {}",
                    fmt_version(rec.version),
                    fmt_version(t.max_version)
                ));
            }
            t.max_version = t.max_version.max(rec.version);
            t.installs
                .push((rec.version, rec.at_unix_ms, rs.started_unix_ms));
        }
        t.seen = rs.installs_total;
        for f in found {
            self.violation(f);
        }
    }

    /// Every version a router put in force was handed out by a leader: its
    /// term is one a leader was seen holding, and it is not above the
    /// newest version leaders were seen publishing for that router.
    fn check_published(&mut self, c: &ChaosCluster) {
        let mut found = Vec::new();
        for (i, t) in self.routers.iter().enumerate() {
            let newest = self.published[i].iter().next_back().copied().unwrap_or(0);
            for &(v, _, _) in &t.installs {
                if !self.terms.contains(&(v >> 32)) || v > newest {
                    found.push(format!(
                        "unverified table: {} put {} in force, which no leader published \
                         (leader terms seen: {:?}; newest published: {})",
                        c.routers[i].name,
                        fmt_version(v),
                        self.terms,
                        fmt_version(newest)
                    ));
                }
            }
        }
        for f in found {
            self.violation(f);
        }
    }
}

/// Probes the cluster continuously (a round every 200 ms or as soon as
/// the last one ends, when it took longer), checks the invariants on every
/// round, and hands the rounds to the scenarios.
pub struct Monitor {
    rx: tokio::sync::watch::Receiver<Option<Arc<Observation>>>,
    track: Arc<Mutex<Track>>,
    task: tokio::task::JoinHandle<()>,
}

const ROUND: Duration = Duration::from_millis(200);

impl Monitor {
    pub fn start(c: Arc<ChaosCluster>) -> Self {
        let (tx, rx) = tokio::sync::watch::channel(None);
        let track = Arc::new(Mutex::new(Track {
            routers: (0..c.routers.len())
                .map(|_| RouterTrack::default())
                .collect(),
            agent_last: vec![0; c.agents.len()],
            published: vec![BTreeSet::new(); c.routers.len()],
            ..Track::default()
        }));
        let t = track.clone();
        let task = tokio::spawn(async move {
            loop {
                let o = c.observe().await;
                t.lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .check(&c, &o);
                let wait = ROUND.saturating_sub(o.finished - o.started);
                tx.send_replace(Some(Arc::new(o)));
                tokio::time::sleep(wait).await;
            }
        });
        Self { rx, track, task }
    }

    fn track(&self) -> std::sync::MutexGuard<'_, Track> {
        self.track
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// From now on a lost or rolled-back mapping is a violation.
    pub fn arm(&self) {
        self.track().armed = true;
    }

    pub fn exempt_agent(&self, i: usize, exempt: bool) {
        let mut t = self.track();
        if exempt {
            t.exempt_agents.insert(i);
        } else {
            t.exempt_agents.remove(&i);
        }
    }

    /// The violations so far (after checking every install against what
    /// leaders published).
    pub fn violations(&self, c: &ChaosCluster) -> Vec<String> {
        let mut t = self.track();
        t.check_published(c);
        t.violations.clone()
    }

    /// Probe rounds checked so far.
    pub fn rounds(&self) -> u64 {
        self.track().rounds
    }

    /// Rounds in which two controllers claimed to lead.
    pub fn two_leader_rounds(&self) -> u64 {
        self.track().two_leaders
    }

    /// From `since` to the end of the first round after it in which one
    /// controller other than `old` led alone: the election part of a
    /// recovery.
    pub fn led_by_other_after(&self, since: Instant, old: usize) -> Option<Duration> {
        self.track()
            .leader_rounds
            .iter()
            .find(|(started, _, l)| *started >= since && l.len() == 1 && l[0] != old)
            .map(|(_, finished, _)| *finished - since)
    }

    /// When router `i` put `version` in force (unix ms), if it did.
    pub fn installed_at(&self, i: usize, version: u64) -> Option<u64> {
        self.track()
            .routers
            .get(i)?
            .installs
            .iter()
            .find(|(v, _, _)| *v == version)
            .map(|(_, at, _)| *at)
    }

    /// The newest round that started after `since`.
    pub async fn next_after(&mut self, since: Instant) -> Arc<Observation> {
        loop {
            if let Some(o) = self.rx.borrow_and_update().clone() {
                if o.started >= since {
                    return o;
                }
            }
            if self.rx.changed().await.is_err() {
                // The probe task never ends on its own; wait for the
                // caller's timeout.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Waits until a round that started after `after` shows `e` met;
    /// returns the time from `since` (the fault) to the end of that round,
    /// and the leader. After `limit` from `since`, the last reason it was
    /// not.
    pub async fn wait_recovered(
        &mut self,
        c: &ChaosCluster,
        e: &Expect,
        since: Instant,
        after: Instant,
        limit: Duration,
    ) -> Result<(Duration, usize), String> {
        let mut last = String::from("no probe round finished");
        let deadline = since + limit;
        let mut cursor = after.max(since);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(o) = tokio::time::timeout(left, self.next_after(cursor)).await else {
                return Err(last);
            };
            match c.recovered(&o, e) {
                Ok(l) => return Ok((o.finished - since, l)),
                Err(why) => last = why,
            }
            if o.finished >= deadline {
                return Err(last);
            }
            // The next round, not this one again.
            cursor = o.started + Duration::from_millis(1);
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Unix milliseconds now, to compare with the routers' install times.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
