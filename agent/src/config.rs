//! `ibfabric agent --config FILE` (TOML). Relative paths are taken from
//! the directory of the config file.
//!
//! ```toml
//! agent_id = "subnet0"                  # stable name, one agent per subnet
//! subnet_prefix = "0xfec0000000000001"
//! topology = "subnet0.net"              # ibnetdiscover grammar
//! engine = "ftree"                      # see `ibfabric engines`
//! base = "minhop"                       # optional, for dfdn/dfd2/lash
//! max_vls = 8                           # optional
//! max_sls = 16                          # optional
//! out_dir = "out/subnet0"               # optional: OpenSM dumps for `opensm -R file`,
//!                                       # and the controller's mapping (ibfabric-mapping.txt)
//! mapping_file = "subnet0.map"          # optional: router ports for remote GIDs until the
//!                                       # controller sends a mapping (the paper's Code 1)
//! controllers = ["http://127.0.0.1:7100"]
//! listen = "127.0.0.1:7200"             # optional: Agent.PathQuery service
//! watch_topology = true                 # optional: re-route when the file changes
//! ```

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    pub agent_id: String,
    pub subnet_prefix: String,
    pub topology: PathBuf,
    #[serde(default = "default_engine")]
    pub engine: String,
    #[serde(default)]
    pub base: Option<String>,
    #[serde(default = "default_vls")]
    pub max_vls: u8,
    #[serde(default = "default_sls")]
    pub max_sls: u8,
    #[serde(default)]
    pub out_dir: Option<PathBuf>,
    #[serde(default)]
    pub mapping_file: Option<PathBuf>,
    #[serde(default)]
    pub controllers: Vec<String>,
    #[serde(default)]
    pub listen: Option<SocketAddr>,
    #[serde(default)]
    pub watch_topology: bool,
}

fn default_engine() -> String {
    "minhop".into()
}
fn default_vls() -> u8 {
    8
}
fn default_sls() -> u8 {
    16
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

impl AgentConfig {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: p.clone(),
            source,
        })?;
        let mut c = Self::parse(&text, &p)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        c.topology = dir.join(&c.topology);
        c.out_dir = c.out_dir.map(|o| dir.join(o));
        c.mapping_file = c.mapping_file.map(|o| dir.join(o));
        Ok(c)
    }

    /// Parses and checks config text; `origin` names it in errors (TOML
    /// errors carry line and column).
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: origin.to_string(),
            message,
        };
        let c: AgentConfig = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        c.prefix().map_err(invalid)?;
        fabric::routing::by_name(&c.engine).map_err(|e| invalid(e.to_string()))?;
        if let Some(b) = &c.base {
            b.parse::<fabric::routing::Base>()
                .map_err(|e| invalid(e.to_string()))?;
        }
        if !(1..=15).contains(&c.max_vls) {
            return Err(invalid(format!("max_vls {} is outside 1..=15", c.max_vls)));
        }
        if !(1..=16).contains(&c.max_sls) {
            return Err(invalid(format!("max_sls {} is outside 1..=16", c.max_sls)));
        }
        if c.agent_id.trim().is_empty() {
            return Err(invalid("agent_id is empty".into()));
        }
        Ok(c)
    }

    pub fn prefix(&self) -> Result<u64, String> {
        fabric::formats::parse_hex_u64(&self.subnet_prefix)
            .ok_or_else(|| format!("subnet_prefix '{}' is not a hex prefix", self.subnet_prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_and_the_problem() {
        let ok = "agent_id = \"a\"\nsubnet_prefix = \"0xfec0000000000001\"\ntopology = \"t.net\"\n";
        let c = AgentConfig::parse(ok, "a.toml").expect("valid");
        assert_eq!(c.prefix(), Ok(0xfec0_0000_0000_0001));
        assert_eq!(c.engine, "minhop");
        let e =
            AgentConfig::parse(&format!("{ok}engine = \"nope\"\n"), "a.toml").expect_err("engine");
        assert!(
            e.to_string().starts_with("a.toml: ") && e.to_string().contains("nope"),
            "{e}"
        );
        let e =
            AgentConfig::parse(&format!("{ok}colour = 1\n"), "a.toml").expect_err("unknown key");
        assert!(e.to_string().contains("line 4"), "{e}");
        let e = AgentConfig::parse(&ok.replace("0xfec0000000000001", "zz"), "a.toml")
            .expect_err("prefix");
        assert!(e.to_string().contains("subnet_prefix"), "{e}");
    }
}
