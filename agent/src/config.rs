//! `ibfabric agent --config FILE` (TOML). Relative paths are taken from
//! the directory of the config file.
//!
//! ```toml
//! agent_id = "subnet0"                  # stable name, one agent per subnet
//! subnet_prefix = "0xfec0000000000001"
//! topology = "subnet0.net"              # ibnetdiscover grammar
//! engine = "ftree"                      # optional, see `ibfabric engines`; default: chosen
//!                                       # from the topology (ftree on a fat tree, dfdn when
//!                                       # the diameter fits in max_vls, else nue)
//! root_guids = "roots.txt"              # optional, updn: root switch node GUIDs, one per line
//! base = "minhop"                       # optional, for dfdn/dfd2/lash: minhop, sssp, trees,
//!                                       # auto (default: auto for lash, trees for dfdn (auto when lopsided),
//!                                       # minhop for dfd2)
//! sssp_streams = 16                     # optional, for sssp/dfsssp (and the sssp base): balance
//!                                       # in this many streams exchanging loads in rounds, so
//!                                       # workers can share the job (default 0: sequential)
//! max_vls = 8                           # optional
//! max_sls = 16                          # optional
//! mcast_groups = "groups.txt"           # optional: multicast groups (docs/multicast.md); the
//!                                       # set then carries reserved trees on the top SL and VL,
//!                                       # which the engine leaves to multicast
//! out_dir = "out/subnet0"               # optional: the table set (compact files, see
//!                                       # docs/table-set-format.md) for the OpenSM plugin,
//!                                       # and the controller's mapping (ibfabric-mapping.txt)
//! opensm_dump = false                   # optional: OpenSM's text dumps too, for
//!                                       # `opensm -R file` and external checkers
//! mapping_file = "subnet0.map"          # optional: router ports for remote GIDs until the
//!                                       # controller sends a mapping (the paper's Code 1)
//! controllers = ["http://127.0.0.1:7100"]
//! listen = "127.0.0.1:7200"             # optional: Agent.PathQuery service
//! metrics_listen = "127.0.0.1:9465"     # optional: Prometheus /metrics (plain HTTP)
//! watch_topology = true                 # optional: re-route when the file changes
//! dqr = true                            # optional: after links or switches fail, reroute
//!                                       # only the broken flows (dynamic quick reconfiguration)
//! dqr_detours = "mesh"                  # optional: none, local, mesh: a local detour around
//!                                       # each failed link enabled first (mesh: the DQR mesh
//!                                       # plug-in; the default for dor tables, none otherwise)
//! stage_wait_ms = 5000                  # optional: without [fabric] confirmation, how long a
//!                                       # drain stage waits for OpenSM's ibfabric plugin to
//!                                       # report it applied (no report in time: go on)
//! discovery_hold_ms = 20000             # optional: a discovery with more than half of the
//!                                       # switches or end ports gone is acted on only when it
//!                                       # persists this long (an empty one never is)
//! workers = ["https://w1:7400"]         # optional: compute dfdn's base routes on these
//!                                       # workers (`ibfabric worker`); same tables as alone
//! # [workers_store]                     # or: the workers registered in this etcd (a
//! # kind = "etcd"                       # controller's [store] table), each under a lease
//! # endpoints = ["https://etcd:2379"]
//!
//! [fabric]                              # optional: follow the live fabric instead of a file
//! ca = "mlx5_0"                         # optional: the SM's CA for the diag tools (-C)
//! port = 1                              # optional: its port (-P)
//! rediscover_ms = 30000                 # ibnetdiscover on this schedule, and at once when
//!                                       # OpenSM's ibfabric plugin counts a heavy sweep
//! confirm = true                        # read the switches back after each new set
//! confirm_timeout_ms = 120000
//! confirm_path_sample = 16             # PathRecords per source when confirming (0: all pairs)
//! pathrecord_tool = "/usr/local/bin/ibfabric-pathrecord-sl"   # optional
//! sl2vl_tool = "/usr/local/bin/ibfabric-sl2vl-read"         # optional
//! opensm_pid_file = "/run/opensm.pid"   # optional: SIGHUP OpenSM after a new set (the
//!                                       # plugin also notices it by itself)
//! ```
//! With `[fabric]`, `topology` is where the agent keeps the topology it
//! last discovered, and `out_dir` (required) is the directory OpenSM's
//! ibfabric plugin applies (`event_plugin_options ibfabric_dir=...`).

use fabric::routing::{Base, EngineKind};
use serde::Deserialize;
use settings::Invalid;
pub use settings::{ConfigError, ConfigFile};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// `[tls]`: this service's certificate, key and the CA (mutual TLS).
    #[serde(default)]
    pub tls: Option<ibtls::TlsSettings>,
    /// Plaintext without authentication; only when said explicitly.
    #[serde(default)]
    pub insecure: bool,
    pub agent_id: String,
    #[serde(deserialize_with = "settings::hex_u64")]
    pub subnet_prefix: u64,
    pub topology: PathBuf,
    /// None: chosen from the topology each time it is routed from scratch
    /// ([`fabric::routing::auto`]); always a deadlock-free engine.
    #[serde(default)]
    pub engine: Option<EngineKind>,
    /// For engines that take root switches (updn): a file of node GUIDs.
    #[serde(default)]
    pub root_guids: Option<PathBuf>,
    /// None: the engine's default base.
    #[serde(default)]
    pub base: Option<Base>,
    /// SSSP's balancing in this many streams (`EngineOptions::sssp_streams`);
    /// 0: the sequential greedy.
    #[serde(default)]
    pub sssp_streams: u16,
    #[serde(default = "default_vls")]
    pub max_vls: u8,
    #[serde(default = "default_sls")]
    pub max_sls: u8,
    /// Multicast groups: the set carries reserved trees for them
    /// (docs/multicast.md), and the engine routes with one VL and one SL
    /// fewer.
    #[serde(default)]
    pub mcast_groups: Option<PathBuf>,
    #[serde(default)]
    pub out_dir: Option<PathBuf>,
    /// OpenSM's text dumps beside the compact set in `out_dir` (for stock
    /// OpenSM's `-R file` loader and external checkers).
    #[serde(default)]
    pub opensm_dump: bool,
    #[serde(default)]
    pub mapping_file: Option<PathBuf>,
    #[serde(default)]
    pub controllers: Vec<String>,
    #[serde(default)]
    pub listen: Option<SocketAddr>,
    /// Prometheus metrics over plain HTTP (`GET /metrics`) on this address;
    /// off unless given.
    #[serde(default)]
    pub metrics_listen: Option<SocketAddr>,
    #[serde(default)]
    pub watch_topology: bool,
    /// Reroute only the broken flows after a failure (else recompute).
    #[serde(default = "yes")]
    pub dqr: bool,
    /// Local detours DQR enables around a failed link before its search;
    /// unset: the mesh plug-in for tables routed by `dor`, none otherwise.
    #[serde(default)]
    pub dqr_detours: Option<fabric::dqr::Detours>,
    #[serde(default = "default_stage_wait_ms")]
    pub stage_wait_ms: u64,
    /// How long a sharply shrunken discovery must persist before it is
    /// routed (`fabric::discovery`); until then the tables in force stay.
    #[serde(default = "default_discovery_hold_ms")]
    pub discovery_hold_ms: u64,
    /// `[fabric]`: discover the topology from the fabric and confirm the
    /// tables from the switches.
    #[serde(default)]
    pub fabric: Option<LiveFabric>,
    /// Workers (`ibfabric worker`, http(s)://host:port) that compute DF-DN's
    /// base routing of this subnet, cut by destination switch; the SL choice
    /// and the verification run here. The tables are the ones the agent
    /// computes alone, byte for byte; parts of lost workers go to the
    /// others, and with none left they run here. Other engines and bases
    /// ignore it (logged). The agent's own certificate is its identity.
    #[serde(default)]
    pub workers: Vec<String>,
    /// `[workers_store]`: find the workers in this store instead (etcd,
    /// the controller's `[store]` table), where each holds its key under a
    /// lease; one whose lease ends during a job is given up on at once.
    #[serde(default)]
    pub workers_store: Option<store::StoreConfig>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveFabric {
    #[serde(default)]
    pub ca: Option<String>,
    #[serde(default)]
    pub port: Option<u8>,
    #[serde(default = "default_rediscover_ms")]
    pub rediscover_ms: u64,
    #[serde(default = "yes")]
    pub confirm: bool,
    #[serde(default = "default_confirm_timeout_ms")]
    pub confirm_timeout_ms: u64,
    #[serde(default)]
    pub pathrecord_tool: Option<PathBuf>,
    #[serde(default)]
    pub sl2vl_tool: Option<PathBuf>,
    /// PathRecords asked per source when confirming (0: every pair).
    #[serde(default = "default_path_sample")]
    pub confirm_path_sample: usize,
    #[serde(default)]
    pub opensm_pid_file: Option<PathBuf>,
}

impl LiveFabric {
    pub fn diags(&self) -> crate::live::Diags {
        crate::live::Diags {
            ca: self.ca.clone(),
            port: self.port,
            pathrecord_tool: self.pathrecord_tool.clone(),
            sl2vl_tool: self.sl2vl_tool.clone(),
            path_sample: (self.confirm_path_sample > 0).then_some(self.confirm_path_sample),
        }
    }
}

fn default_rediscover_ms() -> u64 {
    30_000
}
fn default_path_sample() -> usize {
    16
}
fn default_confirm_timeout_ms() -> u64 {
    120_000
}
fn default_stage_wait_ms() -> u64 {
    5_000
}
fn default_discovery_hold_ms() -> u64 {
    20_000
}
fn yes() -> bool {
    true
}

fn default_vls() -> u8 {
    8
}
fn default_sls() -> u8 {
    16
}

impl ConfigFile for AgentConfig {
    fn check(&self) -> Result<(), Invalid> {
        ibtls::Transport::from_config(self.tls.clone(), self.insecure)
            .map_err(|e| Invalid(e.to_string()))?;
        if !(1..=15).contains(&self.max_vls) {
            return Err(Invalid(format!(
                "max_vls {} is outside 1..=15",
                self.max_vls
            )));
        }
        if !(1..=16).contains(&self.max_sls) {
            return Err(Invalid(format!(
                "max_sls {} is outside 1..=16",
                self.max_sls
            )));
        }
        if self.mcast_groups.is_some() && (self.max_vls < 2 || self.max_sls < 2) {
            return Err(Invalid(format!(
                "mcast_groups needs a VL and an SL for multicast alone: max_vls {} and \
                 max_sls {} leave none",
                self.max_vls, self.max_sls
            )));
        }
        if !self.workers.is_empty() && self.workers_store.is_some() {
            return Err(Invalid(
                "workers and [workers_store] both given: name the workers or where they register, not both".into(),
            ));
        }
        if let Some(st) = &self.workers_store {
            if !st.shared() {
                return Err(Invalid(
                    "workers_store.kind must be \"etcd\": workers register in a shared store"
                        .into(),
                ));
            }
        }
        if self.agent_id.trim().is_empty() {
            return Err(Invalid("agent_id is empty".into()));
        }
        if let Some(l) = &self.fabric {
            if self.out_dir.is_none() {
                return Err(Invalid(
                    "[fabric] needs out_dir: the directory OpenSM's ibfabric plugin applies".into(),
                ));
            }
            if l.rediscover_ms < 100 {
                return Err(Invalid(format!(
                    "[fabric] rediscover_ms {} is below 100",
                    l.rediscover_ms
                )));
            }
        }
        Ok(())
    }

    fn paths_mut(&mut self) -> Vec<&mut PathBuf> {
        std::iter::once(&mut self.topology)
            .chain(self.out_dir.as_mut())
            .chain(self.root_guids.as_mut())
            .chain(self.mcast_groups.as_mut())
            .chain(self.mapping_file.as_mut())
            .chain(self.fabric.iter_mut().flat_map(|l| {
                l.pathrecord_tool
                    .iter_mut()
                    .chain(l.sl2vl_tool.iter_mut())
                    .chain(l.opensm_pid_file.iter_mut())
            }))
            .chain(self.tls.iter_mut().flat_map(ibtls::TlsSettings::paths_mut))
            .chain(
                self.workers_store
                    .iter_mut()
                    .filter_map(store::StoreConfig::etcd_tls_mut)
                    .flat_map(ibtls::TlsSettings::paths_mut),
            )
            .collect()
    }
}

impl AgentConfig {
    /// `new` with this config's values for what only a restart changes:
    /// where the agent finds its subnet, whom it talks to, how.
    pub fn reloadable_part_of(&self, new: &AgentConfig) -> AgentConfig {
        AgentConfig {
            engine: new.engine,
            base: new.base,
            sssp_streams: new.sssp_streams,
            max_vls: new.max_vls,
            max_sls: new.max_sls,
            root_guids: new.root_guids.clone(),
            mcast_groups: new.mcast_groups.clone(),
            dqr: new.dqr,
            dqr_detours: new.dqr_detours,
            stage_wait_ms: new.stage_wait_ms,
            discovery_hold_ms: new.discovery_hold_ms,
            opensm_dump: new.opensm_dump,
            ..self.clone()
        }
    }

    /// The forms of the tables `out_dir` holds besides the compact set.
    pub fn export(&self) -> fabric::formats::Export {
        fabric::formats::Export {
            opensm_dump: self.opensm_dump,
        }
    }

    /// How this service talks gRPC (`check` already refused a config
    /// that names neither TLS nor `insecure = true`).
    pub fn transport(&self) -> ibtls::Transport {
        ibtls::Transport::of_checked(self.tls.as_ref(), self.insecure)
    }

    /// Where this agent's routings run: on `workers` or those registered in
    /// `[workers_store]`, else here.
    pub fn executor(&self) -> worker::exec::Executor {
        use worker::exec::{Executor, Workers};
        let workers = match (&self.workers_store, self.workers.is_empty()) {
            (Some(sc), _) => Workers::Registered(sc.clone()),
            (None, false) => Workers::Named(self.workers.clone()),
            (None, true) => return Executor::here(),
        };
        Executor::new(workers, self.transport(), Default::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_and_the_problem() {
        let ok = "insecure = true\nagent_id = \"a\"\nsubnet_prefix = \"0xfec0000000000001\"\ntopology = \"t.net\"\n";
        let c = AgentConfig::parse(ok, "a.toml").expect("valid");
        assert_eq!(c.subnet_prefix, 0xfec0_0000_0000_0001);
        assert_eq!(c.engine, None, "chosen from the topology");
        let e =
            AgentConfig::parse(&format!("{ok}engine = \"nope\"\n"), "a.toml").expect_err("engine");
        assert!(
            e.to_string().starts_with("a.toml: ") && e.to_string().contains("nope"),
            "{e}"
        );
        let e =
            AgentConfig::parse(&format!("{ok}colour = 1\n"), "a.toml").expect_err("unknown key");
        assert!(e.to_string().contains("line 5"), "{e}");
        let e = AgentConfig::parse(&ok.replace("0xfec0000000000001", "zz"), "a.toml")
            .expect_err("prefix");
        assert!(e.to_string().contains("subnet_prefix"), "{e}");
    }

    #[test]
    fn typed_fields_and_ranges() {
        let ok = "insecure = true\nagent_id = \"a\"\nsubnet_prefix = \"0xfec0000000000001\"\ntopology = \"t.net\"\n";
        let c = AgentConfig::parse(
            &format!("{ok}engine = \"dfdn\"\nbase = \"sssp\"\nsssp_streams = 16\n"),
            "a.toml",
        )
        .expect("valid");
        assert_eq!(
            (c.engine, c.base, c.sssp_streams),
            (Some(EngineKind::Dfdn), Some(Base::Sssp), 16)
        );
        assert_eq!(
            AgentConfig::parse(ok, "a.toml")
                .expect("valid")
                .sssp_streams,
            0
        );
        let e = AgentConfig::parse(&format!("{ok}sssp_streams = -1\n"), "a.toml")
            .expect_err("negative streams");
        assert!(e.to_string().contains("sssp_streams"), "{e}");
        let c =
            AgentConfig::parse(&format!("{ok}dqr_detours = \"mesh\"\n"), "a.toml").expect("valid");
        assert_eq!(c.dqr_detours, Some(fabric::dqr::Detours::Mesh));
        let c = AgentConfig::parse(ok, "a.toml").expect("valid");
        assert_eq!(c.dqr_detours, None);
        let e = AgentConfig::parse(&format!("{ok}dqr_detours = \"square\"\n"), "a.toml")
            .expect_err("detours");
        assert!(
            e.to_string().contains("line 5") && e.to_string().contains("square"),
            "{e}"
        );
        let e = AgentConfig::parse(&format!("{ok}base = \"fast\"\n"), "a.toml").expect_err("base");
        assert!(
            e.to_string().contains("line 5") && e.to_string().contains("fast"),
            "{e}"
        );
        let e = AgentConfig::parse(&format!("{ok}max_vls = 16\n"), "a.toml").expect_err("vls");
        assert_eq!(e.to_string(), "a.toml: max_vls 16 is outside 1..=15");
        let e = AgentConfig::parse(&ok.replace("\"a\"", "\" \""), "a.toml").expect_err("id");
        assert_eq!(e.to_string(), "a.toml: agent_id is empty");
    }

    #[test]
    fn a_config_must_say_tls_or_insecure_and_tls_paths_follow_the_file() {
        let bare = "agent_id = \"a\"\nsubnet_prefix = \"0x1\"\ntopology = \"t.net\"\n";
        let e = AgentConfig::parse(bare, "a.toml").expect_err("no transport");
        assert!(e.to_string().contains("insecure = true"), "{e}");
        let tls = "[tls]\nca = \"ca.pem\"\ncert = \"a.pem\"\nkey = \"a-key.pem\"\n";
        let e = AgentConfig::parse(&format!("insecure = true\n{bare}{tls}"), "a.toml")
            .expect_err("both");
        assert!(e.to_string().contains("both"), "{e}");
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("a.toml");
        std::fs::write(&p, format!("{bare}{tls}")).expect("write");
        let c = AgentConfig::load(&p).expect("tls");
        match c.transport() {
            ibtls::Transport::Tls(s) => assert_eq!(s.ca, d.path().join("ca.pem")),
            t => panic!("{t:?}"),
        }
    }
}
