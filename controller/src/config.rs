//! `ibfabric controller --config FILE` (TOML):
//!
//! ```toml
//! id = "ctl-a"                      # unique per controller instance
//! listen = "127.0.0.1:7100"
//! algorithm = "prefix"              # inter-subnet algorithm
//! lease_seconds = 10                # agents report at least every lease/3
//!
//! [store]                           # optional; default: in-memory
//! kind = "etcd"                     # "memory" or "etcd"
//! endpoints = ["http://127.0.0.1:2379"]
//! prefix = "/ibfabric/prod/"        # key namespace
//! election_ttl_seconds = 2          # leader lease in etcd
//! ```

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::Path;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerConfig {
    pub id: String,
    pub listen: SocketAddr,
    #[serde(default = "default_algorithm")]
    pub algorithm: String,
    #[serde(default = "default_lease")]
    pub lease_seconds: u64,
    #[serde(default)]
    pub store: StoreConfig,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    #[serde(default = "default_kind")]
    pub kind: String,
    #[serde(default)]
    pub endpoints: Vec<String>,
    #[serde(default = "default_prefix")]
    pub prefix: String,
    #[serde(default = "default_ttl")]
    pub election_ttl_seconds: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            kind: default_kind(),
            endpoints: Vec::new(),
            prefix: default_prefix(),
            election_ttl_seconds: default_ttl(),
        }
    }
}

fn default_algorithm() -> String {
    "prefix".into()
}
fn default_lease() -> u64 {
    10
}
fn default_kind() -> String {
    "memory".into()
}
fn default_prefix() -> String {
    "/ibfabric/default/".into()
}
fn default_ttl() -> u64 {
    2
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

impl ControllerConfig {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: p.clone(),
            source,
        })?;
        Self::parse(&text, &p)
    }

    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: origin.to_string(),
            message,
        };
        let c: ControllerConfig = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        fabric::intersubnet::by_name(&c.algorithm).map_err(|e| invalid(e.to_string()))?;
        match c.store.kind.as_str() {
            "memory" => {}
            "etcd" if c.store.endpoints.is_empty() => {
                return Err(invalid(
                    "store.kind = \"etcd\" needs store.endpoints".into(),
                ))
            }
            "etcd" => {}
            k => {
                return Err(invalid(format!(
                    "store.kind '{k}' is not \"memory\" or \"etcd\""
                )))
            }
        }
        if c.lease_seconds == 0 {
            return Err(invalid("lease_seconds must be at least 1".into()));
        }
        Ok(c)
    }
}
