//! `ibfabric worker --config FILE` (TOML):
//!
//! ```toml
//! name = "w1"                          # the name its certificate carries (ibfabric://worker/w1)
//! listen = "0.0.0.0:7400"              # Worker service
//! max_jobs = 2                         # optional: jobs held per caller (oldest idle one dropped; none in use)
//! metrics_listen = "127.0.0.1:9467"    # optional: Prometheus /metrics (plain HTTP)
//! coordinators = ["ibfabric://agent/0xfec0000000000001"]   # optional: agents that may
//!                                      # route or verify on this worker ("ibfabric://agent/*":
//!                                      # every agent); controllers and worker identities (what
//!                                      # operators' commands present) always may, routers never
//!
//! advertise = "https://w1:7400"        # with [store]: the URL coordinators reach it at
//!
//! [tls]                                # or insecure = true
//! ca = "ca.pem"
//! cert = "worker-w1.pem"
//! key = "worker-w1-key.pem"
//!
//! [store]                              # optional: register in etcd under a lease
//! kind = "etcd"                        # (the controller's [store] table; etcd only)
//! endpoints = ["https://etcd:2379"]
//! prefix = "/ibfabric/prod/"
//! election_ttl_seconds = 2             # a dead worker's key goes after this long
//! [store.tls]
//! ca = "etcd-ca.pem"
//! cert = "worker-w1.pem"
//! key = "worker-w1-key.pem"
//! ```

use serde::Deserialize;
use settings::Invalid;
pub use settings::{ConfigError, ConfigFile};
use std::net::SocketAddr;
use store::StoreConfig;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerConfig {
    #[serde(default)]
    pub tls: Option<ibtls::TlsSettings>,
    #[serde(default)]
    pub insecure: bool,
    pub name: String,
    pub listen: SocketAddr,
    #[serde(default = "default_jobs")]
    pub max_jobs: usize,
    #[serde(default)]
    pub metrics_listen: Option<SocketAddr>,
    /// Agents (identity URIs, or `ibfabric://agent/*`) that may load jobs
    /// and ask for parts, besides controllers and worker identities.
    #[serde(default)]
    pub coordinators: Vec<String>,
    /// The URL coordinators reach this worker at, as registered in the store.
    #[serde(default)]
    pub advertise: Option<String>,
    /// Where the worker registers under a lease, so that coordinators find
    /// it and notice when it is gone.
    #[serde(default)]
    pub store: Option<StoreConfig>,
}

fn default_jobs() -> usize {
    2
}

impl ConfigFile for WorkerConfig {
    fn check(&self) -> Result<(), Invalid> {
        ibtls::Transport::from_config(self.tls.clone(), self.insecure)
            .map_err(|e| Invalid(e.to_string()))?;
        if self.name.trim().is_empty() {
            return Err(Invalid("name is empty".into()));
        }
        for c in &self.coordinators {
            let agent = c == "ibfabric://agent/*"
                || matches!(
                    c.parse::<ibtls::Identity>(),
                    Ok(ibtls::Identity::Agent { .. })
                );
            if !agent {
                return Err(Invalid(format!(
                    "coordinators: '{c}' is not an agent identity (ibfabric://agent/0x<16 hex digits>, or ibfabric://agent/* for every agent)"
                )));
            }
        }
        if self.max_jobs == 0 {
            return Err(Invalid(
                "max_jobs is 0: a worker holds at least one job".into(),
            ));
        }
        match (&self.store, &self.advertise) {
            (Some(s), _) if !s.shared() => {
                return Err(Invalid(
                    "store.kind must be \"etcd\": a memory store lives in one process, where no coordinator can see it".into(),
                ))
            }
            (Some(_), None) => {
                return Err(Invalid(
                    "[store] needs advertise = \"https://host:port\": the URL coordinators reach this worker at".into(),
                ))
            }
            (_, Some(u)) if !(u.starts_with("https://") || u.starts_with("http://")) => {
                return Err(Invalid(format!(
                    "advertise = \"{u}\": expected https://host:port (http:// with insecure = true)"
                )))
            }
            _ => {}
        }
        Ok(())
    }
    fn paths_mut(&mut self) -> Vec<&mut std::path::PathBuf> {
        let store_tls = self.store.as_mut().and_then(StoreConfig::etcd_tls_mut);
        self.tls
            .iter_mut()
            .chain(store_tls)
            .flat_map(ibtls::TlsSettings::paths_mut)
            .collect()
    }
}

impl WorkerConfig {
    pub fn transport(&self) -> ibtls::Transport {
        ibtls::Transport::of_checked(self.tls.as_ref(), self.insecure)
    }
}
