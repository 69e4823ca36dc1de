//! `ibfabric worker --config FILE` (TOML):
//!
//! ```toml
//! name = "w1"                          # the name its certificate carries (ibfabric://worker/w1)
//! listen = "0.0.0.0:7400"              # Worker service
//! max_jobs = 2                         # optional: jobs held at once (oldest dropped)
//! metrics_listen = "127.0.0.1:9467"    # optional: Prometheus /metrics (plain HTTP)
//!
//! [tls]                                # or insecure = true
//! ca = "ca.pem"
//! cert = "worker-w1.pem"
//! key = "worker-w1-key.pem"
//! ```

use serde::Deserialize;
use settings::Invalid;
pub use settings::{ConfigError, ConfigFile};
use std::net::SocketAddr;

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
        if self.max_jobs == 0 {
            return Err(Invalid(
                "max_jobs is 0: a worker holds at least one job".into(),
            ));
        }
        Ok(())
    }
    fn paths_mut(&mut self) -> Vec<&mut std::path::PathBuf> {
        self.tls
            .iter_mut()
            .flat_map(ibtls::TlsSettings::paths_mut)
            .collect()
    }
}

impl WorkerConfig {
    pub fn transport(&self) -> ibtls::Transport {
        ibtls::Transport::of_checked(self.tls.as_ref(), self.insecure)
    }
}
