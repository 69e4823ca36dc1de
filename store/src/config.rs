//! `[store]`: the table every role that uses the store shares (the
//! controller's state and election, a worker's registration, a
//! coordinator's or agent's `[workers_store]`).

use serde::Deserialize;
use settings::Invalid;

/// `[store]`: where the leader keeps what it accepted, and the election.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "StoreTable")]
pub struct StoreConfig {
    pub kind: StoreKind,
    /// Key namespace, e.g. `/ibfabric/prod/`: clusters sharing one etcd
    /// stay apart.
    pub prefix: String,
    /// The leader's lease: a dead leader is replaced after about this long.
    pub election_ttl_seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// In this process: a single controller; with a state file its state
    /// (and so its term and versions) survives restarts.
    Memory {
        state_file: Option<std::path::PathBuf>,
    },
    /// Shared by every controller of the cluster, which fail over; over
    /// TLS with a client certificate unless `[store] insecure = true`.
    Etcd {
        endpoints: Vec<String>,
        tls: Option<ibtls::TlsSettings>,
    },
}

impl StoreKind {
    /// The name `kind` takes in the config.
    pub fn name(&self) -> &'static str {
        match self {
            StoreKind::Memory { .. } => "memory",
            StoreKind::Etcd { .. } => "etcd",
        }
    }
}

impl std::fmt::Display for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl StoreConfig {
    /// Whether processes on other hosts can share this store: etcd is, the
    /// memory store lives in one process.
    pub fn shared(&self) -> bool {
        matches!(self.kind, StoreKind::Etcd { .. })
    }

    /// The etcd client certificate settings, whose paths a config file
    /// resolves against its directory.
    pub fn etcd_tls_mut(&mut self) -> Option<&mut ibtls::TlsSettings> {
        match &mut self.kind {
            StoreKind::Etcd { tls, .. } => tls.as_mut(),
            StoreKind::Memory { .. } => None,
        }
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            kind: StoreKind::Memory { state_file: None },
            prefix: default_prefix(),
            election_ttl_seconds: default_ttl(),
        }
    }
}

/// `[store]` as written: `endpoints` sits beside `kind` in the file but
/// belongs to etcd alone, which [`StoreConfig`] says with its type.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreTable {
    #[serde(default)]
    kind: StoreKindName,
    #[serde(default)]
    endpoints: Vec<String>,
    #[serde(default)]
    state_file: Option<std::path::PathBuf>,
    #[serde(default)]
    tls: Option<ibtls::TlsSettings>,
    #[serde(default)]
    insecure: bool,
    #[serde(default = "default_prefix")]
    prefix: String,
    #[serde(default = "default_ttl")]
    election_ttl_seconds: u64,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "lowercase")]
enum StoreKindName {
    #[default]
    Memory,
    Etcd,
}

impl TryFrom<StoreTable> for StoreConfig {
    type Error = Invalid;
    fn try_from(t: StoreTable) -> Result<Self, Invalid> {
        let kind = match t.kind {
            // Endpoints next to kind = "memory" were always ignored; a
            // config switched to memory for a test keeps loading.
            StoreKindName::Memory if t.tls.is_some() || t.insecure => {
                return Err(Invalid(
                    "store.tls and store.insecure are for kind = \"etcd\"".into(),
                ));
            }
            StoreKindName::Memory => StoreKind::Memory {
                state_file: t.state_file,
            },
            StoreKindName::Etcd if t.state_file.is_some() => {
                return Err(Invalid(
                    "store.state_file is for kind = \"memory\"; etcd keeps its own state".into(),
                ));
            }
            StoreKindName::Etcd if t.endpoints.is_empty() => {
                return Err(Invalid(
                    "store.kind = \"etcd\" needs store.endpoints".into(),
                ));
            }
            StoreKindName::Etcd => StoreKind::Etcd {
                tls: match ibtls::Transport::from_config(t.tls, t.insecure) {
                    Ok(ibtls::Transport::Tls(s)) => Some(s),
                    Ok(ibtls::Transport::Insecure) => None,
                    Err(e) => return Err(Invalid(format!("store (etcd): {e}"))),
                },
                endpoints: t.endpoints,
            },
        };
        Ok(Self {
            kind,
            prefix: t.prefix,
            election_ttl_seconds: t.election_ttl_seconds,
        })
    }
}

fn default_prefix() -> String {
    "/ibfabric/default/".into()
}
fn default_ttl() -> u64 {
    2
}
