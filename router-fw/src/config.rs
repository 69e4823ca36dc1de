//! `ibfabric router --config FILE` (TOML):
//!
//! ```toml
//! router_guid = "0x0004000000000000"   # node GUID of the router
//! listen = "127.0.0.1:7300"            # RouterFw service
//! controllers = ["http://127.0.0.1:7100", "http://127.0.0.1:7101"]
//! ports = 6                            # optional: refuse tables naming other ports
//! ```

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::Path;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    pub router_guid: String,
    pub listen: SocketAddr,
    #[serde(default)]
    pub controllers: Vec<String>,
    #[serde(default)]
    pub ports: u8,
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
    Parse { path: String, message: String },
}

impl RouterConfig {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: p.clone(),
            source,
        })?;
        Self::parse(&text, &p)
    }

    /// Parses config text; `origin` names it in errors (TOML errors carry
    /// line and column).
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let c: RouterConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_string(),
            message: e.to_string(),
        })?;
        c.guid().map_err(|message| ConfigError::Parse {
            path: origin.to_string(),
            message,
        })?;
        Ok(c)
    }

    pub fn guid(&self) -> Result<u64, String> {
        fabric::formats::parse_hex_u64(&self.router_guid)
            .ok_or_else(|| format!("router_guid '{}' is not a hex GUID", self.router_guid))
    }
}
