//! `ibfabric router --config FILE` (TOML):
//!
//! ```toml
//! router_guid = "0x0004000000000000"   # node GUID of the router
//! listen = "127.0.0.1:7300"            # RouterFw service
//! controllers = ["http://127.0.0.1:7100", "http://127.0.0.1:7101"]
//! ports = 6                            # optional: refuse tables naming other ports
//! metrics_listen = "127.0.0.1:9466"    # optional: Prometheus /metrics (plain HTTP)
//! ```

use serde::Deserialize;
pub use settings::{ConfigError, ConfigFile};
use std::net::SocketAddr;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    /// `[tls]`: this service's certificate, key and the CA (mutual TLS).
    #[serde(default)]
    pub tls: Option<ibtls::TlsSettings>,
    /// Plaintext without authentication; only when said explicitly.
    #[serde(default)]
    pub insecure: bool,
    #[serde(deserialize_with = "settings::hex_u64")]
    pub router_guid: u64,
    pub listen: SocketAddr,
    /// Prometheus metrics over plain HTTP (`GET /metrics`) on this address;
    /// off unless given.
    #[serde(default)]
    pub metrics_listen: Option<SocketAddr>,
    #[serde(default)]
    pub controllers: Vec<String>,
    #[serde(default)]
    pub ports: u8,
}

impl ConfigFile for RouterConfig {
    fn check(&self) -> Result<(), settings::Invalid> {
        use settings::Invalid;
        ibtls::Transport::from_config(self.tls.clone(), self.insecure)
            .map_err(|e| Invalid(e.to_string()))?;
        Ok(())
    }

    fn paths_mut(&mut self) -> Vec<&mut std::path::PathBuf> {
        self.tls
            .iter_mut()
            .flat_map(ibtls::TlsSettings::paths_mut)
            .collect()
    }
}

impl RouterConfig {
    /// How this service talks gRPC (`check` already refused a config
    /// that names neither TLS nor `insecure = true`).
    pub fn transport(&self) -> ibtls::Transport {
        ibtls::Transport::of_checked(self.tls.as_ref(), self.insecure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guid_is_hex_and_errors_name_the_file_and_line() {
        let c = RouterConfig::parse(
            "router_guid = \"0x0004000000000001\"\nlisten = \"127.0.0.1:1\"\ninsecure = true\n",
            "r.toml",
        )
        .expect("valid");
        assert_eq!((c.router_guid, c.ports), (0x0004_0000_0000_0001, 0));
        let e = RouterConfig::parse(
            "listen = \"127.0.0.1:1\"\nrouter_guid = \"0xfffffffffffffffff\"\ninsecure = true\n",
            "r.toml",
        )
        .expect_err("17 digits");
        let m = e.to_string();
        assert!(m.starts_with("r.toml: ") && m.contains("line 2"), "{m}");
    }
}
