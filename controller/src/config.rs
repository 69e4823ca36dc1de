//! `ibfabric controller --config FILE` (TOML):
//!
//! ```toml
//! id = "ctl-a"                      # unique per controller instance
//! listen = "127.0.0.1:7100"
//! algorithm = "prefix"              # inter-subnet algorithm: prefix, issr or isfr
//! lease_seconds = 10                # agents report at least every lease/3
//! metrics_listen = "127.0.0.1:9464" # optional: Prometheus /metrics (plain HTTP)
//! status_page = false               # GET /status there too (loopback metrics_listen only)
//! # status_listen = "0.0.0.0:9443"  # GET /status over HTTPS, mutual TLS, operator certificates
//!
//! [store]                           # optional; default: in-memory
//! kind = "etcd"                     # "memory" or "etcd"
//! # state_file = "state.db"         # memory only: keep the state across restarts
//! # insecure = true                 # etcd in plaintext; else [store.tls]:
//! [store.tls]                       # etcd client certificate (etcd --client-cert-auth)
//! ca = "etcd-ca.pem"
//! cert = "controller.pem"
//! key = "controller-key.pem"
//! endpoints = ["http://127.0.0.1:2379"]
//! prefix = "/ibfabric/prod/"        # key namespace
//! election_ttl_seconds = 2          # leader lease in etcd
//!
//! [limits]                          # optional; defaults fit 64 subnets x 48k LIDs
//! max_subnets = 64
//! max_end_ports = 49151             # per report
//! max_router_ports = 4096           # per report
//! max_watch_streams_per_client = 8
//! max_message_bytes = 67108864      # gRPC messages, both directions
//! rpc_timeout_seconds = 30          # deadline of every unary call
//! push_part_bytes = 4194304         # largest pushed part (tables travel in parts)
//! heartbeat_ms = 1000               # push streams beat this often; receivers leave
//!                                   # a controller silent for three beats
//! ```

use fabric::intersubnet::AlgorithmKind;
use serde::Deserialize;
use settings::Invalid;
pub use settings::{ConfigError, ConfigFile};
use std::net::SocketAddr;
pub use store::{StoreConfig, StoreKind};

/// How long an agent that stopped reporting still holds its subnet, when
/// the config does not say.
pub const DEFAULT_LEASE_SECONDS: u64 = 10;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerConfig {
    /// `[tls]`: this service's certificate, key and the CA (mutual TLS).
    #[serde(default)]
    pub tls: Option<ibtls::TlsSettings>,
    /// Plaintext without authentication; only when said explicitly.
    #[serde(default)]
    pub insecure: bool,
    pub id: String,
    pub listen: SocketAddr,
    /// Prometheus metrics over plain HTTP (`GET /metrics`) on this address;
    /// off unless given.
    #[serde(default)]
    pub metrics_listen: Option<SocketAddr>,
    /// A read-only status page (`GET /status`: subnets, routers, versions
    /// and what lags) beside the metrics. The page has no TLS, so it is
    /// served only when `metrics_listen` is a loopback address.
    #[serde(default)]
    pub status_page: bool,
    /// The status page over HTTPS on this address, with the controller's
    /// own certificate and mutual TLS: only clients with a certificate of
    /// the fabric's CA naming an operator (`ibfabric certs issue
    /// operator/<name>`) or a controller get it. Needs `[tls]`.
    #[serde(default)]
    pub status_listen: Option<SocketAddr>,
    #[serde(default = "default_algorithm")]
    pub algorithm: AlgorithmKind,
    #[serde(default = "default_lease")]
    pub lease_seconds: u64,
    #[serde(default)]
    pub store: StoreConfig,
    #[serde(default)]
    pub limits: LimitsConfig,
}

/// `[limits]`: what clients may make the controller hold, and the bounds
/// of its gRPC side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    pub max_subnets: usize,
    pub max_end_ports: usize,
    pub max_router_ports: usize,
    pub max_watch_streams_per_client: usize,
    pub max_message_bytes: usize,
    pub rpc_timeout_seconds: u64,
    pub push_part_bytes: usize,
    pub heartbeat_ms: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let l = crate::state::Limits::default();
        let b = crate::service::Bounds::default();
        Self {
            max_subnets: l.max_subnets,
            max_end_ports: l.max_end_ports,
            max_router_ports: l.max_router_ports,
            max_watch_streams_per_client: b.max_streams_per_client,
            max_message_bytes: b.max_message_bytes,
            rpc_timeout_seconds: b.rpc_timeout.as_secs(),
            push_part_bytes: b.push_part_bytes,
            heartbeat_ms: b.heartbeat.as_millis() as u64,
        }
    }
}

impl LimitsConfig {
    pub fn state(&self) -> crate::state::Limits {
        crate::state::Limits {
            max_subnets: self.max_subnets,
            max_end_ports: self.max_end_ports,
            max_router_ports: self.max_router_ports,
        }
    }

    pub fn bounds(&self) -> crate::service::Bounds {
        crate::service::Bounds {
            max_message_bytes: self.max_message_bytes,
            max_streams_per_client: self.max_watch_streams_per_client,
            rpc_timeout: std::time::Duration::from_secs(self.rpc_timeout_seconds),
            push_part_bytes: self.push_part_bytes,
            heartbeat: std::time::Duration::from_millis(self.heartbeat_ms),
            ..crate::service::Bounds::default()
        }
    }
}

fn default_algorithm() -> AlgorithmKind {
    AlgorithmKind::Prefix
}
fn default_lease() -> u64 {
    DEFAULT_LEASE_SECONDS
}

impl ConfigFile for ControllerConfig {
    fn check(&self) -> Result<(), Invalid> {
        ibtls::Transport::from_config(self.tls.clone(), self.insecure)
            .map_err(|e| Invalid(e.to_string()))?;
        if self.lease_seconds == 0 {
            return Err(Invalid("lease_seconds must be at least 1".into()));
        }
        if self.status_page && !self.metrics_listen.is_some_and(|a| a.ip().is_loopback()) {
            return Err(Invalid(
                "status_page needs metrics_listen on a loopback address (127.0.0.1 or ::1): \
                 the page is plain HTTP; reach it through an SSH tunnel or a TLS proxy"
                    .into(),
            ));
        }
        if self.status_listen.is_some() && self.tls.is_none() {
            return Err(Invalid(
                "status_listen serves the page over mutual TLS and needs [tls]; \
                 with insecure = true use status_page on a loopback metrics_listen"
                    .into(),
            ));
        }
        let l = &self.limits;
        if l.max_subnets == 0
            || l.max_end_ports == 0
            || l.max_watch_streams_per_client == 0
            || l.rpc_timeout_seconds == 0
        {
            return Err(Invalid(
                "limits: max_subnets, max_end_ports, max_watch_streams_per_client and rpc_timeout_seconds must be at least 1".into(),
            ));
        }
        if l.max_message_bytes < 4096 || l.push_part_bytes < proto::chunk::MIN_PART_BYTES {
            return Err(Invalid(
                "limits.max_message_bytes and limits.push_part_bytes must be at least 4096".into(),
            ));
        }
        if !(100..=60_000).contains(&l.heartbeat_ms) {
            return Err(Invalid(
                "limits.heartbeat_ms must be between 100 and 60000".into(),
            ));
        }
        Ok(())
    }

    fn paths_mut(&mut self) -> Vec<&mut std::path::PathBuf> {
        let (state_file, etcd_tls) = match &mut self.store.kind {
            StoreKind::Memory { state_file } => (state_file.as_mut(), None),
            StoreKind::Etcd { tls, .. } => (None, tls.as_mut()),
        };
        self.tls
            .iter_mut()
            .chain(etcd_tls)
            .flat_map(ibtls::TlsSettings::paths_mut)
            .chain(state_file)
            .collect()
    }
}

impl ControllerConfig {
    /// How this service talks gRPC (`check` already refused a config
    /// that names neither TLS nor `insecure = true`).
    pub fn transport(&self) -> ibtls::Transport {
        ibtls::Transport::of_checked(self.tls.as_ref(), self.insecure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = "insecure = true\nid = \"c\"\nlisten = \"127.0.0.1:1\"\n";

    #[test]
    fn defaults_and_typed_fields() {
        let c = ControllerConfig::parse(OK, "c.toml").expect("valid");
        assert_eq!(c.algorithm, AlgorithmKind::Prefix);
        assert_eq!(c.lease_seconds, DEFAULT_LEASE_SECONDS);
        assert_eq!(c.store, StoreConfig::default());
        let c = ControllerConfig::parse(
            &format!(
                "{OK}algorithm = \"isfr\"\n[store]\nkind = \"etcd\"\n\
                 endpoints = [\"http://e:2379\"]\nprefix = \"/x/\"\ninsecure = true\n"
            ),
            "c.toml",
        )
        .expect("etcd");
        assert_eq!(c.algorithm, AlgorithmKind::Isfr);
        assert_eq!(
            c.store.kind,
            StoreKind::Etcd {
                endpoints: vec!["http://e:2379".into()],
                tls: None,
            }
        );
        // etcd needs TLS or an explicit insecure, like the gRPC links.
        let e = ControllerConfig::parse(
            &format!("{OK}[store]\nkind = \"etcd\"\nendpoints = [\"https://e:2379\"]\n"),
            "c.toml",
        )
        .expect_err("neither");
        assert!(e.to_string().contains("store (etcd)"), "{e}");
        let t = ControllerConfig::parse(
            &format!(
                "{OK}[store]\nkind = \"etcd\"\nendpoints = [\"https://e:2379\"]\n\
                 [store.tls]\nca = \"ca.pem\"\ncert = \"c.pem\"\nkey = \"c-key.pem\"\n"
            ),
            "c.toml",
        )
        .expect("etcd over TLS");
        assert!(matches!(t.store.kind, StoreKind::Etcd { tls: Some(_), .. }));
        assert_eq!(
            (c.store.prefix.as_str(), c.store.election_ttl_seconds),
            ("/x/", 2)
        );
    }

    #[test]
    fn unknown_names_are_refused_with_the_file_line_and_value() {
        for (text, bad, line) in [
            (
                format!("{OK}algorithm = \"shortest\"\n"),
                "shortest",
                "line 4",
            ),
            (
                format!("{OK}[store]\nkind = \"zookeeper\"\n"),
                "zookeeper",
                "line 5",
            ),
            (
                format!("{OK}[store]\nendpoint = \"e\"\n"),
                "endpoint",
                "line 5",
            ),
        ] {
            let e = ControllerConfig::parse(&text, "c.toml").expect_err(bad);
            let m = e.to_string();
            assert!(
                m.starts_with("c.toml: ") && m.contains(bad) && m.contains(line),
                "{m}"
            );
        }
        let e = ControllerConfig::parse(&format!("{OK}[store]\nkind = \"etcd\"\n"), "c.toml")
            .expect_err("etcd needs endpoints");
        assert!(e.to_string().contains("needs store.endpoints"), "{e}");
        let e = ControllerConfig::parse(&format!("{OK}lease_seconds = 0\n"), "c.toml")
            .expect_err("lease");
        assert_eq!(e.to_string(), "c.toml: lease_seconds must be at least 1");
        // The status page is plain HTTP: loopback only.
        let e = ControllerConfig::parse(
            &format!("{OK}status_page = true\nmetrics_listen = \"0.0.0.0:9464\"\n"),
            "c.toml",
        )
        .expect_err("not loopback");
        assert!(
            e.to_string()
                .contains("status_page needs metrics_listen on a loopback"),
            "{e}"
        );
        assert!(ControllerConfig::parse(&format!("{OK}status_page = true\n"), "c.toml").is_err());
        let c = ControllerConfig::parse(
            &format!("{OK}status_page = true\nmetrics_listen = \"127.0.0.1:9464\"\n"),
            "c.toml",
        )
        .expect("loopback");
        assert!(c.status_page);
        // Over HTTPS it needs the controller's TLS.
        let e =
            ControllerConfig::parse(&format!("{OK}status_listen = \"0.0.0.0:9443\"\n"), "c.toml")
                .expect_err("no TLS");
        assert!(
            e.to_string()
                .contains("status_listen serves the page over mutual TLS"),
            "{e}"
        );
    }
}
